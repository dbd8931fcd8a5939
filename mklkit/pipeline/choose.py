r"""``auto``: the engine chosen per problem among the installed ones (registered as the engine ``auto``).

The rules, their measurements and the fallback are in ``docs/engines.md`` ("auto"): ``dualcd`` or
``bcd`` on a factor bank (rule 0), ``proximal`` for many samples where ``spicy`` would need its
iterative method (1), ``bcd`` on the exact factors of a dense bank, certified again on the dense bank
(2), else ``spicy`` (3), else ``proximal`` (4); a more specialised installed engine
(:func:`specificity`) where one applies; another general engine continues a stalled or failed solve
(5) or one whose certified gap stops falling (6, :class:`StallWatch`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import warnings
import weakref
from typing import Any, ClassVar

from ..components.params import Param
from ..engines import common
from ..engines.base import COMMON_PARAMS, Engine, Run
from ..engines.bcd import BCD
from ..engines.capabilities import Requires
from ..engines.dual_cd import DualCD
from ..engines.proximal import Proximal
from ..engines.spicy import Spicy
from ..kernels.factorize.dense import exact_factors
from ..plugins import get_registry
from ..problem import Problem
from ..result import SolveResult, Status
from .fallback import EngineSwitchWarning, Fallback, StallWatch, finite_point

__all__ = ["Auto", "specificity", "DENSE_FACTOR_MAX_RANK", "StallWatch", "EngineSwitchWarning"]

#: the route is logged under the name ``auto`` has always logged it under
logger = logging.getLogger("mklkit.engines.auto")

#: Columns kept per kernel when a dense bank is factored (``None``: as many as the
#: kernel's numerical rank).  A cap makes the factors inexact for kernels of larger
#: rank, and auto then solves the dense problem with ``spicy``.
DENSE_FACTOR_MAX_RANK: int | None = None

#: The last problem routed by its C_max and that C_max (a weak reference, the value).
_ROUTED: list[Any] = [None, math.nan]


def _routing_c_max(problem: Problem) -> float:
    """``C_max`` of ``problem`` for the choice of rule 0, computed once per problem object:
    ``problem_reasons``, ``choose`` and ``solve`` route the same problem in turn (one pass
    over the bank each).  The delegate computes its own zero solution."""
    ref, value = _ROUTED
    if ref is not None and ref() is problem:
        return float(value)
    value = common.zero_solution(problem).C_max
    _ROUTED[:] = [weakref.ref(problem), value]
    return float(value)


class Auto(Fallback, Engine):
    """Delegates to the fastest engine that supports the problem (``docs/engines.md``, "auto"); its options
    are declared in :attr:`params` (``tol`` and ``max_iter`` are passed to the delegate)."""

    name: ClassVar[str] = "auto"
    description: ClassVar[str] = (
        "chooses the engine per problem: bcd on a factor bank or on the exact factors of a "
        "large dense bank, proximal for many samples and few kernels where spicy would need "
        "its iterative method, else spicy, else "
        "proximal; a more specialised installed engine where one applies; another continues "
        "a stalled solve"
    )
    supports_warm_start: ClassVar[bool] = True
    representations: ClassVar[tuple[str, ...]] = ("array", "sharded", "factor")
    #: auto delegates: a weighted problem goes to an engine that accepts weights
    #: (``problem_reasons`` says when none does)
    requires: ClassVar[Requires] = Requires(sample_weight=True)
    #: the delegate computes the zero solution (and returns it when optimal)
    zero_first: ClassVar[bool] = False
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param(
            "max_iter",
            None,
            "maximum iterations of the delegate (null: its own default)",
            type=int,
            low=1,
            nullable=True,
        ),
        Param(
            "proximal_min_samples",
            1000,
            "fewest samples for which proximal is preferred to spicy's iterative method",
            type=int,
            low=1,
        ),
        Param(
            "proximal_ratio", 500.0, "proximal is preferred to spicy's iterative method when N >= ratio * M", low=0.0
        ),
        Param(
            "dense_factor_min_samples",
            1000,
            "fewest samples for which a dense bank is factored exactly and solved by bcd",
            type=int,
            low=1,
        ),
        Param(
            "dense_factor_max_kernels",
            10,
            "most kernels for which a dense bank is factored exactly (the factorization "
            "costs M N^3 / 3 flops and up to the bank's memory again)",
            type=int,
            low=1,
        ),
        Param(
            "dualcd_max_ratio",
            0.05,
            "on a factor bank, a loss with a piecewise-linear conjugate (hinge, "
            "epsilon-insensitive) goes to dualcd at C <= ratio * C_max, else to bcd",
            low=0.0,
        ),
        Param("fallback", True, "continue with another engine when the first stalls", type=bool),
        Param("stall_window", 8, "fewest records of the delegate before the stall rule applies", type=int, low=2),
        Param(
            "stall_ratio",
            0.9,
            "with fallback, the delegate is stopped and another engine continues when its "
            "best gap after k records is not below stall_ratio times that after k/2",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
    )

    def _delegate_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tol": self.tol}
        if self.max_iter is not None:
            out["max_iter"] = self.max_iter
        return out

    def _engines(self) -> tuple[Engine, Engine]:
        kw = self._delegate_params()
        return Spicy(**kw), Proximal(**kw)

    # -- the choice ---------------------------------------------------------------
    def _general(self, problem: Problem, dense_factors: bool = True) -> tuple[Engine | None, str, bool]:
        """The choice among the core's general engines (rules 0-4, rule 2 only with
        ``dense_factors``): engine, why, and whether the dense bank is to be factored first."""
        rep = problem.representation
        bcd = BCD(**self._delegate_params())
        if rep == "factor":
            dual_cd = DualCD(**self._delegate_params())
            if dual_cd.supports(problem) is None:
                c_max = _routing_c_max(problem)
                ratio = float(problem.C) / c_max if c_max > 0.0 else math.inf
                if ratio <= self.dualcd_max_ratio:
                    why = (
                        f"a loss with a piecewise-linear conjugate on a factor bank at C = {ratio:.3g} C_max <= "
                        f"{self.dualcd_max_ratio:g} C_max: dual coordinate descent"
                    )
                    return dual_cd, why, False
        if rep == "factor" and bcd.supports(problem) is None:
            return bcd, "a factor bank: bcd solves in the factors' coordinates", False
        N, M = problem.n_samples, problem.n_kernels
        spicy, prox = self._engines()
        r_spicy = spicy.supports(problem)
        r_prox = prox.supports(problem)
        if r_prox is None and rep not in prox.representations:
            r_prox = f"it works on {' or '.join(prox.representations)} banks, not a {rep} bank"
        if r_spicy is None and rep not in spicy.representations:
            r_spicy = f"it does not work on a {rep} bank"
        # rules 1 and 2 apply only where spicy's one-step method does not
        spicy_one_step = r_spicy is None and spicy.uses_one_step(problem)
        if r_prox is None and not spicy_one_step and N >= self.proximal_min_samples and N >= self.proximal_ratio * M:
            why = f"N = {N} samples >= {self.proximal_min_samples} and >= {self.proximal_ratio:g} x {M} kernels"
            return prox, why, False
        if (
            dense_factors
            and rep == "array"
            and not spicy_one_step
            and r_prox is not None
            and N >= self.dense_factor_min_samples
            and M <= self.dense_factor_max_kernels
        ):
            probe = dataclasses.replace(
                problem, K=problem.bank, kernel_names=None, extra={**problem.extra, "representation": "factor"}
            )
            if bcd.supports(probe) is None:
                why = (
                    f"a dense bank of N = {N} >= {self.dense_factor_min_samples} samples and "
                    f"M = {M} <= {self.dense_factor_max_kernels} kernels: bcd on its exact factors"
                )
                return bcd, why, True
        if r_spicy is None:
            return spicy, "spicy supports the problem", False
        if r_prox is None:
            return prox, f"spicy does not apply: {r_spicy}", False
        return None, f"spicy: {r_spicy}; proximal: {r_prox}", False

    def _specialists(self, problem: Problem) -> list[tuple[int, str, Engine]]:
        """The other installed engines that solve ``problem`` on its bank, each with its
        :func:`specificity`, most specialised first."""
        general = {BCD.name, DualCD.name, Spicy.name, Proximal.name, self.name}
        kw = self._delegate_params()
        out = []
        for reg in get_registry().registrations("engine"):
            if reg.name in general:
                continue
            try:
                engine = reg.cls(**kw)
                ok = engine.supports(problem) is None and problem.representation in getattr(
                    engine, "representations", ("array",)
                )
            except Exception:  # noqa: BLE001 - a broken plugin engine is no candidate
                continue
            if ok:
                out.append((specificity(reg.cls), reg.name, engine))
        return sorted(out, key=lambda t: (t[0], t[1]))

    def _route(self, problem: Problem) -> tuple[Engine | None, str, bool]:
        engine, why, factor = self._general(problem)
        specialists = self._specialists(problem)
        if specialists:
            count, name, special = specialists[0]
            if engine is None:
                return (
                    special,
                    f"{why}; {name} supports it (it accepts {count} installed loss x regularizer pairs)",
                    False,
                )
            mine = specificity(type(engine))
            if count < mine:
                why = (
                    f"{name} supports the problem and is more specialised than {engine.name} (it accepts "
                    f"{count} installed loss x regularizer pairs, {engine.name} {mine})"
                )
                return special, why, False
        return engine, why, factor

    def choose(self, problem: Problem) -> tuple[Engine | None, str]:
        """The engine ``solve`` delegates to, and why (or why none applies)."""
        engine, why, _ = self._route(problem)
        return engine, why

    def problem_reasons(self, problem: Problem) -> list[str]:
        """Why no installed engine supports the problem (empty when one does)."""
        engine, why = self.choose(problem)
        return [] if engine is not None else [f"no engine applies ({why})"]

    # -- the solve ----------------------------------------------------------------
    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Solve with the chosen engine, and the fallback to another one (:meth:`Engine.solve`)."""
        callback = run.callback
        engine, why, factor = self._route(problem)
        assert engine is not None  # check_supported refused the problem otherwise
        if factor:
            return self._solve_on_factors(problem, run, engine, why, warm_start)
        engine, why = self._after_fallback(problem, engine, why, warm_start)
        logger.info("auto -> %s (%s)", engine.name, why)
        other = self._other(problem, engine.name) if self.fallback else None
        window = max(self.stall_window, int(getattr(engine, "stall_records", 0)))
        watch = None if other is None else StallWatch(window, self.stall_ratio, getattr(engine, "unit", "iteration"))
        first = self._run(engine, problem, callback, warm_start, 0, watch=watch)
        result = dataclasses.replace(first, message=f"auto -> {engine.name} ({why}): {first.message}")
        if other is not None and watch is not None and watch.reason is not None and first.status == Status.STOPPED:
            note = f"{engine.name} made {watch.reason}"
            line = f"auto: {note}; {other.name} continues from its point"
            logger.info("%s", line)
            warnings.warn(line, EngineSwitchWarning, stacklevel=3)
            result = self._continue(problem, callback, engine.name, first, warm_start, why=note) or result
        elif self.fallback and first.status in (Status.STALLED, Status.NUMERICAL_ERROR):
            result = self._continue(problem, callback, engine.name, first, warm_start) or result
        return dataclasses.replace(result, engine=self.name)

    def _solve_on_factors(
        self, problem: Problem, run: Run, bcd: Engine, why: str, warm_start: SolveResult | None
    ) -> SolveResult:
        """Rule 2: exact factors of the dense bank, bcd on them, the dense certificate."""
        callback = run.callback
        fac = exact_factors(problem.K, max_rank=DENSE_FACTOR_MAX_RANK)
        other, _, _ = self._general(problem, dense_factors=False)
        if not fac.exact and other is not None:
            why = f"{why}, but {fac.reason}: {other.name} on the dense bank instead"
            logger.info("auto -> %s (%s)", other.name, why)
            res = self._run(other, problem, callback, warm_start, 0)
            return dataclasses.replace(
                res, engine=self.name, time_s=run.elapsed(), message=f"auto -> {other.name} ({why}): {res.message}"
            )
        # inexact factors with no engine for the dense bank: bcd on them all the same, and the
        # dense certificate says how far its point is from the dense optimum
        kind = "exact" if fac.exact else "inexact"
        route = (
            f"auto -> bcd on {kind} factors of the dense bank ({fac.describe()}; "
            f"{why.split(': ')[0]}; factored in {fac.time_s:.2f} s)"
        )
        logger.info("%s", route)
        extra = {k: v for k, v in problem.extra.items() if k != "representation"}
        factored = dataclasses.replace(problem, K=fac.bank, extra=extra)
        other = self._other(problem, bcd.name) if self.fallback else None
        watch = None if other is None else StallWatch(self.stall_window, self.stall_ratio, bcd.unit)
        first = self._run(BCD(**self._delegate_params()), factored, callback, warm_start, 0, watch=watch)
        if other is not None and watch is not None and watch.reason is not None and first.status == Status.STOPPED:
            line = f"auto: bcd made {watch.reason}; {other.name} continues from its point"
            logger.info("%s", line)
            warnings.warn(line, EngineSwitchWarning, stacklevel=4)
            first = dataclasses.replace(first, status=Status.STALLED, message=f"bcd made {watch.reason}")
        cert = common.certify(problem, first.alpha, first.bias, first.dual)
        tol = float(self.tol)
        met = math.isfinite(cert.gap) and cert.gap <= tol
        dense = (
            f"on the dense bank: objective {cert.primal:.10g}, relative duality gap "
            f"{cert.gap:.3e} {'<=' if met else '>'} tol {tol:g}"
        )
        if met:
            status = Status.CONVERGED if first.status != Status.STOPPED else first.status
        elif first.status == Status.CONVERGED:
            status = Status.STALLED
        else:
            status = first.status
        certified = common.build_result(
            problem,
            engine=bcd.name,
            status=status,
            alpha=first.alpha,
            bias=first.bias,
            primal=cert.primal,
            dual=cert.dual,
            iterations=first.iterations,
            history=first.history,
            message=f"{first.message}; {dense}",
            time_s=run.elapsed(),
            norms=cert.norms,
            rho=cert.rho,
            C_max=first.C_max,
        )
        if not met and self.fallback and status != Status.STOPPED and finite_point(certified):
            stalled = watch is not None and watch.reason is not None
            why = f"{first.message}; {dense}" if stalled else f"bcd's point on the factors: {dense}"
            second = self._continue(problem, callback, bcd.name, certified, warm_start, why=why)
            if second is not None:
                return dataclasses.replace(
                    second, engine=self.name, time_s=run.elapsed(), message=f"{route}: {second.message}"
                )
        return dataclasses.replace(certified, engine=self.name, message=f"{route}: {certified.message}")


def specificity(engine_cls: type) -> int:
    """How many installed loss x regularizer pairs (built with their defaults) ``engine_cls.requires``
    accepts: losses met times regularizers met, the fewer the more specialised (cached per registry)."""
    registry = get_registry()
    return _specificity(registry, len(registry.registrations()), engine_cls)


@functools.cache
def _specificity(registry: Any, n_registered: int, engine_cls: type) -> int:
    requires = engine_cls.requires

    def count(kind: str, reqs: tuple[Any, ...]) -> int:
        n = 0
        for r in registry.registrations(kind):
            try:
                component = r.cls()
            except Exception:  # noqa: BLE001 - needs parameters: not counted
                continue
            if all(q.met(component) for q in reqs):
                n += 1
        return n

    return count("loss", requires.loss) * count("regularizer", requires.regularizer)
