"""mklkit: certifiably correct Multiple Kernel Learning solvers with plugins.

The public names are loaded on first use, so that ``mklkit --help`` answers at once.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    name: module
    for module, names in (
        ("mklkit.components.params", "Param ParamError"),
        ("mklkit.components.base", "Loss Regularizer LabelError"),
        ("mklkit.components.base", "LossJit RegularizerJit ConstrainedConjugate BregmanJit"),
        ("mklkit.engines.base", "Engine"),
        ("mklkit.problem", "Problem"),
        ("mklkit.result", "SolveResult Status ConvergenceWarning TrivialModelWarning"),
        ("mklkit.compilation", "CompilationWarning"),
        ("mklkit.plugins", "hookimpl get_registry"),
        ("mklkit.api", "load_spec run"),
        ("mklkit.estimators", "MKLClassifier MKLRegressor MKLPath"),
        ("mklkit.estimators", "MKLOneClassSVM"),
    )
    for name in names.split()
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
