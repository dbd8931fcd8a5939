r"""Block coordinate descent on a working set for :func:`mklkit._jit.bcd.solve_ws`: the
passes (:func:`_epoch`), their driver with Anderson extrapolation and the working set's
violation; the ``ST_*`` counters and status codes of a solve."""

from collections import namedtuple

import numpy as np
from numba import njit

from .envelope import FLAGS, gather, loss_terms, subset, sum_value
from .group_blocks import anderson, block_grad, block_image, block_min, pack, prox_step, reg_sum, unpack, ws_rows

# stats layout (written by solve_ws)
ST_EPOCHS = 0
ST_NEWTON = 1
ST_LINE_SEARCH = 2  # step halvings of the line search
ST_ANDERSON = 3  # accepted extrapolations
ST_BACKTRACK = 4  # block curvature increases
ST_STATUS = 5
ST_VIOLATION = 6  # last violation of the working set
ST_DECREASE = 7  # objective decrease over the call
ST_LEN = 8
# status codes
OK = 0
NUMERICAL = 1  # a non-finite value appeared
NO_DESCENT = 2  # the line search found no decrease (rounding level)
CAPPED = 3  # the epoch or Newton-step cap was reached


#: What one call of :func:`_coordinate_descent` works on: ``model`` (descent on the model
#: :math:`r = r_0 + h\circ(z - z_0)`, else on the loss; ``check``: steps checked on it), the
#: blocks' curvatures ``lam``, the gradient ``r`` kept up to date, the Hessians ``Hbuf`` of the
#: blocks minimized exactly (block ``k`` at ``hoff[k]``, -1: none).
Sweep = namedtuple("Sweep", ["model", "check", "tol", "lam", "r", "r0", "h", "z0", "Hbuf", "hoff", "allidx"])
#: Buffers of an epoch: a block's gradient ``g``, step ``d`` and image ``w`` (N,; zero between
#: steps), ``one`` (1,) and ``work`` (4, r) for :func:`~mklkit._jit.group_blocks.block_min`.
Scratch = namedtuple("Scratch", ["g", "d", "w", "one", "work"])


@njit(cache=True)
def _copy(dst, src):  # pragma: no cover - jitted
    # ``dst[:] = src`` would compile its shape-mismatch message into every caller
    for i in range(src.shape[0]):
        dst[i] = src[i]


@njit(cache=True)
def _refresh_true(smp, sidx, z, loss, r):  # pragma: no cover - jitted
    r""":math:`r_i = \ell'(y_i, z_i)` on the samples ``sidx``."""
    _, d1, _ = loss_terms(subset(smp, sidx), gather(z, sidx), loss, FLAGS[0], FLAGS[0])
    for j in range(sidx.shape[0]):
        r[sidx[j]] = d1[j]


@njit(cache=True)
def _epoch(opts, bank, smp, loss, reg, st, sweep, scr):  # pragma: no cover - jitted
    r"""One pass of block coordinate descent over the working set, then the bias.

    Block step :math:`\beta_m^+ = \mathrm{prox}(\|v\| \mid \tilde g_{C/\lambda_m})\,v/\|v\|`,
    :math:`v = \beta_m - g_m/\lambda_m`; on the model accepted when
    :math:`d^\top L_m^\top\mathrm{diag}(h)L_md \le \lambda_m\|d\|^2` (else :math:`\lambda_m`
    grows), on the loss with ``check`` when it passes the sufficient-decrease test; a block
    with its Hessian in ``Hbuf`` is minimized exactly (:func:`block_min`).  Returns the
    violation of the pass (``nan`` on a non-finite value).
    """
    model, check, lam, r, h, Hbuf, hoff = sweep.model, sweep.check, sweep.lam, sweep.r, sweep.h, sweep.Hbuf, sweep.hoff
    ws, beta, z, bias, stats = st
    g, d, w, one, _ = scr
    starts = bank.starts
    C = opts.C
    N = z.shape[0]
    viol = 0.0
    for k in range(ws.shape[0]):
        m = ws[k]
        s = starts[m]
        e = starts[m + 1]
        if e == s or lam[k] <= 0.0:
            continue
        sidx = bank.supp_idx[bank.supp_ptr[m] : bank.supp_ptr[m + 1]] if bank.sparse else sweep.allidx
        block_grad(bank, s, e, r, g)
        lamk = lam[k]
        if model and hoff[k] >= 0:
            rk = e - s
            H = Hbuf[hoff[k] : hoff[k] + rk * rk].reshape((rk, rk))
            dn2 = block_min(beta, s, e, g, H, lamk, C, reg, one, d, scr.work, opts.max_inner)
            if not np.isfinite(dn2):
                return np.nan
            if dn2 == 0.0:
                continue
            block_image(bank, s, e, d, w)
            for a in range(s, e):
                beta[a] += d[a - s]
            for i in sidx:
                z[i] += w[i]
                r[i] += h[i] * w[i]
                w[i] = 0.0
            viol = max(viol, lamk * np.sqrt(dn2))
            continue
        for attempt in range(64):
            dn2 = prox_step(beta, s, e, g, lamk, C, reg, one, d)
            gd = 0.0
            for a in range(e - s):
                gd += g[a] * d[a]
            if dn2 == 0.0:
                break
            if not np.isfinite(dn2):
                return np.nan
            block_image(bank, s, e, d, w)
            ok = True
            if model:
                q = 0.0
                for i in sidx:
                    q += h[i] * w[i] * w[i]
                if q > lamk * dn2 * (1.0 + 1e-10):
                    ok = False
                    lamk = max(2.0 * lamk, q / dn2)
            elif check:
                zs = gather(z, sidx)
                sub = subset(smp, sidx)
                f0 = sum_value(sub, zs, loss)
                for j in range(sidx.shape[0]):
                    zs[j] += w[sidx[j]]
                f1 = sum_value(sub, zs, loss)
                slack = 1e-13 * (abs(f0) + abs(gd))
                if not (f1 - f0 <= gd + 0.5 * lamk * dn2 + slack):
                    ok = False
                    lamk *= 2.0
            if not ok:
                stats[ST_BACKTRACK] += 1.0
                for i in sidx:
                    w[i] = 0.0
                continue
            for a in range(s, e):
                beta[a] += d[a - s]
            if model:
                for i in sidx:
                    z[i] += w[i]
                    r[i] += h[i] * w[i]
                    w[i] = 0.0
            else:
                for i in sidx:
                    z[i] += w[i]
                    w[i] = 0.0
                _refresh_true(smp, sidx, z, loss, r)
            viol = max(viol, lamk * np.sqrt(dn2))
            break
        lam[k] = lamk
    if opts.with_bias:
        gb = np.sum(r)
        viol = max(viol, abs(gb))
        if model:
            hb = np.sum(h)
            if hb > 0.0 and gb != 0.0:
                db = -gb / hb
                bias[0] += db
                for i in range(N):
                    z[i] += db
                    r[i] += h[i] * db
        elif gb != 0.0:
            # Newton step on the bias with the sufficient-decrease test of the loss
            _, _, h2 = loss_terms(smp, z, loss, FLAGS[0], FLAGS[1])
            hb = np.sum(h2)
            cb = hb if hb > 0.0 else opts.lip * N
            if not (cb > 0.0 and np.isfinite(cb)):
                cb = N
            f0 = sum_value(smp, z, loss)
            zt = np.empty(N)
            for attempt in range(60):
                db = -gb / cb
                for i in range(N):
                    zt[i] = z[i] + db
                f1 = sum_value(smp, zt, loss)
                if f1 - f0 <= gb * db + 0.5 * cb * db * db + 1e-13 * abs(f0):
                    bias[0] += db
                    _copy(z, zt)
                    break
                cb *= 2.0
            _refresh_true(smp, sweep.allidx, z, loss, r)
    return viol


@njit(cache=True)
def _model_value(r0, h, z, z0, beta, rows, wseg, C, reg):  # pragma: no cover - jitted
    r""":math:`r_0^\top\delta + \tfrac12\delta^\top\mathrm{diag}(h)\delta`, :math:`\delta = z - z_0`,
    plus the regularizer on the working set."""
    acc = 0.0
    for i in range(z.shape[0]):
        dz = z[i] - z0[i]
        acc += dz * (r0[i] + 0.5 * h[i] * dz)
    return acc + reg_sum(beta, rows, wseg, C, reg)


@njit(cache=True)
def _true_value(smp, z, loss, beta, rows, wseg, C, reg):  # pragma: no cover - jitted
    r""":math:`\sum_i\ell(y_i, z_i)` plus the regularizer on the working set."""
    return sum_value(smp, z, loss) + reg_sum(beta, rows, wseg, C, reg)


@njit(cache=True)
def _coordinate_descent(opts, bank, smp, loss, reg, st, sweep):  # pragma: no cover - jitted
    r"""Epochs of :func:`_epoch` until the violation is at most ``sweep.tol`` or
    ``opts.max_epochs``; every ``opts.anderson + 1`` epochs the extrapolated point
    (:func:`anderson`) is kept when it lowers the objective (the model's with
    ``sweep.model``).  Returns the last violation and whether the cap was hit."""
    model, r, r0, h, z0 = sweep.model, sweep.r, sweep.r0, sweep.h, sweep.z0
    ws, beta, z, bias, _ = st
    C = opts.C
    n_and = opts.anderson
    N = z.shape[0]
    rows, wseg = ws_rows(ws, bank.starts)
    D = rows.shape[0] + 1
    rmax = 1
    for k in range(ws.shape[0]):
        rmax = max(rmax, wseg[k + 1] - wseg[k])
    scr = Scratch(np.empty(rmax), np.empty(rmax), np.zeros(N), np.empty(1), np.empty((4, rmax)))
    KA = n_and + 1
    Xb = np.empty((KA, D)) if n_and > 0 else np.empty((0, D))
    Xz = np.empty((KA, N)) if n_and > 0 else np.empty((0, N))
    fill = 0
    viol = np.inf
    for epoch in range(opts.max_epochs):
        viol = _epoch(opts, bank, smp, loss, reg, st, sweep, scr)
        st.stats[ST_EPOCHS] += 1.0
        if not np.isfinite(viol):
            return np.nan, False
        if viol <= sweep.tol:
            return viol, False
        if n_and == 0:
            continue
        pack(beta, bias[0], rows, Xb[fill])
        _copy(Xz[fill], z)
        fill += 1
        if fill < KA:
            continue
        fill = 0
        c = anderson(Xb)
        if c.shape[0] == 0:
            continue
        xb = np.zeros(D)
        xz = np.zeros(N)
        for j in range(n_and):
            xb += c[j] * Xb[j + 1]
            xz += c[j] * Xz[j + 1]
        if model:
            f_cur = _model_value(r0, h, z, z0, beta, rows, wseg, C, reg)
        else:
            f_cur = _true_value(smp, z, loss, beta, rows, wseg, C, reg)
        keep_b = np.empty(D)
        pack(beta, bias[0], rows, keep_b)
        bias[0] = unpack(xb, rows, beta)
        if model:
            f_acc = _model_value(r0, h, xz, z0, beta, rows, wseg, C, reg)
        else:
            f_acc = _true_value(smp, xz, loss, beta, rows, wseg, C, reg)
        if f_acc < f_cur:
            st.stats[ST_ANDERSON] += 1.0
            _copy(z, xz)
            if model:
                for i in range(N):
                    r[i] = r0[i] + h[i] * (z[i] - z0[i])
            else:
                _refresh_true(smp, sweep.allidx, z, loss, r)
        else:
            bias[0] = unpack(keep_b, rows, beta)
    return viol, True


@njit(cache=True)
def _ws_violation(opts, bank, reg, st, lam, r):  # pragma: no cover - jitted
    r"""Fixed-point violation of the working set and bias at the gradient ``r``, for block steps
    of curvature :math:`\max(\lambda_m, \text{scale}\,\|L_m\|_2^2)` (as the outer scores)."""
    ws = st.ws
    starts = bank.starts
    rmax = 1
    for k in range(ws.shape[0]):
        m = ws[k]
        rmax = max(rmax, starts[m + 1] - starts[m])
    g = np.empty(rmax)
    d = np.empty(rmax)
    one = np.empty(1)
    viol = abs(np.sum(r)) if opts.with_bias else 0.0
    for k in range(ws.shape[0]):
        m = ws[k]
        s = starts[m]
        e = starts[m + 1]
        if e == s or lam[k] <= 0.0:
            continue
        block_grad(bank, s, e, r, g)
        nu = max(lam[k], opts.scale * bank.lip[m])
        viol = max(viol, nu * np.sqrt(prox_step(st.beta, s, e, g, nu, opts.C, reg, one, d)))
    return viol
