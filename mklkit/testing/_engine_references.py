"""What the engine kit compares a result with: the objectives recomputed from the returned points,
and a reference optimum (cvxpy + Clarabel, :mod:`mklkit.testing.conic`, else another engine)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines import common
from ..plugins import get_registry
from ..result import ConvergenceWarning, Status

__all__ = ["primal_value", "dual_value"]


def _weight_norm(problem: Any) -> Any:
    """The ``weight_norm`` of a regularizer that is not separable."""
    reg = problem.regularizer
    wn = getattr(reg, "weight_norm", None)
    if wn is None:
        raise ValueError(
            f"the regularizer {reg.describe()} is not separable and declares no "
            "weight_norm: its objective cannot be recomputed"
        )
    return wn


def primal_value(problem: Any, alpha: np.ndarray, bias: float) -> float:
    r""":math:`P(\alpha, b)` of ``problem`` from the components' jitted functions."""
    if getattr(problem.regularizer, "separable", True):
        return common.primal_objective(problem, alpha, bias)
    wn = _weight_norm(problem)
    b = float(bias) if problem.bias else 0.0
    norms = common.block_norms(problem.bank, alpha)
    z = common.predict(problem.bank, alpha, b)
    return common.loss_value(problem.loss, problem.y, z, problem.sample_weight) + wn.value(norms, problem.C)


def dual_value(problem: Any, rho: np.ndarray) -> float:
    r""":math:`D` at ``rho`` made feasible the standard way (SpicyMKL §6.1)."""
    if getattr(problem.regularizer, "separable", True):
        return common.projected_dual_objective(problem, rho)[0]
    wn = _weight_norm(problem)
    lo, hi = common.dual_box(problem)
    r = common.centre_dual(rho, lo, hi, problem.bias)
    norms = common.dual_block_norms(problem.bank, r)
    return -(common.loss_conjugate(problem.loss, problem.y, r, problem.sample_weight) + wn.conj(norms, problem.C))


@dataclass(frozen=True)
class Reference:
    """A reference optimum: a primal value attained, its relative accuracy and its source."""

    objective: float
    rtol: float
    source: str


def _conic_reference(problem: Any) -> Reference | None:
    try:
        from . import conic
    except ImportError:  # cvxpy is not installed
        return None
    spec = conic.formulation(problem)
    if spec is None:
        return None
    try:
        to_array = getattr(problem.bank, "to_array", None)  # a FactorBank's dense bank
        K = to_array() if to_array is not None else np.asarray(problem.K)
        sol = conic.solve_reference(
            K,
            problem.y,
            spec["loss"],
            spec["reg"],
            problem.C,
            bias=problem.bias,
            sample_weight=problem.sample_weight,
            **spec["params"],
        )
    except Exception:  # noqa: BLE001 - no reference then; another one is tried
        return None
    return Reference(float(sol.objective), max(10.0 * sol.tol, 1e-7), "cvxpy + Clarabel")


def _engine_reference(engine: Any, problem: Any) -> Reference | None:
    for reg in get_registry().registrations("engine"):
        if reg.name in ("auto", engine.name) or isinstance(engine, reg.cls):
            continue
        try:
            other = reg.cls(tol=1e-9)
            if other.supports(problem) is not None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                res = other.solve(problem)
        except Exception:  # noqa: BLE001 - try the next engine
            continue
        if res.status == Status.CONVERGED and math.isfinite(res.objective):
            return Reference(
                float(res.objective), max(float(res.gap), 1e-9), f"engine {reg.name!r} (gap {res.gap:.1e})"
            )
    return None


def find_reference(engine: Any, problem: Any, how: str) -> Reference | None:
    if how in ("auto", "conic"):
        ref = _conic_reference(problem)
        if ref is not None or how == "conic":
            return ref
    if how in ("auto", "engine"):
        return _engine_reference(engine, problem)
    return None
