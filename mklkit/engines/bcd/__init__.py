r"""Engine ``bcd``: primal block coordinate descent on a factor bank (docs/engines.md, bcd).

With :math:`K_m = L_mL_m^\top` the MKL primal (SpicyMKL eq. 42) in :math:`\beta_m =
L_m^\top\alpha_m` is a generalized group lasso, solved as skglm's ``GroupBCD`` and
``GroupProxNewton`` do (Bertrand et al. 2022): working sets, coordinate descent or
proximal Newton (Lee, Sun & Saunders 2014), Anderson extrapolation (Bertrand & Massias
2021), a non-smooth loss replaced by its Moreau envelope.  Modules: ``loop`` (the
working-set loop and the choice of inner solver), ``polish`` (Newton steps on the
non-zero blocks and the smoothing continuation).
"""

from __future__ import annotations

import warnings
from typing import ClassVar

from ...components.params import Param
from ...problem import Problem
from ...result import SolveResult
from .. import common
from ..base import COMMON_PARAMS, Engine, Requires, Run, blas_threads, open_interval
from ..capabilities import FACTOR_BANK
from ..smoothing import SMOOTHING_PARAMS, loss_reasons
from .loop import _BcdRun

__all__ = ["BCD"]

#: BLAS threads during a solve (``None``: leave the BLAS library as it is): a multi-threaded
#: Cholesky next to the bank's spinning parallel passes oversubscribes the cores
#: (``docs/tuned_constants.md``).
BLAS_THREADS: int | None = 1
_FRACTION = open_interval(1.0)


class BCD(Engine):
    """Primal block coordinate descent on a factor bank: working sets, proximal Newton,
    Anderson extrapolation, smoothing of non-smooth losses; gap-certified.

    The options are :attr:`params` (docs/engines.md, section bcd).
    """

    name: ClassVar[str] = "bcd"
    description: ClassVar[str] = (
        "primal block coordinate descent on a factor bank: working sets, Anderson "
        "extrapolation, proximal Newton, smoothing of non-smooth losses; gap-certified"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 200, "maximum number of outer iterations (working-set solves)", type=int, low=1),
        Param(
            "method",
            "auto",
            "inner solver: 'bcd' (coordinate descent on the loss), "
            "'newton' (proximal Newton, coordinate descent on the quadratic model), 'auto' (newton)",
            type=str,
            choices=("auto", "bcd", "newton"),
        ),
        Param("p0", 10, "smallest working set (kernels)", type=int, low=1),
        Param("max_epochs", 1000, "method bcd: passes over the working set per outer iteration", type=int, low=1),
        Param("max_newton", 50, "method newton: Newton steps per outer iteration", type=int, low=1),
        Param("newton_epochs", 20, "method newton: passes over the working set per Newton step", type=int, low=1),
        Param(
            "exact_rank",
            64,
            "method newton: blocks of at most this rank are minimized exactly on the quadratic model "
            "(their r x r Hessian is formed at every Newton step); 0: never",
            type=int,
            low=0,
        ),
        Param("max_inner", 50, "iterations of an exact block minimization", type=int, low=1),
        Param("anderson", 5, "iterates combined by Anderson extrapolation (0: none)", type=int, low=0, high=50),
        Param("inner_ratio", 0.3, "the working set is solved to this fraction of the largest violation", **_FRACTION),
        *SMOOTHING_PARAMS,
        Param(
            "polish",
            "auto",
            "Newton steps on the non-zero blocks after every working-set solve: 'auto' (for a smoothed "
            "non-smooth loss; for a smooth loss near the optimum where the Newton system is cheap), "
            "'always', 'never'",
            type=str,
            choices=("auto", "always", "never"),
        ),
        Param("max_polish", 8, "Newton steps on the non-zero blocks per outer iteration", type=int, low=1),
    )
    requires: ClassVar[Requires] = Requires(
        regularizer=(common.SEPARABLE_SUMS,), bank=(FACTOR_BANK,), sample_weight=True
    )
    representations: ClassVar[tuple[str, ...]] = ("factor",)

    def problem_reasons(self, problem: Problem) -> list[str]:
        """What the loss lacks of the kernels the engine calls (:func:`~mklkit.engines.smoothing.loss_reasons`)."""
        return loss_reasons(problem)

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        from numba.core.errors import NumbaExperimentalFeatureWarning

        with warnings.catch_warnings(), blas_threads(BLAS_THREADS):
            # the jitted loops take the component kernels as first-class functions
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            return _BcdRun(self, problem, run, warm_start).run_loop()
