"""Passes over the (M, n_points) state of the SMO loop: the kernel sums after a step, their
refresh, and their update when points enter or leave the active set."""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types

from ._pair import reg_coeffs
from ._records import BANK_T, BREG_T, FLAGS, OPTS_T, STATE_T, KernelSums
from ._rows import compute_row_cols


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
