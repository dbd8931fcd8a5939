"""mklkit: certifiably correct Multiple Kernel Learning solvers with plugins.

Importing :mod:`mklkit` is cheap; the public names below are loaded on first
use so that ``mklkit --help`` answers at once.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Param": "mklkit.components.params",
    "ParamError": "mklkit.components.params",
    "Loss": "mklkit.components.base",
    "Regularizer": "mklkit.components.base",
    "LossJit": "mklkit.components.base",
    "RegularizerJit": "mklkit.components.base",
    "ConstrainedConjugate": "mklkit.components.base",
    "BregmanJit": "mklkit.components.base",
    "LabelError": "mklkit.components.base",
    "Engine": "mklkit.engines.base",
    "Problem": "mklkit.problem",
    "SolveResult": "mklkit.result",
    "Status": "mklkit.result",
    "ConvergenceWarning": "mklkit.result",
    "TrivialModelWarning": "mklkit.result",
    "CompilationWarning": "mklkit.compilation",
    "hookimpl": "mklkit.plugins",
    "get_registry": "mklkit.plugins",
    "load_spec": "mklkit.api",
    "run": "mklkit.api",
    "MKLClassifier": "mklkit.estimators",
    "MKLRegressor": "mklkit.estimators",
    "MKLPath": "mklkit.estimators",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mklkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
