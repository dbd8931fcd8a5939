r"""Factor banks: each kernel as a factor :math:`K_m = L_m L_m^\top`, :math:`L_m \in \mathbb{R}^{N\times r_m}`.

The transposed factors are stacked as one (R, N) array ``LT`` (C-contiguous float64, or CSR for exact
linear factors of sparse features; read, never written).  Every operation of
:class:`~mklkit.kernels.ops.GramBank` costs :math:`O(NR)` (one pass of :mod:`mklkit._jit.factor`), and
:meth:`FactorBank.project` / :meth:`FactorBank.expand` give the coordinates
:math:`\beta_m = L_m^\top\alpha_m` of the group lasso form (SpicyMKL eq. 42); see ``docs/factor_banks.md``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from scipy.linalg.blas import dsyrk

from .._jit import factor as kfactor
from .._jit.gram import all_finite
from .._jit.spicy import PARALLEL_WORK
from .ops import GramBank, _vec
from .factor_arrays import alpha_from_beta, factor_arrays
from .given_factors import bank_from_factors

__all__ = ["FactorBank", "FactorPredictor"]

_NO_MAP = (
    "this FactorBank has no map to new points (factor_map is None: it was made as "
    "FactorBank(LT, starts)); build it with mklkit.kernels.factorize.build_factor_bank "
    "(kernels on data), or with FactorBank.from_factors (given factors: transform then takes "
    "the new points' factor rows)"
)
_NO_MATRIX = np.empty((0, 0))
_NO_FLOAT = np.empty(0)
_NO_INT = np.empty(0, dtype=np.int64)


def sorted_csr(A: Any) -> sp.csr_matrix:
    """``A`` as a CSR float64 matrix with sorted int64 indices (what the jitted loops read)."""
    A = sp.csr_matrix(A, dtype=np.float64)
    if not A.has_sorted_indices:
        A = A.sorted_indices()  # a sorted copy: a given matrix stays as it was
    A.indices = A.indices.astype(np.int64, copy=False)
    A.indptr = A.indptr.astype(np.int64, copy=False)
    return A


def _add_weighted_gram(H: np.ndarray, A: np.ndarray, c: np.ndarray) -> None:
    r""":math:`H \mathrel{+}= A^\top \mathrm{diag}(c)\, A` in place by two BLAS ``syrk`` (rows of positive and
    of negative weight), half the cost of a ``gemm``."""
    pos, neg = c > 0.0, c < 0.0
    T = None
    for rows, sign in ((pos, 1.0), (neg, -1.0)):
        if np.any(rows):
            S = A[rows] * np.sqrt(np.abs(c[rows]))[:, None]
            T = dsyrk(sign, S.T) if T is None else dsyrk(sign, S.T, beta=1.0, c=T, overwrite_c=True)
    if T is None:
        return
    if H.flags.c_contiguous and H.dtype == np.float64:
        kfactor.add_symmetric_lower(H, T.T)  # T is Fortran-ordered with its upper triangle set
    else:
        U = np.triu(T)
        H += U + np.triu(T, 1).T


class FactorBank(GramBank):
    r"""A bank of ``M`` kernels held as factors :math:`K_m = L_m L_m^\top`.

    Parameters
    ----------
    LT : ndarray (R, N) or scipy.sparse matrix (R, N)
        The transposed factors stacked by rows: ``LT[starts[m]:starts[m + 1]]`` :math:`= L_m^\top`.
    starts : sequence of int (M + 1,)
        Row offsets of the blocks, non-decreasing from 0 to R.
    trace_error : ndarray (M,), optional
        :math:`\mathrm{tr}(K_m) - \|L_m\|_F^2 \ge 0` (default 0: exact factors).
    factor_map : optional
        Its ``transform(X_new)`` gives the factor rows of new points (R, n_new).
    """

    representation = "factor"

    def __init__(
        self, LT: Any, starts: Sequence[int], *, trace_error: Sequence[float] | None = None, factor_map: Any = None
    ) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        if starts.ndim != 1 or starts.size < 2 or starts[0] != 0 or np.any(np.diff(starts) < 0):
            raise ValueError(
                "starts must be non-decreasing offsets from 0, one more than the "
                f"number of kernels; got {starts.tolist()}"
            )
        if sp.issparse(LT):
            LT = sorted_csr(LT)
        else:
            LT = np.ascontiguousarray(LT, dtype=np.float64)
            if LT.ndim != 2:
                raise ValueError(f"LT must be a 2-d (R, N) array; got shape {LT.shape}")
        if LT.shape[0] != starts[-1]:
            raise ValueError(f"LT has {LT.shape[0]} rows but starts end at {int(starts[-1])}")
        values = LT.data if sp.issparse(LT) else LT
        if not (all_finite(values.reshape(1, -1)) if values.size else True):
            raise ValueError("LT has NaN or infinite values; factors must be finite")
        self.LT = LT
        self.starts = starts
        M, N = starts.size - 1, int(LT.shape[1])
        self.shape = (M, N, N)
        self.sparse = sp.issparse(LT)
        err = np.zeros(M) if trace_error is None else np.asarray(trace_error, dtype=np.float64)
        if err.shape != (M,):
            raise ValueError(f"trace_error must have shape ({M},); got {err.shape}")
        if not np.all(np.isfinite(err) & (err >= 0.0)):
            raise ValueError(f"trace_error must be finite and >= 0; got {err.tolist()}")
        self.trace_error = err
        if self.sparse:
            self._store = (_NO_MATRIX, LT.data, LT.indices, LT.indptr)
        else:
            self._store = (LT, _NO_FLOAT, _NO_INT, _NO_INT)
        work = LT.nnz if self.sparse else LT.size
        self._par = work >= PARALLEL_WORK
        self._all = np.arange(M, dtype=np.int64)
        self._row_block = np.repeat(self._all, np.diff(starts))
        self.factor_map = factor_map

    @classmethod
    def from_blocks(
        cls, blocks: Sequence[Any], *, trace_error: Sequence[float] | None = None, factor_map: Any = None
    ) -> "FactorBank":
        r"""A bank from the factors :math:`L_m` themselves, each (N, r_m); sparse when all are sparse."""
        if not blocks:
            raise ValueError("a factor bank needs at least one kernel")
        starts = np.concatenate([[0], np.cumsum([b.shape[1] for b in blocks])]).astype(np.int64)
        if all(sp.issparse(b) for b in blocks):
            LT = sp.vstack([sp.csr_matrix(b.T) for b in blocks], format="csr")
        else:
            LT = np.vstack([np.asarray(b.toarray() if sp.issparse(b) else b, dtype=np.float64).T for b in blocks])
        return cls(LT, starts, trace_error=trace_error, factor_map=factor_map)

    #: A bank from given factors (N, R) side by side (:func:`~mklkit.kernels.given_factors.bank_from_factors`).
    from_factors = classmethod(bank_from_factors)

    def __repr__(self) -> str:
        kind = "sparse" if self.sparse else "dense"
        return f"FactorBank(n_kernels={self.shape[0]}, n_samples={self.shape[1]}, total_rank={self.total_rank}, {kind})"

    def approximation(self) -> dict[str, Any]:
        """What the factors leave out (JSON-able): ``total_rank``, ``ranks``, ``relative_trace_error`` and
        ``kernel_relative_trace_error``."""
        return {
            "total_rank": int(self.total_rank),
            "ranks": [int(r) for r in self.ranks],
            "relative_trace_error": self.overall_trace_error,
            "kernel_relative_trace_error": [float(e) for e in self.relative_trace_error],
        }

    @property
    def ranks(self) -> np.ndarray:
        """:math:`r_m` for every kernel, (M,)."""
        return np.diff(self.starts)

    @property
    def total_rank(self) -> int:
        """:math:`R = \\sum_m r_m`."""
        return int(self.starts[-1])

    @property
    def nbytes(self) -> int:
        if self.sparse:
            return int(self.LT.data.nbytes + self.LT.indices.nbytes + self.LT.indptr.nbytes)
        return int(self.LT.nbytes)

    @property
    def relative_trace_error(self) -> np.ndarray:
        r""":math:`(\mathrm{tr}K_m - \|L_m\|_F^2) / \mathrm{tr}K_m` per kernel, (M,)."""
        total = self.trace() + self.trace_error
        return np.divide(self.trace_error, total, out=np.zeros_like(total), where=total > 0)

    @property
    def overall_trace_error(self) -> float:
        r""":math:`\sum_m(\mathrm{tr}K_m - \|L_m\|_F^2) / \sum_m\mathrm{tr}K_m` (relative)."""
        total = float(np.sum(self.trace()) + np.sum(self.trace_error))
        return float(np.sum(self.trace_error)) / total if total > 0 else 0.0

    def block(self, m: int) -> Any:
        r""":math:`L_m^\top` (r_m, N): a view of the rows of ``LT``."""
        return self.LT[self.starts[m] : self.starts[m + 1]]

    def subset(self, keep: np.ndarray) -> "FactorBank":
        """The bank of the kernels ``keep`` only (no factor map: to solve on, not to predict with)."""
        rows = np.concatenate([np.arange(self.starts[m], self.starts[m + 1]) for m in keep])
        starts = np.concatenate([[0], np.cumsum(np.diff(self.starts)[keep])])
        return FactorBank(self.LT[rows], starts, trace_error=self.trace_error[keep])

    def scaled(self, eta: np.ndarray) -> "FactorBank":
        r"""The bank :math:`\eta_m K_m`, factors :math:`\sqrt{\eta_m}L_m` (no factor map: to solve on), for weights
        :math:`\eta_m \ge 0`."""
        eta = np.asarray(eta, dtype=np.float64)
        root = np.sqrt(eta)[self._row_block]
        LT = sp.diags(root) @ self.LT if self.sparse else self.LT * root[:, None]
        return FactorBank(LT, self.starts, trace_error=self.trace_error * eta)

    def sample_columns(self, samples: np.ndarray) -> Any:
        """The columns of ``LT`` of the points ``samples``, (R, len(samples)), a new array (dense: gathered
        in parallel, ten times faster than numpy's column indexing on w8a)."""
        idx = np.ascontiguousarray(samples, dtype=np.int64)
        if self.sparse:
            return self.LT[:, idx]
        out = np.empty((self.LT.shape[0], idx.size))
        kfactor.gather_columns(self.LT, idx, out)
        return out

    def _no_array_message(self) -> str:
        return "a FactorBank keeps each kernel as a factor L_m (K_m = L_m L_m^T), not as one (M, N, N) array"

    def to_array(self) -> np.ndarray:
        """The dense (M, N, N) bank :math:`L_mL_m^\\top` (for small banks and tests only)."""
        M, N, _ = self.shape
        out = np.empty((M, N, N))
        for m in range(M):
            B = self.block(m)
            B = B.toarray() if self.sparse else B
            out[m] = B.T @ B
        return out

    def project(self, v: np.ndarray) -> np.ndarray:
        r""":math:`L^\top v` (R,): all :math:`L_m^\top v` stacked."""
        return np.asarray(self.LT @ _vec(v), dtype=np.float64).ravel()

    def expand(self, beta: np.ndarray) -> np.ndarray:
        r""":math:`L\beta = \sum_m L_m\beta_m` (N,) for stacked coordinates ``beta`` (R,)."""
        return np.asarray(self.LT.T @ _vec(beta), dtype=np.float64).ravel()

    def coefficients(self, alpha: np.ndarray) -> np.ndarray:
        r"""The stacked coordinates :math:`\beta_m = L_m^\top\alpha_m` (R,) of ``alpha`` (M, N)."""
        alpha = _vec(alpha)
        if alpha.shape != self.shape[:2]:
            raise ValueError(f"alpha must have shape {self.shape[:2]}; got {alpha.shape}")
        return kfactor.row_dots(*self._store, self.starts, alpha)

    def combinations(self, c: np.ndarray) -> np.ndarray:
        r""":math:`L_m c_m` for every kernel, (M, N): the transpose of :meth:`coefficients`."""
        c = np.ascontiguousarray(c, dtype=np.float64)
        if c.shape != (self.total_rank,):
            raise ValueError(f"c must have shape ({self.total_rank},); got {c.shape}")
        out = np.empty(self.shape[:2])
        kfactor.block_combinations(*self._store, self.starts, c, out)
        return out

    def solver_arrays(self) -> Any:
        """The :class:`~mklkit.kernels.factor_arrays.FactorArrays` block solvers read (kept with the bank)."""
        return factor_arrays(self)

    def alpha_from_beta(self, beta: np.ndarray) -> np.ndarray:
        r"""Minimum-norm :math:`\alpha` (M, N) with :math:`L_m^\top\alpha_m = \beta_m` ((M, N, K) for ``beta``
        (R, K)): the inverse of :meth:`coefficients`."""
        return alpha_from_beta(self, beta)

    def transform(self, X_new: Any) -> Any:
        r"""The factor rows :math:`L_{m}(X_{new})^\top` of new points stacked like ``LT``, (R, n_new)."""
        if self.factor_map is None:
            raise ValueError(_NO_MAP)
        return self.factor_map.transform(X_new)

    def decision_function(self, X_new: Any, alpha: np.ndarray, bias: float = 0.0) -> np.ndarray:
        r"""Predictions :math:`\sum_m L_m(X_{new})\beta_m + b`, :math:`\beta_m = L_m^\top\alpha_m`."""
        beta = self.coefficients(alpha)
        return np.asarray(self.transform(X_new).T @ beta, dtype=np.float64).ravel() + float(bias)

    def predictor(self, alpha: np.ndarray, bias: Any = 0.0, kernels: Sequence[int] | None = None) -> "FactorPredictor":
        r"""What predictions of the solutions ``alpha`` (M, N) or (T, M, N) and ``bias`` on new points
        need, without the training factors; ``kernels``: those to keep (default: those with a
        non-zero :math:`\beta_m` in some solution)."""
        A = np.asarray(alpha, dtype=np.float64)
        if A.ndim == 2:
            A = A[None]
        if A.ndim != 3 or A.shape[1:] != self.shape[:2]:
            raise ValueError(
                f"alpha must have shape {self.shape[:2]} or (T, {self.shape[0]}, {self.shape[1]}); got {np.shape(alpha)}"
            )
        b = np.broadcast_to(np.asarray(bias, dtype=np.float64).ravel(), (A.shape[0],)).copy()
        beta = np.stack([self.coefficients(a) for a in A])
        if kernels is None:
            kernels = np.flatnonzero(self._segment_sums(np.einsum("tr,tr->r", beta, beta)) > 0.0)
        held = np.asarray(kernels, dtype=np.int64).ravel()
        if self.factor_map is None:
            raise ValueError(_NO_MAP)
        folded = self.factor_map.fold(held, beta)
        return FactorPredictor(folded, b, held, self.shape[1], self.trace()[held], self.trace_error[held].copy())

    def _segment_sums(self, x: np.ndarray) -> np.ndarray:
        """Sums of ``x`` (R,) over the rows of each block, (M,)."""
        return np.bincount(self._row_block, weights=x, minlength=self.shape[0])

    def _run(self, kern: Any, V: np.ndarray, vsel: Any = None, W: Any = None, out: Any = None) -> Any:
        """One pass of :func:`mklkit._jit.factor.block_products` over ``kern``: vector ``V[vsel[p]]`` for task
        ``p`` (``vsel=None``: ``V[0]`` for all), one second vector ``W`` for all."""
        kern = np.ascontiguousarray(kern, dtype=np.int64)
        P = kern.size
        zeros = np.zeros(P, dtype=np.int64)
        vsel = zeros if vsel is None else np.ascontiguousarray(vsel, dtype=np.int64)
        W2 = V[:1] if W is None else W
        target = np.empty((P, 0)) if out is None else out
        fn = kfactor.block_products if self._par else kfactor.block_products_serial
        return fn(*self._store, self.starts, kern, V, vsel, W2, zeros, W is not None, target, out is not None)

    def weighted_trace(self, w: np.ndarray) -> np.ndarray:
        r""":math:`\sum_i w_i (L_mL_m^\top)_{ii}` per kernel."""
        return self._row_squares(np.asarray(w, dtype=np.float64))

    def trace(self) -> np.ndarray:
        return self._row_squares(None)

    def _row_squares(self, w: np.ndarray | None) -> np.ndarray:
        """The (weighted) squared norms of the rows of ``LT`` summed per kernel."""
        if self.sparse:
            rows = np.repeat(np.arange(self.total_rank), np.diff(self.LT.indptr))
            values = self.LT.data * self.LT.data if w is None else self.LT.data * self.LT.data * w[self.LT.indices]
            sq = np.bincount(rows, weights=values, minlength=self.total_rank)
        else:
            sq = np.einsum("rn,rn->r", self.LT, self.LT) if w is None else np.einsum("rn,rn,n->r", self.LT, self.LT, w)
        return self._segment_sums(sq)

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        return self.matvecs_subset(v, self._all)

    def matmats(self, V: np.ndarray) -> np.ndarray:
        r""":math:`K_mV = L_m(L_m^\top V)` for every kernel: one product with :math:`L^\top` for all kernels,
        then one per kernel, :math:`O(RNK)`."""
        V = _vec(V)
        M, N, _ = self.shape
        T = np.asarray(self.LT @ V)
        out = np.zeros((M, N, V.shape[1]))
        for m in range(M):
            a, b = int(self.starts[m]), int(self.starts[m + 1])
            if b > a:
                out[m] = np.asarray(self.LT[a:b].T @ T[a:b])
        return out

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        M, N, _ = self.shape
        out = np.empty((M, N))
        _, sq = self._run(self._all, _vec(v)[None, :], W=_vec(w)[None, :], out=out)
        return out, np.sqrt(np.maximum(sq, 0.0))

    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        M, N, _ = self.shape
        d = _vec(d)
        KD = np.empty((M, N))
        dKd, _ = self._run(self._all, d[None, :], out=KD)
        return KD, _vec(KR) @ d, np.maximum(dKd, 0.0)

    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        r""":math:`H \mathrel{+}= A^\top \mathrm{diag}(c) A`, :math:`A` the rows of :math:`L_{m_p}^\top` (weight
        :math:`s_p`) and :math:`r_p` (weight :math:`t_p`); ``block`` is not used."""
        idx = np.asarray(idx, dtype=np.int64)
        s, t, KR = np.asarray(s, dtype=np.float64), np.asarray(t, dtype=np.float64), _vec(KR)
        rows, coef = [], []
        for p, m in enumerate(idx):
            a, b = int(self.starts[m]), int(self.starts[m + 1])
            if s[p] != 0.0 and b > a:
                rows.append(np.arange(a, b))
                coef.append(np.full(b - a, s[p]))
        keep = np.flatnonzero(t != 0.0)
        parts = []
        if rows:
            sel = np.concatenate(rows)
            parts.append(self.LT[sel].toarray() if self.sparse else self.LT[sel])
        if keep.size:
            parts.append(KR[keep])
            coef.append(t[keep])
        if not parts:
            return
        A = np.vstack(parts) if len(parts) > 1 else parts[0]
        _add_weighted_gram(H, A, np.concatenate(coef))

    def _products(self, idx: Any, V: np.ndarray, vsel: Any = None) -> np.ndarray:
        r""":math:`K_{idx_p}` times ``V[vsel[p]]`` (``vsel=None``: ``V[0]``) for every ``p``, (P, N)."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((idx.size, self.shape[1]))
        if idx.size:
            self._run(idx, V, vsel, out=out)
        return out

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._products(idx, _vec(A), np.arange(len(idx)))

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        out = np.zeros(self.shape[0])
        nz = np.flatnonzero(np.any(alpha != 0.0, axis=1))
        if nz.size:
            sq, _ = self._run(nz, alpha, nz)
            out[nz] = np.sqrt(np.maximum(sq, 0.0))
        return out

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return self.dual_block_norms_subset(rho, self._all)

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._products(idx, _vec(alpha), idx).sum(axis=0)

    def matvecs_subset(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`K_m v` for the kernels ``idx`` (P,), (P, N), in one pass over their factors."""
        return self._products(idx, _vec(v)[None, :])

    def dual_block_norms_subset(self, rho: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`\|\rho\|_{K_m}` for the kernels ``idx`` (P,), (P,)."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return np.zeros(0)
        sq, _ = self._run(idx, _vec(rho)[None, :])
        return np.sqrt(np.maximum(sq, 0.0))

    def sum_matvec(self, x: np.ndarray) -> np.ndarray:
        r""":math:`\sum_m K_m x = L(L^\top x)` (N,), :math:`O(NR)`."""
        return self.expand(self.project(x))

    def frobenius_norms(self) -> np.ndarray:
        r""":math:`\|K_m\|_F = \|L_m^\top L_m\|_F \ge \lambda_{\max}(K_m)` for every kernel, (M,)."""
        out = np.zeros(self.shape[0])
        for m in range(self.shape[0]):
            B = self.block(m)
            G = (B @ B.T).toarray() if self.sparse else B @ B.T
            out[m] = float(np.linalg.norm(G))
        return out


class FactorPredictor:
    r"""Predictions :math:`f_t(x) = \sum_m L_m(x)\beta_{m,t} + b_t` of fitted solutions on a factor bank.

    Holds, for the bank's kernels ``kernels`` only, the pivots or landmarks with one folded
    coefficient vector per solution, the ``bias`` (T,), N (``n_samples``) and the held kernels'
    ``trace_error``; a fitted estimator on a factor bank keeps one as ``bank_``.
    """

    representation = "factor"

    def __init__(self, folded: Any, bias: Any, kernels: Any, n_samples: int, trace: Any, trace_error: Any) -> None:
        self.folded = folded
        self.bias = np.asarray(bias, dtype=np.float64)
        self.kernels = np.asarray(kernels, dtype=np.int64)
        self.n_samples = int(n_samples)
        self._trace = np.asarray(trace, dtype=np.float64)
        self.trace_error = np.asarray(trace_error, dtype=np.float64)

    def __repr__(self) -> str:
        return f"FactorPredictor(n_kernels={self.n_kernels}, n_samples={self.n_samples}, n_outputs={self.bias.size})"

    @property
    def n_kernels(self) -> int:
        """The number of kernels held."""
        return int(self.kernels.size)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held."""
        return int(self.folded.nbytes + self.bias.nbytes + self._trace.nbytes + self.trace_error.nbytes)

    def trace(self) -> np.ndarray:
        r""":math:`\|L_m\|_F^2` of the held kernels."""
        return self._trace.copy()

    def decision_function(self, X_new: Any) -> np.ndarray:
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t} + b_t`, (n_new, T)."""
        return self.folded.decision_parts(X_new) + self.bias[None, :]
