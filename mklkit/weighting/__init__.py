"""Two-stage methods' first stage: the ``weighting`` component kind and its built-ins (``docs/two_stage.md``)."""

from .base import SCALE_BEHAVIOURS, WEIGHTING_REPRESENTATIONS, Weighting, WeightingError, checked_weights
from .methods import BUILTIN_WEIGHTINGS, PWMK, AlignF, Average, EasyMKL, FHeuristic, alignf_qp, easymkl_margin
from .solvers import QPSolution, nonnegative_qp, simplex_pair_qp

__all__ = [
    "SCALE_BEHAVIOURS",
    "WEIGHTING_REPRESENTATIONS",
    "Weighting",
    "WeightingError",
    "checked_weights",
    "nonnegative_qp",
    "simplex_pair_qp",
    "QPSolution",
    "alignf_qp",
    "easymkl_margin",
    "Average",
    "AlignF",
    "EasyMKL",
    "FHeuristic",
    "PWMK",
    "BUILTIN_WEIGHTINGS",
]
