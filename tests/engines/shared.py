"""Data and checks that the engine tests share.

Real benchmark sets (bundled with mklkit), small subsamples, a handful of
kernels of unit trace (the engine kit's :func:`mklkit.testing.engines.sample_bank`);
conic reference solutions on them (cached); and the callback-stop check that
every engine must pass.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from mklkit.engines.objectives import relative_gap
from mklkit.result import ConvergenceWarning, Status
from mklkit.testing.engines import sample_bank as bank, sample_points

try:
    from tests.conic_reference import solve_reference
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import solve_reference


def sonar_points(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random rows of sonar, standardized, and their ±1 labels."""
    return sample_points("sonar", n, seed)


@functools.lru_cache(maxsize=None)
def sonar(n: int = 80, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Classification: :func:`bank` on :func:`sonar_points`, and the labels."""
    X, y = sonar_points(n, seed)
    return bank(X), y


@functools.lru_cache(maxsize=None)
def liver(n: int = 80, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Regression: the BUPA ``drinks`` column from the five blood tests."""
    X, t = sample_points("liver", n, seed)
    return bank(X), t


DATA = {"sonar": sonar, "liver": liver}


@functools.lru_cache(maxsize=None)
def reference(data: str, loss: str, reg: str, C: float, bias: bool = True, **params: Any):
    """The conic reference solution on ``DATA[data]()`` (cached)."""
    K, y = DATA[data]()
    return solve_reference(K, y, loss, reg, C, bias=bias, **params)


def solve_stopped(engine: Any, problem: Any, stop_at: int) -> tuple[Any, list[dict[str, Any]]]:
    """Solve with a callback whose truthy return at iteration ``stop_at`` stops the solve.

    Checks that the solve stops there, with status ``stopped`` and no
    ``ConvergenceWarning``, and that the result holds the best primal and the
    best dual value of the records seen (engines return their incumbents,
    :class:`mklkit.engines.common.Incumbents`) with their gap; returns the
    result and the records the callback saw.
    """
    __tracebackhide__ = True
    seen: list[dict[str, Any]] = []

    def cb(state: dict[str, Any]) -> bool:
        seen.append(dict(state))
        return state["iteration"] >= stop_at

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = engine.solve(problem, callback=cb)
    assert res.status == Status.STOPPED
    assert res.iterations == stop_at and seen[-1]["iteration"] == stop_at
    assert_incumbents(res, seen)
    return res, seen


def assert_incumbents(res: Any, records: list[dict[str, Any]]) -> None:
    """The result holds the best primal and the best dual value of ``records`` (or better:
    the zero solution and unrecorded start points count too), and their gap."""
    __tracebackhide__ = True
    assert res.objective <= min(rec["objective"] for rec in records)
    assert res.dual_objective >= max(rec["dual_objective"] for rec in records)
    assert res.gap == relative_gap(res.objective, res.dual_objective) <= records[-1]["gap"]
