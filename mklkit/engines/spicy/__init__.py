r"""SpicyMKL engine (Suzuki & Tomioka 2011).

Two methods solve the MKL problem (SpicyMKL eq. 42 in representer form)

.. math::
    \min_{\alpha, b}\ \sum_i \ell\big(y_i, \textstyle\sum_m (K_m\alpha_m)_i + b\big)
        + \sum_m \tilde g_C(\|\alpha_m\|_{K_m})

for every loss and regularizer of the component contracts
(``components/base.py``):

* the **iterative method** (§3–4.2, Tables 1 and 2): proximal minimization
  in the primal, i.e. an augmented-Lagrangian method on the dual, whose
  inner problems are minimized by a semismooth Newton method.  It handles
  non-smooth regularizer conjugates (block 1-norm, elastic net with
  λ = 0) and losses with constrained conjugates (hinge, ε-insensitive and
  any plugin loss that gives the constrained form of eq. 33);
* the **one-step method** (§4.3): Newton's method on the dual (48) when
  both conjugates are smooth.

``method = "auto"`` (default) picks the one-step method exactly when it
applies (``loss.smooth_conjugate`` and ``regularizer.smooth_conjugate``).

Iterative method
----------------
With proximity parameters :math:`\gamma` (for α and for the multipliers ξ
of the loss constraints) and :math:`\gamma_b` (for b), increased
geometrically from one outer iteration to the next, every outer iteration
minimizes over ρ (and, for a constrained loss, the auxiliary variables
:math:`\tilde u` of eq. 33)

.. math::
    \varphi(\rho, \tilde u) = \sum_i \ell_0^*\big(y_i, (-\rho_i, \tilde u_i)\big)
      + \frac1{2\gamma}\sum_{i,j}\max\big(0,\ \xi_{ij} + \gamma h_j(y_i, (-\rho_i, \tilde u_i))\big)^2
      + \frac1{2\gamma_b}\Big(b + \gamma_b\sum_i\rho_i\Big)^2
      + \frac1\gamma\sum_m \widehat{\tilde g^*_{\gamma C}}\big(\|\alpha_m + \gamma\rho\|_{K_m}\big)

(eqs. 41 and 47; for a loss with a smooth conjugate the first two terms
are :math:`\sum_i\ell^*(y_i, -\rho_i)`), then updates (eqs. 38–40)

.. math::
    \alpha_m \leftarrow \mathrm{prox}(\alpha_m + \gamma\rho \mid \tilde g_{\gamma C}),\quad
    b \leftarrow b + \gamma_b\sum_i\rho_i,\quad
    \xi_{ij} \leftarrow \max\big(0, \xi_{ij} + \gamma h_j(y_i, (-\rho_i, \tilde u_i))\big).

The sign inside the constraint penalty is that of the standard augmented
Lagrangian for :math:`h_j \le 0`; it agrees with eq. (32) for the hinge loss
(:math:`\xi_i - \gamma(1 - y_i\rho_i) = \xi_i + \gamma h_1` with
:math:`h_1 = -1 - y_iu_i`).  Table 2 and eq. (41) print
:math:`\xi - \gamma h`, a sign slip.

The auxiliary variables are eliminated: :math:`\tilde u_i` minimizes
:math:`\varphi` for the given :math:`\rho_i` (a small per-sample Newton
solve), so Newton's method runs on :math:`\psi(\rho) = \min_{\tilde u}\varphi`
alone, whose generalized Hessian is the per-sample Schur complement; the
Newton system stays :math:`N \times N`.  The regularizer part has the
gradient :math:`\sum_m K_m\,\mathrm{prox}(v_m)` and the Hessian
:math:`\gamma\sum_{m\in M_+}[q_m K_m + (e_m - q_m)K_m\tilde v_m\tilde v_m^\top K_m]`
with :math:`v_m = \alpha_m + \gamma\rho`, :math:`q_m = \mathrm{prox}(\|v_m\|)/\|v_m\|`,
:math:`e_m = \mathrm{prox}'(\|v_m\|)` (eqs. 26–27, the envelope's
derivatives ``prox``/``prox_deriv`` by Moreau), summed over the active kernels
:math:`M_+ = \{m: \mathrm{prox}(\|v_m\|) > 0\}` only.  The details (start,
line search, Levenberg–Marquardt ridge, inexact inner solves, γ schedule,
duality gap) are in ``docs/engines.md``.

On a factor bank (:math:`K_m = L_mL_m^\top`) the Newton systems of both
methods are :math:`D + VV^\top` with :math:`V` of :math:`R_{act}` columns and are
solved by Woodbury or preconditioned CG without an N × N matrix
(:mod:`mklkit.engines.spicy.factor_newton`).

One-step method
---------------
The dual (48) is solved directly:

.. math::
    \min_{\rho:\ \mathbf 1^\top\rho = 0}\ F(\rho) = \sum_i \ell^*(y_i, -\rho_i)
        + \sum_m \tilde g_C^*(\|\rho\|_{K_m})

by Newton's method.  The gradient (49) and Hessian (50) of the regularizer
part are accumulated over the active kernels only (those with
:math:`\tilde g_C^{*\prime}(\|\rho\|_{K_m}) > 0`).  The equality constraint is
kept exactly: every Newton direction solves the KKT system

.. math::
    \begin{pmatrix} H & \mathbf 1 \\ \mathbf 1^\top & 0 \end{pmatrix}
    \begin{pmatrix} \Delta \\ \nu \end{pmatrix} =
    \begin{pmatrix} -\nabla F \\ 0 \end{pmatrix}

through one Cholesky factorization of :math:`H` (two solves, then the
scalar :math:`\nu`), instead of the paper's quadratic penalty
:math:`C_b(\mathbf 1^\top\rho)^2`.  The start is strictly feasible, so every
iterate is.  :math:`\nu` estimates the bias ``b`` (KKT condition of §4.3).

The step length comes from Armijo back-tracking (§3.5.1).  The first trial
step stops short of the boundary of the loss conjugate's domain
(``boundary`` times the distance), and trials with an infinite conjugate are
rejected.  One pass over the bank gives :math:`K_m\Delta` and the forms
:math:`\Delta^\top K_m\rho`, :math:`\Delta^\top K_m\Delta`, so every trial
norm :math:`\|\rho + c\Delta\|_{K_m}` costs O(1); by convexity of the norm,
only kernels with
:math:`\tilde g_C^{*\prime}(\max(\|\rho\|_{K_m}, \|\rho+\Delta\|_{K_m})) > 0`
can be active on the segment and are evaluated at trial points.

Primal recovery (§4.3): :math:`\alpha_m = \rho\,\tilde g_C^{*\prime}(n_m)/n_m`
with :math:`n_m = \|\rho\|_{K_m}` (zero for inactive kernels), so that
:math:`\|\alpha_m\|_{K_m} = \tilde g_C^{*\prime}(n_m)`; the bias is the
minimizer of the primal in ``b`` given α (a scalar Newton started at the
multiplier :math:`\nu`).  The solve stops when the relative duality gap
:math:`(P - D)/|P|` (§6.1) is at most ``tol``.
"""

from __future__ import annotations

from typing import ClassVar

from threadpoolctl import ThreadpoolController

from ...components.params import Param
from ...problem import Problem
from ...result import SolveResult
from .. import common
from ..base import COMMON_PARAMS, Engine, Requires, Run
from ..capabilities import CONSTRAINED_FORM, SMOOTH_CONJUGATE, SMOOTH_REG_CONJUGATE, needs
from .iterative import GAMMA0_SCALE, _Iterative
from .loss_terms import _ConstrainedLoss, _SmoothLoss  # noqa: F401 - re-exported
from .one_step import _OneStep
from .start import _centre, _newton_direction, initial_dual  # noqa: F401 - re-exported

__all__ = ["Spicy", "BUILTIN_ENGINES", "initial_dual", "METHODS", "BLAS_THREADS", "GAMMA0_SCALE"]

METHODS = ("auto", "one_step", "iterative")

#: BLAS threads during a solve (``None``: leave the BLAS library as it is).
#: The jitted loops keep their worker threads spinning for a while after each
#: parallel region, and a multi-threaded factorization next to them
#: oversubscribes the cores: on two busy cores a 1000 x 1000 Cholesky took
#: 1.5 s with two BLAS threads and 0.04 s with one, a 166 x 166 one up to
#: 0.5 s against 0.1 ms.
BLAS_THREADS: int | None = 1

_THREADPOOLS = ThreadpoolController()


class Spicy(Engine):
    r"""SpicyMKL: dual augmented-Lagrangian / Newton solver of Suzuki & Tomioka (2011).

    Solves every loss with a smooth conjugate or a constrained form (§3.4.2)
    with every block-norm regularizer: the iterative method of §3–4.2 in
    general, the one-step method of §4.3 when both conjugates are smooth
    (``method = "auto"``).  ``max_iter`` counts outer iterations of the
    iterative method and Newton steps of the one-step method.

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop (§6.1).
    max_iter : int
        Maximum number of outer iterations (iterative method) or Newton
        steps (one-step method).
    method : {"auto", "one_step", "iterative"}
        ``auto`` uses the one-step method when both conjugates are smooth.
    armijo : float
        Sufficient-decrease constant of the back-tracking line search.
    backtrack : float
        Factor by which a rejected step is shrunk.
    max_backtrack : int
        Maximum number of step shrinkings per Newton step.
    boundary : float
        Largest fraction of the distance to the boundary of the loss
        conjugate's domain that a first trial step may cover.
    gamma0 : float or None
        First proximity parameter γ of the iterative method; ``None`` (default)
        uses :math:`10/C` (:data:`GAMMA0_SCALE`), from the scale
        :math:`1/C` of :math:`\|\alpha_m\|_{K_m}/\|\rho\|_{K_m}`
        at the solution for unit-trace kernels.
    gamma_factor : float
        γ (and :math:`\gamma_b`) is multiplied by this after each outer iteration.
    gamma_max_factor : float
        γ stops growing at ``gamma_max_factor * gamma0``.
    gamma_bias : float
        :math:`\gamma_b / \gamma`, the proximity parameter of the bias relative to γ.
    max_newton : int
        Maximum number of Newton steps per inner problem.
    inner_tol : float
        Inexact inner solves: an inner problem is solved once
        :math:`\|\nabla\psi(\rho)\| \le` ``inner_tol`` times the size of the
        primal update it implies (scaled by :math:`1/\sqrt{\gamma}`; see
        ``docs/engines.md``).
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
            choices=METHODS,
        ),
        Param(
            "armijo",
            1e-4,
            "sufficient-decrease constant of the Armijo back-tracking (§3.5.1)",
            low=0.0,
            high=0.5,
            low_open=True,
            high_open=True,
        ),
        Param(
            "backtrack",
            0.5,
            "factor by which a rejected step is shrunk",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        Param("max_backtrack", 60, "maximum number of step shrinkings per Newton step", type=int, low=1),
        Param(
            "boundary",
            0.995,
            "largest fraction of the distance to the boundary of the loss conjugate's "
            "domain that a first trial step may cover",
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
        ),
        Param(
            "gamma0",
            None,
            "first proximity parameter of the iterative method (null: 10/C)",
            low=0.0,
            low_open=True,
            nullable=True,
        ),
        Param("gamma_factor", 10.0, "growth factor of the proximity parameters per outer iteration", low=1.0),
        Param("gamma_max_factor", 1e4, "the proximity parameter stops growing at gamma_max_factor * gamma0", low=1.0),
        Param("gamma_bias", 1.0, "proximity parameter of the bias relative to that of alpha", low=0.0, low_open=True),
        Param("max_newton", 50, "maximum number of Newton steps per inner problem", type=int, low=1),
        Param(
            "inner_tol",
            0.1,
            "inexact inner solves: gradient norm relative to the implied primal update",
            low=0.0,
            low_open=True,
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

    # -- capability ----------------------------------------------------------
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

    # -- solve ---------------------------------------------------------------
    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """The one-step or the iterative method (the class docstring); a ``warm_start``'s α,
        b and dual point start the solve."""
        runner = (_OneStep if self.uses_one_step(problem) else _Iterative)(self, problem, run, warm_start)
        if BLAS_THREADS is not None:
            with _THREADPOOLS.limit(limits=BLAS_THREADS, user_api="blas"):
                return runner.run_loop()
        return runner.run_loop()


_ONE_STEP_WHY = "method 'one_step' (§4.3) needs smooth conjugates; use method 'iterative' or 'auto'"
_ONE_STEP = Requires(
    loss=(needs(SMOOTH_CONJUGATE, why=_ONE_STEP_WHY),), regularizer=(needs(SMOOTH_REG_CONJUGATE, why=_ONE_STEP_WHY),)
)


BUILTIN_ENGINES = (Spicy,)
