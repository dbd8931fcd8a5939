"""The iterative method of SpicyMKL (§3-4.2): an augmented-Lagrangian method on the dual
(``docs/engines.md``, "Iterative method")."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ...result import SolveResult, Status
from .. import common
from .inner import InnerProblem
from .start import initial_dual, warm_dual

logger = logging.getLogger(__name__)

#: gamma0 = GAMMA0_SCALE / C: 1/C is the scale of gamma for unit-trace kernels, and ten times
#: that saves an outer iteration (``docs/tuned_constants.md``).
GAMMA0_SCALE = 10.0
#: Outer iterations without a lower best gap (gamma at its cap) before the solve stalls.
_STALL = 12
#: A gap this many times the best one sends the iteration back to the best point, once.
_DIVERGED = 10.0


class _Iterative(InnerProblem):
    """One run of the iterative (augmented-Lagrangian) method."""

    def start(self) -> None:
        eng = self.engine
        self.gamma0 = float(eng.gamma0) if eng.gamma0 is not None else GAMMA0_SCALE / self.C
        self.gamma = self.gamma0
        self.gamma_cap = self.gamma0 * float(eng.gamma_max_factor)
        self.gamma_floor = self.gamma0 * 1e-3
        rho0 = initial_dual(self.lower, self.upper, self.bias)
        ws = self.warm_start
        if ws is None:  # the zero solution (docs/engines.md, "Start")
            S, alpha, dual = np.zeros(0, dtype=np.int64), np.zeros((0, self.N)), self.zero.rho
        else:
            (S, alpha), dual = self.warm_blocks(), ws.dual
        self.set_alpha(S, alpha)
        self.b = self.start_bias()
        rho = rho0
        if dual is not None:
            cand = warm_dual(dual, self.lower, self.upper, self.bias)
            rho = cand if self.loss.constrained else 0.999 * cand + 0.001 * rho0
        if self.loss.constrained:
            rho_est = self.loss.estimate_multipliers(self.z_kernel + self.b, rho)
            if dual is None:
                rho = rho_est
        self.rho = np.ascontiguousarray(rho)
        self.KR = self.bank.matvecs(self.rho)

    def solve_inner(self) -> dict[str, Any]:
        """:meth:`inner`, retried from the same start with γ divided by ``gamma_factor`` (at most
        three times) when Newton stopped early with the gradient down less than a hundredfold."""
        saved = (self.rho.copy(), self.KR.copy(), self.loss.snapshot())
        info = self.inner()
        tries = 0
        while info["failed"] and tries < 3 and self.gamma > self.gamma_floor:
            tries += 1
            self.rho, self.KR = saved[0].copy(), saved[1].copy()
            self.loss.restore(saved[2])
            self.gamma = max(self.gamma / float(self.engine.gamma_factor), self.gamma_floor)
            info = self.inner()
        info["retries"] = tries
        return info

    def snapshot(self, record: dict[str, Any]) -> dict[str, Any]:
        """The state after an outer iteration, to go back to."""
        state = dict(S=self.S.copy(), A=self.A.copy(), b=self.b, rho=self.rho.copy(), loss=self.loss.snapshot())
        return {**state, "gamma": self.gamma, **record}

    def restore(self, best: dict[str, Any]) -> None:
        r"""Go back to a snapshot; one pass over the bank recomputes :math:`K_m\rho`."""
        self.set_alpha(best["S"], best["A"])
        self.b = best["b"]
        self.rho = best["rho"].copy()
        self.loss.restore(best["loss"])
        self.KR = self.bank.matvecs(self.rho)
        self.gamma = best["gamma"]

    def outer_update(self, q: dict[str, Any]) -> None:
        """eqs. (38)-(40): alpha by the block prox, b, xi."""
        newS = np.flatnonzero(q["e1"] > 0.0).astype(np.int64)
        self.set_alpha(newS, q["w"][newS, None] * self.shifted(newS, self.rho))
        if self.bias:
            self.b += self.gamma_b * float(np.sum(self.rho))
        self.loss.update_multipliers(self.rho)

    def objectives(self) -> common.Certificate:
        r"""Primal at (alpha, b*), b* the best bias, and dual at the projected rho (§6.1); one pass
        over the bank resyncs :math:`K_m\rho`."""
        problem = self.problem
        rho_t = common.centre_dual(self.rho, -self.upper, -self.lower, self.bias)
        KR, norms = self.bank.matvecs_and_norms(common.as_vector(self.rho), common.as_vector(rho_t))
        self.KR = KR
        rho_t, norms = common.scale_into_radius(rho_t, norms, float(problem.regularizer.conj_radius(self.C)))
        D = common.dual_objective(problem, rho_t, norms=norms)
        f = self.z_kernel
        b = common.optimal_bias(problem.loss, self.y, f, self.b, weights=self.sl.w) if self.bias else 0.0
        xnorm = np.sqrt(self.aa)
        P = common.primal_value(problem, f + b, xnorm)
        return common.Certificate.of(P, D, rho_t, xnorm, bias=b)

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
                why = f"non-finite inner objective at outer iteration {it + 1} (gamma {self.gamma:.3g})"
                run.end(Status.NUMERICAL_ERROR, it, why)
                break
            if info["steps"] > 0:
                q = self.kernel_part(self.rho, self.KR)
            self.outer_update(q)
            it += 1
            cert = self.objectives()
            P, D, gap, b_out, rho_t = cert.primal, cert.dual, cert.gap, cert.extra["bias"], cert.rho
            run.offer(it, primal=P, alpha=self.A, bias=b_out, norms=np.sqrt(self.aa), dual=D, rho=rho_t, rows=self.S)
            extra = dict(gamma=self.gamma, gamma_bias=self.gamma_b, newton_steps=info["steps"])
            extra.update(n_backtracks=info["backtracks"], inner_grad=info["grad_norm"], inner_status=info["status"])
            extra.update(gamma_retries=info["retries"], bias=b_out)
            n_active = int(self.S.size)
            debug = "spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d gamma=%.3g newton=%d %s"
            logger.debug(debug, it, P, D, gap, n_active, self.gamma, info["steps"], info["status"])
            if best is None or gap < best["gap"]:
                best = self.snapshot({"gap": gap, "P": P, "D": D, "b_out": b_out, "rho_t": rho_t, "it": it})
            elif gap > _DIVERGED * best["gap"] and gap > run.tol and not best.get("restored"):
                best["restored"] = True
                self.restore(best)
                self.gamma_cap = self.gamma
                extra["restored"] = best["it"]
                logger.debug(
                    "spicy: gap %.3e > %g x best %.3e: back to iteration %d", gap, _DIVERGED, best["gap"], best["it"]
                )
            run.record(it, P, D, gap, n_active, **extra)
            finite = math.isfinite(P) and not math.isnan(D) and D != math.inf  # D = -inf: an infinite gap
            error = None if finite else f"non-finite objective (primal {P!r}, dual {D!r})"
            stalled = None
            if gap < best_gap * (1.0 - 1e-3):
                best_gap, stall = gap, 0
            else:
                stall += 1
                if stall >= _STALL and self.gamma >= self.gamma_cap:
                    stalled = f"no progress in {stall} outer iterations (last inner solve: {info['status']})"
            if run.check(it, gap, stalled=stalled, error=error):
                break
            self.gamma = min(self.gamma * float(eng.gamma_factor), self.gamma_cap)
        return run.result(it)
