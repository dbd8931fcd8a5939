"""The one-step method of SpicyMKL (§4.3): Newton's method on the dual (48) when both conjugates
are smooth (``docs/engines.md``, "One-step method")."""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

import numpy as np

from ...result import SolveResult, Status
from .. import common
from .loss_terms import _SmoothLoss
from .start import _centre, _newton_direction, _SpicyAlgorithm, initial_dual, warm_dual

logger = logging.getLogger(__name__)


class _Point(NamedTuple):
    r"""The dual's terms at the point (:math:`G_m, G_m''`, the blocks of positive norm) and the
    primal it recovers (:math:`\alpha_m = \text{coef}_m\rho`, block norms, non-zero blocks, the
    kernel part of the prediction), the Newton objective, :math:`\nabla\ell^*(-\rho)`, the bias."""

    G: np.ndarray
    G2: np.ndarray
    pos: np.ndarray
    coef: np.ndarray
    alpha_norms: np.ndarray
    prim: np.ndarray
    f: np.ndarray
    F: float
    zc: np.ndarray
    b: float


class _OneStep(_SpicyAlgorithm):
    """One run of the one-step method."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.run.unit = "Newton step"
        self.loss = _SmoothLoss(self.problem, self.lower, self.upper)

    def start_scale(self, rho: np.ndarray, norms: np.ndarray) -> float:
        r"""The best :math:`s = 2^{-k}` (k = 0..60) for the start :math:`s\rho_0`: :math:`F(s\rho_0)`
        is convex in ``s`` and costs O(N + M); 1 when every value is infinite."""
        if not np.any(rho != 0.0):
            return 1.0
        best, best_s = math.inf, 1.0
        for k in range(61):
            s = 0.5**k
            val = self.loss.value(s * rho) + float(np.sum(self.reg_kernel(self.rk.conj, s * norms)))
            if math.isfinite(val) and val < best:
                best, best_s = val, s
            elif math.isfinite(best):
                break
        return best_s

    def run_loop(self) -> SolveResult:
        """Newton steps on the dual until the run ends; the incumbents' result."""
        run = self.run
        self.start()
        self.it = 0
        self.multiplier = math.nan  # of 1'rho = 0 (the bias)
        self.step_info: dict[str, Any] = {}
        while True:
            pt = self.evaluate()
            if self.report(pt):
                break
            step = self.direction(pt)
            if step is None:
                break
            delta, multiplier, method, slope = step
            c, n_bt, cand = self.line_search(pt, delta, slope)
            if c is None:
                break
            self.move(c, delta)
            self.multiplier = multiplier
            self.it += 1
            decrement, n_cand = math.sqrt(max(-slope, 0.0)), int(np.sum(cand))
            self.step_info = dict(step_size=c, newton_decrement=decrement, n_backtracks=n_bt, n_candidates=n_cand)
            self.step_info.update(solver=method, multiplier=self.multiplier)
        return run.result(self.it)

    def start(self) -> None:
        r"""The dual start (the warm dual point mixed in) scaled by :meth:`start_scale`, with
        :math:`K_m\rho`, :math:`\rho^\top K_m\rho` and the norms."""
        rho = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is not None and ws.dual is not None:
            rho = 0.999 * warm_dual(ws.dual, self.lower, self.upper, self.bias) + 0.001 * rho
            if self.bias:
                rho = _centre(rho, -self.upper, -self.lower)
        KR = self.bank.matvecs(rho)
        sq = KR @ rho
        norms = np.sqrt(np.maximum(sq, 0.0))
        scale = self.start_scale(rho, norms)
        if scale != 1.0:
            rho *= scale
            KR *= scale
            sq *= scale * scale
            norms *= scale
        self.rho, self.KR, self.sq, self.norms = rho, KR, sq, norms

    def evaluate(self) -> _Point:
        """The dual objective (48) at the current point and the primal it recovers."""
        norms = self.norms
        G = self.reg_kernel(self.rk.conj, norms)
        G1 = self.reg_kernel(self.rk.conj_grad, norms)
        G2 = self.reg_kernel(self.rk.conj_hess, norms)
        pos = norms > 0.0
        coef = np.zeros(norms.size)
        coef[pos] = G1[pos] / norms[pos]  # alpha_m = coef_m * rho
        alpha_norms = np.where(pos, G1, 0.0)  # ||alpha_m||_{K_m} = G'(n_m)
        prim = np.flatnonzero(coef > 0.0)
        f = coef[prim] @ self.KR[prim] if prim.size else np.zeros(self.N)
        F = self.loss.value(self.rho) + float(np.sum(G))
        zc = self.sl.conj_grad(-self.rho)
        b = 0.0
        if self.bias:
            b0 = self.multiplier if math.isfinite(self.multiplier) else float(np.mean(zc - f))
            b = common.optimal_bias(self.problem.loss, self.y, f, b0, weights=self.sl.w)
        return _Point(G, G2, pos, coef, alpha_norms, prim, f, F, zc, b)

    def report(self, pt: _Point) -> bool:
        """Certify, offer and record the point; whether the run ended."""
        run, it, rho = self.run, self.it, self.rho
        P = common.primal_value(self.problem, pt.f + pt.b, pt.alpha_norms)
        cert = common.Certificate.at(self.problem, P, rho, pt.alpha_norms, dual_norms=self.norms)
        D, gap = cert.dual, cert.gap
        alpha = pt.coef[:, None] * rho[None, :]
        run.offer(it, primal=P, alpha=alpha, bias=pt.b, norms=pt.alpha_norms.copy(), dual=D, rho=cert.rho)
        if it > 0:
            run.record(it, P, D, gap, int(pt.prim.size), **self.step_info, bias=pt.b)
            step = self.step_info.get("step_size", math.nan)
            logger.debug("spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d step=%.3g", it, P, D, gap, pt.prim.size, step)
        finite = math.isfinite(P) and math.isfinite(D) and math.isfinite(pt.F)
        error = None if finite else f"non-finite objective (primal {P!r}, dual {D!r}, Newton objective {pt.F!r})"
        return run.check(it, gap, error=error)

    def direction(self, pt: _Point) -> tuple[np.ndarray, float, str, float] | None:
        """The Newton direction from the gradient (49) and Hessian (50), or projected steepest
        descent, with the multiplier, the solver and the slope (None: the run ended)."""
        run, it, norms, pos, coef = self.run, self.it, self.norms, pt.pos, pt.coef
        g = -pt.zc + pt.f
        t = np.zeros(norms.size)
        s = coef.copy()
        zero = ~pos & np.isfinite(pt.G2)
        s[zero] = np.maximum(pt.G2[zero], 0.0)  # lim G'(n)/n as n -> 0
        t[pos] = (pt.G2[pos] - coef[pos]) / (norms[pos] ** 2)
        hidx = np.flatnonzero((s != 0.0) | (t != 0.0)).astype(np.int64)
        rows = np.broadcast_to(self.rho, (hidx.size, self.N))
        H, h_finite = self.newton_matrix(self.sl.conj_hess(-self.rho), hidx, s[hidx], t[hidx], self.KR[hidx], rows)
        if not (h_finite and np.all(np.isfinite(g))):
            run.end(Status.NUMERICAL_ERROR, it, f"non-finite gradient or Hessian at Newton step {it + 1}")
            return None
        delta, multiplier, method = _newton_direction(H, g, self.bias)
        slope = float(g @ delta)
        if not (math.isfinite(slope) and slope < 0.0):
            # not a descent direction (rounding): projected steepest descent
            delta = -(g - np.mean(g)) if self.bias else -g
            slope = float(g @ delta)
            method = "gradient"
        if slope >= 0.0:
            run.end(Status.STALLED, it, f"no descent direction at Newton step {it + 1}")
            return None
        return delta, multiplier, method, slope

    def line_search(self, pt: _Point, delta: np.ndarray, slope: float) -> tuple[float | None, int, np.ndarray]:
        """Armijo back-tracking (§3.5.1): the step (None: failed, the run ended), the number of
        shrinkings and the blocks whose conjugate can change."""
        eng, norms, sq = self.engine, self.norms, self.sq
        self.KD, bq, eq = self.bank.direction_forms(common.as_vector(delta), self.KR)
        n_full = np.sqrt(np.maximum(sq + 2.0 * bq + eq, 0.0))
        cand = self.reg_kernel(self.rk.conj_grad, np.maximum(norms, n_full)) > 0.0
        const = float(np.sum(pt.G[~cand]))
        c = min(1.0, eng.boundary * self.loss.max_step(self.rho, delta))
        n_bt = 0
        for n_bt in range(eng.max_backtrack + 1):
            if c <= 0.0:
                break
            Lt = self.loss.value(self.rho + c * delta)
            if math.isfinite(Lt):
                nt = np.sqrt(np.maximum(sq[cand] + c * (2.0 * bq[cand] + c * eq[cand]), 0.0))
                Ft = Lt + float(np.sum(self.reg_kernel(self.rk.conj, nt))) + const
                if Ft <= pt.F + eng.armijo * c * slope:
                    return c, n_bt, cand
            c *= eng.backtrack
        decrement = math.sqrt(max(-slope, 0.0))
        why = f"line search failed at Newton step {self.it + 1} (Newton decrement {decrement:.3e})"
        self.run.end(Status.STALLED, self.it, why)
        return None, n_bt, cand

    def move(self, c: float, delta: np.ndarray) -> None:
        """The step: the point, its products (updated), sums re-centred, norms."""
        rho = self.rho + c * delta
        self.KR += c * self.KD
        if self.bias:
            rho = _centre(rho, -self.upper, -self.lower)
        self.rho = rho
        self.sq = self.KR @ rho
        self.norms = np.sqrt(np.maximum(self.sq, 0.0))
