r"""The ``skm_smo`` engine: the support kernel machine by Moreau-Yosida regularized SMO.

Bach, Lanckriet & Jordan (2004), "Multiple kernel learning, conic duality,
and the SMO algorithm" (ICML).

Problem
-------
Hinge loss with the squared block 1-norm ``l1_squared`` and a bias.  In
mklkit's convention (``C`` on the regularizer) the objective is

.. math::
    \sum_i \max\big(0, 1 - y_i(\textstyle\sum_m f_m(x_i) + b)\big)
        + \frac C2\Big(\sum_m\|f_m\|\Big)^2 = C\cdot P,

with :math:`P` the paper's primal (P) (all :math:`d_j = 1`) at
:math:`C_{\mathrm{paper}} = 1/C`.  Its conic dual is (D_K),
:math:`\min \tfrac12\gamma^2 - e^\top\alpha` over :math:`0\le\alpha\le C_{\mathrm{paper}}`,
:math:`y^\top\alpha = 0`, :math:`\sqrt{\alpha^\top D(y)K_jD(y)\alpha}\le d_j\gamma`,
whose optimal value is :math:`-P^*`.

Algorithm (§4)
--------------
The MY-regularized dual :math:`\min G(\alpha)` (Appendix B, :mod:`mklkit_smo._skm`)
is differentiable; it is minimized by the SMO loop of :mod:`mklkit_smo._smo`
(maximal violating pair / second-order working set, a safeguarded Newton
line search on the convex two-variable problem, kernel caching and
shrinking) in its ``REG_SKM`` mode, until the pair conditions (OPT4) hold
with :math:`2\varepsilon = \varepsilon_2` (the first stage, the SVM on the sum of
the kernels, only starts the continuation and is solved to ``_SVM_STAGE_TOL``).

Continuation (§4.4): :math:`a_j = \kappa\,d_j/\rho`, :math:`d_j(\kappa) = (1-\kappa)\,d_j/\rho`,
:math:`\rho = \sqrt{(1-\kappa)^2+\kappa^2}`, from :math:`\kappa = 1` (an SVM on
:math:`\sum_j K_j/d_j^2`, the sum of the kernels for equal :math:`d_j`) with
:math:`\kappa \leftarrow \mu\kappa`.  The paper's schedule is :math:`a_j = \kappa`,
:math:`d_j = 1 - \kappa`; dividing both by :math:`\rho` keeps the strength of
the regularizer for a single active kernel fixed at :math:`\tfrac12 d_j^2\|w_j\|^2`
while leaving :math:`a_j/d_j(\kappa) = \kappa/(1-\kappa)` -- the ratio of Theorem 1 --
as in the paper, so the intermediate problems stay close in scale to the
target one.  After each stage the weights :math:`\tilde\eta(\alpha)` are
rescaled so that :math:`\sum_j d_j^2\eta_j = 1` for the *target* :math:`d_j`, and
the (ε1, ε2)-optimality conditions (OPT3) of the target SKM are checked for
:math:`(\alpha, \eta)`; when :math:`\tilde\eta` just misses them, the LP of (OPT3)
(§3.3) gives the best weights for that :math:`\alpha`, which are checked the same
way.  The solve stops when they hold and the certified relative duality gap
:math:`(P - D)/|P|` is at most ``tol``.

Identical points
----------------
Points with the same label and the same row in every kernel enter the dual only
through the sum of their :math:`\alpha_i`; by default (``merge_identical``) the
SMO loop runs on the distinct points, each group one variable in
:math:`[0, kU]` (:class:`~mklkit_smo.merge.MergedPoints`), and once that problem is solved its last
stage is run again on all points, where (OPT3) and the gap are certified.

Reported values
---------------
``objective`` is :math:`C\cdot P` at :math:`w_j = \eta_j\sum_i\alpha_iy_i\phi_j(x_i)`
with the optimal bias (mklkit's primal; with ``C = 1`` it is the paper's P),
``dual_objective`` is :math:`C\,(e^\top\alpha - \tfrac12\max_j c_j/d_j^2)`, i.e.
:math:`-C` times the value of (D_K) at :math:`\alpha`.  History records carry the
paper-scale values (``objective_skm``, ``dual_objective_skm``), :math:`\kappa` and
the reached (ε1, ε2) (``eps1_per_n``, ``eps2``); the message states them.
"""

from __future__ import annotations

from typing import ClassVar

from mklkit.components.base import Param
from mklkit.engines.base import Engine, Requires, Run
from mklkit.engines.capabilities import ARRAY_BANK, HINGE_CONJUGATE, L1_SQUARED_FORM, needs
from mklkit.problem import Problem
from mklkit.result import SolveResult

from .engine import CACHE_MB, PARALLEL, SHRINKING, bias_and_kernel_problems
from .skm_run import _Skm

__all__ = ["SkmSMO"]


class SkmSMO(Engine):
    r"""Support kernel machine by Moreau-Yosida regularized SMO (Bach et al. 2004).

    Parameters
    ----------
    tol : float
        Certified relative duality gap :math:`(P - D)/|P|` required, besides
        (OPT3), to stop.
    max_iter : int
        Maximum number of SMO steps over all continuation stages.
    eps1 : float
        :math:`\varepsilon_1/n` of the (ε1, ε2)-optimality conditions (OPT3),
        in the paper's scale (§4.4: 5e-4).
    eps2 : float
        :math:`\varepsilon_2` of (OPT3) (§4.4: 1e-4); each MY-regularized problem is
        solved to :math:`\varepsilon_2/2`-optimality (OPT4).
    mu : float
        Continuation factor, :math:`\kappa \leftarrow \mu\kappa` (§4.4: 0.5).
    max_stages : int
        Maximum number of continuation stages.
    sparsify : bool
        After convergence, remove kernels while the LP of (OPT3) stays feasible (§3.4).
    remove_kernels : bool
        Leave out of the SMO loop the kernels with zero weight in two successive
        stages, and check after convergence that they can stay out (§4.4).  A step
        then costs O(m_active n) instead of O(m n).  Precomputed banks only: with a
        kernel source (rows computed on the fly) every kernel stays in the loop.
    extrapolate : bool
        Start every stage from the last stage's solution moved, by an exact line search
        on the new stage's :math:`G`, along the displacement of :math:`\alpha` over the
        last stage (:func:`mklkit_smo.skm_steps.extrapolate`).  Precomputed banks only.
    newton : bool
        Start every stage after the first with up to three Newton steps of :math:`G` on
        the free variables, each with the exact line search
        (:func:`mklkit_smo.skm_steps.newton_step`).
        Precomputed banks only.
    merge_identical : bool
        Solve on the distinct points: points with the same label and the same row in
        every kernel are one variable with a box :math:`n_g` times as large
        (:class:`~mklkit_smo.merge.MergedPoints`, exact); the last stage is then run and
        checked again on all points.  Precomputed banks only.
    check_every, cache_mb, shrinking, parallel
        As for ``smo_mkl``.
    """

    name: ClassVar[str] = "skm_smo"
    description: ClassVar[str] = (
        "support kernel machine (Bach, Lanckriet & Jordan 2004): squared block 1-norm MKL by "
        "Moreau-Yosida regularized SMO; hinge loss"
    )
    params: ClassVar[tuple[Param, ...]] = (
        Param(
            "tol", 1e-3, "certified relative duality gap (P - D)/|P| required besides (OPT3)", low=0.0, low_open=True
        ),
        Param("max_iter", 10_000_000, "maximum number of SMO steps over all stages", type=int, low=1),
        Param("eps1", 5e-4, "eps1/n of the (eps1, eps2)-optimality conditions (OPT3)", low=0.0, low_open=True),
        Param("eps2", 1e-4, "eps2 of (OPT3); MY stages are solved to eps2/2 (OPT4)", low=0.0, low_open=True),
        Param("mu", 0.5, "continuation factor kappa <- mu kappa", low=0.0, high=1.0, low_open=True, high_open=True),
        Param("max_stages", 60, "maximum number of continuation stages", type=int, low=1),
        Param("sparsify", False, "remove kernels while the LP of (OPT3) stays feasible (§3.4)", type=bool),
        Param(
            "remove_kernels",
            True,
            "leave out kernels with zero weight in two successive stages (checked at the end; precomputed banks)",
            type=bool,
        ),
        Param(
            "extrapolate",
            True,
            "start each stage with an exact line search along the previous stage's "
            "displacement of alpha (precomputed banks)",
            type=bool,
        ),
        Param(
            "newton",
            True,
            "start each stage with up to three Newton steps of G on the free variables (precomputed banks)",
            type=bool,
        ),
        Param(
            "merge_identical",
            True,
            "solve on the distinct points (identical points merged, exact); the last stage is "
            "checked on all points (precomputed banks)",
            type=bool,
        ),
        Param("check_every", 0, "SMO steps between exact refreshes (0: automatic)", type=int, low=0),
        CACHE_MB,
        SHRINKING,
        PARALLEL,
    )

    unit: ClassVar[str] = "SMO step"
    requires: ClassVar[Requires] = Requires(
        loss=(needs(HINGE_CONJUGATE, why="the SKM's conic dual (D_K) is that of the hinge loss (a classifier)"),),
        regularizer=(needs(L1_SQUARED_FORM, why="the SKM solves the squared block 1-norm"),),
        bank=(ARRAY_BANK,),
    )

    def problem_reasons(self, problem: Problem) -> list[str]:
        """The bias and the kernels (:func:`~mklkit_smo.engine.bias_and_kernel_problems`)."""
        return bias_and_kernel_problems(problem, "the SKM")

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Continuation over kappa around the SMO state (module docstring)."""
        return _Skm(self, problem, run).run_loop()
