r"""SpicyMKL engine (Suzuki & Tomioka 2011).

This module implements the *one-step* method of §4.3 for problems whose loss
and regularizer both have smooth conjugates (e.g. logistic or squared loss
with elastic-net (λ > 0), block q-norm (q > 1) or uniform regularization).
The iterative augmented-Lagrangian algorithm of §3–4.2, needed for the block
1-norm and for losses with constrained conjugates (hinge, ε-insensitive), is
not implemented yet; :meth:`Spicy.supports` says so.

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

from .._kernels import blocks
from .._kernels import spicy as kspicy
from ..components.base import Component
from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult, Status
from . import common
from .base import COMMON_PARAMS, Callback, Engine

__all__ = ["Spicy", "BUILTIN_ENGINES", "initial_dual"]

logger = logging.getLogger(__name__)


def _describe(component: Component) -> str:
    params = component.get_params()
    if not params:
        return component.name
    args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in params.items())
    return f"{component.name}({args})"


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
    rho = point(0.5 * (lo_t + hi_t))
    rho -= np.mean(rho)
    if np.any(~((a < rho) & (rho < b))):
        raise ValueError("could not place a centred dual point inside the loss conjugate's domain")
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
    r"""SpicyMKL: dual Newton solver of Suzuki & Tomioka (2011).

    Implemented: the one-step method of §4.3 for a loss and a regularizer
    with smooth conjugates (``loss.smooth_conjugate`` and
    ``regularizer.smooth_conjugate``).  ``max_iter`` counts Newton steps.

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop (§6.1).
    max_iter : int
        Maximum number of Newton steps.
    armijo : float
        Sufficient-decrease constant of the back-tracking line search.
    backtrack : float
        Factor by which a rejected step is shrunk.
    max_backtrack : int
        Maximum number of step shrinkings per Newton step.
    boundary : float
        Largest fraction of the distance to the boundary of the loss
        conjugate's domain that a first trial step may cover.
    """

    name: ClassVar[str] = "spicy"
    description: ClassVar[str] = (
        "SpicyMKL (Suzuki & Tomioka 2011) dual Newton method; one-step method "
        "(§4.3) for losses and regularizers with smooth conjugates"
    )
    params: ClassVar[tuple[Param, ...]] = COMMON_PARAMS + (
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
    )

    # -- capability ----------------------------------------------------------
    def supports(self, problem: Problem) -> str | None:
        """``None`` when both conjugates are smooth (one-step method), else why not."""
        loss, reg = problem.loss, problem.regularizer
        bad = []
        if not reg.smooth_conjugate:
            bad.append(f"the regularizer {_describe(reg)} has a non-smooth conjugate")
        if not loss.smooth_conjugate:
            bad.append(f"the loss {_describe(loss)} has a constrained conjugate")
        if not bad:
            return None
        return (
            "the iterative SpicyMKL for non-smooth regularizers (l1) and constrained "
            "losses (hinge, eps_insensitive) is not implemented yet; only the one-step "
            "method (§4.3) is, and " + " and ".join(bad) + "; use a smooth pair such as "
            "logistic + elasticnet(lam>0) or squared + lq(q>1)"
        )

    # -- solve ---------------------------------------------------------------
    def solve(self, problem: Problem, callback: Callback | None = None) -> SolveResult:
        """Solve ``problem`` with the one-step method (SpicyMKL §4.3).

        Raises
        ------
        ValueError
            When :meth:`supports` gives a reason (never for non-convergence).
        """
        reason = self.supports(problem)
        if reason is not None:
            raise ValueError(f"engine 'spicy' cannot solve this problem: {reason}")
        return _OneStep(self, problem, callback).run()


class _OneStep:
    """State of one run of the one-step method."""

    def __init__(self, engine: Spicy, problem: Problem, callback: Callback | None) -> None:
        self.engine = engine
        self.problem = problem
        self.callback = callback
        self.K = problem.K
        self.y = problem.y
        self.C = float(problem.C)
        self.bias = bool(problem.bias)
        self.lk = problem.loss.kernels
        self.rk = problem.regularizer.kernels
        self.pl = problem.loss.param_vector
        self.pr = problem.regularizer.param_vector
        self.lower = common.as_vector(self.lk.conj_lower(self.y, self.pl))
        self.upper = common.as_vector(self.lk.conj_upper(self.y, self.pl))
        n = self.y.size
        self.row_block = max(8, -(-n // (2 * numba.get_num_threads())))

    # loss conjugate at u = -rho -------------------------------------------
    def loss_conj(self, rho: np.ndarray) -> float:
        u = -rho
        if np.any(u < self.lower) or np.any(u > self.upper):
            return math.inf
        val = float(np.sum(self.lk.conj(self.y, u, self.pl)))
        return val if not math.isnan(val) else math.inf

    def reg(self, fn: Any, x: np.ndarray) -> np.ndarray:
        return np.asarray(fn(common.as_vector(x), self.C, self.pr), dtype=np.float64)

    def max_step(self, rho: np.ndarray, delta: np.ndarray) -> float:
        """Largest c with -(rho + c delta) inside the closed domain of the loss conjugate."""
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
            val = self.loss_conj(s * rho) + float(np.sum(self.reg(self.rk.conj, s * norms)))
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
        K, y = self.K, self.y
        N = y.size

        rho = initial_dual(self.lower, self.upper, self.bias)
        KR = blocks.matvecs(K, rho)
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
            Lc = self.loss_conj(rho)
            F = Lc + float(np.sum(G))
            zc = np.asarray(self.lk.conj_grad(y, common.as_vector(-rho), self.pl))
            if self.bias:
                b0 = nu if math.isfinite(nu) else float(np.mean(zc - f))
                b = common.optimal_bias(self.problem.loss, y, f, b0)
            P = common.loss_value(self.problem.loss, y, f + b) + common.regularizer_value(
                self.problem.regularizer, alpha_norms, self.C)
            D, _, _ = common.projected_dual_objective(self.problem, rho, norms=norms)
            gap = common.relative_gap(P, D)
            finite = math.isfinite(P) and math.isfinite(D) and math.isfinite(F)

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
                           f"(primal {P!r}, dual {D!r})")
                break
            if gap <= tol:
                status = Status.CONVERGED
                message = (f"spicy: converged, relative duality gap {gap:.3e} <= tol {tol:g} "
                           f"after {it} Newton steps ({prim.size} active kernels)")
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
                kspicy.accumulate_hessian(H, K, hidx, np.ascontiguousarray(s[hidx]),
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
            KD, bq, eq = kspicy.direction_forms(K, common.as_vector(delta), KR)
            n_full = np.sqrt(np.maximum(sq + 2.0 * bq + eq, 0.0))
            cand = self.reg(self.rk.conj_grad, np.maximum(norms, n_full)) > 0.0
            const = float(np.sum(G[~cand]))
            c = min(1.0, eng.boundary * self.max_step(rho, delta))
            accepted = False
            n_bt = 0
            Ft = math.inf
            for n_bt in range(eng.max_backtrack + 1):
                if c <= 0.0:
                    break
                rt = rho + c * delta
                Lt = self.loss_conj(rt)
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
                rho -= np.mean(rho)
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

        alpha = coef[:, None] * rho[None, :]
        return common.build_result(
            self.problem,
            engine=eng.name,
            status=status,
            alpha=alpha,
            bias=b,
            primal=P,
            dual=D,
            iterations=it,
            history=history,
            message=message,
            time_s=time.perf_counter() - t0,
            norms=alpha_norms,
            rho=rho,
            stacklevel=4,
        )


BUILTIN_ENGINES = (Spicy,)
