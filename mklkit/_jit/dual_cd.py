r"""Jitted passes of ``dualcd``: coordinate descent with shrinking (Hsieh et al. 2008, §3.2) on
:math:`\sum_i f_i(\rho_i) + \frac12\sum_m c_m\|L_m^\top\rho\|^2 + b\mathbf 1^\top\rho +
\frac\kappa2(\mathbf 1^\top\rho)^2`, :math:`f_i` piecewise linear, :math:`u = L^\top\rho` kept."""

from collections import namedtuple

import numpy as np
from numba import njit

from ..first_class import fixed_type
from .records import _F1, _F2, _I1, _b1, _f8

#: The factors one row per sample: dense ``Z`` (N, R), or CSR when ``sparse`` (the other a
#: placeholder); ``starts`` (M+1,): the blocks' first columns.
Rows = namedtuple("Rows", "Z data indices indptr sparse starts")
#: The linear pieces of every :math:`f_i`: slope ``a_pos`` on :math:`[0, \text{pos\_hi}]`,
#: ``a_neg`` on :math:`[-\text{neg\_hi}, 0]` (N,) each.
Pieces = namedtuple("Pieces", "pos_hi neg_hi a_pos a_neg")
#: The kernels in play, :math:`c_m` per column (``cc``, 0 out of play), the diagonal
#: :math:`Q_{ii}` and the augmented Lagrangian's :math:`\kappa`.
Play = namedtuple("Play", "blocks cc Q kappa")
#: The dual point, in place: :math:`u = L^\top\rho`, :math:`\rho`, ``total[0]`` :math:`=
#: \mathbf 1^\top\rho` and the sample order ``idx`` (the first ``n_idx`` not shrunk).
Point = namedtuple("Point", "u rho total idx")

fixed_type(Rows, [_F2, _F1, _I1, _I1, _b1, _I1])
fixed_type(Pieces, [_F1] * 4)
fixed_type(Play, [_I1, _F1, _F1, _f8])
fixed_type(Point, [_F1, _F1, _F1, _I1])


@njit(cache=True, nogil=True, inline="always")
def _slopes(r, a_pos, a_neg, pos_hi, neg_hi):
    """Left and right slopes of :math:`f_i` at ``r`` (infinite at the ends of its box)."""
    if r > 0.0:
        left = a_pos
        right = a_pos if r < pos_hi else np.inf
    elif r < 0.0:
        right = a_neg
        left = a_neg if r > -neg_hi else -np.inf
    else:
        left = a_neg if neg_hi > 0.0 else -np.inf
        right = a_pos if pos_hi > 0.0 else np.inf
    return left, right


@njit(cache=True, nogil=True, inline="always")
def _minimize(r, G, H, a_pos, a_neg, pos_hi, neg_hi):
    r"""The minimizer of :math:`f_i(t) + G(t - r) + \tfrac H2(t - r)^2` over the box."""
    t = r - (G + a_pos) / H
    if t > 0.0 and pos_hi > 0.0:
        return min(t, pos_hi)
    t = r - (G + a_neg) / H
    if t < 0.0 and neg_hi > 0.0:
        return max(t, -neg_hi)
    return 0.0


@njit(cache=True, nogil=True, inline="always")
def _shuffle(idx, n, seed):
    np.random.seed(seed)
    for k in range(n - 1, 0, -1):
        j = np.random.randint(0, k + 1)
        t = idx[k]
        idx[k] = idx[j]
        idx[j] = t


@njit(cache=True, nogil=True, inline="always")
def _projected(G, left, right):
    """The projected gradient: the point of the subdifferential interval nearest 0."""
    gl = G + left
    gr = G + right
    if gl > 0.0:
        return gl, gl, gr
    if gr < 0.0:
        return gr, gl, gr
    return 0.0, gl, gr


@njit(cache=True, nogil=True, inline="always")
def _row_dot(i, rows, blocks, cc, u):
    r""":math:`\sum_m c_m L_{m,i}^\top u_m` over the blocks in play."""
    s = 0.0
    if rows.sparse:
        data, indices, indptr = rows.data, rows.indices, rows.indptr
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            s += data[p] * cc[j] * u[j]
        return s
    Z, starts = rows.Z, rows.starts
    for mm in range(blocks.size):
        m = blocks[mm]
        for j in range(starts[m], starts[m + 1]):
            s += Z[i, j] * cc[j] * u[j]
    return s


@njit(cache=True, nogil=True, inline="always")
def _row_axpy(i, d, rows, blocks, cc, u):
    """``u += d`` times row ``i`` of the factors, on the blocks in play."""
    if rows.sparse:
        data, indices, indptr = rows.data, rows.indices, rows.indptr
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if cc[j] != 0.0:
                u[j] += d * data[p]
        return
    Z, starts = rows.Z, rows.starts
    for mm in range(blocks.size):
        m = blocks[mm]
        for j in range(starts[m], starts[m + 1]):
            u[j] += d * Z[i, j]


@njit(cache=True, nogil=True)
def epoch(rows, pieces, play, point, b, n_idx, pg_max_old, pg_min_old, seed):
    """One pass over ``point.idx[:n_idx]`` in random order, shrinking against the last pass's
    extreme projected gradients; the coordinates kept and this pass's extremes."""
    blocks, cc, Q, kappa = play.blocks, play.cc, play.Q, play.kappa
    pos_hi, neg_hi, a_pos, a_neg = pieces.pos_hi, pieces.neg_hi, pieces.a_pos, pieces.a_neg
    u, rho, idx = point.u, point.rho, point.idx
    _shuffle(idx, n_idx, seed)
    pg_max = -np.inf
    pg_min = np.inf
    S = point.total[0]
    k = 0
    while k < n_idx:
        i = idx[k]
        G = _row_dot(i, rows, blocks, cc, u) + b + kappa * S
        r = rho[i]
        left, right = _slopes(r, a_pos[i], a_neg[i], pos_hi[i], neg_hi[i])
        pg, gl, gr = _projected(G, left, right)
        if (left == -np.inf and gr > 0.0 and gr > pg_max_old) or (right == np.inf and gl < 0.0 and gl < pg_min_old):
            n_idx -= 1
            idx[k] = idx[n_idx]
            idx[n_idx] = i
            continue
        pg_max = max(pg_max, pg)
        pg_min = min(pg_min, pg)
        k += 1
        if pg == 0.0:
            continue
        t = _minimize(r, G, Q[i] + kappa, a_pos[i], a_neg[i], pos_hi[i], neg_hi[i])
        d = t - r
        if d != 0.0:
            rho[i] = t
            S += d
            _row_axpy(i, d, rows, blocks, cc, u)
    point.total[0] = S
    return n_idx, pg_max, pg_min


@njit(cache=True, nogil=True)
def row_block_norms(rows, block_of, M):
    r""":math:`\|L_{m,i}\|^2` of every sample and block from the dense or CSR ``rows``, (N, M)."""
    if rows.sparse:
        N = rows.indptr.size - 1
        out = np.zeros((N, M))
        for i in range(N):
            for p in range(rows.indptr[i], rows.indptr[i + 1]):
                out[i, block_of[rows.indices[p]]] += rows.data[p] * rows.data[p]
        return out
    N = rows.Z.shape[0]
    out = np.zeros((N, M))
    for i in range(N):
        for m in range(M):
            s = 0.0
            for j in range(rows.starts[m], rows.starts[m + 1]):
                s += rows.Z[i, j] * rows.Z[i, j]
            out[i, m] = s
    return out
