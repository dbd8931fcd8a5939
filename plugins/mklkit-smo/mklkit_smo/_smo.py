r"""Jitted core of SMO-MKL (Vishwanathan, Sun, Theera-Ampornpunt & Varma 2010).

Everything here works on float64/int64 arrays; the engine
(:mod:`mklkit_smo.engine`) sets the arrays up and reads the results.

The dual
--------
Variables :math:`0 \le \beta_t \le u_t` (the array ``ub``: :math:`U` each, or
:math:`U` times the number of identical points a variable stands for) with labels
:math:`z_t = \pm 1`, linear
coefficients :math:`e_t` and a point index :math:`\pi(t)`.  Classification
(SMO-MKL eq. 9): :math:`n = N`, :math:`z = y`, :math:`e = 1`.  ε-regression
(§5.3, :math:`\alpha = \alpha^+ - \alpha^-`): :math:`n = 2N`,
:math:`z = (+1, -1)`, :math:`e = (y - \varepsilon, -y - \varepsilon)`.  With
the signed coefficients :math:`\gamma_i = \sum_{\pi(t) = i} z_t\beta_t`
(:math:`y\circ\alpha` resp. :math:`\alpha^+ - \alpha^-`), the per-kernel forms
:math:`c_k = \gamma^\top K_k\gamma = \beta^\top H_k\beta` and the constraint
:math:`z^\top\beta = 0`, the engine maximizes

.. math::
    D(\beta) = e^\top\beta - \Phi(c), \qquad
    \nabla_\beta D = e - z \circ F_\pi,\quad F = \textstyle\sum_k d_k K_k\gamma,
    \quad d_k = 2\,\partial\Phi/\partial c_k,

where (``reg_mode`` 0) :math:`\Phi(c) = \|c\|_q^2/(8\lambda)` -- the squared
p-norm, eq. (9), with :math:`d` of eq. (10) -- or (``reg_mode`` 1) the
Bregman form of §5.2, eqs. (17)-(23):
:math:`\Phi(c) = \lambda\sum_k [d_k\theta_k - F(d_k) + F(d_0) - d_0 f(d_0)]`,
:math:`\theta_k = f(d_0) + c_k/(2\lambda)`, :math:`d_k = f^{-1}(\theta_k)`.
``F`` is the prediction :math:`\sum_k d_k K_k\gamma` without the bias.

One step (LibSVM's WSS2, Fan, Chen & Lin 2005, with the MKL curvature)
----------------------------------------------------------------------
Scores :math:`S_t = z_t e_t - F_{\pi(t)}` (:math:`= -z_t\nabla_t f` for
:math:`f = -D`).  ``i`` maximizes ``S`` over the variables that may move up,
``j`` minimizes :math:`-b_{ij}^2/a_{ij}` over those that may move down with
:math:`b_{ij} = S_i - S_j > 0`, where :math:`a_{ij}` is the exact curvature of
:math:`-D` along the pair direction (eq. 13):

.. math::
    a_{ij} = \sum_k d_k a_k + r_1\Big(\sum_k u^{(1)}_k w_k\Big)^2 + \sum_k u^{(2)}_k w_k^2,
    \quad a_k = \|\phi_k(x_{\pi i}) - \phi_k(x_{\pi j})\|^2,
    \quad w_k = (K_k\gamma)_{\pi i} - (K_k\gamma)_{\pi j}.

(:math:`r_1 = (2-q)/\lambda`, :math:`u^{(1)}_k = (c_k/\|c\|_q)^{q-1}`,
:math:`u^{(2)}_k = (q-1)\|c\|_q u^{(1)}_k/(\lambda c_k)` for the p-norm;
:math:`r_1 = 0`, :math:`u^{(2)}_k = (f^{-1})'(\theta_k)/\lambda` for a Bregman
form.)  All of it comes from N-vectors kept up to date in two passes over the
(M, N) array :math:`v = (K_k\gamma)_k`, so a step costs O(MN) plus two kernel
rows.  Moving :math:`\gamma_{\pi i}` by ``+t`` and :math:`\gamma_{\pi j}` by
``-t`` gives the reduced problem (eq. 11)

.. math::
    \max_{0 \le t \le t_{hi}}\ (z_ie_i - z_je_j)\,t - \Phi(c + 2tw + t^2a),

solved by the roots of a cubic for p = 2 (§5.1, eq. 16) or by a safeguarded
Newton-Raphson iteration with bisection (any p, Bregman forms).

``reg_mode`` 2 (``REG_SKM``) is the Moreau-Yosida regularized support kernel
machine of Bach, Lanckriet & Jordan (2004): :math:`\Phi` of their
Appendix B, with ``bpar`` = :math:`(a_1..a_m, d_1..d_m)`; its weights and
curvature terms come from :mod:`mklkit_smo._skm` (engine ``skm_smo``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from ._pair import reg_coeffs, solve_pair
from ._passes import _pass_a, _pass_b, _sums, refresh, sync_features, sync_precomputed, sync_precomputed_parallel
from ._records import (
    BANK_T,
    BREG_T,
    CACHE_T,
    FLAGS,
    FO_LEN,
    FO_VIOL,
    IS_HITS,
    IS_LEN,
    IS_MISSES,
    IS_NEWTON,
    IS_STEPS,
    IS_STOP,
    OPTS_T,
    REG_BREGMAN,
    REG_PNORM,
    REG_SKM,
    ROWS_FEATURES,
    ROWS_GATHER,
    ROWS_PRECOMPUTED,
    ROWS_T,
    STATE_T,
    STOP_CHUNK,
    STOP_KKT,
    STOP_NUMERICAL,
    STOP_STALLED,
    WORK_T,
    SmoOptions,
    no_function,
)
from ._rows import _get_slot, compute_row, compute_row_cols

#: The jitted core as the engine's state uses it (``state.smo``): the loop below, the passes
#: that refresh and sync its sums, the row computation, and the integer codes of the records.
__all__ = [
    "smo_chunk",
    "refresh",
    "sync_precomputed",
    "sync_precomputed_parallel",
    "sync_features",
    "compute_row_cols",
    "reg_coeffs",
    "solve_pair",
    "compute_row",
    "no_function",
    "SmoOptions",
    "REG_PNORM",
    "REG_BREGMAN",
    "REG_SKM",
    "ROWS_PRECOMPUTED",
    "ROWS_FEATURES",
    "ROWS_GATHER",
    "STOP_CHUNK",
    "STOP_KKT",
    "STOP_NUMERICAL",
    "STOP_STALLED",
    "IS_HITS",
    "IS_LEN",
    "IS_MISSES",
    "IS_NEWTON",
    "IS_STEPS",
    "IS_STOP",
    "FO_LEN",
    "FO_VIOL",
]


@njit(types.void(OPTS_T, BREG_T, BANK_T, ROWS_T, CACHE_T, STATE_T, WORK_T), cache=True)
def smo_chunk(opts, reg, bank, rows, cache, st, work):  # pragma: no cover - jitted
    """Run up to ``opts.max_steps`` SMO steps on the variables ``st.beta``.

    Points are *positions* ``0..n_points-1`` (``st.v.shape[1]``); ``bank.cmap`` maps
    them to rows of the full bank or of the features (identity unless shrunk).
    ``st.gconst`` holds the part of gamma owed to variables left out (shrunk).
    The reason for stopping goes to ``st.istate[IS_STOP]``, the number of steps
    to ``st.istate[IS_STEPS]`` and the last maximal KKT violation to ``st.fout``.
    """
    rows_mode = opts.rows_mode
    max_steps = opts.max_steps
    par = opts.parallel
    nb = opts.nblocks
    eps = opts.eps
    tau = opts.tau
    K = bank.K
    diag = bank.diag
    beta = st.beta
    z = st.z
    e = st.e
    ub = st.ub
    pt = st.pt
    var_pos = st.var_pos
    var_neg = st.var_neg
    gconst = st.gconst
    gamma = st.gamma
    v = st.v
    c = st.c
    d = st.d
    u1 = st.u1
    u2 = st.u2
    F = st.F
    Dg = st.Dg
    Z1 = st.Z1
    V2 = st.V2
    X2 = st.X2
    Ri = st.Ri
    istate = st.istate
    fout = st.fout
    a = work.a
    w = work.w
    sums = _sums(bank, st)
    n = beta.shape[0]
    M = v.shape[0]
    counter = np.zeros(1, dtype=np.int64)
    stop = STOP_CHUNK
    steps = 0
    zero_run = 0
    r1 = reg_coeffs(opts, reg, c, d, u1, u2)
    while steps < max_steps:
        # ---- first variable: maximal violation (WSS2, first half)
        gmax = -math.inf
        smin = math.inf
        i = -1
        for t in range(n):
            s = z[t] * e[t] - F[pt[t]]
            if z[t] > 0.0:
                up = beta[t] < ub[t]
                low = beta[t] > 0.0
            else:
                up = beta[t] > 0.0
                low = beta[t] < ub[t]
            if up and s > gmax:
                gmax = s
                i = t
            if low and s < smin:
                smin = s
        viol = gmax - smin
        fout[FO_VIOL] = viol
        if not math.isfinite(viol):
            if i < 0 or smin == math.inf:
                stop = STOP_KKT  # nothing can move
            else:
                stop = STOP_NUMERICAL
            break
        if viol <= eps:
            stop = STOP_KKT
            break
        Ii = pt[i]
        if rows_mode == ROWS_PRECOMPUTED:
            rowI = K[:, Ii, :]
            sI = -1
        else:
            sI = _get_slot(Ii, np.int64(-1), opts, bank, rows, cache, istate)
            rowI = cache.slots[sI]
        _pass_b(par, nb, v, rowI, Ii, d, u2, X2, Ri)
        # ---- second variable: largest second-order gain (WSS2, second half)
        best = math.inf
        j = -1
        dgI = Dg[Ii]
        z1I = Z1[Ii]
        v2I = V2[Ii]
        for t in range(n):
            if z[t] > 0.0:
                low = beta[t] > 0.0
            else:
                low = beta[t] < ub[t]
            if not low:
                continue
            J = pt[t]
            b = gmax - (z[t] * e[t] - F[J])
            if b <= 0.0:
                continue
            dz = z1I - Z1[J]
            aij = dgI + Dg[J] - 2.0 * Ri[J] + r1 * dz * dz + v2I - 2.0 * X2[J] + V2[J]
            if not aij > tau:
                aij = tau
            gain = -b * b / aij
            if gain < best:
                best = gain
                j = t
        if j < 0:
            stop = STOP_KKT
            break
        Ij = pt[j]
        if rows_mode == ROWS_PRECOMPUTED:
            rowJ = K[:, Ij, :]
        else:
            sJ = _get_slot(Ij, sI, opts, bank, rows, cache, istate)
            rowJ = cache.slots[sJ]
        # ---- reduced problem along beta_i += z_i t, beta_j -= z_j t
        for k in range(M):
            ak = diag[k, Ii] + diag[k, Ij] - 2.0 * rowI[k, Ij]
            a[k] = ak if ak > 0.0 else 0.0
            w[k] = v[k, Ii] - v[k, Ij]
        lin = z[i] * e[i] - z[j] * e[j]
        hi_i = ub[i] - beta[i] if z[i] > 0.0 else beta[i]
        hi_j = beta[j] if z[j] > 0.0 else ub[j] - beta[j]
        thi = min(hi_i, hi_j)
        tstep = solve_pair(opts, reg, lin, work, c, thi, d, u1, u2, counter)
        if not math.isfinite(tstep):
            stop = STOP_NUMERICAL
            break
        if tstep <= 0.0:
            zero_run += 1
            if zero_run > 5:
                stop = STOP_STALLED
                break
            # restore the coefficients solve_pair overwrote and try again
            r1 = reg_coeffs(opts, reg, c, d, u1, u2)
            steps += 1
            continue
        zero_run = 0
        # ---- update beta and gamma (snapping the variable that hits its bound)
        bi = beta[i] + z[i] * tstep
        bj = beta[j] - z[j] * tstep
        if tstep >= thi:
            if hi_i <= hi_j:
                bi = ub[i] if z[i] > 0.0 else 0.0
            if hi_j <= hi_i:
                bj = 0.0 if z[j] > 0.0 else ub[j]
        beta[i] = min(max(bi, 0.0), ub[i])
        beta[j] = min(max(bj, 0.0), ub[j])
        gI = gconst[Ii]
        if var_pos[Ii] >= 0:
            gI += z[var_pos[Ii]] * beta[var_pos[Ii]]
        if var_neg[Ii] >= 0:
            gI += z[var_neg[Ii]] * beta[var_neg[Ii]]
        gJ = gconst[Ij]
        if var_pos[Ij] >= 0:
            gJ += z[var_pos[Ij]] * beta[var_pos[Ij]]
        if var_neg[Ij] >= 0:
            gJ += z[var_neg[Ij]] * beta[var_neg[Ij]]
        dI = gI - gamma[Ii]
        dJ = gJ - gamma[Ij]
        gamma[Ii] = gI
        gamma[Ij] = gJ
        if Ii == Ij:
            dI = dI + dJ
            dJ = 0.0
        # ---- c in O(M): c + 2 (dI v_I + dJ v_J) + dI^2 K_II + 2 dI dJ K_IJ + dJ^2 K_JJ
        for k in range(M):
            nv = (
                c[k]
                + 2.0 * (dI * v[k, Ii] + dJ * v[k, Ij])
                + dI * dI * diag[k, Ii]
                + 2.0 * dI * dJ * rowI[k, Ij]
                + dJ * dJ * diag[k, Ij]
            )
            c[k] = nv if nv > 0.0 else 0.0
        r1 = reg_coeffs(opts, reg, c, d, u1, u2)
        _pass_a(par, nb, sums, rowI, rowJ, dI, dJ, FLAGS[1])
        steps += 1
        if not (math.isfinite(F[Ii]) and math.isfinite(c[0])):
            stop = STOP_NUMERICAL
            break
    istate[IS_STEPS] = steps
    istate[IS_STOP] = stop
    istate[IS_NEWTON] += counter[0]
