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
derivatives ``env_grad``/``env_hess``), summed over the active kernels
:math:`M_+ = \{m: \mathrm{prox}(\|v_m\|) > 0\}` only.  The details (start,
line search, Levenberg–Marquardt ridge, inexact inner solves, γ schedule,
duality gap) are in ``docs/engines.md``.

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

import logging
import math
import time
from typing import Any, ClassVar

import numba
import numpy as np
import scipy.linalg
from threadpoolctl import ThreadpoolController

from .._kernels import spicy as kspicy
from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult, Status
from . import common
from .base import COMMON_PARAMS, Callback, Engine

__all__ = ["Spicy", "BUILTIN_ENGINES", "initial_dual"]

logger = logging.getLogger(__name__)

METHODS = ("auto", "one_step", "iterative")

#: BLAS threads during a solve (``None``: leave the BLAS library as it is).
#: The jitted loops keep their worker threads spinning for a while after each
#: parallel region, and a multi-threaded factorization next to them
#: oversubscribes the cores: on two busy cores a 1000 x 1000 Cholesky took
#: 1.5 s with two BLAS threads and 0.04 s with one, a 166 x 166 one up to
#: 0.5 s against 0.1 ms.
BLAS_THREADS: int | None = 1

_THREADPOOLS = ThreadpoolController()


def initial_dual(lower: np.ndarray, upper: np.ndarray, bias: bool) -> np.ndarray:
    r"""A strictly feasible dual start.

    ``lower``/``upper`` bound the domain of :math:`\ell^*(y_i, u)` in
    :math:`u = -\rho_i`, so :math:`\rho_i \in (-upper_i, -lower_i)`.  Every
    coordinate follows the same monotone path :math:`\rho_i(\theta)`,
    :math:`\theta \in (0, 1)`, through the interior of its interval (linear
    on a bounded interval, rational on a half-line, ``tan`` on the real
    line); with a bias, :math:`\theta` is chosen by bisection so that
    :math:`\mathbf 1^\top\rho = 0`, otherwise :math:`\theta = 1/2`.

    For the logistic loss this gives the class-balanced point
    :math:`\rho_i = y_i N_{-y_i}/N` (the dual of α = 0 with the optimal
    bias); for the squared loss :math:`\rho = 0`.

    Raises
    ------
    ValueError
        When no strictly interior point with :math:`\mathbf 1^\top\rho = 0`
        exists (e.g. a classification loss with one class only).
    """
    a = -np.asarray(upper, dtype=np.float64)
    b = -np.asarray(lower, dtype=np.float64)
    if np.any(~(a < b)):
        raise ValueError("the domain of the loss conjugate has an empty interior")
    fa, fb = np.isfinite(a), np.isfinite(b)

    def point(theta: float) -> np.ndarray:
        out = np.empty_like(a)
        both = fa & fb
        out[both] = a[both] + theta * (b[both] - a[both])
        lo_only = fa & ~fb
        out[lo_only] = a[lo_only] + theta / (1.0 - theta)
        hi_only = ~fa & fb
        out[hi_only] = b[hi_only] - (1.0 - theta) / theta
        free = ~fa & ~fb
        out[free] = math.tan(math.pi * (theta - 0.5))
        return out

    if not bias:
        return point(0.5)
    lo_t, hi_t = 1e-12, 1.0 - 1e-12
    if not (np.sum(point(lo_t)) < 0.0 < np.sum(point(hi_t))):
        raise ValueError(
            "no dual point strictly inside the loss conjugate's domain satisfies "
            "sum(rho) = 0 (are both classes present?)")
    for _ in range(200):
        mid = 0.5 * (lo_t + hi_t)
        s = float(np.sum(point(mid)))
        if s == 0.0:
            lo_t = hi_t = mid
            break
        if s < 0.0:
            lo_t = mid
        else:
            hi_t = mid
        if hi_t - lo_t <= 1e-15:
            break
    rho = _centre(point(0.5 * (lo_t + hi_t)), a, b)
    if np.any(~((a < rho) & (rho < b))):
        raise ValueError("could not place a centred dual point inside the loss conjugate's domain")
    return rho


def _centre(rho: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""``rho`` shifted onto :math:`\mathbf 1^\top\rho = 0` without leaving the box :math:`(a, b)`.

    Newton steps keep the sum at zero up to rounding, which the shift
    removes.  Subtracting the mean from every coordinate can push one that
    has converged to the boundary of the loss conjugate's domain (it gets
    within 1e-19 of it on badly scaled kernels) outside, where the conjugate
    is infinite.  So the sum is spread evenly over the coordinates that stay
    strictly inside (all of them, normally); ``rho`` is returned as it is
    when none can take it.
    """
    total = float(np.sum(rho))
    free = np.ones(rho.size, dtype=bool)
    while total != 0.0 and np.any(free):
        out = rho.copy()
        out[free] -= total / np.count_nonzero(free)
        leave = free & ~((a < out) & (out < b))
        if not np.any(leave):
            return out
        free &= ~leave
    return rho


def _newton_direction(
    H: np.ndarray, g: np.ndarray, bias: bool
) -> tuple[np.ndarray, float, str]:
    r"""Solve the (equality-constrained) Newton system.

    Cholesky of :math:`H`; if :math:`H` is not numerically positive definite,
    a ridge :math:`\tau I` growing from :math:`10^{-12}\max_i H_{ii}`, and as
    a last resort a least-squares solve of the full KKT matrix.

    Returns
    -------
    delta : ndarray (N,)
    nu : float
        Multiplier of :math:`\mathbf 1^\top\rho = 0` (``nan`` without a bias).
    method : str
        ``"cholesky"``, ``"ridge"`` or ``"lstsq"``.
    """
    N = g.size
    ones = np.ones(N)
    scale = max(float(np.max(np.abs(np.diag(H)))), 1e-300)
    method = "cholesky"
    for k in range(6):
        Hk = H
        if k > 0:
            Hk = H + (scale * 1e-12 * 100.0 ** (k - 1)) * np.eye(N)
            method = "ridge"
        try:
            cf = scipy.linalg.cho_factor(Hk, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            continue
        x1 = scipy.linalg.cho_solve(cf, -g, check_finite=False)
        if not bias:
            if np.all(np.isfinite(x1)):
                return x1, math.nan, method
            continue
        x2 = scipy.linalg.cho_solve(cf, ones, check_finite=False)
        den = float(np.sum(x2))
        if den > 0.0 and np.all(np.isfinite(x1)) and np.all(np.isfinite(x2)):
            nu = float(np.sum(x1)) / den
            return x1 - nu * x2, nu, method
    if bias:
        A = np.zeros((N + 1, N + 1))
        A[:N, :N] = H
        A[:N, N] = 1.0
        A[N, :N] = 1.0
        rhs = np.concatenate([-g, [0.0]])
        sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
        return sol[:N], float(sol[N]), "lstsq"
    return np.linalg.lstsq(H, -g, rcond=None)[0], math.nan, "lstsq"


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
        Param("method", "auto",
              "'iterative' (augmented Lagrangian, §3-4.2), 'one_step' (§4.3, smooth "
              "conjugates only) or 'auto' (one-step exactly when it applies)",
              type=str, choices=METHODS),
        Param("armijo", 1e-4, "sufficient-decrease constant of the Armijo back-tracking (§3.5.1)",
              low=0.0, high=0.5, low_open=True, high_open=True),
        Param("backtrack", 0.5, "factor by which a rejected step is shrunk",
              low=0.0, high=1.0, low_open=True, high_open=True),
        Param("max_backtrack", 60, "maximum number of step shrinkings per Newton step",
              type=int, low=1),
        Param("boundary", 0.995,
              "largest fraction of the distance to the boundary of the loss conjugate's "
              "domain that a first trial step may cover",
              low=0.0, high=1.0, low_open=True, high_open=True),
        Param("gamma0", None,
              "first proximity parameter of the iterative method (null: 10/C)",
              low=0.0, low_open=True, nullable=True),
        Param("gamma_factor", 10.0,
              "growth factor of the proximity parameters per outer iteration", low=1.0),
        Param("gamma_max_factor", 1e4,
              "the proximity parameter stops growing at gamma_max_factor * gamma0", low=1.0),
        Param("gamma_bias", 1.0,
              "proximity parameter of the bias relative to that of alpha",
              low=0.0, low_open=True),
        Param("max_newton", 50, "maximum number of Newton steps per inner problem",
              type=int, low=1),
        Param("inner_tol", 0.1,
              "inexact inner solves: gradient norm relative to the implied primal update",
              low=0.0, low_open=True),
    )
    supports_warm_start: ClassVar[bool] = True
    representations: ClassVar[tuple[str, ...]] = ("array", "sharded", "factor")

    # -- capability ----------------------------------------------------------
    def uses_one_step(self, problem: Problem) -> bool:
        """Whether :meth:`solve` runs the one-step method on ``problem``."""
        smooth = problem.loss.smooth_conjugate and problem.regularizer.smooth_conjugate
        if self.method == "one_step":
            return True
        return self.method == "auto" and smooth

    def supports(self, problem: Problem) -> str | None:
        """``None`` when the loss has a smooth conjugate or a constrained form.

        With ``method = "one_step"`` both conjugates must be smooth.
        """
        loss, reg = problem.loss, problem.regularizer
        if (why := common.not_separable(reg)) is not None:
            return why
        if not loss.smooth_conjugate and loss.constrained is None:
            return (f"the loss {loss.describe()} has neither a smooth conjugate "
                    "(smooth_conjugate = True) nor the constrained form of SpicyMKL "
                    "eq. 33 (constrained = ConstrainedConjugate(...)); one of them is needed")
        if self.method == "one_step":
            bad = []
            if not reg.smooth_conjugate:
                bad.append(f"the regularizer {reg.describe()} has a non-smooth conjugate")
            if not loss.smooth_conjugate:
                bad.append(f"the loss {loss.describe()} has a constrained conjugate")
            if bad:
                return ("method 'one_step' (§4.3) needs smooth conjugates, but "
                        + " and ".join(bad) + "; use method 'iterative' or 'auto'")
        return None

    # -- solve ---------------------------------------------------------------
    def solve(
        self,
        problem: Problem,
        callback: Callback | None = None,
        warm_start: SolveResult | None = None,
    ) -> SolveResult:
        """Solve ``problem`` (:meth:`Engine.solve`; the class docstring gives the method).

        A ``warm_start``'s α, b and dual point start the solve.
        """
        self.check_supported(problem)
        if warm_start is not None:
            _check_warm_start(problem, warm_start)
        t0 = time.perf_counter()
        zero = common.zero_solution(problem)
        if zero.optimal(float(self.tol)):
            return common.zero_result(problem, zero, engine=self.name, t0=t0)
        runner = (_OneStep if self.uses_one_step(problem) else _Iterative)(
            self, problem, callback, warm_start, zero)
        if BLAS_THREADS is not None:
            with _THREADPOOLS.limit(limits=BLAS_THREADS, user_api="blas"):
                return runner.run()
        return runner.run()


def _check_warm_start(problem: Problem, ws: SolveResult) -> None:
    M, N = problem.n_kernels, problem.n_samples
    alpha = np.asarray(ws.alpha)
    if alpha.shape != (M, N):
        raise ValueError(
            f"warm_start.alpha has shape {alpha.shape}; this problem needs ({M}, {N}) "
            "(a result on the same kernels and training points)")
    if ws.dual is not None and np.asarray(ws.dual).shape != (N,):
        raise ValueError(
            f"warm_start.dual has shape {np.asarray(ws.dual).shape}; this problem needs ({N},)")
    if not (np.all(np.isfinite(alpha)) and math.isfinite(float(ws.bias))):
        raise ValueError("warm_start has non-finite alpha or bias")


class _OneStep:
    """State of one run of the one-step method."""

    def __init__(self, engine: Spicy, problem: Problem, callback: Callback | None,
                 warm_start: SolveResult | None, zero: common.ZeroSolution) -> None:
        self.engine = engine
        self.warm_start = warm_start
        self.zero = zero
        self.problem = problem
        self.callback = callback
        self.bank = problem.bank
        self.y = problem.y
        self.C = float(problem.C)
        self.bias = bool(problem.bias)
        self.lk = problem.loss.kernels
        self.rk = problem.regularizer.kernels
        self.pl = problem.loss.param_vector
        self.pr = problem.regularizer.param_vector
        self.lower = common.as_vector(self.lk.conj_lower(self.y, self.pl))
        self.upper = common.as_vector(self.lk.conj_upper(self.y, self.pl))
        self.loss = _SmoothLoss(problem, self.lower, self.upper)
        n = self.y.size
        self.row_block = max(8, -(-n // (2 * numba.get_num_threads())))

    def reg(self, fn: Any, x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(common.as_vector(x), self.C, self.pr), dtype=np.float64)

    def start_scale(self, rho: np.ndarray, norms: np.ndarray) -> float:
        r"""The best :math:`s = 2^{-k}` (k = 0..60) for the start :math:`s\rho_0`.

        :math:`F(s\rho_0)` is convex in ``s`` and costs O(N + M) to evaluate
        (the block norms scale with ``s``); shrinking towards 0 also moves
        the start away from where a fast-growing conjugate overflows.  When
        every value is infinite, 1 is returned and the solve reports a
        numerical error.
        """
        if not np.any(rho != 0.0):
            return 1.0
        best, best_s = math.inf, 1.0
        for k in range(61):
            s = 0.5 ** k
            val = self.loss.value(s * rho) + float(np.sum(self.reg(self.rk.conj, s * norms)))
            if math.isfinite(val) and val < best:
                best, best_s = val, s
            elif math.isfinite(best):
                break
        return best_s

    # -------------------------------------------------------------------------
    def run(self) -> SolveResult:
        eng = self.engine
        tol = float(eng.tol)
        max_iter = int(eng.max_iter)
        t0 = time.perf_counter()
        bank, y = self.bank, self.y
        N = y.size

        rho = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is not None and ws.dual is not None:
            # the warm dual point, projected into the closed domain; a convex
            # combination with the strictly interior start stays strictly inside
            lo, hi = -self.upper, -self.lower
            cand = np.clip(np.asarray(ws.dual, dtype=np.float64), lo, hi)
            if self.bias:
                cand = common.project_sum_box(cand, lo, hi)
            rho = 0.999 * cand + 0.001 * rho
            if self.bias:
                rho = _centre(rho, lo, hi)
        KR = bank.matvecs(rho)
        sq = KR @ rho
        norms = np.sqrt(np.maximum(sq, 0.0))
        scale = self.start_scale(rho, norms)
        if scale != 1.0:
            rho *= scale
            KR *= scale
            sq *= scale * scale
            norms *= scale

        history: list[dict[str, Any]] = []
        status: Status | None = None
        message = ""
        it = 0
        nu = math.nan
        step_info: dict[str, Any] = {}
        b = 0.0
        coef = np.zeros(norms.size)
        alpha_norms = np.zeros(norms.size)
        P = D = gap = math.nan
        inc = common.Incumbents(self.zero, norms.size, N)

        while True:
            # ---- evaluate the current dual point and its primal recovery ----
            G = self.reg(self.rk.conj, norms)
            G1 = self.reg(self.rk.conj_grad, norms)
            G2 = self.reg(self.rk.conj_hess, norms)
            pos = norms > 0.0
            coef = np.zeros(norms.size)
            coef[pos] = G1[pos] / norms[pos]          # alpha_m = coef_m * rho
            alpha_norms = np.where(pos, G1, 0.0)      # ||alpha_m||_{K_m} = G'(n_m)
            prim = np.flatnonzero(coef > 0.0)
            f = coef[prim] @ KR[prim] if prim.size else np.zeros(N)
            Lc = self.loss.value(rho)
            F = Lc + float(np.sum(G))
            zc = np.asarray(self.lk.conj_grad(y, common.as_vector(-rho), self.pl))
            if self.bias:
                b0 = nu if math.isfinite(nu) else float(np.mean(zc - f))
                b = common.optimal_bias(self.problem.loss, y, f, b0)
            P = common.loss_value(self.problem.loss, y, f + b) + common.regularizer_value(
                self.problem.regularizer, alpha_norms, self.C)
            D, rho_f, _ = common.projected_dual_objective(self.problem, rho, norms=norms)
            gap = common.relative_gap(P, D)
            finite = math.isfinite(P) and math.isfinite(D) and math.isfinite(F)
            inc.offer_primal(P, it, alpha=coef[:, None] * rho[None, :], bias=b,
                             norms=alpha_norms.copy())
            inc.offer_dual(D, it, rho=rho_f)

            if it > 0:
                rec = {
                    "iteration": it,
                    "objective": P,
                    "dual_objective": D,
                    "gap": gap,
                    "n_active": int(prim.size),
                    "time_s": time.perf_counter() - t0,
                    **step_info,
                    "bias": b,
                }
                history.append(rec)
                logger.debug("spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d step=%.3g",
                             it, P, D, gap, prim.size, step_info.get("step_size", math.nan))
                stop = bool(self.callback(rec)) if self.callback is not None else False
            else:
                stop = False

            if not finite:
                status = Status.NUMERICAL_ERROR
                message = (f"spicy: non-finite objective after {it} Newton steps "
                           f"(primal {P!r}, dual {D!r}, Newton objective {F!r})")
                break
            if min(gap, inc.gap) <= tol:
                status = Status.CONVERGED
                message = (f"spicy: converged, relative duality gap {min(gap, inc.gap):.3e} <= "
                           f"tol {tol:g} after {it} Newton steps")
                break
            if stop:
                status = Status.STOPPED
                message = f"spicy: stopped by the callback after {it} Newton steps (gap {gap:.3e})"
                break
            if it >= max_iter:
                status = Status.MAX_ITER
                message = (f"spicy: reached max_iter={max_iter} Newton steps with relative "
                           f"duality gap {gap:.3e} > tol {tol:g}")
                break

            # ---- Newton direction: gradient (49), Hessian (50), active set ----
            g = -zc + f
            t = np.zeros(norms.size)
            s = coef.copy()
            zero = ~pos & np.isfinite(G2)
            s[zero] = np.maximum(G2[zero], 0.0)       # lim G'(n)/n as n -> 0
            t[pos] = (G2[pos] - coef[pos]) / (norms[pos] ** 2)
            hidx = np.flatnonzero((s != 0.0) | (t != 0.0)).astype(np.int64)
            H = np.diag(np.asarray(self.lk.conj_hess(y, common.as_vector(-rho), self.pl),
                                   dtype=np.float64))
            if hidx.size:
                bank.accumulate_hessian(H, hidx, np.ascontiguousarray(s[hidx]),
                                        np.ascontiguousarray(KR[hidx]),
                                        np.ascontiguousarray(t[hidx]), self.row_block)
            if not (np.all(np.isfinite(H)) and np.all(np.isfinite(g))):
                status = Status.NUMERICAL_ERROR
                message = f"spicy: non-finite gradient or Hessian at Newton step {it + 1}"
                break
            delta, nu_new, method = _newton_direction(H, g, self.bias)
            slope = float(g @ delta)
            if not (math.isfinite(slope) and slope < 0.0):
                # not a descent direction (rounding): projected steepest descent
                delta = -(g - np.mean(g)) if self.bias else -g
                slope = float(g @ delta)
                method = "gradient"
            decrement = math.sqrt(max(-slope, 0.0))
            if slope >= 0.0:
                status = Status.STALLED
                message = (f"spicy: no descent direction at Newton step {it + 1} "
                           f"(relative duality gap {gap:.3e} > tol {tol:g})")
                break

            # ---- Armijo back-tracking (§3.5.1) ----
            KD, bq, eq = bank.direction_forms(common.as_vector(delta), KR)
            n_full = np.sqrt(np.maximum(sq + 2.0 * bq + eq, 0.0))
            cand = self.reg(self.rk.conj_grad, np.maximum(norms, n_full)) > 0.0
            const = float(np.sum(G[~cand]))
            c = min(1.0, eng.boundary * self.loss.max_step(rho, delta))
            accepted = False
            n_bt = 0
            Ft = math.inf
            for n_bt in range(eng.max_backtrack + 1):
                if c <= 0.0:
                    break
                rt = rho + c * delta
                Lt = self.loss.value(rt)
                if math.isfinite(Lt):
                    nt = np.sqrt(np.maximum(sq[cand] + c * (2.0 * bq[cand] + c * eq[cand]), 0.0))
                    Ft = Lt + float(np.sum(self.reg(self.rk.conj, nt))) + const
                    if Ft <= F + eng.armijo * c * slope:
                        accepted = True
                        break
                c *= eng.backtrack
            if not accepted:
                status = Status.STALLED
                message = (f"spicy: line search failed at Newton step {it + 1} "
                           f"(Newton decrement {decrement:.3e}; relative duality gap "
                           f"{gap:.3e} > tol {tol:g})")
                break

            rho = rho + c * delta
            KR += c * KD
            if self.bias:
                rho = _centre(rho, -self.upper, -self.lower)
            sq = KR @ rho
            norms = np.sqrt(np.maximum(sq, 0.0))
            nu = nu_new
            it += 1
            step_info = {
                "step_size": c,
                "newton_decrement": decrement,
                "n_backtracks": n_bt,
                "n_candidates": int(np.sum(cand)),
                "solver": method,
                "multiplier": nu,
            }

        return common.incumbent_result(self.problem, inc, engine=eng.name, status=status,
                                       message=message, iterations=it, history=history, t0=t0,
                                       C_max=self.zero.C_max, unit="Newton step", stacklevel=5)




# ---------------------------------------------------------------------------
# Loss terms of the inner objective
# ---------------------------------------------------------------------------
class _SmoothLoss:
    r""":math:`\sum_i\ell^*(y_i, -\rho_i)` for a loss with a smooth conjugate (§3.3).

    Newton with back-tracking keeps :math:`-\rho` inside the domain because
    the conjugate's gradient is unbounded at a finite boundary.
    """

    constrained = False

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        self.y = problem.y
        self.lk = problem.loss.kernels
        self.p = problem.loss.param_vector
        self.lower, self.upper = lower, upper

    def set_gamma(self, gamma: float) -> None:
        """The smooth conjugate does not depend on γ."""

    def begin(self, rho: np.ndarray) -> None:
        """Nothing to prepare."""

    def value(self, rho: np.ndarray, c: float = 0.0) -> float:
        u = -rho
        if np.any(u < self.lower) or np.any(u > self.upper):
            return math.inf
        val = float(np.sum(self.lk.conj(self.y, common.as_vector(u), self.p)))
        return val if not math.isnan(val) else math.inf

    def derivs(self, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Gradient in ρ (twice: full and reduced, equal here), Hessian diagonal, 0."""
        u = common.as_vector(-rho)
        g = -np.asarray(self.lk.conj_grad(self.y, u, self.p), dtype=np.float64)
        d = np.asarray(self.lk.conj_hess(self.y, u, self.p), dtype=np.float64)
        return g, g, d, 0.0

    def aux_direction(self, delta: np.ndarray) -> float:
        return 0.0

    def accept(self, c: float) -> None:
        """Nothing to keep between Newton steps."""

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        """Largest c with -(rho + c delta) inside the closed domain of the conjugate."""
        u, du = -rho, -delta
        c = math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            dn = (du < 0) & np.isfinite(self.lower)
            if np.any(dn):
                c = min(c, float(np.min((self.lower[dn] - u[dn]) / du[dn])))
            up = (du > 0) & np.isfinite(self.upper)
            if np.any(up):
                c = min(c, float(np.min((self.upper[up] - u[up]) / du[up])))
        return c

    def ridge(self, g: np.ndarray) -> np.ndarray | None:
        return None

    def bend(self, rho: np.ndarray, delta: np.ndarray, boundary: float) -> np.ndarray | None:
        r"""``delta`` with each coordinate cut to ``boundary`` times its distance to the
        domain boundary (``None`` when no coordinate would leave it)."""
        u, du = -rho, -delta
        room = np.full(u.size, np.inf)
        dn = du < 0
        room[dn] = (self.lower[dn] - u[dn]) / du[dn]
        up = du > 0
        room[up] = (self.upper[up] - u[up]) / du[up]
        if not np.any(room < 1.0 / boundary):
            return None
        return delta * np.minimum(1.0, boundary * room)

    def update_multipliers(self, rho: np.ndarray) -> None:
        """A smooth conjugate has no constraints."""

    def pending_change(self, rho: np.ndarray) -> float:
        return 0.0

    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        """Nothing changes during an inner solve."""

    def multipliers_copy(self) -> Any:
        return None

    def set_multipliers(self, xi: Any) -> None:
        """A smooth conjugate has no multipliers."""


class _ConstrainedLoss:
    r"""The loss terms of eq. (41) for a loss in the constrained form of eq. (33).

    Per sample, with :math:`w = (u, \tilde u)` and :math:`u = -\rho_i`,

    .. math::
        f_i(w) = \ell_0^*(y_i, w) + \frac1{2\gamma}\sum_j \max(0, \xi_{ij} + \gamma h_j(y_i, w))^2 .

    Newton's method runs on :math:`(\rho, \tilde u)` jointly; the auxiliary
    variables couple only with their own :math:`\rho_i`, so they are
    eliminated from every Newton system by the per-sample Schur complement
    :math:`a_i - c_i^\top E_i^{-1} c_i` of the Hessian
    :math:`\begin{pmatrix} a_i & c_i^\top \\ c_i & E_i\end{pmatrix}` in
    :math:`(u, \tilde u)`; the system stays :math:`N \times N`.  :math:`c_i`
    lies in the range of :math:`E_i` (the block matrix is positive
    semidefinite), so a tiny ridge on :math:`E_i` suffices.  Where
    :math:`E_i` is singular while the gradient in :math:`\tilde u_i` is not
    zero (no constraint active in some direction, e.g. at the start), the
    auxiliary variables of those samples are first minimized out
    (:meth:`minimize_aux`).
    """

    constrained = True

    def __init__(self, problem: Problem, lower: np.ndarray, upper: np.ndarray) -> None:
        loss = problem.loss
        self.y = problem.y
        self.cc = loss.constrained
        self.p = loss.param_vector
        self.N = self.y.size
        self.B = int(loss.n_cons)
        self.Bp = int(loss.n_aux)
        self.W = 1 + self.Bp
        self.xi = np.zeros((self.N, self.B))
        self.ut = np.zeros((self.N, self.Bp))
        self.dut = np.zeros((self.N, self.Bp))
        self.gamma = 1.0
        width = np.asarray(upper, dtype=np.float64) - np.asarray(lower, dtype=np.float64)
        self.width = np.where(np.isfinite(width) & (width > 0.0), width, np.inf)
        self._E = self._c = self._gu = None

    def set_gamma(self, gamma: float) -> None:
        self.gamma = float(gamma)

    # -- per-sample penalized function (rows: a subset of samples) ---------------
    def _f(self, u: np.ndarray, ut: np.ndarray, xi: np.ndarray, gamma: float,
           rows: np.ndarray | None = None, lin: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
        cc, p = self.cc, self.p
        y = self.y if rows is None else np.ascontiguousarray(self.y[rows])
        n = y.size
        u = common.as_vector(u)
        ut = np.ascontiguousarray(ut, dtype=np.float64).reshape(n, self.Bp)
        f = np.asarray(cc.l0(y, u, ut, p), dtype=np.float64)
        h = np.asarray(cc.cons(y, u, ut, p), dtype=np.float64).reshape(n, self.B)
        sp = np.maximum(xi + gamma * h, 0.0)
        f = f + (0.5 / gamma) * np.sum(sp * sp, axis=1)
        if lin is not None:
            f = f + lin[:, 0] * u + (np.sum(lin[:, 1:] * ut, axis=1) if self.Bp else 0.0)
        return f, sp

    def _d(self, u: np.ndarray, ut: np.ndarray, sp: np.ndarray, gamma: float,
           rows: np.ndarray | None = None, lin: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gradient (n, W) and generalized Hessian (n, W, W) in w, and the constraint gradients."""
        cc, p = self.cc, self.p
        B, W = self.B, self.W
        y = self.y if rows is None else np.ascontiguousarray(self.y[rows])
        n = y.size
        u = common.as_vector(u)
        ut = np.ascontiguousarray(ut, dtype=np.float64).reshape(n, self.Bp)
        g = np.array(cc.l0_grad(y, u, ut, p), dtype=np.float64).reshape(n, W)
        H = np.array(cc.l0_hess(y, u, ut, p), dtype=np.float64).reshape(n, W, W)
        J = np.asarray(cc.cons_grad(y, u, ut, p), dtype=np.float64).reshape(n, B, W)
        Hh = np.asarray(cc.cons_hess(y, u, ut, p), dtype=np.float64).reshape(n, B, W, W)
        act = (sp > 0.0).astype(np.float64)
        g += np.einsum("nb,nbw->nw", sp, J)
        H += gamma * np.einsum("nb,nbv,nbw->nvw", act, J, J)
        H += np.einsum("nb,nbvw->nvw", sp, Hh)
        if lin is not None:
            g += lin
        return g, H, J

    def _minimize(self, w: np.ndarray, first: int, xi: np.ndarray, gamma: float,
                  rows: np.ndarray | None = None, lin: np.ndarray | None = None,
                  max_iter: int = 50) -> np.ndarray:
        r"""Minimize :math:`\sum_i f_i(w_i)` over the coordinates ``first:`` of ``w``.

        A semismooth Newton method vectorized over the samples ``rows``,
        with per-sample Armijo back-tracking on the samples still moving.
        Where the generalized Hessian block is singular (no constraint
        active in some direction) the curvature :math:`\gamma\nabla h_j\nabla h_j^\top`
        of the inactive constraints is added, as if they were active (a
        majorizing model), and an accepted unit step is extended by doubling
        while the value keeps decreasing.  Returns the new ``w``.
        """
        w = np.array(w, dtype=np.float64)
        n = w.shape[0]
        rows = np.arange(self.N) if rows is None else np.asarray(rows)
        n_free = self.W - first
        eye = np.eye(n_free)
        live = np.arange(n)                      # positions in w still moving
        f, sp = self._f(w[:, 0], w[:, 1:], xi, gamma, rows, lin)
        for _ in range(max_iter):
            if live.size == 0:
                break
            r = rows[live]
            ln = None if lin is None else lin[live]
            wl = w[live]
            g, H, J = self._d(wl[:, 0], wl[:, 1:], sp[live], gamma, r, ln)
            gf = g[:, first:]
            Ef = H[:, first:, first:]
            todo = np.max(np.abs(gf), axis=1) > 1e-12 * (1.0 + np.max(np.abs(g), axis=1))
            live, wl, gf, Ef, J = live[todo], wl[todo], gf[todo], Ef[todo], J[todo]
            if live.size == 0:
                break
            r = rows[live]
            ln = None if lin is None else lin[live]
            xl = xi[live]
            big = 1.0 + gamma + np.max(np.abs(np.diagonal(Ef, axis1=1, axis2=2)), axis=1)
            mineig = Ef[:, 0, 0] if n_free == 1 else np.linalg.eigvalsh(Ef)[:, 0]
            sing = mineig <= 1e-10 * big
            if np.any(sing):
                inact = (sp[live][sing] <= 0.0).astype(np.float64)
                Jf = J[sing][:, :, first:]
                Ef = Ef.copy()
                Ef[sing] += gamma * np.einsum("nb,nbv,nbw->nvw", inact, Jf, Jf)
                Es = Ef[sing]
                mineig = Es[:, 0, 0] if n_free == 1 else np.linalg.eigvalsh(Es)[:, 0]
                still = np.flatnonzero(sing)[mineig <= 1e-10 * big[sing]]
                Ef[still] += gamma * eye
            d = -np.linalg.solve(Ef + (1e-12 * big)[:, None, None] * eye, gf[..., None])[..., 0]
            slope = np.sum(gf * d, axis=1)
            f0 = f[live]
            t = np.ones(live.size)
            pend = np.arange(live.size)
            new_w = wl.copy()
            new_f = f0.copy()
            new_sp = sp[live].copy()
            unit = np.zeros(live.size, dtype=bool)
            for k in range(60):
                trial = wl[pend].copy()
                trial[:, first:] += t[pend, None] * d[pend]
                ft, spt = self._f(trial[:, 0], trial[:, 1:], xl[pend], gamma, r[pend],
                                  None if ln is None else ln[pend])
                good = np.isfinite(ft) & (ft <= f0[pend] + 1e-4 * t[pend] * slope[pend])
                gi = pend[good]
                new_w[gi], new_f[gi], new_sp[gi] = trial[good], ft[good], spt[good]
                if k == 0:
                    unit[gi] = True
                pend = pend[~good]
                if pend.size == 0:
                    break
                t[pend] *= 0.5
            grow = np.flatnonzero(unit & sing)
            tg = 1.0
            while grow.size and tg < 1e18:
                tg *= 2.0
                trial = wl[grow].copy()
                trial[:, first:] += tg * d[grow]
                ft, spt = self._f(trial[:, 0], trial[:, 1:], xl[grow], gamma, r[grow],
                                  None if ln is None else ln[grow])
                better = np.isfinite(ft) & (ft < new_f[grow])
                gi = grow[better]
                new_w[gi], new_f[gi], new_sp[gi] = trial[better], ft[better], spt[better]
                grow = gi
            moved = np.any(new_w != wl, axis=1)
            w[live], f[live], sp[live] = new_w, new_f, new_sp
            live = live[moved]
        return w

    # -- the inner-objective interface ---------------------------------------------
    def begin(self, rho: np.ndarray) -> None:
        """Minimize the auxiliary variables out for the current ρ, ξ and γ."""
        if self.Bp == 0:
            return
        w = np.empty((self.N, self.W))
        w[:, 0] = -rho
        w[:, 1:] = self.ut
        self.ut = np.ascontiguousarray(self._minimize(w, 1, self.xi, self.gamma)[:, 1:])

    def value(self, rho: np.ndarray, c: float = 0.0) -> float:
        ut = self.ut + c * self.dut if (self.Bp and c != 0.0) else self.ut
        f, _ = self._f(-np.asarray(rho, dtype=np.float64), ut, self.xi, self.gamma)
        val = float(np.sum(f))
        return val if math.isfinite(val) else math.inf

    def derivs(self, rho: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        r"""Gradient in ρ, the right-hand side of the reduced Newton system, the
        Schur-complement diagonal and :math:`\|\nabla_{\tilde u}\|^2`."""
        u = -np.asarray(rho, dtype=np.float64)
        _, sp = self._f(u, self.ut, self.xi, self.gamma)
        g, H, _ = self._d(u, self.ut, sp, self.gamma)
        a = H[:, 0, 0]
        if self.Bp == 0:
            return -g[:, 0], -g[:, 0], np.maximum(a, 0.0), 0.0
        gu = g[:, 1:]
        E = H[:, 1:, 1:]
        big = 1.0 + self.gamma + np.max(np.abs(np.diagonal(E, axis1=1, axis2=2)), axis=1)
        mineig = E[:, 0, 0] if self.Bp == 1 else np.linalg.eigvalsh(E)[:, 0]
        bad = np.flatnonzero((mineig <= 1e-10 * big)
                             & (np.max(np.abs(gu), axis=1) > 1e-12 * (1.0 + np.max(np.abs(g), axis=1))))
        if bad.size:
            # no curvature where the gradient points: minimize those auxiliaries out first
            w = np.empty((bad.size, self.W))
            w[:, 0] = u[bad]
            w[:, 1:] = self.ut[bad]
            self.ut[bad] = self._minimize(w, 1, self.xi[bad], self.gamma, rows=bad)[:, 1:]
            _, sp = self._f(u, self.ut, self.xi, self.gamma)
            g, H, _ = self._d(u, self.ut, sp, self.gamma)
            a, gu, E = H[:, 0, 0], g[:, 1:], H[:, 1:, 1:]
        c = H[:, 1:, 0]
        E = E + (1e-12 * big)[:, None, None] * np.eye(self.Bp)
        sol = np.linalg.solve(E, np.concatenate([c[..., None], gu[..., None]], axis=2))
        sens, eg = sol[..., 0], sol[..., 1]      # E^{-1} c, E^{-1} g_ut
        self._sens, self._eg, self._gu = sens, eg, gu
        d = a - np.sum(c * sens, axis=1)
        # rho-rows of the reduced system: -g_u + c'E^{-1}g_ut enters with u = -rho
        g_red = -g[:, 0] + np.sum(c * eg, axis=1)
        return -g[:, 0], g_red, np.maximum(d, 0.0), float(np.sum(gu * gu))

    def aux_direction(self, delta: np.ndarray) -> float:
        r"""Back-substitute :math:`\Delta\tilde u_i = E_i^{-1}(c_i\Delta\rho_i - g_{\tilde u,i})`;
        returns :math:`\nabla_{\tilde u}^\top\Delta\tilde u` (part of the slope)."""
        if self.Bp == 0:
            return 0.0
        self.dut = self._sens * delta[:, None] - self._eg
        return float(np.sum(self._gu * self.dut))

    def accept(self, c: float) -> None:
        if self.Bp:
            self.ut = self.ut + c * self.dut

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        return math.inf

    def bend(self, rho: np.ndarray, delta: np.ndarray, boundary: float) -> None:
        return None

    def ridge(self, g: np.ndarray) -> np.ndarray:
        r"""Per-sample Levenberg–Marquardt ridge :math:`|g_i|/w_i` (:math:`w_i`: width of the
        conjugate's domain): a sample on a linear piece of the conjugate moves
        at most about the width of its domain per Newton step.  ``inf`` where
        the domain is unbounded (the global ridge applies there)."""
        finite = np.isfinite(self.width)
        return np.where(finite, np.abs(g) / np.where(finite, self.width, 1.0), np.inf)

    def update_multipliers(self, rho: np.ndarray) -> None:
        r""":math:`\xi \leftarrow \max(0, \xi + \gamma h)` (eq. 40 with the sign of eq. 32)."""
        _, sp = self._f(-np.asarray(rho, dtype=np.float64), self.ut, self.xi, self.gamma)
        self.xi = sp

    def pending_change(self, rho: np.ndarray) -> float:
        r""":math:`\|\xi^+ - \xi\|^2` that the multiplier update would make at ρ."""
        _, sp = self._f(-np.asarray(rho, dtype=np.float64), self.ut, self.xi, self.gamma)
        return float(np.sum((sp - self.xi) ** 2))

    def snapshot(self) -> Any:
        return self.ut.copy()

    def restore(self, state: Any) -> None:
        self.ut = state.copy()

    def multipliers_copy(self) -> np.ndarray:
        return self.xi.copy()

    def set_multipliers(self, xi: np.ndarray) -> None:
        self.xi = xi.copy()

    def estimate_multipliers(self, z: np.ndarray, rho: np.ndarray) -> np.ndarray:
        r"""Multipliers ξ and a dual point consistent with the predictions ``z`` (warm starts).

        At a solution, :math:`u_i` maximizes :math:`z_iu - \ell^*(y_i, u)`, i.e.
        solves :math:`\min\{\ell_0^*(y_i, w) - z_iu : h(y_i, w) \le 0\}`, and ξ
        are its multipliers.  Each sample's small problem is solved by the
        same augmented-Lagrangian iteration (γ = 1, 10, ..., 10^8), vectorized
        over samples.  Sets ξ and the auxiliary variables; returns
        :math:`\rho = -u`.
        """
        lin = np.zeros((self.N, self.W))
        lin[:, 0] = -np.asarray(z, dtype=np.float64)
        w = np.zeros((self.N, self.W))
        w[:, 0] = -np.asarray(rho, dtype=np.float64)
        w[:, 1:] = self.ut
        xi = np.zeros((self.N, self.B))
        for k in range(9):
            gamma = 10.0 ** k
            w = self._minimize(w, 0, xi, gamma, lin=lin)
            _, sp = self._f(w[:, 0], w[:, 1:], xi, gamma)
            done = float(np.max(np.abs(sp - xi))) <= 1e-10 * (1.0 + float(np.max(np.abs(sp))))
            xi = sp
            if done and k >= 2:
                break
        self.xi = xi
        self.ut = np.ascontiguousarray(w[:, 1:])
        return -w[:, 0]


# ---------------------------------------------------------------------------
# The iterative method (§3-4.2)
# ---------------------------------------------------------------------------
#: Levenberg-Marquardt factor: the Newton system is H + mu I with
#: mu = _LM * ||grad||, so that directions where the generalized Hessian is
#: singular (no active kernel or constraint yet) get bounded steps, while
#: the ridge vanishes at the solution (superlinear convergence is kept).
_LM = 1e-3

#: Default first proximity parameter: gamma0 = GAMMA0_SCALE / C.  At the
#: solution alpha_m = (||alpha_m|| / g~'(||alpha_m||)) rho on active kernels,
#: so 1/C is the natural scale of gamma for unit-trace kernels; ten times
#: that saved an outer iteration on the §6.1 problems without costing
#: Newton steps (benchmarks/README.md).
GAMMA0_SCALE = 10.0

#: Outer iterations without a decrease of the best relative gap after which
#: the solve is declared stalled.
_STALL = 12

#: Rounding floor of the inner stopping test, relative to the size of the
#: terms that cancel in the gradient (about 64 ulps).
_FLOOR = 1.5e-14

#: A gap this many times the best one so far means the iteration lost its way
#: (rounding with a very large gamma): it goes back to the best point and
#: keeps gamma there.
_DIVERGED = 10.0


class _Iterative:
    """State of one run of the iterative (augmented-Lagrangian) method."""

    def __init__(self, engine: Spicy, problem: Problem, callback: Callback | None,
                 warm_start: SolveResult | None, zero: common.ZeroSolution) -> None:
        self.engine = engine
        self.problem = problem
        self.callback = callback
        self.warm_start = warm_start
        self.zero = zero
        self.bank = problem.bank
        self.y = problem.y
        self.C = float(problem.C)
        self.bias = bool(problem.bias)
        self.M, self.N = problem.n_kernels, problem.n_samples
        self.rk = problem.regularizer.kernels
        self.pr = problem.regularizer.param_vector
        lk, pl = problem.loss.kernels, problem.loss.param_vector
        self.lower = common.as_vector(lk.conj_lower(self.y, pl))
        self.upper = common.as_vector(lk.conj_upper(self.y, pl))
        if problem.loss.smooth_conjugate:
            self.loss: Any = _SmoothLoss(problem, self.lower, self.upper)
        else:
            self.loss = _ConstrainedLoss(problem, self.lower, self.upper)
        self.row_block = max(8, -(-self.N // (2 * numba.get_num_threads())))
        # sqrt(trace K_m) >= sqrt(lambda_max(K_m)) bounds ||d||_{K_m} / ||d|| (O(MN))
        self.sqrt_trace = np.sqrt(np.maximum(self.bank.trace(), 0.0))
        # primal state: the non-zero blocks S, their alpha_m, K_m alpha_m, alpha_m'K_m alpha_m
        self.S = np.zeros(0, dtype=np.int64)
        self.A = np.zeros((0, self.N))
        self.KA = np.zeros((0, self.N))
        self.aa = np.zeros(0)
        self.pos = np.full(self.M, -1, dtype=np.int64)
        self.z_kernel = np.zeros(self.N)
        self.b = 0.0

    # -- helpers ---------------------------------------------------------------
    def reg(self, fn: Any, x: np.ndarray, C: float) -> np.ndarray:
        return np.asarray(fn(common.as_vector(x), float(C), self.pr), dtype=np.float64)

    def set_alpha(self, S: np.ndarray, A: np.ndarray) -> None:
        """Install the non-zero blocks and their exact products (reads |S| kernels)."""
        self.S = np.ascontiguousarray(S, dtype=np.int64)
        self.A = np.ascontiguousarray(A, dtype=np.float64).reshape(self.S.size, self.N)
        if self.S.size:
            self.KA = self.bank.matvecs_rows(self.A, self.S)
        else:
            self.KA = np.zeros((0, self.N))
        self.aa = np.maximum(np.einsum("pn,pn->p", self.A, self.KA), 0.0)
        self.z_kernel = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
        self.pos = np.full(self.M, -1, dtype=np.int64)
        self.pos[self.S] = np.arange(self.S.size)

    def block_norms_full(self) -> np.ndarray:
        r""":math:`\|\alpha_m\|_{K_m}` for every kernel (zero outside the non-zero blocks)."""
        norms = np.zeros(self.M)
        if self.S.size:
            norms[self.S] = np.sqrt(self.aa)
        return norms

    def alpha_full(self) -> np.ndarray:
        alpha = np.zeros((self.M, self.N))
        if self.S.size:
            alpha[self.S] = self.A
        return alpha

    def kernel_part(self, rho: np.ndarray, KR: np.ndarray) -> dict[str, Any]:
        r"""Regularizer part of the inner objective at ρ (eqs. 26, 27, 47).

        Returns the block norms :math:`n_m = \|\alpha_m + \gamma\rho\|_{K_m}`
        (and squares), the envelope's derivatives, the active kernels with
        their rows :math:`K_m v_m`, the gradient and the envelope sum.
        """
        gamma = self.gamma
        Cg = gamma * self.C
        n2 = kspicy.env_forms(KR, rho, self.S, self.A, self.aa, gamma)
        n = np.sqrt(n2)
        e1 = self.reg(self.rk.env_grad, n, Cg)
        e2 = self.reg(self.rk.env_hess, n, Cg)
        env = self.reg(self.rk.env, n, Cg)
        pos_n = n > 0.0
        active = np.flatnonzero((e1 > 0.0) | (~pos_n & (e2 > 0.0))).astype(np.int64)
        w = np.zeros(self.M)
        w[pos_n] = e1[pos_n] / n[pos_n]
        Kv = gamma * KR[active]
        if self.S.size:
            ps = self.pos[active]
            has = ps >= 0
            if np.any(has):
                Kv[has] += self.KA[ps[has]]
        if active.size:
            grad = w[active] @ Kv
            gross = float(np.linalg.norm(np.abs(w[active]) @ np.abs(Kv)))
        else:
            grad, gross = np.zeros(self.N), 0.0
        return {"n2": n2, "n": n, "e1": e1, "e2": e2, "w": w, "active": active, "Kv": Kv,
                "grad": grad, "gross": gross, "env": float(np.sum(env)), "env_all": env}

    def hessian(self, q: dict[str, Any], dL: np.ndarray) -> np.ndarray:
        r"""Generalized Hessian of the inner objective (eq. 27, generalized)."""
        gamma = self.gamma
        H = np.diag(dL)
        if self.bias:
            H += self.gamma_b
        act = q["active"]
        if act.size:
            n, w, e2 = q["n"][act], q["w"][act], q["e2"][act]
            s = gamma * np.where(n > 0.0, w, e2)
            t = np.zeros(act.size)
            pos = n > 0.0
            t[pos] = gamma * (e2[pos] - w[pos]) / (n[pos] * n[pos])
            self.bank.accumulate_hessian(H, act, np.ascontiguousarray(s),
                                         np.ascontiguousarray(q["Kv"]),
                                         np.ascontiguousarray(t), self.row_block)
        return H

    @staticmethod
    def newton_direction(H: np.ndarray, g: np.ndarray,
                         ridge: np.ndarray | None) -> tuple[np.ndarray, str]:
        r"""Solve :math:`(H + \mathrm{diag}(\mu))\,d = -g` by Cholesky.

        :math:`\mu_i` is the loss part's per-sample ridge where it has one
        (:meth:`_ConstrainedLoss.ridge`), else ``_LM``:math:`\,\|g\|`; it grows
        a hundredfold whenever the factorization fails.
        """
        N = g.size
        scale = max(float(np.max(np.abs(np.diag(H)))), 1e-300)
        gnorm = float(np.linalg.norm(g))
        if ridge is None:
            mu = np.full(N, _LM * gnorm)
        else:
            mu = np.where(np.isfinite(ridge), ridge, _LM * gnorm)
        mu = mu + 1e-14 * scale
        for k in range(8):
            Hk = H.copy()
            Hk[np.diag_indices(N)] += mu
            try:
                cf = scipy.linalg.cho_factor(Hk, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                mu = np.maximum(mu * 100.0, 1e-12 * scale)
                continue
            d = scipy.linalg.cho_solve(cf, -g, check_finite=False)
            if np.all(np.isfinite(d)):
                return d, "cholesky" if k == 0 else "ridge"
            mu = np.maximum(mu * 100.0, 1e-12 * scale)
        return -g / scale, "gradient"

    # -- start -------------------------------------------------------------------
    def start(self) -> None:
        eng = self.engine
        self.gamma0 = float(eng.gamma0) if eng.gamma0 is not None else GAMMA0_SCALE / self.C
        self.gamma = self.gamma0
        self.gamma_b = float(eng.gamma_bias) * self.gamma
        self.gamma_cap = self.gamma0 * float(eng.gamma_max_factor)
        self.gamma_floor = self.gamma0 * 1e-3
        rho0 = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is None:
            # the zero solution (alpha = 0, the optimal offset, the dual point of the
            # loss derivative there and, for a constrained loss, the multipliers that
            # go with it): the exact solution at C_max, the start of every path.  A
            # cold dual start with xi = 0 puts the first inner minimizer about
            # |y - z| / gamma outside the conjugate's domain, which Newton's method
            # needs many steps to reach when gamma is small (large C).
            alpha = np.zeros((0, self.N))
            S = np.zeros(0, dtype=np.int64)
            b, dual = self.zero.bias, self.zero.rho
        else:
            alpha = np.asarray(ws.alpha, dtype=np.float64)
            S = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
            alpha = alpha[S]
            b, dual = float(ws.bias), ws.dual
        self.set_alpha(S, alpha)
        self.b = b if self.bias else 0.0
        rho = rho0
        if dual is not None:
            lo, hi = -self.upper, -self.lower
            cand = np.clip(np.asarray(dual, dtype=np.float64), lo, hi)
            if self.bias:
                cand = common.project_sum_box(cand, lo, hi)
            # a convex combination with the strictly interior start stays strictly inside
            rho = cand if self.loss.constrained else 0.999 * cand + 0.001 * rho0
        if self.loss.constrained:
            f = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
            rho_est = self.loss.estimate_multipliers(f + self.b, rho)
            if dual is None:
                rho = rho_est
        self.rho = np.ascontiguousarray(rho)
        self.KR = self.bank.matvecs(self.rho)

    # -- one inner problem ----------------------------------------------------
    def inner(self) -> dict[str, Any]:
        r"""Minimize the inner objective (eqs. 41, 47) by semismooth Newton with back-tracking.

        Stops when :math:`\|\nabla\varphi\| \le` ``inner_tol`` :math:`\cdot\|\Delta\|`, where
        :math:`\|\Delta\|^2 = \|z^+ - z\|^2 + \|\xi^+ - \xi\|^2` is the change of the
        predictions and multipliers that the update (38)-(40) would make at the
        current point; or at a rounding floor, after ``max_newton`` steps, or
        when the objective stops decreasing.
        """
        eng = self.engine
        gamma, gb = self.gamma, self.gamma_b
        Cg = gamma * self.C
        loss = self.loss
        loss.set_gamma(gamma)
        rho, KR = self.rho, self.KR
        loss.begin(rho)
        Lval = loss.value(rho)
        steps = backtracks = flat = 0
        status = "converged"
        solver = ""
        gnorm = math.nan
        g_start = math.inf
        q: dict[str, Any] = {}
        for k in range(eng.max_newton + 1):
            q = self.kernel_part(rho, KR)
            sr = float(np.sum(rho))
            sb = (self.b + gb * sr) if self.bias else 0.0
            gL, gR, dL, gu2 = loss.derivs(rho)
            if loss.constrained:
                Lval = loss.value(rho)          # derivs may have re-minimized the auxiliaries
            g = gL + q["grad"] + sb
            phi = Lval + (0.5 * sb * sb / gb if self.bias else 0.0) + q["env"] / gamma
            if not (math.isfinite(phi) and np.all(np.isfinite(g))):
                status = "non-finite"
                break
            gnorm = math.sqrt(float(g @ g) + gu2)
            if k == 0:
                g_start = gnorm
            # inexact solve: the gradient against the change of the predictions (and of
            # the multipliers) that the update would make:
            # z+ - z = sum_m K_m (alpha+_m - alpha_m) + (b+ - b) 1
            dz = q["grad"] - self.z_kernel + (gb * sr if self.bias else 0.0)
            d_primal = math.sqrt(float(dz @ dz) + loss.pending_change(rho))
            # rounding floor: the size of the terms that cancel in the gradient
            scale = (float(np.linalg.norm(gL)) + q["gross"] + abs(self.b) * math.sqrt(self.N)
                     + gb * float(np.sum(np.abs(rho))) * math.sqrt(self.N))
            thresh = max(eng.inner_tol * d_primal, _FLOOR * scale)
            if gnorm <= thresh:
                break
            if k > 0 and self.bound_gap(rho, KR, q) <= eng.tol:
                status = "gap reached"
                break
            if flat >= 2:
                status = "rounding"
                break
            if k == eng.max_newton:
                status = "max_newton"
                break
            H = self.hessian(q, dL)
            if not np.all(np.isfinite(H)):
                status = "non-finite"
                break
            g_rhs = gR + q["grad"] + sb
            delta, solver = self.newton_direction(H, g_rhs, loss.ridge(g_rhs))
            slope = float(g @ delta) + loss.aux_direction(delta)
            if not (math.isfinite(slope) and slope < 0.0):
                delta = -g_rhs
                slope = float(g @ delta) + loss.aux_direction(delta)
                solver = "gradient"
                if not slope < 0.0:
                    status = "no descent direction"
                    break
            # a bounded smooth conjugate: shorten only the coordinates that would
            # leave its domain, so one sample near the boundary does not stop
            # the whole step (kept when it is still a descent direction)
            bent = loss.bend(rho, delta, eng.boundary)
            if bent is not None:
                bslope = float(g @ bent)
                if bslope < 0.0:
                    delta, slope = bent, bslope
            # ---- Armijo back-tracking (§3.5.1) ----
            KD, bq, eq = self.bank.direction_forms(common.as_vector(delta), KR)
            pm = gamma * bq
            if self.S.size:
                pm[self.S] += self.KA @ delta
            n2 = q["n2"]
            n2_full = n2 + 2.0 * gamma * pm + gamma * gamma * eq
            nmax = np.sqrt(np.maximum(np.maximum(n2, n2_full), 0.0))
            cand = np.flatnonzero(self.reg(self.rk.env_grad, nmax, Cg) > 0.0)
            const = q["env"] - float(np.sum(q["env_all"][cand]))
            n2c, pmc, eqc = n2[cand], pm[cand], eq[cand]
            sd = float(np.sum(delta))
            c = 1.0
            ms = loss.max_step(rho, delta)
            if math.isfinite(ms):
                c = min(1.0, eng.boundary * ms)
            accepted = False
            pt = Lt = math.inf
            nbt = 0
            for nbt in range(eng.max_backtrack + 1):
                if c <= 0.0:
                    break
                Lt = loss.value(rho + c * delta, c)
                if math.isfinite(Lt):
                    nt = np.sqrt(np.maximum(n2c + c * (2.0 * gamma * pmc + c * gamma * gamma * eqc),
                                            0.0))
                    pt = Lt + (const + float(np.sum(self.reg(self.rk.env, nt, Cg)))) / gamma
                    if self.bias:
                        sbt = self.b + gb * (sr + c * sd)
                        pt += 0.5 * sbt * sbt / gb
                    rounding = 1e-14 * (abs(phi) + 1.0) if c == 1.0 else 0.0
                    if pt <= phi + eng.armijo * c * slope + rounding:
                        accepted = True
                        break
                c *= eng.backtrack
            backtracks += nbt
            logger.debug("spicy   newton %d: |grad| %.3e (stop at %.2e), step %.3g after %d "
                         "back-trackings, %d active, slope %.3e, %s", k, gnorm, thresh, c, nbt,
                         q["active"].size, slope, solver)
            if not accepted:
                status = "line search failed"
                break
            flat = flat + 1 if phi - pt <= 1e-15 * abs(phi) else 0
            rho = rho + c * delta
            KR += c * KD
            loss.accept(c)
            Lval = Lt
            steps += 1
        self.rho, self.KR = rho, KR
        failed = status != "converged" and not (gnorm <= 1e-2 * g_start)
        return {"q": q, "steps": steps, "backtracks": backtracks, "status": status,
                "grad_norm": gnorm, "solver": solver, "failed": failed}

    def bound_gap(self, rho: np.ndarray, KR: np.ndarray, q: dict[str, Any]) -> float:
        r"""An upper bound on the gap that an update at ρ would give, without a pass over the bank.

        The primal is evaluated where the update (38)-(40) would put it
        (:math:`z^+ = \sum_m K_m\,\mathrm{prox}(v_m) + b^+`, block norms
        ``env_grad``), with the best bias.  The dual point is projected as in
        §6.1, but its block norms are bounded instead of computed:
        :math:`\|\tilde\rho\|_{K_m} \le \|\rho\|_{K_m} + \sqrt{\mathrm{tr}\,K_m}\,\|\tilde\rho-\rho\|`
        (from the running products :math:`K_m\rho`).  Scaling by the bound
        keeps the point feasible and :math:`\tilde g^*_C` is non-decreasing, so
        the dual value is a lower bound of the dual at a feasible point.  Lets
        the last inner problem stop as soon as the requested gap is certain
        (checked exactly after the update).
        """
        problem = self.problem
        lo, hi = -self.upper, -self.lower
        rho_t = common.project_sum_box(rho, lo, hi) if self.bias else np.clip(rho, lo, hi)
        dn = float(np.linalg.norm(rho_t - rho))
        norms = np.sqrt(np.maximum(KR @ rho, 0.0)) + self.sqrt_trace * dn
        radius = float(problem.regularizer.conj_radius(self.C))
        scale = 1.0
        if math.isfinite(radius) and norms.size:
            scale = max(float(np.max(norms)) / radius, 1.0) * (1.0 + 1e-12)
        D = common.dual_objective(problem, rho_t / scale, norms=norms / scale)
        f = q["grad"]
        b = self.b + self.gamma_b * float(np.sum(rho)) if self.bias else 0.0
        if self.bias:
            b = common.optimal_bias(problem.loss, self.y, f, b)
        P = common.loss_value(problem.loss, self.y, f + b) + common.regularizer_value(
            problem.regularizer, q["e1"], self.C)
        gap = common.relative_gap(P, D)
        return gap if not math.isnan(gap) else math.inf

    def solve_inner(self) -> dict[str, Any]:
        """:meth:`inner`, retried from the same start with a smaller γ when it fails.

        An inner problem fails when Newton stops early (line search, step
        limit, rounding) before the gradient norm dropped a hundredfold;
        updating α, b and ξ from such a point can undo the progress made.  The proximal-point iteration converges for any γ, so
        γ is lowered (divided by ``gamma_factor``, at most three times) and the
        inner problem is solved again.
        """
        saved = (self.rho.copy(), self.KR.copy(), self.loss.snapshot())
        info = self.inner()
        tries = 0
        while info["failed"] and tries < 3 and self.gamma > self.gamma_floor:
            tries += 1
            self.rho, self.KR = saved[0].copy(), saved[1].copy()
            self.loss.restore(saved[2])
            self.gamma = max(self.gamma / float(self.engine.gamma_factor), self.gamma_floor)
            self.gamma_b = float(self.engine.gamma_bias) * self.gamma
            info = self.inner()
        info["retries"] = tries
        return info

    def snapshot(self, record: dict[str, Any]) -> dict[str, Any]:
        """The state after an outer iteration (to go back to, or to return)."""
        return {"S": self.S.copy(), "A": self.A.copy(), "b": self.b, "rho": self.rho.copy(),
                "loss": self.loss.snapshot(), "xi": self.loss.multipliers_copy(),
                "gamma": self.gamma, **record}

    def restore(self, best: dict[str, Any]) -> None:
        """Go back to a snapshot; one pass over the bank recomputes :math:`K_m\rho`."""
        self.set_alpha(best["S"], best["A"])
        self.b = best["b"]
        self.rho = best["rho"].copy()
        self.loss.restore(best["loss"])
        self.loss.set_multipliers(best["xi"])
        self.KR = self.bank.matvecs(self.rho)
        self.gamma = best["gamma"]
        self.gamma_b = float(self.engine.gamma_bias) * self.gamma

    # -- outer update, objectives ---------------------------------------------------
    def outer_update(self, q: dict[str, Any]) -> None:
        """eqs. (38)-(40): alpha by the block prox, b, xi."""
        gamma = self.gamma
        e1, w = q["e1"], q["w"]
        newS = np.flatnonzero(e1 > 0.0).astype(np.int64)
        V = np.empty((newS.size, self.N))
        V[:] = gamma * self.rho
        if self.S.size and newS.size:
            ps = self.pos[newS]
            has = ps >= 0
            V[has] += self.A[ps[has]]
        self.set_alpha(newS, w[newS, None] * V)
        if self.bias:
            self.b += self.gamma_b * float(np.sum(self.rho))
        self.loss.update_multipliers(self.rho)

    def objectives(self) -> tuple[float, float, float, np.ndarray, np.ndarray]:
        """Primal at (alpha, b*) and dual at the projected rho (§6.1); resyncs K_m rho.

        ``b*`` is the bias minimizing the primal for the current α
        (:func:`common.optimal_bias`, started at the augmented-Lagrangian b).
        """
        problem = self.problem
        lo, hi = -self.upper, -self.lower
        if self.bias:
            rho_t = common.project_sum_box(self.rho, lo, hi)
        else:
            rho_t = np.clip(self.rho, lo, hi)
        KR, norms = self.bank.matvecs_and_norms(common.as_vector(self.rho), common.as_vector(rho_t))
        self.KR = KR
        rho_t, norms = common.scale_into_radius(
            rho_t, norms, float(problem.regularizer.conj_radius(self.C)))
        D = common.dual_objective(problem, rho_t, norms=norms)
        f = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
        b = common.optimal_bias(problem.loss, self.y, f, self.b) if self.bias else 0.0
        xnorm = np.sqrt(self.aa)
        P = common.loss_value(problem.loss, self.y, f + b) + common.regularizer_value(
            problem.regularizer, xnorm, self.C)
        return P, D, b, rho_t, xnorm

    # -- main loop ---------------------------------------------------------------------
    def run(self) -> SolveResult:
        eng = self.engine
        tol = float(eng.tol)
        max_iter = int(eng.max_iter)
        t0 = time.perf_counter()
        self.start()
        history: list[dict[str, Any]] = []
        status: Status | None = None
        message = ""
        it = 0
        best_gap = math.inf
        best: dict[str, Any] | None = None
        stall = 0
        P = D = gap = math.nan
        b_out = self.b
        rho_t = self.rho
        norms = np.zeros(self.M)
        inc = common.Incumbents(self.zero, self.M, self.N)
        while True:
            if it >= max_iter:
                status = Status.MAX_ITER
                message = (f"spicy: reached max_iter={max_iter} outer iterations with relative "
                           f"duality gap {gap:.3e} > tol {tol:g}")
                break
            info = self.solve_inner()
            q = info["q"]
            if info["status"] == "non-finite" or not q:
                status = Status.NUMERICAL_ERROR
                message = (f"spicy: non-finite inner objective at outer iteration {it + 1} "
                           f"(gamma {self.gamma:.3g})")
                break
            if info["steps"] > 0:
                q = self.kernel_part(self.rho, self.KR)
            self.outer_update(q)
            it += 1
            P, D, b_out, rho_t, norms = self.objectives()
            gap = common.relative_gap(P, D)
            inc.offer_primal(P, it, alpha=self.alpha_full(), bias=b_out,
                             norms=self.block_norms_full())
            inc.offer_dual(D, it, rho=rho_t)
            rec = {
                "iteration": it,
                "objective": P,
                "dual_objective": D,
                "gap": gap,
                "n_active": int(self.S.size),
                "time_s": time.perf_counter() - t0,
                "gamma": self.gamma,
                "gamma_bias": self.gamma_b,
                "newton_steps": info["steps"],
                "n_backtracks": info["backtracks"],
                "inner_grad": info["grad_norm"],
                "inner_status": info["status"],
                "gamma_retries": info["retries"],
                "bias": b_out,
            }
            history.append(rec)
            logger.debug("spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d gamma=%.3g newton=%d %s",
                         it, P, D, gap, self.S.size, self.gamma, info["steps"], info["status"])
            if best is None or gap < best["gap"]:
                best = self.snapshot({"gap": gap, "P": P, "D": D, "b_out": b_out,
                                      "rho_t": rho_t, "it": it})
            elif gap > _DIVERGED * best["gap"] and gap > tol and not best.get("restored"):
                # lost its way: back to the best point (once), and gamma stays there
                best["restored"] = True
                self.restore(best)
                self.gamma_cap = self.gamma
                rec["restored"] = best["it"]
                logger.debug("spicy: gap %.3e > %g x best %.3e: back to iteration %d",
                             gap, _DIVERGED, best["gap"], best["it"])
            stop = bool(self.callback(rec)) if self.callback is not None else False
            if not math.isfinite(P) or math.isnan(D) or D == math.inf:
                # (D = -inf, a dual point outside the conjugate's domain, only makes the gap inf)
                status = Status.NUMERICAL_ERROR
                message = (f"spicy: non-finite objective after {it} outer iterations "
                           f"(primal {P!r}, dual {D!r})")
                break
            if min(gap, inc.gap) <= tol:
                status = Status.CONVERGED
                message = (f"spicy: converged, relative duality gap {min(gap, inc.gap):.3e} <= "
                           f"tol {tol:g} after {it} outer iterations")
                break
            if stop:
                status = Status.STOPPED
                message = f"spicy: stopped by the callback after {it} outer iterations (gap {gap:.3e})"
                break
            if gap < best_gap * (1.0 - 1e-3):
                best_gap, stall = gap, 0
            else:
                stall += 1
                if stall >= _STALL and self.gamma >= self.gamma_cap:
                    status = Status.STALLED
                    message = (f"spicy: no progress in {stall} outer iterations (relative duality "
                               f"gap {gap:.3e} > tol {tol:g}; last inner solve: {info['status']})")
                    break
            self.gamma = min(self.gamma * float(eng.gamma_factor), self.gamma_cap)
            self.gamma_b = float(eng.gamma_bias) * self.gamma

        return common.incumbent_result(self.problem, inc, engine=eng.name, status=status,
                                       message=message, iterations=it, history=history, t0=t0,
                                       C_max=self.zero.C_max, unit="outer iteration",
                                       stacklevel=5)


BUILTIN_ENGINES = (Spicy,)
