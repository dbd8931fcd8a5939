r"""Exact factors of a dense Gram bank: :math:`K_m = L_mL_m^\top` to round-off, by pivoted Cholesky.

A bank already held as Gram matrices (an (M, N, N) array) is factored
kernel by kernel with LAPACK's rank-revealing pivoted Cholesky
(``dpstrf``, BLAS-3; Higham 2009, "Cholesky factorization", §3): with a
permutation :math:`P_m`,

.. math::
    P_m^\top K_m P_m = \begin{pmatrix} L_{11} \\ L_{21} \end{pmatrix}
        \begin{pmatrix} L_{11} \\ L_{21} \end{pmatrix}^\top + S,

:math:`L_{11}` lower triangular :math:`r_m\times r_m`, stopping when the
largest diagonal entry of the Schur complement :math:`S` falls below
``rtol`` times the largest diagonal entry of :math:`K_m`.  The trace left
out, :math:`\mathrm{tr}(K_m) - \|L_m\|_F^2 = \mathrm{tr}(S)`, is measured and
reported; at ``rtol`` near machine precision the factors are the kernels
themselves to round-off, so an engine of factor banks solves the dense
problem (:mod:`mklkit.pipeline.choose` certifies its answer on the dense bank
again).  Cost :math:`O(N^2 r_m)` per kernel, no :math:`N\times N` matrix
besides LAPACK's working copy.

The triangular block also maps stacked coordinates back:
:math:`L_m^\top\alpha_m = \beta_m` has the solution supported on the pivots,
:math:`\alpha_{m,\pi} = L_{11}^{-\top}\beta_m` (:meth:`ExactFactorBank.solve_coefficients`,
one triangular solve, :math:`O(r_m^2)`), with :math:`K_m\alpha_m = L_m\beta_m`
and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`: coefficients of the dense
problem, as an engine on the Gram matrices returns them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack, solve_triangular

from ..factor import FactorBank

__all__ = ["ExactFactorBank", "DenseFactorization", "exact_factors", "PIVOT_RTOL", "MAX_TRACE_ERROR"]

#: ``dpstrf`` stops at a pivot below this times the largest diagonal entry of the kernel.
PIVOT_RTOL = 1e-14

#: Largest relative trace left out, :math:`\mathrm{tr}(K_m - L_mL_m^\top)/\mathrm{tr}K_m`,
#: for which the factors count as the kernel itself.
MAX_TRACE_ERROR = 1e-10


class ExactFactorBank(FactorBank):
    r"""A :class:`~mklkit.kernels.factor.FactorBank` of pivoted Cholesky factors of dense kernels.

    Parameters
    ----------
    LT, starts, trace_error
        As for :class:`~mklkit.kernels.factor.FactorBank`.
    pivots : sequence of ndarray
        ``pivots[m]`` (r_m,): the samples of the triangular block of kernel
        ``m`` (row ``k`` of :math:`L_m^\top` is zero before sample
        ``pivots[m][k]`` in pivot order).
    """

    def __init__(
        self, LT: np.ndarray, starts: np.ndarray, pivots: list[np.ndarray], *, trace_error: np.ndarray | None = None
    ) -> None:
        super().__init__(LT, starts, trace_error=trace_error)
        self.pivots = [np.asarray(p, dtype=np.int64) for p in pivots]

    def subset(self, keep: np.ndarray) -> "ExactFactorBank":
        """The bank of the kernels ``keep`` only, with their pivots."""
        part = super().subset(keep)
        return ExactFactorBank(part.LT, part.starts, [self.pivots[m] for m in keep], trace_error=part.trace_error)

    def solve_coefficients(self, m: int, beta_m: np.ndarray) -> np.ndarray:
        r""":math:`\alpha_m` (N,) with :math:`L_m^\top\alpha_m = \beta_m`, supported on the pivots.

        :math:`L_m^\top` restricted to the pivot columns is :math:`L_{11}^\top`
        (upper triangular), so :math:`\alpha_{m,\pi} = L_{11}^{-\top}\beta_m`.
        """
        p = self.pivots[m]
        out = np.zeros(self.shape[1])
        if p.size:
            U = self.block(m)[:, p]
            out[p] = solve_triangular(U, np.asarray(beta_m, dtype=np.float64), lower=False, check_finite=False)
        return out


@dataclass(frozen=True)
class DenseFactorization:
    """The outcome of :func:`exact_factors`.

    Attributes
    ----------
    bank : ExactFactorBank
    ranks : ndarray (M,)
    relative_trace_error : ndarray (M,)
        :math:`|\\mathrm{tr}K_m - \\|L_m\\|_F^2| / \\mathrm{tr}K_m`.
    exact : bool
        Every kernel's relative trace error is at most ``max_trace_error``.
    reason : str
        Why the factors are not exact (empty when they are).
    time_s : float
    """

    bank: ExactFactorBank
    ranks: np.ndarray
    relative_trace_error: np.ndarray
    exact: bool
    reason: str
    time_s: float

    def describe(self) -> str:
        """``rank 8550 of 3 x 3000, relative trace left out 2.2e-16``."""
        M, N, _ = self.bank.shape
        return (
            f"rank {int(np.sum(self.ranks))} of {M} x {N}, relative trace left out "
            f"{float(np.max(self.relative_trace_error, initial=0.0)):.1e}"
        )


def exact_factors(
    K: np.ndarray, *, rtol: float = PIVOT_RTOL, max_trace_error: float = MAX_TRACE_ERROR, max_rank: int | None = None
) -> DenseFactorization:
    r"""Pivoted Cholesky factors of every kernel of a dense bank (module docstring).

    Parameters
    ----------
    K : ndarray (M, N, N)
        Symmetric positive semidefinite Gram matrices (read, not modified).
    rtol : float
        Pivot tolerance relative to each kernel's largest diagonal entry.
    max_trace_error : float
        The factors are exact when every kernel's relative trace left out is
        at most this.
    max_rank : int, optional
        Keep at most this many columns per kernel (the factors are then
        exact only if the kernels have that rank).

    Returns
    -------
    DenseFactorization
    """
    t0 = time.perf_counter()
    K = np.asarray(K, dtype=np.float64)
    M, N, _ = K.shape
    cols: list[np.ndarray] = []
    pivots: list[np.ndarray] = []
    errors = np.zeros(M)
    for m in range(M):
        Km = K[m]
        diag = np.diag(Km)
        top = float(np.max(diag)) if N else 0.0
        trace = float(np.sum(diag))
        if not (top > 0.0 and math.isfinite(trace)):
            cols.append(np.zeros((0, N)))
            pivots.append(np.zeros(0, dtype=np.int64))
            errors[m] = 0.0 if trace == 0.0 else math.inf
            continue
        # Km.T is the Fortran-ordered view of the symmetric matrix: LAPACK works on one copy
        c, piv, rank, info = lapack.dpstrf(Km.T, lower=1, tol=rtol * top)
        if info < 0:  # pragma: no cover - an argument LAPACK rejects
            raise ValueError(f"dpstrf rejected argument {-info} for kernel {m}")
        r = int(rank) if max_rank is None else min(int(rank), int(max_rank))
        order = np.asarray(piv, dtype=np.int64) - 1
        p = order[:r]
        upper = c[:, :r].T  # L^T in pivot order (r, N), a view of LAPACK's copy
        for j in range(1, r):  # LAPACK leaves K's entries below L^T's diagonal
            upper[j, :j] = 0.0
        # columns back in sample order; take gives a C-ordered array (fancy indexing of the
        # second axis does not, and the bank would copy it again)
        block = np.take(upper, np.argsort(order), axis=1)
        cols.append(block)
        pivots.append(p)
        kept = float(np.einsum("ij,ij->", block, block))
        errors[m] = abs(trace - kept) / trace
    LT = np.vstack(cols) if cols else np.zeros((0, N))
    starts = np.concatenate([[0], np.cumsum([b.shape[0] for b in cols])]).astype(np.int64)
    traces = np.einsum("mii->m", K)
    bank = ExactFactorBank(LT, starts, pivots, trace_error=np.where(np.isfinite(errors), errors * np.abs(traces), 0.0))
    ranks = np.diff(starts)
    bad = [m for m in range(M) if not errors[m] <= max_trace_error]
    reason = ""
    if bad:
        m = bad[0]
        reason = (
            f"the pivoted Cholesky factor of kernel {m} (rank {int(ranks[m])} of {N}) "
            f"leaves out {errors[m]:.1e} of its trace > {max_trace_error:g}"
        )
    return DenseFactorization(
        bank=bank,
        ranks=ranks,
        relative_trace_error=errors,
        exact=not bad,
        reason=reason,
        time_s=time.perf_counter() - t0,
    )
