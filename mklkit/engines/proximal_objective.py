r"""The objective of the proximal-gradient engine and the certificate of an iterate.

With the optional term :math:`\mu\sum_m\|\alpha_m\|_{K_m}^2` the block prox,
value and conjugate are those of :math:`\tilde g_C(x) + \mu x^2`; the
certificate replaces the bias by the optimal one, projects the dual point
and computes exactly only the dual block norms that the screening bounds do
not settle (the section *Duality gap* of :mod:`mklkit.engines.proximal`).
"""

from __future__ import annotations

import math

import numpy as np

from ..problem import Problem
from ..result import SolveResult
from . import common
from .base import Algorithm, Engine, Run
from .proximal_blocks import Iterate, rows_in
from .proximal_passes import passes_for

__all__ = ["ProximalObjective"]


class ProximalObjective(Algorithm):
    r"""The problem with the :math:`\mu\|f\|^2` term as the proximal-gradient engine sees it:
    the loss, the prox, value and conjugate of the regularizer with that term, and the
    certificate of an iterate."""

    def __init__(self, engine: Engine, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        self.passes = passes_for(problem)
        self.loss = problem.loss
        self.reg = problem.regularizer
        self.mu = float(engine.mu)

    # -- component calls ------------------------------------------------------
    def loss_values(self, z: np.ndarray) -> np.ndarray:
        return self.sl.value(z)

    def deriv(self, z: np.ndarray) -> np.ndarray:
        return self.sl.deriv(z)

    def prox(self, v: np.ndarray, eta: float) -> np.ndarray:
        r"""Prox of :math:`\eta(\tilde g_C(x) + \mu x^2)` at block norms ``v``."""
        v = common.as_vector(v)
        if self.mu == 0.0:
            return np.asarray(self.rk.prox(v, eta * self.C, self.pr), dtype=np.float64)
        c = 1.0 + 2.0 * eta * self.mu
        return np.asarray(self.rk.prox(common.as_vector(v / c), eta * self.C / c, self.pr), dtype=np.float64)

    def reg_value(self, x: np.ndarray) -> float:
        x = common.as_vector(x)
        val = float(np.sum(self.rk.value(x, self.C, self.pr)))
        if self.mu:
            val += self.mu * float(x @ x)
        return val

    def reg_conj(self, ynorm: np.ndarray) -> np.ndarray:
        r"""Conjugate of :math:`\tilde g_C(x) + \mu x^2` at dual block norms."""
        ynorm = common.as_vector(ynorm)
        if self.mu == 0.0:
            return np.asarray(self.rk.conj(ynorm, self.C, self.pr), dtype=np.float64)
        c2 = 2.0 * self.mu
        x = np.asarray(self.rk.prox(common.as_vector(ynorm / c2), self.C / c2, self.pr), dtype=np.float64)
        gx = np.asarray(self.rk.value(common.as_vector(x), self.C, self.pr), dtype=np.float64)
        return x * ynorm - gx - self.mu * x * x

    # -- certificate ----------------------------------------------------------
    def certificate(self, x: Iterate) -> common.Certificate:
        """Exact primal at (alpha, b*) and the projected dual (module docstring)."""
        y = self.y
        f_approx = x.z - x.b
        b_star = 0.0
        if self.bias:
            b_star = common.optimal_bias(self.loss, y, f_approx, x.b, weights=self.sl.w)
        rho = -self.deriv(common.as_vector(f_approx + b_star))
        if self.bias:  # the rounding residue of the sum, removed inside the box
            rho = common.centre_dual(rho, -self.upper, -self.lower)
        # which dual block norms must be exact
        allm = np.arange(self.M, dtype=np.int64)
        bnd = self.screen.bounds(rho, allm) if self.engine.screening else np.full(self.M, np.inf)
        harmless = np.isfinite(bnd)
        if np.any(harmless):
            cval = self.reg_conj(bnd[harmless])
            ok = (cval == 0.0) & (bnd[harmless] <= self.radius)
            harmless[np.flatnonzero(harmless)[~ok]] = False
        need = ~harmless
        # one read per kernel: K_m alpha_m (non-zero blocks) and ||rho||_{K_m} (needed)
        act = np.zeros(self.M, dtype=bool)
        act[x.idx] = True
        sel = np.flatnonzero(need | act).astype(np.int64)
        arow = rows_in(x.idx, sel)
        want = need[sel]
        KA, nr = self.passes.certificate_pass(sel, x.A.reshape(x.idx.size, self.N), arow, rho, want)
        norms_rho = bnd.copy()
        norms_rho[sel[want]] = nr[want]
        self.screen.add(rho, sel[want], nr[want])
        self.screen.compact()
        # exact primal.  The carried u_m = K_m alpha_m are not replaced: alpha_m
        # may carry components in the null space of K_m (invisible to the
        # objective) that make a fresh product differ from u_m by rounding, and
        # mixing the two would perturb the momentum x - x_prev.
        norms = np.sqrt(np.maximum(np.einsum("ij,ij->i", x.A, KA), 0.0)) if x.idx.size else np.zeros(0)
        f = KA.sum(axis=0) if x.idx.size else np.zeros(self.N)
        zs = f + b_star if self.bias else f
        P = float(np.sum(self.loss_values(common.as_vector(zs)))) + self.reg_value(norms)
        # dual
        extra = {"b_star": b_star, "n_exact": int(np.sum(want))}
        if self.mu == 0.0:
            return common.Certificate.at(self.problem, P, rho, norms, dual_norms=norms_rho, **extra)
        # the conjugate of g_C + mu x^2 has an unbounded domain: rho is feasible as it is
        D = -common.loss_conjugate(self.loss, y, rho, self.sl.w) - float(np.sum(self.reg_conj(norms_rho)))
        return common.Certificate.of(P, D, rho, norms, **extra)

    def offer(self, x: Iterate, cert: common.Certificate, it: int) -> None:
        """Offer a certified iterate to the incumbents (the gap uses the best of each)."""
        alpha = norms = None
        if math.isfinite(cert.primal) and cert.primal < self.run.incumbents.primal:
            alpha = np.zeros((self.M, self.N))
            norms = np.zeros(self.M)
            if x.idx.size:
                alpha[x.idx] = x.A
                norms[x.idx] = cert.norms
        self.run.offer(
            it,
            primal=cert.primal if alpha is not None else None,
            alpha=alpha,
            bias=cert.extra["b_star"],
            norms=norms,
            dual=cert.dual,
            rho=cert.rho,
        )
