r"""The one-step method of SpicyMKL (§4.3): Newton's method on the dual (48).

Both conjugates smooth; see the package docstring of :mod:`mklkit.engines.spicy`
("One-step method") and ``docs/engines.md``.
"""
from __future__ import annotations

import logging
import math
from typing import Any

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


class _OneStep(Algorithm):
    """State of one run of the one-step method."""

    def __init__(self, engine: Engine, problem: Problem, run: Run,
                 warm_start: SolveResult | None) -> None:
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
            s = 0.5 ** k
            val = self.loss.value(s * rho) + float(np.sum(self.reg_kernel(self.rk.conj, s * norms)))
            if math.isfinite(val) and val < best:
                best, best_s = val, s
            elif math.isfinite(best):
                break
        return best_s

    # -------------------------------------------------------------------------
    def run_loop(self) -> SolveResult:
        eng, run = self.engine, self.run
        bank, y = self.bank, self.y
        N = y.size

        rho = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is not None and ws.dual is not None:
            # the warm dual point, projected into the closed domain; a convex
            # combination with the strictly interior start stays strictly inside
            rho = 0.999 * warm_dual(ws.dual, self.lower, self.upper, self.bias) + 0.001 * rho
            if self.bias:
                rho = _centre(rho, -self.upper, -self.lower)
        KR = bank.matvecs(rho)
        sq = KR @ rho
        norms = np.sqrt(np.maximum(sq, 0.0))
        scale = self.start_scale(rho, norms)
        if scale != 1.0:
            rho *= scale
            KR *= scale
            sq *= scale * scale
            norms *= scale

        it = 0
        nu = math.nan
        step_info: dict[str, Any] = {}
        b = 0.0
        coef = np.zeros(norms.size)
        alpha_norms = np.zeros(norms.size)
        P = D = gap = math.nan

        while True:
            # ---- evaluate the current dual point and its primal recovery ----
            G = self.reg_kernel(self.rk.conj, norms)
            G1 = self.reg_kernel(self.rk.conj_grad, norms)
            G2 = self.reg_kernel(self.rk.conj_hess, norms)
            pos = norms > 0.0
            coef = np.zeros(norms.size)
            coef[pos] = G1[pos] / norms[pos]          # alpha_m = coef_m * rho
            alpha_norms = np.where(pos, G1, 0.0)      # ||alpha_m||_{K_m} = G'(n_m)
            prim = np.flatnonzero(coef > 0.0)
            f = coef[prim] @ KR[prim] if prim.size else np.zeros(N)
            Lc = self.loss.value(rho)
            F = Lc + float(np.sum(G))
            zc = self.sl.conj_grad(-rho)
            if self.bias:
                b0 = nu if math.isfinite(nu) else float(np.mean(zc - f))
                b = common.optimal_bias(self.problem.loss, y, f, b0, weights=self.sl.w)
            P = common.loss_value(self.problem.loss, y, f + b, self.sl.w) + common.regularizer_value(
                self.problem.regularizer, alpha_norms, self.C)
            cert = common.Certificate.at(self.problem, P, rho, alpha_norms, dual_norms=norms)
            D, rho_f, gap = cert.dual, cert.rho, cert.gap
            finite = math.isfinite(P) and math.isfinite(D) and math.isfinite(F)
            run.offer(it, primal=P, alpha=coef[:, None] * rho[None, :], bias=b,
                      norms=alpha_norms.copy(), dual=D, rho=rho_f)

            if it > 0:
                run.record(it, P, D, gap, int(prim.size), **step_info, bias=b)
                logger.debug("spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d step=%.3g",
                             it, P, D, gap, prim.size, step_info.get("step_size", math.nan))
            if not finite:
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite objective (primal {P!r}, "
                                                    f"dual {D!r}, Newton objective {F!r})")
                break
            if run.check(it, gap):
                break

            # ---- Newton direction: gradient (49), Hessian (50), active set ----
            g = -zc + f
            t = np.zeros(norms.size)
            s = coef.copy()
            zero = ~pos & np.isfinite(G2)
            s[zero] = np.maximum(G2[zero], 0.0)       # lim G'(n)/n as n -> 0
            t[pos] = (G2[pos] - coef[pos]) / (norms[pos] ** 2)
            hidx = np.flatnonzero((s != 0.0) | (t != 0.0)).astype(np.int64)
            dH = self.sl.conj_hess(-rho)
            if self.factored:
                # D + sum_p L_m W_p L_m^T, no N x N matrix (factor_newton)
                H: Any = LowRankHessian(bank, dH, hidx, s[hidx], t[hidx],
                                        np.broadcast_to(rho, (hidx.size, N)))
                h_finite = H.finite
            else:
                H = np.diag(dH)
                if hidx.size:
                    bank.accumulate_hessian(H, hidx, np.ascontiguousarray(s[hidx]),
                                            np.ascontiguousarray(KR[hidx]),
                                            np.ascontiguousarray(t[hidx]), self.row_block)
                h_finite = bool(np.all(np.isfinite(H)))
            if not (h_finite and np.all(np.isfinite(g))):
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite gradient or Hessian at "
                                                    f"Newton step {it + 1}")
                break
            if self.factored:
                delta, nu_new, method = low_rank_direction(H, g, self.bias)
            else:
                delta, nu_new, method = _newton_direction(H, g, self.bias)
            slope = float(g @ delta)
            if not (math.isfinite(slope) and slope < 0.0):
                # not a descent direction (rounding): projected steepest descent
                delta = -(g - np.mean(g)) if self.bias else -g
                slope = float(g @ delta)
                method = "gradient"
            decrement = math.sqrt(max(-slope, 0.0))
            if slope >= 0.0:
                run.end(Status.STALLED, it, f"no descent direction at Newton step {it + 1}")
                break

            # ---- Armijo back-tracking (§3.5.1) ----
            KD, bq, eq = bank.direction_forms(common.as_vector(delta), KR)
            n_full = np.sqrt(np.maximum(sq + 2.0 * bq + eq, 0.0))
            cand = self.reg_kernel(self.rk.conj_grad, np.maximum(norms, n_full)) > 0.0
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
                    Ft = Lt + float(np.sum(self.reg_kernel(self.rk.conj, nt))) + const
                    if Ft <= F + eng.armijo * c * slope:
                        accepted = True
                        break
                c *= eng.backtrack
            if not accepted:
                run.end(Status.STALLED, it, f"line search failed at Newton step {it + 1} "
                                            f"(Newton decrement {decrement:.3e})")
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

        return run.result(it)


