"""Predictions of solutions on a factor bank without its training factors: :class:`FactorPredictor`."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

_NO_MAP = (
    "this FactorBank has no map to new points (factor_map is None: it was made as "
    "FactorBank(LT, starts)); build it with mklkit.kernels.factorize.build_factor_bank "
    "(kernels on data), or with FactorBank.from_factors (given factors: transform then takes "
    "the new points' factor rows)"
)


def fold_predictor(
    bank: Any, alpha: np.ndarray, bias: Any = 0.0, kernels: Sequence[int] | None = None
) -> "FactorPredictor":
    """:meth:`FactorBank.predictor <mklkit.kernels.factor.FactorBank.predictor>` of ``bank``."""
    A = np.asarray(alpha, dtype=np.float64)
    if A.ndim == 2:
        A = A[None]
    if A.ndim != 3 or A.shape[1:] != bank.shape[:2]:
        raise ValueError(
            f"alpha must have shape {bank.shape[:2]} or (T, {bank.shape[0]}, {bank.shape[1]}); got {np.shape(alpha)}"
        )
    b = np.broadcast_to(np.asarray(bias, dtype=np.float64).ravel(), (A.shape[0],)).copy()
    beta = np.stack([bank.coefficients(a) for a in A])
    if kernels is None:
        kernels = np.flatnonzero(bank._segment_sums(np.einsum("tr,tr->r", beta, beta)) > 0.0)
    held = np.asarray(kernels, dtype=np.int64).ravel()
    if bank.factor_map is None:
        raise ValueError(_NO_MAP)
    return FactorPredictor(
        bank.factor_map.fold(held, beta), b, held, bank.shape[1], bank.trace()[held], bank.trace_error[held].copy()
    )


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
