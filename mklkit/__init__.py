"""mklkit: certifiably correct Multiple Kernel Learning solvers with plugins.

Importing :mod:`mklkit` is cheap; the public names below are loaded on first
use so that ``mklkit --help`` answers at once.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

__version__ = "0.1.0"

#: Modules renamed since an earlier release: old name -> new name.
FORMER_NAMES = {"mklkit._kernels": "mklkit._jit"}


_OWN_SPECS: dict[str, Any] = {}


class _FormerNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a module under the name it had before a rename (:data:`FORMER_NAMES`).

    numba's on-disk cache stores, with the code a plugin compiled against
    mklkit's jitted functions, the module those functions lived in; the cache
    is invalidated only when the plugin's own source changes.  Serving the
    former name keeps such a cache loadable after an upgrade instead of
    failing with ``ModuleNotFoundError``.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        for old in FORMER_NAMES:
            if fullname == old or fullname.startswith(old + "."):
                return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> Any:
        for old, new in FORMER_NAMES.items():
            if spec.name == old or spec.name.startswith(old + "."):
                module = importlib.import_module(new + spec.name[len(old):])
                _OWN_SPECS[spec.name] = module.__spec__  # the import system overwrites it
                return module
        raise ImportError(spec.name)  # pragma: no cover - find_spec matched it

    def exec_module(self, module: Any) -> None:
        """The module is the renamed one, already executed: give it back its own spec."""
        module.__spec__ = _OWN_SPECS.pop(module.__spec__.name, module.__spec__)


if not any(isinstance(f, _FormerNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _FormerNames())

_LAZY = {
    "Param": "mklkit.components.params",
    "ParamError": "mklkit.components.params",
    "Loss": "mklkit.components.base",
    "Regularizer": "mklkit.components.base",
    "LossJit": "mklkit.components.base",
    "RegularizerJit": "mklkit.components.base",
    "ConstrainedConjugate": "mklkit.components.base",
    "BregmanJit": "mklkit.components.base",
    "LossKernels": "mklkit.components.base",
    "RegularizerKernels": "mklkit.components.base",
    "BregmanKernels": "mklkit.components.base",
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
