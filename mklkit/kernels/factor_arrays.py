r"""The arrays of a :class:`~mklkit.kernels.factor.FactorBank` that block solvers read, computed once per bank.

Spectral norms :math:`\|L_m\|_2^2`, the Gram matrices :math:`L_m^\top L_m` of the small blocks with
their eigendecompositions, a sparse bank's entries sample by sample, and :func:`alpha_from_beta`.
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._jit.gram import abs_power_bounds

if TYPE_CHECKING:
    from .factor import FactorBank

#: Blocks of at most this rank get their spectral norm and the map back to alpha from the r_m x r_m
#: Gram matrix while all of those fit :data:`GRAM_MAX_BYTES` (smallest first); larger ones from svds
#: and LSQR, far dearer on the ill-conditioned blocks of narrow Gaussians (``docs/tuned_constants.md``).
GRAM_MAX_RANK = 2048
#: Bytes of all the blocks' Gram matrices (and as much again for their eigenvectors).
GRAM_MAX_BYTES = 256 * 2**20

T = TypeVar("T")


def _jit():
    """The jitted block loops, compiled (or loaded from the cache) on first use."""
    from .._jit import bcd as kb

    return kb


class FactorArrays:
    """Arrays of a :class:`FactorBank` for the jitted loops (:func:`factor_arrays`).

    ``lip[m]`` is :math:`\\|L_m\\|_2^2`; ``grams`` the Gram matrices :math:`L_m^\\top L_m` of the small
    blocks (block ``m`` at ``goff[m]``, else -1); for a sparse bank ``supp_ptr``/``supp_idx`` list the
    samples each block touches and ``tptr``/``tcol``/``tval`` its entries sample by sample;
    :attr:`record` is all of them as a :class:`~mklkit._jit.records.Bank`.
    """

    def __init__(self, bank: FactorBank) -> None:
        M, N, _ = bank.shape
        self.N = N
        self.sparse = bool(bank.sparse)
        self.starts = np.ascontiguousarray(bank.starts, dtype=np.int64)
        empty_i = np.zeros(0, dtype=np.int64)
        if self.sparse:
            LT = bank.LT
            self.LT = np.zeros((1, 1))
            self.indptr = np.ascontiguousarray(LT.indptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(LT.indices, dtype=np.int64)
            self.data = np.ascontiguousarray(LT.data, dtype=np.float64)
            # every entry of L^T (row j of block b, sample i) sorted by block, sample, row:
            # one group per (block, sample) that the block touches
            rows = np.repeat(np.arange(LT.shape[0], dtype=np.int64), np.diff(self.indptr))
            blk = np.repeat(np.arange(M, dtype=np.int64), np.diff(self.starts))[rows]
            order = np.lexsort((rows, self.indices, blk))
            b_s, i_s = blk[order], self.indices[order]
            first = np.ones(order.size, dtype=bool)
            first[1:] = (b_s[1:] != b_s[:-1]) | (i_s[1:] != i_s[:-1])
            heads = np.flatnonzero(first)
            self.supp_idx = np.ascontiguousarray(i_s[heads], dtype=np.int64)
            self.supp_ptr = np.concatenate([[0], np.cumsum(np.bincount(b_s[heads], minlength=M))]).astype(np.int64)
            self.tptr = np.append(heads, order.size).astype(np.int64)
            self.tcol = np.ascontiguousarray(rows[order] - self.starts[b_s], dtype=np.int64)
            self.tval = np.ascontiguousarray(self.data[order], dtype=np.float64)
        else:
            self.LT = bank.LT
            self.indptr = np.zeros(1, dtype=np.int64)
            self.indices = self.supp_idx = self.tptr = self.tcol = empty_i
            self.data = self.tval = np.zeros(0)
            self.supp_ptr = np.zeros(M + 1, dtype=np.int64)
        ranks = np.diff(self.starts)
        self.goff = np.full(M, -1, dtype=np.int64)
        small = np.flatnonzero((ranks > 0) & (ranks <= GRAM_MAX_RANK))
        small = small[np.argsort(ranks[small], kind="stable")]
        small = np.sort(small[np.cumsum(8 * ranks[small].astype(np.float64) ** 2) <= GRAM_MAX_BYTES])
        self.goff[small] = np.concatenate([[0], np.cumsum(ranks[small] ** 2)[:-1]]) if small.size else small
        self.grams = np.zeros(int(np.sum(ranks[small] ** 2)))
        ones = np.ones(N) if self.sparse else np.zeros(0)
        self._record = None
        for m in small:
            r = int(ranks[m])
            G = self.grams[self.goff[m] : self.goff[m] + r * r].reshape(r, r)
            if self.sparse:
                # from the sample-major copy, symmetric (the spectral norms are not known yet)
                _jit().block_hessian(self._bank_record(np.zeros(M)), int(m), ones, G)
            else:
                B = self.LT[self.starts[m] : self.starts[m + 1]]
                G[:, :] = B @ B.T
                G[:, :] = 0.5 * (G + G.T)
        # eigendecompositions of the small Gram matrices, a batch per rank
        self.eig: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for r in np.unique(ranks[small]):
            ms = small[ranks[small] == r]
            w, V = np.linalg.eigh(np.stack([self.gram(int(m)) for m in ms]))
            for k, m in enumerate(ms):
                self.eig[int(m)] = (w[k], V[k])
        self.lip = np.array([self._spectral_sq(bank, m) for m in range(M)])

    def _bank_record(self, lip: np.ndarray) -> Any:
        # the record's type is fixed: a dense factor that is not C-contiguous float64 is copied
        LT = np.ascontiguousarray(self.LT, dtype=np.float64)
        arrays = (self.indptr, self.indices, self.data, self.supp_ptr, self.supp_idx, self.tptr, self.tcol, self.tval)
        return _jit().Bank(self.starts, lip, LT, *arrays, self.grams, self.goff, self.sparse)

    @property
    def record(self) -> Any:
        """The arrays as one :class:`~mklkit._jit.records.Bank` (made on the first call)."""
        if self._record is None:
            self._record = self._bank_record(self.lip)
        return self._record

    def gram(self, m: int) -> np.ndarray:
        """:math:`L_m^\\top L_m` of a block of rank <= GRAM_MAX_RANK."""
        r = int(self.starts[m + 1] - self.starts[m])
        return self.grams[self.goff[m] : self.goff[m] + r * r].reshape(r, r)

    def _spectral_sq(self, bank: FactorBank, m: int) -> float:
        r = int(self.starts[m + 1] - self.starts[m])
        if r == 0:
            return 0.0
        if self.goff[m] >= 0:
            top = float(self.eig[m][0][-1])
        else:
            return spectral_sq(bank.block(m))
        return max(top, 0.0) * (1.0 + 1e-10)


#: Blocks of at most this rank, or with a Gram matrix of at most :data:`SPECTRAL_GRAM_WORK` products, get
#: :func:`spectral_sq` from their Gram matrix, larger ones from ``svds`` (a few milliseconds of set-up each).
SPECTRAL_GRAM_RANK = 64
SPECTRAL_GRAM_WORK = 4_000_000


def spectral_sq(B: Any) -> float:
    r""":math:`\|L_m\|_2^2` of a block :math:`B = L_m^\top` (r, N), dense or sparse, rounded up by a relative
    1e-10: the largest eigenvalue of :math:`BB^\top` for small blocks (:data:`SPECTRAL_GRAM_RANK`,
    :data:`SPECTRAL_GRAM_WORK`), else ``svds``."""
    r = int(B.shape[0])
    if r == 0:
        return 0.0
    if _gram_sized(B):
        top = float(np.linalg.eigvalsh(_gram(B))[-1])
    else:
        op = spla.aslinearoperator(B.T if sp.issparse(B) else np.asarray(B).T)
        top = float(spla.svds(op, k=1, tol=1e-10, return_singular_vectors=False)[0]) ** 2
    return max(top, 0.0) * (1.0 + 1e-10)


#: :func:`spectral_bound` takes the Gershgorin bound when it is within this factor of a lower bound.
GERSHGORIN_SLACK = 1.25


def spectral_bound(B: Any) -> float:
    r"""An upper bound of :math:`\|L_m\|_2^2` within :data:`GERSHGORIN_SLACK` of it: for a small block the
    largest absolute row sum of :math:`G = BB^\top` (Gershgorin) when it is within that factor of the Rayleigh
    quotient of three power steps (a lower bound), else :func:`spectral_sq`, which also serves larger blocks."""
    if int(B.shape[0]) == 0 or not _gram_sized(B):
        return spectral_sq(B)
    G = _gram(B)
    upper = float(np.max(np.sum(np.abs(G), axis=1)))
    x = np.full(G.shape[0], 1.0 / math.sqrt(G.shape[0]))
    for _ in range(3):
        y = G @ x
        n = float(np.linalg.norm(y))
        if not n > 0.0:
            return spectral_sq(B)
        x = y / n
    lower = float(x @ (G @ x))
    if upper <= GERSHGORIN_SLACK * lower:
        return upper * (1.0 + 1e-10)
    return max(float(np.linalg.eigvalsh(G)[-1]), 0.0) * (1.0 + 1e-10)


def gram_spectral_bound(K: np.ndarray) -> float:
    r"""An upper bound of the largest eigenvalue of a symmetric ``K`` within :data:`GERSHGORIN_SLACK` of it, from
    ``K`` itself in :math:`O(N^2)`; NaN where none is found so cheaply.

    For any :math:`x > 0`, :math:`\lambda_{\max}(K) \le \rho(|K|) \le \max_i (|K|x)_i/x_i` (Collatz–Wielandt);
    three power steps on :math:`|K|` give :math:`x`, and the Rayleigh quotient of :math:`K` at it is a lower
    bound (:func:`mklkit._jit.gram.abs_power_bounds`).  On a kernel of non-negative entries (Gaussian kernels)
    :math:`\rho(|K|) = \lambda_{\max}(K)`, so the two meet as the steps go (three steps: 45 of the 46 default
    kernels of wine within the slack); a kernel of mixed signs may miss it."""
    upper, lower = abs_power_bounds(np.ascontiguousarray(K, dtype=np.float64), 3)
    return upper * (1.0 + 1e-10) if 0.0 < upper <= GERSHGORIN_SLACK * lower else math.nan


def _gram_sized(B: Any) -> bool:
    r = int(B.shape[0])
    return r <= SPECTRAL_GRAM_RANK or r * r * int(B.shape[1]) <= SPECTRAL_GRAM_WORK


def _gram(B: Any) -> np.ndarray:
    """:math:`BB^\top` as a dense symmetric array."""
    G = B @ B.T
    G = np.asarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)
    return 0.5 * (G + G.T)


class per_bank(Generic[T]):
    """``build(bank)`` computed on the first call for a bank and kept while the bank lives;
    :meth:`existing` gives it only when computed already."""

    def __init__(self, build: Callable[[FactorBank], T]) -> None:
        self.build = build
        self.cache: "weakref.WeakKeyDictionary[FactorBank, T]" = weakref.WeakKeyDictionary()
        functools.update_wrapper(self, build)

    def __call__(self, bank: FactorBank) -> T:
        if bank not in self.cache:
            self.cache[bank] = self.build(bank)
        return self.cache[bank]

    def existing(self, bank: FactorBank) -> T | None:
        return self.cache.get(bank)


@per_bank
def factor_arrays(bank: FactorBank) -> FactorArrays:
    """The :class:`FactorArrays` of ``bank`` (kept while the bank lives)."""
    return FactorArrays(bank)


@per_bank
def block_spectral_bounds(bank: FactorBank) -> np.ndarray:
    r"""Upper bounds of :math:`\|L_m\|_2^2` of every block within :data:`GERSHGORIN_SLACK` of them
    (:func:`spectral_bound`; the :class:`FactorArrays`' exact ``lip`` when those are made already, the bank's
    ``spectral_bounds`` where it has them), kept while
    the bank lives: the curvatures a block method needs, without the Gram matrices and eigendecompositions of
    :class:`FactorArrays`."""
    made = factor_arrays.existing(bank)
    if made is not None:
        return made.lip
    known = getattr(bank, "spectral_bounds", None)  # those the bank's kernels gave (ExactFactorBank)
    return np.array(
        [
            known[m] if known is not None and math.isfinite(known[m]) else spectral_bound(bank.block(m))
            for m in range(bank.shape[0])
        ]
    )


def alpha_from_beta(bank: FactorBank, beta: np.ndarray) -> np.ndarray:
    r"""Minimum-norm :math:`\alpha` (M, N) with :math:`L_m^\top\alpha_m = \beta_m`; for ``beta`` (R, K) of K
    columns, (M, N, K).

    :math:`\alpha_m = L_m(L_m^\top L_m)^+\beta_m` by the eigendecomposition of the small Gram matrix
    (eigenvalues below :math:`10^{-12}\lambda_{\max}r_m` dropped), else LSQR; a bank with its own
    ``solve_coefficients(m, beta_m)`` (:class:`~mklkit.kernels.factorize.dense.ExactFactorBank`) is
    asked instead (LSQR on an ill-conditioned factor of rank 2,850 took 50 s), and the block arrays (their
    eigendecompositions) are then not made.
    """
    M, N, _ = bank.shape
    own = getattr(bank, "solve_coefficients", None)
    if own is not None:
        return _own_alpha(bank, own, beta)
    if np.ndim(beta) == 2:  # column by column
        return np.stack([alpha_from_beta(bank, np.ascontiguousarray(beta[:, k])) for k in range(beta.shape[1])], -1)
    f = factor_arrays(bank)
    coef = np.zeros(int(bank.starts[-1]))  # (L_m^T L_m)^+ beta_m of the small blocks
    small: list[int] = []
    other: dict[int, np.ndarray] = {}
    for m in range(M):
        s, e = int(bank.starts[m]), int(bank.starts[m + 1])
        bm = beta[s:e]
        if e == s or not np.any(bm != 0.0):
            continue
        if f.goff[m] >= 0:
            w, V = f.eig[m]
            keep = w > 1e-12 * max(float(w[-1]), 0.0) * (e - s)
            coef[s:e] = V[:, keep] @ ((V[:, keep].T @ bm) / w[keep])
            small.append(m)
        else:
            op = spla.aslinearoperator(bank.block(m))
            other[m] = spla.lsqr(op, bm, atol=1e-14, btol=1e-14, iter_lim=10 * (e - s))[0]
    alpha = bank.combinations(coef) if small else np.zeros((M, N))
    for m, a in other.items():
        alpha[m] = a
    return alpha


def _own_alpha(bank: FactorBank, own: Callable[[int, np.ndarray], np.ndarray], beta: np.ndarray) -> np.ndarray:
    """:func:`alpha_from_beta` by the bank's own solve of a block, all columns of ``beta`` (R,) or (R, K) at once."""
    M, N, _ = bank.shape
    alpha = np.zeros((M, N) + beta.shape[1:])
    for m in range(M):
        bm = beta[int(bank.starts[m]) : int(bank.starts[m + 1])]
        if bm.size and np.any(bm != 0.0):
            alpha[m] = own(m, bm)
    return alpha
