r"""Jitted loops of the primal block-coordinate-descent engine (``mklkit.engines.bcd``).

The problem is the MKL primal in the coordinates :math:`\beta_m = L_m^\top\alpha_m`
of a factor bank :math:`K_m = L_mL_m^\top` (a generalized group lasso)

.. math::
    \min_{\beta, b}\ \sum_i \ell(y_i, z_i) + \sum_m \tilde g_C(\|\beta_m\|_2),
    \qquad z = \sum_m L_m\beta_m + b.

The factors are stored transposed, :math:`L^\top` of shape (R, N), block
``m`` being the rows ``starts[m]:starts[m + 1]``: either a C-contiguous
array (``LT``) or the CSR arrays ``indptr``, ``indices``, ``data``, in a
:class:`~mklkit._jit.records.Bank` record.  The loops take typed records
(:mod:`mklkit._jit.records`): the options ``opts``
(:class:`~mklkit._jit.records.BcdOptions`), the bank, the samples ``smp``
(:class:`~mklkit._jit.records.Samples`), the loss and the regularizer
(:class:`~mklkit._jit.records.LossFns`, :class:`~mklkit._jit.records.RegFns`)
and the state ``st`` (:class:`~mklkit._jit.records.BcdState`).

:func:`solve_ws` runs a whole working-set solve in one call: block
coordinate descent on the blocks of the working set and the bias, either on
the loss itself (``METHOD_BCD``: the block gradient
:math:`L_m^\top\ell'(z)` is refreshed after every block, from component
calls on the samples the block touches) or on the local quadratic model of
the loss (``METHOD_NEWTON``: proximal Newton, Lee, Sun & Saunders 2014,
with an Armijo line search on the true objective).  Both use Anderson
extrapolation of the iterates (Anderson 1965; Bertrand & Massias 2021).

The loss is used through its contract only, as first-class functions of
the fixed signature :data:`LOSS_FN`; a non-smooth loss (``KIND_ENVELOPE``)
is replaced by its Moreau envelope, whose derivative is found from the
conjugate (:func:`envelope`).  Sample weights :math:`w_i` travel as the
array ``smp.sw`` next to ``smp.lo``, ``smp.hi`` (gathered with them on a block's
samples), empty for the unweighted problem: the loss in use is then
:math:`w_i\ell` (:func:`~mklkit._jit.envelope.loss_terms`), and ``opts.lip``
is :math:`\max_i w_i` times the loss's bound.  The regularizer gives
``value`` and ``prox`` (:data:`REG_FN`).  All arrays are C-contiguous
float64 (indices int64) so that the cached signatures match.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit, types

from .envelope import (FLAGS, KIND_ENVELOPE, KIND_SMOOTH, envelope, gather, loss_terms, subset,
                       sum_value)
from .group_blocks import (anderson, block_curv, block_grad, block_hessian, block_image,
                           block_min, pack, prox_step, reg_sum, reg_sum_packed, scores,
                           top_eig, unpack, ws_rows)
from .records import (BANK_T, BCD_OPTIONS_T, BCD_STATE_T, LOSS_FN, LOSS_FNS_T, REG_FN,
                      REG_FNS_T, SAMPLES_T, Bank, BcdOptions, BcdState, LossFns, RegFns, Samples,
                      bcd_state, first_class, loss_fns, reg_fns, samples)

__all__ = ["LOSS_FN", "REG_FN", "first_class", "envelope", "loss_terms", "eval_loss", "solve_ws",
           "scores", "block_scores", "block_hessian", "Bank", "BcdOptions", "BcdState",
           "LossFns", "RegFns", "Samples", "bcd_state", "loss_fns", "reg_fns", "samples",
           "METHOD_BCD", "METHOD_NEWTON", "KIND_SMOOTH", "KIND_ENVELOPE"]

METHOD_BCD = 0  # block coordinate descent on the loss itself
METHOD_NEWTON = 1  # proximal Newton: coordinate descent on the quadratic model


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

#: METHOD_NEWTON ends the call (NO_DESCENT) after a step that its line search
#: halved this many times
LS_STALL = 10

#: What one call of :func:`_coordinate_descent` works on: ``model`` (descent on the
#: quadratic model :math:`r = r_0 + h\circ(z - z_0)`, else on the loss itself), ``check``
#: (every step of the latter checked on the loss), ``tol`` the violation that ends the
#: epochs, ``lam`` the blocks' curvatures, ``r`` the gradient kept up to date, ``r0``,
#: ``h``, ``z0`` the model's, ``Hbuf`` the blocks' Hessians minimized exactly (block ``k``
#: of the working set at ``hoff[k]``, -1: none), ``allidx`` the indices of all samples.
Sweep = namedtuple("Sweep", ["model", "check", "tol", "lam", "r", "r0", "h", "z0", "Hbuf",
                             "hoff", "allidx"])
#: Buffers of an epoch: a block's gradient ``g`` and step ``d``, its image ``w`` (N,;
#: zero between steps), ``one`` (1,) for the regularizer's kernels and ``work`` (4, r) for
#: :func:`~mklkit._jit.group_blocks.block_min`.
Scratch = namedtuple("Scratch", ["g", "d", "w", "one", "work"])


# ---------------------------------------------------------------------------
# the working-set solve
# ---------------------------------------------------------------------------
@njit(cache=True)
def _copy(dst, src):  # pragma: no cover - jitted
    # an element loop: a slice assignment ``dst[:] = src`` makes numba compile its
    # shape-mismatch error message (string formatting) into every caller
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

    Block step (prox-gradient on block ``m`` with curvature :math:`\lambda_m`):
    :math:`\beta_m^+ = \mathrm{prox}(\|v\| \mid \tilde g_{C/\lambda_m})\,v/\|v\|`,
    :math:`v = \beta_m - g_m/\lambda_m`.  ``sweep.model``: ``r`` is the gradient of the
    quadratic model, :math:`r = r_0 + h\circ(z - z_0)`, and the step is
    accepted when :math:`d^\top L_m^\top\mathrm{diag}(h)L_md \le \lambda_m\|d\|^2`
    (else :math:`\lambda_m` grows and the step is redone: the model then
    decreases monotonically).  Otherwise ``r`` is :math:`\ell'(z)`, refreshed
    on the block's samples; with ``sweep.check`` the step must pass the
    sufficient-decrease test of the loss itself.  A block of the model whose
    Hessian :math:`L_m^\top\mathrm{diag}(h)L_m` is at ``Hbuf[hoff[k]:]``
    (``hoff[k] >= 0``) is minimized exactly instead (:func:`block_min`).
    ``sweep`` is a :class:`Sweep`, ``scr`` a :class:`Scratch`.  Returns the largest
    :math:`\lambda_m\|\beta_m^+ - \beta_m\|` and bias gradient seen (the
    violation of the pass), or ``nan`` on a non-finite value.
    """
    model = sweep.model
    check = sweep.check
    lam = sweep.lam
    r = sweep.r
    h = sweep.h
    Hbuf = sweep.Hbuf
    hoff = sweep.hoff
    ws = st.ws
    beta = st.beta
    z = st.z
    bias = st.bias
    stats = st.stats
    starts = bank.starts
    g = scr.g
    d = scr.d
    w = scr.w
    one = scr.one
    C = opts.C
    N = z.shape[0]
    viol = 0.0
    for k in range(ws.shape[0]):
        m = ws[k]
        s = starts[m]
        e = starts[m + 1]
        if e == s or lam[k] <= 0.0:
            continue
        sidx = bank.supp_idx[bank.supp_ptr[m]:bank.supp_ptr[m + 1]] if bank.sparse \
            else sweep.allidx
        block_grad(bank, s, e, r, g)
        lamk = lam[k]
        if model and hoff[k] >= 0:
            rk = e - s
            H = Hbuf[hoff[k]:hoff[k] + rk * rk].reshape((rk, rk))
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
    r"""Quadratic model :math:`r_0^\top\delta + \tfrac12\delta^\top\mathrm{diag}(h)\delta`,
    :math:`\delta = z - z_0`, plus the regularizer on the working set."""
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
    r"""Epochs of :func:`_epoch` with Anderson extrapolation, until the violation of a
    pass is at most ``sweep.tol`` or ``opts.max_epochs`` passes.

    Every ``n_and + 1`` passes (``n_and = opts.anderson``) the last ``n_and + 1`` iterates
    (working-set rows and bias) give extrapolation weights (:func:`anderson`) that are
    applied to them and to the predictions; the extrapolated point is kept
    when it lowers the objective (the model's with ``sweep.model``).  Returns the
    last violation (``nan`` on a non-finite value) and whether the cap was hit.
    """
    model = sweep.model
    r = sweep.r
    r0 = sweep.r0
    h = sweep.h
    z0 = sweep.z0
    ws = st.ws
    beta = st.beta
    z = st.z
    bias = st.bias
    C = opts.C
    n_and = opts.anderson
    N = z.shape[0]
    rows, wseg = ws_rows(ws, bank.starts)
    D = rows.shape[0] + 1
    rmax = 1
    for k in range(ws.shape[0]):
        rmax = max(rmax, wseg[k + 1] - wseg[k])
    scr = Scratch(np.empty(rmax), np.empty(rmax), np.zeros(N), np.empty(1),
                  np.empty((4, rmax)))
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
    r"""Fixed-point violation of the working set (and bias) at the gradient ``r``, for block
    steps of curvature :math:`\max(\lambda_m, \text{scale}\,\|L_m\|_2^2)` (``opts.scale``:
    that of the outer loop's scores at least, so that both measure alike)."""
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


_f8 = types.float64
_b1 = types.boolean
_F1 = types.float64[::1]
_I1 = types.int64[::1]


@njit(types.void(BCD_OPTIONS_T, BANK_T, SAMPLES_T, LOSS_FNS_T, REG_FNS_T, BCD_STATE_T),
      cache=True)
def solve_ws(opts, bank, smp, loss, reg, st):  # pragma: no cover - jitted
    r"""Solve the problem restricted to the working set ``st.ws`` (and the bias), in place.

    ``st.beta`` (R,), ``st.z`` (N,) and ``st.bias`` (1,) are the current point and are
    updated; the other blocks stay fixed.  ``smp.lo``, ``smp.hi`` bound the domain of
    the loss's own conjugate; ``smp.sw`` holds the sample weights (empty:
    unweighted), and every loss term below is that of :math:`w_i\ell`.  ``bank.lip[m]`` is
    :math:`\|L_m\|_2^2`.  ``opts`` holds the options
    (:class:`~mklkit._jit.records.BcdOptions`); ``st.stats`` (``ST_*``) receives the
    counters.

    ``METHOD_BCD``: block coordinate descent on the loss
    (:func:`_coordinate_descent`) with step :math:`1/(L\|L_m\|_2^2)`, ``L`` =
    ``opts.lip``; when ``L`` is infinite (``opts.check``) the curvature
    starts at the local :math:`\max_a (L_m^\top\mathrm{diag}(\ell'')L_m)_{aa}`
    and every step is checked on the loss (back-tracking).

    ``METHOD_NEWTON``: at most ``opts.max_newton`` proximal Newton steps.  Each
    takes :math:`r_0 = \ell'(z_0)`, :math:`h = \ell''(z_0)`, stops when the
    violation of the working set is at most ``opts.tol``, minimizes the model
    by coordinate descent to ``opts.ratio`` times that violation (blocks of
    rank at most ``opts.exact_rank`` exactly, with their Hessian
    :math:`L_m^\top\mathrm{diag}(h)L_m`: ``grams[goff[m]:]`` times ``h`` when
    ``h`` (the weighted curvature :math:`w_i\ell''`, so never for non-uniform
    weights on the squared loss) is constant, else :func:`block_hessian` from ``LT`` or the
    sample-major copy ``tptr``/``tcol``/``tval`` of a sparse bank), and searches
    along the direction :math:`\Delta` with the Armijo rule
    :math:`P(x + t\Delta) \le P(x) + 10^{-4} t\,(r_0^\top\Delta z +
    R(\beta + \Delta\beta) - R(\beta))`, :math:`t = 1, \tfrac12, \dots`
    """
    ws = st.ws
    beta = st.beta
    z = st.z
    bias = st.bias
    stats = st.stats
    starts = bank.starts
    lip = bank.lip
    C = opts.C
    lip_loss = opts.lip
    tol = opts.tol
    N = z.shape[0]
    nW = ws.shape[0]
    allidx = np.arange(N)
    for j in range(ST_LEN):
        stats[j] = 0.0
    lam = np.zeros(nW)
    rows, wseg = ws_rows(ws, starts)
    f_start = _true_value(smp, z, loss, beta, rows, wseg, C, reg)
    if opts.method == METHOD_BCD:
        check = opts.check
        v, r, h = loss_terms(smp, z, loss, FLAGS[0], check)
        for k in range(nW):
            m = ws[k]
            if check:
                c = block_curv(bank, starts[m], starts[m + 1], h)
                lam[k] = max(c, 1e-8 * lip[m])
            else:
                lam[k] = lip_loss * lip[m]
        viol, capped = _coordinate_descent(
            opts, bank, smp, loss, reg, st,
            Sweep(FLAGS[0], check, tol, lam, r, r, h, z, np.empty(0),
                  np.full(nW, -1, dtype=np.int64), allidx))
        stats[ST_VIOLATION] = viol
        if not np.isfinite(viol):
            stats[ST_STATUS] = NUMERICAL
        elif capped:
            stats[ST_STATUS] = CAPPED
    else:
        D = rows.shape[0] + 1
        old = np.empty(D)
        new = np.empty(D)
        z0 = np.empty(N)
        trial = np.empty(D)
        zt = np.empty(N)
        f0 = f_start
        stats[ST_STATUS] = CAPPED
        hoff = np.full(nW, -1, dtype=np.int64)
        size = 0
        for k in range(nW):
            rk = starts[ws[k] + 1] - starts[ws[k]]
            if 0 < rk <= opts.exact_rank:
                hoff[k] = size
                size += rk * rk
        Hbuf = np.empty(size)
        for step in range(opts.max_newton):
            _, r0, h = loss_terms(smp, z, loss, FLAGS[0], FLAGS[1])
            hmax = 0.0
            hmin = np.inf
            for i in range(N):
                if not (np.isfinite(r0[i]) and np.isfinite(h[i])):
                    stats[ST_STATUS] = NUMERICAL
                    return
                hmax = max(hmax, h[i])
                hmin = min(hmin, h[i])
            scale = hmax if hmax > 0.0 else (lip_loss if np.isfinite(lip_loss) else 1.0)
            use = hoff.copy()
            for k in range(nW):
                m = ws[k]
                s = starts[m]
                e = starts[m + 1]
                if hoff[k] >= 0:
                    rk = e - s
                    Hk = Hbuf[hoff[k]:hoff[k] + rk * rk].reshape((rk, rk))
                    if hmin == hmax and bank.goff[m] >= 0:
                        Hk[:, :] = hmax * bank.grams[bank.goff[m]:bank.goff[m] + rk * rk].reshape(
                            (rk, rk))
                    else:
                        block_hessian(bank, m, h, Hk)
                    lam[k] = top_eig(Hk)
                    if lam[k] > 0.0:
                        continue
                    use[k] = -1
                c = block_curv(bank, s, e, h)
                lam[k] = max(c, 1e-4 * scale * lip[m])
            viol0 = _ws_violation(opts, bank, reg, st, lam, r0)
            stats[ST_VIOLATION] = viol0
            if not np.isfinite(viol0):
                stats[ST_STATUS] = NUMERICAL
                return
            if viol0 <= tol:
                stats[ST_STATUS] = OK
                break
            stats[ST_NEWTON] += 1.0
            pack(beta, bias[0], rows, old)
            _copy(z0, z)
            r = r0.copy()
            viol, _ = _coordinate_descent(
                opts, bank, smp, loss, reg, st,
                Sweep(FLAGS[1], FLAGS[0], opts.ratio * tol, lam, r, r0, h, z0, Hbuf, use, allidx))
            if not np.isfinite(viol):
                stats[ST_STATUS] = NUMERICAL
                return
            pack(beta, bias[0], rows, new)
            reg_old = reg_sum_packed(old, wseg, C, reg)
            reg_new = reg_sum(beta, rows, wseg, C, reg)
            slope = reg_new - reg_old
            for i in range(N):
                slope += r0[i] * (z[i] - z0[i])
            # near the optimum the slope (and the decrease) reach the rounding of the
            # objective, though the step still lowers the violation, which the dual point's
            # feasibility (the gap) depends on: a slope of that size counts as 0 and a step
            # that raises the objective by no more than its rounding is accepted
            slack = 1e-14 * abs(f0)
            if not (slope < 10.0 * slack):
                # no descent direction left: keep the start point
                bias[0] = unpack(old, rows, beta)
                _copy(z, z0)
                stats[ST_STATUS] = NO_DESCENT
                break
            slope = min(slope, 0.0)
            t = 1.0
            accepted = False
            for ls in range(40):
                for j in range(D):
                    trial[j] = old[j] + t * (new[j] - old[j])
                bias[0] = unpack(trial, rows, beta)
                for i in range(N):
                    zt[i] = z0[i] + t * (z[i] - z0[i])
                f1 = _true_value(smp, zt, loss, beta, rows, wseg, C, reg)
                if f1 <= f0 + 1e-4 * t * slope + slack:
                    accepted = True
                    break
                t *= 0.5
                stats[ST_LINE_SEARCH] += 1.0
            if not accepted:
                bias[0] = unpack(old, rows, beta)
                _copy(z, z0)
                stats[ST_STATUS] = NO_DESCENT
                break
            _copy(z, zt)
            f0 = f1
            if ls >= LS_STALL:
                # the search cut the step to 2^-LS_STALL or less: the model no longer predicts
                # the objective (near the optimum its decrease reaches the objective's
                # rounding); further Newton steps here would be cut the same way
                stats[ST_STATUS] = NO_DESCENT
                break
    f_end = _true_value(smp, z, loss, beta, rows, wseg, C, reg)
    stats[ST_DECREASE] = f_start - f_end


@njit(types.UniTuple(_F1, 3)(SAMPLES_T, _F1, LOSS_FNS_T, _b1, _b1), cache=True)
def eval_loss(smp, z, loss, want_value, want_curv):  # pragma: no cover - jitted
    """:func:`loss_terms`, compiled once for every loss (the engine's entry point): values
    (if ``want_value``), derivatives and curvatures (if ``want_curv``) of the loss in use
    on the samples ``smp`` at the predictions ``z``."""
    return loss_terms(smp, z, loss, want_value, want_curv)


@njit(_F1(_F1, _F1, _I1, _F1, _f8, REG_FNS_T), cache=True)
def block_scores(beta, G, starts, nu, C, reg):  # pragma: no cover - jitted
    """:func:`scores`, compiled once for every regularizer (the engine's entry point)."""
    return scores(beta, G, starts, nu, C, reg)
