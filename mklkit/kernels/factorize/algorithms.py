r"""The factorizations of one kernel, :math:`K \approx LL^\top`, and their extension to new points.

Explicit feature maps (``linear``, the monomial map of ``poly``), greedy
pivoted Cholesky and Nyström, each described in
:mod:`mklkit.kernels.factorize`; :class:`KernelFactor` (how one kernel was
factored) and :class:`FactorMap` (the factor rows of new points).  Building
a whole bank from its description is :mod:`mklkit.kernels.factorize.build`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh, solve_triangular

from ..._jit.factor import pivot_batch
from ..._jit.gram import all_finite, divide_outer_inplace
from ...data import Dataset
from ..description import BankError, BankKernel
from ..functions import BaseRows, KernelFunction, Linear, Poly

__all__ = ["KernelFactor", "FactorMap", "FoldedFactorMap", "poly_map_dim"]

#: Candidate pivots per batch of kernel columns, and rows per block of a growing factor.
_BATCH = 64
_CHUNK = 256
#: A candidate pivot is taken while its residual is at least this fraction of the largest.
_ACCEPT = 0.5
#: The residual diagonal counts as zero below this fraction of the largest diagonal entry.
_FLOOR = 1e-13
#: Nyström: eigenvalues of K_SS below this fraction of the largest are cut.  Rounding in
#: the kernel columns is amplified by up to its inverse: entries of L L^T are accurate to
#: about eps / _EIG_CUTOFF (2e-8) relative to the largest (pivoted Cholesky: to round-off).
_EIG_CUTOFF = 1e-8
_NYSTROM_START = 64


# ---------------------------------------------------------------------------
# Explicit feature maps
# ---------------------------------------------------------------------------
def poly_map_dim(n_features: int, degree: int, offset: float) -> int:
    r"""Dimension of the monomial map of :math:`(s\langle x,z\rangle + c)^p` on ``n_features``
    features: :math:`\binom{d+p}{p}`, or :math:`\binom{d+p-1}{p}` when :math:`c = 0`."""
    if offset > 0.0:
        return math.comb(n_features + degree, degree)
    return math.comb(n_features + degree - 1, degree)


def _poly_monomials(func: Poly, d: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    r"""Multi-indices (as sorted column tuples) and coefficients of the monomial map."""
    p, c, s = int(func.degree), float(func.offset), float(func.scale)
    terms: list[tuple[int, ...]] = []
    coef: list[float] = []
    for j in range(0 if c > 0.0 else p, p + 1):
        w = math.comb(p, j) * c ** (p - j) * s**j * math.factorial(j)
        for cols in itertools.combinations_with_replacement(range(d), j):
            mult = 1
            for _, run in itertools.groupby(cols):
                mult *= math.factorial(len(list(run)))
            terms.append(cols)
            coef.append(math.sqrt(w / mult))
    return terms, np.array(coef)


def _poly_rows(terms: Sequence[tuple[int, ...]], coef: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The monomial map of the points ``A`` (n, d), transposed: (dim, n)."""
    out = np.empty((len(terms), A.shape[0]))
    At = np.ascontiguousarray(A.T)
    for k, cols in enumerate(terms):
        row = out[k]
        row.fill(coef[k])
        for c in cols:
            row *= At[c]
    return out


def _exact_dim(spec: BankKernel) -> int | None:
    """Dimension of the explicit feature map of a kernel, ``None`` when it has none here."""
    f = spec.function
    if type(f) is Linear:
        return len(spec.features)
    if type(f) is Poly:
        return poly_map_dim(len(spec.features), int(f.degree), float(f.offset))
    return None


# ---------------------------------------------------------------------------
# Per-kernel factors and the map to new points
# ---------------------------------------------------------------------------
@dataclass
class KernelFactor:
    """How kernel ``m`` of a factor bank was factored, and what extends it to new points.

    Attributes
    ----------
    spec : BankKernel
        Function, parameters and feature group.
    method : {"linear", "poly_map", "pivoted_cholesky", "nystrom"}
    rank : int
        :math:`r_m`.
    scale : float
        Factor on every row of the map: :math:`1/\\sqrt{\\mathrm{tr}K}` for
        ``"trace"``, else 1.
    trace : float
        :math:`\\mathrm{tr}K_m` of the normalised kernel (from its diagonal).
    trace_error : float
        :math:`\\mathrm{tr}K_m - \\|L_m\\|_F^2` (clipped at 0).
    points : ndarray (p, |g|) or None
        Pivots (pivoted Cholesky) or landmarks (Nyström), their feature values.
    point_diag : ndarray (p,) or None
        :math:`k(x, x)` of those points (``"diagonal"`` normalisation).
    basis : ndarray or None
        :math:`L_P` (r, r) lower triangular (pivoted Cholesky) or
        :math:`U_k\\Lambda_k^{-1/2}` (p, r) (Nyström), before ``scale``.
    terms, coef : monomials and their coefficients (``"poly_map"``).
    """

    spec: BankKernel
    method: str
    rank: int
    scale: float
    trace: float
    trace_error: float = 0.0
    points: np.ndarray | None = field(default=None, repr=False)
    point_diag: np.ndarray | None = field(default=None, repr=False)
    basis: np.ndarray | None = field(default=None, repr=False)
    terms: list[tuple[int, ...]] | None = field(default=None, repr=False)
    coef: np.ndarray | None = field(default=None, repr=False)

    @property
    def relative_trace_error(self) -> float:
        """``trace_error / trace`` (0 for a zero kernel)."""
        return self.trace_error / self.trace if self.trace > 0 else 0.0


def _kernel_rows(func: KernelFunction, A: np.ndarray, B: np.ndarray, dA: np.ndarray | None,
                 dB: np.ndarray | None, label: str, base: np.ndarray | None = None) -> np.ndarray:
    r""":math:`k(a_i, b_j)` (n_A, n_B) through the kernel function, divided by
    :math:`\sqrt{d_{A,i} d_{B,j}}` when the diagonals are given (zero where :math:`d_B = 0`).

    ``base``: the function's base matrix of ``A`` against ``B``, already
    computed (:class:`~mklkit.kernels.functions.BaseRows`); it is overwritten.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        G = func.gram(A, B) if base is None else func.from_base(base, out=base)
    if not isinstance(G, np.ndarray) or G.shape != (A.shape[0], B.shape[0]):
        got = G.shape if isinstance(G, np.ndarray) else type(G).__name__
        raise BankError(f"kernel {label!r}: gram() must return an array of shape "
                        f"{(A.shape[0], B.shape[0])}; got {got}")
    G = np.ascontiguousarray(G, dtype=np.float64)
    if G.size and not all_finite(G):
        raise BankError(f"kernel {label!r} has NaN or infinite values (overflow?); standardise the "
                        "features or change its parameters")
    if dA is not None and dB is not None:
        sB = np.sqrt(dB)
        zero = sB == 0.0
        sB[zero] = 1.0
        divide_outer_inplace(G, np.sqrt(dA), sB)
        G[:, zero] = 0.0
    return G


@dataclass
class FactorMap:
    """The map from points to the stacked factor rows of a factor bank.

    :meth:`transform` gives :math:`L(X_{new})^\\top` (R, n_new) with
    :math:`L_m(X_{new}) L_m^\\top \\approx K_m(X_{new}, X)` (equal for exact
    factors), normalised like the training bank.

    Attributes
    ----------
    kernels : list of KernelFactor
        One per kernel, in bank order.
    starts : ndarray (M + 1,)
    normalize : {"trace", "diagonal", "none"}
    n_features : int
        Columns of the training data (new points must have as many).
    sparse : bool
        ``transform`` returns CSR (every kernel an exact linear factor on
        sparse features).
    """

    kernels: list[KernelFactor]
    starts: np.ndarray
    normalize: str
    n_features: int
    sparse: bool = False

    @property
    def names(self) -> list[str]:
        """One readable label per kernel."""
        return [k.spec.label for k in self.kernels]

    @property
    def methods(self) -> list[str]:
        """How each kernel was factored: ``linear``, ``poly_map``, ``pivoted_cholesky``, ``nystrom``."""
        return [k.method for k in self.kernels]

    def transform(self, X_new: Any) -> Any:
        """Factor rows of new points.

        Parameters
        ----------
        X_new : ndarray (n_new, d), scipy.sparse matrix or Dataset
            Points with the columns of the training data.

        Returns
        -------
        ndarray or scipy.sparse.csr_matrix (R, n_new)
            Block ``m`` (rows ``starts[m]:starts[m+1]``) is :math:`L_m(X_{new})^\\top`;
            CSR when ``sparse``.
        """
        X = _new_points(X_new, self.n_features)
        groups = _Groups(X)
        if self.sparse:
            return sp.vstack([self._block(kf, groups) for kf in self.kernels], format="csr")
        out = np.empty((int(self.starts[-1]), X.shape[0]))
        for m, kf in enumerate(self.kernels):
            B = self._block(kf, groups)
            out[self.starts[m]:self.starts[m + 1]] = B.toarray() if sp.issparse(B) else B
        return out

    def _block(self, kf: KernelFactor, groups: "_Groups") -> Any:
        """Rows of :math:`L_m(X_{new})^\\top` for one kernel, (r_m, n_new)."""
        diagonal = self.normalize == "diagonal"
        if kf.method in ("linear", "poly_map"):
            B, _ = _exact_rows(kf, groups, diagonal, "X_new")
        else:
            assert kf.points is not None and kf.basis is not None
            spec = kf.spec
            A = groups.dense(spec.features)
            dnew = _diag(spec.function, A, spec.label, "X_new") if diagonal else None
            C = _kernel_rows(spec.function, kf.points, A, kf.point_diag, dnew, spec.label)
            if kf.method == "pivoted_cholesky":
                B = solve_triangular(kf.basis, C, lower=True, check_finite=False)
            else:
                B = kf.basis.T @ C
            B = np.ascontiguousarray(B)
        return B * kf.scale if kf.scale != 1.0 else B

    def fold(self, kernels: Sequence[int], beta: np.ndarray) -> "FoldedFactorMap":
        r"""The sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` over the kernels ``kernels``
        for the coefficients ``beta`` (T, R) (stacked like the rows of the bank), with
        the bases folded into the coefficients (:class:`FoldedFactorMap`)."""
        beta = np.asarray(beta, dtype=np.float64)
        if beta.ndim != 2 or beta.shape[1] != int(self.starts[-1]):
            raise ValueError(f"beta must have shape (T, {int(self.starts[-1])}); got {beta.shape}")
        held: list[KernelFactor] = []
        weights: list[np.ndarray] = []
        for m in np.asarray(kernels, dtype=np.intp).ravel():
            kf = self.kernels[int(m)]
            b = np.ascontiguousarray(beta[:, self.starts[m]:self.starts[m + 1]].T)   # (r_m, T)
            if kf.method == "pivoted_cholesky":
                assert kf.basis is not None
                w = solve_triangular(kf.basis, b, lower=True, trans="T", check_finite=False)
            elif kf.method == "nystrom":
                assert kf.basis is not None
                w = kf.basis @ b
            else:
                w = b
            points = kf.points
            if points is not None and 2 * np.count_nonzero(points) < points.size:
                points = sp.csr_matrix(points)   # mostly-zero points (indicators, counts): CSR is smaller
            held.append(replace(kf, basis=None, points=points))
            weights.append(np.ascontiguousarray(w, dtype=np.float64))
        return FoldedFactorMap(held, weights, self.normalize, self.n_features, beta.shape[0])


@dataclass
class FoldedFactorMap:
    r"""Sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` of some kernels of a :class:`FactorMap`
    and ``T`` coefficient vectors, without the training factors (:meth:`FactorMap.fold`).

    The basis of each kernel is folded into its coefficients:
    :math:`L_m(x)\beta = s\,k(x, X_P)\,L_P^{-\top}\beta` (pivoted Cholesky),
    :math:`s\,k(x, X_S)\,U_k\Lambda_k^{-1/2}\beta` (Nyström),
    :math:`s\,\phi(x)^\top\beta` (explicit maps), so that only the pivots or
    landmarks and one vector per kernel and solution are kept.

    Attributes
    ----------
    kernels : list of KernelFactor
        The held kernels (their ``basis`` dropped; mostly-zero ``points`` held as CSR).
    weights : list of ndarray (p_m, T)
        Per kernel: :math:`L_P^{-\top}\beta_m`, :math:`U_k\Lambda_k^{-1/2}\beta_m` or
        :math:`\beta_m`.
    normalize : {"trace", "diagonal", "none"}
    n_features : int
    n_outputs : int
        T.
    """

    kernels: list[KernelFactor]
    weights: list[np.ndarray]
    normalize: str
    n_features: int
    n_outputs: int

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (points, their diagonals, weights)."""
        arrays = [a for kf in self.kernels for a in (kf.points, kf.point_diag, kf.coef) if a is not None]
        return int(sum(a.data.nbytes + a.indices.nbytes + a.indptr.nbytes if sp.issparse(a) else a.nbytes
                       for a in arrays + self.weights))

    def decision_parts(self, X_new: Any) -> np.ndarray:
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t}`, (n_new, T)."""
        X = _new_points(X_new, self.n_features)
        groups = _Groups(X)
        diagonal = self.normalize == "diagonal"
        out = np.zeros((X.shape[0], self.n_outputs))
        for kf, w in zip(self.kernels, self.weights):
            if kf.method in ("linear", "poly_map"):
                B, _ = _exact_rows(kf, groups, diagonal, "X_new")
            else:
                assert kf.points is not None
                spec = kf.spec
                A = groups.dense(spec.features)
                dnew = _diag(spec.function, A, spec.label, "X_new") if diagonal else None
                P = kf.points.toarray() if sp.issparse(kf.points) else kf.points
                B = _kernel_rows(spec.function, P, A, kf.point_diag, dnew, spec.label)
            part = np.asarray(B.T @ w, dtype=np.float64)
            out += part * kf.scale if kf.scale != 1.0 else part
        return out


def _exact_rows(kf: KernelFactor, groups: "_Groups", diagonal: bool, name: str
                ) -> tuple[Any, np.ndarray]:
    """Rows of an exact factor (``kf.method`` linear or poly_map) for the points of ``groups``,
    (r, n), before ``kf.scale``; divided by :math:`\\sqrt{k(x,x)}` when ``diagonal``.  Also
    returns :math:`k(x, x)`."""
    spec = kf.spec
    if kf.method == "linear" and groups.sparse:
        Xs = groups.sparse_columns(spec.features)
        B: Any = Xs.T.tocsr()
        diag = _diag_sparse(Xs)
    else:
        A = groups.dense(spec.features)
        diag = _diag(spec.function, A, spec.label, name)
        if kf.method == "linear":
            B = np.ascontiguousarray(A.T)
        else:
            if kf.terms is None:
                kf.terms, kf.coef = _poly_monomials(spec.function, len(spec.features))
            B = _poly_rows(kf.terms, kf.coef, A)
    return (_scale_columns(B, diag) if diagonal else B), diag


def _scale_columns(B: Any, diag: np.ndarray) -> Any:
    r"""Columns of ``B`` (rows of :math:`L`) times :math:`1/\sqrt{k(x,x)}` (0 where it is 0)."""
    s = np.sqrt(np.maximum(diag, 0.0))
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    if sp.issparse(B):
        return sp.csr_matrix(B.multiply(inv[None, :]))
    return np.ascontiguousarray(B * inv[None, :])


def _diag(func: KernelFunction, A: np.ndarray, label: str, name: str) -> np.ndarray:
    d = np.asarray(func.diag(A), dtype=np.float64)
    if d.shape != (A.shape[0],) or not np.all(np.isfinite(d)) or np.any(d < 0):
        raise BankError(f"kernel {label!r}: k(x, x) of {name} must be finite and >= 0")
    return d


def _diag_sparse(Xs: sp.csr_matrix) -> np.ndarray:
    return np.asarray(Xs.multiply(Xs).sum(axis=1), dtype=np.float64).ravel()


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------
def _new_points(X_new: Any, n_features: int) -> Any:
    """New points (an array, a CSR matrix or a Dataset) checked against the training data's width."""
    if isinstance(X_new, Dataset):
        X_new = X_new.X
    X = _as_points(X_new, "X_new")
    if X.shape[1] != n_features:
        raise BankError(f"X_new must have shape (n, {n_features}) like the training data; got {X.shape}")
    return X


def _as_points(X: Any, name: str) -> Any:
    """``X`` as a finite float64 CSR matrix or C-contiguous array (n, d)."""
    if sp.issparse(X):
        Xs = sp.csr_matrix(X, dtype=np.float64)
        if Xs.ndim != 2 or Xs.shape[0] < 1 or Xs.shape[1] < 1:
            raise BankError(f"{name} must be a non-empty 2-d array (samples x features); got shape "
                            f"{Xs.shape}")
        if not np.all(np.isfinite(Xs.data)):
            raise BankError(f"{name} contains NaN or infinite values")
        Xs.sort_indices()
        return Xs
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise BankError(f"{name} must be a non-empty 2-d array (samples x features); got shape "
                        f"{A.shape}")
    if not np.all(np.isfinite(A)):
        r, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise BankError(f"{name}[{r}, {j}] is {float(A[r, j])!r}; NaN and infinite values are not "
                        "allowed")
    return np.ascontiguousarray(A)


def _distinct_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(A, axis=0, return_inverse=True, return_counts=True)`` (distinct rows in
    order of first occurrence rather than sorted; counts as float), fast.

    Rows are sorted by a 64-bit hash of their bytes (one integer sort instead of a
    sort of byte strings), equal hashes grouped, and every row compared with the
    first of its group; only if two different rows share a hash is ``np.unique``
    used.
    """
    N = A.shape[0]
    bits = np.ascontiguousarray(A, dtype=np.float64).view(np.uint64)
    h = np.zeros(N, dtype=np.uint64)
    mult = np.uint64(0x100000001B3)
    for k in range(bits.shape[1]):   # FNV-style: exact and the same for equal rows, wherever they lie
        h *= mult
        h ^= bits[:, k]
        h ^= h >> np.uint64(29)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    start = np.empty(N, dtype=bool)
    start[0] = True
    np.not_equal(hs[1:], hs[:-1], out=start[1:])
    group = np.cumsum(start) - 1                       # group of each sorted row
    lead = order[np.flatnonzero(start)]                # first row of each group (in sorted order)
    if not np.array_equal(A[order], A[lead[group]]):
        U, inverse, counts = np.unique(A, axis=0, return_inverse=True, return_counts=True)
        return np.ascontiguousarray(U), np.ascontiguousarray(inverse.ravel()), counts.astype(np.float64)
    inverse = np.empty(N, dtype=np.intp)
    inverse[order] = group
    counts = np.bincount(group).astype(np.float64)
    return np.ascontiguousarray(A[lead]), inverse, counts


class _Groups:
    """The columns of one feature group at a time (the last one kept), dense or sparse."""

    def __init__(self, X: Any) -> None:
        self.X = X
        self.sparse = sp.issparse(X)
        self._key: tuple[int, ...] | None = None
        self._dense: np.ndarray | None = None
        self._base: BaseRows | None = None
        self._unique: tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def dense(self, features: tuple[int, ...]) -> np.ndarray:
        if features != self._key or self._dense is None:
            self._dense = self._base = None
            cols = np.asarray(features, dtype=np.intp)
            if self.sparse:
                self._dense = np.ascontiguousarray(self.X[:, cols].toarray())
            elif cols.size == self.X.shape[1] and np.array_equal(cols, np.arange(cols.size)):
                self._dense = self.X
            else:
                self._dense = np.ascontiguousarray(self.X[:, cols])
            self._key = features
        return self._dense

    def unique(self, features: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct points of the group (u, |g|), the index of each point among them (N,),
        and how often each occurs (u,); computed once per group (:func:`_distinct_rows`)."""
        A = self.dense(features)
        if self._unique is None or self._unique[0] is not A:
            self._unique = (A, _distinct_rows(A))
        return self._unique[1]

    def base_rows(self, features: tuple[int, ...], kind: str, distinct: bool = False) -> BaseRows:
        """Base-matrix rows of the group's points, or of its distinct points (:meth:`unique`),
        shared by consecutive kernels on it."""
        A = self.unique(features)[0] if distinct else self.dense(features)
        if self._base is None or self._base.kind != kind or self._base.X is not A:
            self._base = None
            self._base = BaseRows(kind, A)
        return self._base

    def sparse_columns(self, features: tuple[int, ...]) -> sp.csr_matrix:
        return sp.csr_matrix(self.X[:, np.asarray(features, dtype=np.intp)])


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
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

    def rows_fitting(self, extra: float = 0.0) -> int:
        """Factor rows of N float64 that fit in what is left after ``extra`` bytes."""
        return max(0, int((self.limit - self.used - extra) // (8 * self.N)))


# ---------------------------------------------------------------------------
# The factorizations of one kernel
# ---------------------------------------------------------------------------
@dataclass
class _Approx:
    """A growing factor: blocks of rows of :math:`L^\\top` (each (rows, N)), and their count.

    With ``columns`` the blocks hold one column per *distinct* point, and
    point ``i`` is column ``columns[i]`` (``counts``: copies of each).
    """

    blocks: list[np.ndarray]
    rank: int
    columns: np.ndarray | None = None
    counts: np.ndarray | None = None


def _pivoted_cholesky(
    rows: Callable[[np.ndarray], np.ndarray], d0: np.ndarray, cap: int, tol: float,
    budget: _Budget, on_full: Callable[[int, float], None],
) -> tuple[_Approx, np.ndarray]:
    """Greedy pivoted Cholesky of the kernel whose rows ``rows(idx)`` gives; see module docs.

    ``on_full(rank, rel_residual)`` is called (and must raise) when the next
    block of rows would not fit the budget.
    """
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
        filled = j - sum(b.shape[0] for b in blocks[:-1])          # rows in use in the last block
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
        j, reason = pivot_batch(G, cand, d, blocks[-1], filled, pivots, j, end, stop_sum, floor,
                                _ACCEPT)
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
    rows: Callable[[np.ndarray], np.ndarray], d0: np.ndarray, rank: int | None, tol: float,
    order: np.ndarray, budget: _Budget, on_full: Callable[[int, float], None],
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
        C = rows(S)                               # (n, N): k(x_S, X)
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
