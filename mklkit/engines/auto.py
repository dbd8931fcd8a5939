r"""Engine ``auto``: delegate each problem to the engine that solves it fastest.

Rule (from ``benchmarks/bench_proximal_vs_spicy.py`` and
``benchmarks/bench_auto_factor.py``, see ``docs/engines.md``):

0. ``bcd`` on a factor bank (``Problem.representation == "factor"``) when it
   supports the problem (a separable regularizer): it works in the primal
   coordinates :math:`\beta_m = L_m^\top\alpha_m` at :math:`O(N r_m)` a block
   step.  On a9a with three Gaussian kernels factored to rank 602-651 it was
   14 times faster than ``spicy`` for the hinge loss at N = 2,000 (4 s
   against 56 s, where ``spicy`` stalled) and 2 times faster for the
   logistic loss at N = 8,000, with the block 1-norm at 0.1 C_max.
1. ``proximal`` when the problem has many samples and few kernels and
   ``proximal`` supports it: :math:`N \ge` ``proximal_ratio``
   :math:`\times M` and :math:`N \ge` ``proximal_min_samples`` (2000), or
   half that when ``spicy`` would need its iterative method (a loss or
   regularizer without a smooth conjugate, e.g. ``l1``).  A Newton step of
   ``spicy`` factors an :math:`N\times N` matrix (:math:`O(N^3)`), and the
   iterative method takes several per outer iteration; a proximal-gradient
   step reads the active kernels once (:math:`O(|\mathrm{active}|\,N^2)`).
   On ringnorm with 8 kernels, proximal gradient was 1.1-2.5 times faster
   for ``l1`` from :math:`N` = 1000 and won most ``elasticnet`` rows from
   :math:`N` = 2000, while ``spicy`` won ``elasticnet`` at :math:`N` = 1000.
2. Otherwise ``spicy`` whenever it supports the problem.  On the SpicyMKL
   §6.1 problems (hundreds to thousands of kernels, :math:`N \le 614`) its
   few Newton steps were 4-70 times faster than proximal gradient at every
   tolerance.
3. Otherwise ``proximal`` (e.g. a plugin loss with a differentiable primal
   and no conjugate form ``spicy`` can use).
4. If the chosen engine ends ``stalled`` or ``numerical_error`` and the
   other one supports the problem, the other continues from the last point
   (warm start).

The result carries ``engine = "auto"``; its message starts with the engine
that produced it (``auto -> spicy: ...``) and every history record has an
``engine`` key.  Only the final status emits a ``ConvergenceWarning``.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, ClassVar

import numpy as np

from ..components.params import Param
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult, Status
from .base import COMMON_PARAMS, Callback, Engine, Run
from .bcd import BCD
from .proximal import Proximal
from .spicy import Spicy

__all__ = ["Auto", "AUTO_ENGINES"]


class Auto(Engine):
    r"""Delegates to ``bcd``, ``spicy`` or ``proximal`` (module docstring).

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop, passed to the delegate.
    max_iter : int or None
        Passed to the delegate (Newton or outer steps for ``spicy``,
        proximal-gradient steps for ``proximal``); ``None`` keeps each
        engine's own default.
    proximal_min_samples : int
        Fewest samples for which ``proximal`` is preferred (halved when
        ``spicy`` would use its iterative method).
    proximal_ratio : float
        ``proximal`` is preferred when :math:`N \ge` ratio :math:`\times M`.
    fallback : bool
        Continue with the other engine when the first stalls or fails numerically.
    """

    name: ClassVar[str] = "auto"
    description: ClassVar[str] = (
        "chooses the engine per problem: bcd on a factor bank, proximal for many samples and "
        "few kernels, else spicy where it applies, else proximal; another continues a stalled solve"
    )
    supports_warm_start: ClassVar[bool] = True
    representations: ClassVar[tuple[str, ...]] = ("array", "sharded", "factor")
    #: the delegate computes the zero solution (and returns it when optimal)
    zero_first: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", None, "maximum iterations of the delegate (null: its own default)",
              type=int, low=1, nullable=True),
        Param("proximal_min_samples", 2000,
              "fewest samples for which proximal is preferred (halved when spicy would "
              "need its iterative method)", type=int, low=1),
        Param("proximal_ratio", 100.0, "proximal is preferred when N >= ratio * M",
              low=0.0),
        Param("fallback", True, "continue with the other engine when the first stalls",
              type=bool),
    )

    def _delegate_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tol": self.tol}
        if self.max_iter is not None:
            out["max_iter"] = self.max_iter
        return out

    def _engines(self) -> tuple[Engine, Engine]:
        kw = self._delegate_params()
        return Spicy(**kw), Proximal(**kw)

    def choose(self, problem: Problem) -> tuple[Engine | None, str]:
        """The engine ``solve`` delegates to, and why (or why none applies)."""
        if problem.representation == "factor":
            bcd = BCD(**self._delegate_params())
            if bcd.supports(problem) is None:
                return bcd, "a factor bank: bcd solves in the factors' coordinates"
        spicy, prox = self._engines()
        r_spicy = spicy.supports(problem)
        r_prox = prox.supports(problem)
        if r_prox is None and problem.representation not in prox.representations:
            r_prox = (f"it works on {' or '.join(prox.representations)} banks, not a "
                      f"{problem.representation} bank")
        if r_spicy is None and problem.representation not in spicy.representations:
            r_spicy = f"it does not work on a {problem.representation} bank"
        N, M = problem.n_samples, problem.n_kernels
        one_step = spicy.uses_one_step(problem)
        min_n = self.proximal_min_samples if one_step else self.proximal_min_samples / 2
        if r_prox is None and N >= min_n and N >= self.proximal_ratio * M:
            return prox, (f"N = {N} samples >= {min_n:g} and >= {self.proximal_ratio:g} x "
                          f"{M} kernels")
        if r_spicy is None:
            return spicy, "spicy supports the problem"
        if r_prox is None:
            return prox, f"spicy does not apply: {r_spicy}"
        return None, f"spicy: {r_spicy}; proximal: {r_prox}"

    def problem_reasons(self, problem: Problem) -> list[str]:
        """Why neither ``spicy`` nor ``proximal`` supports the problem (empty when one does)."""
        engine, why = self.choose(problem)
        return [] if engine is not None else [f"no engine applies ({why})"]

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Solve with the chosen engine, and the fallback to the other one (:meth:`Engine.solve`)."""
        callback = run.callback
        engine, why = self.choose(problem)
        first = self._run(engine, problem, callback, warm_start, 0)
        result = dataclasses.replace(
            first, message=f"auto -> {engine.name} ({why}): {first.message}")
        if self.fallback and first.status in (Status.STALLED, Status.NUMERICAL_ERROR):
            spicy, prox = self._engines()
            other = prox if engine.name == spicy.name else spicy
            if other.supports(problem) is None:
                start = first if _finite_point(first) else warm_start
                second = self._run(other, problem, callback, start, first.iterations)
                result = dataclasses.replace(
                    second,
                    history=list(first.history) + list(second.history),
                    iterations=first.iterations + second.iterations,
                    time_s=first.time_s + second.time_s,
                    message=(f"auto -> {engine.name} then {other.name}: {engine.name} ended "
                             f"{first.status} ({first.message}); {second.message}"),
                )
        return dataclasses.replace(result, engine=self.name)

    @staticmethod
    def _run(engine: Engine, problem: Problem, callback: Callback | None,
             warm_start: SolveResult | None, offset: int) -> SolveResult:
        """Run a delegate; records get ``engine`` and iterations shifted by ``offset``."""
        name = engine.name

        def tag(rec: dict[str, Any]) -> dict[str, Any]:
            return {**rec, "iteration": rec["iteration"] + offset, "engine": name}

        cb = None
        if callback is not None:
            def cb(rec: dict[str, Any]) -> Any:
                return callback(tag(rec))
        with warnings.catch_warnings():
            # the delegate's warning is re-issued for the final result only
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = engine.solve(problem, cb, warm_start=warm_start)
        return dataclasses.replace(res, history=[tag(h) for h in res.history])


def _finite_point(res: SolveResult) -> bool:
    return bool(np.all(np.isfinite(res.alpha))) and math.isfinite(res.bias)


AUTO_ENGINES = (Auto,)
