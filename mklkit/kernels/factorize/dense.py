r"""Exact factors of a dense Gram bank, :math:`K_m = L_mL_m^\top` to round-off, by LAPACK's pivoted Cholesky.

``dpstrf`` (Higham 2009, §3) stops when the largest diagonal entry of the Schur complement falls below
``rtol`` times the largest of :math:`K_m`; the trace left out is measured.  The triangular block maps
coordinates back: :math:`\alpha_{m,\pi} = L_{11}^{-\top}\beta_m` (:meth:`ExactFactorBank.solve_coefficients`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack, solve_triangular

from ..factor import FactorBank
from ..factor_arrays import gram_spectral_bound

#: ``dpstrf`` stops at a pivot below this times the largest diagonal entry of the kernel.
PIVOT_RTOL = 1e-14

#: Largest relative trace left out for which the factors count as the kernel itself.
MAX_TRACE_ERROR = 1e-10


class ExactFactorBank(FactorBank):
    r"""A :class:`~mklkit.kernels.factor.FactorBank` of pivoted Cholesky factors of dense kernels, with
    ``pivots[m]`` (r_m,) the samples of the triangular block of kernel ``m`` and ``spectral_bounds[m]`` an upper
    bound of :math:`\|L_m\|_2^2` found from the kernel (NaN where none was found, or none asked for:
    :func:`~mklkit.kernels.factor_arrays.gram_spectral_bound`; :math:`K_m - L_mL_m^\top` is a Schur complement,
    positive semi-definite, so a bound of :math:`K_m` bounds :math:`L_m`)."""

    def __init__(
        self,
        LT: np.ndarray,
        starts: np.ndarray,
        pivots: list[np.ndarray],
        *,
        trace_error: np.ndarray | None = None,
        spectral_bounds: np.ndarray | None = None,
    ) -> None:
        super().__init__(LT, starts, trace_error=trace_error)
        self.pivots = [np.asarray(p, dtype=np.int64) for p in pivots]
        M = len(self.pivots)
        self.spectral_bounds = np.full(M, np.nan) if spectral_bounds is None else np.asarray(spectral_bounds, float)

    def subset(self, keep: np.ndarray) -> "ExactFactorBank":
        """The bank of the kernels ``keep`` only, with their pivots and bounds."""
        part = super().subset(keep)
        return ExactFactorBank(
            part.LT,
            part.starts,
            [self.pivots[m] for m in keep],
            trace_error=part.trace_error,
            spectral_bounds=self.spectral_bounds[np.asarray(keep)],
        )

    def solve_coefficients(self, m: int, beta_m: np.ndarray) -> np.ndarray:
        r""":math:`\alpha_m` (N,) with :math:`L_m^\top\alpha_m = \beta_m`, supported on the pivots; (N, K) for
        ``beta_m`` (r_m, K)."""
        p = self.pivots[m]
        out = np.zeros((self.shape[1],) + np.shape(beta_m)[1:])
        if p.size:
            U = self.block(m)[:, p]
            out[p] = solve_triangular(U, np.asarray(beta_m, dtype=np.float64), lower=False, check_finite=False)
        return out


@dataclass(frozen=True)
class DenseFactorization:
    """The outcome of :func:`exact_factors`: ``exact`` when every kernel's relative trace error is at most
    ``max_trace_error``, else ``reason`` says why not."""

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
    K: np.ndarray,
    *,
    rtol: float = PIVOT_RTOL,
    max_trace_error: float = MAX_TRACE_ERROR,
    max_rank: int | None = None,
    spectral_bounds: bool = False,
) -> DenseFactorization:
    """Pivoted Cholesky factors of every kernel of ``K`` (M, N, N) (not modified); ``rtol``: pivot tolerance
    relative to the largest diagonal entry; ``max_rank``: at most this many columns per kernel;
    ``spectral_bounds``: also the bank's ``spectral_bounds`` from the kernels, for the block methods that read
    them (:func:`~mklkit.kernels.factor_arrays.block_spectral_bounds`; else NaN)."""
    t0 = time.perf_counter()
    K = np.asarray(K, dtype=np.float64)
    M, N, _ = K.shape
    cols: list[np.ndarray] = []
    pivots: list[np.ndarray] = []
    errors = np.zeros(M)
    bounds = np.full(M, np.nan)
    for m in range(M):
        Km = K[m]
        if spectral_bounds:
            bounds[m] = gram_spectral_bound(Km)
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
        upper = np.triu(c[:, :r].T)  # L^T in pivot order (r, N); LAPACK leaves K's entries below its diagonal
        # columns back in sample order; take gives a C-ordered array (fancy indexing does not)
        block = np.take(upper, np.argsort(order), axis=1)
        cols.append(block)
        pivots.append(p)
        kept = float(np.einsum("ij,ij->", block, block))
        errors[m] = abs(trace - kept) / trace
    LT = np.vstack(cols) if cols else np.zeros((0, N))
    starts = np.concatenate([[0], np.cumsum([b.shape[0] for b in cols])]).astype(np.int64)
    traces = np.einsum("mii->m", K)
    bank = ExactFactorBank(
        LT,
        starts,
        pivots,
        trace_error=np.where(np.isfinite(errors), errors * np.abs(traces), 0.0),
        spectral_bounds=bounds,
    )
    ranks = np.diff(starts)
    bad = [m for m in range(M) if not errors[m] <= max_trace_error]
    reason = ""
    if bad:
        m = bad[0]
        reason = (
            f"the pivoted Cholesky factor of kernel {m} (rank {int(ranks[m])} of {N}) "
            f"leaves out {errors[m]:.1e} of its trace > {max_trace_error:g}"
        )
    return DenseFactorization(bank, ranks, errors, not bad, reason, time.perf_counter() - t0)
