r"""Two-stage methods at the problem level: kernel weights :math:`\eta` learnt by a ``weighting`` component
(:mod:`mklkit.weighting`), then the problem with the ``uniform`` regularizer on the scaled bank
:math:`K'_m = \eta_m K_m` (the kernels with :math:`\eta_m = 0` left out), solved by any engine and certified by its
own gap; its solution maps back to the whole, unscaled bank by :math:`\alpha_m = \eta_m\alpha'_m`, so that
:math:`f = \sum_m K_m\alpha_m` and predictions through the bank's test side are unchanged (``docs/two_stage.md``).

With the uniform regularizer every block of the second stage is the same vector,
:math:`\alpha'_m = \alpha'`, and :math:`f = (\sum_m\eta_mK_m)\alpha'`: the single-kernel learner on the combined
kernel.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np

from ..plugins import get_registry
from .errors import PipelineError
from .problem_settings import SECOND_STAGE_REGULARIZER

logger = logging.getLogger("mklkit.pipeline")

__all__ = ["SECOND_STAGE_REGULARIZER", "WeightedProblem", "second_stage_C", "weight_problem"]


def second_stage_C(C: Any) -> Any:
    """The rule for the second stage's C: ``"auto"`` is ``"path"`` (C chosen on held-out rows) at every N, the
    ``"scale"`` rule being the elastic net's (liver, ``smomkl`` bank, three 70/30 splits, logistic loss: the
    ``average`` weighting scored 62.5 % with ``"scale"`` and 71.2 % with the path); anything else as given."""
    return "path" if C == "auto" else C


@dataclasses.dataclass
class WeightedProblem:
    r"""The second stage of a two-stage method: ``problem`` on the kernels ``keep`` (those with
    :math:`\eta_m > 0`) scaled by :math:`\eta_m`, with the ``uniform`` regularizer; ``eta`` (M,) the weights of the
    whole bank of ``n_kernels``, ``time_s`` the seconds the weighting took."""

    problem: Any
    eta: np.ndarray
    keep: np.ndarray
    n_kernels: int
    time_s: float = 0.0

    def result(self, result: Any) -> Any:
        r"""A result of the second stage on the whole unscaled bank: :math:`\alpha_m = \eta_m\alpha'_m`,
        block norms :math:`\|\alpha_m\|_{K_m} = \sqrt{\eta_m}\|\alpha'_m\|_{K'_m}` (0 off ``keep``), kernel weights
        :math:`\eta`; objective, gap and status are the second stage's."""
        eta = self.eta[self.keep]
        alpha = np.zeros((self.n_kernels, np.asarray(result.alpha).shape[1]))
        alpha[self.keep] = eta[:, None] * np.asarray(result.alpha)
        norms = np.zeros(self.n_kernels)
        norms[self.keep] = np.sqrt(eta) * np.asarray(result.block_norms)
        return dataclasses.replace(result, alpha=alpha, kernel_weights=self.eta.copy(), block_norms=norms)

    def start(self, result: Any) -> Any:
        """A result on the whole bank (:meth:`result`'s form) as a warm start of the second stage (``None`` stays)."""
        if result is None:
            return None
        eta = self.eta[self.keep]
        alpha = np.asarray(result.alpha)[self.keep] / eta[:, None]
        norms = np.asarray(result.block_norms)[self.keep] / np.sqrt(eta)
        weights = np.full(self.keep.size, 1.0 / self.keep.size)
        return dataclasses.replace(result, alpha=np.ascontiguousarray(alpha), kernel_weights=weights, block_norms=norms)


def weight_problem(problem: Any, weighting: Any, key: str = "problem.weighting") -> WeightedProblem:
    r"""The second stage of ``weighting`` on ``problem``: :math:`\eta` = ``weighting.weights(problem.bank,
    problem.y)`` (checked: finite, :math:`\ge 0`, not all 0), then the problem on the scaled bank.

    Raises
    ------
    PipelineError
        The bank's representation is not one a weighting reads (``key``), or the weighting gives no weights.
    """
    from ..weighting.base import WEIGHTING_REPRESENTATIONS, WeightingError, checked_weights

    rep = problem.representation
    if rep not in WEIGHTING_REPRESENTATIONS:
        raise PipelineError(
            key, f"weighting {weighting.name!r} reads the kernels themselves", rep, "a Gram (array) or factor bank"
        )
    t0 = time.perf_counter()
    try:
        eta = checked_weights(weighting.weights(problem.bank, problem.y), problem.n_kernels, weighting.name)
    except WeightingError as exc:
        raise PipelineError(key, str(exc), weighting.describe(), "a weighting that gives weights here") from None
    elapsed = time.perf_counter() - t0
    keep = np.flatnonzero(eta > 0.0)
    bank = problem.bank.subset(keep).scaled(eta[keep])
    names = None if problem.kernel_names is None else [problem.kernel_names[m] for m in keep]
    uniform = get_registry().create("regularizer", SECOND_STAGE_REGULARIZER)
    second = dataclasses.replace(problem, K=bank, regularizer=uniform, kernel_names=names)
    logger.info("weighting %s: %d of %d kernels weighted in %.2f s", weighting.describe(), keep.size, eta.size, elapsed)
    return WeightedProblem(second, eta, keep, problem.n_kernels, elapsed)
