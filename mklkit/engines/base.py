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
* :class:`~mklkit.engines.run.Run` owns the clock, the history, the
  callback and its stop semantics, the
  :class:`~mklkit.engines.common.Incumbents`, the ending
  (:data:`~mklkit.engines.run.STOP_REASONS` with one message formatter,
  :func:`~mklkit.engines.run.stop_message`) and builds the
  :class:`~mklkit.result.SolveResult` (all re-exported here).

An engine that overrides :meth:`Engine.solve` itself (the contract before
the skeleton) keeps working.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np

from .._interrupts import interrupt_guard
from ..components.base import Component
from ..components.params import Param
from ..kernels.ops import BankAccessError
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult
from . import common
from .capabilities import Requirement, Requires, needs
from .run import STOP_REASONS, Callback, Run, stop_message

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

COMMON_PARAMS: tuple[Param, ...] = (
    Param("tol", 1e-2, "relative duality gap at which to stop (SpicyMKL §6.1)", low=0.0, low_open=True),
    Param("max_iter", 500, "maximum number of outer iterations", type=int, low=1),
)


class UnsupportedBankError(BankAccessError, ValueError):
    """An engine that needs the Gram bank as one array was given a bank that is not.

    Both a :class:`~mklkit.kernels.ops.BankAccessError` (what reading
    ``problem.K`` raises) and a ``ValueError`` (what
    :meth:`Engine.check_supported` raises for any unsupported problem).
    """


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
            "(a result on the same kernels and training points)"
        )
    dual = warm_start.dual
    if dual is not None and np.asarray(dual).shape != (N,):
        raise ValueError(f"warm_start.dual has shape {np.asarray(dual).shape}; this problem needs ({N},)")
    bad = [
        name
        for name, ok in (
            ("alpha", bool(np.all(np.isfinite(alpha)))),
            ("bias", math.isfinite(float(warm_start.bias))),
            ("dual", dual is None or bool(np.all(np.isfinite(np.asarray(dual, dtype=np.float64))))),
        )
        if not ok
    ]
    if bad:
        raise ValueError(f"warm_start has non-finite {', '.join(bad)}; a warm start must be a finite result")


def solve_from(
    engine: Any, problem: Problem, callback: Callback | None = None, warm_start: SolveResult | None = None
) -> SolveResult:
    """``engine.solve(problem, callback)``, with ``warm_start`` passed only to an engine that
    declares ``supports_warm_start`` (an engine that overrides :meth:`Engine.solve` need not
    take the keyword)."""
    if warm_start is not None and getattr(engine, "supports_warm_start", False):
        return engine.solve(problem, callback, warm_start=warm_start)
    return engine.solve(problem, callback)


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
        self, problem: Problem, callback: Callback | None = None, warm_start: SolveResult | None = None
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
        raise NotImplementedError(f"engine {self.name!r} implements neither solve() nor _solve()")


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
        return np.asarray(fn(common.as_vector(x), self.C if C is None else float(C), self.pr), dtype=np.float64)
