r"""Jitted loops over a Gram bank :math:`K \in \mathbb{R}^{M \times N \times N}`.

Every engine needs the block norms :math:`\|v\|_{K_m} = \sqrt{v^\top K_m v}`
for all ``M`` kernels (SpicyMKL §3.5.2: the hot loop when ``M`` is large),
products :math:`K_m v` for a subset of kernels and the prediction
:math:`\sum_m K_m \alpha_m`.  The loops here are array-only and parallel over
kernels (``prange``); the Gram matrices are symmetric, so :math:`K_m v` is
computed row by row on contiguous memory.

All arrays must be C-contiguous float64 (``idx`` int64) so that the cached
signatures match.  Norms are computed as ``sqrt(max(v'Kv, 0))``: a positive
semidefinite matrix can give a tiny negative quadratic form by rounding.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .twins import parallel_and_serial

#: Let LLVM reassociate the inner dot products so that they vectorize; no
#: assumption about NaN or inf is made (those flags stay off).
_FM = {"reassoc", "contract"}

__all__ = [
    "block_norms",
    "block_norms_rows",
    "shifted_block_norms",
    "matvecs",
    "matvecs_subset",
    "matvecs_subset_serial",
    "combine",
    "matvecs_rows",
    "matvecs_rows_serial",
    "matvec_into",
    "block_norm",
    "matvec_and_norm_into",
]


# -- one kernel: the building blocks of every pass over the bank ------------
# Compiled with the loops that call them (no Python in between), so that the
# parallel loops and their single-threaded twins share one body.
@njit(cache=True, fastmath=_FM)
def matvec_into(K: np.ndarray, m: int, v: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    r"""``out`` :math:`\leftarrow K_m v` (row by row: :math:`K_m` is symmetric)."""
    N = K.shape[1]
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += K[m, i, j] * v[j]
        out[i] = s


@njit(cache=True, fastmath=_FM)
def block_norm(K: np.ndarray, m: int, v: np.ndarray) -> float:  # pragma: no cover - jitted
    r""":math:`\|v\|_{K_m} = \sqrt{\max(v^\top K_m v, 0)}`."""
    N = K.shape[1]
    acc = 0.0
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += K[m, i, j] * v[j]
        acc += v[i] * s
    return np.sqrt(acc) if acc > 0.0 else 0.0


@njit(cache=True, fastmath=_FM)
def matvec_and_norm_into(
    K: np.ndarray, m: int, v: np.ndarray, w: np.ndarray, out: np.ndarray
) -> float:  # pragma: no cover - jitted
    r"""``out`` :math:`\leftarrow K_m v` and the return value :math:`\|w\|_{K_m}`, in one read of :math:`K_m`."""
    N = K.shape[1]
    acc = 0.0
    for i in range(N):
        s = 0.0
        t = 0.0
        for j in range(N):
            k = K[m, i, j]
            s += k * v[j]
            t += k * w[j]
        out[i] = s
        acc += w[i] * t
    return np.sqrt(acc) if acc > 0.0 else 0.0


@njit(cache=True, parallel=True, fastmath=_FM)
def block_norms(K: np.ndarray, v: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""All block norms :math:`\|v\|_{K_m}`, ``m = 1..M`` (SpicyMKL §3.5.2).

    Parameters
    ----------
    K : ndarray (M, N, N)
    v : ndarray (N,)

    Returns
    -------
    ndarray (M,)
    """
    M = K.shape[0]
    out = np.empty(M)
    for m in prange(M):
        out[m] = block_norm(K, m, v)
    return out


@njit(cache=True, parallel=True, fastmath=_FM)
def block_norms_rows(K: np.ndarray, A: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""Block norms :math:`\|\alpha_m\|_{K_m}` of per-kernel vectors.

    Parameters
    ----------
    K : ndarray (M, N, N)
    A : ndarray (M, N)
        Row ``m`` is :math:`\alpha_m`.  Zero rows are skipped.

    Returns
    -------
    ndarray (M,)
    """
    M = K.shape[0]
    N = K.shape[1]
    out = np.zeros(M)
    for m in prange(M):
        nz = False
        for j in range(N):
            if A[m, j] != 0.0:
                nz = True
                break
        if nz:
            out[m] = block_norm(K, m, A[m])
    return out


@njit(cache=True, parallel=True, fastmath=_FM)
def shifted_block_norms(
    K: np.ndarray, A: np.ndarray, v: np.ndarray, gamma: float
) -> np.ndarray:  # pragma: no cover - jitted
    r"""Block norms :math:`\|\alpha_m + \gamma v\|_{K_m}` for all ``m``.

    The quantity of the augmented-Lagrangian inner problem (SpicyMKL eq. 47,
    §3.5.2).

    Parameters
    ----------
    K : ndarray (M, N, N)
    A : ndarray (M, N)
        Row ``m`` is :math:`\alpha_m`.
    v : ndarray (N,)
    gamma : float

    Returns
    -------
    ndarray (M,)
    """
    M = K.shape[0]
    N = K.shape[1]
    out = np.empty(M)
    for m in prange(M):
        w = np.empty(N)
        for j in range(N):
            w[j] = A[m, j] + gamma * v[j]
        out[m] = block_norm(K, m, w)
    return out


@njit(cache=True, parallel=True, fastmath=_FM)
def matvecs(K: np.ndarray, v: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""All products :math:`K_m v`, returned as rows of an (M, N) array.

    Parameters
    ----------
    K : ndarray (M, N, N)
    v : ndarray (N,)
    """
    M = K.shape[0]
    N = K.shape[1]
    out = np.empty((M, N))
    for m in prange(M):
        matvec_into(K, m, v, out[m])
    return out


def matvecs_subset(K: np.ndarray, v: np.ndarray, idx: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""Products :math:`K_m v` for ``m`` in ``idx``, as rows of a (len(idx), N) array.

    Parameters
    ----------
    K : ndarray (M, N, N)
    v : ndarray (N,)
    idx : ndarray of int64
    """
    P = idx.shape[0]
    N = K.shape[1]
    out = np.empty((P, N))
    for p in prange(P):
        matvec_into(K, idx[p], v, out[p])
    return out


matvecs_subset, matvecs_subset_serial = parallel_and_serial(matvecs_subset, fastmath=_FM)


@njit(cache=True, parallel=True, fastmath=_FM)
def combine(K: np.ndarray, A: np.ndarray, idx: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""The combined prediction :math:`\sum_{m \in idx} K_m \alpha_m` (SpicyMKL eq. 7).

    Parallel over samples, so that the sum over kernels needs no reduction
    across threads.

    Parameters
    ----------
    K : ndarray (M, N, N)
    A : ndarray (M, N)
        Row ``m`` is :math:`\alpha_m`.
    idx : ndarray of int64
        Kernels to include (the non-zero blocks).

    Returns
    -------
    ndarray (N,)
    """
    N = K.shape[1]
    out = np.zeros(N)
    for i in prange(N):
        s = 0.0
        for p in range(idx.shape[0]):
            m = idx[p]
            for j in range(N):
                s += K[m, i, j] * A[m, j]
        out[i] = s
    return out


def matvecs_rows(K: np.ndarray, A: np.ndarray, idx: np.ndarray) -> np.ndarray:  # pragma: no cover - jitted
    r"""Per-kernel products :math:`K_{idx_p}\alpha_p`, as rows of a (len(idx), N) array.

    Parameters
    ----------
    K : ndarray (M, N, N)
    A : ndarray (len(idx), N)
        Row ``p`` is the coefficient vector of kernel ``idx[p]``.
    idx : ndarray of int64
    """
    P = idx.shape[0]
    N = K.shape[1]
    out = np.empty((P, N))
    for p in prange(P):
        matvec_into(K, idx[p], A[p], out[p])
    return out


matvecs_rows, matvecs_rows_serial = parallel_and_serial(matvecs_rows, fastmath=_FM)
