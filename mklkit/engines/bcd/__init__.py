r"""Engine ``bcd``: primal block coordinate descent on a factor bank.

With every kernel held as a factor :math:`K_m = L_mL_m^\top`
(:class:`~mklkit.kernels.factor.FactorBank`), the MKL primal (SpicyMKL
eq. 42) in the coordinates :math:`\beta_m = L_m^\top\alpha_m` is a
generalized group lasso,

.. math::
    \min_{\beta, b}\ \sum_i \ell\big(y_i, (L\beta)_i + b\big) + \sum_m \tilde g_C(\|\beta_m\|_2),

since :math:`K_m\alpha_m = L_m\beta_m` and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`.
Block-ℓ1 MKL with linear kernels on feature groups is exactly the group
lasso.  The engine solves it the way the fastest group-lasso solvers do
(skglm's ``GroupBCD`` and ``GroupProxNewton``, Bertrand et al. 2022; celer,
Massias et al. 2018/2020), generic over the component contracts:

Outer loop (working sets)
-------------------------
Every outer iteration certifies the current point (below) and scores every
block by the violation of its optimality condition, the fixed-point residual
:math:`\nu_m\|\beta_m - \mathrm{prox}_{\tilde g_C/\nu_m}(\beta_m - g_m/\nu_m)\|`
of a block step with the gradient :math:`g_m = L_m^\top\ell'(z)`
(:math:`\nu_m = L\|L_m\|_2^2`).  The working set holds the non-zero blocks
and the most violating ones, :math:`\max(p_0, 2|\text{active}|)` blocks in
all; the problem restricted to it is solved to ``inner_ratio`` times the
largest violation, in one call of the jitted loop
(:func:`mklkit._jit.bcd.solve_ws`).

Inner solvers
-------------
* ``method: bcd``: cyclic block coordinate descent on the loss itself, block
  step :math:`1/(L\|L_m\|_2^2)` with :math:`L` = ``loss.deriv_lipschitz()``
  (when that is infinite, the local curvature of ``deriv2`` with a
  sufficient-decrease test on the loss, back-tracking), and a Newton step
  on the bias after every pass.
* ``method: newton``: proximal Newton (Lee, Sun & Saunders 2014): the
  loss is replaced by its quadratic model at the current point
  (``deriv``, ``deriv2``), the model is minimized by the same block
  coordinate descent (no component call inside a pass, the curvature of
  each block checked exactly on the step), then an Armijo line search on
  the true objective.
* ``method: auto`` (default): ``newton``.  It is never slower on the
  benchmark (``benchmarks/bench_group_lasso.py``): for the squared loss the
  model is the loss, and for the logistic loss a pass needs no exponential.
  With ``newton``, a working set that differs from the last one gets one
  Newton step (``NEW_SET_NEWTON``: its solution changes the scores that
  choose the next one); on a working set met before, the steps are taken
  one at a time and the point certified after each, so that they end at
  the run's ``tol`` (:meth:`~mklkit.engines.bcd.loop._BcdRun.newton_to_tol`).  The working set after
  two outer iterations in a row that each left the gap within 10 % of where
  it was (same smoothing, ``STALL_RATIO``, ``STALL_SLOW``) or after one whose
  Newton steps took 10 line-search halvings each (``STALL_HALVINGS``; the
  jitted loop ends its call after such a step) is solved by ``bcd``, and
  after the latter below a gap of ``ROUNDING_GAP`` the run stays with
  ``bcd``: proximal Newton can stall a little above the optimum, where the
  objective's decrease reaches its rounding (w8a, squared loss, 16,000
  points: a relative gap of 1.1e-7 for 200 iterations).

Both extrapolate the iterates every ``anderson + 1`` passes (Anderson
acceleration, Bertrand & Massias 2021) and keep the extrapolated point when
it lowers the objective.

Non-smooth losses
-----------------
A loss with ``smooth_primal = False`` (hinge, ε-insensitive, a plugin's
pinball) is replaced by its Moreau envelope
:math:`\ell_\mu(y, z) = \sup_u\{uz - \ell^*(y, u) - \tfrac\mu2u^2\}`, whose
derivative :math:`u^\star(z)` lies in the conjugate's domain and is found
from ``conj_grad``/``conj_hess`` by a safeguarded Newton search
(:func:`mklkit._jit.bcd.envelope`); its derivative is
:math:`1/\mu`-Lipschitz.  The smoothing :math:`\mu` starts at ``mu0`` (by
default a tenth of the zero solution's objective per unit of
:math:`\sum_i u_{\max,i}^2/2`) and is multiplied by ``mu_factor`` whenever
the smoothed problem is solved to within its smoothing error.  The gap is
always that of the original, non-smooth problem, at
:math:`\rho = -u^\star(z)`, which the projection keeps feasible.

Sample weights
--------------
A weighted problem (``problem.sample_weight``, :math:`w_i > 0`) has the loss
term :math:`\sum_i w_i\ell(y_i, z_i)`.  The jitted loops take the weights
as an array next to the conjugate's domain (empty for the unweighted
problem, whose arithmetic and compiled code stay as they were) and use
:math:`w_i\ell` throughout: a smooth loss's value, derivative and
curvature times :math:`w_i`; for a non-smooth loss the envelope of
:math:`w_i\ell`,

.. math::
    (w\ell)_\mu(z) = \sup_u\, uz - w\ell^*(u/w) - \tfrac\mu2u^2 = w\,\ell_{\mu w}(z),

the loss's envelope of the smoothing :math:`\mu w_i` times :math:`w_i` (its
derivative lies in :math:`w_i` times the conjugate's domain, its curvature
stays at most :math:`1/\mu`; :mod:`mklkit._jit.envelope`).  Everything else
goes through :class:`~mklkit.engines.common.SampleLoss`: the step's
Lipschitz constant :math:`\max_i w_i` times ``deriv_lipschitz()``, the dual
box (:math:`w_i` times the loss's), the primal value of the certificate,
the optimal bias of a warm start, and the default smoothing ``mu0`` (from
:math:`\sum_i u_{\max,i}^2/2` over the weighted domain).  Integer weights
give the solution of the rows repeated :math:`w_i` times
(``tests/engines/test_bcd_weights.py``).

Certificate
-----------
At every outer iteration, from the exact predictions :math:`z = L\beta + b`:
:math:`\rho = -\ell'(z)` (:math:`-u^\star(z)` when smoothed), projected onto
:math:`\mathbf 1^\top\rho = 0` inside the conjugate's box; one pass
:math:`L^\top\rho` gives the dual block norms :math:`\|\rho\|_{K_m} =
\|L_m^\top\rho\|` and the gradients for the scores; then
:func:`~mklkit.engines.common.projected_dual_objective`, the primal
:math:`P(\beta, b)` and the relative gap.  The best primal and dual points
seen are returned (:class:`~mklkit.engines.common.Incumbents`).

The result's ``alpha``: block ``m`` is the minimum-norm solution of
:math:`L_m^\top\alpha_m = \beta_m`,
:math:`\alpha_m = L_m(L_m^\top L_m)^+\beta_m` (an :math:`r_m\times r_m`
eigendecomposition, or LSQR for ranks above
:data:`~mklkit.kernels.factor_arrays.GRAM_MAX_RANK`), so that
:math:`K_m\alpha_m = L_m\beta_m` and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`
(the iterates stay in the row space of :math:`L_m^\top`).

Modules
-------
:mod:`~mklkit.engines.bcd.loop` (the working-set loop),
:mod:`~mklkit.engines.bcd.switching` (Newton or coordinate descent for the
next working set), :mod:`~mklkit.engines.bcd.continuation` (the smoothing
of a non-smooth loss), :mod:`~mklkit.engines.bcd.polish` and
:mod:`~mklkit.engines.bcd.support` (Newton steps on the non-zero blocks);
the factor bank's arrays and the map back to :math:`\alpha`:
:mod:`mklkit.kernels.factor_arrays`.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from ...components.params import Param
from ...kernels.factor_arrays import GRAM_MAX_RANK, alpha_from_beta
from ...problem import Problem
from ...result import SolveResult
from .. import common
from ..base import COMMON_PARAMS, Engine, Requires, Run
from ..capabilities import FACTOR_BANK
from .loop import _BcdRun

__all__ = ["BCD", "BCD_ENGINES", "alpha_from_beta", "GRAM_MAX_RANK"]

#: BLAS threads during a solve (``None``: leave the BLAS library as it is).  As
#: for spicy (:data:`mklkit.engines.spicy.BLAS_THREADS`): the factor bank's
#: parallel jitted passes keep their threads spinning, and a multi-threaded
#: Cholesky of the Newton steps on the support next to them oversubscribes the
#: cores (on two busy cores a 176 x 176 factorization took 0.3 s with two BLAS
#: threads and 0.2 ms with one; a hinge solve on 80 samples 18 s against 0.9 s).
BLAS_THREADS: int | None = 1

_THREADPOOLS: Any = None


class BCD(Engine):
    r"""Primal block coordinate descent on a factor bank (module docstring).

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop.
    max_iter : int
        Maximum number of outer iterations (working-set solves).
    method : {"auto", "bcd", "newton"}
        Inner solver: coordinate descent on the loss, or proximal Newton.
    p0 : int
        Smallest working set.
    max_epochs : int
        ``bcd``: passes over the working set per outer iteration.
    max_newton : int
        ``newton``: Newton steps per outer iteration.
    newton_epochs : int
        ``newton``: passes over the working set per Newton step.
    exact_rank : int
        ``newton``: blocks of at most this rank are minimized exactly on the
        quadratic model (accelerated proximal gradient on the block, with its
        :math:`r_m\times r_m` Hessian formed at every Newton step); 0: never.
    max_inner : int
        Iterations of an exact block minimization.
    anderson : int
        Iterates combined by Anderson extrapolation (0: none).
    inner_ratio : float
        The working set is solved to this fraction of the largest violation.
    mu0 : float or None
        Initial smoothing of a non-smooth loss (None: from the data).
    mu_factor : float
        Factor by which the smoothing decreases.
    polish : {"auto", "always", "never"}
        Newton steps on the non-zero blocks after every working-set solve
        (``auto``: for a smoothed non-smooth loss, and for a smooth loss on a
        working set met before once the gap is below ``SMOOTH_POLISH_GAP``
        and its Newton system costs at most ``POLISH_MAX_FLOPS``).
    max_polish : int
        Newton steps on the non-zero blocks per outer iteration.
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
            "'newton' (proximal Newton, coordinate descent on the quadratic model), "
            "'auto' (newton)",
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
            "method newton: blocks of at most this rank are minimized "
            "exactly on the quadratic model (their r x r Hessian is formed at every Newton "
            "step); 0: never",
            type=int,
            low=0,
        ),
        Param("max_inner", 50, "iterations of an exact block minimization", type=int, low=1),
        Param("anderson", 5, "iterates combined by Anderson extrapolation (0: none)", type=int, low=0, high=50),
        Param(
            "inner_ratio",
            0.3,
            "the working set is solved to this fraction of the largest violation",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        Param(
            "mu0",
            None,
            "initial smoothing of a non-smooth loss (null: from the data)",
            low=0.0,
            low_open=True,
            nullable=True,
        ),
        Param(
            "mu_factor",
            0.1,
            "factor by which the smoothing of a non-smooth loss decreases",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        Param(
            "polish",
            "auto",
            "Newton steps on the non-zero blocks after every working-set "
            "solve: 'auto' (for a smoothed non-smooth loss; for a smooth loss near the "
            "optimum where the Newton system is cheap), 'always', 'never'",
            type=str,
            choices=("auto", "always", "never"),
        ),
        Param("max_polish", 8, "Newton steps on the non-zero blocks per outer iteration", type=int, low=1),
    )

    requires: ClassVar[Requires] = Requires(
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(FACTOR_BANK,),
        sample_weight=True,  # the loss enters as w_i l (SampleLoss, the jitted loops' sw)
    )
    representations: ClassVar[tuple[str, ...]] = ("factor",)

    def problem_reasons(self, problem: Problem) -> list[str]:
        """What the loss lacks of the kernels the engine calls: ``value``, ``deriv``,
        ``deriv2`` of a smooth loss, ``conj_grad``/``conj_hess`` of one it smooths."""
        loss = problem.loss
        need = (
            ("value", "deriv", "deriv2", "conj", "conj_lower", "conj_upper")
            if loss.smooth_primal
            else ("value", "conj", "conj_grad", "conj_hess", "conj_lower", "conj_upper")
        )
        missing = [k for k in need if getattr(loss.jit, k, None) is None]
        if not missing:
            return []
        why = (
            "it is smooth (smooth_primal), so the engine needs"
            if loss.smooth_primal
            else "it is not smooth (smooth_primal False), so the engine smooths it through its conjugate and needs"
        )
        return [f"the loss {loss.describe()} gives no {', '.join(missing)}: {why} them"]

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Working sets of block coordinate descent (module docstring); a ``warm_start``'s
        α and b start the solve."""
        from numba.core.errors import NumbaExperimentalFeatureWarning

        with warnings.catch_warnings():
            # the jitted loops take the component kernels as first-class functions
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            if BLAS_THREADS is None:
                return _BcdRun(self, problem, run, warm_start).run_loop()
            global _THREADPOOLS
            if _THREADPOOLS is None:
                from threadpoolctl import ThreadpoolController

                _THREADPOOLS = ThreadpoolController()
            with _THREADPOOLS.limit(limits=BLAS_THREADS, user_api="blas"):
                # the bank's set-up (block Gram matrices, spectral norms) included
                return _BcdRun(self, problem, run, warm_start).run_loop()


BCD_ENGINES = (BCD,)
