r"""The proximal-gradient engine's block bookkeeping: compact iterates and screening bounds.

An iterate keeps only its non-zero blocks (:class:`Iterate`); a zero block is
skipped when a bound on its gradient norm proves that the step keeps it zero
(:class:`ScreeningBounds`, the rule of :mod:`mklkit.engines.proximal`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Iterate", "ScreeningBounds", "embed", "rows_in"]


class Iterate:
    """A primal point in compact form: the non-zero blocks only."""

    __slots__ = ("idx", "A", "U", "b", "z")

    def __init__(self, idx: np.ndarray, A: np.ndarray, U: np.ndarray, b: float, z: np.ndarray) -> None:
        self.idx = idx  # (P,) int64, sorted: non-zero blocks
        self.A = A  # (P, N) coefficients alpha_m
        self.U = U  # (P, N) K_m alpha_m, carried along
        self.b = b
        self.z = z  # (N,) sum_m u_m + b


def embed(src_idx: np.ndarray, rows: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """Rows of ``src_idx`` placed at their positions in the sorted superset ``dst_idx``."""
    out = np.zeros((dst_idx.size, rows.shape[1] if rows.ndim == 2 else 0))
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = rows
    return out


class ScreeningBounds:
    r"""Upper bounds of :math:`\|v\|_{K_m}` from exactly known norms of reference vectors.

    :math:`\|v\|_{K_m} \le \|q\|_{K_m} + \sqrt{\|K_m\|_F}\min(\|v-q\|, \|v+q\|)`
    (triangle inequality for the seminorm, :math:`\lambda_{\max}(K_m) \le
    \|K_m\|_F`).  A relative margin of :math:`10^{-10}` covers the rounding
    of the stored norms.  Block ``m`` refers to reference ``ref_id[m]``
    (-1: none, bound ``inf``); references no block uses are dropped.
    """

    def __init__(self, lsq: np.ndarray, N: int) -> None:
        self.lsq = lsq
        M = lsq.size
        self.ref_id = np.full(M, -1, dtype=np.int64)
        self.ref_norm = np.full(M, np.inf)
        self.Q = np.zeros((8, N))
        self.n = 0

    def add(self, vec: np.ndarray, blocks_: np.ndarray, norms: np.ndarray) -> None:
        if blocks_.size == 0:
            return
        if self.n == self.Q.shape[0]:
            self.compact()
            if self.n == self.Q.shape[0]:
                self.Q = np.concatenate([self.Q, np.zeros_like(self.Q)])
        self.Q[self.n] = vec
        self.ref_id[blocks_] = self.n
        self.ref_norm[blocks_] = norms
        self.n += 1

    def bounds(self, v: np.ndarray, blocks_: np.ndarray) -> np.ndarray:
        out = np.full(blocks_.size, np.inf)
        if blocks_.size == 0 or self.n == 0:
            return out
        ids = self.ref_id[blocks_]
        has = ids >= 0
        if not np.any(has):
            return out
        Q = self.Q[: self.n]
        d_minus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q - v, Q - v), 0.0))
        d_plus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q + v, Q + v), 0.0))
        dist = np.minimum(d_minus, d_plus)
        b = blocks_[has]
        lsq = self.lsq[b]
        vn = float(np.sqrt(v @ v))
        out[has] = (self.ref_norm[b] + lsq * dist[ids[has]]) * (1.0 + 1e-10) + 1e-12 * lsq * vn
        return out

    def compact(self) -> None:
        """Drop reference vectors that no block uses any more."""
        if self.n == 0:
            return
        used = np.unique(self.ref_id[self.ref_id >= 0])
        if used.size == self.n:
            return
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        self.Q[: used.size] = self.Q[used]
        self.n = int(used.size)
        has = self.ref_id >= 0
        self.ref_id[has] = remap[self.ref_id[has]]


def rows_in(src_idx: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """For each block of the sorted set ``dst_idx``, its row in ``src_idx`` (or -1)."""
    out = np.full(dst_idx.size, -1, dtype=np.int64)
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = np.arange(src_idx.size, dtype=np.int64)
    return out
