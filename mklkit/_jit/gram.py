"""Jitted in-place passes over (N, N) float64 Gram matrices (distances, symmetry, checks), no temporaries."""

import numpy as np
from numba import njit, prange, types

from .blocks import FM


@njit("void(float64[:, ::1], float64[::1])", cache=True)
def sqdist_symmetric_inplace(G, sq):  # pragma: no cover - jitted
    """Turn ``G = X Xᵀ`` into squared distances in place, exactly symmetric, clipped at 0, zero diagonal."""
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
def sqdist_cross_inplace(G, sqx, sqz):  # pragma: no cover
    """Turn ``G = X Zᵀ`` into squared distances ``sqx_i + sqz_j - 2 G_ij`` (clipped at 0)."""
    n, m = G.shape
    for i in range(n):
        for j in range(m):
            v = sqx[i] + sqz[j] - 2.0 * G[i, j]
            G[i, j] = v if v > 0.0 else 0.0


@njit("void(float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64)", cache=True)
def sqdist_refine_inplace(D, X, Z, sqx, sqz, tau):  # pragma: no cover - jitted
    """Recompute ``D_ij = sum_k (X_ik - Z_jk)^2`` term by term where ``D_ij <= tau (sqx_i + sqz_j)`` (where
    the BLAS form cancels); symmetric in (i, j)."""
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


#: A C-contiguous float64 matrix the loop only reads (writeable or read-only).
_READ_MATRIX = types.Array(types.float64, 2, "C", readonly=True)


@njit(types.void(_READ_MATRIX, _READ_MATRIX, types.float64[:, ::1]), cache=True)
def sqdist_direct(X, Z, out):  # pragma: no cover - jitted
    """``out_ij = sum_k (X_ik - Z_jk)^2`` term by term (few columns); exactly symmetric for ``Z`` = ``X``."""
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
def sqdist_rows_t(A, Xt, out):  # pragma: no cover - jitted
    """:func:`sqdist_direct` of ``A`` (n, d) against the transposed points ``Xt`` (d, N): equal results,
    the inner loop along the contiguous rows of ``Xt``."""
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
def divide_outer_inplace(K, a, b):  # pragma: no cover
    """``K_ij <- K_ij / (a_i b_j)`` in place (unit-diagonal normalisation)."""
    n, m = K.shape
    for i in range(n):
        ai = a[i]
        for j in range(m):
            K[i, j] = K[i, j] / (ai * b[j])


@njit("float64(float64[:, ::1])", cache=True)
def symmetrize_inplace(A):  # pragma: no cover - jitted
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
def all_finite(A):  # pragma: no cover - jitted
    """True when no entry of ``A`` is NaN or infinite."""
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            v = A[i, j]
            if not (v - v == 0.0):
                return False
    return True


@njit("void(float64[:, :, ::1], float64[:, :, ::1])", cache=True, parallel=True)
def kernels_first(src, out):  # pragma: no cover - jitted
    """``out[m, i, j] = src[i, j, m]``, rows in parallel (numpy's strided copy took 5.6 s for 20 × 4,000²)."""
    n, n2, M = src.shape
    for i in prange(n):
        for j in range(n2):
            for m in range(M):
                out[m, i, j] = src[i, j, m]


@njit("void(float64[:, :, ::1], int64[::1], float64[:, :, ::1])", cache=True, parallel=True)
def take_square(K, rows, out):  # pragma: no cover - jitted
    """``out[m] = K[m][rows][:, rows]``, output rows in parallel."""
    M = K.shape[0]
    n = rows.shape[0]
    for t in prange(M * n):
        m = t // n
        a = t - m * n
        src = K[m, rows[a]]
        dst = out[m, a]
        for b in range(n):
            dst[b] = src[rows[b]]


@njit(types.UniTuple(types.float64, 2)(_READ_MATRIX, types.int64), cache=True, fastmath=FM)
def abs_power_bounds(K, steps):  # pragma: no cover - jitted
    r"""``(upper, lower)`` of :math:`\lambda_{\max}(K)` for a symmetric ``K``, from ``steps`` passes over it: the
    power iterates :math:`x_{t+1} \propto |K|x_t` from :math:`x_0 = 1`; ``upper`` the Collatz–Wielandt bound
    :math:`\max_i (|K|x_t)_i/x_{t,i} \ge \rho(|K|) \ge \lambda_{\max}(K)` of the last pass, ``lower`` the
    Rayleigh quotient of :math:`K` at its :math:`x_t` (the same pass); NaN for both where an iterate has an
    entry that is not positive (the bound needs :math:`x > 0`)."""
    n = K.shape[0]
    x = np.ones(n)
    z = np.empty(n)
    upper = np.nan
    lower = np.nan
    for t in range(steps):
        last = t == steps - 1
        quad = 0.0
        for i in range(n):
            s = 0.0
            q = 0.0
            for j in range(n):
                s += abs(K[i, j]) * x[j]
                if last:
                    q += K[i, j] * x[j]
            z[i] = s
            quad += x[i] * q
        up = 0.0
        sq = 0.0
        xx = 0.0
        for i in range(n):
            if not z[i] > 0.0:
                return np.nan, np.nan
            r = z[i] / x[i]
            if r > up:
                up = r
            sq += z[i] * z[i]
            xx += x[i] * x[i]
        upper = up
        if last:
            lower = quad / xx
        nrm = np.sqrt(sq)
        for i in range(n):
            x[i] = z[i] / nrm
    return upper, lower
