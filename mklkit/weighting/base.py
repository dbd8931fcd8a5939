r"""The ``weighting`` component kind: a rule that learns kernel weights :math:`\eta \ge 0` from a bank and its
target before the standard single-kernel learner is trained on :math:`\sum_m \eta_m K_m` (a two-stage method,
``docs/two_stage.md``)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..components.base import CLASSIFICATION, REGRESSION, Component

#: What a weighting says of its weights when one kernel is multiplied by ``c > 0``: ``"invariant"`` (η does not
#: change, up to a common factor), ``"inverse"`` (η_m becomes η_m / c up to a common factor, so that the combined
#: kernel does not change) or ``"none"`` (no claim).
SCALE_BEHAVIOURS: tuple[str, ...] = ("invariant", "inverse", "none")

#: The bank representations a weighting reads (a sharded bank is not one of them).
WEIGHTING_REPRESENTATIONS: tuple[str, ...] = ("array", "factor")


class WeightingError(ValueError):
    """A weighting that cannot give weights for this bank and target (e.g. every kernel constant)."""


class Weighting(Component):
    r"""Base of the weighting components: the first stage of a two-stage method.

    A subclass sets ``name``, ``description``, ``params`` (``Param``), ``tasks`` (the targets it learns from:
    ``"classification"`` with labels :math:`\pm 1`, ``"regression"`` with real targets), ``scale`` (one of
    :data:`SCALE_BEHAVIOURS`, checked by the conformance kit) and implements :meth:`weights`.

    The second stage is the problem with the ``uniform`` regularizer on the scaled bank
    :math:`K'_m = \eta_m K_m` (:mod:`mklkit.pipeline.weighting`), i.e. the single-kernel learner on
    :math:`\sum_m \eta_m K_m`.
    """

    kind: ClassVar[str] = "weighting"
    tasks: ClassVar[tuple[str, ...]] = (CLASSIFICATION, REGRESSION)
    scale: ClassVar[str] = "none"

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        r"""The kernel weights :math:`\eta \ge 0`, shape (M,), finite and not all zero.

        Parameters
        ----------
        bank : GramBank
            The training kernels: an :class:`~mklkit.kernels.ops.ArrayBank` or a
            :class:`~mklkit.kernels.factor.FactorBank` (``bank.representation``).
        y : ndarray (N,)
            The target: labels :math:`\pm 1` for classification, real values for regression.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement weights(bank, y)")

    def applies_to(self, task: str) -> bool:
        """Whether the weighting learns from targets of ``task`` (``"classification"`` or ``"regression"``)."""
        return task in self.tasks


def checked_weights(eta: Any, n_kernels: int, owner: str) -> np.ndarray:
    """``eta`` as a float64 (M,) array, or a :class:`WeightingError` saying what is wrong with it."""
    try:
        out = np.asarray(eta, dtype=np.float64)
    except (TypeError, ValueError):
        raise WeightingError(f"weighting {owner}: weights must be numbers; got {type(eta).__name__}") from None
    if out.shape != (n_kernels,):
        raise WeightingError(f"weighting {owner}: weights must have shape ({n_kernels},); got {out.shape}")
    if not np.all(np.isfinite(out)):
        raise WeightingError(f"weighting {owner}: weights must be finite; got {out.tolist()}")
    if np.any(out < 0.0) or not np.any(out > 0.0):
        raise WeightingError(f"weighting {owner}: weights must be >= 0 and not all 0; got {out.tolist()}")
    return np.ascontiguousarray(out)
