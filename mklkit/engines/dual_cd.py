r"""Engine ``dualcd``: dual coordinate descent with shrinking on a factor bank (Hsieh et al.
2008) for losses with a piecewise-linear conjugate, inside a majorize-minimize loop on the
kernel weights (SpicyMKL §4.1, eq. 44); ``docs/engines.md`` ("dualcd").
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .._jit import dual_cd as kd
from ..components.params import Param
from ..kernels.factor import FactorBank, sorted_csr
from ..kernels.factor_arrays import per_bank
from ..problem import Problem
from ..result import SolveResult
from . import common
from .base import COMMON_PARAMS, Algorithm, Engine, Run
from .capabilities import FACTOR_BANK, LINEAR_CONJUGATE, Requires, needs
from .objectives import segment_norms

#: Spread of projected gradients at which the first inner solve stops (liblinear's default);
#: later ones stop at EPS_RATIO times the larger of the gap per sample and FIRST_EPS times the
#: relative gap, never rising.
FIRST_EPS = 0.1
EPS_RATIO = 0.3
#: Weights below DROP times the largest are set to 0; a kernel that comes back starts at
#: RETURN_WEIGHT times the median weight in play.
DROP = 1e-12
RETURN_WEIGHT = 1e-2
#: Largest change of a weight's logarithm in one extrapolated update (a factor 100).
MAX_MOVE = math.log(100.0)
#: Outer iterations without a lower primal or a higher dual value before the run stalls.
STALL_ITERATIONS = 30

_WHY = "dual coordinate descent takes exact steps on a conjugate linear on each side of 0"


@per_bank
def sample_major(bank: FactorBank) -> Any:
    """The factors one row per sample, (N, R), C-ordered or CSR; kept while the bank lives."""
    return sorted_csr(bank.LT.T) if bank.sparse else np.ascontiguousarray(bank.LT.T)


class DualCD(Engine):
    """Dual coordinate descent with shrinking on a factor bank, for losses with a piecewise-linear
    conjugate (``docs/engines.md``, "dualcd"); the options are in :attr:`params`."""

    name: ClassVar[str] = "dualcd"
    description: ClassVar[str] = (
        "dual coordinate descent with shrinking on a factor bank for losses with a "
        "piecewise-linear conjugate (hinge, epsilon-insensitive), the regularizer through "
        "its kernel weights; gap-certified"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 1000, "maximum number of outer iterations (kernel-weight updates)", type=int, low=1),
        Param("max_epochs", 1000, "passes over the samples per outer iteration", type=int, low=1),
        Param(
            "max_stretch",
            64.0,
            "largest factor on a kernel weight's log-step (1: the plain majorize-minimize update)",
            low=1.0,
        ),
    )
    requires: ClassVar[Requires] = Requires(
        loss=(needs(LINEAR_CONJUGATE, why=_WHY),),
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(FACTOR_BANK,),
        sample_weight=True,  # the box of (w l)^*: w_i times the loss's
    )
    representations: ClassVar[tuple[str, ...]] = ("factor",)
    #: records before ``auto``'s stall rule applies (sonar, hinge + l1 at 0.04 C_max: the
    #: same gap after 4 and 8 weight updates, 1e-6 after about 25)
    stall_records: ClassVar[int] = 40

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        return _DualCDRun(self, problem, run, warm_start).loop()


class _DualCDRun(Algorithm):
    def __init__(self, engine: DualCD, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        super().__init__(engine, problem, run, warm_start)
        bank: FactorBank = self.bank
        self.starts = np.ascontiguousarray(bank.starts, dtype=np.int64)
        self.block_of = np.repeat(np.arange(self.M), np.diff(self.starts))
        Z = sample_major(bank)
        if bank.sparse:
            data = np.ascontiguousarray(Z.data, dtype=np.float64)
            self.rows = kd.Rows(np.zeros((0, 0)), data, Z.indices, Z.indptr, True, self.starts)
        else:
            none = np.zeros(0, dtype=np.int64)
            self.rows = kd.Rows(Z, np.zeros(0), none, none, False, self.starts)
        self.row_norms = kd.row_block_norms(self.rows, self.block_of, self.M)
        self.nonempty = self.row_norms.sum(axis=0) > 0.0  # the others never enter the passes
        # f_i(rho) = (w l)^*(y_i, -rho): slope -s_lo on [0, -lo], -s_hi on [-hi, 0]
        _, _, s_lo, s_hi = problem.loss.linear_pieces(self.y)
        lo, hi = self.conj_domain()
        pos_hi = common.as_vector(np.maximum(-lo, 0.0))
        neg_hi = common.as_vector(np.maximum(hi, 0.0))
        a_pos = common.as_vector(np.where(pos_hi > 0.0, -s_lo, 0.0))
        a_neg = common.as_vector(np.where(neg_hi > 0.0, -s_hi, 0.0))
        self.pieces = kd.Pieces(pos_hi, neg_hi, a_pos, a_neg)
        self.threshold = float(problem.regularizer.zero_threshold(self.C))
        self.seed = 0

    def weights_of(self, norms: np.ndarray) -> np.ndarray:
        """The regularizer's kernel weights :math:`d_m` at block norms."""
        return np.asarray(self.rk.weight(common.as_vector(norms), self.pr), dtype=np.float64)

    def start(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Weights, dual point and bias: the warm start's, else 1, 0 and the zero solution's bias."""
        warm, b = self.warm_start, self.start_bias()
        d = np.ones(self.M)
        rho = np.zeros(self.N)
        if warm is not None:
            x = np.asarray(warm.block_norms, dtype=np.float64)
            if np.any(x > 0.0):
                d = self.weights_of(x)
            if warm.dual is not None:
                rho = np.clip(np.asarray(warm.dual, dtype=np.float64), -self.pieces.neg_hi, self.pieces.pos_hi)
        d[~self.nonempty] = 0.0
        return d, rho, b

    def inner(self, d: np.ndarray, rho: np.ndarray, u: np.ndarray, b: float, eps: float) -> tuple[float, int]:
        """Passes at fixed weights until the projected gradients' spread is at most ``eps`` on all
        samples (``rho``, ``u`` in place); the bias and the number of passes."""
        c = d / self.C
        Q = common.as_vector(self.row_norms @ c)
        kappa = float(np.mean(Q)) if self.bias else 0.0
        play = kd.Play(np.flatnonzero(d > 0.0).astype(np.int64), common.as_vector(c[self.block_of]), Q, kappa)
        point = kd.Point(u, rho, np.array([float(np.sum(rho))]), np.arange(self.N, dtype=np.int64))
        n_idx = self.N
        hi_old, lo_old = math.inf, -math.inf
        for epoch in range(int(self.engine.max_epochs)):
            self.seed += 1
            n_idx, pg_max, pg_min = kd.epoch(self.rows, self.pieces, play, point, b, n_idx, hi_old, lo_old, self.seed)
            if self.bias:
                b += kappa * point.total[0]
            if pg_max - pg_min <= eps and abs(kappa * point.total[0]) <= eps:
                if n_idx == self.N:
                    return b, epoch + 1
                n_idx, hi_old, lo_old = self.N, math.inf, -math.inf  # all samples again
                continue
            hi_old = pg_max if pg_max > 0.0 else math.inf
            lo_old = pg_min if pg_min < 0.0 else -math.inf
        return b, int(self.engine.max_epochs)

    def primal(self, beta: np.ndarray, b: float, norms: np.ndarray) -> tuple[float, float]:
        """The lower primal value at ``(beta, b)`` and at the optimal bias for ``beta``; its bias."""
        f = self.bank.expand(beta)
        P = common.primal_value(self.problem, f + b, norms)
        if self.bias:
            b2 = common.optimal_bias(self.problem.loss, self.y, f, b, weights=self.sl.w)
            P2 = common.primal_value(self.problem, f + b2, norms)
            if P2 < P:
                P, b = P2, b2
        return P, b

    def certify(
        self, beta: np.ndarray, b: float, norms: np.ndarray, rho: np.ndarray, dual_norms: np.ndarray
    ) -> common.Certificate:
        """The lower primal at ``beta`` and at ``beta`` without the non-zero blocks whose dual
        norm is within the regularizer's threshold (zero at the optimum); the dual at ``rho``."""
        P, b = self.primal(beta, b, norms)
        idle = (norms > 0.0) & (dual_norms <= self.threshold)
        if np.any(idle) and self.threshold > 0.0:
            beta0 = beta.copy()
            beta0[idle[self.block_of]] = 0.0
            norms0 = np.where(idle, 0.0, norms)
            P0, b0 = self.primal(beta0, b, norms0)
            if P0 <= P:
                P, b, beta, norms = P0, b0, beta0, norms0
        return common.Certificate.at(self.problem, P, rho, norms, dual_norms=dual_norms, bias=b, beta=beta)

    def loop(self) -> SolveResult:
        """Inner solves and weight updates until the run ends; the incumbents' result."""
        run = self.run
        inc = run.incumbents
        d, rho, b = self.start()
        u = self.bank.project(rho)
        stretch = np.ones(self.M)
        last_step = np.zeros(self.M)
        eps = FIRST_EPS
        n_eff = float(self.N if self.sl.w is None else np.sum(self.sl.w))
        it = quiet = 0
        p_last = math.inf
        while run.status is None:
            b, epochs = self.inner(d, rho, u, b, eps)
            it += 1
            u = self.bank.project(rho)  # exact, every block
            dual_norms = segment_norms(u, self.starts)
            c = d / self.C
            beta = c[self.block_of] * u
            norms = c * dual_norms
            cert = self.certify(beta, b, norms, rho, dual_norms)
            before = (inc.primal, inc.dual)
            inc.offer_primal(cert.primal, it, beta=cert.extra["beta"], bias=cert.extra["bias"], norms=cert.norms)
            inc.offer_dual(cert.dual, it, rho=cert.rho)
            quiet = 0 if (inc.primal, inc.dual) != before else quiet + 1
            n_nonzero, in_play = int(np.sum(cert.norms > 0.0)), int(np.sum(d > 0.0))
            run.record(it, cert.primal, cert.dual, cert.gap, n_nonzero, epochs=epochs, eps=eps, kernels_in_play=in_play)
            finite = math.isfinite(cert.primal) and np.all(np.isfinite(rho))
            error = None if finite else f"non-finite values at iteration {it}"
            stalled = f"no lower primal or higher dual value in {quiet} iterations in a row"
            if run.check(it, cert.gap, stalled=stalled if quiet >= STALL_ITERATIONS else None, error=error):
                break
            slack = 0.01 * max(inc.primal - inc.dual, 0.0)
            if cert.primal > p_last + slack:
                stretch[:] = 1.0  # it overshot: plain steps again
            p_last = min(p_last, cert.primal)
            d, stretch, last_step = self.next_weights(d, norms, dual_norms, stretch, last_step)
            gap_abs = max(min(inc.primal, cert.primal) - max(inc.dual, cert.dual), 0.0)
            gap_rel = gap_abs / max(abs(min(inc.primal, cert.primal)), 1e-300)
            eps = max(min(eps, EPS_RATIO * max(gap_abs / max(n_eff, 1.0), FIRST_EPS * gap_rel)), 1e-12)
        return run.result(it)

    def next_weights(
        self, d: np.ndarray, norms: np.ndarray, dual_norms: np.ndarray, stretch: np.ndarray, last_step: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The weights of the new block norms, extrapolated, dropped and brought back; the
        stretch factors and the log-steps."""
        new = self.weights_of(norms)
        moving = (d > 0.0) & (new > 0.0)
        step = np.zeros(self.M)
        step[moving] = np.log(new[moving] / d[moving])
        same = (np.sign(step) == np.sign(last_step)) & (step != 0.0)
        stretch = np.where(same, np.minimum(1.5 * stretch, float(self.engine.max_stretch)), 1.0)
        move = np.clip(stretch[moving] * step[moving], -MAX_MOVE, MAX_MOVE)
        new[moving] = d[moving] * np.exp(move)
        top = float(np.max(new)) if new.size else 0.0
        new[(new < DROP * top) & (dual_norms <= self.threshold)] = 0.0
        # back in play: above the threshold by more than half the tolerance (the dual point,
        # scaled into the ball, loses less)
        over = self.threshold * (1.0 + 0.5 * self.run.tol) if self.threshold > 0 else 0.0
        back = (new == 0.0) & (dual_norms > over) & self.nonempty
        if np.any(back):
            held = new[new > 0.0]
            new[back] = RETURN_WEIGHT * (float(np.median(held)) if held.size else 1.0)
        return new, stretch, step
