"""One solve of an engine (:class:`Run`): the clock, the history, the callback, the best points,
the ending and its message (:func:`stop_message`); ``docs/engines.md``, "The run"."""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..problem import Problem
from ..result import SolveResult, Status
from . import common

if TYPE_CHECKING:
    from .base import Engine

logger = logging.getLogger(__name__)

#: ``callback(state) -> bool``; ``state`` is the history record of the outer
#: iteration just finished; a truthy return stops the solve (status STOPPED).
Callback = Callable[[dict[str, Any]], Any]


def _plural(unit: str, n: int) -> str:
    return unit if n == 1 else unit + "s"


def stop_message(
    engine: str,
    status: Status,
    iterations: int,
    *,
    unit: str = "iteration",
    gap: float = math.nan,
    tol: float = math.nan,
    max_iter: int | None = None,
    why: str = "",
) -> str:
    """The one message of every ending (``docs/engines.md``): ``why`` says what happened for a
    stall or a numerical error, in parentheses after the others."""
    after = f"after {iterations} {_plural(unit, iterations)}"
    g = f"relative duality gap {gap:.3e}"
    text = {
        Status.CONVERGED: f"converged, {g} <= tol {tol:g} {after}",
        Status.MAX_ITER: f"max_iter={max_iter} {_plural(unit, int(max_iter or 0))} reached; {g} > tol {tol:g}",
        Status.STOPPED: f"stopped by the callback {after} ({g})",
        Status.STALLED: f"stalled {after}: {why or 'no progress'}; {g} > tol {tol:g}",
        Status.NUMERICAL_ERROR: f"numerical error {after}: {why or 'non-finite values'}; {g}",
    }[status]
    if why and status not in (Status.STALLED, Status.NUMERICAL_ERROR):
        text += f" ({why})"
    return f"{engine}: {text}"


def _finite_min(*values: float) -> float:
    vals = [float(v) for v in values if not math.isnan(float(v))]
    return min(vals) if vals else math.nan


class Run:
    """One solve, handed to :meth:`Engine._solve`: its loop offers each certified point
    (:meth:`offer`), records each outer iteration (:meth:`record`, which calls the callback),
    ends the run (:meth:`check`, :meth:`end`) and returns :meth:`result`."""

    def __init__(
        self, engine: Engine, problem: Problem, callback: Callback | None = None, *, unit: str | None = None
    ) -> None:
        self.engine = engine
        self.problem = problem
        self.callback = callback
        self.unit = unit or engine.unit
        self.tol = float(getattr(engine, "tol", math.nan))
        mi = getattr(engine, "max_iter", None)
        self.max_iter = None if mi is None else int(mi)
        self.t0 = time.perf_counter()
        self.history: list[dict[str, Any]] = []
        self.zero: common.ZeroSolution | None = None
        self.incumbents = common.Incumbents()
        self.status: Status | None = None
        self.message = ""
        self.stop_requested = False
        self.gap = math.nan

    @property
    def name(self) -> str:
        return self.engine.name

    def set_zero(self, zero: common.ZeroSolution) -> None:
        """Start from the zero solution: it is the first primal incumbent."""
        self.zero = zero
        self.incumbents = common.Incumbents(zero, self.problem.n_kernels, self.problem.n_samples)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def offer(
        self,
        iteration: int,
        *,
        primal: float | None = None,
        alpha: np.ndarray | None = None,
        bias: float = 0.0,
        norms: np.ndarray | None = None,
        dual: float | None = None,
        rho: np.ndarray | None = None,
    ) -> None:
        """Offer a primal point (``alpha`` (M, N), ``bias``, block ``norms``, computed when
        missing and needed) and/or a feasible dual point ``rho`` to the incumbents; arrays
        are kept as given."""
        inc = self.incumbents
        if primal is not None and math.isfinite(primal) and primal < inc.primal:
            if norms is None:
                norms = common.block_norms(self.problem.bank, alpha)
            inc.offer_primal(primal, iteration, alpha=alpha, bias=bias, norms=norms)
        if dual is not None:
            inc.offer_dual(dual, iteration, rho=rho)

    def record(
        self,
        iteration: int,
        objective: float,
        dual_objective: float,
        gap: float | None = None,
        n_active: int = 0,
        *,
        callback: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """Append a history record (``iteration``, ``objective``, ``dual_objective``, ``gap``,
        ``n_active``, ``time_s``, ``extra``) and, unless ``callback=False``, call the callback
        with it: a truthy return sets :attr:`stop_requested`."""
        if gap is None:
            gap = common.relative_gap(objective, dual_objective)
        rec = {
            "iteration": iteration,
            "objective": objective,
            "dual_objective": dual_objective,
            "gap": gap,
            "n_active": int(n_active),
            "time_s": self.elapsed(),
            **extra,
        }
        self.history.append(rec)
        self.gap = float(gap)
        if callback and self.callback is not None:
            self.stop_requested = bool(self.callback(rec))
        return rec

    @property
    def best_gap(self) -> float:
        """The smaller of the last recorded gap and the incumbents' gap (NaN ignored)."""
        return _finite_min(self.gap, self.incumbents.gap)

    def end(self, status: Status, iterations: int, why: str = "", gap: float | None = None) -> bool:
        """End the run with ``status`` (message by :func:`stop_message`); returns True."""
        self.status = status
        self.message = stop_message(
            self.name,
            status,
            iterations,
            unit=self.unit,
            gap=self.best_gap if gap is None else gap,
            tol=self.tol,
            max_iter=self.max_iter,
            why=why,
        )
        logger.debug("%s", self.message)
        return True

    def check(self, iterations: int, gap: float | None = None, *, stalled: str | None = None) -> bool:
        """End the run if it is over, in this order: converged (``gap``, default the best gap,
        at most ``tol``), stopped by the callback, ``stalled`` (the engine's reason),
        ``max_iter`` reached; True when it is."""
        g = self.best_gap if gap is None else _finite_min(gap, self.incumbents.gap)
        if g <= self.tol:
            return self.end(Status.CONVERGED, iterations, gap=g)
        if self.stop_requested:
            return self.end(Status.STOPPED, iterations, gap=g)
        if stalled:
            return self.end(Status.STALLED, iterations, why=stalled, gap=g)
        if self.max_iter is not None and iterations >= self.max_iter:
            return self.end(Status.MAX_ITER, iterations, gap=g)
        return False

    def zero_result(self) -> SolveResult:
        """The certified result α = 0, :math:`b = b_0` (``C >= C_max``), with one history record."""
        zero, M = self.zero, self.problem.n_kernels
        self.record(0, zero.objective, zero.dual_objective, zero.gap, callback=False)
        self.status = Status.CONVERGED
        self.message = (
            f"{self.name}: alpha = 0 is optimal: C = {self.problem.C:g} >= C_max = {zero.C_max:.6g} "
            f"(relative duality gap {zero.gap:.3e}); every kernel weight is 0"
        )
        rho, _ = common.project_dual(self.problem, zero.rho, norms=zero.dual_norms)
        return self.result(
            0,
            alpha=np.zeros((M, self.problem.n_samples)),
            bias=zero.bias,
            primal=zero.objective,
            dual=zero.dual_objective,
            rho=rho,
            norms=np.zeros(M),
        )

    def result(
        self,
        iterations: int,
        *,
        alpha: np.ndarray | None = None,
        bias: float = 0.0,
        primal: float = math.nan,
        dual: float = math.nan,
        rho: np.ndarray | None = None,
        norms: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ) -> SolveResult:
        """The :class:`~mklkit.result.SolveResult` of the ended run: of the incumbents, or of
        ``alpha`` with the values given (``weights``: for a regularizer whose ``weight``
        kernel does not give them).  No warning: :meth:`Engine.solve` warns once."""
        if self.status is None:
            raise RuntimeError(f"{self.name}: Run.result before the run ended (call end or check)")
        message = self.message
        if alpha is None:  # the incumbents; the message says where the primal point comes from
            inc, it = self.incumbents, self.incumbents.primal_iteration
            if it != iterations:
                where = "alpha = 0 (the zero solution)" if it < 0 else f"{self.unit} {it}"
                message += f"; the primal point is that of {where}"
            alpha, bias, norms = inc.primal_state["alpha"], inc.primal_state["bias"], inc.primal_state["norms"]
            primal, dual, rho = inc.primal, inc.dual, inc.dual_state.get("rho")
        return common.build_result(
            self.problem,
            engine=self.name,
            status=self.status,
            alpha=alpha,
            bias=bias,
            primal=primal,
            dual=dual,
            iterations=iterations,
            history=self.history,
            message=message,
            time_s=self.elapsed(),
            norms=norms,
            rho=rho,
            C_max=None if self.zero is None else self.zero.C_max,
            weights=weights,
        )
