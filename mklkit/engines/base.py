r"""The engine contract and the skeleton every engine is built on (``docs/engines.md``).

An engine solves a :class:`~mklkit.problem.Problem` through the component contracts only
and is registered through the plugin hook like a loss.  :attr:`Engine.requires` states what
it needs (:mod:`mklkit.engines.capabilities`); :meth:`Engine.solve` checks the problem and
the warm start, returns the certified α = 0 when :math:`C \ge C_{max}`, runs the engine's
:meth:`Engine._solve` with a :class:`~mklkit.engines.run.Run` and warns once when unconverged.
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
from .capabilities import Requires
from .objectives import SampleLoss, as_vector
from .run import Callback, Run

COMMON_PARAMS: tuple[Param, ...] = (
    Param("tol", 1e-2, "relative duality gap at which to stop (SpicyMKL §6.1)", low=0.0, low_open=True),
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
    parameters ``lk``, ``pl``, its weighted form ``sl``, the regularizer's ``rk``, ``pr``."""

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
        self.rk, self.pr = problem.regularizer.jit, problem.regularizer.param_vector

    def conj_domain(self) -> tuple[np.ndarray, np.ndarray]:
        """The domain of :math:`(w_i\\ell)^*(y_i, \\cdot)`: ``conj_lower``, ``conj_upper`` of ``sl``."""
        return as_vector(self.sl.conj_lower()), as_vector(self.sl.conj_upper())

    def reg_kernel(self, fn: Any, x: np.ndarray, C: float | None = None) -> np.ndarray:
        """A regularizer kernel ``fn`` at block norms ``x`` and ``C`` (default the problem's)."""
        return np.asarray(fn(as_vector(x), self.C if C is None else float(C), self.pr), dtype=np.float64)
