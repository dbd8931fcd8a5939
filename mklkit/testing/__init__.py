"""The conformance kits: components and engines.

* :mod:`mklkit.testing.components`: check a loss or regularizer against its
  mathematical contract (:func:`check_component`, :func:`assert_conforms`,
  :func:`check_parameter_points`);
* :mod:`mklkit.testing.engines`: check that an engine's results are what it
  claims on small real problems (:func:`check_engine`,
  :func:`assert_engine_conforms`);
* :mod:`mklkit.testing.conic`: the cvxpy + Clarabel reference the engine kit
  uses when cvxpy is installed (imported only then).

Both kits return a :class:`ConformanceReport` of :class:`CheckResult`.
"""
from __future__ import annotations

from ._report import CheckResult, ConformanceReport
from .components import (
    LOSS_IDENTITIES,
    REGULARIZER_IDENTITIES,
    assert_conforms,
    check_component,
    check_loss,
    check_parameter_points,
    check_regularizer,
    parameter_points,
    random_params,
)
from .engines import (
    ENGINE_CHECKS,
    KitProblem,
    assert_engine_conforms,
    check_engine,
    engine_problems,
)

__all__ = [
    "CheckResult",
    "ConformanceReport",
    "check_component",
    "check_loss",
    "check_regularizer",
    "assert_conforms",
    "check_parameter_points",
    "parameter_points",
    "random_params",
    "LOSS_IDENTITIES",
    "REGULARIZER_IDENTITIES",
    "ENGINE_CHECKS",
    "KitProblem",
    "engine_problems",
    "check_engine",
    "assert_engine_conforms",
]
