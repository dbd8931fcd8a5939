r"""The working-set loop of the bcd engine (docs/engines.md, bcd): every outer iteration
certifies the point, scores the blocks, solves the working set
(:func:`mklkit._jit.bcd.solve_ws`), polishes the support, moves the smoothing and chooses
the next inner solver (:class:`MethodSwitch`)."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from ...kernels.factor_arrays import GRAM_MAX_RANK
from ...problem import Problem
from ...result import SolveResult
from .. import common
from ..base import Algorithm, Run
from ..objectives import segment_norms
from .polish import SMOOTH_POLISH_GAP, Continuation, SupportPolish

if TYPE_CHECKING:
    from . import BCD

logger = logging.getLogger("mklkit.engines.bcd")

#: Outer iterations in a row without a lower primal, a higher dual or a smaller smoothing
#: before the solve is declared stalled.
STALL_ITERATIONS = 5
#: With ``method: newton``, STALL_SLOW outer iterations in a row that each leave the gap
#: above STALL_RATIO times the one before (same smoothing), or one whose Newton steps took
#: STALL_HALVINGS line-search halvings each (the jitted loop's ``LS_STALL``), send the next
#: working set to plain coordinate descent (``docs/tuned_constants.md``).
STALL_RATIO = 0.9
STALL_SLOW = 2
STALL_HALVINGS = 10
#: After a stall by halvings below this relative gap, where the objective's decrease nears
#: its rounding, the run stays with coordinate descent (``docs/tuned_constants.md``).
ROUNDING_GAP = 1e-6
#: Newton steps on a working set that differs from the last one (``max_newton`` on one met
#: before; ``docs/tuned_constants.md``).
NEW_SET_NEWTON = 1


@dataclasses.dataclass
class MethodSwitch:
    """The inner solver of the next working set (``method``): the run's (``base``), or
    ``bcd`` after a stall of proximal Newton."""

    base: str
    gap_before: float
    method: str
    #: the last Newton iteration's steps took STALL_HALVINGS line-search halvings each
    stuck: bool = False
    #: outer iterations in a row that moved the gap by less than STALL_RATIO
    slow: int = 0

    def update(self, halvings: float, gap: float, same_smoothing: bool) -> bool:
        """After an outer iteration (its line-search halvings per Newton step, the gap it
        left): whether it stalled, which sends the next working set to ``bcd``."""
        if self.method == "bcd":
            # back to Newton, unless its line search failed near the rounding level
            stalled = self.stuck and self.base != "bcd" and gap <= ROUNDING_GAP
            self.slow = 0
        else:
            self.stuck = halvings >= STALL_HALVINGS
            slower = same_smoothing and gap > STALL_RATIO * self.gap_before
            self.slow = self.slow + 1 if slower else 0
            stalled = same_smoothing and (self.slow >= STALL_SLOW or self.stuck)
        self.method = "bcd" if stalled else self.base
        self.gap_before = gap
        return stalled


@dataclasses.dataclass
class _Iterate:
    """What the outer iterations carry from one to the next."""

    beta: np.ndarray
    b: float
    #: the smoothing of a non-smooth loss (0 for a smooth one)
    smoothing: float
    cert: common.Certificate
    switch: MethodSwitch
    #: the predictions at (beta, b) when known without a pass
    z: np.ndarray | None = None
    it: int = 0
    #: iterations in a row without a lower primal, a higher dual or a smaller smoothing
    quiet: int = 0
    prev_ws: np.ndarray | None = None


class _BcdRun(Algorithm, Continuation, SupportPolish):
    """One solve: the problem unpacked for the jitted loops and the outer loop."""

    def __init__(self, engine: BCD, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        from ..._jit import bcd as kb  # the jitted loops, compiled (or loaded from the cache) on first use

        super().__init__(engine, problem, run, warm_start)
        self.set_up_loss(kb)
        self.f = self.bank.solver_arrays()
        self.method = engine.method if engine.method != "auto" else "newton"
        self.polish_on = engine.polish == "always" or (engine.polish == "auto" and not self.smooth)
        self.polish_cheap = engine.polish == "auto" and self.smooth

    # -- certificate ------------------------------------------------------------
    def certify(self, beta: np.ndarray, b: float, smoothing: float) -> common.Certificate:
        """Primal, dual and gap at ``(beta, b)`` from the exact predictions
        (:meth:`~mklkit.engines.smoothing.SmoothedLoss.certify_predictions`)."""
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        return self.certify_predictions(z, segment_norms(beta, self.f.starts), smoothing, self.bank.project)

    # -- working sets -------------------------------------------------------------
    def working_set(self, score: np.ndarray, norms: np.ndarray) -> np.ndarray:
        """The non-zero blocks and the most violating others, ``max(p0, 2 n_active)`` in all."""
        active = norms > 0.0
        size = min(self.M, max(int(self.engine.p0), 2 * int(np.sum(active))))
        key = np.where(active, np.inf, score)
        order = np.argsort(-key, kind="stable")[:size]
        order = order[(key[order] > 0.0) & (self.f.lip[order] > 0.0)]
        return np.ascontiguousarray(np.sort(order), dtype=np.int64)

    def solve_ws(self, st: _Iterate, ws, z, tol_in: float, method: str, max_newton=None, polish=False) -> np.ndarray:
        """One call of :func:`mklkit._jit.bcd.solve_ws` from ``st`` (``max_newton`` caps the
        engine's Newton steps; with ``polish`` the support's Newton steps follow), updating
        ``st.beta``, ``st.b`` and ``z``; returns its statistics."""
        kb, eng = self.kb, self.engine
        cap = int(eng.max_newton) if max_newton is None else min(int(eng.max_newton), max_newton)
        lip = self.curvature_scale(st.smoothing) if not self.smooth else self.lip_loss
        opts = kb.BcdOptions(
            method=kb.METHOD_NEWTON if method == "newton" else kb.METHOD_BCD,
            with_bias=bool(self.bias),
            check=not (math.isfinite(lip) and lip > 0.0),
            # with Newton steps on the support after it, descent only has to find the support
            max_newton=min(cap, 3) if polish else cap,
            max_epochs=int(eng.newton_epochs if method == "newton" else eng.max_epochs),
            anderson=int(eng.anderson),
            exact_rank=min(int(eng.exact_rank), GRAM_MAX_RANK),
            max_inner=int(eng.max_inner),
            C=float(self.C),
            lip=float(lip),
            tol=float(tol_in),
            ratio=float(eng.inner_ratio),
            scale=float(self.curvature_scale(st.smoothing)),
        )
        stats = np.zeros(kb.ST_LEN)
        bvec = np.array([st.b], dtype=np.float64)
        state = kb.bcd_state(ws, st.beta, z, bvec, stats)
        kb.solve_ws(opts, self.f.record, self.samples(st.smoothing), self.loss_rec, self.reg_rec, state)
        st.b = float(bvec[0]) if self.bias else 0.0
        return stats

    def newton_to_tol(
        self, st: _Iterate, ws: np.ndarray, z: np.ndarray, tol_in: float
    ) -> tuple[np.ndarray, common.Certificate | None]:
        """Newton steps on a working set one call at a time, certifying after each, until
        ``tol_in``, ``max_newton`` or the run's ``tol`` (w8a, 39,799 points: the second of two
        steps, 3 s, took the gap from 5.6e-4 to 3.7e-4 for tol 1e-3).  Returns the summed
        statistics and the certificate of the final point when the run's ``tol`` ended them."""
        kb = self.kb
        total = np.zeros(kb.ST_LEN)
        while True:
            stats = self.solve_ws(st, ws, z, tol_in, "newton", 1)
            for k in (kb.ST_EPOCHS, kb.ST_NEWTON, kb.ST_LINE_SEARCH, kb.ST_ANDERSON, kb.ST_BACKTRACK, kb.ST_DECREASE):
                total[k] += stats[k]
            total[kb.ST_STATUS] = stats[kb.ST_STATUS]
            total[kb.ST_VIOLATION] = stats[kb.ST_VIOLATION]
            if (
                int(stats[kb.ST_STATUS]) != kb.CAPPED
                or stats[kb.ST_NEWTON] < 1.0
                or total[kb.ST_NEWTON] >= int(self.engine.max_newton)
            ):
                return total, None
            cert = self.certify(st.beta, st.b, st.smoothing)
            if cert.gap <= self.run.tol:
                return total, cert

    # -- main loop ------------------------------------------------------------------
    def start(self) -> tuple[np.ndarray, float]:
        """Zero with the zero solution's bias, or the warm start with its optimal bias."""
        if self.warm_start is None:
            return np.zeros(self.bank.total_rank), self.zero.bias
        beta = self.bank.coefficients(self.warm_start.alpha)
        b = self.start_bias()
        if self.bias:
            b = common.optimal_bias(self.loss, self.y, self.bank.expand(beta), b, weights=self.sl.w)
        return beta, b

    def run_loop(self) -> SolveResult:
        """Outer iterations until the run ends; the incumbents' result."""
        beta, b = self.start()
        smoothing = self.initial_smoothing()
        cert = self.certify(beta, b, smoothing)
        st = _Iterate(beta, b, smoothing, cert, MethodSwitch(self.method, cert.gap, self.method))
        self.offer(st)
        error = None if math.isfinite(cert.primal) else f"non-finite objective at the start (primal {cert.primal!r})"
        self.run.check(0, cert.gap, error=error)
        while self.run.status is None:
            self.iterate(st)
        return self.run.result(st.it)

    def offer(self, st: _Iterate) -> None:
        """Offer the certified point of ``st`` to the incumbents (its primal when lower)."""
        inc, c = self.run.incumbents, st.cert
        if math.isfinite(c.primal) and c.primal < inc.primal:
            inc.offer_primal(c.primal, st.it, beta=st.beta.copy(), bias=st.b, norms=c.norms)
        inc.offer_dual(c.dual, st.it, rho=c.rho)

    def iterate(self, st: _Iterate) -> None:
        """One outer iteration: working set, solve (and polish), certificate, smoothing,
        record, next inner solver, check."""
        run, kb = self.run, self.kb
        inc = run.incumbents
        kappa = self.curvature_scale(st.smoothing)
        grad = common.as_vector(st.cert.extra["grad"])
        score = kb.block_scores(st.beta, grad, self.f.starts, kappa * self.f.lip, self.C, self.reg_rec)
        viol = float(np.max(score)) if score.size else 0.0
        if self.bias:
            viol = max(viol, abs(st.cert.extra["sum_u"]))
        ws = self.working_set(score, st.cert.norms)
        method = st.switch.method
        stats, ended, n_polish, failed = self.solve_set(st, ws, float(self.engine.inner_ratio) * viol)
        prev_primal, prev_dual = inc.primal, inc.dual
        if not failed and not self.smooth:
            self.offer_kinks(inc, st.beta, st.b, st.smoothing, st.it)
        # the point newton_to_tol certified last is this one (no polish on that path)
        st.cert = cert = ended if ended is not None and not failed else self.certify(st.beta, st.b, st.smoothing)
        self.offer(st)
        st.z = None
        before = st.smoothing
        self.advance_smoothing(st)
        rec = run.record(
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
            "bcd it=%(iteration)d P=%(objective).12g D=%(dual_objective).12g gap=%(gap).3e ws=%(ws_size)d "
            "epochs=%(epochs)d mu=%(mu).3g",
            rec,
        )
        progress = inc.primal < prev_primal or inc.dual > prev_dual or st.smoothing < before
        st.quiet = 0 if progress else st.quiet + 1
        # Newton's line search rejecting its steps down to nothing is a stall too
        halvings = stats[kb.ST_LINE_SEARCH] / max(stats[kb.ST_NEWTON], 1.0)
        st.switch.update(halvings, cert.gap, st.smoothing == before)
        quiet = f"no lower primal, higher dual or smaller smoothing in {st.quiet} iterations in a row"
        finite = not failed and math.isfinite(cert.primal)
        error = None if finite else f"non-finite value in the working-set solve of iteration {st.it}"
        run.check(st.it, cert.gap, stalled=quiet if st.quiet >= STALL_ITERATIONS else None, error=error)

    def solve_set(
        self, st: _Iterate, ws: np.ndarray, tol_in: float
    ) -> tuple[np.ndarray, common.Certificate | None, int, bool]:
        """Solve the working set ``ws`` to ``tol_in`` from ``st`` (then polish its support),
        back at the start when a value is not finite.  Returns the statistics, the
        certificate of :meth:`newton_to_tol` (or None), the polish steps and whether the
        solve failed."""
        kb = self.kb
        saved = (st.beta.copy(), st.b)
        z = st.cert.extra["z"] if st.z is None else st.z
        fresh = st.prev_ws is None or not np.array_equal(ws, st.prev_ws)
        ended: common.Certificate | None = None
        # a smooth loss's working set is polished once met again (its support settled)
        polish = self.polish_on or (not fresh and st.cert.gap <= SMOOTH_POLISH_GAP and self.polishes(ws))
        if fresh or st.switch.method != "newton" or polish:
            stats = self.solve_ws(st, ws, z, tol_in, st.switch.method, NEW_SET_NEWTON if fresh else None, polish)
        else:
            stats, ended = self.newton_to_tol(st, ws, z, tol_in)
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
        """A non-smooth loss's smoothing made smaller once the smoothed problem is solved, and
        the start for it."""
        if not self.smooth and min(st.cert.gap, self.run.incumbents.gap) > self.run.tol:
            before = st.smoothing
            st.smoothing = self.next_smoothing(before, st.cert, self.run.tol)
            if st.smoothing < before:
                st.beta, st.b, st.z = self.smoothing_start(st.beta, st.b, before, st.smoothing)
