r"""Factor banks: each kernel as a factor :math:`K_m = L_m L_m^\top`, :math:`L_m \in \mathbb{R}^{N\times r_m}`.

A bank of ``M`` Gram matrices costs :math:`M N^2` memory and every
operation of :class:`~mklkit.kernels.ops.GramBank` reads all of it.  Held as
factors, it costs :math:`N R` with :math:`R = \sum_m r_m`, and every
operation costs :math:`O(N R)`:

=========================  ==============================================================
operation                  with factors
=========================  ==============================================================
``trace()``                :math:`\|L_m\|_F^2`
``matvecs(v)``             :math:`L_m (L_m^\top v)`
``block_norms(alpha)``     :math:`\|L_m^\top\alpha_m\|_2`
``dual_block_norms(rho)``  :math:`\|L_m^\top\rho\|_2`
``combine(alpha, idx)``    :math:`\sum_m L_m (L_m^\top\alpha_m)`
=========================  ==============================================================

In the coordinates :math:`\beta_m = L_m^\top\alpha_m` the MKL problem
(SpicyMKL eq. 42) is a generalized group lasso,
:math:`\min_{\beta,b}\sum_i\ell(y_i, (L\beta)_i + b) + \sum_m\tilde g_C(\|\beta_m\|_2)`,
which primal engines solve directly (:meth:`FactorBank.project`,
:meth:`FactorBank.expand`).

Storage: the transposed factors stacked as one (R, N) array ``LT`` (block
``m`` is the rows ``starts[m]:starts[m+1]``, contiguous), either a
C-contiguous float64 array or a ``scipy.sparse`` CSR matrix (exact factors
of linear kernels on sparse features).  ``LT`` is read, never written; do
not modify it after construction.

Cost.  Every pass over the kernels is one call of a jitted loop of
:mod:`mklkit._jit.factor`, parallel over kernels from
:data:`~mklkit._jit.spicy.PARALLEL_WORK` stored values on: a product
:math:`K_mv` reads each row of :math:`L_m^\top` from memory once (its dot
with :math:`v` and its update of the result share the cached row), and
``matvecs_and_norms`` and ``direction_forms`` take their quadratic forms
from the same pass.  Nothing of size N × N is formed, except by
:meth:`FactorBank.accumulate_hessian` (which adds to an (N, N) Hessian by
BLAS ``syrk``, :math:`O(N^2 R_{active})`; the engines do not call it on a factor
bank: spicy solves its Newton systems through the factors,
:mod:`mklkit.engines.spicy.factor_newton`) and :meth:`FactorBank.to_array`.
Factors are built from data by :mod:`mklkit.kernels.factorize`; what predicts
with them, without the training factors, is
:mod:`mklkit.kernels.factor_predictor`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from scipy.linalg.blas import dsyrk

from .._jit import factor as kfactor
from .._jit.gram import all_finite
from .._jit.spicy import PARALLEL_WORK
from .ops import BankAccessError, GramBank
from .factor_arrays import alpha_from_beta, factor_arrays
from .factor_predictor import _NO_MAP, FactorPredictor, fold_predictor
from .given_factors import bank_from_factors

__all__ = ["FactorBank", "FactorPredictor"]

# its public name (and the one pickles of fitted estimators hold): mklkit.kernels.factor.FactorPredictor
FactorPredictor.__module__ = __name__

_NO_MATRIX = np.empty((0, 0))
_NO_FLOAT = np.empty(0)
_NO_INT = np.empty(0, dtype=np.int64)


def _vec(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def _add_weighted_gram(H: np.ndarray, A: np.ndarray, c: np.ndarray) -> None:
    r""":math:`H \mathrel{+}= A^\top \mathrm{diag}(c)\, A` in place, from the rows ``A`` (K, N).

    Two BLAS ``syrk`` calls (the rows of positive and of negative weight,
    scaled by :math:`\sqrt{|c|}`) fill one triangle of an (N, N) buffer,
    at half the cost of a ``gemm``; it is added to ``H`` symmetrically.
    """
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
        The transposed factors stacked by rows: block ``m`` is
        ``LT[starts[m]:starts[m + 1]]`` :math:`= L_m^\top`.
    starts : sequence of int (M + 1,)
        Row offsets of the blocks; ``starts[0] = 0``, ``starts[-1] = R``,
        non-decreasing (a block may have rank 0).
    trace_error : ndarray (M,), optional
        :math:`\mathrm{tr}(K_m) - \|L_m\|_F^2 \ge 0` of the kernels the factors
        approximate (0 for exact factors, the default).
    factor_map : optional
        An object whose ``transform(X_new)`` gives the factor rows of new
        points, (R, n_new) (a :class:`mklkit.kernels.factorize.FactorMap`
        for banks built by :func:`~mklkit.kernels.factorize.build_factor_bank`).
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
            LT = sp.csr_matrix(LT, dtype=np.float64)
            LT.sort_indices()
            LT.indices = LT.indices.astype(np.int64, copy=False)  # what the jitted loops read
            LT.indptr = LT.indptr.astype(np.int64, copy=False)
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
        #: the arrays the jitted passes read: ``(D, data, indices, indptr)``
        if self.sparse:
            self._store = (_NO_MATRIX, LT.data, LT.indices, LT.indptr)
        else:
            self._store = (LT, _NO_FLOAT, _NO_INT, _NO_INT)
        work = LT.nnz if self.sparse else LT.size
        self._par = work >= PARALLEL_WORK
        self._all = np.arange(M, dtype=np.int64)
        self._row_block = np.repeat(self._all, np.diff(starts))
        #: what maps new points to their factor rows (:meth:`transform`), if any
        self.factor_map = factor_map

    @classmethod
    def from_blocks(
        cls, blocks: Sequence[Any], *, trace_error: Sequence[float] | None = None, factor_map: Any = None
    ) -> "FactorBank":
        r"""A bank from the factors :math:`L_m` themselves, each (N, r_m), dense or sparse.

        Sparse blocks make a sparse bank when all of them are sparse.
        """
        if not blocks:
            raise ValueError("a factor bank needs at least one kernel")
        starts = np.concatenate([[0], np.cumsum([b.shape[1] for b in blocks])]).astype(np.int64)
        if all(sp.issparse(b) for b in blocks):
            LT = sp.vstack([sp.csr_matrix(b.T) for b in blocks], format="csr")
        else:
            LT = np.vstack([np.asarray(b.toarray() if sp.issparse(b) else b, dtype=np.float64).T for b in blocks])
        return cls(LT, starts, trace_error=trace_error, factor_map=factor_map)

    #: A bank from given factors (N, R) side by side, checked and normalised; its ``factor_map``
    #: normalises raw rows of new points the same way (:mod:`mklkit.kernels.precomputed_factors`).
    from_factors = classmethod(bank_from_factors)

    def __repr__(self) -> str:
        kind = "sparse" if self.sparse else "dense"
        return f"FactorBank(n_kernels={self.shape[0]}, n_samples={self.shape[1]}, total_rank={self.total_rank}, {kind})"

    # -- what the factors cost ------------------------------------------------
    def approximation(self) -> dict[str, Any]:
        """What the factors leave out of the kernels they stand for (JSON-able).

        ``{"total_rank": R, "ranks": [r_m], "relative_trace_error":``
        :attr:`overall_trace_error` ``, "kernel_relative_trace_error":``
        :attr:`relative_trace_error` ``}``; all 0 for exact factors.
        """
        return {
            "total_rank": int(self.total_rank),
            "ranks": [int(r) for r in self.ranks],
            "relative_trace_error": self.overall_trace_error,
            "kernel_relative_trace_error": [float(e) for e in self.relative_trace_error],
        }

    # -- shape ----------------------------------------------------------------
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
        """The bank of the kernels ``keep`` only (their factor rows copied, their residual traces
        kept; no factor map: a bank to solve on, not to predict with)."""
        rows = np.concatenate([np.arange(self.starts[m], self.starts[m + 1]) for m in keep])
        starts = np.concatenate([[0], np.cumsum(np.diff(self.starts)[keep])])
        return FactorBank(self.LT[rows], starts, trace_error=self.trace_error[keep])

    def sample_columns(self, samples: np.ndarray) -> Any:
        """The columns of ``LT`` of the points ``samples`` (int indices), (R, len(samples)), a new
        array (dense: gathered row by row in parallel; numpy's column indexing of a C-ordered
        array takes ten times as long: 1.4 s against 0.1 s for w8a's 1,800 x 31,839)."""
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

    # -- the coordinates of the group lasso -------------------------------------
    def project(self, v: np.ndarray) -> np.ndarray:
        r""":math:`L^\top v` (R,): all :math:`L_m^\top v` stacked."""
        return np.asarray(self.LT @ _vec(v), dtype=np.float64).ravel()

    def expand(self, beta: np.ndarray) -> np.ndarray:
        r""":math:`L\beta = \sum_m L_m\beta_m` (N,) for stacked coordinates ``beta`` (R,)."""
        return np.asarray(self.LT.T @ _vec(beta), dtype=np.float64).ravel()

    def coefficients(self, alpha: np.ndarray) -> np.ndarray:
        r"""The stacked coordinates :math:`\beta_m = L_m^\top\alpha_m` (R,) of dual
        coefficients ``alpha`` (M, N): :math:`K_m\alpha_m = L_m\beta_m`, so a prediction
        :math:`\sum_m K_m(x, X)\alpha_m + b` is :math:`\sum_m L_{m}(x)\beta_m + b`."""
        alpha = _vec(alpha)
        if alpha.shape != self.shape[:2]:
            raise ValueError(f"alpha must have shape {self.shape[:2]}; got {alpha.shape}")
        return kfactor.row_dots(*self._store, self.starts, alpha)

    def combinations(self, c: np.ndarray) -> np.ndarray:
        r"""The transpose of :meth:`coefficients`: :math:`L_m c_m` for every kernel, (M, N), of
        stacked block coordinates ``c`` (R,)."""
        c = np.ascontiguousarray(c, dtype=np.float64)
        if c.shape != (self.total_rank,):
            raise ValueError(f"c must have shape ({self.total_rank},); got {c.shape}")
        out = np.empty(self.shape[:2])
        kfactor.block_combinations(*self._store, self.starts, c, out)
        return out

    def solver_arrays(self) -> Any:
        """The arrays block solvers read (spectral norms, small blocks' Gram matrices and their
        eigendecompositions, a sparse bank's entries by sample): a
        :class:`~mklkit.kernels.factor_arrays.FactorArrays`, computed on the first call and
        kept while the bank lives."""
        return factor_arrays(self)

    def alpha_from_beta(self, beta: np.ndarray) -> np.ndarray:
        r"""The inverse of :meth:`coefficients`: minimum-norm coefficients :math:`\alpha` (M, N)
        with :math:`L_m^\top\alpha_m = \beta_m`
        (:func:`~mklkit.kernels.factor_arrays.alpha_from_beta`)."""
        return alpha_from_beta(self, beta)

    def transform(self, X_new: Any) -> Any:
        r"""The factor rows :math:`L_{m}(X_{new})^\top` of new points, stacked like ``LT``:
        (R, n_new), dense or CSR like ``LT``; :math:`K_m(X_{new}, X) \approx
        L_m(X_{new}) L_m^\top`."""
        if self.factor_map is None:
            raise ValueError(_NO_MAP)
        return self.factor_map.transform(X_new)

    def decision_function(self, X_new: Any, alpha: np.ndarray, bias: float = 0.0) -> np.ndarray:
        r"""Predictions :math:`\sum_m L_m(X_{new})\beta_m + b`, :math:`\beta_m = L_m^\top\alpha_m`:
        the :math:`\sum_m K_m(X_{new}, X)\alpha_m + b` of the factored kernels, with no
        :math:`n_{new} \times N` matrix (``alpha``, ``bias``: e.g. a solve result's)."""
        beta = self.coefficients(alpha)
        return np.asarray(self.transform(X_new).T @ beta, dtype=np.float64).ravel() + float(bias)

    def predictor(self, alpha: np.ndarray, bias: Any = 0.0, kernels: Sequence[int] | None = None) -> "FactorPredictor":
        r"""What predictions of solutions on new points need, without the training factors.

        Parameters
        ----------
        alpha : ndarray (M, N) or (T, M, N)
            Dual coefficients of one solution or of ``T`` (e.g. the binary problems of a
            one-vs-rest fit).
        bias : float or ndarray (T,)
        kernels : sequence of int, optional
            The kernels to keep (those with a non-zero block); ``None``: the kernels with
            a non-zero :math:`\beta_m = L_m^\top\alpha_m` in some solution.

        Returns
        -------
        FactorPredictor
            Its ``decision_function(X_new)`` is this bank's, (n_new, T), to round-off.
        """
        return fold_predictor(self, alpha, bias, kernels)

    def _segment_sums(self, x: np.ndarray) -> np.ndarray:
        """Sums of ``x`` (R,) over the rows of each block, (M,)."""
        return np.bincount(self._row_block, weights=x, minlength=self.shape[0])

    # -- GramBank ----------------------------------------------------------------
    def as_array(self) -> np.ndarray:
        raise BankAccessError(self._no_array_message())

    def _run(
        self,
        kern: np.ndarray,
        V: np.ndarray,
        vsel: np.ndarray,
        W: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One pass of :func:`mklkit._jit.factor.block_products` over the kernels ``kern``
        (vector ``V[vsel[p]]`` for task ``p``; ``W``: one second vector for all)."""
        kern = np.ascontiguousarray(kern, dtype=np.int64)
        P = kern.size
        zeros = np.zeros(P, dtype=np.int64)
        fn = kfactor.block_products if self._par else kfactor.block_products_serial
        return fn(
            *self._store,
            self.starts,
            kern,
            V,
            np.ascontiguousarray(vsel, dtype=np.int64),
            V[:1] if W is None else W,
            zeros,
            W is not None,
            np.empty((P, 0)) if out is None else out,
            out is not None,
        )

    def weighted_trace(self, w: np.ndarray) -> np.ndarray:
        r""":math:`\sum_i w_i (L_mL_m^\top)_{ii}` per kernel: the trace on rows repeated by
        integer weights ``w`` (N,) (sample weights, ``C="auto"``)."""
        w = np.asarray(w, dtype=np.float64)
        if self.sparse:  # (no copy of the factors: an (R, N) temporary is the size of the bank)
            rows = np.repeat(np.arange(self.total_rank), np.diff(self.LT.indptr))
            sq = np.bincount(rows, weights=self.LT.data * self.LT.data * w[self.LT.indices], minlength=self.total_rank)
        else:
            sq = np.einsum("rn,rn,n->r", self.LT, self.LT, w)
        return self._segment_sums(sq)

    def trace(self) -> np.ndarray:
        if self.sparse:
            rows = np.repeat(np.arange(self.total_rank), np.diff(self.LT.indptr))
            sq = np.bincount(rows, weights=self.LT.data * self.LT.data, minlength=self.total_rank)
        else:
            sq = np.einsum("rn,rn->r", self.LT, self.LT)
        return self._segment_sums(sq)

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        M, N, _ = self.shape
        out = np.empty((M, N))
        self._run(self._all, _vec(v)[None, :], np.zeros(M, dtype=np.int64), out=out)
        return out

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        M, N, _ = self.shape
        out = np.empty((M, N))
        _, sq = self._run(self._all, _vec(v)[None, :], np.zeros(M, dtype=np.int64), W=_vec(w)[None, :], out=out)
        return out, np.sqrt(np.maximum(sq, 0.0))

    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        M, N, _ = self.shape
        d = _vec(d)
        KD = np.empty((M, N))
        dKd, _ = self._run(self._all, d[None, :], np.zeros(M, dtype=np.int64), out=KD)
        return KD, _vec(KR) @ d, np.maximum(dKd, 0.0)

    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        r""":math:`H \mathrel{+}= A^\top \mathrm{diag}(c) A` (BLAS ``syrk``), with :math:`A`
        the rows of the factors :math:`L_{m_p}^\top` (weight :math:`s_p`) and the
        vectors :math:`r_p` (weight :math:`t_p`); ``block`` is not used."""
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

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((idx.size, self.shape[1]))
        self._run(idx, _vec(A), np.arange(idx.size), out=out)
        return out

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        out = np.zeros(self.shape[0])
        nz = np.flatnonzero(np.any(alpha != 0.0, axis=1))
        if nz.size:
            sq, _ = self._run(nz, alpha, nz)
            out[nz] = np.sqrt(np.maximum(sq, 0.0))
        return out

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        M = self.shape[0]
        sq, _ = self._run(self._all, _vec(rho)[None, :], np.zeros(M, dtype=np.int64))
        return np.sqrt(np.maximum(sq, 0.0))

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return np.zeros(self.shape[1])
        alpha = _vec(alpha)
        out = np.empty((idx.size, self.shape[1]))
        self._run(idx, alpha, idx, out=out)
        return out.sum(axis=0)

    # -- passes the proximal-gradient engine needs (all O(N R) or less per call) ----
    def matvecs_subset(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`K_m v` for the kernels ``idx`` (P,), (P, N), in one pass over their factors."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((idx.size, self.shape[1]))
        if idx.size:
            self._run(idx, _vec(v)[None, :], np.zeros(idx.size, dtype=np.int64), out=out)
        return out

    def dual_block_norms_subset(self, rho: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`\|\rho\|_{K_m}` for the kernels ``idx`` (P,), (P,)."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return np.zeros(0)
        sq, _ = self._run(idx, _vec(rho)[None, :], np.zeros(idx.size, dtype=np.int64))
        return np.sqrt(np.maximum(sq, 0.0))

    def sum_matvec(self, x: np.ndarray) -> np.ndarray:
        r""":math:`\sum_m K_m x = L(L^\top x)` (N,), :math:`O(NR)`."""
        return self.expand(self.project(x))

    def frobenius_norms(self) -> np.ndarray:
        r""":math:`\|K_m\|_F = \|L_m^\top L_m\|_F \ge \lambda_{\max}(K_m)` for every kernel, (M,).

        From the :math:`r_m \times r_m` Gram matrices of the factors,
        :math:`O(N\sum_m r_m^2)` in all.
        """
        out = np.zeros(self.shape[0])
        for m in range(self.shape[0]):
            B = self.block(m)
            G = (B @ B.T).toarray() if self.sparse else B @ B.T
            out[m] = float(np.linalg.norm(G))
        return out
