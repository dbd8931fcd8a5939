"""Solver results: one frozen record every engine returns."""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class Status(str, enum.Enum):
    """How a solve ended.  Engines never raise on non-convergence."""

    CONVERGED = "converged"
    MAX_ITER = "max_iter"
    STALLED = "stalled"
    NUMERICAL_ERROR = "numerical_error"
    STOPPED = "stopped"  # a callback asked to stop

    def __str__(self) -> str:  # "converged", not "Status.CONVERGED"
        return self.value


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one MKL solve.

    Attributes
    ----------
    objective, dual_objective : float
        Primal value :math:`\\sum_i \\ell(y_i, z_i) + \\sum_m \\tilde g_C(\\|\\alpha_m\\|_{K_m})`
        (SpicyMKL eq. 42), and the dual at the engine's projected dual point ``dual`` (§6.1).
    gap : float
        Relative duality gap ``(objective - dual_objective) / |objective|``.
    alpha : ndarray (M, N)
        Coefficients of every block (zero rows for inactive kernels).
    kernel_weights, block_norms : ndarray (M,)
        :math:`d_m = 1 / (2 g'(\\|\\alpha_m\\|^2_{K_m}))` normalised to sum 1, and :math:`\\|\\alpha_m\\|_{K_m}`.
    history : list of dict
        Per outer iteration: ``iteration``, ``objective``, ``dual_objective``, ``gap``, ``n_active``,
        ``time_s`` (and engine-specific keys).
    engine, solved_by : str
        The engine asked to solve (``"auto"`` when ``auto`` chose), and the one whose iterates gave
        the final point (``auto``'s delegate after any fallback; default ``engine``).
    C_max : float, optional
        The smallest ``C`` at which α = 0 is certified optimal (:func:`mklkit.engines.common.zero_solution`);
        ``inf`` when none is (non-sparse regularizers), ``None`` when not computed.
    """

    status: Status
    objective: float
    dual_objective: float
    gap: float
    iterations: int
    alpha: np.ndarray
    bias: float
    kernel_weights: np.ndarray
    block_norms: np.ndarray
    history: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    time_s: float = 0.0
    engine: str = ""
    dual: np.ndarray | None = None
    C_max: float | None = None
    solved_by: str = ""

    def __post_init__(self) -> None:
        if not self.solved_by:
            object.__setattr__(self, "solved_by", self.engine)

    @property
    def trivial(self) -> bool:
        """Whether every kernel is off: the model predicts the offset alone."""
        return bool(np.asarray(self.block_norms).size) and not np.any(np.asarray(self.block_norms) > 0)

    @property
    def converged(self) -> bool:
        return self.status == Status.CONVERGED

    @property
    def active_set(self) -> np.ndarray:
        """Indices of kernels with a non-zero block."""
        return np.flatnonzero(self.block_norms > 0)

    def decision_function(self, K_cross: np.ndarray) -> np.ndarray:
        """Predictions :math:`\\sum_m K_m(X_{new}, X)\\alpha_m + b` of test-vs-train kernels ``K_cross``
        (M, N_new, N), normalised like the training bank."""
        K_cross = np.asarray(K_cross, dtype=np.float64)
        active = self.active_set
        if active.size == 0:
            return np.full(K_cross.shape[1], self.bias)
        return np.einsum("mij,mj->i", K_cross[active], self.alpha[active]) + self.bias


def active_union(results: Any) -> np.ndarray:
    """Indices of the kernels active in at least one of ``results``, sorted."""
    return np.unique(np.concatenate([np.asarray(r.active_set, dtype=np.int64) for r in results]))


class ConvergenceWarning(UserWarning):
    """Emitted (on stderr, through :mod:`warnings`) when a solve ends unconverged."""


class TrivialModelWarning(UserWarning):
    """Emitted when a solve ends with every kernel off (typically ``C >= C_max``): the model predicts a constant."""


def trivial_message(C: float, C_max: float | None, where: str = "", auto: bool = False) -> str:
    """The one line of :class:`TrivialModelWarning`: ``C``, ``C_max`` and what to do (``auto``: C came from
    ``C='auto'``, so the advice is a smaller C)."""
    head = f"{where}: " if where else ""
    given = f"C = {C:.6g} (from C='auto')" if auto else f"C = {C:.6g}"
    if C_max is not None and math.isfinite(C_max):
        # below C_max only for a loss with a kink at the optimal offset, where C_max is an upper bound
        relation = (
            f">= C_max = {C_max:.6g}"
            if C >= C_max
            else f"< C_max = {C_max:.6g} (an upper bound of the threshold for this loss)"
        )
        todo = "use a C below C_max" if auto else "use C='auto' or a C below C_max"
        return (
            f"{head}all kernels are off: {given} {relation}, so the model predicts a constant; "
            f"{todo} (e.g. {0.1 * min(C, C_max):.3g})"
        )
    todo = "use a smaller C" if auto else "use C='auto' or a smaller C"
    return f"{head}all kernels are off at {given}, so the model predicts a constant; {todo}"


def warn_if_trivial(result: SolveResult, C: float, where: str = "", stacklevel: int = 2, auto: bool = False) -> bool:
    """Warn (:class:`TrivialModelWarning`) when ``result`` has every kernel off; return whether it did."""
    if not result.trivial:
        return False
    warnings.warn(trivial_message(float(C), result.C_max, where, auto), TrivialModelWarning, stacklevel=stacklevel + 1)
    return True


class _NonZeroRows:
    """The non-zero rows of an (M, N) coefficient array (a pickled or kept result's ``alpha``)."""

    def __init__(self, alpha: np.ndarray) -> None:
        self.shape = alpha.shape
        self.rows = np.flatnonzero(np.any(alpha != 0.0, axis=1))
        self.values = np.ascontiguousarray(alpha[self.rows])

    def array(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.values.dtype)
        out[self.rows] = self.values
        return out


def pack_results(results: Any) -> Any:
    """Results (a SolveResult, or lists of them) with ``alpha`` reduced to its non-zero rows."""
    if isinstance(results, list):
        return [pack_results(r) for r in results]
    alpha = getattr(results, "alpha", None)
    if dataclasses.is_dataclass(results) and isinstance(alpha, np.ndarray) and alpha.ndim == 2:
        return dataclasses.replace(results, alpha=_NonZeroRows(alpha))
    return results


def unpack_results(results: Any) -> Any:
    """The inverse of :func:`pack_results`: every ``alpha`` back to its (M, N) array."""
    if isinstance(results, list):
        return [unpack_results(r) for r in results]
    alpha = getattr(results, "alpha", None)
    if isinstance(alpha, _NonZeroRows):
        return dataclasses.replace(results, alpha=alpha.array())
    return results
