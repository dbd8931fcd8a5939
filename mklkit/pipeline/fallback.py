"""How ``auto`` runs its delegates and falls back: the stall rule (:class:`StallWatch`), another general
engine continuing from a delegate's point (:class:`Fallback`, a base of :class:`~mklkit.pipeline.choose.Auto`)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from ..engines.base import Callback, Engine
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult


class EngineSwitchWarning(UserWarning):
    """Emitted when ``auto`` stops an engine that made no progress and another continues."""


class StallWatch:
    r"""The stall rule on a delegate's certified gap: called with each history record, True (stop) when after
    :math:`k \ge` ``window`` records the best gap is not below ``ratio`` times the best of the first
    :math:`\lfloor k/2\rfloor` (a non-finite gap counts as none); :attr:`reason` then says so."""

    def __init__(self, window: int, ratio: float, unit: str = "iteration") -> None:
        self.window, self.ratio, self.unit = int(window), float(ratio), unit
        self.best: list[float] = []
        self.iterations: list[int] = []
        self.reason: str | None = None

    def __call__(self, rec: dict[str, Any]) -> bool:
        gap = float(rec.get("gap", math.nan))
        gap = gap if gap >= 0.0 and math.isfinite(gap) else math.inf
        best = min(self.best[-1], gap) if self.best else gap
        self.best.append(best)
        self.iterations.append(int(rec.get("iteration", len(self.best))))
        k = len(self.best)
        if k < self.window:
            return False
        then = self.best[k // 2 - 1]
        if best < self.ratio * then:
            return False
        self.reason = (
            f"no progress: best relative duality gap {best:.3e} after "
            f"{self.unit} {self.iterations[-1]}, {then:.3e} after "
            f"{self.unit} {self.iterations[k // 2 - 1]} (stall_ratio {self.ratio:g})"
        )
        return True


def finite_point(res: SolveResult) -> bool:
    """Whether a result's coefficients and bias are finite (another engine may start from them)."""
    return bool(np.all(np.isfinite(res.alpha))) and math.isfinite(res.bias)


class Fallback:
    """The fallback of :class:`~mklkit.pipeline.choose.Auto` among its general engines (``_engines``), and its
    delegates run with their records tagged."""

    def _after_fallback(
        self, problem: Problem, engine: Engine, why: str, warm_start: SolveResult | None
    ) -> tuple[Engine, str]:
        """The engine that finished a warm start of ``auto`` on the same rows and kernels (with history) after
        falling back from this choice: along a path the first choice that stalled at one C stalls at the
        next (``docs/engines.md``, "Stall switch")."""
        if warm_start is None or warm_start.engine != self.name or not self.fallback or not warm_start.history:
            return engine, why
        done = warm_start.solved_by
        if done == engine.name or np.shape(warm_start.alpha) != (problem.n_kernels, problem.n_samples):
            return engine, why
        other = next((e for e in self._applicable(problem) if e.name == done), None)
        if other is None:
            return engine, why
        return other, f"{why}; but {done} finished the warm start after {engine.name} fell short there"

    def _applicable(self, problem: Problem) -> list[Engine]:
        """The general engines that solve ``problem`` on its bank."""
        return [
            e for e in self._engines() if e.supports(problem) is None and problem.representation in e.representations
        ]

    def _other(self, problem: Problem, name: str) -> Engine | None:
        """The general engine that continues after ``name`` (None if none applies)."""
        return next((e for e in self._applicable(problem) if e.name != name), None)

    def _continue(
        self,
        problem: Problem,
        callback: Callback | None,
        name: str,
        first: SolveResult,
        warm_start: SolveResult | None,
        why: str | None = None,
    ) -> SolveResult | None:
        """A general engine other than ``name`` continues from ``first`` (None if none applies)."""
        other = self._other(problem, name)
        if other is None:
            return None
        start = first if finite_point(first) else warm_start
        second = self._run(other, problem, callback, start, first.iterations)
        why = why or f"{name} ended {first.status} ({first.message})"
        return dataclasses.replace(
            second,
            history=list(first.history) + list(second.history),
            iterations=first.iterations + second.iterations,
            time_s=first.time_s + second.time_s,
            message=f"auto -> {name} then {other.name}: {why}; {second.message}",
        )

    @staticmethod
    def _run(
        engine: Engine,
        problem: Problem,
        callback: Callback | None,
        warm_start: SolveResult | None,
        offset: int,
        watch: StallWatch | None = None,
    ) -> SolveResult:
        """Run a delegate, its records tagged with ``engine`` and iterations shifted by ``offset``; ``watch`` may
        stop it (the caller's callback is asked first)."""
        name = engine.name

        def tag(rec: dict[str, Any]) -> dict[str, Any]:
            return {**rec, "iteration": rec["iteration"] + offset, "engine": name}

        cb = None
        if callback is not None or watch is not None:

            def cb(rec: dict[str, Any]) -> Any:
                if callback is not None and callback(tag(rec)):
                    return True
                return watch is not None and watch(rec)

        with warnings.catch_warnings():
            # the delegate's warning is re-issued for the final result only
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = engine.solve(problem, cb, warm_start=warm_start)
        return dataclasses.replace(res, history=[tag(h) for h in res.history])
