"""Kernel rows computed from the features (and gathered from a precomputed bank) into the
row cache of the SMO loop."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._records import FAM_POLY, FAM_RBF, IS_CLOCK, IS_HITS, IS_MISSES, ROWS_GATHER


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
