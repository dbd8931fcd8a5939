r"""Engine ``proximal``: generalized iterative soft-thresholding with FISTA (docs/engines.md,
proximal).

Mosci, Santoro, Verri, Villa & Rosasco (2008), Algorithm 1
(``shared/papers/mosci2008_fenchel_prox_mkl.md``), in the product RKHS for every loss with
a differentiable primal and every regularizer (through its block prox), with the optional
:math:`\mu\|f\|^2_{\mathcal H}` of the paper's Remark 1 (``mu``), FISTA (Beck & Teboulle
2009) with gradient restart (O'Donoghue & Candès 2015), and screening of zero blocks.

Every step extrapolates, computes the gradient products of the blocks that are non-zero or
that screening admits, takes the prox-gradient step with the sufficient-decrease test and
updates the momentum; every ``gap_every`` steps the iterate is certified.
"""

from __future__ import annotations

import logging
import math
from typing import ClassVar, NamedTuple

import numpy as np

from .._jit import proximal as kprox
from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult, Status
from . import common
from .base import COMMON_PARAMS, Engine, Requires, Run
from .capabilities import ARRAY_BANK, FACTOR_BANK, SMOOTH_PRIMAL, needs
from .proximal_objective import Iterate, ProximalObjective, ScreeningBounds, embed, rows_in

__all__ = ["Proximal"]

logger = logging.getLogger("mklkit.engines.proximal")


class _Point(NamedTuple):
    r"""The FISTA point :math:`v = x + \beta(x - x_{\text{prev}})`: its support, prediction,
    bias, loss gradient ``r`` and its sum, loss values and their sum."""

    sup: np.ndarray
    z: np.ndarray
    b: float
    r: np.ndarray
    r_sum: float
    losses: np.ndarray
    F: float


class _Blocks:
    """The blocks one step computes: the zero blocks of ``v``, those screening admitted, all
    computed (sorted), their products :math:`K_mr`, their rows in the iterate, and ``v``'s
    coefficients and products on them."""

    __slots__ = ("zero", "admitted", "comp", "KR", "xrow", "V", "UV")

    def __init__(self, zero: np.ndarray, admitted: np.ndarray, comp: np.ndarray, KR: np.ndarray) -> None:
        self.zero, self.admitted, self.comp, self.KR = zero, admitted, comp, KR


class _Trial(NamedTuple):
    r"""One prox-gradient step: the blocks' scales (0: zero), the new coefficients, products,
    bias and prediction, :math:`\langle v - x^+, x^+ - x\rangle` and the test's verdict."""

    scale: np.ndarray
    A: np.ndarray
    U: np.ndarray
    b: float
    z: np.ndarray
    ip: float
    accepted: bool


class ProximalRun(ProximalObjective):
    """One solve: the iterate ``x`` and ``x_prev``, the curvature ``L`` (step ``1/L``), the
    FISTA sequence and momentum, the counters since the last record."""

    def run_loop(self) -> SolveResult:
        """Steps until the run ends; the incumbents' result."""
        run = self.run
        max_iter, gap_every = int(self.engine.max_iter), int(self.engine.gap_every)
        self.set_up()
        self.check_start()
        while run.status is None:
            v = self.extrapolated()
            if v is None:
                break
            if self.step_rule == "adaptive":
                self.L = max(self.L * self.shrink, self.L_floor)
            new = self.descend(v, self.blocks_for(v))
            if new is None:
                break
            self.x_prev, self.x = self.x, new
            self.it += 1
            if self.it % gap_every == 0 or self.it >= max_iter:
                self.check_gap()
        if self.checked != self.it:
            # stalled or a numerical error inside an iteration: certify the last iterate too
            self.offer(self.x, self.certificate(self.x), self.it)
        return run.result(self.it)

    def set_up(self) -> None:
        """One read of the bank (sum of kernels, Frobenius norms), the start, the first L."""
        eng = self.engine
        self.lower, self.upper = self.conj_domain()
        self.radius = float(self.reg.conj_radius(self.C)) if self.mu == 0.0 else math.inf
        lam, self.omega, frob = self.passes.summary(self.bias, eng.power_iter)
        lam *= float(eng.safety)
        self.screen = ScreeningBounds(np.sqrt(np.maximum(frob, 0.0)), self.N)
        self.x = self.x_prev = self.start()
        self.L, self.step_rule = self.first_curvature(lam)
        self.shrink = float(eng.shrink)
        self.L_floor = 1e-12 * self.L
        self.it = self.checked = 0
        self.t_fista = 1.0
        self.momentum = 0.0
        self.counts = {"n_restarts": 0, "n_backtracks": 0, "n_computed": 0}

    def start(self) -> Iterate:
        """Zero, or the warm start; the bias is optimal for the start's kernel part."""
        N = self.N
        if self.warm_start is not None:
            idx, A = self.warm_blocks()
            U, _ = self.passes.certificate_pass(
                idx, A, np.arange(idx.size, dtype=np.int64), np.zeros(N), np.zeros(idx.size, dtype=bool)
            )
            b0 = float(self.warm_start.bias) if self.bias else 0.0
        else:
            idx = np.zeros(0, dtype=np.int64)
            A = np.zeros((0, N))
            U = np.zeros((0, N))
            b0 = 0.0
        f0 = U.sum(axis=0) if idx.size else np.zeros(N)
        b = common.optimal_bias(self.loss, self.y, f0, b0, weights=self.sl.w) if self.bias else 0.0
        return Iterate(idx, A, U, b, f0 + b)

    def first_curvature(self, lam: float) -> tuple[float, str]:
        """The first L (the bound, or the curvature at the start) and the step rule."""
        step = self.engine.step
        L_loss = self.sl.deriv_lipschitz()
        if step != "backtracking" and math.isfinite(L_loss) and L_loss > 0.0:
            return L_loss * lam, step
        d2 = self.sl.deriv2(common.as_vector(self.x.z))
        c = float(np.max(np.abs(d2))) if d2.size else 0.0
        L = lam * (c if (c > 0.0 and math.isfinite(c)) else 1.0)
        return L, "adaptive" if step == "adaptive" else "backtracking"

    def check_start(self) -> None:
        """Certify the start; the run ends there if it is non-finite or within the gap."""
        run, x = self.run, self.x
        cert = self.certificate(x)
        self.offer(x, cert, 0)
        if not (math.isfinite(cert.primal) and not math.isnan(cert.gap)):
            run.end(Status.NUMERICAL_ERROR, 0, f"non-finite objective at the start (primal {cert.primal!r})")
        elif cert.gap <= run.tol:
            run.end(Status.CONVERGED, 0, f"at the start, {x.idx.size} active kernels", gap=cert.gap)

    def extrapolated(self) -> _Point | None:
        """The point ``v`` with its gradient and loss (None: non-finite, the run ended)."""
        x, xp, beta = self.x, self.x_prev, self.momentum
        if beta != 0.0:
            sup = np.union1d(x.idx, xp.idx).astype(np.int64)
            zv = x.z + beta * (x.z - xp.z)
            bv = x.b + beta * (x.b - xp.b)
        else:
            sup = x.idx
            zv, bv = x.z, x.b
        zv = common.as_vector(zv)
        r = self.sl.deriv(zv)
        gb = float(np.sum(r)) if self.bias else 0.0
        lv = self.sl.value(zv)
        Fv = float(np.sum(lv))
        if not (math.isfinite(Fv) and np.all(np.isfinite(r))):
            self.run.end(Status.NUMERICAL_ERROR, self.it, f"non-finite loss or gradient at iteration {self.it + 1}")
            return None
        return _Point(sup, zv, bv, r, gb, lv, Fv)

    def admitted(self, r: np.ndarray, zero: np.ndarray, eta: float) -> np.ndarray:
        """The zero blocks that the step from ``r`` may make non-zero (screening rule)."""
        if zero.size == 0 or not self.engine.screening:
            return zero
        bnd = self.screen.bounds(r, zero)
        fin = np.isfinite(bnd)
        may = ~fin
        if np.any(fin):
            # only an exact zero proves the block stays zero (NaN does not)
            may[fin] = ~(self.prox(eta * bnd[fin], eta) == 0.0)
        return zero[may]

    def gradient_products(self, r: np.ndarray, blocks_: np.ndarray) -> np.ndarray:
        """:math:`K_mr` of ``blocks_`` (rows), whose exact norms become screening references."""
        KR = self.passes.matvecs(r, blocks_)
        self.counts["n_computed"] += int(blocks_.size)
        if blocks_.size:
            self.screen.add(r, blocks_, np.sqrt(np.maximum(KR @ r, 0.0)))
        return KR

    def blocks_for(self, v: _Point) -> _Blocks:
        """The blocks to compute: non-zero in ``v``, or admitted by screening."""
        zero_mask = np.ones(self.M, dtype=bool)
        zero_mask[v.sup] = False
        zero = np.flatnonzero(zero_mask).astype(np.int64)
        cand = self.admitted(v.r, zero, 1.0 / self.L)
        comp = np.union1d(v.sup, cand).astype(np.int64) if cand.size else v.sup
        blk = _Blocks(zero, cand, comp, self.gradient_products(v.r, comp))
        self.extrapolate_blocks(blk)
        return blk

    def extrapolate_blocks(self, blk: _Blocks) -> None:
        """``v``'s coefficients and products on the computed blocks."""
        x, xp = self.x, self.x_prev
        blk.xrow = rows_in(x.idx, blk.comp)
        prow = rows_in(xp.idx, blk.comp) if self.momentum != 0.0 else np.full(blk.comp.size, -1, dtype=np.int64)
        blk.V, blk.UV = kprox.extrapolate(blk.xrow, x.A, x.U, prow, xp.A, xp.U, self.momentum)

    def admit_more(self, v: _Point, blk: _Blocks) -> None:
        """After L grew: compute any zero block that screening now admits (the zero test is
        independent of the step mathematically, not numerically)."""
        rest = np.setdiff1d(blk.zero, blk.admitted, assume_unique=True)
        extra = self.admitted(v.r, rest, 1.0 / self.L) if rest.size else rest
        if not extra.size:
            return
        KRx = self.gradient_products(v.r, extra)
        blk.admitted = np.union1d(blk.admitted, extra).astype(np.int64)
        new_comp = np.union1d(blk.comp, extra).astype(np.int64)
        KR = embed(blk.comp, blk.KR, new_comp)
        KR[np.searchsorted(new_comp, extra)] = KRx
        blk.comp, blk.KR = new_comp, KR
        self.extrapolate_blocks(blk)

    def descend(self, v: _Point, blk: _Blocks) -> Iterate | None:
        """Prox-gradient steps from ``v`` until one passes the sufficient-decrease test, L
        growing by ``backtrack`` after each failure; the new iterate (None: the run ended)."""
        eng = self.engine
        n_bt = 0
        while True:
            step = self.trial(v, blk, 1.0 / self.L)
            if step is None:
                return None
            if step.accepted:
                break
            n_bt += 1
            self.counts["n_backtracks"] += 1
            if n_bt > eng.max_backtrack:
                self.run.end(
                    Status.STALLED,
                    self.it,
                    f"the sufficient-decrease test failed {eng.max_backtrack} times "
                    f"in a row at iteration {self.it + 1} (L = {self.L:.3e})",
                )
                return None
            self.L *= float(eng.backtrack)
            self.admit_more(v, blk)
        keep = step.scale > 0.0
        new = Iterate(
            blk.comp[keep], np.ascontiguousarray(step.A[keep]), np.ascontiguousarray(step.U[keep]), step.b, step.z
        )
        self.update_momentum(v, new, step.ip)
        return new

    def trial(self, v: _Point, blk: _Blocks, eta: float) -> _Trial | None:
        """The prox-gradient step of length ``eta`` from ``v`` and its sufficient-decrease test
        (None: a non-finite block prox, the run ended)."""
        W, KW, nw = kprox.gradient_step(blk.V, blk.UV, v.r, blk.KR, eta)
        p = self.prox(nw, eta) if blk.comp.size else np.zeros(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            sc = np.where(nw > 0.0, p / nw, 0.0)
        if not np.all(np.isfinite(sc)):
            self.run.end(Status.NUMERICAL_ERROR, self.it, f"non-finite block prox at iteration {self.it + 1}")
            return None
        A_new, U_new, f_new, dist2, ip = kprox.prox_finish(sc, W, KW, blk.V, blk.UV, blk.xrow, self.x.U)
        b_new = v.b - (eta / self.omega) * v.r_sum if self.bias else 0.0
        z_new = f_new + b_new
        l_new = self.sl.value(z_new)
        dz = z_new - v.z
        breg = float(np.sum(l_new - v.losses - v.r * dz))
        if self.bias:
            dist2 += self.omega * (b_new - v.b) ** 2
        slack = 1e-12 * (abs(v.F) + abs(float(v.r @ dz))) + 1e-300
        accepted = math.isfinite(breg) and breg <= 0.5 * self.L * dist2 + slack
        return _Trial(sc, A_new, U_new, b_new, z_new, ip, accepted)

    def update_momentum(self, v: _Point, new: Iterate, ip: float) -> None:
        r"""FISTA with gradient restart: reset when :math:`\langle v - x^+, x^+ - x\rangle > 0`."""
        eng = self.engine
        if not eng.accelerated:
            return
        if self.bias:
            ip += self.omega * (v.b - new.b) * (new.b - self.x.b)
        if eng.restart == "gradient" and ip > 0.0:
            self.counts["n_restarts"] += 1
            self.t_fista = 1.0
            self.momentum = 0.0
        else:
            t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * self.t_fista * self.t_fista))
            self.momentum = (self.t_fista - 1.0) / t_next
            self.t_fista = t_next

    def check_gap(self) -> None:
        """Certify the iterate, offer it, record it (the counters start again) and let the run
        decide."""
        x, it, run = self.x, self.it, self.run
        c = self.certificate(x)
        self.checked = it
        self.offer(x, c, it)
        extra = {"step_size": 1.0 / self.L, "momentum": self.momentum, **self.counts}
        extra.update(n_exact_dual=c.extra["n_exact"], bias=c.extra["b_star"], step_rule=self.step_rule)
        self.counts = dict.fromkeys(self.counts, 0)
        run.record(it, c.primal, c.dual, c.gap, x.idx.size, **extra)
        args = (it, c.primal, c.dual, c.gap, x.idx.size, self.L)
        logger.debug("proximal it=%d P=%.12g D=%.12g gap=%.3e active=%d L=%.3g", *args)
        finite = math.isfinite(c.primal) and not math.isnan(c.gap)
        run.check(it, error=None if finite else f"non-finite objective (primal {c.primal!r}, dual {c.dual!r})")


class Proximal(Engine):
    """Generalized iterative soft-thresholding with FISTA (Mosci et al. 2008) for any loss with
    ``smooth_primal`` and any regularizer; ``max_iter`` counts proximal-gradient steps.

    The options are :attr:`params` (docs/engines.md, section proximal).
    """

    name: ClassVar[str] = "proximal"
    description: ClassVar[str] = (
        "proximal gradient (generalized iterative soft-thresholding, Mosci et al. 2008) "
        "with FISTA acceleration and adaptive restart; any loss with a differentiable primal"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 20000, "maximum number of proximal-gradient steps", type=int, low=1),
        Param(
            "step",
            "adaptive",
            "step size 1/L: 'lipschitz' keeps the bound deriv_lipschitz*lambda_max, "
            "'backtracking' starts from the curvature at the start point, 'adaptive' "
            "starts from the bound and tries L*shrink before every step; all grow L "
            "when the sufficient-decrease test fails",
            type=str,
            choices=("lipschitz", "backtracking", "adaptive"),
        ),
        Param("shrink", 0.5, "step 'adaptive': factor on L before every step", low=0.0, high=1.0, low_open=True),
        Param("accelerated", True, "FISTA momentum (false: the paper's plain iteration)", type=bool),
        Param("restart", "gradient", "momentum restart (O'Donoghue & Candes)", type=str, choices=("gradient", "none")),
        Param("mu", 0.0, "weight of the strictly convex term mu*||f||^2 (Remark 1)", low=0.0),
        Param("gap_every", 10, "iterations between duality-gap checks", type=int, low=1),
        Param("backtrack", 2.0, "factor by which L grows when the test fails", low=1.0, low_open=True, high=100.0),
        Param("max_backtrack", 60, "failed sufficient-decrease tests in a row before 'stalled'", type=int, low=1),
        Param("safety", 1.02, "factor applied to the power-iteration estimate of lambda_max", low=1.0, high=10.0),
        Param("power_iter", 100, "maximum number of power iterations for lambda_max", type=int, low=1),
        Param("screening", True, "skip zero blocks that provably stay zero", type=bool),
    )

    requires: ClassVar[Requires] = Requires(
        loss=(
            needs(SMOOTH_PRIMAL, why="the proximal-gradient method steps along the gradient of the loss; use spicy"),
        ),
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(
            needs(
                ARRAY_BANK,
                FACTOR_BANK,
                why="the proximal-gradient engine reads the kernels as one array or through their factors",
            ),
        ),
        sample_weight=True,
    )
    representations: ClassVar[tuple[str, ...]] = ("array", "factor")

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        return ProximalRun(self, problem, run, warm_start).run_loop()
