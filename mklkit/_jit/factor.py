r"""Jitted loops over a factor bank :math:`K_m = L_m L_m^\top`.

The factors are stored transposed and stacked, :math:`L^\top \in \mathbb{R}^{R\times N}`
(block ``m`` = rows ``starts[m]:starts[m+1]``), either as a C-contiguous
array ``D`` (R, N) or in CSR form ``(data, indices, indptr)``.  Every loop
takes both; a dense bank passes empty CSR arrays (``indptr.shape[0] == 0``
selects the dense path), a sparse one an empty ``D``.

One kernel's product :math:`K_m v = \sum_{k \in m} (\ell_k^\top v)\,\ell_k`
(:math:`\ell_k` the rows of :math:`L_m^\top`) is computed row by row: the dot
product and the update of the result read the same row, which is still in
cache for the second read, so the whole pass reads the factors from memory
once, where two BLAS calls (:math:`t = L_m^\top v`, then :math:`L_m t`) read
them twice.  The same pass gives :math:`\|v\|^2_{K_m} = \sum_k (\ell_k^\top v)^2`
and, for a second vector, :math:`\|w\|^2_{K_m}`.

Loops are parallel over kernels (``prange``); :func:`block_products` is
also compiled without threads, for small banks (the engines choose by
:data:`mklkit._jit.spicy.PARALLEL_WORK`).  Arrays are C-contiguous
float64, indices int64.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .twins import parallel_and_serial

__all__ = [
    "block_products",
    "block_products_serial",
    "row_dots",
    "block_combinations",
    "pivot_batch",
    "add_symmetric_lower",
]

_FM = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FM)
def _dot(
    D: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, k: int, v: np.ndarray
) -> float:  # pragma: no cover - jitted
    r""":math:`\ell_k^\top v` for row ``k`` of the stacked factors."""
    s = 0.0
    if indptr.shape[0] == 0:
        for i in range(D.shape[1]):
            s += D[k, i] * v[i]
    else:
        for j in range(indptr[k], indptr[k + 1]):
            s += data[j] * v[indices[j]]
    return s


@njit(cache=True, fastmath=_FM)
def _axpy(
    D: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, k: int, a: float, out: np.ndarray
) -> None:  # pragma: no cover - jitted
    r"""``out`` :math:`\mathrel{+}= a\,\ell_k`."""
    if indptr.shape[0] == 0:
        for i in range(D.shape[1]):
            out[i] += a * D[k, i]
    else:
        for j in range(indptr[k], indptr[k + 1]):
            out[indices[j]] += a * data[j]


@njit(cache=True, fastmath=_FM)
def _block_product(
    D: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    k0: int,
    k1: int,
    v: np.ndarray,
    w: np.ndarray,
    two: bool,
    out: np.ndarray,
    want_out: bool,
) -> tuple[float, float]:  # pragma: no cover - jitted
    r"""One kernel (rows ``k0:k1``): ``out`` :math:`\leftarrow L_mL_m^\top v` (when
    ``want_out``); returns :math:`(\|v\|^2_{K_m}, \|w\|^2_{K_m})` (the second only when
    ``two``, else 0)."""
    if want_out:
        for i in range(out.shape[0]):
            out[i] = 0.0
    sv = 0.0
    sw = 0.0
    for k in range(k0, k1):
        a = _dot(D, data, indices, indptr, k, v)
        sv += a * a
        if two:
            b = _dot(D, data, indices, indptr, k, w)
            sw += b * b
        if want_out:
            _axpy(D, data, indices, indptr, k, a, out)
    return sv, sw


@njit(cache=True, fastmath=_FM)
def _task(
    D: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    k0: int,
    k1: int,
    v: np.ndarray,
    w: np.ndarray,
    two: bool,
    out: np.ndarray,
    want_out: bool,
    sq: np.ndarray,
) -> None:  # pragma: no cover - jitted
    """One task of :func:`block_products`, the kernel of rows ``k0:k1``: ``out`` (its row of
    the products) and ``sq`` (its column of the quadratic forms, (2,))."""
    a, b = _block_product(D, data, indices, indptr, k0, k1, v, w, two, out, want_out)
    sq[0] = a
    sq[1] = b


def block_products(
    D: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    starts: np.ndarray,
    kern: np.ndarray,
    V: np.ndarray,
    vsel: np.ndarray,
    W: np.ndarray,
    wsel: np.ndarray,
    two: bool,
    out: np.ndarray,
    want_out: bool,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""For every ``p``: kernel ``m = kern[p]`` applied to ``v = V[vsel[p]]``.

    Parameters
    ----------
    D, data, indices, indptr : the stacked factors :math:`L^\top` (dense or CSR; see module)
    starts : ndarray (M + 1,)
        Row offsets of the blocks.
    kern : ndarray (P,)
        Kernel of each task (repeats allowed).
    V : ndarray (n_v, N)
        Vectors; task ``p`` uses row ``vsel[p]``.
    W : ndarray (n_w, N)
        Second vectors, used when ``two``; task ``p`` uses row ``wsel[p]``.
    out : ndarray (P, N)
        Row ``p`` :math:`\leftarrow K_m v` when ``want_out`` (else unused: pass (P, 0)).

    Returns
    -------
    sq_v, sq_w : ndarray (P,)
        :math:`v^\top K_m v` and :math:`w^\top K_m w` (0 unless ``two``).
    """
    sq = np.zeros((2, kern.shape[0]))
    for p in prange(kern.shape[0]):
        m = kern[p]
        _task(
            D, data, indices, indptr, starts[m], starts[m + 1], V[vsel[p]], W[wsel[p]], two, out[p], want_out, sq[:, p]
        )
    return sq[0], sq[1]


block_products, block_products_serial = parallel_and_serial(block_products, fastmath=_FM)


@njit(cache=True, parallel=True, fastmath=_FM)
def row_dots(
    D: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, starts: np.ndarray, V: np.ndarray
) -> np.ndarray:  # pragma: no cover - jitted
    r"""The stacked coordinates :math:`\beta_m = L_m^\top v_m` (R,) with :math:`v_m` = ``V[m]``."""
    M = starts.shape[0] - 1
    t = np.zeros(starts[M])
    for m in prange(M):
        for k in range(starts[m], starts[m + 1]):
            t[k] = _dot(D, data, indices, indptr, k, V[m])
    return t


@njit(cache=True, parallel=True, fastmath=_FM)
def block_combinations(
    D: np.ndarray,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    starts: np.ndarray,
    c: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - jitted
    r"""``out[m]`` :math:`= L_m c_m = \sum_{k \in m} c_k\,\ell_k` (M, N), the transpose of
    :func:`row_dots`, written in place.

    Dense factors: parallel over chunks of samples (every thread reads its columns of every
    row once; a bank's blocks differ in rank by hundreds, so kernels would share the work
    unevenly); sparse ones: parallel over kernels.
    """
    M = starts.shape[0] - 1
    if indptr.shape[0] == 0:
        N = D.shape[1]
        B = 4096
        for bj in prange((N + B - 1) // B):
            j0 = bj * B
            j1 = min(N, j0 + B)
            for m in range(M):
                o = out[m]
                for j in range(j0, j1):
                    o[j] = 0.0
                for k in range(starts[m], starts[m + 1]):
                    ck = c[k]
                    if ck != 0.0:
                        for j in range(j0, j1):
                            o[j] += ck * D[k, j]
    else:
        for m in prange(M):
            o = out[m]
            o[:] = 0.0
            for k in range(starts[m], starts[m + 1]):
                if c[k] != 0.0:
                    _axpy(D, data, indices, indptr, k, c[k], o)


@njit(cache=True, fastmath=_FM)
def pivot_batch(
    G: np.ndarray,
    cand: np.ndarray,
    d: np.ndarray,
    LT: np.ndarray,
    row0: int,
    pivots: np.ndarray,
    j0: int,
    jmax: int,
    stop_sum: float,
    floor: float,
    accept: float,
) -> tuple[int, int]:  # pragma: no cover - jitted
    r"""Greedy pivoted-Cholesky steps on one batch of candidate pivots.

    ``G`` (B, N) holds the residual kernel rows :math:`(K - L L^\top)[c, :]`
    of the candidate points ``cand``; ``d`` (N,) the residual diagonal;
    ``pivots[:j0]`` the pivots so far.  While the residual trace exceeds
    ``stop_sum``, the largest residual diagonal exceeds ``floor``,
    ``j < jmax`` and the best unused candidate :math:`c` has
    :math:`d_c \ge` ``accept`` :math:`\cdot \max d`, it takes :math:`c` as
    pivot ``j``: row ``row0 + j - j0`` of ``LT`` :math:`\leftarrow G_c/\sqrt{d_c}`
    (exactly zero at the earlier pivots, so that :math:`L_P` is lower
    triangular), :math:`d \mathrel{-}= \ell_j^2`, and the other candidates'
    rows are updated.  Each step is one step of the pivoted Cholesky
    decomposition (Harbrecht, Peters & Schneider 2012, Alg. 1) with the pivot
    chosen among the candidates.

    Returns
    -------
    j : int
        The number of pivots now (``pivots[:j]``; rows ``row0 .. row0 + j - j0``
        of ``LT`` written).
    reason : int
        0: batch used up or its best candidate below ``accept``;
        1: residual trace at most ``stop_sum``; 2: residual diagonal at most
        ``floor``; 3: ``jmax`` reached.
    """
    B = G.shape[0]
    N = G.shape[1]
    used = np.zeros(B, dtype=np.bool_)
    j = j0
    while True:
        if j >= jmax:
            return j, 3
        dsum = 0.0
        dmax = 0.0
        for i in range(N):
            dsum += d[i]
            if d[i] > dmax:
                dmax = d[i]
        if dsum <= stop_sum:
            return j, 1
        if dmax <= floor:
            return j, 2
        best = -1
        bv = 0.0
        for b in range(B):
            if not used[b] and d[cand[b]] > bv:
                bv = d[cand[b]]
                best = b
        if best < 0 or bv < accept * dmax or bv <= floor:
            return j, 0
        used[best] = True
        i = cand[best]
        piv = np.sqrt(bv)
        inv = 1.0 / piv
        row = row0 + j - j0
        for q in range(N):
            LT[row, q] = G[best, q] * inv
        for q in range(j):
            LT[row, pivots[q]] = 0.0
        LT[row, i] = piv
        for q in range(N):
            r = d[q] - LT[row, q] * LT[row, q]
            d[q] = r if r > 0.0 else 0.0
        d[i] = 0.0
        for b in range(B):
            if not used[b]:
                a = LT[row, cand[b]]
                if a != 0.0:
                    for q in range(N):
                        G[b, q] -= a * LT[row, q]
        pivots[j] = i
        j += 1


@njit(cache=True, parallel=True)
def add_symmetric_lower(H: np.ndarray, T: np.ndarray) -> None:  # pragma: no cover - jitted
    r"""``H`` :math:`\mathrel{+}=` the symmetric matrix whose lower triangle is that of ``T``.

    ``T`` is the C-contiguous view of a BLAS ``syrk`` result (only one
    triangle is written there); tiles of 64 × 64 keep the transposed reads
    in cache.  The increments of ``H`` are exactly symmetric.
    """
    N = H.shape[0]
    B = 64
    nb = (N + B - 1) // B
    for bi in prange(nb):
        i0 = bi * B
        i1 = min(N, i0 + B)
        for bj in range(nb):
            j0 = bj * B
            j1 = min(N, j0 + B)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    H[i, j] += T[i, j] if i >= j else T[j, i]


@njit(cache=True, parallel=True)
def gather_columns(src: np.ndarray, columns: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - jitted
    r"""``out[a, i] = src[a, columns[i]]``: the rows of a factor held on distinct points,
    one column per point (``columns`` int64), written in place, rows in parallel.

    ``np.take(src, columns, axis=1, out=out)`` takes three times as long, and
    without ``out`` it allocates (and first-touches) a temporary as large as the
    rows: 50 of them on w8a.
    """
    for a in prange(src.shape[0]):
        s = src[a]
        o = out[a]
        for i in range(columns.shape[0]):
            o[i] = s[columns[i]]
