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
of linear kernels on sparse features).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from .ops import BankAccessError, GramBank

__all__ = ["FactorBank"]


def _vec(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


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
    """

    def __init__(self, LT: Any, starts: Sequence[int], *,
                 trace_error: Sequence[float] | None = None) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        if starts.ndim != 1 or starts.size < 2 or starts[0] != 0 or np.any(np.diff(starts) < 0):
            raise ValueError("starts must be non-decreasing offsets from 0, one more than the "
                             f"number of kernels; got {starts.tolist()}")
        if sp.issparse(LT):
            LT = sp.csr_matrix(LT, dtype=np.float64)
            LT.sort_indices()
        else:
            LT = np.ascontiguousarray(LT, dtype=np.float64)
            if LT.ndim != 2:
                raise ValueError(f"LT must be a 2-d (R, N) array; got shape {LT.shape}")
        if LT.shape[0] != starts[-1]:
            raise ValueError(f"LT has {LT.shape[0]} rows but starts end at {int(starts[-1])}")
        self.LT = LT
        self.starts = starts
        M, N = starts.size - 1, int(LT.shape[1])
        self.shape = (M, N, N)
        self.sparse = sp.issparse(LT)
        err = np.zeros(M) if trace_error is None else np.asarray(trace_error, dtype=np.float64)
        if err.shape != (M,):
            raise ValueError(f"trace_error must have shape ({M},); got {err.shape}")
        self.trace_error = err

    @classmethod
    def from_blocks(cls, blocks: Sequence[Any], *,
                    trace_error: Sequence[float] | None = None) -> "FactorBank":
        r"""A bank from the factors :math:`L_m` themselves, each (N, r_m), dense or sparse.

        Sparse blocks make a sparse bank when all of them are sparse.
        """
        if not blocks:
            raise ValueError("a factor bank needs at least one kernel")
        starts = np.concatenate([[0], np.cumsum([b.shape[1] for b in blocks])]).astype(np.int64)
        if all(sp.issparse(b) for b in blocks):
            LT = sp.vstack([sp.csr_matrix(b.T) for b in blocks], format="csr")
        else:
            LT = np.vstack([np.asarray(b.toarray() if sp.issparse(b) else b, dtype=np.float64).T
                            for b in blocks])
        return cls(LT, starts, trace_error=trace_error)

    def __repr__(self) -> str:
        kind = "sparse" if self.sparse else "dense"
        return (f"FactorBank(n_kernels={self.shape[0]}, n_samples={self.shape[1]}, "
                f"total_rank={self.total_rank}, {kind})")

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

    def block(self, m: int) -> Any:
        r""":math:`L_m^\top` (r_m, N): a view of the rows of ``LT``."""
        return self.LT[self.starts[m]:self.starts[m + 1]]

    def _no_array_message(self) -> str:
        return ("a FactorBank keeps each kernel as a factor L_m (K_m = L_m L_m^T), not as one "
                "(M, N, N) array")

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

    def _segments(self, t: np.ndarray) -> list[np.ndarray]:
        return [t[self.starts[m]:self.starts[m + 1]] for m in range(self.shape[0])]

    def _segment_norms(self, t: np.ndarray) -> np.ndarray:
        sq = np.add.reduceat(t * t, self.starts[:-1]) if t.size else np.zeros(self.shape[0])
        sq[self.ranks == 0] = 0.0
        return np.sqrt(np.maximum(sq, 0.0))

    # -- GramBank ----------------------------------------------------------------
    def as_array(self) -> np.ndarray:
        raise BankAccessError(self._no_array_message())

    def trace(self) -> np.ndarray:
        if self.sparse:
            sq = np.asarray(self.LT.multiply(self.LT).sum(axis=1)).ravel()
        else:
            sq = np.einsum("rn,rn->r", self.LT, self.LT)
        return self._segment_norms(np.sqrt(np.maximum(sq, 0.0))) ** 2

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        t = self.project(v)
        M, N, _ = self.shape
        out = np.empty((M, N))
        for m, tm in enumerate(self._segments(t)):
            out[m] = np.asarray(self.block(m).T @ tm).ravel() if tm.size else 0.0
        return out

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.matvecs(v), self.dual_block_norms(w)

    def direction_forms(self, d: np.ndarray, KR: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        td = self.project(d)
        KD = self.matvecs(d)
        dKr = _vec(KR) @ _vec(d)
        dKd = self._segment_norms(td) ** 2
        return KD, dKr, dKd

    def accumulate_hessian(self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray,
                           t: np.ndarray, block: int) -> None:
        for p, m in enumerate(np.asarray(idx, dtype=np.int64)):
            B = self.block(int(m))
            B = B.toarray() if self.sparse else B
            if s[p] != 0.0 and B.shape[0]:
                H += s[p] * (B.T @ B)
            if t[p] != 0.0:
                H += t[p] * np.outer(KR[p], KR[p])

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        A = _vec(A)
        out = np.empty((len(idx), self.shape[1]))
        for p, m in enumerate(np.asarray(idx, dtype=np.int64)):
            B = self.block(int(m))
            out[p] = np.asarray(B.T @ np.asarray(B @ A[p]).ravel()).ravel()
        return out

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        out = np.zeros(self.shape[0])
        for m in range(self.shape[0]):
            if np.any(alpha[m] != 0.0):
                out[m] = float(np.linalg.norm(np.asarray(self.block(m) @ alpha[m]).ravel()))
        return out

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return self._segment_norms(self.project(rho))

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        out = np.zeros(self.shape[1])
        for m in np.asarray(idx, dtype=np.int64):
            B = self.block(int(m))
            out += np.asarray(B.T @ np.asarray(B @ alpha[m]).ravel()).ravel()
        return out
