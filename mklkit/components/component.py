r"""The base of every component: :class:`Component`, the :func:`kernel` decorator,
the read-only attributes derived from a class's ``@kernel`` methods, and the tasks.

The contracts built on it are :class:`~mklkit.components.loss.Loss` and
:class:`~mklkit.components.regularizer.Regularizer`; ``mklkit.components.base``
gathers them all under one import path.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from numba import njit

from .params import Param, validate_params

__all__ = ["kernel", "Component", "LabelError", "CLASSIFICATION", "REGRESSION", "as_array"]

CLASSIFICATION = "classification"
REGRESSION = "regression"


class LabelError(ValueError):
    """Labels that a loss cannot be trained on."""


def kernel(fn: Callable) -> staticmethod:
    """A compiled method of a component: ``staticmethod(njit(cache=True)(fn))``.

    A kernel has no ``self``: the parameters arrive as the vector ``params``
    (the component's ``param_vector``, numeric parameters in declaration
    order).  Kernels defined in a class body are cached on disk like
    module-level functions.
    """
    return staticmethod(njit(cache=True)(fn))


class _Derived:
    """A read-only attribute that groups the kernel methods of a component class."""

    def __init__(self, build: Callable[[type], Any]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self._build(type(obj) if cls is None else cls)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(
            f"'{self._name}' of {type(obj).__name__} is derived from its @kernel methods and cannot be set"
        )


def _refuse_declared_tuples(cls: type, names: Sequence[str]) -> None:
    given = [n for n in names if n in cls.__dict__]
    if given:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} assigns {', '.join(map(repr, given))}: "
            "a component writes its numerics as @kernel methods "
            "(mklkit.components.base.kernel), from which "
            f"{' and '.join(map(repr, given))} {'is' if len(given) == 1 else 'are'} derived"
        )


def _kernels(cls: type, names: Sequence[str]) -> list[Any]:
    return [getattr(cls, n, None) for n in names]


class Component:
    """Base of every pluggable component.

    Subclasses set the class attributes ``kind``, ``name``, ``description``
    and ``params``; instances hold validated parameter values as attributes
    of the same names.
    """

    kind: ClassVar[str] = ""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()

    def __init__(self, **kwargs: Any) -> None:
        values = validate_params(self.params, kwargs, owner=self.name or type(self).__name__)
        self._param_values = values
        for key, val in values.items():
            setattr(self, key, val)
        self._check()

    def _check(self) -> None:
        """Cross-parameter checks; raise :class:`ParamError`."""

    # -- parameters -----------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Validated parameters in declaration order (scikit-learn's ``get_params``).

        Parameter values are numbers, strings and flags, never estimators, so
        ``deep=True`` adds no nested ``<name>__<key>`` entries.  With this
        signature scikit-learn's ``clone`` copies a component given as an
        estimator parameter like any estimator: ``type(c)(**c.get_params(deep=False))``.
        """
        return dict(self._param_values)

    @property
    def param_vector(self) -> np.ndarray:
        """Numeric parameters as a C-contiguous float64 vector (declaration order)."""
        vals = [float(v) for v in self._param_values.values() if isinstance(v, (int, float))]
        return np.ascontiguousarray(vals, dtype=np.float64)

    def describe(self) -> str:
        """The name with the parameters, for messages: ``elasticnet(lam=0.5)``."""
        params = self.get_params()
        if not params:
            return self.name
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in params.items())
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._param_values.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._param_values == other._param_values  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._param_values.items())))

    def __reduce__(self):
        return (_rebuild, (type(self), self._param_values))


def _rebuild(cls, values):
    return cls(**values)


def as_array(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """C-contiguous float64 copy-free view where possible (cached signatures match)."""
    return np.ascontiguousarray(x, dtype=np.float64)
