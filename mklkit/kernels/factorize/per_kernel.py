"""One kernel of a bank factored (exact, or by greedy pivoted Cholesky or Nyström read through ``rows(idx)``,
on all points or the distinct ones) and normalised, within the memory budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh

from ..._jit.factor import pivot_batch
from ..memory import format_bytes
from ..description import BankKernel, _check_normalizable
from .algorithms import EXACT_METHODS, KernelFactor, _diag, _exact_rows, _kernel_rows
from .points import _Groups
from .settings import FactorError, _budget_key, _key


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


@dataclass
class _Budget:
    """Bytes held by factors and working space against ``memory_budget``."""

    limit: float
    N: int
    used: int = 0

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


@dataclass
class _Factorization:
    """The settings and state of one ``build_factor_bank`` call that every kernel reads; ``order``: the
    points in the order Nyström takes its landmarks, drawn from ``seed``."""

    normalize: str
    rank: int | None
    tol: float
    seed: int
    budget: _Budget
    working: int
    fair_rank: int
    root: str
    weights: np.ndarray | None = None
    rank_so_far: int = 0
    order: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.order = np.random.default_rng(np.random.SeedSequence(int(self.seed))).permutation(self.budget.N)
        if self.weights is not None:
            self.weights = np.asarray(self.weights, dtype=np.float64)


def _factor_one(
    m: int, spec: BankKernel, kind: str, groups: _Groups, run: _Factorization, explicit: Any = None
) -> tuple[KernelFactor, Any]:
    """Kernel ``m``: its :class:`KernelFactor` and its rows of :math:`L^\\top` (array, CSR or :class:`_Approx`);
    ``explicit``: the kernel function's feature map (``kind="feature_map"``)."""
    normalize = run.normalize
    N = groups.X.shape[0]
    kf = KernelFactor(spec, kind, 0, 1.0, 0.0, explicit=explicit)
    exact = kind in EXACT_METHODS
    if exact:
        blk, diag = _exact_rows(kf, groups, normalize == "diagonal", "X")
    else:
        A = np.ascontiguousarray(groups.dense(spec.features))
        diag = _diag(spec.function, A, spec.label, "X")
    tr_raw = float(diag.sum()) if run.weights is None else float(np.asarray(diag) @ run.weights)
    where = f"kernel {m} {spec.label!r}"
    _check_normalizable(where, normalize, tr_raw, diag, built=True)
    scale = kf.scale = 1.0 / math.sqrt(tr_raw) if normalize == "trace" else 1.0
    if normalize == "trace":
        trace = 1.0 if run.weights is None else float(diag.sum()) / tr_raw
    else:
        trace = float(N) if normalize == "diagonal" else tr_raw
    kf.trace = trace
    if exact:
        kf.rank = int(blk.shape[0])
    else:
        blk = _approximate(kf, A, diag, groups, run, where)
    sq = _squared_norm(blk) * scale * scale
    kf.trace_error = max(trace - sq, 0.0)
    if exact and scale != 1.0:
        blk = blk * scale
    elif isinstance(blk, _Approx) and scale != 1.0:
        for b in blk.blocks:
            b *= scale
    return kf, blk


@dataclass
class _Points:
    """The points ``P`` an approximation factors the kernel on (all N, or the distinct ones with their
    counts ``w`` and ``dup`` = (index among them, counts)), their ``k(p, p)`` ``dk`` and the
    unit-diagonal divisors ``dP`` (``None`` unless ``"diagonal"``)."""

    P: np.ndarray
    w: np.ndarray | None
    dP: np.ndarray | None
    dk: np.ndarray
    dup: tuple[np.ndarray, np.ndarray] | None


def _points_to_factor(kf: KernelFactor, A: np.ndarray, diag: np.ndarray, groups: _Groups, normalize: str) -> _Points:
    r"""All N points, or for pivoted Cholesky the distinct ones when some repeat: with :math:`P` their
    indicator and :math:`C` their counts, :math:`K = PK_uP^\top` and the factor of :math:`C^{1/2}K_uC^{1/2}`
    has the residual trace of :math:`K` (the same tolerance), :math:`L = PC^{-1/2}\tilde L`."""
    N = groups.X.shape[0]
    dn = diag if normalize == "diagonal" else None
    dup = None
    if kf.method == "pivoted_cholesky":
        U, inverse, counts = groups.unique(kf.spec.features)
        if U.shape[0] < N:
            dup = (inverse, counts)
    if dup is None:
        return _Points(A, None, dn, diag, None)
    copy = np.empty(U.shape[0], dtype=np.intp)
    copy[dup[0]] = np.arange(N)  # one copy of each distinct point (all are equal)
    return _Points(U, dup[1], None if dn is None else dn[copy], diag[copy], dup)


def _approximate(
    kf: KernelFactor, A: np.ndarray, diag: np.ndarray, groups: _Groups, run: _Factorization, where: str
) -> _Approx:
    """The rows of :math:`L^\\top` by pivoted Cholesky or Nyström; ``kf`` gets the basis, points and rank."""
    func, label = kf.spec.function, kf.spec.label
    pts = _points_to_factor(kf, A, diag, groups, run.normalize)
    P, w, dP = pts.P, pts.w, pts.dP
    # rows of the weighted kernel: k(p_i, p_j) sqrt(c_i c_j) / sqrt(dn_i dn_j)
    dw = dP if w is None else (1.0 / w if dP is None else dP / w)
    d0 = np.ones(P.shape[0]) if dP is not None else pts.dk.copy()
    if w is not None:
        d0 *= w

    base = groups.base_rows(kf.spec.features, func.uses, pts.dup is not None) if func.uses is not None else None

    def rows(idx: np.ndarray) -> np.ndarray:
        dA = None if dw is None else dw[idx]
        return _kernel_rows(func, np.ascontiguousarray(P[idx]), P, dA, dw, label, None if base is None else base(idx))

    on_full = _budget_exhausted(run, where, groups.X.shape[0])
    run.budget.take(run.working)
    if kf.method == "pivoted_cholesky":
        cap = groups.X.shape[0] if run.rank is None else min(run.rank, groups.X.shape[0])
        blk, piv = _pivoted_cholesky(rows, d0, min(cap, P.shape[0]), run.tol, run.budget, on_full)
        _keep_pivots(kf, blk, piv, pts)
    else:
        dn = diag if run.normalize == "diagonal" else None
        blk, S, W = _nystrom(rows, d0, run.rank, run.tol, run.order, run.budget, on_full)
        kf.basis, kf.points = W, np.ascontiguousarray(A[S])
        kf.point_diag = None if dn is None else dn[S].copy()
    run.budget.release(run.working)
    kf.rank = blk.rank
    return blk


def _budget_exhausted(run: _Factorization, where: str, N: int) -> Callable[[int, float], None]:
    """What runs when ``tol`` is not reached before the budget is full: a :class:`FactorError`."""
    root, tol, budget = run.root, run.tol, run.budget

    def on_full(r: int, rel: float) -> None:
        what = (
            f"not reached within {_budget_key(root)} = {format_bytes(budget.limit)}: "
            f"{where} has relative residual trace {rel:.3g} at rank {r}, and no more rows "
            f"of {N} points fit (total rank so far {run.rank_so_far + r}); loosen "
            f"{_key(root, 'tol')}, set {_key(root, 'rank')} <= {run.fair_rank} (fits for "
            f"every approximated kernel) or raise {_budget_key(root)}"
        )
        raise FactorError(f"{_key(root, 'tol')} = {tol:g} is {what}", key=_key(root, "tol"), problem=what, value=tol)

    return on_full


def _keep_pivots(kf: KernelFactor, blk: _Approx, piv: np.ndarray, pts: _Points) -> None:
    """Unweight the factor of the distinct points; keep the pivots' basis, points and diagonals in ``kf``."""
    if pts.w is not None:
        for b in blk.blocks:
            b /= np.sqrt(pts.w)
    # L_P = L[P, :]; row j of L^T is zero at the pivots before j: L_P is lower triangular
    LPt = np.vstack([b[:, piv] for b in blk.blocks]) if blk.blocks else np.zeros((0, 0))
    kf.basis = np.ascontiguousarray(LPt.T)
    kf.points = np.ascontiguousarray(pts.P[piv])
    kf.point_diag = None if pts.dP is None else pts.dP[piv].copy()
    if pts.dup is not None:  # every copy of a distinct point gets its column when assembled
        blk.columns, blk.counts = pts.dup


def _squared_norm(blk: Any) -> float:
    if isinstance(blk, _Approx):
        if blk.counts is not None:  # columns of distinct points, each for its copies
            return float(sum(np.einsum("rn,rn,n->", b, b, blk.counts) for b in blk.blocks))
        return float(sum(np.einsum("rn,rn->", b, b) for b in blk.blocks))
    if sp.issparse(blk):
        return float(blk.multiply(blk).sum())
    return float(np.einsum("rn,rn->", blk, blk))
