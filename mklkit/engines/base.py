r"""Engine contract and the skeleton every engine is built on.

An engine solves a :class:`~mklkit.problem.Problem` through the component
contracts only (never a concrete loss or regularizer) and returns a
:class:`~mklkit.result.SolveResult`.  Engines are registered through the
plugin hook exactly like losses and regularizers.

The skeleton does everything but the algorithm:

* :attr:`Engine.requires` states what the engine needs of the loss, the
  regularizer and the bank (:mod:`mklkit.engines.capabilities`);
  :meth:`Engine.supports` derives its reason from it (plus
  :meth:`Engine.problem_reasons` for checks of one problem).
* :meth:`Engine.solve` is a template: :meth:`~Engine.check_supported`, the
  warm start checked (:func:`check_warm_start`; ignored by an engine without
  ``supports_warm_start``), the zero solution
  (:func:`~mklkit.engines.common.zero_solution`: the certified α = 0 is
  returned when :math:`C \ge C_{max}`), then the engine's own
  :meth:`Engine._solve` with a :class:`Run`, and one
  :class:`~mklkit.result.ConvergenceWarning` when the result is unconverged.
* :class:`Run` owns the clock, the history, the callback and its stop
  semantics, the :class:`~mklkit.engines.common.Incumbents`, the ending
  (:data:`STOP_REASONS` with one message formatter, :func:`stop_message`)
  and builds the :class:`~mklkit.result.SolveResult`.

An engine that overrides :meth:`Engine.solve` itself (the contract before
the skeleton) keeps working.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Any, Callable, ClassVar

import numpy as np

from .._interrupts import interrupt_guard
from ..components.base import Component
from ..components.params import Param
from ..kernels.ops import BankAccessError
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult, Status
from . import common
from .capabilities import Requirement, Requires, needs

__all__ = [
    "Callback",
    "COMMON_PARAMS",
    "Engine",
    "Run",
    "Algorithm",
    "Requires",
    "Requirement",
    "needs",
    "STOP_REASONS",
    "stop_message",
    "check_warm_start",
    "solve_from",
    "warn_unconverged",
    "UnsupportedBankError",
]

logger = logging.getLogger(__name__)

#: ``callback(state) -> bool``; ``state`` is the history record of the outer
#: iteration just finished; a truthy return stops the solve (status STOPPED).
Callback = Callable[[dict[str, Any]], Any]

COMMON_PARAMS: tuple[Param, ...] = (
    Param("tol", 1e-2, "relative duality gap at which to stop (SpicyMKL §6.1)",
          low=0.0, low_open=True),
    Param("max_iter", 500, "maximum number of outer iterations", type=int, low=1),
)

#: How a run ends, in the order :meth:`Run.check` tests them: a numerical
#: error (tested by the engine, before), convergence, the callback, a stall
#: (the engine's reason), the iteration limit.
STOP_REASONS: tuple[Status, ...] = (Status.NUMERICAL_ERROR, Status.CONVERGED, Status.STOPPED,
                                    Status.STALLED, Status.MAX_ITER)


class UnsupportedBankError(BankAccessError, ValueError):
    """An engine that needs the Gram bank as one array was given a bank that is not.

    Both a :class:`~mklkit.kernels.ops.BankAccessError` (what reading
    ``problem.K`` raises) and a ``ValueError`` (what
    :meth:`Engine.check_supported` raises for any unsupported problem).
    """


def _plural(unit: str, n: int) -> str:
    return unit if n == 1 else unit + "s"


def stop_message(engine: str, status: Status, iterations: int, *, unit: str = "iteration",
                 gap: float = math.nan, tol: float = math.nan, max_iter: int | None = None,
                 why: str = "") -> str:
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


def warn_unconverged(result: SolveResult, stacklevel: int = 2) -> None:
    """One :class:`~mklkit.result.ConvergenceWarning` with the message when the result is
    unconverged (:data:`~mklkit.engines.common.UNCONVERGED`)."""
    if result.status in common.UNCONVERGED:
        warnings.warn(result.message, ConvergenceWarning, stacklevel=stacklevel + 1)


def check_warm_start(problem: Problem, warm_start: SolveResult) -> None:
    """Raise ``ValueError`` when ``warm_start`` does not fit ``problem``.

    Its ``alpha`` must have the problem's shape (M, N) and its ``dual``, when
    given, (N,); ``alpha``, ``bias`` and ``dual`` must be finite.
    """
    M, N = problem.n_kernels, problem.n_samples
    alpha = np.asarray(warm_start.alpha)
    if alpha.shape != (M, N):
        raise ValueError(
            f"warm_start.alpha has shape {alpha.shape}; this problem needs ({M}, {N}) "
            "(a result on the same kernels and training points)")
    dual = warm_start.dual
    if dual is not None and np.asarray(dual).shape != (N,):
        raise ValueError(
            f"warm_start.dual has shape {np.asarray(dual).shape}; this problem needs ({N},)")
    bad = [name for name, ok in (
        ("alpha", bool(np.all(np.isfinite(alpha)))),
        ("bias", math.isfinite(float(warm_start.bias))),
        ("dual", dual is None or bool(np.all(np.isfinite(np.asarray(dual, dtype=np.float64))))),
    ) if not ok]
    if bad:
        raise ValueError(f"warm_start has non-finite {', '.join(bad)}; a warm start must be "
                         "a finite result")


def solve_from(engine: Any, problem: Problem, callback: Callback | None = None,
               warm_start: SolveResult | None = None) -> SolveResult:
    """``engine.solve(problem, callback)``, with ``warm_start`` passed only to an engine that
    declares ``supports_warm_start`` (an engine that overrides :meth:`Engine.solve` need not
    take the keyword)."""
    if warm_start is not None and getattr(engine, "supports_warm_start", False):
        return engine.solve(problem, callback, warm_start=warm_start)
    return engine.solve(problem, callback)


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

    def __init__(self, engine: Engine, problem: Problem, callback: Callback | None = None, *,
                 unit: str | None = None) -> None:
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
    def offer(self, iteration: int, *, primal: float | None = None, alpha: np.ndarray | None = None,
              bias: float = 0.0, norms: np.ndarray | None = None, dual: float | None = None,
              rho: np.ndarray | None = None) -> None:
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
    def record(self, iteration: int, objective: float, dual_objective: float,
               gap: float | None = None, n_active: int = 0, *, callback: bool = True,
               **extra: Any) -> dict[str, Any]:
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
        rec = {"iteration": iteration, "objective": objective, "dual_objective": dual_objective,
               "gap": gap, "n_active": int(n_active), "time_s": self.elapsed(), **extra}
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

    def end(self, status: Status, iterations: int, why: str = "",
            gap: float | None = None) -> bool:
        """End the run with ``status`` (message by :func:`stop_message`); returns True."""
        self.status = status
        self.message = stop_message(
            self.name, status, iterations, unit=self.unit,
            gap=self.best_gap if gap is None else gap, tol=self.tol, max_iter=self.max_iter,
            why=why)
        logger.debug("%s", self.message)
        return True

    def check(self, iterations: int, gap: float | None = None, *,
              stalled: str | None = None) -> bool:
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
    def result(self, iterations: int, *, alpha: np.ndarray | None = None, bias: float = 0.0,
               primal: float = math.nan, dual: float = math.nan, rho: np.ndarray | None = None,
               norms: np.ndarray | None = None, weights: np.ndarray | None = None) -> SolveResult:
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
                self.problem, self.incumbents, engine=self.name, status=self.status,
                message=self.message, iterations=iterations, history=self.history, t0=self.t0,
                C_max=C_max, unit=self.unit, warn=False)
        return common.build_result(
            self.problem, engine=self.name, status=self.status, alpha=alpha, bias=bias,
            primal=primal, dual=dual, iterations=iterations, history=self.history,
            message=self.message, time_s=self.elapsed(), norms=norms, rho=rho, C_max=C_max,
            weights=weights, warn=False)


class Engine(Component):
    """Base class of solvers.  Instances hold validated solver options.

    A subclass sets ``name``, ``description``, ``params``, :attr:`requires`
    and implements :meth:`_solve` (the algorithm); see the module docstring.
    """

    kind: ClassVar[str] = "engine"
    params: ClassVar[tuple[Param, ...]] = COMMON_PARAMS

    #: What the engine needs of the loss, the regularizer and the bank.
    requires: ClassVar[Requires] = Requires()

    #: The bank representations ``solve`` works on (``Problem.representation``):
    #: ``"array"`` reads ``problem.K``; ``"sharded"``/``"factor"`` need ``problem.bank`` only.
    representations: ClassVar[tuple[str, ...]] = ("array",)

    #: Whether ``solve`` uses ``warm_start`` (a previous result on the same
    #: kernels and labels, e.g. the neighbouring C of a regularization path).
    supports_warm_start: ClassVar[bool] = False

    #: What ``iterations`` count, in messages.
    unit: ClassVar[str] = "iteration"

    #: Whether :meth:`solve` computes the zero solution first and returns the
    #: certified α = 0 for :math:`C \ge C_{max}` (an engine that delegates to
    #: others leaves it to them).
    zero_first: ClassVar[bool] = True

    # -- capability ----------------------------------------------------------
    def requirements(self) -> Requires:
        """:attr:`requires`, or more for some options (e.g. a method that needs more)."""
        return self.requires

    def problem_reasons(self, problem: Problem) -> list[str]:
        """Reasons of this engine against one problem beyond :meth:`requirements` (none)."""
        return []

    def supports(self, problem: Problem) -> str | None:
        """``None`` when this engine can solve ``problem``, else the reason why not.

        The reasons of :meth:`requirements` (what the loss, the regularizer
        or the bank lacks, and why the engine needs it), then those of
        :meth:`problem_reasons`, joined by ``"; "``.
        """
        reasons = self.requirements().reasons(problem) + list(self.problem_reasons(problem))
        return "; ".join(reasons) if reasons else None

    def check_supported(self, problem: Problem) -> None:
        """Raise ``ValueError`` when :meth:`supports` gives a reason.

        The message names the engine and gives the reason:
        ``engine 'spicy' cannot solve this problem: <reason>``.  When the bank
        is what is lacking it is an :class:`UnsupportedBankError` (also a
        :class:`~mklkit.kernels.ops.BankAccessError`).
        """
        reason = self.supports(problem)
        if reason is None:
            return
        message = f"engine {self.name!r} cannot solve this problem: {reason}"
        if any(not r.met(problem) for r in self.requirements().bank):
            raise UnsupportedBankError(message)
        raise ValueError(message)

    # -- solve ---------------------------------------------------------------
    def solve(
        self,
        problem: Problem,
        callback: Callback | None = None,
        warm_start: SolveResult | None = None,
    ) -> SolveResult:
        """Solve ``problem``; never raise because the solve did not converge.

        The template: :meth:`check_supported`, :func:`check_warm_start` (an
        engine without ``supports_warm_start`` ignores ``warm_start``), the
        zero solution (returned when certified optimal), :meth:`_solve`, and
        a :class:`~mklkit.result.ConvergenceWarning` when unconverged.

        Parameters
        ----------
        problem : Problem
        callback : callable, optional
            Called with the history record of every outer iteration; a
            truthy return stops the solve (status ``stopped``).
        warm_start : SolveResult, optional
            A previous solution on the same kernels and labels (e.g. the
            neighbouring C of a regularization path).  Engines that do not
            use it (``supports_warm_start`` False) ignore it.

        Raises
        ------
        ValueError
            When :meth:`supports` gives a reason (:meth:`check_supported`),
            or ``warm_start`` does not fit the problem; never because the
            solve did not converge.
        """
        self.check_supported(problem)
        if warm_start is not None:
            if self.supports_warm_start:
                check_warm_start(problem, warm_start)
            else:
                warm_start = None
        run = Run(self, problem, callback)
        if self.zero_first:
            zero = common.zero_solution(problem)
            run.set_zero(zero)
            if zero.optimal(run.tol):
                return common.zero_result(problem, zero, engine=self.name, t0=run.t0)
        with interrupt_guard():
            result = self._solve(problem, run, warm_start)
        warn_unconverged(result, stacklevel=2)
        return result

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """The algorithm: iterate, :meth:`Run.record`, :meth:`Run.check`, return :meth:`Run.result`.

        ``warm_start`` is checked (or ``None``); ``run.zero`` is the zero
        solution, not optimal at this ``C``.
        """
        raise NotImplementedError(
            f"engine {self.name!r} implements neither solve() nor _solve()")


class Algorithm:
    """The problem unpacked into the fields every engine's loop reads.

    Subclass it for an engine's state (``_Run(Algorithm)``) and build it in
    :meth:`Engine._solve`.

    Attributes
    ----------
    engine, problem, run, warm_start
        As handed to :meth:`Engine._solve`.
    zero : ZeroSolution or None
        ``run.zero``.
    y : ndarray (N,)
    C : float
    bias : bool
    M, N : int
    bank : GramBank
    lk, pl : the loss's ``kernels`` and ``param_vector``
    rk, pr : the regularizer's ``kernels`` and ``param_vector``
    """

    def __init__(self, engine: Engine, problem: Problem, run: Run,
                 warm_start: SolveResult | None = None) -> None:
        self.engine = engine
        self.problem = problem
        self.run = run
        self.warm_start = warm_start
        self.zero = run.zero
        self.y = problem.y
        self.C = float(problem.C)
        self.bias = bool(problem.bias)
        self.M, self.N = problem.n_kernels, problem.n_samples
        self.bank = problem.bank
        self.lk, self.pl = problem.loss.jit, problem.loss.param_vector
        #: the weighted loss of the problem (its sample weights; the loss itself without)
        self.sl = common.SampleLoss.of(problem)
        self.rk, self.pr = problem.regularizer.jit, problem.regularizer.param_vector

    def conj_domain(self) -> tuple[np.ndarray, np.ndarray]:
        """The domain of :math:`(w_i\\ell)^*(y_i, \\cdot)`: ``conj_lower(y)``, ``conj_upper(y)``
        times the sample weights (:class:`~mklkit.engines.common.SampleLoss`; unweighted: the
        loss's own)."""
        return common.as_vector(self.sl.conj_lower()), common.as_vector(self.sl.conj_upper())

    def reg_kernel(self, fn: Any, x: np.ndarray, C: float | None = None) -> np.ndarray:
        """A regularizer kernel ``fn`` at block norms ``x`` and ``C`` (default the problem's)."""
        return np.asarray(fn(common.as_vector(x), self.C if C is None else float(C), self.pr),
                          dtype=np.float64)
