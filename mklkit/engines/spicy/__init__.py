"""SpicyMKL engine (Suzuki & Tomioka 2011): the iterative method (§3-4.2) for every loss and
regularizer of the contracts, the one-step method (§4.3) when both conjugates are smooth; the
Newton systems of a factor bank in :mod:`.factor_newton` (``docs/engines.md``, "spicy")."""

from __future__ import annotations

from typing import ClassVar

from ...components.params import Param
from ...problem import Problem
from ...result import SolveResult
from .. import common
from ..base import COMMON_PARAMS, POSITIVE, Engine, Requires, Run, blas_threads, open_interval
from ..capabilities import CONSTRAINED_FORM, SMOOTH_CONJUGATE, SMOOTH_REG_CONJUGATE, needs
from .iterative import _Iterative
from .one_step import _OneStep

#: BLAS threads during a solve (``None``: leave the BLAS library as it is); more oversubscribe
#: the cores next to the jitted loops' spinning threads (``docs/tuned_constants.md``).
BLAS_THREADS: int | None = 1


class Spicy(Engine):
    """SpicyMKL: dual augmented-Lagrangian / Newton solver of Suzuki & Tomioka (2011); ``max_iter``
    counts outer iterations (iterative method) or Newton steps (one-step method).

    The options are :attr:`params` (docs/engines.md, section spicy).
    """

    name: ClassVar[str] = "spicy"
    description: ClassVar[str] = (
        "SpicyMKL (Suzuki & Tomioka 2011): dual augmented-Lagrangian method with "
        "inner Newton steps for every loss and regularizer; one-step method (§4.3) "
        "for smooth conjugates"
    )
    params: ClassVar[tuple[Param, ...]] = COMMON_PARAMS + (
        Param(
            "method",
            "auto",
            "'iterative' (augmented Lagrangian, §3-4.2), 'one_step' (§4.3, smooth "
            "conjugates only) or 'auto' (one-step exactly when it applies)",
            type=str,
            choices=("auto", "one_step", "iterative"),
        ),
        Param(
            "armijo", 1e-4, "sufficient-decrease constant of the Armijo back-tracking (§3.5.1)", **open_interval(0.5)
        ),
        Param("backtrack", 0.5, "factor by which a rejected step is shrunk", **open_interval(1.0)),
        Param("max_backtrack", 60, "maximum number of step shrinkings per Newton step", type=int, low=1),
        Param(
            "boundary",
            0.995,
            "largest fraction of the distance to the boundary of the loss conjugate's "
            "domain that a first trial step may cover",
            **open_interval(1.0),
        ),
        Param(
            "gamma0", None, "first proximity parameter of the iterative method (null: 10/C)", **POSITIVE, nullable=True
        ),
        Param("gamma_factor", 10.0, "growth factor of the proximity parameters per outer iteration", low=1.0),
        Param("gamma_max_factor", 1e4, "the proximity parameter stops growing at gamma_max_factor * gamma0", low=1.0),
        Param("gamma_bias", 1.0, "proximity parameter of the bias relative to that of alpha", **POSITIVE),
        Param("max_newton", 50, "maximum number of Newton steps per inner problem", type=int, low=1),
        Param(
            "inner_tol", 0.1, "inexact inner solves: gradient norm relative to the implied primal update", **POSITIVE
        ),
    )
    supports_warm_start: ClassVar[bool] = True
    representations: ClassVar[tuple[str, ...]] = ("array", "sharded", "factor")

    requires: ClassVar[Requires] = Requires(
        loss=(needs(SMOOTH_CONJUGATE, CONSTRAINED_FORM),),
        regularizer=(common.SEPARABLE_SUMS,),
        sample_weight=True,  # the loss terms weight the conjugate (SampleLoss, _ConstrainedLoss)
    )
    unit: ClassVar[str] = "outer iteration"

    def uses_one_step(self, problem: Problem) -> bool:
        """Whether :meth:`solve` runs the one-step method on ``problem``."""
        if self.method == "one_step":
            return True
        return (
            self.method == "auto"
            and SMOOTH_CONJUGATE.holds(problem.loss)
            and SMOOTH_REG_CONJUGATE.holds(problem.regularizer)
        )

    def requirements(self) -> Requires:
        """:attr:`requires`; with ``method = "one_step"`` both conjugates must be smooth too."""
        if self.method == "one_step":
            return self.requires + _ONE_STEP
        return self.requires

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """The one-step or the iterative method, started at a ``warm_start``'s α, b and dual point."""
        runner = (_OneStep if self.uses_one_step(problem) else _Iterative)(self, problem, run, warm_start)
        with blas_threads(BLAS_THREADS):
            return runner.run_loop()


_ONE_STEP_WHY = "method 'one_step' (§4.3) needs smooth conjugates; use method 'iterative' or 'auto'"
_ONE_STEP = Requires(
    loss=(needs(SMOOTH_CONJUGATE, why=_ONE_STEP_WHY),), regularizer=(needs(SMOOTH_REG_CONJUGATE, why=_ONE_STEP_WHY),)
)
