r"""The working-set loop of the bcd engine.

Every outer iteration certifies the current point, scores every block by
the violation of its optimality condition, solves the problem restricted to
the non-zero blocks and the most violating others (one call of
:func:`mklkit._jit.bcd.solve_ws`, or Newton steps one call at a time on a
working set met before, :meth:`_BcdRun.newton_to_tol`), polishes the support
(:mod:`mklkit.engines.bcd.polish`), moves the smoothing of a non-smooth loss
(:mod:`mklkit.engines.bcd.continuation`) and chooses the next inner solver
(:mod:`mklkit.engines.bcd.switching`).  The state carried from one
iteration to the next is an :class:`_Iterate`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from ...kernels.factor_arrays import GRAM_MAX_RANK, segment_norms
from ...problem import Problem
from ...result import SolveResult, Status
from .. import common
from ..base import Algorithm, Run
from .continuation import Continuation
from .polish import SMOOTH_POLISH_GAP, SupportPolish
from .switching import NEW_SET_NEWTON, MethodSwitch

if TYPE_CHECKING:
    from . import BCD

__all__ = ["STALL_ITERATIONS"]

logger = logging.getLogger("mklkit.engines.bcd")

#: Outer iterations in a row without a lower primal value, a higher dual value
#: or a smaller smoothing before the solve is declared stalled.
STALL_ITERATIONS = 5


def _jit():
    """The jitted loops, compiled (or loaded from the cache) on first use."""
    from ..._jit import bcd as kb

    return kb


@dataclasses.dataclass
class _Iterate:
    """What the outer iterations carry from one to the next."""

    beta: np.ndarray
    b: float
    #: the smoothing of a non-smooth loss (0 for a smooth one)
    smoothing: float
    #: the certificate of (beta, b) (:meth:`_BcdRun.certify`)
    cert: common.Certificate
    switch: MethodSwitch
    #: the predictions at (beta, b) when known without a pass (the smoothing's new start)
    z: np.ndarray | None = None
    it: int = 0
    #: iterations in a row without a lower primal, a higher dual or a smaller smoothing
    quiet: int = 0
    prev_ws: np.ndarray | None = None


class _BcdRun(Algorithm, Continuation, SupportPolish):
    """State of one solve: the problem unpacked for the jitted loops, the certificate, the
    working sets and the outer loop (:meth:`run_loop`); the smoothing continuation and the
    support polish are its mixins."""

    def __init__(self, engine: BCD, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        self.kb = kb = _jit()
        assert self.zero is not None  # the template computed it (zero_first)
        self.f = self.bank.solver_arrays()
        self.y = common.as_vector(problem.y)
        self.loss = problem.loss
        self.reg = problem.regularizer
        self.lp = common.as_vector(self.pl)
        self.rp = common.as_vector(self.pr)
        lk = self.lk
        # the weighted loss w_i l (SampleLoss); the jitted loops take the weights as an array
        # next to the domain [lo, hi] of the loss's own conjugate, empty when unweighted
        self.sw = np.zeros(0) if self.sl.w is None else common.as_vector(self.sl.w)
        self.lo = common.as_vector(lk.conj_lower(self.y, self.lp))
        self.hi = common.as_vector(lk.conj_upper(self.y, self.lp))
        # the dual box: minus the domain of (w l)^*, w times the loss's
        self.rho_lo, self.rho_hi = -self.sl.conj_upper(), -self.sl.conj_lower()
        self.smooth = bool(self.loss.smooth_primal)
        self.kind = kb.KIND_SMOOTH if self.smooth else kb.KIND_ENVELOPE
        self.lip_loss = float(self.sl.deriv_lipschitz()) if self.smooth else math.inf
        self.method = engine.method if engine.method != "auto" else "newton"
        # 'auto': always for a smoothed non-smooth loss; for a smooth loss where the Newton
        # step on the working set's blocks is affordable (polishes)
        self.polish_on = engine.polish == "always" or (engine.polish == "auto" and not self.smooth)
        self.polish_cheap = engine.polish == "auto" and self.smooth
        # the records the jitted loops take (mklkit._jit.records)
        self.loss_rec = kb.loss_fns(self.loss)
        self.reg_rec = kb.reg_fns(self.reg)
        self.bank_rec = self.f.record

    # -- jitted calls ---------------------------------------------------------
    def samples(self, smoothing: float) -> tuple:
        """The :class:`~mklkit._jit.records.Samples` of the loss in use at ``smoothing``."""
        return self.kb.Samples(self.y, self.lo, self.hi, self.sw, self.kind, float(smoothing))

    def eval_loss(
        self, z: np.ndarray, smoothing: float, value: bool, curv: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values (if asked), derivatives and curvatures (if asked) of the loss in use at
        ``z`` (:func:`mklkit._jit.bcd.eval_loss`)."""
        return self.kb.eval_loss(self.samples(smoothing), common.as_vector(z), self.loss_rec, value, curv)

    def loss_terms(self, z: np.ndarray, smoothing: float, value: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Values (if asked) and derivatives of the loss in use at ``z``."""
        v, d1, _ = self.eval_loss(z, smoothing, value, False)
        return v, d1

    def scores(self, beta: np.ndarray, grad: np.ndarray, smoothing: float) -> np.ndarray:
        """Violation of every block's optimality condition (:func:`~mklkit._jit.bcd.scores`)."""
        kappa = self.curvature_scale(smoothing)
        return self.kb.block_scores(
            beta, common.as_vector(grad), self.f.starts, kappa * self.f.lip, self.C, self.reg_rec
        )

    def curvature_scale(self, smoothing: float) -> float:
        r""":math:`L`, the bound of the second derivative of the loss in use (1 if none): the
        weighted loss's (:math:`\max_i w_i` times the loss's), or :math:`1/\mu` for the
        envelope, weighted or not."""
        if not self.smooth:
            return 1.0 / smoothing
        return self.lip_loss if math.isfinite(self.lip_loss) and self.lip_loss > 0 else 1.0

    # -- certificate ------------------------------------------------------------
    def certify(self, beta: np.ndarray, b: float, smoothing: float) -> common.Certificate:
        """Primal, dual and gap at ``(beta, b)`` from the exact predictions (module docstring);
        the dual point is made feasible by :func:`~mklkit.engines.common.centre_dual` before
        the pass that gives its block norms and the gradient, and scaled by
        :meth:`~mklkit.engines.common.Certificate.at`."""
        problem = self.problem
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        smooth_val, u = self.loss_terms(z, smoothing, value=not self.smooth)
        rho = -u
        if self.bias:
            rho = common.centre_dual(rho, self.rho_lo, self.rho_hi)
        t = self.bank.project(rho)
        norms = segment_norms(beta, self.f.starts)
        reg_val = common.regularizer_value(self.reg, norms, self.C)
        P = common.loss_value(self.loss, self.y, z, self.sl.w) + reg_val
        cert = common.Certificate.at(
            problem, P, rho, norms, dual_norms=segment_norms(t, self.f.starts), grad=-t, z=z, sum_u=float(np.sum(u))
        )
        if not self.smooth:
            rho_f = cert.rho
            P_mu = float(np.sum(smooth_val)) + reg_val
            D_mu = cert.dual - 0.5 * smoothing * float(rho_f @ rho_f)
            cert.extra["gap_smoothed"] = P_mu - D_mu
            cert.extra["smoothing_error"] = (P - P_mu) + 0.5 * smoothing * float(rho_f @ rho_f)
        return cert

    # -- working sets -------------------------------------------------------------
    def working_set(self, score: np.ndarray, norms: np.ndarray) -> np.ndarray:
        """The non-zero blocks and the most violating others, ``max(p0, 2 n_active)`` in all."""
        active = norms > 0.0
        n_act = int(np.sum(active))
        size = min(self.M, max(int(self.engine.p0), 2 * n_act))
        key = np.where(active, np.inf, score)
        order = np.argsort(-key, kind="stable")[:size]
        order = order[(key[order] > 0.0) & (self.f.lip[order] > 0.0)]
        return np.ascontiguousarray(np.sort(order), dtype=np.int64)

    def solve_ws(
        self,
        ws: np.ndarray,
        beta: np.ndarray,
        b: float,
        z: np.ndarray,
        smoothing: float,
        tol_in: float,
        method: str | None = None,
        max_newton: int | None = None,
        polish: bool = False,
    ) -> tuple[float, np.ndarray]:
        """One call of :func:`mklkit._jit.bcd.solve_ws` (``method``: the run's by default;
        ``max_newton`` caps the engine's Newton steps; ``polish``: Newton steps on the support
        follow); updates ``beta``, ``z`` in place."""
        kb, eng = self.kb, self.engine
        method = self.method if method is None else method
        # with Newton steps on the support after it, coordinate descent only has to find
        # the support
        cap = int(eng.max_newton) if max_newton is None else min(int(eng.max_newton), max_newton)
        lip = self.curvature_scale(smoothing) if not self.smooth else self.lip_loss
        opts = kb.BcdOptions(
            method=kb.METHOD_NEWTON if method == "newton" else kb.METHOD_BCD,
            with_bias=bool(self.bias),
            check=not (math.isfinite(lip) and lip > 0.0),
            max_newton=min(cap, 3) if polish else cap,
            max_epochs=int(eng.newton_epochs if method == "newton" else eng.max_epochs),
            anderson=int(eng.anderson),
            exact_rank=min(int(eng.exact_rank), GRAM_MAX_RANK),
            max_inner=int(eng.max_inner),
            C=float(self.C),
            lip=float(lip),
            tol=float(tol_in),
            ratio=float(eng.inner_ratio),
            scale=float(self.curvature_scale(smoothing)),
        )
        stats = np.zeros(kb.ST_LEN)
        bvec = np.array([b], dtype=np.float64)
        kb.solve_ws(
            opts,
            self.bank_rec,
            self.samples(smoothing),
            self.loss_rec,
            self.reg_rec,
            kb.bcd_state(ws, beta, z, bvec, stats),
        )
        return float(bvec[0]) if self.bias else 0.0, stats

    def newton_to_tol(
        self, ws: np.ndarray, beta: np.ndarray, b: float, z: np.ndarray, smoothing: float, tol_in: float
    ) -> tuple[float, np.ndarray, common.Certificate | None]:
        """Newton steps on a working set one call at a time, certifying after each: the run's
        ``tol`` ends them as well as ``tol_in`` and ``max_newton`` (on w8a, 39,799 points,
        the second of two steps, 3 s, took the gap from 5.6e-4 to 3.7e-4 for tol 1e-3).
        Returns the bias, the summed statistics, and the certificate of the final point when
        the tolerance ended the steps (else None)."""
        kb = self.kb
        total = np.zeros(kb.ST_LEN)
        while True:
            b, stats = self.solve_ws(ws, beta, b, z, smoothing, tol_in, "newton", 1)
            for k in (kb.ST_EPOCHS, kb.ST_NEWTON, kb.ST_LINE_SEARCH, kb.ST_ANDERSON, kb.ST_BACKTRACK, kb.ST_DECREASE):
                total[k] += stats[k]
            total[kb.ST_STATUS] = stats[kb.ST_STATUS]
            total[kb.ST_VIOLATION] = stats[kb.ST_VIOLATION]
            if (
                int(stats[kb.ST_STATUS]) != kb.CAPPED
                or stats[kb.ST_NEWTON] < 1.0
                or total[kb.ST_NEWTON] >= int(self.engine.max_newton)
            ):
                return b, total, None
            cert = self.certify(beta, b, smoothing)
            if cert.gap <= self.run.tol:
                return b, total, cert

    # -- main loop ------------------------------------------------------------------
    def start(self) -> tuple[np.ndarray, float]:
        """Zero with the zero solution's bias, or the warm start with its optimal bias."""
        if self.warm_start is None:
            return np.zeros(self.bank.total_rank), self.zero.bias
        beta = self.bank.coefficients(self.warm_start.alpha)
        b = 0.0
        if self.bias:
            b0 = float(self.warm_start.bias) if math.isfinite(self.warm_start.bias) else 0.0
            b = common.optimal_bias(self.loss, self.y, self.bank.expand(beta), b0, weights=self.sl.w)
        return beta, b

    def run_loop(self) -> SolveResult:
        """Outer iterations until :meth:`Run.check` ends the run; the incumbents' result."""
        st = self.begin()
        while self.run.status is None:
            self.iterate(st)
        st_primal = self.run.incumbents.primal_state
        if "beta" in st_primal:
            st_primal["alpha"] = self.bank.alpha_from_beta(st_primal.pop("beta"))
        return self.run.result(st.it)

    def begin(self) -> _Iterate:
        """The start certified and offered, and the run checked at iteration 0."""
        beta, b = self.start()
        smoothing = self.initial_smoothing()
        cert = self.certify(beta, b, smoothing)
        st = _Iterate(beta, b, smoothing, cert, MethodSwitch(self.method, cert.gap))
        self.offer(st)
        if not math.isfinite(cert.primal):
            self.run.end(Status.NUMERICAL_ERROR, 0, why=f"non-finite objective at the start (primal {cert.primal!r})")
        else:
            self.run.check(0, cert.gap)
        return st

    def offer(self, st: _Iterate) -> None:
        """Offer the certified point of ``st`` to the incumbents (its primal when lower)."""
        inc, c = self.run.incumbents, st.cert
        if math.isfinite(c.primal) and c.primal < inc.primal:
            inc.offer_primal(c.primal, st.it, beta=st.beta.copy(), bias=st.b, norms=c.norms)
        inc.offer_dual(c.dual, st.it, rho=c.rho)

    def iterate(self, st: _Iterate) -> None:
        """One outer iteration: choose the working set, solve it (and polish), certify, move
        the smoothing, record, choose the next inner solver, check the run."""
        run, kb = self.run, self.kb
        inc = run.incumbents
        score = self.scores(st.beta, st.cert.extra["grad"], st.smoothing)
        viol = float(np.max(score)) if score.size else 0.0
        if self.bias:
            viol = max(viol, abs(st.cert.extra["sum_u"]))
        ws = self.working_set(score, st.cert.norms)
        method = st.switch.method
        tol_in = float(self.engine.inner_ratio) * viol
        stats, ended, n_polish, failed = self.solve_set(st, ws, tol_in)
        prev_primal, prev_dual = inc.primal, inc.dual
        if not failed and not self.smooth:
            self.offer_kinks(inc, st.beta, st.b, st.smoothing, st.it)
        # the point newton_to_tol certified last is this one (no polish on that path)
        st.cert = ended if ended is not None and not failed else self.certify(st.beta, st.b, st.smoothing)
        cert = st.cert
        self.offer(st)
        st.z = None
        before = st.smoothing
        self.advance_smoothing(st)
        run.record(
            st.it,
            cert.primal,
            cert.dual,
            cert.gap,
            int(np.sum(cert.norms > 0)),
            ws_size=int(ws.size),
            violation=viol,
            epochs=int(stats[kb.ST_EPOCHS]),
            newton_steps=int(stats[kb.ST_NEWTON]),
            line_search=int(stats[kb.ST_LINE_SEARCH]),
            anderson=int(stats[kb.ST_ANDERSON]),
            polish_steps=n_polish,
            mu=before,
            method=method,
        )
        logger.debug(
            "bcd it=%d P=%.12g D=%.12g gap=%.3e ws=%d epochs=%d mu=%.3g",
            st.it,
            cert.primal,
            cert.dual,
            cert.gap,
            ws.size,
            int(stats[kb.ST_EPOCHS]),
            before,
        )
        progress = inc.primal < prev_primal or inc.dual > prev_dual or st.smoothing < before
        st.quiet = 0 if progress else st.quiet + 1
        # Newton's line search rejecting its steps down to nothing (the decrease at the
        # objective's rounding while the dual point still improves) is a stall too
        halvings = stats[kb.ST_LINE_SEARCH] / max(stats[kb.ST_NEWTON], 1.0)
        st.switch.update(halvings, cert.gap, st.smoothing == before)
        if failed or not math.isfinite(cert.primal):
            run.end(
                Status.NUMERICAL_ERROR, st.it, why=f"non-finite value in the working-set solve of iteration {st.it}"
            )
        else:
            run.check(
                st.it,
                cert.gap,
                stalled=(
                    f"no lower primal, higher dual or smaller smoothing in {st.quiet} iterations in a row"
                    if st.quiet >= STALL_ITERATIONS
                    else None
                ),
            )

    def solve_set(
        self, st: _Iterate, ws: np.ndarray, tol_in: float
    ) -> tuple[np.ndarray, common.Certificate | None, int, bool]:
        """Solve the working set ``ws`` to ``tol_in`` from ``st`` (then polish its support),
        counting the iteration; back at the start when a value is not finite.  Returns the
        jitted loop's statistics, the certificate of :meth:`newton_to_tol` (or None), the
        polish steps and whether the solve failed."""
        kb = self.kb
        saved = (st.beta.copy(), st.b)
        z = st.cert.extra["z"] if st.z is None else st.z
        # a new working set gets NEW_SET_NEWTON Newton steps: its solution changes the
        # scores that choose the next one
        fresh = st.prev_ws is None or not np.array_equal(ws, st.prev_ws)
        ended: common.Certificate | None = None
        # a smooth loss's working set is polished once it is met again (its support
        # settled): a new one changes the scores that choose the next
        polish = self.polish_on or (not fresh and st.cert.gap <= SMOOTH_POLISH_GAP and self.polishes(ws))
        if fresh or st.switch.method != "newton" or polish:
            st.b, stats = self.solve_ws(
                ws, st.beta, st.b, z, st.smoothing, tol_in, st.switch.method, NEW_SET_NEWTON if fresh else None, polish
            )
        else:
            st.b, stats, ended = self.newton_to_tol(ws, st.beta, st.b, z, st.smoothing, tol_in)
        st.prev_ws = ws
        st.it += 1
        failed = int(stats[kb.ST_STATUS]) == kb.NUMERICAL or not np.all(np.isfinite(st.beta))
        n_polish = 0
        if not failed and polish:
            st.b, n_polish = self.polish(st.beta, st.b, st.smoothing)
            failed = not (np.all(np.isfinite(st.beta)) and math.isfinite(st.b))
        if failed:
            st.beta, st.b = saved
        return stats, ended, n_polish, failed

    def advance_smoothing(self, st: _Iterate) -> None:
        """A non-smooth loss's smoothing, made smaller once the smoothed problem is solved
        (:meth:`next_smoothing`), and the start for it (:meth:`smoothing_start`)."""
        if not self.smooth and min(st.cert.gap, self.run.incumbents.gap) > self.run.tol:
            before = st.smoothing
            st.smoothing = self.next_smoothing(before, st.cert, self.run.tol)
            if st.smoothing < before:
                st.beta, st.b, st.z = self.smoothing_start(st.beta, st.b, before, st.smoothing)
