"""Pivoted Cholesky and Nyström of one kernel, read through ``rows(idx)``, within a memory budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.linalg import eigh

from ..._jit.factor import pivot_batch

#: Candidate pivots per batch of kernel columns, and rows per block of a growing factor.
_BATCH = 64
_CHUNK = 256
#: A candidate pivot is taken while its residual is at least this fraction of the largest.
_ACCEPT = 0.5
#: The residual diagonal counts as zero below this fraction of the largest diagonal entry.
_FLOOR = 1e-13
#: Nyström: eigenvalues of K_SS below this fraction of the largest are cut (rounding is amplified
#: by up to its inverse: entries of L L^T accurate to about 2e-8 of the largest).
_EIG_CUTOFF = 1e-8
_NYSTROM_START = 64


class _Budget:
    """Bytes held by factors and working space against ``memory_budget``."""

    def __init__(self, limit: float, N: int, root: str) -> None:
        self.limit = limit
        self.N = N
        self.root = root
        self.used = 0

    def fits(self, nbytes: float) -> bool:
        return self.used + nbytes <= self.limit

    def take(self, nbytes: int) -> None:
        self.used += int(nbytes)

    def release(self, nbytes: int) -> None:
        self.used -= int(nbytes)

    def rows_fitting(self) -> int:
        """Factor rows of N float64 that fit in what is left."""
        return max(0, int((self.limit - self.used) // (8 * self.N)))


@dataclass
class _Approx:
    """A growing factor: blocks of rows of :math:`L^\\top` (each (rows, N)) and the rank; with ``columns``
    one column per distinct point (point ``i`` is column ``columns[i]``, ``counts`` copies of each)."""

    blocks: list[np.ndarray]
    rank: int
    columns: np.ndarray | None = None
    counts: np.ndarray | None = None


def _pivoted_cholesky(
    rows: Callable[[np.ndarray], np.ndarray],
    d0: np.ndarray,
    cap: int,
    tol: float,
    budget: _Budget,
    on_full: Callable[[int, float], None],
) -> tuple[_Approx, np.ndarray]:
    """Greedy pivoted Cholesky of the kernel whose rows ``rows(idx)`` gives, in batches of ``_BATCH``
    candidates; ``on_full(rank, rel_residual)`` raises when the next block of rows does not fit."""
    N = d0.size
    d = d0.copy()
    tr = float(d0.sum())
    stop_sum = tol * tr
    floor = _FLOOR * float(d0.max()) if N else 0.0
    pivots = np.empty(cap, dtype=np.int64)
    blocks: list[np.ndarray] = []
    j = 0
    while j < cap:
        if float(d.sum()) <= stop_sum or float(d.max()) <= floor:
            break
        filled = j - sum(b.shape[0] for b in blocks[:-1])  # rows in use in the last block
        if not blocks or filled == blocks[-1].shape[0]:
            n_rows = min(_CHUNK, cap - j, budget.rows_fitting())
            if n_rows < 1:
                on_full(j, float(d.sum()) / tr)
            budget.take(8 * N * n_rows)
            blocks.append(np.empty((n_rows, N)))
            filled = 0
        live = np.flatnonzero(d > floor)
        B = min(_BATCH, live.size)
        cand = live[np.argpartition(-d[live], B - 1)[:B]] if B < live.size else live
        cand = np.ascontiguousarray(cand, dtype=np.int64)
        G = rows(cand)
        for k, blk in enumerate(blocks):
            n = blk.shape[0] if k < len(blocks) - 1 else filled
            if n:
                G -= blk[:n, cand].T @ blk[:n]
        end = min(j + blocks[-1].shape[0] - filled, cap)
        j, reason = pivot_batch(G, cand, d, blocks[-1], filled, pivots, j, end, stop_sum, floor, _ACCEPT)
        if reason in (1, 2):
            break
    approx = _Approx(blocks, j)
    _trim(approx, budget, N)
    return approx, pivots[:j].copy()


def _trim(approx: _Approx, budget: _Budget, N: int) -> None:
    """Cut the last block to the rows in use, and give the rest back to the budget."""
    if not approx.blocks:
        return
    held = sum(b.shape[0] for b in approx.blocks)
    spare = held - approx.rank
    if spare:
        last = approx.blocks[-1]
        keep = last.shape[0] - spare
        approx.blocks[-1] = last[:keep].copy()
        if keep == 0:
            approx.blocks.pop()
        budget.release(8 * N * spare)


def _nystrom(
    rows: Callable[[np.ndarray], np.ndarray],
    d0: np.ndarray,
    rank: int | None,
    tol: float,
    order: np.ndarray,
    budget: _Budget,
    on_full: Callable[[int, float], None],
) -> tuple[_Approx, np.ndarray, np.ndarray]:
    """Nyström on the first landmarks of ``order``: ``rank`` of them, or doubling until ``tol``."""
    N = d0.size
    tr = float(d0.sum())
    n = min(N, rank) if rank is not None else min(N, _NYSTROM_START)
    rel = 1.0
    while True:
        S = np.ascontiguousarray(np.sort(order[:n]))
        if not budget.fits(8 * N * 2 * n):
            on_full(n, rel)
        budget.take(8 * N * 2 * n)
        C = rows(S)  # (n, N): k(x_S, X)
        Kss = np.ascontiguousarray(C[:, S])
        Kss = 0.5 * (Kss + Kss.T)
        lam, U = eigh(Kss, driver="evd", check_finite=False)
        keep = lam > _EIG_CUTOFF * max(float(lam[-1]), 0.0)
        W = np.ascontiguousarray(U[:, keep] / np.sqrt(lam[keep]))
        LT = np.ascontiguousarray(W.T @ C)
        del C
        budget.release(8 * N * (2 * n - LT.shape[0]))
        rel = max(tr - float(np.einsum("rn,rn->", LT, LT)), 0.0) / tr if tr > 0 else 0.0
        if rank is not None or rel <= tol or n == N:
            return _Approx([LT], LT.shape[0]), S, W
        budget.release(8 * N * LT.shape[0])
        del LT
        n = min(N, 2 * n)
