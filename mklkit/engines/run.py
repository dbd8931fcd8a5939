r"""One solve of an engine: the clock, the history, the callback, the best points and the ending.

:class:`Run` is created by :meth:`Engine.solve
<mklkit.engines.base.Engine.solve>` and handed to the engine's loop; every
ending (:data:`STOP_REASONS`) has its message from :func:`stop_message`.
"""

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

__all__ = ["Callback", "Run", "STOP_REASONS", "stop_message"]

logger = logging.getLogger(__name__)

#: ``callback(state) -> bool``; ``state`` is the history record of the outer
#: iteration just finished; a truthy return stops the solve (status STOPPED).
Callback = Callable[[dict[str, Any]], Any]

#: How a run ends, in the order :meth:`Run.check` tests them: a numerical
#: error (tested by the engine, before), convergence, the callback, a stall
#: (the engine's reason), the iteration limit.
STOP_REASONS: tuple[Status, ...] = (
    Status.NUMERICAL_ERROR,
    Status.CONVERGED,
    Status.STOPPED,
    Status.STALLED,
    Status.MAX_ITER,
)


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
    """The one message of every ending (:data:`STOP_REASONS`).

    ``why`` says what happened for a stall or a numerical error (and is
    appended in parentheses to the others).  Examples::

        spicy: converged, relative duality gap 3.1e-09 <= tol 1e-08 after 7 Newton steps
        proximal: max_iter=40 iterations reached; relative duality gap 2.0e-03 > tol 1e-06
        smo_mkl: stopped by the callback after 120 SMO steps (relative duality gap 4.4e-02)
        spicy: stalled after 3 Newton steps: line search failed (Newton decrement 1.2e-09);
            relative duality gap 2.1e-07 > tol 1e-12
    """
    after = f"after {iterations} {_plural(unit, iterations)}"
    g = f"relative duality gap {gap:.3e}"
    if status == Status.CONVERGED:
        text = f"converged, {g} <= tol {tol:g} {after}"
    elif status == Status.MAX_ITER:
        text = f"max_iter={max_iter} {_plural(unit, int(max_iter or 0))} reached; {g} > tol {tol:g}"
    elif status == Status.STOPPED:
        text = f"stopped by the callback {after} ({g})"
    elif status == Status.STALLED:
        text = f"stalled {after}: {why or 'no progress'}; {g} > tol {tol:g}"
        why = ""
    elif status == Status.NUMERICAL_ERROR:
        text = f"numerical error {after}: {why or 'non-finite values'}; {g}"
        why = ""
    else:  # pragma: no cover - every Status is handled above
        raise ValueError(f"unknown status {status!r}")
    if why:
        text += f" ({why})"
    return f"{engine}: {text}"


def _finite_min(*values: float) -> float:
    vals = [float(v) for v in values if not math.isnan(float(v))]
    return min(vals) if vals else math.nan


class Run:
    r"""One solve: the clock, the history, the callback, the incumbents and the ending.

    Created by :meth:`Engine.solve` and handed to :meth:`Engine._solve`.  An
    engine's loop

    * offers each certified point (:meth:`offer`): the best primal and the
      best dual point seen are returned (:class:`~mklkit.engines.common.Incumbents`);
    * records each outer iteration (:meth:`record`), which calls the
      callback: a truthy return asks to stop;
    * ends the run with :meth:`check` (converged, stopped by the callback,
      stalled, ``max_iter``, in that order) or :meth:`end` (an engine's own
      reason, e.g. a numerical error);
    * returns :meth:`result`.

    Attributes
    ----------
    engine : Engine
    problem : Problem
    callback : callable or None
    unit : str
        What ``iterations`` count, for messages (``"iteration"``, ``"Newton step"``).
    tol : float
        The engine's ``tol``.
    max_iter : int or None
        The engine's ``max_iter``.
    t0 : float
        ``time.perf_counter()`` at the start.
    history : list of dict
    incumbents : Incumbents
    zero : ZeroSolution or None
        The zero solution, when the template computed it (its point is the
        first incumbent).
    status : Status or None
        Set by :meth:`end`; ``None`` while running.
    message : str
    stop_requested : bool
        The callback asked to stop (at the last :meth:`record`).
    """

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
        """Seconds since the start."""
        return time.perf_counter() - self.t0

    # -- points ----------------------------------------------------------------
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
        r"""Offer a primal point (value, ``alpha`` (M, N), ``bias``, block ``norms``) and/or a
        feasible dual point (value, ``rho`` (N,)) to the incumbents.

        Arrays are kept as given: pass arrays the engine does not modify
        later.  ``norms`` are computed (one pass over the bank) when not
        given and the point is better than the incumbent.
        """
        inc = self.incumbents
        if primal is not None and math.isfinite(primal) and primal < inc.primal:
            if norms is None:
                norms = common.block_norms(self.problem.bank, alpha)
            inc.offer_primal(primal, iteration, alpha=alpha, bias=bias, norms=norms)
        if dual is not None:
            inc.offer_dual(dual, iteration, rho=rho)

    # -- history and callback ------------------------------------------------------
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
        """Append a history record and call the callback with it.

        The record holds ``iteration``, ``objective``, ``dual_objective``,
        ``gap`` (the relative gap of the two when not given), ``n_active``,
        ``time_s`` and ``extra`` in that order.  A truthy return of the
        callback sets :attr:`stop_requested` (the run stops at the next
        :meth:`check`, unless it converged).  ``callback=False`` for a record
        made after the run ended.
        """
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

    # -- ending --------------------------------------------------------------------
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
        """End the run if it is over; True when it is.

        In order: converged (``gap``, default the best gap, at most ``tol``),
        stopped (the callback asked at the last :meth:`record`), ``stalled``
        (the engine's reason, when given), ``max_iter`` reached.
        """
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

    # -- result --------------------------------------------------------------------
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
        """The :class:`~mklkit.result.SolveResult` of the run.

        From the incumbents (best primal, best dual point; the message says
        where the primal point comes from when it is not the last iterate),
        or, when ``alpha`` is given, of that point with the values given
        (``weights``: kernel weights of an engine whose regularizer's
        ``weight`` kernel does not give them).  No warning here:
        :meth:`Engine.solve` warns once.
        """
        if self.status is None:
            raise RuntimeError(f"{self.name}: Run.result before the run ended (call end or check)")
        C_max = None if self.zero is None else self.zero.C_max
        if alpha is None:
            return common.incumbent_result(
                self.problem,
                self.incumbents,
                engine=self.name,
                status=self.status,
                message=self.message,
                iterations=iterations,
                history=self.history,
                t0=self.t0,
                C_max=C_max,
                unit=self.unit,
                warn=False,
            )
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
            message=self.message,
            time_s=self.elapsed(),
            norms=norms,
            rho=rho,
            C_max=C_max,
            weights=weights,
            warn=False,
        )
