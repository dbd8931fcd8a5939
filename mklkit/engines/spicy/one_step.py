r"""The one-step method of SpicyMKL (§4.3): Newton's method on the dual (48).

Both conjugates smooth; see the package docstring of :mod:`mklkit.engines.spicy`
("One-step method") and ``docs/engines.md``.
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple

import numba
import numpy as np

from ...problem import Problem
from ...result import SolveResult, Status
from .. import common
from ..base import Algorithm, Engine, Run
from .factor_newton import LowRankHessian, is_factored
from .factor_newton import newton_direction as low_rank_direction
from .loss_terms import _SmoothLoss
from .start import _centre, _newton_direction, initial_dual, warm_dual

__all__ = ["_OneStep"]

logger = logging.getLogger(__name__)


class _Point(NamedTuple):
    r"""The dual objective's terms at the current point and the primal it recovers:
    :math:`G_m, G_m''` at the block norms, the blocks with a positive norm,
    :math:`\alpha_m = \text{coef}_m\rho`, :math:`\|\alpha_m\|_{K_m}`, the blocks with
    :math:`\alpha_m \ne 0`, the kernel part of the prediction, the Newton objective,
    :math:`\nabla\ell^*(-\rho)` and the bias."""

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


class _OneStep(Algorithm):
    """State of one run of the one-step method."""

    def __init__(self, engine: Engine, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        run.unit = "Newton step"
        self.lower, self.upper = self.conj_domain()
        self.loss = _SmoothLoss(problem, self.lower, self.upper)
        self.row_block = max(8, -(-self.N // (2 * numba.get_num_threads())))
        self.factored = is_factored(self.bank)

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
            s = 0.5**k
            val = self.loss.value(s * rho) + float(np.sum(self.reg_kernel(self.rk.conj, s * norms)))
            if math.isfinite(val) and val < best:
                best, best_s = val, s
            elif math.isfinite(best):
                break
        return best_s

    # -------------------------------------------------------------------------
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
            self.step_info = {
                "step_size": c,
                "newton_decrement": math.sqrt(max(-slope, 0.0)),
                "n_backtracks": n_bt,
                "n_candidates": int(np.sum(cand)),
                "solver": method,
                "multiplier": self.multiplier,
            }
        return run.result(self.it)

    def start(self) -> None:
        r"""The dual start (the warm start's dual point mixed in), scaled by
        :meth:`start_scale`; :math:`K_m\rho`, :math:`\rho^\top K_m\rho` and the norms."""
        rho = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is not None and ws.dual is not None:
            # the warm dual point, projected into the closed domain; a convex
            # combination with the strictly interior start stays strictly inside
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
        P = common.loss_value(self.problem.loss, self.y, pt.f + pt.b, self.sl.w) + common.regularizer_value(
            self.problem.regularizer, pt.alpha_norms, self.C
        )
        cert = common.Certificate.at(self.problem, P, rho, pt.alpha_norms, dual_norms=self.norms)
        D, gap = cert.dual, cert.gap
        run.offer(
            it,
            primal=P,
            alpha=pt.coef[:, None] * rho[None, :],
            bias=pt.b,
            norms=pt.alpha_norms.copy(),
            dual=D,
            rho=cert.rho,
        )
        if it > 0:
            run.record(it, P, D, gap, int(pt.prim.size), **self.step_info, bias=pt.b)
            logger.debug(
                "spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d step=%.3g",
                it,
                P,
                D,
                gap,
                pt.prim.size,
                self.step_info.get("step_size", math.nan),
            )
        if not (math.isfinite(P) and math.isfinite(D) and math.isfinite(pt.F)):
            run.end(
                Status.NUMERICAL_ERROR,
                it,
                f"non-finite objective (primal {P!r}, dual {D!r}, Newton objective {pt.F!r})",
            )
            return True
        return bool(run.check(it, gap))

    def hessian(self, pt: _Point, dH: np.ndarray, hidx: np.ndarray, s: np.ndarray, t: np.ndarray) -> tuple[Any, bool]:
        """The Hessian (50): low rank on a factor bank, else an N x N array; whether finite."""
        if self.factored:
            # D + sum_p L_m W_p L_m^T, no N x N matrix (factor_newton)
            H: Any = LowRankHessian(
                self.bank, dH, hidx, s[hidx], t[hidx], np.broadcast_to(self.rho, (hidx.size, self.N))
            )
            return H, H.finite
        H = np.diag(dH)
        if hidx.size:
            self.bank.accumulate_hessian(
                H,
                hidx,
                np.ascontiguousarray(s[hidx]),
                np.ascontiguousarray(self.KR[hidx]),
                np.ascontiguousarray(t[hidx]),
                self.row_block,
            )
        return H, bool(np.all(np.isfinite(H)))

    def direction(self, pt: _Point) -> tuple[np.ndarray, float, str, float] | None:
        """The Newton direction from the gradient (49) and Hessian (50), or projected
        steepest descent; the direction, the new multiplier, the solver and the slope
        (None: the run ended)."""
        run, it, norms, pos, coef = self.run, self.it, self.norms, pt.pos, pt.coef
        g = -pt.zc + pt.f
        t = np.zeros(norms.size)
        s = coef.copy()
        zero = ~pos & np.isfinite(pt.G2)
        s[zero] = np.maximum(pt.G2[zero], 0.0)  # lim G'(n)/n as n -> 0
        t[pos] = (pt.G2[pos] - coef[pos]) / (norms[pos] ** 2)
        hidx = np.flatnonzero((s != 0.0) | (t != 0.0)).astype(np.int64)
        H, h_finite = self.hessian(pt, self.sl.conj_hess(-self.rho), hidx, s, t)
        if not (h_finite and np.all(np.isfinite(g))):
            run.end(Status.NUMERICAL_ERROR, it, f"non-finite gradient or Hessian at Newton step {it + 1}")
            return None
        if self.factored:
            delta, multiplier, method = low_rank_direction(H, g, self.bias)
        else:
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
        """Armijo back-tracking (§3.5.1) along ``delta``: the step (None: failed, the run
        ended), the number of shrinkings and the blocks whose conjugate can change."""
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
        self.run.end(
            Status.STALLED,
            self.it,
            f"line search failed at Newton step {self.it + 1} (Newton decrement {decrement:.3e})",
        )
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
