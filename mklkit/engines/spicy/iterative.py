r"""The iterative method of SpicyMKL (§3-4.2): an augmented-Lagrangian method on the dual.

Inner problems (eqs. 41, 47) minimized by a semismooth Newton method; see
the package docstring of :mod:`mklkit.engines.spicy` ("Iterative method")
and ``docs/engines.md``.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numba
import numpy as np
import scipy.linalg

from ..._jit import spicy as kspicy
from ...problem import Problem
from ...result import SolveResult, Status
from .. import common
from ..base import Algorithm, Engine, Run
from ..capabilities import SMOOTH_CONJUGATE
from .factor_newton import LowRankHessian, is_factored
from .factor_newton import newton_direction as low_rank_direction
from .loss_terms import _ConstrainedLoss, _SmoothLoss
from .start import initial_dual, warm_dual

__all__ = ["_Iterative", "GAMMA0_SCALE"]

logger = logging.getLogger(__name__)


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


class _Iterative(Algorithm):
    """State of one run of the iterative (augmented-Lagrangian) method."""

    def __init__(self, engine: Engine, problem: Problem, run: Run,
                 warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        run.unit = "outer iteration"
        self.lower, self.upper = self.conj_domain()
        if SMOOTH_CONJUGATE.holds(problem.loss):
            self.loss: Any = _SmoothLoss(problem, self.lower, self.upper)
        else:
            self.loss = _ConstrainedLoss(problem, self.lower, self.upper)
        self.row_block = max(8, -(-self.N // (2 * numba.get_num_threads())))
        self.factored = is_factored(self.bank)
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
        # the envelope's derivatives are prox and prox' (Moreau, eq. 23)
        e1 = self.reg_kernel(self.rk.prox, n, Cg)
        e2 = self.reg_kernel(self.rk.prox_deriv, n, Cg)
        env = self.reg_kernel(self.rk.env, n, Cg)
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

    def hessian(self, q: dict[str, Any], dL: np.ndarray, rho: np.ndarray) -> Any:
        r"""Generalized Hessian of the inner objective (eq. 27, generalized).

        An (N, N) array, or on a factor bank a :class:`LowRankHessian`
        (:math:`D + \sum_m L_mW_mL_m^\top + \gamma_b\mathbf 1\mathbf 1^\top` with
        :math:`v_m = \alpha_m + \gamma\rho`; no N x N matrix).
        """
        gamma = self.gamma
        act = q["active"]
        s = t = np.zeros(0)
        if act.size:
            n, w, e2 = q["n"][act], q["w"][act], q["e2"][act]
            s = gamma * np.where(n > 0.0, w, e2)
            t = np.zeros(act.size)
            pos = n > 0.0
            t[pos] = gamma * (e2[pos] - w[pos]) / (n[pos] * n[pos])
        if self.factored:
            V = np.empty((act.size, self.N))
            V[:] = gamma * rho
            if self.S.size and act.size:
                ps = self.pos[act]
                has = ps >= 0
                V[has] += self.A[ps[has]]
            return LowRankHessian(self.bank, dL, act, s, t, V,
                                  self.gamma_b if self.bias else 0.0)
        H = np.diag(dL)
        if self.bias:
            H += self.gamma_b
        if act.size:
            self.bank.accumulate_hessian(H, act, np.ascontiguousarray(s),
                                         np.ascontiguousarray(q["Kv"]),
                                         np.ascontiguousarray(t), self.row_block)
        return H

    @staticmethod
    def newton_direction(H: Any, g: np.ndarray,
                         ridge: np.ndarray | None) -> tuple[np.ndarray, str]:
        r"""Solve :math:`(H + \mathrm{diag}(\mu))\,d = -g` by Cholesky (on a factor bank:
        Woodbury or CG, :mod:`~mklkit.engines.spicy.factor_newton`).

        :math:`\mu_i` is the loss part's per-sample ridge where it has one
        (:meth:`_ConstrainedLoss.ridge`), else ``_LM``:math:`\,\|g\|`, plus a
        rounding floor :math:`10^{-14}H_{ii}` relative to the coordinate's own
        diagonal entry; it grows a hundredfold (at least to :math:`10^{-12}H_{ii}`)
        whenever the factorization fails.  A floor relative to :math:`\max_i H_{ii}`
        would freeze every coordinate but the largest when the diagonal spans
        many orders of magnitude: the logistic conjugate's curvature
        :math:`1/(t(1-t))` reaches :math:`10^{40}` at samples far from the margin.
        """
        N = g.size
        low_rank = isinstance(H, LowRankHessian)
        diag = np.abs(H.diag if low_rank else np.diag(H))
        scale = max(float(np.max(diag)), 1e-300)
        gnorm = float(np.linalg.norm(g))
        if ridge is None:
            mu = np.full(N, _LM * gnorm)
        else:
            mu = np.where(np.isfinite(ridge), ridge, _LM * gnorm)
        # rounding floor per coordinate, relative to its own diagonal entry
        floor = np.where(diag > 0.0, diag, scale)
        mu = mu + 1e-14 * floor
        if low_rank:
            d, _, method = low_rank_direction(H, g, False, ridge=mu)
            return d, method
        for k in range(8):
            Hk = H.copy()
            Hk[np.diag_indices(N)] += mu
            try:
                cf = scipy.linalg.cho_factor(Hk, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                mu = np.maximum(mu * 100.0, 1e-12 * floor)
                continue
            d = scipy.linalg.cho_solve(cf, -g, check_finite=False)
            if np.all(np.isfinite(d)):
                return d, "cholesky" if k == 0 else "ridge"
            mu = np.maximum(mu * 100.0, 1e-12 * floor)
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
            cand = warm_dual(dual, self.lower, self.upper, self.bias)
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
            H = self.hessian(q, dL, rho)
            if not (H.finite if self.factored else np.all(np.isfinite(H))):
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
            cand = np.flatnonzero(self.reg_kernel(self.rk.prox, nmax, Cg) > 0.0)
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
                    pt = Lt + (const + float(np.sum(self.reg_kernel(self.rk.env, nt, Cg)))) / gamma
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
        # "gap reached": the update is certain to meet tol, a success however far Newton got
        failed = status not in ("converged", "gap reached") and not (gnorm <= 1e-2 * g_start)
        return {"q": q, "steps": steps, "backtracks": backtracks, "status": status,
                "grad_norm": gnorm, "solver": solver, "failed": failed}

    def bound_gap(self, rho: np.ndarray, KR: np.ndarray, q: dict[str, Any]) -> float:
        r"""An upper bound on the gap that an update at ρ would give, without a pass over the bank.

        The primal is evaluated where the update (38)-(40) would put it
        (:math:`z^+ = \sum_m K_m\,\mathrm{prox}(v_m) + b^+`, block norms
        ``prox``), with the best bias.  The dual point is projected as in
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
        rho_t = common.centre_dual(rho, lo, hi, self.bias)
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
            b = common.optimal_bias(problem.loss, self.y, f, b, weights=self.sl.w)
        P = common.loss_value(problem.loss, self.y, f + b, self.sl.w) + common.regularizer_value(
            problem.regularizer, q["e1"], self.C)
        gap = common.relative_gap(P, D)
        return gap if not math.isnan(gap) else math.inf

    def solve_inner(self) -> dict[str, Any]:
        """:meth:`inner`, retried from the same start with a smaller γ when it fails.

        An inner problem fails when Newton stops early (line search, step
        limit, rounding) before the gradient norm dropped a hundredfold
        (not when it stopped because its update meets ``tol``: "gap reached");
        updating α, b and ξ from such a point can undo the progress made.  The
        proximal-point iteration converges for any γ, so
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

    def objectives(self) -> common.Certificate:
        """Primal at (alpha, b*) and dual at the projected rho (§6.1); resyncs K_m rho.

        ``b*`` is the bias minimizing the primal for the current α
        (:func:`common.optimal_bias`, started at the augmented-Lagrangian b), in
        the certificate's ``extra`` as ``bias``.  The projection
        (:func:`common.centre_dual`) comes before the pass over the bank that
        gives :math:`K_m\rho` and the projected point's block norms, the scaling
        (:func:`common.scale_into_radius`) after it.
        """
        problem = self.problem
        rho_t = common.centre_dual(self.rho, -self.upper, -self.lower, self.bias)
        KR, norms = self.bank.matvecs_and_norms(common.as_vector(self.rho), common.as_vector(rho_t))
        self.KR = KR
        rho_t, norms = common.scale_into_radius(
            rho_t, norms, float(problem.regularizer.conj_radius(self.C)))
        D = common.dual_objective(problem, rho_t, norms=norms)
        f = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
        b = common.optimal_bias(problem.loss, self.y, f, self.b, weights=self.sl.w) if self.bias else 0.0
        xnorm = np.sqrt(self.aa)
        P = common.loss_value(problem.loss, self.y, f + b, self.sl.w) + common.regularizer_value(
            problem.regularizer, xnorm, self.C)
        return common.Certificate.of(P, D, rho_t, xnorm, bias=b)

    # -- main loop ---------------------------------------------------------------------
    def run_loop(self) -> SolveResult:
        eng, run = self.engine, self.run
        self.start()
        it = 0
        best_gap = math.inf
        best: dict[str, Any] | None = None
        stall = 0
        while True:
            info = self.solve_inner()
            q = info["q"]
            if info["status"] == "non-finite" or not q:
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite inner objective at outer "
                                                    f"iteration {it + 1} (gamma {self.gamma:.3g})")
                break
            if info["steps"] > 0:
                q = self.kernel_part(self.rho, self.KR)
            self.outer_update(q)
            it += 1
            cert = self.objectives()
            P, D, gap, b_out, rho_t = cert.primal, cert.dual, cert.gap, cert.extra["bias"], cert.rho
            run.offer(it, primal=P, alpha=self.alpha_full(), bias=b_out,
                      norms=self.block_norms_full(), dual=D, rho=rho_t)
            extra = {
                "gamma": self.gamma,
                "gamma_bias": self.gamma_b,
                "newton_steps": info["steps"],
                "n_backtracks": info["backtracks"],
                "inner_grad": info["grad_norm"],
                "inner_status": info["status"],
                "gamma_retries": info["retries"],
                "bias": b_out,
            }
            n_active = int(self.S.size)
            logger.debug("spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d gamma=%.3g newton=%d %s",
                         it, P, D, gap, self.S.size, self.gamma, info["steps"], info["status"])
            if best is None or gap < best["gap"]:
                best = self.snapshot({"gap": gap, "P": P, "D": D, "b_out": b_out,
                                      "rho_t": rho_t, "it": it})
            elif gap > _DIVERGED * best["gap"] and gap > run.tol and not best.get("restored"):
                # lost its way: back to the best point (once), and gamma stays there
                best["restored"] = True
                self.restore(best)
                self.gamma_cap = self.gamma
                extra["restored"] = best["it"]
                logger.debug("spicy: gap %.3e > %g x best %.3e: back to iteration %d",
                             gap, _DIVERGED, best["gap"], best["it"])
            run.record(it, P, D, gap, n_active, **extra)
            if not math.isfinite(P) or math.isnan(D) or D == math.inf:
                # (D = -inf, a dual point outside the conjugate's domain, only makes the gap inf)
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite objective (primal {P!r}, "
                                                    f"dual {D!r})")
                break
            stalled = None
            if gap < best_gap * (1.0 - 1e-3):
                best_gap, stall = gap, 0
            else:
                stall += 1
                if stall >= _STALL and self.gamma >= self.gamma_cap:
                    stalled = (f"no progress in {stall} outer iterations (last inner solve: "
                               f"{info['status']})")
            if run.check(it, gap, stalled=stalled):
                break
            self.gamma = min(self.gamma * float(eng.gamma_factor), self.gamma_cap)
            self.gamma_b = float(eng.gamma_bias) * self.gamma

        return run.result(it)

