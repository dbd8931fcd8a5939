r"""The engine contract and the skeleton every engine is built on (``docs/engines.md``).

An engine solves a :class:`~mklkit.problem.Problem` through the component contracts only and
states what it needs in :attr:`Engine.requires`.  :meth:`Engine.solve` checks the problem and
the warm start, returns the certified α = 0 when :math:`C \ge C_{max}`, runs the engine's
:meth:`Engine._solve` with a :class:`Run` (the clock, the history, the callback, the best
points and the ending) and warns once when unconverged.
"""

from __future__ import annotations

import contextlib
import functools
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
from .capabilities import Requires
from .objectives import SampleLoss, as_vector

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

    def __init__(self, engine: Engine, problem: Problem, callback: Callback | None = None) -> None:
        self.engine = engine
        self.problem = problem
        self.callback = callback
        self.unit = engine.unit
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
        rows: np.ndarray | None = None,
    ) -> None:
        """Offer a primal point (``alpha`` (M, N), ``bias``, block ``norms``, computed when
        missing and needed) and/or a feasible dual point ``rho`` to the incumbents; arrays
        are kept as given.  With ``rows``, ``alpha`` and ``norms`` hold those blocks only."""
        inc = self.incumbents
        if primal is not None and math.isfinite(primal) and primal < inc.primal:
            if rows is not None:
                M = self.problem.n_kernels
                full, full_norms = np.zeros((M, self.problem.n_samples)), np.zeros(M)
                if len(rows):
                    full[rows], full_norms[rows] = alpha, norms
                alpha, norms = full, full_norms
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

    def check(
        self, iterations: int, gap: float | None = None, *, stalled: str | None = None, error: str | None = None
    ) -> bool:
        """End the run if it is over, in this order: a numerical ``error`` (the engine's reason),
        converged (``gap``, default the best gap, at most ``tol``), stopped by the callback,
        ``stalled`` (the engine's reason), ``max_iter`` reached; True when it is."""
        if error:
            return self.end(Status.NUMERICAL_ERROR, iterations, why=error)
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
        kernel does not give them); no warning, :meth:`Engine.solve` warns once."""
        if self.status is None:
            raise RuntimeError(f"{self.name}: Run.result before the run ended (call end or check)")
        message = self.message
        if alpha is None:  # the incumbents; the message says where the primal point comes from
            inc, it, point = self.incumbents, self.incumbents.primal_iteration, self.incumbents.primal_state
            if it != iterations:
                where = "alpha = 0 (the zero solution)" if it < 0 else f"{self.unit} {it}"
                message += f"; the primal point is that of {where}"
            # a factor engine's point is its coefficients beta (FactorBank.coefficients)
            alpha = point["alpha"] if "alpha" in point else self.problem.bank.alpha_from_beta(point["beta"])
            bias, norms = point["bias"], point["norms"]
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


#: The bounds of an option in (0, inf); :func:`open_interval`: in (0, ``high``).
POSITIVE = {"low": 0.0, "low_open": True}


def open_interval(high: float) -> dict[str, Any]:
    return dict(POSITIVE, high=high, high_open=True)


@functools.cache
def _threadpools() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_threads(limit: int | None) -> Any:
    """A context that runs BLAS on ``limit`` threads (``None``: leaves the BLAS library as it is)."""
    if limit is None:
        return contextlib.nullcontext()
    return _threadpools().limit(limits=limit, user_api="blas")


COMMON_PARAMS: tuple[Param, ...] = (
    Param("tol", 1e-2, "relative duality gap at which to stop (SpicyMKL §6.1)", **POSITIVE),
    Param("max_iter", 500, "maximum number of outer iterations", type=int, low=1),
)


class UnsupportedBankError(BankAccessError, ValueError):
    """An engine that needs the Gram bank as one array was given a bank that is not: both a
    :class:`~mklkit.kernels.ops.BankAccessError` and a ``ValueError``."""


def check_warm_start(problem: Problem, warm_start: SolveResult) -> None:
    """Raise ``ValueError`` unless ``warm_start`` has a finite ``alpha`` (M, N), ``bias`` and
    ``dual`` (N,) (or None)."""
    M, N = problem.n_kernels, problem.n_samples
    alpha = np.asarray(warm_start.alpha)
    if alpha.shape != (M, N):
        raise ValueError(
            f"warm_start.alpha has shape {alpha.shape}; this problem needs ({M}, {N}) "
            "(a result on the same kernels and training points)"
        )
    dual = warm_start.dual
    if dual is not None and np.asarray(dual).shape != (N,):
        raise ValueError(f"warm_start.dual has shape {np.asarray(dual).shape}; this problem needs ({N},)")
    finite = {
        "alpha": np.all(np.isfinite(alpha)),
        "bias": math.isfinite(float(warm_start.bias)),
        "dual": dual is None or np.all(np.isfinite(np.asarray(dual, dtype=np.float64))),
    }
    bad = [name for name, ok in finite.items() if not ok]
    if bad:
        raise ValueError(f"warm_start has non-finite {', '.join(bad)}; a warm start must be a finite result")


def solve_from(
    engine: Any, problem: Problem, callback: Callback | None = None, warm_start: SolveResult | None = None
) -> SolveResult:
    """``engine.solve(problem, callback)``, with ``warm_start`` only for an engine that
    ``supports_warm_start`` (one that overrides :meth:`Engine.solve` need not take it)."""
    if warm_start is not None and getattr(engine, "supports_warm_start", False):
        return engine.solve(problem, callback, warm_start=warm_start)
    return engine.solve(problem, callback)


class Engine(Component):
    """Base class of solvers; instances hold the validated solver options.

    A subclass sets ``name``, ``description``, ``params``, :attr:`requires` and implements
    :meth:`_solve` (the algorithm).
    """

    kind: ClassVar[str] = "engine"
    params: ClassVar[tuple[Param, ...]] = COMMON_PARAMS

    #: What the engine needs of the loss, the regularizer and the bank.
    requires: ClassVar[Requires] = Requires()

    #: The bank representations ``solve`` works on (``Problem.representation``): ``"array"``
    #: reads ``problem.K``; ``"sharded"``/``"factor"`` need ``problem.bank`` only.
    representations: ClassVar[tuple[str, ...]] = ("array",)

    #: Whether ``solve`` uses ``warm_start`` (a previous result on the same kernels and labels).
    supports_warm_start: ClassVar[bool] = False

    #: What ``iterations`` count, in messages.
    unit: ClassVar[str] = "iteration"

    #: Whether :meth:`solve` returns the certified α = 0 for :math:`C \ge C_{max}` first (an
    #: engine that delegates to others leaves it to them).
    zero_first: ClassVar[bool] = True

    def requirements(self) -> Requires:
        """:attr:`requires`, or more for some options (e.g. a method that needs more)."""
        return self.requires

    def problem_reasons(self, problem: Problem) -> list[str]:
        """Reasons of this engine against one problem beyond :meth:`requirements` (none)."""
        return []

    def supports(self, problem: Problem) -> str | None:
        """``None`` when this engine can solve ``problem``, else the reasons of
        :meth:`requirements` and :meth:`problem_reasons`, joined by ``"; "``."""
        reasons = self.requirements().reasons(problem) + list(self.problem_reasons(problem))
        return "; ".join(reasons) if reasons else None

    def check_supported(self, problem: Problem) -> None:
        """Raise ``ValueError`` (``engine 'spicy' cannot solve this problem: <reason>``) when
        :meth:`supports` gives a reason; an :class:`UnsupportedBankError` when the bank lacks."""
        reason = self.supports(problem)
        if reason is None:
            return
        message = f"engine {self.name!r} cannot solve this problem: {reason}"
        if any(not r.met(problem) for r in self.requirements().bank):
            raise UnsupportedBankError(message)
        raise ValueError(message)

    def solve(
        self, problem: Problem, callback: Callback | None = None, warm_start: SolveResult | None = None
    ) -> SolveResult:
        """Solve ``problem``; a :class:`~mklkit.result.ConvergenceWarning`, never an error, when
        the solve does not converge.

        Parameters
        ----------
        problem : Problem
        callback : callable, optional
            Called with the history record of every outer iteration; a truthy return stops
            the solve (status ``stopped``).
        warm_start : SolveResult, optional
            A previous solution on the same kernels and labels (e.g. the neighbouring C of
            a path); ignored unless ``supports_warm_start``.

        Raises
        ------
        ValueError
            When :meth:`supports` gives a reason, or ``warm_start`` does not fit the problem.
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
                return run.zero_result()
        with interrupt_guard():
            result = self._solve(problem, run, warm_start)
        if result.status in common.UNCONVERGED:
            warnings.warn(result.message, ConvergenceWarning, stacklevel=2)
        return result

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """The algorithm: iterate, :meth:`Run.record`, :meth:`Run.check`, return :meth:`Run.result`
        (``warm_start`` checked or None; ``run.zero`` not optimal at this ``C``)."""
        raise NotImplementedError(f"engine {self.name!r} implements neither solve() nor _solve()")


class Algorithm:
    """The problem unpacked into the fields every engine's loop reads (subclass it for an
    engine's state): ``y``, ``C``, ``bias``, ``M``, ``N``, ``bank``, the loss's kernels and
    parameters ``lk``, ``pl``, its weighted form ``sl``, the regularizer ``reg`` and its ``rk``, ``pr``."""

    def __init__(self, engine: Engine, problem: Problem, run: Run, warm_start: SolveResult | None = None) -> None:
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
        self.sl = SampleLoss.of(problem)
        self.reg = problem.regularizer
        self.rk, self.pr = self.reg.jit, self.reg.param_vector

    def warm_blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """The warm start's non-zero blocks (sorted) and their coefficients (P, N), a new C-ordered array."""
        alpha = np.asarray(self.warm_start.alpha, dtype=np.float64)
        idx = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
        return idx, np.ascontiguousarray(alpha[idx])

    def start_bias(self) -> float:
        """The warm start's bias, else the zero solution's; 0 without a bias."""
        if not self.bias:
            return 0.0
        return float(self.warm_start.bias) if self.warm_start is not None else self.zero.bias

    def conj_domain(self) -> tuple[np.ndarray, np.ndarray]:
        """The domain of :math:`(w_i\\ell)^*(y_i, \\cdot)`: ``conj_lower``, ``conj_upper`` of ``sl``."""
        return as_vector(self.sl.conj_lower()), as_vector(self.sl.conj_upper())

    def reg_kernel(self, fn: Any, x: np.ndarray, C: float | None = None) -> np.ndarray:
        """A regularizer kernel ``fn`` at block norms ``x`` and ``C`` (default the problem's)."""
        return np.asarray(fn(as_vector(x), self.C if C is None else float(C), self.pr), dtype=np.float64)
