"""The inner problem of SpicyMKL's iterative method (eqs. 41, 47) at a fixed primal state and
its semismooth Newton method (``docs/engines.md``, "Newton's method on the inner problem")."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..._jit import spicy as kspicy
from .. import common
from ..capabilities import SMOOTH_CONJUGATE
from .factor_newton import LowRankHessian
from .loss_terms import _ConstrainedLoss, _SmoothLoss
from .start import _newton_direction, _SpicyAlgorithm

logger = logging.getLogger("mklkit.engines.spicy.iterative")

#: Levenberg-Marquardt ridge LM_FACTOR * ||grad||: bounded steps where the Hessian is singular,
#: vanishing at the solution.
LM_FACTOR = 1e-3
#: Rounding floor of the inner stopping test, relative to the terms that cancel in the gradient.
_FLOOR = 1.5e-14


def levenberg_marquardt_direction(H: Any, g: np.ndarray, ridge: np.ndarray | None) -> tuple[np.ndarray, str]:
    r"""``(d, method)`` of :math:`(H + \mathrm{diag}(\mu))\,d = -g` (:func:`.start._newton_direction`):
    :math:`\mu` is the loss's per-sample ``ridge`` or ``LM_FACTOR`` :math:`\|g\|`, plus
    :math:`10^{-14}H_{ii}` of each coordinate's own diagonal, a hundredfold larger after each
    failed factorization."""
    diag = np.abs(H.diag if isinstance(H, LowRankHessian) else np.diag(H))
    scale = max(float(np.max(diag)), 1e-300)
    gnorm = float(np.linalg.norm(g))
    if ridge is None:
        damping = np.full(g.size, LM_FACTOR * gnorm)
    else:
        damping = np.where(np.isfinite(ridge), ridge, LM_FACTOR * gnorm)
    damping = damping + 1e-14 * np.where(diag > 0.0, diag, scale)
    d, _, method = _newton_direction(H, g, False, damping)
    return d, method


@dataclass
class _Newton:
    r"""Newton's method on one inner problem: the point and :math:`K_m\rho`, the loss part's value
    there and at the last trial, the counters, status, solver, gradient norms and threshold."""

    rho: np.ndarray
    KR: np.ndarray
    Lval: float
    Lt: float = math.inf
    steps: int = 0
    backtracks: int = 0
    flat: int = 0
    status: str = "converged"
    solver: str = ""
    gnorm: float = math.nan
    g_start: float = math.inf
    thresh: float = math.nan
    q: dict[str, Any] = field(default_factory=dict)


class _InnerPoint(NamedTuple):
    r"""The inner objective at a Newton iterate: kernel part, :math:`\mathbf 1^\top\rho`, bias
    term, the loss part's gradient (full and reduced), curvature and auxiliary gradient norm,
    the gradient and the value."""

    q: dict[str, Any]
    sr: float
    sb: float
    gL: np.ndarray
    gR: np.ndarray
    dL: np.ndarray
    gu2: float
    g: np.ndarray
    phi: float


class InnerProblem(_SpicyAlgorithm):
    """The primal state of the iterative method and the inner problem at it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        loss_terms = _SmoothLoss if SMOOTH_CONJUGATE.holds(self.problem.loss) else _ConstrainedLoss
        self.loss: Any = loss_terms(self.problem, self.lower, self.upper)
        # sqrt(trace K_m) >= sqrt(lambda_max(K_m)) bounds ||d||_{K_m} / ||d||
        self.sqrt_trace = np.sqrt(np.maximum(self.bank.trace(), 0.0))

    @property
    def gamma_b(self) -> float:
        """The proximity parameter of the bias, ``gamma_bias`` times γ."""
        return float(self.engine.gamma_bias) * self.gamma

    def set_alpha(self, S: np.ndarray, A: np.ndarray) -> None:
        r"""The non-zero blocks ``S``, their :math:`\alpha_m`, :math:`K_m\alpha_m`,
        :math:`\alpha_m^\top K_m\alpha_m` and :math:`\sum_m K_m\alpha_m` (reads |S| kernels)."""
        self.S = np.ascontiguousarray(S, dtype=np.int64)
        self.A = np.ascontiguousarray(A, dtype=np.float64).reshape(self.S.size, self.N)
        self.KA = self.bank.matvecs_rows(self.A, self.S) if self.S.size else np.zeros((0, self.N))
        self.aa = np.maximum(np.einsum("pn,pn->p", self.A, self.KA), 0.0)
        self.z_kernel = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
        self.pos = np.full(self.M, -1, dtype=np.int64)
        self.pos[self.S] = np.arange(self.S.size)

    def plus_alpha(self, idx: np.ndarray, X: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``X`` (a row per kernel of ``idx``) plus the ``rows`` (``A`` or ``KA``) of the non-zero blocks."""
        if self.S.size and idx.size:
            ps = self.pos[idx]
            has = ps >= 0
            X[has] += rows[ps[has]]
        return X

    def shifted(self, idx: np.ndarray, rho: np.ndarray) -> np.ndarray:
        r""":math:`\alpha_m + \gamma\rho` for the kernels ``idx``."""
        V = np.empty((idx.size, self.N))
        V[:] = self.gamma * rho
        return self.plus_alpha(idx, V, self.A)

    def kernel_part(self, rho: np.ndarray, KR: np.ndarray) -> dict[str, Any]:
        r"""The regularizer part at ρ (eqs. 26, 27, 47): the norms :math:`n_m = \|\alpha_m +
        \gamma\rho\|_{K_m}` (and squares), the envelope's derivatives (prox, prox', by Moreau), the
        active kernels with their :math:`K_mv_m`, the gradient and the envelope."""
        gamma = self.gamma
        Cg = gamma * self.C
        n2 = kspicy.env_forms(KR, rho, self.S, self.A, self.aa, gamma)
        n = np.sqrt(n2)
        e1 = self.reg_kernel(self.rk.prox, n, Cg)
        e2 = self.reg_kernel(self.rk.prox_deriv, n, Cg)
        env = self.reg_kernel(self.rk.env, n, Cg)
        pos_n = n > 0.0
        active = np.flatnonzero((e1 > 0.0) | (~pos_n & (e2 > 0.0))).astype(np.int64)
        w = np.zeros(self.M)
        w[pos_n] = e1[pos_n] / n[pos_n]
        Kv = self.plus_alpha(active, gamma * KR[active], self.KA)
        if active.size:
            grad = w[active] @ Kv
            gross = float(np.linalg.norm(np.abs(w[active]) @ np.abs(Kv)))
        else:
            grad, gross = np.zeros(self.N), 0.0
        env_sum = float(np.sum(env))
        return dict(
            n2=n2, n=n, e1=e1, e2=e2, w=w, active=active, Kv=Kv, grad=grad, gross=gross, env=env_sum, env_all=env
        )

    def hessian(self, q: dict[str, Any], dL: np.ndarray, rho: np.ndarray) -> tuple[Any, bool]:
        """The generalized Hessian (eq. 27) and whether it is finite."""
        gamma = self.gamma
        act = q["active"]
        s = t = np.zeros(0)
        if act.size:
            n, w, e2 = q["n"][act], q["w"][act], q["e2"][act]
            s = gamma * np.where(n > 0.0, w, e2)
            t = np.zeros(act.size)
            pos = n > 0.0
            t[pos] = gamma * (e2[pos] - w[pos]) / (n[pos] * n[pos])
        vecs = self.shifted(act, rho) if self.factored else None
        return self.newton_matrix(dL, act, s, t, q["Kv"], vecs, self.gamma_b if self.bias else 0.0)

    def inner(self) -> dict[str, Any]:
        r"""Semismooth Newton with back-tracking on the inner objective (eqs. 41, 47), inexact:
        :math:`\|\nabla\varphi\|` against the change the update (38)-(40) would make."""
        self.loss.set_gamma(self.gamma)
        self.loss.begin(self.rho)
        nw = _Newton(self.rho, self.KR, self.loss.value(self.rho))
        for k in range(self.engine.max_newton + 1):
            pt = self.inner_point(nw)
            if pt is None:
                nw.status = "non-finite"
                break
            nw.gnorm = math.sqrt(float(pt.g @ pt.g) + pt.gu2)
            if k == 0:
                nw.g_start = nw.gnorm
            stop = self.inner_stop(nw, pt, k)
            if stop is not None:
                nw.status = stop
                break
            found = self.inner_direction(nw, pt)
            if isinstance(found, str):
                nw.status = found
                break
            c, p_new, KD = self.inner_line_search(nw, pt, *found)
            if c is None:
                nw.status = "line search failed"
                break
            self.inner_move(nw, pt, c, found[0], KD, p_new)
        self.rho, self.KR = nw.rho, nw.KR
        # "gap reached": the update is certain to meet tol, a success however far Newton got
        failed = nw.status not in ("converged", "gap reached") and not (nw.gnorm <= 1e-2 * nw.g_start)
        return dict(
            q=nw.q, steps=nw.steps, backtracks=nw.backtracks, status=nw.status, grad_norm=nw.gnorm, failed=failed
        )

    def inner_point(self, nw: _Newton) -> _InnerPoint | None:
        """The inner objective and gradient at the Newton iterate (None: non-finite)."""
        gb, loss, rho = self.gamma_b, self.loss, nw.rho
        nw.q = q = self.kernel_part(rho, nw.KR)
        sr = float(np.sum(rho))
        sb = (self.b + gb * sr) if self.bias else 0.0
        gL, gR, dL, gu2 = loss.derivs(rho)
        if loss.constrained:
            nw.Lval = loss.value(rho)  # derivs may have re-minimized the auxiliaries
        g = gL + q["grad"] + sb
        phi = nw.Lval + (0.5 * sb * sb / gb if self.bias else 0.0) + q["env"] / self.gamma
        if not (math.isfinite(phi) and np.all(np.isfinite(g))):
            return None
        return _InnerPoint(q, sr, sb, gL, gR, dL, gu2, g, phi)

    def inner_stop(self, nw: _Newton, pt: _InnerPoint, k: int) -> str | None:
        """Why Newton stops at this point (None: it goes on)."""
        eng, gb, q = self.engine, self.gamma_b, pt.q
        # the change of the predictions the update would make: sum_m K_m (alpha+_m - alpha_m) + (b+ - b)
        dz = q["grad"] - self.z_kernel + (gb * pt.sr if self.bias else 0.0)
        d_primal = math.sqrt(float(dz @ dz) + self.loss.pending_change(nw.rho))
        # rounding floor: the size of the terms that cancel in the gradient
        rho_term = gb * float(np.sum(np.abs(nw.rho))) * math.sqrt(self.N)
        scale = float(np.linalg.norm(pt.gL)) + q["gross"] + abs(self.b) * math.sqrt(self.N) + rho_term
        nw.thresh = max(eng.inner_tol * d_primal, _FLOOR * scale)
        if nw.gnorm <= nw.thresh:
            return "converged"
        if k > 0 and self.bound_gap(nw.rho, nw.KR, q) <= eng.tol:
            return "gap reached"
        if nw.flat >= 2:
            return "rounding"
        if k == eng.max_newton:
            return "max_newton"
        return None

    def inner_direction(self, nw: _Newton, pt: _InnerPoint) -> tuple[np.ndarray, float] | str:
        """The Newton direction (bent into a bounded conjugate's domain) and slope, or why none."""
        loss, rho = self.loss, nw.rho
        H, finite = self.hessian(pt.q, pt.dL, rho)
        if not finite:
            return "non-finite"
        g = pt.g
        g_rhs = pt.gR + pt.q["grad"] + pt.sb
        delta, nw.solver = levenberg_marquardt_direction(H, g_rhs, loss.ridge(g_rhs))
        slope = float(g @ delta) + loss.aux_direction(delta)
        if not (math.isfinite(slope) and slope < 0.0):
            delta = -g_rhs
            slope = float(g @ delta) + loss.aux_direction(delta)
            nw.solver = "gradient"
            if not slope < 0.0:
                return "no descent direction"
        # a bounded smooth conjugate: only the coordinates that would leave its domain are cut
        bent = loss.bend(rho, delta, self.engine.boundary)
        if bent is not None:
            bslope = float(g @ bent)
            if bslope < 0.0:
                delta, slope = bent, bslope
        return delta, slope

    def inner_line_search(self, nw: _Newton, pt: _InnerPoint, delta, slope: float) -> tuple[float | None, float, Any]:
        r"""Armijo back-tracking (§3.5.1): the step (None: failed), the objective there, :math:`K_m\delta`."""
        eng, gamma, gb, loss, rho, q = self.engine, self.gamma, self.gamma_b, self.loss, nw.rho, pt.q
        Cg = gamma * self.C
        KD, bq, eq = self.bank.direction_forms(common.as_vector(delta), nw.KR)
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
        p_new = math.inf
        nbt = 0
        for nbt in range(eng.max_backtrack + 1):
            if c <= 0.0:
                break
            nw.Lt = loss.value(rho + c * delta, c)
            if math.isfinite(nw.Lt):
                nt = np.sqrt(np.maximum(n2c + c * (2.0 * gamma * pmc + c * gamma * gamma * eqc), 0.0))
                p_new = nw.Lt + (const + float(np.sum(self.reg_kernel(self.rk.env, nt, Cg)))) / gamma
                if self.bias:
                    sbt = self.b + gb * (pt.sr + c * sd)
                    p_new += 0.5 * sbt * sbt / gb
                rounding = 1e-14 * (abs(pt.phi) + 1.0) if c == 1.0 else 0.0
                if p_new <= pt.phi + eng.armijo * c * slope + rounding:
                    accepted = True
                    break
            c *= eng.backtrack
        nw.backtracks += nbt
        debug = "spicy   newton %d: |grad| %.3e (stop %.2e), step %.3g after %d backtracks, %d active, slope %.3e, %s"
        logger.debug(debug, nw.steps, nw.gnorm, nw.thresh, c, nbt, q["active"].size, slope, nw.solver)
        return (c if accepted else None), p_new, KD

    def inner_move(self, nw: _Newton, pt: _InnerPoint, c: float, delta, KD, p_new: float) -> None:
        """The accepted Newton step."""
        nw.flat = nw.flat + 1 if pt.phi - p_new <= 1e-15 * abs(pt.phi) else 0
        nw.rho = nw.rho + c * delta
        nw.KR += c * KD
        self.loss.accept(c)
        nw.Lval = nw.Lt
        nw.steps += 1

    def bound_gap(self, rho: np.ndarray, KR: np.ndarray, q: dict[str, Any]) -> float:
        r"""An upper bound on the gap after an update at ρ, without a pass over the bank: the
        primal where the update would put it, the dual at the projected point with its block norms
        bounded by :math:`\|\rho\|_{K_m} + \sqrt{\mathrm{tr}K_m}\|\tilde\rho - \rho\|`."""
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
        P = common.primal_value(problem, f + b, q["e1"])
        gap = common.relative_gap(P, D)
        return gap if not math.isnan(gap) else math.inf
