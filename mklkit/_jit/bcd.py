r"""Jitted loops of the bcd engine (:mod:`mklkit.engines.bcd`): the working-set solve and the
engine's entry points.

The problem is :math:`\min_{\beta, b} \sum_i \ell(y_i, z_i) + \sum_m \tilde g_C(\|\beta_m\|_2)`,
:math:`z = \sum_m L_m\beta_m + b`, with :math:`L^\top` (R, N) stored dense or CSR, block ``m``
the rows ``starts[m]:starts[m + 1]``.  The loops take the typed records of
:mod:`mklkit._jit.records` and the components' kernels as first-class functions.
"""

import numpy as np
from numba import njit, types

from .bcd_descent import CAPPED, NO_DESCENT, NUMERICAL, OK, Sweep
from .bcd_descent import _copy, _coordinate_descent, _true_value, _ws_violation
from .bcd_descent import ST_ANDERSON, ST_BACKTRACK, ST_EPOCHS  # noqa: F401 - the engine reads them here
from .bcd_descent import ST_DECREASE, ST_LEN, ST_LINE_SEARCH, ST_NEWTON, ST_STATUS, ST_VIOLATION
from .envelope import FLAGS, KIND_ENVELOPE, KIND_SMOOTH, loss_terms  # noqa: F401 - the engine reads the kinds here
from .group_blocks import block_curv, block_hessian, pack, prox_scale, reg_sum, reg_sum_packed, scores, top_eig, unpack
from .group_blocks import ws_rows
from .records import BANK_T, BCD_OPTIONS_T, BCD_STATE_T, LOSS_FNS_T, REG_FNS_T, SAMPLES_T, _b1, _f8, _F1, _I1
from .records import LOSS_FN, Bank, BcdOptions, LossFns, Samples, bcd_state, loss_fns, reg_fns, samples  # noqa: F401

METHOD_BCD = 0  # block coordinate descent on the loss itself
METHOD_NEWTON = 1  # proximal Newton: coordinate descent on the quadratic model

#: METHOD_NEWTON ends the call (NO_DESCENT) after a step its line search halved this many times
LS_STALL = 10


@njit(types.void(BCD_OPTIONS_T, BANK_T, SAMPLES_T, LOSS_FNS_T, REG_FNS_T, BCD_STATE_T), cache=True)
def solve_ws(opts, bank, smp, loss, reg, st):  # pragma: no cover - jitted
    r"""Solve the problem restricted to the working set ``st.ws`` and the bias, in place.

    ``METHOD_BCD``: block coordinate descent on the loss, step :math:`1/(L\|L_m\|_2^2)`,
    ``L = opts.lip`` (infinite: ``opts.check``, local curvature and steps checked on the loss).
    ``METHOD_NEWTON``: at most ``opts.max_newton`` proximal Newton steps, the model minimized by
    coordinate descent (blocks of rank at most ``opts.exact_rank`` exactly, with their Hessian),
    then an Armijo search :math:`P(x + t\Delta) \le P(x) + 10^{-4} t\,(r_0^\top\Delta z +
    R(\beta + \Delta\beta) - R(\beta))`.  ``st.stats`` receives the ``ST_*`` counters.
    """
    ws, beta, z, bias, stats = st
    starts, lip = bank.starts, bank.lip
    C, lip_loss, tol = opts.C, opts.lip, opts.tol
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
        sweep = Sweep(FLAGS[0], check, tol, lam, r, r, h, z, np.empty(0), np.full(nW, -1, dtype=np.int64), allidx)
        viol, capped = _coordinate_descent(opts, bank, smp, loss, reg, st, sweep)
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
                    Hk = Hbuf[hoff[k] : hoff[k] + rk * rk].reshape((rk, rk))
                    if hmin == hmax and bank.goff[m] >= 0:
                        Hk[:, :] = hmax * bank.grams[bank.goff[m] : bank.goff[m] + rk * rk].reshape((rk, rk))
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
            sweep = Sweep(FLAGS[1], FLAGS[0], opts.ratio * tol, lam, r, r0, h, z0, Hbuf, use, allidx)
            viol, _ = _coordinate_descent(opts, bank, smp, loss, reg, st, sweep)
            if not np.isfinite(viol):
                stats[ST_STATUS] = NUMERICAL
                return
            pack(beta, bias[0], rows, new)
            reg_old = reg_sum_packed(old, wseg, C, reg)
            reg_new = reg_sum(beta, rows, wseg, C, reg)
            slope = reg_new - reg_old
            for i in range(N):
                slope += r0[i] * (z[i] - z0[i])
            # near the optimum the decrease reaches the objective's rounding while the step still
            # lowers the violation (the gap): such a slope counts as 0, such a rise is accepted
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
                # the model no longer predicts the objective (its decrease at the rounding):
                # further Newton steps would be cut the same way
                stats[ST_STATUS] = NO_DESCENT
                break
    f_end = _true_value(smp, z, loss, beta, rows, wseg, C, reg)
    stats[ST_DECREASE] = f_start - f_end


@njit(types.UniTuple(_F1, 3)(SAMPLES_T, _F1, LOSS_FNS_T, _b1, _b1), cache=True)
def eval_loss(smp, z, loss, want_value, want_curv):  # pragma: no cover - jitted
    """:func:`~mklkit._jit.envelope.loss_terms`, compiled once for every loss."""
    return loss_terms(smp, z, loss, want_value, want_curv)


@njit(_F1(_F1, _F1, _I1, _F1, _f8, REG_FNS_T), cache=True)
def block_scores(beta, G, starts, nu, C, reg):  # pragma: no cover - jitted
    """:func:`~mklkit._jit.group_blocks.scores`, compiled once for every regularizer."""
    return scores(beta, G, starts, nu, C, reg)


@njit(_F1(_F1, _F1, _f8, REG_FNS_T), cache=True)
def block_prox_scales(norms, eta, C, reg):  # pragma: no cover - jitted
    r""":math:`\mathrm{prox}_{\tilde g_{\eta_mC}}(x_m)/x_m` for block norms ``norms`` with their own
    steps ``eta`` (0 for a block set to zero), compiled once for every regularizer."""
    one = np.zeros(1)
    out = np.zeros(norms.size)
    for m in range(norms.size):
        out[m] = prox_scale(norms[m], eta[m] * C, reg, one)
    return out
