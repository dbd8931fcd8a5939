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

import numpy as np
from numba import njit, types

from .bcd_descent import (
    CAPPED,
    NO_DESCENT,
    NUMERICAL,
    OK,
    ST_ANDERSON,
    ST_BACKTRACK,
    ST_DECREASE,
    ST_EPOCHS,
    ST_LEN,
    ST_LINE_SEARCH,
    ST_NEWTON,
    ST_STATUS,
    ST_VIOLATION,
    Sweep,
    _copy,
    _coordinate_descent,
    _true_value,
    _ws_violation,
)
from .envelope import FLAGS, KIND_ENVELOPE, KIND_SMOOTH, envelope, loss_terms
from .group_blocks import block_curv, block_hessian, pack, reg_sum, reg_sum_packed, scores, top_eig, unpack, ws_rows
from .records import (
    BANK_T,
    BCD_OPTIONS_T,
    BCD_STATE_T,
    LOSS_FN,
    LOSS_FNS_T,
    REG_FN,
    REG_FNS_T,
    SAMPLES_T,
    Bank,
    BcdOptions,
    BcdState,
    LossFns,
    RegFns,
    Samples,
    bcd_state,
    loss_fns,
    reg_fns,
    samples,
)

__all__ = [
    "LOSS_FN",
    "REG_FN",
    "envelope",
    "loss_terms",
    "eval_loss",
    "solve_ws",
    "scores",
    "block_scores",
    "block_hessian",
    "Bank",
    "BcdOptions",
    "BcdState",
    "LossFns",
    "RegFns",
    "Samples",
    "bcd_state",
    "loss_fns",
    "reg_fns",
    "samples",
    "METHOD_BCD",
    "METHOD_NEWTON",
    "KIND_SMOOTH",
    "KIND_ENVELOPE",
    # the counters solve_ws writes (st.stats) and its status codes
    "ST_EPOCHS",
    "ST_NEWTON",
    "ST_LINE_SEARCH",
    "ST_ANDERSON",
    "ST_BACKTRACK",
    "ST_STATUS",
    "ST_VIOLATION",
    "ST_DECREASE",
    "ST_LEN",
    "OK",
    "NUMERICAL",
    "NO_DESCENT",
    "CAPPED",
]

METHOD_BCD = 0  # block coordinate descent on the loss itself
METHOD_NEWTON = 1  # proximal Newton: coordinate descent on the quadratic model

#: METHOD_NEWTON ends the call (NO_DESCENT) after a step that its line search
#: halved this many times
LS_STALL = 10


# ---------------------------------------------------------------------------
# the working-set solve
# ---------------------------------------------------------------------------
_f8 = types.float64
_b1 = types.boolean
_F1 = types.float64[::1]
_I1 = types.int64[::1]


@njit(types.void(BCD_OPTIONS_T, BANK_T, SAMPLES_T, LOSS_FNS_T, REG_FNS_T, BCD_STATE_T), cache=True)
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
            opts,
            bank,
            smp,
            loss,
            reg,
            st,
            Sweep(FLAGS[0], check, tol, lam, r, r, h, z, np.empty(0), np.full(nW, -1, dtype=np.int64), allidx),
        )
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
            viol, _ = _coordinate_descent(
                opts,
                bank,
                smp,
                loss,
                reg,
                st,
                Sweep(FLAGS[1], FLAGS[0], opts.ratio * tol, lam, r, r0, h, z0, Hbuf, use, allidx),
            )
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
