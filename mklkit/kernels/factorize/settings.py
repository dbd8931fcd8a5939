"""The settings of :func:`~mklkit.kernels.factorize.build_factor_bank`: checks, errors, warnings."""

from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator

import numpy as np

from ...components.params import did_you_mean
from ..description import DEFAULT_MEMORY_BUDGET, NORMALIZATIONS, BankError
from ..errors import _must
from ..features import _is_int

#: The factorization methods of :func:`~mklkit.kernels.factorize.build_factor_bank`.
METHODS = ("auto", "exact", "pivoted_cholesky", "nystrom")
#: The methods that approximate a kernel (the others are exact factors).
APPROX_METHODS = ("pivoted_cholesky", "nystrom")
#: Default relative residual trace.
DEFAULT_TOL = 1e-3
#: Largest dimension of an explicit polynomial feature map (``max_exact_dim``).
MAX_EXACT_DIM = 256


class FactorError(BankError):
    """An invalid factorization setting, or factors that do not fit the memory budget.

    ``key`` names the setting, with the ``root`` prefix given to ``build_factor_bank``.
    """


class RankCapWarning(UserWarning):
    """A factor ``rank`` above what can be used (the N points, or what ``memory_budget`` holds) was capped.

    ``key``, ``value`` (the requested rank) and ``problem`` are data; the text is
    ``<key> = <value>: <problem>``, or what the renderer set by :func:`warning_names` makes of it.
    """

    def __init__(self, key: str, value: Any, problem: str) -> None:
        self.key, self.value, self.problem = key, value, problem
        render = _WARNING_NAMES.get()
        super().__init__(self.message() if render is None else render(self))

    def message(self, key: str | None = None) -> str:
        """The one-line text, with ``key`` in place of the own one."""
        return f"{self.key if key is None else key} = {self.value}: {self.problem}"

    def __reduce__(self) -> Any:  # the text as rendered, not rendered again where it is unpickled
        return _rank_cap_warning, (self.key, self.value, self.problem, str(self))


def _rank_cap_warning(key: str, value: Any, problem: str, text: str) -> RankCapWarning:
    w = RankCapWarning.__new__(RankCapWarning)
    w.key, w.value, w.problem = key, value, problem
    UserWarning.__init__(w, text)
    return w


_WARNING_NAMES: ContextVar[Callable[[RankCapWarning], str] | None] = ContextVar("mklkit_warning_names", default=None)


@contextmanager
def warning_names(render: Callable[[RankCapWarning], str]) -> Iterator[None]:
    """Inside the block (this thread or task), a :class:`RankCapWarning` reads ``render(warning)``."""
    token = _WARNING_NAMES.set(render)
    try:
        yield
    finally:
        _WARNING_NAMES.reset(token)


def _key(root: str, name: str) -> str:
    return f"{root}.{name}" if root else name


def _budget_key(root: str) -> str:
    """The memory budget's key, a sibling of the factor settings (``kernels.memory_budget``)."""
    return _key(root.rpartition(".")[0], "memory_budget")


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _bad(root: str, name: str, allowed: str, value: Any, hint: str = "") -> BankError:
    return _must(_key(root, name), allowed, value, hint, cls=FactorError)


def _one_of(root: str, name: str, value: Any, choices: tuple[str, ...]) -> BankError:
    allowed = f"one of {', '.join(map(repr, choices))}"
    return _bad(root, name, allowed, value, did_you_mean(str(value), list(choices)))


def check_settings(
    rank: Any = None, tol: Any = DEFAULT_TOL, method: Any = "auto", seed: Any = 0, root: str = ""
) -> None:
    """Validate ``rank``, ``tol``, ``method`` and ``seed`` of ``build_factor_bank`` (no data needed).

    Raises
    ------
    FactorError
        With ``key`` (``<root>.rank`` ...), ``value`` and ``allowed`` as data.
    """
    if rank is not None and not (_is_int(rank) and rank >= 1):
        raise _bad(root, "rank", "an integer >= 1 or None (as needed for tol)", rank)
    if not (_is_real(tol) and 0.0 <= float(tol) < 1.0):
        raise _bad(root, "tol", "a number in [0, 1) (the relative residual trace)", tol)
    if method not in METHODS:
        raise _one_of(root, "method", method, METHODS)
    if not (_is_int(seed) and seed >= 0):
        raise _bad(root, "seed", "an integer >= 0", seed)


def _check_settings(
    rank: Any, tol: Any, method: Any, seed: Any, normalize: Any, memory_budget: Any, max_exact_dim: Any, root: str
) -> float:
    """Validate all settings of ``build_factor_bank``; returns the budget in bytes."""
    check_settings(rank, tol, method, seed, root)
    if normalize not in NORMALIZATIONS:
        raise _one_of(root, "normalize", normalize, NORMALIZATIONS)
    if not (_is_int(max_exact_dim) and max_exact_dim >= 1):
        raise _bad(root, "max_exact_dim", "an integer >= 1", max_exact_dim)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if not (_is_real(budget) and math.isfinite(budget) and budget > 0):
        raise _bad(root, "memory_budget", "a number of bytes > 0 or None", memory_budget)
    return float(budget)
