"""Jitted loops for Gram matrices: in-place passes over (N, N) float64 arrays.

The matrix products themselves go through BLAS (``X @ Z.T``); these loops
turn them into squared distances, make symmetric matrices exactly symmetric
and check values, without the (N, N) temporaries numpy expressions would
allocate.  All arguments are C-contiguous float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types

__all__ = [
    "sqdist_symmetric_inplace",
    "sqdist_cross_inplace",
    "sqdist_refine_inplace",
    "sqdist_direct",
    "divide_outer_inplace",
    "symmetrize_inplace",
    "all_finite",
    "kernels_first",
    "take_square",
]


@njit("void(float64[:, ::1], float64[::1])", cache=True)
def sqdist_symmetric_inplace(G: np.ndarray, sq: np.ndarray) -> None:  # pragma: no cover - jitted
    """Turn the Gram matrix ``G = X Xᵀ`` into squared distances, in place.

    ``D_ij = sq_i + sq_j - 2 G_ij`` averaged with its transpose, clipped at 0,
    zero diagonal: the result is exactly symmetric and non-negative.
    """
    n = G.shape[0]
    for i in range(n):
        G[i, i] = 0.0
        for j in range(i + 1, n):
            a = sq[i] + sq[j] - 2.0 * G[i, j]
            b = sq[j] + sq[i] - 2.0 * G[j, i]
            v = 0.5 * (a + b)
            if v < 0.0:
                v = 0.0
            G[i, j] = v
            G[j, i] = v


@njit("void(float64[:, ::1], float64[::1], float64[::1])", cache=True)
def sqdist_cross_inplace(G: np.ndarray, sqx: np.ndarray, sqz: np.ndarray) -> None:  # pragma: no cover
    """Turn ``G = X Zᵀ`` into squared distances ``sqx_i + sqz_j - 2 G_ij`` (clipped at 0)."""
    n, m = G.shape
    for i in range(n):
        for j in range(m):
            v = sqx[i] + sqz[j] - 2.0 * G[i, j]
            G[i, j] = v if v > 0.0 else 0.0


@njit("void(float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64)", cache=True)
def sqdist_refine_inplace(
    D: np.ndarray, X: np.ndarray, Z: np.ndarray, sqx: np.ndarray, sqz: np.ndarray, tau: float
) -> None:  # pragma: no cover - jitted
    """Recompute ``D_ij = sum_k (X_ik - Z_jk)^2`` directly where cancellation can bite.

    The BLAS form ``sqx_i + sqz_j - 2 <x_i, z_j>`` loses relative accuracy when
    ``D_ij`` is small against ``sqx_i + sqz_j``; entries with
    ``D_ij <= tau (sqx_i + sqz_j)`` are recomputed term by term, so identical
    points get exactly 0 and near-duplicates full accuracy.  The test and the
    direct sum are symmetric in (i, j), so a symmetric ``D`` stays symmetric.
    """
    n, m = D.shape
    d = X.shape[1]
    for i in range(n):
        for j in range(m):
            if D[i, j] <= tau * (sqx[i] + sqz[j]):
                s = 0.0
                for k in range(d):
                    t = X[i, k] - Z[j, k]
                    s += t * t
                D[i, j] = s


#: A C-contiguous float64 matrix that the loop only reads: writeable and
#: read-only arrays (``X.setflags(write=False)``, memory-mapped data) both match.
_READ_MATRIX = types.Array(types.float64, 2, "C", readonly=True)


@njit(types.void(_READ_MATRIX, _READ_MATRIX, types.float64[:, ::1]), cache=True)
def sqdist_direct(X: np.ndarray, Z: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    """``out_ij = sum_k (X_ik - Z_jk)^2`` term by term (for few columns).

    Exact up to the rounding of each term; with ``Z`` the same array as ``X``
    the result is exactly symmetric with zero diagonal, since
    ``(a - b)^2 == (b - a)^2`` in floating point and the terms are summed in
    the same order.
    """
    n, m = out.shape
    d = X.shape[1]
    for i in range(n):
        for j in range(m):
            s = 0.0
            for k in range(d):
                t = X[i, k] - Z[j, k]
                s += t * t
            out[i, j] = s


@njit(types.void(_READ_MATRIX, _READ_MATRIX, types.float64[:, ::1]), cache=True)
def sqdist_rows_t(A: np.ndarray, Xt: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    """``out_ij = sum_k (A_ik - Xt_kj)^2`` for points ``A`` (n, d) against ``Xt`` (d, N), the
    points transposed: the same terms summed in the same order as :func:`sqdist_direct` (equal
    results), with the inner loop running along the contiguous rows of ``Xt`` (vectorized)."""
    n, d = A.shape
    N = Xt.shape[1]
    for i in range(n):
        row = out[i]
        for j in range(N):
            row[j] = 0.0
        for k in range(d):
            a = A[i, k]
            x = Xt[k]
            for j in range(N):
                t = a - x[j]
                row[j] += t * t


@njit("void(float64[:, ::1], float64[::1], float64[::1])", cache=True)
def divide_outer_inplace(K: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:  # pragma: no cover
    """``K_ij <- K_ij / (a_i b_j)`` in place (unit-diagonal normalisation)."""
    n, m = K.shape
    for i in range(n):
        ai = a[i]
        for j in range(m):
            K[i, j] = K[i, j] / (ai * b[j])


@njit("float64(float64[:, ::1])", cache=True)
def symmetrize_inplace(A: np.ndarray) -> float:  # pragma: no cover - jitted
    """Replace ``A`` by ``(A + Aᵀ)/2`` in place; return ``max |A_ij - A_ji|`` before."""
    n = A.shape[0]
    worst = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            d = abs(A[i, j] - A[j, i])
            if d > worst or d != d:
                worst = d
            v = 0.5 * (A[i, j] + A[j, i])
            A[i, j] = v
            A[j, i] = v
    return worst


@njit("boolean(float64[:, ::1])", cache=True)
def all_finite(A: np.ndarray) -> bool:  # pragma: no cover - jitted
    """True when no entry of ``A`` is NaN or infinite."""
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            v = A[i, j]
            if not (v - v == 0.0):
                return False
    return True


@njit("void(float64[:, :, ::1], float64[:, :, ::1])", cache=True, parallel=True)
def kernels_first(src: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    """``out[m, i, j] = src[i, j, m]``: kernels given samples first, (N, N, M), as one
    kernel after the other, (M, N, N); rows in parallel.

    ``np.array(np.moveaxis(src, 2, 0), order="C")`` reads ``src`` with a stride of
    M entries: 20 kernels of 4,000 points took 5.6 s.
    """
    n, n2, M = src.shape
    for i in prange(n):
        for j in range(n2):
            for m in range(M):
                out[m, i, j] = src[i, j, m]


@njit("void(float64[:, :, ::1], int64[::1], float64[:, :, ::1])", cache=True, parallel=True)
def take_square(K: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    """``out[m] = K[m][rows][:, rows]``: the same rows and columns of every kernel, one output
    row at a time in parallel."""
    M = K.shape[0]
    n = rows.shape[0]
    for t in prange(M * n):
        m = t // n
        a = t - m * n
        src = K[m, rows[a]]
        dst = out[m, a]
        for b in range(n):
            dst[b] = src[rows[b]]
