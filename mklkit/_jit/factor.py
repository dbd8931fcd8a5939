r"""Jitted loops over a factor bank :math:`K_m = L_m L_m^\top`, stored as :math:`L^\top` (R, N).

Every loop takes the factors dense, ``D`` (R, N), or as CSR ``(data, indices, indptr)`` (an empty
``indptr`` selects the dense path).  :math:`K_m v = \sum_k (\ell_k^\top v)\,\ell_k` is computed row by
row, so a pass reads the factors once and gives :math:`\|v\|^2_{K_m}` on the way.
"""

import numpy as np
from numba import njit, prange

from .blocks import FM, parallel_and_serial


@njit(cache=True, fastmath=FM)
def _dot(D, data, indices, indptr, k, v):  # pragma: no cover - jitted
    r""":math:`\ell_k^\top v` for row ``k`` of the stacked factors."""
    s = 0.0
    if indptr.shape[0] == 0:
        for i in range(D.shape[1]):
            s += D[k, i] * v[i]
    else:
        for j in range(indptr[k], indptr[k + 1]):
            s += data[j] * v[indices[j]]
    return s


@njit(cache=True, fastmath=FM)
def _axpy(D, data, indices, indptr, k, a, out):  # pragma: no cover - jitted
    r"""``out`` :math:`\mathrel{+}= a\,\ell_k`."""
    if indptr.shape[0] == 0:
        for i in range(D.shape[1]):
            out[i] += a * D[k, i]
    else:
        for j in range(indptr[k], indptr[k + 1]):
            out[indices[j]] += a * data[j]


@njit(cache=True, fastmath=FM)
def _block_product(D, data, indices, indptr, k0, k1, v, w, two, out, want_out, sq):  # pragma: no cover - jitted
    r"""One task of :func:`block_products`, the kernel of rows ``k0:k1``: ``out`` :math:`\leftarrow L_mL_m^\top v`
    (``want_out``) and ``sq`` :math:`\leftarrow (\|v\|^2_{K_m}, \|w\|^2_{K_m})` (the second 0 unless ``two``)."""
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
    sq[0] = sv
    sq[1] = sw


def block_products(
    D, data, indices, indptr, starts, kern, V, vsel, W, wsel, two, out, want_out
):  # pragma: no cover - jitted
    r"""For every task ``p``, kernel ``m = kern[p]`` on ``v = V[vsel[p]]`` (and ``w = W[wsel[p]]`` when
    ``two``): ``out[p]`` :math:`\leftarrow K_m v` when ``want_out``; returns :math:`v^\top K_m v` and
    :math:`w^\top K_m w`, (P,) each."""
    sq = np.zeros((2, kern.shape[0]))
    for p in prange(kern.shape[0]):
        m = kern[p]
        _block_product(
            D, data, indices, indptr, starts[m], starts[m + 1], V[vsel[p]], W[wsel[p]], two, out[p], want_out, sq[:, p]
        )
    return sq[0], sq[1]


block_products, block_products_serial = parallel_and_serial(block_products, fastmath=FM)


@njit(cache=True, parallel=True, fastmath=FM)
def row_dots(D, data, indices, indptr, starts, V):  # pragma: no cover - jitted
    r"""The stacked coordinates :math:`\beta_m = L_m^\top v_m` (R,) with :math:`v_m` = ``V[m]``."""
    M = starts.shape[0] - 1
    t = np.zeros(starts[M])
    for m in prange(M):
        for k in range(starts[m], starts[m + 1]):
            t[k] = _dot(D, data, indices, indptr, k, V[m])
    return t


@njit(cache=True, parallel=True, fastmath=FM)
def block_combinations(D, data, indices, indptr, starts, c, out):  # pragma: no cover - jitted
    r"""``out[m]`` :math:`= L_m c_m` (M, N) in place, the transpose of :func:`row_dots`; dense factors in
    parallel over chunks of samples (blocks differ in rank too much to share kernels evenly)."""
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


@njit(cache=True, fastmath=FM)
def pivot_batch(G, cand, d, LT, row0, pivots, j0, jmax, stop_sum, floor, accept):  # pragma: no cover - jitted
    r"""Greedy pivoted-Cholesky steps (Harbrecht, Peters & Schneider 2012, Alg. 1) on one batch of candidates.

    ``G`` (B, N): residual kernel rows of the candidates ``cand``; ``d``: the residual diagonal.  While the
    best unused candidate :math:`c` has :math:`d_c \ge` ``accept`` :math:`\cdot \max d`, row
    ``row0 + j - j0`` of ``LT`` :math:`\leftarrow G_c/\sqrt{d_c}` (zero at earlier pivots).  Returns the
    number of pivots ``j`` and why it stopped: 0 batch used up, 1 trace at most ``stop_sum``, 2 diagonal at
    most ``floor``, 3 ``jmax`` reached.
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
def add_symmetric_lower(H, T):  # pragma: no cover - jitted
    r"""``H`` :math:`\mathrel{+}=` the symmetric matrix whose lower triangle is that of ``T`` (a ``syrk`` result),
    in 64 × 64 tiles."""
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
def gather_columns(src, columns, out):  # pragma: no cover - jitted
    r"""``out[a, i] = src[a, columns[i]]`` in place, rows in parallel (three times faster than ``np.take``)."""
    for a in prange(src.shape[0]):
        s = src[a]
        o = out[a]
        for i in range(columns.shape[0]):
            o[i] = s[columns[i]]
