r"""The iterative method of SpicyMKL (§3-4.2): an augmented-Lagrangian method on the dual.

Inner problems (eqs. 41, 47) minimized by a semismooth Newton method; see
the package docstring of :mod:`mklkit.engines.spicy` ("Iterative method")
and ``docs/engines.md``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ...problem import Problem
from ...result import SolveResult, Status
from .. import common
from ..base import Engine, Run
from .inner import InnerProblem
from .start import initial_dual, warm_dual

__all__ = ["_Iterative", "GAMMA0_SCALE"]

logger = logging.getLogger(__name__)


#: Default first proximity parameter: gamma0 = GAMMA0_SCALE / C.  At the
#: solution alpha_m = (||alpha_m|| / g~'(||alpha_m||)) rho on active kernels,
#: so 1/C is the natural scale of gamma for unit-trace kernels; ten times
#: that saved an outer iteration on the §6.1 problems without costing
#: Newton steps (benchmarks/README.md).
GAMMA0_SCALE = 10.0

#: Outer iterations without a decrease of the best relative gap after which
#: the solve is declared stalled.
_STALL = 12

#: A gap this many times the best one so far means the iteration lost its way
#: (rounding with a very large gamma): it goes back to the best point and
#: keeps gamma there.
_DIVERGED = 10.0


class _Iterative(InnerProblem):
    """State of one run of the iterative (augmented-Lagrangian) method."""

    def __init__(self, engine: Engine, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        run.unit = "outer iteration"

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
        return {
            "S": self.S.copy(),
            "A": self.A.copy(),
            "b": self.b,
            "rho": self.rho.copy(),
            "loss": self.loss.snapshot(),
            "xi": self.loss.multipliers_copy(),
            "gamma": self.gamma,
            **record,
        }

    def restore(self, best: dict[str, Any]) -> None:
        r"""Go back to a snapshot; one pass over the bank recomputes :math:`K_m\rho`."""
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
        r"""Primal at (alpha, b*) and dual at the projected rho (§6.1); resyncs K_m rho.

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
        rho_t, norms = common.scale_into_radius(rho_t, norms, float(problem.regularizer.conj_radius(self.C)))
        D = common.dual_objective(problem, rho_t, norms=norms)
        f = self.KA.sum(axis=0) if self.S.size else np.zeros(self.N)
        b = common.optimal_bias(problem.loss, self.y, f, self.b, weights=self.sl.w) if self.bias else 0.0
        xnorm = np.sqrt(self.aa)
        P = common.loss_value(problem.loss, self.y, f + b, self.sl.w) + common.regularizer_value(
            problem.regularizer, xnorm, self.C
        )
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
                run.end(
                    Status.NUMERICAL_ERROR,
                    it,
                    f"non-finite inner objective at outer iteration {it + 1} (gamma {self.gamma:.3g})",
                )
                break
            if info["steps"] > 0:
                q = self.kernel_part(self.rho, self.KR)
            self.outer_update(q)
            it += 1
            cert = self.objectives()
            P, D, gap, b_out, rho_t = cert.primal, cert.dual, cert.gap, cert.extra["bias"], cert.rho
            run.offer(
                it, primal=P, alpha=self.alpha_full(), bias=b_out, norms=self.block_norms_full(), dual=D, rho=rho_t
            )
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
            logger.debug(
                "spicy it=%d P=%.10g D=%.10g gap=%.3e active=%d gamma=%.3g newton=%d %s",
                it,
                P,
                D,
                gap,
                self.S.size,
                self.gamma,
                info["steps"],
                info["status"],
            )
            if best is None or gap < best["gap"]:
                best = self.snapshot({"gap": gap, "P": P, "D": D, "b_out": b_out, "rho_t": rho_t, "it": it})
            elif gap > _DIVERGED * best["gap"] and gap > run.tol and not best.get("restored"):
                # lost its way: back to the best point (once), and gamma stays there
                best["restored"] = True
                self.restore(best)
                self.gamma_cap = self.gamma
                extra["restored"] = best["it"]
                logger.debug(
                    "spicy: gap %.3e > %g x best %.3e: back to iteration %d", gap, _DIVERGED, best["gap"], best["it"]
                )
            run.record(it, P, D, gap, n_active, **extra)
            if not math.isfinite(P) or math.isnan(D) or D == math.inf:
                # (D = -inf, a dual point outside the conjugate's domain, only makes the gap inf)
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite objective (primal {P!r}, dual {D!r})")
                break
            stalled = None
            if gap < best_gap * (1.0 - 1e-3):
                best_gap, stall = gap, 0
            else:
                stall += 1
                if stall >= _STALL and self.gamma >= self.gamma_cap:
                    stalled = f"no progress in {stall} outer iterations (last inner solve: {info['status']})"
            if run.check(it, gap, stalled=stalled):
                break
            self.gamma = min(self.gamma * float(eng.gamma_factor), self.gamma_cap)
            self.gamma_b = float(eng.gamma_bias) * self.gamma

        return run.result(it)
