r"""Proximal-gradient engine: generalized iterative soft-thresholding with FISTA.

Mosci, Santoro, Verri, Villa & Rosasco (2008), "A new algorithm to learn an
optimal kernel based on Fenchel duality" (``shared/papers/mosci2008_fenchel_prox_mkl.md``),
Algorithm 1, run in the product RKHS :math:`\mathcal H = \mathcal H_1 \times
\dots \times \mathcal H_M` for every loss with a differentiable primal
(``loss.smooth_primal``) and every regularizer (through its block prox).

The problem (SpicyMKL eq. 42 in representer form, :math:`f_m = \sum_i
\alpha_{m,i} k_m(x_i, \cdot)`, :math:`\|f_m\|_{\mathcal H_m} = \|\alpha_m\|_{K_m}`)

.. math::
    \min_{\alpha, b}\ F(\alpha, b) + \sum_m \tilde g_C(\|\alpha_m\|_{K_m})
        + \mu \sum_m \|\alpha_m\|_{K_m}^2,
    \qquad F = \sum_i \ell\big(y_i, z_i\big),\quad z = \sum_m K_m\alpha_m + b,

where the last term is the optional :math:`\mu\|f\|^2_{\mathcal H}` of the
paper's Remark 1 (``mu``, default 0).

Relation to the paper
---------------------
The paper minimizes :math:`\frac1n\|S_x f - y\|^2 + 2\tau J(f)` with
:math:`J(f) = \sum_m\|f_m\|`.  Multiplying by ``n`` gives mklkit's
squared loss :math:`\sum_i (y_i - z_i)^2` with the block 1-norm and
:math:`C = 2\tau n`.  The paper's step :math:`f - \frac{1}{2\sigma}\nabla F`
on the :math:`\frac1n`-scaled objective is the step :math:`\eta = 1/(2\sigma
n)` here, and its threshold :math:`\tau/\sigma` equals :math:`\eta C`.

Iteration
---------
The functional gradient of :math:`F` in :math:`\mathcal H_m` is
:math:`\sum_i r_i k_m(x_i,\cdot)` with :math:`r = \partial_z\ell(y, z)`
(``loss.jit.deriv``): its coefficients are ``r`` in every block.  One
proximal-gradient step from a point :math:`(v, b_v)` is

.. math::
    w_m = v_m - \eta r, \qquad
    \alpha_m^+ = w_m\,\frac{\mathrm{prox}(\|w_m\|_{K_m} \mid \tilde g_{\eta C})}{\|w_m\|_{K_m}},
    \qquad b^+ = b_v - \frac{\eta}{\omega}\mathbf 1^\top r,

using :math:`\eta\,\tilde g_C = \tilde g_{\eta C}` (the regularizer's
``prox`` kernel is called with :math:`C' = \eta C`).  For ``l1`` this is the
generalized soft-thresholding :math:`\hat S_{\eta C}` of the paper.  With
:math:`\mu > 0` the prox of :math:`\eta(\tilde g_C(x) + \mu x^2)` is
:math:`\mathrm{prox}(x/c \mid \tilde g_{\eta C/c})` with :math:`c = 1 + 2\eta\mu`.

The bias is unregularized; it is measured with the metric
:math:`\omega b^2`, :math:`\omega = N/\lambda_{\max}(\sum_m K_m)`, so that the
direction of the constant (eigenvalue ``N`` of :math:`\mathbf 1\mathbf 1^\top`)
does not dictate the step length.  The gradient of :math:`F` in this metric
is Lipschitz with

.. math::
    L = \sup|\partial_z^2\ell| \cdot \lambda_{\max}\Big(\sum_m K_m
        + \omega^{-1}\mathbf 1\mathbf 1^\top\Big),

the first factor being ``loss.deriv_lipschitz()`` and the second a power
iteration on the :math:`N\times N` sum, times a safety factor.

Every step is checked with the sufficient-decrease test of the smooth part
(Beck & Teboulle 2009), which costs :math:`O(MN)` because
:math:`u_m = K_m\alpha_m` is carried along:

.. math::
    F(x^+) \le F(v) + \langle\nabla F(v), x^+ - v\rangle + \tfrac L2\|x^+ - v\|^2,
    \quad \langle\nabla F(v), x^+ - v\rangle = r^\top(z^+ - z_v).

If it fails, :math:`L` is multiplied by ``backtrack``.  ``step`` chooses
the rule:

* ``adaptive`` (default): start from the bound and try :math:`L\cdot`
  ``shrink`` before every step (back-tracking that may also decrease,
  Scheinberg, Goldfarb & Bai 2014).  A failed trial needs no new product
  with the bank, and the curvature on the active kernels is often far below
  the bound.
* ``lipschitz``: the bound, fixed; the test only guards against an
  under-estimated :math:`\lambda_{\max}`.
* ``backtracking``: monotone back-tracking from the curvature at the start
  (also used whenever ``deriv_lipschitz()`` is infinite).

Acceleration (FISTA, Beck & Teboulle 2009) is on by default
(``accelerated``); ``accelerated: false`` is the paper's plain iteration.
The momentum is reset when :math:`\langle v - x^+, x^+ - x\rangle > 0`
(gradient restart of O'Donoghue & Candès 2015; ``restart: gradient``).

Cost and screening
------------------
With :math:`u_m` carried along, the extrapolation and the block norms
:math:`\|w_m\|_{K_m}^2 = w_m^\top(u_{v,m} - \eta K_m r)` cost :math:`O(N)`
per block, so an iteration reads each Gram matrix at most once, for
:math:`K_m r` (``blocks.matvecs_subset``, parallel over kernels).

A block whose point :math:`v_m` is zero is skipped when it provably stays
zero: with a reference vector ``q`` whose norm :math:`\|q\|_{K_m}` was
computed exactly earlier,

.. math::
    \|r\|_{K_m} \le \|q\|_{K_m} + \sqrt{\|K_m\|_F}\,\min(\|r - q\|_2, \|r + q\|_2)
        =: B_m,

and if :math:`\mathrm{prox}(\eta B_m \mid \tilde g_{\eta C}) = 0` then, the prox
being non-decreasing, :math:`\alpha_m^+ = 0` without computing
:math:`K_m r`.  References are the gradient ``r`` of the last iteration
that computed the block and the dual point of the last gap check.  Only
sparse regularizers (``l1``, ``elasticnet`` with ``lam < 1``) ever skip a
block.

Duality gap
-----------
Every ``gap_every`` iterations (and at the end) the current iterate is
certified the way of ``spicy`` (SpicyMKL §6.1): the bias is replaced by
:math:`b^\star = \arg\min_b \sum_i\ell(y_i, f_i + b)` (a scalar Newton;
this only lowers the primal objective), the dual point is
:math:`\rho = -\partial_z\ell(y, f + b^\star)`, which then lies inside the
domain of the loss conjugate and has :math:`\mathbf 1^\top\rho = 0` up to
rounding (the rest is removed by the projection onto the zero sum in the
box, :func:`~mklkit.engines.common.centre_dual`), and
:meth:`Certificate.at <mklkit.engines.common.Certificate.at>` scales it and
assembles the gap.  Its block norms are computed exactly except for blocks whose
bound :math:`B_m` already gives :math:`\tilde g_C^*(B_m) = 0` inside the
conjugate's domain (then the exact norm gives the same dual value).  The
primal objective :math:`P(\alpha, b^\star)` is recomputed from an exact
:math:`K_m\alpha_m` in the same read of the bank.  With :math:`\mu > 0`
the dual uses the conjugate of :math:`\tilde g_C(x) + \mu x^2`,
:math:`h^*(y) = x^\star y - \tilde g_C(x^\star) - \mu x^{\star2}` with
:math:`x^\star = \mathrm{prox}(y/(2\mu) \mid \tilde g_{C/(2\mu)})`, whose domain is
unbounded; objective, dual and gap then all refer to the problem with the
:math:`\mu` term.
"""

from __future__ import annotations

from typing import ClassVar

from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult
from . import common
from .base import COMMON_PARAMS, Engine, Requires, Run
from .capabilities import ARRAY_BANK, FACTOR_BANK, SMOOTH_PRIMAL, needs
from .proximal_loop import ProximalRun
from .proximal_passes import lipschitz_estimate, power_iteration

__all__ = ["Proximal", "PROXIMAL_ENGINES", "lipschitz_estimate", "power_iteration"]


class Proximal(Engine):
    r"""Generalized iterative soft-thresholding with FISTA (Mosci et al. 2008).

    Solves the primal for any loss with ``smooth_primal`` (squared,
    logistic, plugin losses such as ``huber``) and any regularizer, through
    its block prox.  ``max_iter`` counts proximal-gradient steps.

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop (SpicyMKL §6.1).
    max_iter : int
        Maximum number of proximal-gradient steps.
    step : {"lipschitz", "backtracking"}
        Start from the Lipschitz bound ``deriv_lipschitz() * lambda_max`` or
        from the curvature at the start point; either way :math:`L` grows by
        ``backtrack`` whenever the sufficient-decrease test fails.
    accelerated : bool
        FISTA momentum (the paper's plain iteration when False).
    restart : {"gradient", "none"}
        Adaptive momentum restart (O'Donoghue & Candès 2015).
    mu : float
        Weight of the :math:`\mu\|f\|^2` term of Remark 1 (included in the
        objective, the dual and the gap).
    gap_every : int
        Iterations between duality-gap checks.
    backtrack : float
        Factor by which :math:`L` grows when the test fails.
    max_backtrack : int
        Failed tests in a row after which the solve is declared stalled.
    safety : float
        Factor applied to the power-iteration estimate of :math:`\lambda_{\max}`.
    power_iter : int
        Maximum number of power iterations.
    screening : bool
        Skip zero blocks that provably stay zero.
    """

    name: ClassVar[str] = "proximal"
    description: ClassVar[str] = (
        "proximal gradient (generalized iterative soft-thresholding, Mosci et al. 2008) "
        "with FISTA acceleration and adaptive restart; any loss with a differentiable primal"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 20000, "maximum number of proximal-gradient steps", type=int, low=1),
        Param(
            "step",
            "adaptive",
            "step size 1/L: 'lipschitz' keeps the bound deriv_lipschitz*lambda_max, "
            "'backtracking' starts from the curvature at the start point, 'adaptive' "
            "starts from the bound and tries L*shrink before every step; all grow L "
            "when the sufficient-decrease test fails",
            type=str,
            choices=("lipschitz", "backtracking", "adaptive"),
        ),
        Param(
            "shrink",
            0.5,
            "with step 'adaptive': factor applied to L before every step",
            low=0.0,
            high=1.0,
            low_open=True,
        ),
        Param("accelerated", True, "FISTA momentum (false: the paper's plain iteration)", type=bool),
        Param(
            "restart",
            "gradient",
            "adaptive momentum restart (O'Donoghue & Candes)",
            type=str,
            choices=("gradient", "none"),
        ),
        Param("mu", 0.0, "weight of the strictly convex term mu*||f||^2 (Remark 1)", low=0.0),
        Param("gap_every", 10, "iterations between duality-gap checks", type=int, low=1),
        Param(
            "backtrack",
            2.0,
            "factor by which L grows when the sufficient-decrease test fails",
            low=1.0,
            low_open=True,
            high=100.0,
        ),
        Param("max_backtrack", 60, "failed sufficient-decrease tests in a row before 'stalled'", type=int, low=1),
        Param("safety", 1.02, "factor applied to the power-iteration estimate of lambda_max", low=1.0, high=10.0),
        Param("power_iter", 100, "maximum number of power iterations for lambda_max", type=int, low=1),
        Param("screening", True, "skip zero blocks that provably stay zero", type=bool),
    )

    requires: ClassVar[Requires] = Requires(
        loss=(
            needs(SMOOTH_PRIMAL, why="the proximal-gradient method steps along the gradient of the loss; use spicy"),
        ),
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(
            needs(
                ARRAY_BANK,
                FACTOR_BANK,
                why="the proximal-gradient engine reads the kernels as one array or through their factors",
            ),
        ),
        sample_weight=True,  # the loss enters through SampleLoss only
    )
    representations: ClassVar[tuple[str, ...]] = ("array", "factor")

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Accelerated proximal gradient (the class docstring); a ``warm_start``'s α and b
        start the solve."""
        return ProximalRun(self, problem, run, warm_start).run_loop()


PROXIMAL_ENGINES = (Proximal,)
