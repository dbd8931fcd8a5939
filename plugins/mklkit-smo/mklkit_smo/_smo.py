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
from numba import njit, prange, types

from ._records import BANK_T, BREG_T, CACHE_T, OPTS_T, ROWS_T, STATE_T, WORK_T, KernelSums, SmoOptions, no_function
from ._skm import skm_coeffs

#: ``FLAGS[1]`` (True) and ``FLAGS[0]`` (False): constant flags passed between jitted functions as
#: runtime values.  numba compiles a callee once per literal argument (``Literal[bool](True)``), so
#: literal flags (and literal integers) in two callers would compile it and all it calls twice.
FLAGS = np.array([False, True])

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
]

REG_PNORM = 0
REG_BREGMAN = 1
REG_SKM = 2  # Moreau-Yosida regularized SKM (Bach et al. 2004), bpar = [a_1..a_m, d_1..d_m]
ROWS_PRECOMPUTED = 0  # rows are views of the full bank K
ROWS_FEATURES = 1  # rows computed from the features into the cache
ROWS_GATHER = 2  # rows gathered from K on the active points into the cache

STOP_CHUNK = 0  # the chunk's step budget is used up
STOP_KKT = 1  # maximal KKT violation <= eps
STOP_NUMERICAL = 2  # a non-finite value appeared
STOP_STALLED = 3  # steps stopped making progress

FAM_RBF = 0
FAM_POLY = 1
FAM_LINEAR = 2

# istate layout (counters, written by the chunk)
IS_CLOCK = 0
IS_HITS = 1
IS_MISSES = 2
IS_STEPS = 3
IS_STOP = 4
IS_ZERO_STEPS = 5
IS_NEWTON = 6
IS_LEN = 7
# fout layout
FO_VIOL = 0
FO_LEN = 1

_TINY = 1e-300


# ---------------------------------------------------------------------------
# regularizer coefficients
# ---------------------------------------------------------------------------
@njit(cache=True)
def _pnorm_coeffs(c, q, lam, d, u1, u2):  # pragma: no cover - jitted
    """d, u1, u2 of the p-norm form at c; returns (||c||_q, r1)."""
    M = c.shape[0]
    cmax = 0.0
    for k in range(M):
        if c[k] > cmax:
            cmax = c[k]
    if not cmax > 0.0:
        for k in range(M):
            d[k] = 0.0
            u1[k] = 0.0
            u2[k] = 0.0
        return 0.0, (2.0 - q) / lam
    # one power per kernel: t_k = (c_k/cmax)^(q-1), (c_k/cmax)^q = t_k c_k/cmax,
    # rho_k = (c_k/||c||_q)^(q-1) = t_k (cmax/||c||_q)^(q-1)
    s = 0.0
    for k in range(M):
        if c[k] > 0.0:
            r = c[k] / cmax
            tk = r ** (q - 1.0)
            u1[k] = tk
            s += tk * r
        else:
            u1[k] = 0.0
    nrm = cmax * s ** (1.0 / q)
    scale = (cmax / nrm) ** (q - 1.0)
    h = nrm / (2.0 * lam)
    g2 = (q - 1.0) * nrm / lam
    for k in range(M):
        ck = c[k]
        if ck > 0.0:
            rho = u1[k] * scale
            d[k] = h * rho
            u1[k] = rho
            u2[k] = g2 * rho / ck
        else:
            d[k] = 0.0
            u2[k] = 0.0
    return nrm, (2.0 - q) / lam


@njit(cache=True)
def _bregman_coeffs(c, lam, fd0, bpar, finv, d, u1, u2):  # pragma: no cover - jitted
    """d, u1 (= 0), u2 of a Bregman form at c; returns r1 = 0."""
    M = c.shape[0]
    theta = np.empty(M)
    h = np.empty(M)
    tp = np.empty(M)
    tm = np.empty(M)
    for k in range(M):
        th = fd0 + c[k] / (2.0 * lam)
        theta[k] = th
        hk = 1e-5 * max(1.0, abs(th))
        h[k] = hk
        tp[k] = th + hk
        tm[k] = th - hk
    dd = finv(theta, bpar)
    dp = finv(tp, bpar)
    dm = finv(tm, bpar)
    for k in range(M):
        d[k] = dd[k]
        u1[k] = 0.0
        u2[k] = (dp[k] - dm[k]) / (2.0 * h[k]) / lam
    return 0.0


@njit(cache=True)
def reg_coeffs(opts, reg, c, d, u1, u2):  # pragma: no cover - jitted
    """Kernel weights ``d`` (eq. 10 / eq. 20) and curvature coefficients at ``c``.

    Returns ``r1``, the factor of the rank-one part of the Hessian (13).
    """
    if opts.reg_mode == REG_PNORM:
        _, r1 = _pnorm_coeffs(c, opts.q, opts.lam, d, u1, u2)
        return r1
    if opts.reg_mode == REG_SKM:
        return skm_coeffs(c, reg.params, d, u1, u2)
    return _bregman_coeffs(c, opts.lam, opts.fd0, reg.params, reg.finv, d, u1, u2)


# ---------------------------------------------------------------------------
# the reduced two-variable problem (eq. 11)
# ---------------------------------------------------------------------------
@njit(cache=True)
def _slope(opts, reg, t, lin, work, c, d, u1, u2):  # pragma: no cover - jitted
    """phi'(t) and phi''(t) of phi(t) = lin t - Phi(c + 2tw + t^2 a)."""
    a = work.a
    w = work.w
    ct = work.ct
    M = c.shape[0]
    for k in range(M):
        v = c[k] + t * (2.0 * w[k] + t * a[k])
        ct[k] = v if v > 0.0 else 0.0
    r1 = reg_coeffs(opts, reg, ct, d, u1, u2)
    g = lin
    curv = 0.0
    s1 = 0.0
    for k in range(M):
        wk = w[k] + t * a[k]
        g -= d[k] * wk
        curv += d[k] * a[k] + u2[k] * wk * wk
        s1 += u1[k] * wk
    curv += r1 * s1 * s1
    return g, -curv


@njit(cache=True)
def _cubic_root(A3, A2, A1, A0):  # pragma: no cover - jitted
    """The real root of a monotone increasing cubic A3 t^3 + A2 t^2 + A1 t + A0 (A3 > 0)."""
    b = A2 / A3
    cc = A1 / A3
    dd = A0 / A3
    p = cc - b * b / 3.0
    qq = 2.0 * b * b * b / 27.0 - b * cc / 3.0 + dd
    if p < 0.0:
        p = 0.0  # rounding: a monotone cubic has p >= 0
    disc = 0.25 * qq * qq + p * p * p / 27.0
    sd = math.sqrt(disc) if disc > 0.0 else 0.0
    if qq == 0.0:
        x = 0.0
    else:
        m = 0.5 * abs(qq) + sd
        u = -math.copysign(m ** (1.0 / 3.0), qq)
        x = u - p / (3.0 * u) if u != 0.0 else 0.0
    t = x - b / 3.0
    # polish on the original cubic (its derivative is >= 0 everywhere)
    for _ in range(3):
        f = ((A3 * t + A2) * t + A1) * t + A0
        fp = (3.0 * A3 * t + 2.0 * A2) * t + A1
        if fp > 0.0 and math.isfinite(f):
            tn = t - f / fp
            if tn == t:
                break
            t = tn
        else:
            break
    return t


@njit(cache=True)
def _pair_p2(lin, a, w, c, lam, thi):  # pragma: no cover - jitted
    """Analytic step for p = q = 2 (§5.1): root of a cubic, clipped to [0, thi].

    phi'(t) = lin - (1/(2 lam)) sum_k (c_k + 2 t w_k + t^2 a_k)(w_k + t a_k).
    Returns -1.0 when the cubic is degenerate (no a_k > 0): use Newton then.
    """
    M = c.shape[0]
    A3 = 0.0
    A2 = 0.0
    A1 = 0.0
    A0 = 0.0
    for k in range(M):
        ak = a[k]
        wk = w[k]
        A3 += ak * ak
        A2 += 3.0 * ak * wk
        A1 += c[k] * ak + 2.0 * wk * wk
        A0 += c[k] * wk
    scale = A1 + abs(A0) + abs(A2)
    if not A3 > 1e-14 * max(scale, _TINY):
        return -1.0
    t = _cubic_root(A3, A2, A1, A0 - 2.0 * lam * lin)
    if not (t > 0.0):
        return 0.0
    if t > thi:
        return thi
    return t


@njit(cache=True)
def _pair_newton(opts, reg, lin, work, c, thi, d, u1, u2, counter):  # pragma: no cover - jitted
    """Safeguarded Newton-Raphson on phi'(t) = 0 over [0, thi] (phi concave).

    Keeps a bracket [lo, hi] with phi'(lo) > 0 > phi'(hi) and falls back to
    bisection when a Newton step leaves it or does not halve |phi'|.
    """
    g0, h0 = _slope(opts, reg, 0.0, lin, work, c, d, u1, u2)
    counter[0] += 1
    if not (g0 > 0.0):
        return 0.0
    ghi, _ = _slope(opts, reg, thi, lin, work, c, d, u1, u2)
    counter[0] += 1
    if ghi >= 0.0:
        return thi
    if not math.isfinite(ghi):
        # overflow far out (fast-growing Bregman forms): bisect from a finite bracket
        ghi = -1.0
    lo = 0.0
    hi = thi
    if h0 < 0.0:
        t = g0 / (-h0)
    else:
        t = 0.5 * (lo + hi)
    if not (lo < t < hi):
        t = 0.5 * (lo + hi)
    gscale = abs(g0)
    gprev = math.inf
    for _ in range(200):
        g, h = _slope(opts, reg, t, lin, work, c, d, u1, u2)
        counter[0] += 1
        if not math.isfinite(g):
            hi = t
            t = 0.5 * (lo + hi)
            continue
        if g > 0.0:
            lo = t
        else:
            hi = t
        if abs(g) <= 1e-13 * gscale or hi - lo <= 1e-15 * max(hi, _TINY):
            return t
        tn = t - g / h if h < 0.0 else -1.0
        if lo < tn < hi and abs(tn - t) <= 1e-6 * t:
            # a converged Newton step (the error after it is of order 1e-12 t where phi is
            # smooth).  phi' is known only to rounding -- terms of size ~1 cancel down to
            # phi'(0) ~ the KKT violation -- so |phi'| <= 1e-13 phi'(0) may never hold, and
            # bisecting on to a 1e-15 bracket would cost some 30 more evaluations
            return tn
        if not (lo < tn < hi) or abs(g) > 0.5 * gprev:
            tn = 0.5 * (lo + hi)
        gprev = abs(g)
        if tn == t:
            return t
        t = tn
    return t


@njit(cache=True)
def solve_pair(opts, reg, lin, work, c, thi, d, u1, u2, counter):  # pragma: no cover - jitted
    """Optimal step ``t`` of the reduced problem (eq. 11) on [0, thi] along ``work.a``,
    ``work.w`` (``work.ct``: scratch)."""
    if opts.analytic and opts.reg_mode == REG_PNORM and opts.q == 2.0:
        t = _pair_p2(lin, work.a, work.w, c, opts.lam, thi)
        if t >= 0.0:
            return t
    return _pair_newton(opts, reg, lin, work, c, thi, d, u1, u2, counter)


# ---------------------------------------------------------------------------
# kernel rows computed from features
# ---------------------------------------------------------------------------
@njit(cache=True)
def _group_product(g, xc_ptr, xc_idx, xc_val, g_fptr, g_feat, xi, acc):  # pragma: no cover
    """acc[g, j] = <x_i, x_j> restricted to the features of group g (x_i scattered in xi)."""
    N = acc.shape[1]
    for j in range(N):
        acc[g, j] = 0.0
    for qq in range(g_fptr[g], g_fptr[g + 1]):
        f = g_feat[qq]
        xv = xi[f]
        if xv != 0.0:
            for p in range(xc_ptr[f], xc_ptr[f + 1]):
                acc[g, xc_idx[p]] += xv * xc_val[p]


@njit(cache=True, parallel=True)
def _group_products_parallel(xc_ptr, xc_idx, xc_val, g_fptr, g_feat, xi, acc):  # pragma: no cover
    G = g_fptr.shape[0] - 1
    for g in prange(G):  # (the prange index is unsigned: cast, one compiled signature)
        _group_product(np.int64(g), xc_ptr, xc_idx, xc_val, g_fptr, g_feat, xi, acc)


@njit(cache=True)
def _group_products(i, parallel, rows):  # pragma: no cover - jitted
    """acc[g, j] = <x_i, x_j> restricted to the features of every group g."""
    xr_ptr = rows.xr_ptr
    xr_idx = rows.xr_idx
    xr_val = rows.xr_val
    xc_ptr = rows.xc_ptr
    xc_idx = rows.xc_idx
    xc_val = rows.xc_val
    g_fptr = rows.g_fptr
    g_feat = rows.g_feat
    xi = rows.xi
    acc = rows.acc
    for p in range(xr_ptr[i], xr_ptr[i + 1]):
        xi[xr_idx[p]] = xr_val[p]
    G = g_fptr.shape[0] - 1
    if parallel and G > 1:
        _group_products_parallel(xc_ptr, xc_idx, xc_val, g_fptr, g_feat, xi, acc)
    else:
        for g in range(G):
            _group_product(g, xc_ptr, xc_idx, xc_val, g_fptr, g_feat, xi, acc)
    for p in range(xr_ptr[i], xr_ptr[i + 1]):
        xi[xr_idx[p]] = 0.0


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00


@njit(cache=True)
def vexp_inplace(x, n, scale):  # pragma: no cover - jitted
    r"""x[:n] <- scale * exp(x[:n]) for x <= 0, in a loop that vectorizes.

    Cody-Waite reduction :math:`x = k\ln 2 + r`, :math:`|r| \le \ln 2/2`,
    Taylor polynomial of degree 14 for :math:`e^r` (truncation below
    :math:`10^{-17}`), and :math:`2^k` added to the exponent bits: within one
    unit in the last place of ``math.exp``.  Values below :math:`10^{-300}`
    (arguments below about -690.8) are flushed to 0, which keeps the exponent
    arithmetic away from subnormal numbers.
    """
    bits = x.view(np.int64)
    for j in range(n):
        xv = x[j]
        if xv < -708.0:
            xv = -708.0
        kf = math.floor(xv * _INV_LN2 + 0.5)
        r = (xv - kf * _LN2_HI) - kf * _LN2_LO
        p = 1.0 + r * (
            1.0
            + r
            * (
                0.5
                + r
                * (
                    1.0 / 6
                    + r
                    * (
                        1.0 / 24
                        + r
                        * (
                            1.0 / 120
                            + r
                            * (
                                1.0 / 720
                                + r
                                * (
                                    1.0 / 5040
                                    + r
                                    * (
                                        1.0 / 40320
                                        + r
                                        * (
                                            1.0 / 362880
                                            + r
                                            * (
                                                1.0 / 3628800
                                                + r
                                                * (
                                                    1.0 / 39916800
                                                    + r * (1.0 / 479001600 + r * (1.0 / 6227020800 + r / 87178291200))
                                                )
                                            )
                                        )
                                    )
                                )
                            )
                        )
                    )
                )
            )
        )
        x[j] = p
        bits[j] += np.int64(kf) << 52
    for j in range(n):
        v = x[j] * scale
        x[j] = v if x[j] >= 1e-300 else 0.0


@njit(cache=True)
def _kernel_values(k, i, g, acc, g_sqn, k_fam, k_par, k_pn, cols, ncols, packed, out):  # pragma: no cover - jitted
    """Kernel k against the points ``cols[:ncols]`` (sorted, distinct): ``out[k, jj]`` for
    ``packed``, else ``out[k, cols[jj]]``."""
    fam = k_fam[k]
    sc = k_par[k, 3]
    ident = ncols == acc.shape[1]  # then cols[jj] == jj
    row = out[k]
    if fam == FAM_RBF:
        gam = k_par[k, 0]
        si = g_sqn[g, i]
        # arguments packed into row[:ncols] and exponentiated there
        if ident:
            for j in range(ncols):
                b = si + g_sqn[g, j] - 2.0 * acc[g, j]
                row[j] = gam * (b if b > 0.0 else 0.0)
            row[i] = 0.0
        else:
            for jj in range(ncols):
                j = cols[jj]
                b = si + g_sqn[g, j] - 2.0 * acc[g, j]
                if b < 0.0 or j == i:
                    b = 0.0
                row[jj] = gam * b
        vexp_inplace(row, ncols, sc)
    elif fam == FAM_POLY:
        s = k_par[k, 0]
        off = k_par[k, 1]
        deg = int(k_par[k, 2])
        for jj in range(ncols):
            base = s * acc[g, cols[jj]] + off
            val = 1.0
            for _ in range(deg):
                val *= base
            row[jj] = sc * val
    else:
        for jj in range(ncols):
            row[jj] = sc * acc[g, cols[jj]]
    if k_pn.shape[0] > 0:
        fi = k_pn[k, i]
        for jj in range(ncols):
            row[jj] *= fi * k_pn[k, cols[jj]]
    if not packed and not ident:
        # move to the columns from the last one down (cols[jj] >= jj: nothing unread is hit)
        for jj in range(ncols - 1, -1, -1):
            row[cols[jj]] = row[jj]


@njit(cache=True, parallel=True)
def _kernel_values_parallel(
    i, k_group, acc, g_sqn, k_fam, k_par, k_pn, cols, ncols, packed, out
):  # pragma: no cover - jitted
    M = out.shape[0]
    for k in prange(M):
        _kernel_values(np.int64(k), i, k_group[k], acc, g_sqn, k_fam, k_par, k_pn, cols, ncols, packed, out)


@njit(cache=True)
def compute_row_cols(i, parallel, rows, cols, ncols, packed, out):  # pragma: no cover - jitted
    """Kernel row :math:`K_k(x_i, x_j)` (normalised) of every kernel for the points
    ``j = cols[:ncols]``, at ``out[k, jj]`` (``packed``) or ``out[k, j]``."""
    g_sqn = rows.g_sqn
    k_group = rows.k_group
    k_fam = rows.k_fam
    k_par = rows.k_par
    k_pn = rows.k_pn
    acc = rows.acc
    _group_products(i, parallel, rows)
    if parallel:
        _kernel_values_parallel(i, k_group, acc, g_sqn, k_fam, k_par, k_pn, cols, ncols, packed, out)
    else:
        for k in range(out.shape[0]):
            _kernel_values(k, i, k_group[k], acc, g_sqn, k_fam, k_par, k_pn, cols, ncols, packed, out)


@njit(cache=True)
def compute_row(i, parallel, rows, out):  # pragma: no cover - jitted
    """Kernel row ``out[k, j] = K_k(x_i, x_j)`` of every kernel and column (normalised)."""
    N = out.shape[1]
    cols = np.arange(N)
    compute_row_cols(i, parallel, rows, cols, N, True, out)


@njit(cache=True)
def _get_slot(P, pin, opts, bank, rows, cache, istate):  # pragma: no cover - jitted
    """Cache slot holding the row of (compact) point ``P`` on the points ``bank.cmap``.

    LRU replacement that never evicts slot ``pin``.  The row is gathered from
    the precomputed bank (``ROWS_GATHER``) or computed from the features.
    """
    K = bank.K
    cmap = bank.cmap
    napt = cmap.shape[0]
    slot_of = cache.slot_of
    point_of = cache.point_of
    stamp = cache.stamp
    istate[IS_CLOCK] += 1
    s = slot_of[P]
    if s >= 0:
        stamp[s] = istate[IS_CLOCK]
        istate[IS_HITS] += 1
        return s
    best = -1
    oldest = np.iinfo(np.int64).max
    for sl in range(point_of.shape[0]):
        if sl == pin:
            continue
        if point_of[sl] < 0:
            best = sl
            break
        if stamp[sl] < oldest:
            oldest = stamp[sl]
            best = sl
    if point_of[best] >= 0:
        slot_of[point_of[best]] = -1
    out = cache.slots[best]
    i = cmap[P]
    if opts.rows_mode == ROWS_GATHER:
        M = out.shape[0]
        for k in range(M):
            for jj in range(napt):
                out[k, jj] = K[k, i, cmap[jj]]
    else:
        compute_row_cols(i, opts.parallel, rows, cmap, napt, True, out)
    point_of[best] = P
    slot_of[P] = best
    stamp[best] = istate[IS_CLOCK]
    istate[IS_MISSES] += 1
    return best


# ---------------------------------------------------------------------------
# passes over the (M, n_points) state
# ---------------------------------------------------------------------------
@njit(cache=True)
def _pass_a_block(j0, j1, sums, rowI, rowJ, dI, dJ, update):  # pragma: no cover - jitted
    """v_k += dI K_k[I,:] + dJ K_k[J,:], then F, Dg, Z1, V2 on the columns [j0, j1).

    Kernels with a constant diagonal (``dconst``) enter Dg as one number; only
    those listed in ``nck`` are read from ``diag``.
    """
    diag = sums.diag
    nck = sums.nck
    dconst = sums.dconst
    v = sums.v
    d = sums.d
    u1 = sums.u1
    u2 = sums.u2
    F = sums.F
    Dg = sums.Dg
    Z1 = sums.Z1
    V2 = sums.V2
    M = v.shape[0]
    base = 0.0
    for k in range(M):
        base += d[k] * dconst[k]
    for j in range(j0, j1):
        F[j] = 0.0
        Dg[j] = base
        Z1[j] = 0.0
        V2[j] = 0.0
    for k in range(M):
        dk = d[k]
        a1 = u1[k]
        a2 = u2[k]
        if update:
            for j in range(j0, j1):
                v[k, j] += dI * rowI[k, j] + dJ * rowJ[k, j]
        if dk == 0.0 and a1 == 0.0 and a2 == 0.0:
            continue  # a kernel without weight (the SKM's inactive ones) adds nothing
        for j in range(j0, j1):
            vv = v[k, j]
            F[j] += dk * vv
            Z1[j] += a1 * vv
            V2[j] += a2 * vv * vv
    for r in range(nck.shape[0]):
        k = nck[r]
        dk = d[k]
        for j in range(j0, j1):
            Dg[j] += dk * diag[k, j]


@njit(cache=True, parallel=True)
def _pass_a_parallel(nb, sums, rowI, rowJ, dI, dJ, update):  # pragma: no cover - jitted
    N = sums.v.shape[1]
    for b in prange(nb):
        j0 = (N * b) // nb
        j1 = (N * (b + 1)) // nb
        _pass_a_block(j0, j1, sums, rowI, rowJ, dI, dJ, update)


@njit(cache=True)
def _pass_a(par, nb, sums, rowI, rowJ, dI, dJ, update):  # pragma: no cover - jitted
    if par:
        _pass_a_parallel(nb, sums, rowI, rowJ, dI, dJ, update)
    else:
        _pass_a_block(np.int64(0), sums.v.shape[1], sums, rowI, rowJ, dI, dJ, update)


@njit(cache=True)
def _pass_b_block(j0, j1, v, rowI, I, d, u2, X2, Ri):  # pragma: no cover - jitted
    """X2[j] = sum_k u2_k v_k[I] v_k[j],  Ri[j] = sum_k d_k K_k[I, j] on the columns [j0, j1)."""
    M = v.shape[0]
    for j in range(j0, j1):
        X2[j] = 0.0
        Ri[j] = 0.0
    for k in range(M):
        b = u2[k] * v[k, I]
        dk = d[k]
        if b == 0.0 and dk == 0.0:
            continue
        for j in range(j0, j1):
            X2[j] += b * v[k, j]
            Ri[j] += dk * rowI[k, j]


@njit(cache=True, parallel=True)
def _pass_b_parallel(nb, v, rowI, I, d, u2, X2, Ri):  # pragma: no cover - jitted
    N = v.shape[1]
    for b in prange(nb):
        j0 = (N * b) // nb
        j1 = (N * (b + 1)) // nb
        _pass_b_block(j0, j1, v, rowI, I, d, u2, X2, Ri)


@njit(cache=True)
def _pass_b(par, nb, v, rowI, I, d, u2, X2, Ri):  # pragma: no cover - jitted
    if par:
        _pass_b_parallel(nb, v, rowI, I, d, u2, X2, Ri)
    else:
        _pass_b_block(np.int64(0), v.shape[1], v, rowI, I, d, u2, X2, Ri)


@njit(cache=True)
def _exact_forms(v, gamma, c):  # pragma: no cover - jitted
    """c_k = gamma^T v_k (= gamma^T K_k gamma) recomputed from v (v exact everywhere)."""
    M = v.shape[0]
    N = v.shape[1]
    for k in range(M):
        s = 0.0
        for j in range(N):
            if gamma[j] != 0.0:
                s += gamma[j] * v[k, j]
        c[k] = s if s > 0.0 else 0.0


@njit(cache=True)
def _sums(bank, st):  # pragma: no cover - jitted
    """The arrays the first pass reads and writes, as one record."""
    return KernelSums(st.v, st.d, st.u1, st.u2, st.F, st.Dg, st.Z1, st.V2, bank.diag, bank.nck, bank.dconst)


@njit(types.void(OPTS_T, BREG_T, BANK_T, STATE_T), cache=True)
def refresh(opts, reg, bank, st):  # pragma: no cover - jitted
    """Recompute c from v (v must be exact at every point), the coefficients, and the
    sums F, Dg, Z1, V2."""
    _exact_forms(st.v, st.gamma, st.c)
    reg_coeffs(opts, reg, st.c, st.d, st.u1, st.u2)
    row = bank.diag[:, :]  # unused when update is False (a view of the layout of the solver's rows)
    _pass_a(opts.parallel, opts.nblocks, _sums(bank, st), row, row, 0.0, 0.0, FLAGS[0])


@njit(cache=True)
def _all_points(pts, npts, N):  # pragma: no cover - jitted
    """``pts[:npts]`` is 0, 1, ..., N-1."""
    if npts != N:
        return False
    for jj in range(npts):
        if pts[jj] != jj:
            return False
    return True


@njit(cache=True)
def _sync_kernel(k, K, sv, gsv, pts, npts, add, dense, v):  # pragma: no cover - jitted
    """:func:`sync_precomputed` for kernel k (``dense``: pts are all points, in order)."""
    if dense:
        if not add:
            v[k, :] = 0.0
        for r in range(sv.shape[0]):
            i = sv[r]
            gi = gsv[r]
            for j in range(npts):
                v[k, j] += gi * K[k, i, j]
        return
    if not add:
        for jj in range(npts):
            v[k, pts[jj]] = 0.0
    for r in range(sv.shape[0]):
        i = sv[r]
        gi = gsv[r]
        for jj in range(npts):
            j = pts[jj]
            v[k, j] += gi * K[k, i, j]


@njit(cache=True)
def sync_precomputed(K, sv, gsv, pts, npts, add, v):  # pragma: no cover - jitted
    """v_k[j] (+)= sum_r gsv_r K_k[sv_r, j] at the points j = pts[:npts].

    From scratch (``add`` False: ``sv`` the points with gamma != 0, ``gsv`` their
    gamma) or as an update (``add`` True: ``gsv`` the changes of gamma since
    ``v`` was last exact at those points).
    """
    dense = _all_points(pts, npts, v.shape[1])
    for k in range(v.shape[0]):
        _sync_kernel(k, K, sv, gsv, pts, npts, add, dense, v)


@njit(cache=True, parallel=True)
def sync_precomputed_parallel(K, sv, gsv, pts, npts, add, v):  # pragma: no cover - jitted
    """:func:`sync_precomputed` with the kernels shared out among the threads."""
    dense = _all_points(pts, npts, v.shape[1])
    for k in prange(v.shape[0]):
        _sync_kernel(k, K, sv, gsv, pts, npts, add, dense, v)


@njit(cache=True)
def sync_features(parallel, rows, sv, gsv, pts, add, v):  # pragma: no cover - jitted
    """As :func:`sync_precomputed` at the points ``pts``, with the kernel rows computed
    on the fly."""
    M = v.shape[0]
    npts = pts.shape[0]
    row = np.empty((M, npts))
    if not add:
        for k in range(M):
            for jj in range(npts):
                v[k, pts[jj]] = 0.0
    for r in range(sv.shape[0]):
        i = sv[r]
        gi = gsv[r]
        compute_row_cols(i, parallel, rows, pts, npts, True, row)
        for k in range(M):
            for jj in range(npts):
                v[k, pts[jj]] += gi * row[k, jj]


# ---------------------------------------------------------------------------
# the SMO loop
# ---------------------------------------------------------------------------
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
