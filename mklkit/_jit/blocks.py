r"""Jitted loops over a Gram bank :math:`K` (M, N, N), parallel over kernels: block norms
:math:`\|v\|_{K_m} = \sqrt{\max(v^\top K_mv, 0)}` (SpicyMKL §3.5.2), products :math:`K_mv`
(row by row: :math:`K_m` is symmetric) and the prediction :math:`\sum_m K_m\alpha_m`.
Arrays are C-contiguous float64 (indices int64) so that the cached signatures match.  The loops'
fast-math flags, and their bodies compiled with threads (``prange``) and without, for small reads.
"""

import types
from typing import Any, Callable

import numpy as np
from numba import njit, prange

#: Let LLVM reassociate the inner dot products so that they vectorize (no NaN or inf assumption).
FM = {"reassoc", "contract"}


def parallel_and_serial(body: Callable[..., Any], **options: Any) -> tuple[Any, Any]:
    """``(parallel, serial)``: ``body`` jitted with and without ``parallel=True``, both cached; the serial one
    compiles a copy named ``<name>_serial`` (numba names cache files after the function, not the options)."""
    parallel = njit(cache=True, parallel=True, **options)(body)
    name = body.__name__ + "_serial"
    copy = types.FunctionType(body.__code__, body.__globals__, name, body.__defaults__, body.__closure__)
    copy.__qualname__ = body.__qualname__ + "_serial"
    copy.__module__ = body.__module__
    copy.__doc__ = f"Single-threaded :func:`{body.__name__}` (small reads: no thread start-up)."
    serial = njit(cache=True, **options)(copy)
    return parallel, serial


# one kernel: the building blocks of the passes and of their single-threaded twins
@njit(cache=True, fastmath=FM)
def matvec_into(K, m, v, out):  # pragma: no cover - jitted
    r"""``out`` :math:`\leftarrow K_m v` (row by row: :math:`K_m` is symmetric)."""
    N = K.shape[1]
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += K[m, i, j] * v[j]
        out[i] = s


@njit(cache=True, fastmath=FM)
def block_norm(K, m, v):  # pragma: no cover - jitted
    r""":math:`\|v\|_{K_m} = \sqrt{\max(v^\top K_m v, 0)}`."""
    N = K.shape[1]
    acc = 0.0
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += K[m, i, j] * v[j]
        acc += v[i] * s
    return np.sqrt(acc) if acc > 0.0 else 0.0


@njit(cache=True, fastmath=FM)
def matvec_and_norm_into(K, m, v, w, out):  # pragma: no cover - jitted
    r"""``out`` :math:`\leftarrow K_mv`; returns :math:`\|w\|_{K_m}`; one read of :math:`K_m`."""
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


@njit(cache=True, parallel=True, fastmath=FM)
def block_norms(K, A):  # pragma: no cover - jitted
    r"""Block norms :math:`\|\alpha_m\|_{K_m}` of the rows of ``A`` (M, N), or of its one row (1, N)
    in every kernel; zero rows skipped."""
    M = K.shape[0]
    N = K.shape[1]
    out = np.zeros(M)
    for m in prange(M):
        a = A[m] if A.shape[0] > 1 else A[0]
        nz = False
        for j in range(N):
            if a[j] != 0.0:
                nz = True
                break
        if nz:
            out[m] = block_norm(K, m, a)
    return out


@njit(cache=True, parallel=True, fastmath=FM)
def combine(K, A, idx):  # pragma: no cover - jitted
    r"""The prediction :math:`\sum_{m \in idx} K_m\alpha_m` (SpicyMKL eq. 7), parallel over
    samples so that no reduction crosses threads."""
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


def matvecs_rows(K, A, idx):  # pragma: no cover - jitted
    r"""Products :math:`K_{idx_p}\alpha_p` (``A`` row ``p``, or its one row (1, N) for every ``p``), as rows."""
    P = idx.shape[0]
    N = K.shape[1]
    out = np.empty((P, N))
    for p in prange(P):
        matvec_into(K, idx[p], A[p] if A.shape[0] > 1 else A[0], out[p])
    return out


matvecs_rows, matvecs_rows_serial = parallel_and_serial(matvecs_rows, fastmath=FM)
