r"""Engine ``apg``: accelerated proximal gradient on the factor coordinates, on numpy or on a
device (docs/engines.md, apg).

With :math:`K_m = L_mL_m^\top` the MKL primal (SpicyMKL eq. 42) in :math:`\beta_m =
L_m^\top\alpha_m` is :math:`\min_{\beta, b} \sum_i w_i\ell(y_i, (L\beta)_i + b) + \sum_m
\tilde g_C(\|\beta_m\|)`.  Every step is FISTA (Beck & Teboulle 2009) in the block metric
:math:`D = \mathrm{diag}(s_m I_{r_m}, N)` with :math:`s_m \approx \|L_m\|_2^2` (so a block of a
narrow kernel is not held to the step of the widest): the gradient :math:`L^\top u` (one pass
over the bank), the block prox of the regularizer with step :math:`t/s_m`, the predictions
:math:`L\beta^+` (a second pass), the sufficient-decrease test in :math:`D` with backtracking on
:math:`t` and the momentum of Scheinberg, Goldfarb & Bai (2014), and a function-value restart of the
momentum (O'Donoghue & Candès 2015).  Once the non-zero blocks settle, Newton-CG steps on them
(:mod:`mklkit.engines.apg_newton`).  A non-smooth loss is replaced by its Moreau envelope, the
smoothing decreased as :mod:`bcd <mklkit.engines.bcd>` decreases it; the certificate is that of the
problem itself (:mod:`mklkit.engines.smoothing`).

The bank is a :class:`~mklkit.kernels.device.DeviceFactorBank` on the library and device of the
options (``device``, ``array_library``, ``precision``): the passes run there through the array
API, the vectors of N and M entries (the loss, the block prox, the certificate's projection) on
the host through the components' compiled kernels, so a plugin's loss or regularizer runs on
every device unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from typing import Any, ClassVar

import numpy as np

from ..components.params import Param, ParamError
from ..kernels.device import DEVICES, LIBRARIES, PRECISIONS, DeviceFactorBank, array_library, device_bank, parse_device
from ..kernels.errors import BankError
from ..problem import Problem
from ..result import SolveResult
from . import common
from .base import COMMON_PARAMS, Algorithm, Callback, Engine, Requires, Run, open_interval
from .capabilities import FACTOR_BANK
from .apg_newton import Point, SupportNewton
from .objectives import segment_norms
from .smoothing import SMOOTHING_PARAMS, SmoothedLoss, loss_reasons

__all__ = ["APG", "block_scales"]

logger = logging.getLogger("mklkit.engines.apg")

#: The working set grows once the problem restricted to it is solved to this fraction of the gap.
WS_INNER = 0.3

#: Newton steps on the non-zero blocks stop when one lowers the objective by less than this times
#: ``tol`` (relatively): those blocks are at their optimum, and the others are the accelerated steps'.
NEWTON_STALL = 1e-3

#: The smallest ``tol`` with ``precision: float32``: the passes round at about 1e-7 relatively,
#: which the dual block norms and the primal value carry into the gap.
FLOAT32_MIN_TOL = 1e-4


def block_scales(bank: DeviceFactorBank, n_iter: int, seed: int = 0) -> np.ndarray:
    r"""Estimates of :math:`\|L_m\|_2^2` (M,) by ``n_iter`` power iterations on every block at once
    on the device (two passes each; the blocks as one (M, r, N) array when their ranks are equal,
    else one block after the other); the metric needs their scale only, the backtracking keeps
    the steps safe.  A block of zero factors gets 1.  Kept in the bank (``kept``): the solves of a path
    on the same bank make them once."""
    key = ("apg.block_scales", int(n_iter), int(seed))
    if key in bank.kept:
        return bank.kept[key]
    xp = bank.xp
    rng = np.random.default_rng(seed)
    M = bank.shape[0]
    B = bank.blocks_x()
    if B is not None:
        blocks = [B]
    else:
        blocks = [bank.LT[int(s) : int(e), :][None, :, :] for s, e in zip(bank.starts[:-1], bank.starts[1:])]
    out = []
    for Bk in blocks:
        m, r = Bk.shape[0], Bk.shape[1]
        if r == 0:
            out.append(np.zeros(m))
            continue
        v = bank.to_x(rng.standard_normal((m, r)))
        v = v / xp.sqrt(xp.sum(v * v, axis=1, keepdims=True))
        lam = xp.zeros(m, dtype=bank.dtype, device=bank.lib.device)
        for _ in range(max(1, n_iter)):
            g = (Bk @ (xp.matrix_transpose(Bk) @ v[:, :, None]))[:, :, 0]
            lam = xp.sqrt(xp.sum(g * g, axis=1))  # |v| = 1
            v = g / xp.where(lam > 0.0, lam, 1.0)[:, None]
        out.append(bank.lib.host(lam))
    lam = np.concatenate(out) if out else np.zeros(M)
    bank.kept[key] = np.where((lam > 0.0) & np.isfinite(lam), lam, 1.0)
    return bank.kept[key]


class _ApgRun(Algorithm, SmoothedLoss, SupportNewton):
    """One solve: the bank's metric, the iterates, the step ``t``, the momentum, the smoothing."""

    def __init__(self, engine: APG, problem: Problem, run: Run, warm_start: SolveResult | None) -> None:
        from .._jit import bcd as kb  # the loss's evaluation, compiled (or loaded from the cache) on first use

        super().__init__(engine, problem, run, warm_start)
        self.set_up_loss(kb)
        self.dev: DeviceFactorBank = problem.bank
        self.lib, self.xp = self.dev.lib, self.dev.xp
        self.scales = block_scales(self.dev, int(engine.power_iter))
        self.s_bias = float(self.N)
        self.ws: np.ndarray | None = None
        self.ws_bank: tuple[DeviceFactorBank, Any] | None = None
        self.row_copies: dict[bytes, tuple[DeviceFactorBank, Any]] = {}  # SupportNewton.support_bank's
        self.counts = {"n_backtracks": 0, "n_restarts": 0, "n_passes": 0, "n_hessians": 0}

    def read(self, bank: DeviceFactorBank, times: int = 1) -> DeviceFactorBank:
        """``bank`` (the whole bank or some of its rows), its passes counted in ``n_passes`` as the share of
        the whole bank they read."""
        self.counts["n_passes"] += times * bank.total_rank / max(self.dev.total_rank, 1)
        return bank

    # -- the host side -------------------------------------------------------------
    def host(self, x: Any) -> np.ndarray:
        return self.lib.host(x)

    def loss_at(self, z: np.ndarray, smoothing: float) -> tuple[float, np.ndarray]:
        """The loss in use at host predictions ``z``: its sum and its derivatives."""
        vals, u, _ = self.eval_loss(z, smoothing, True, False)
        return float(np.sum(vals)), u

    def reg_value(self, norms: np.ndarray) -> float:
        return common.regularizer_value(self.reg, norms, self.C)

    # -- the start, the certificate --------------------------------------------------
    def start(self) -> Point:
        """Zero with the zero solution's bias, or the warm start with its optimal bias."""
        dev = self.dev
        if self.warm_start is None:
            beta = dev.to_x(np.zeros(dev.total_rank))
            b = self.zero.bias if self.bias else 0.0
            z = dev.to_x(np.full(self.N, b))
            return Point(beta, b, z)
        beta = dev.coefficients_x(np.asarray(self.warm_start.alpha, dtype=np.float64))
        f = self.host(dev.expand_x(beta))
        b = common.optimal_bias(self.loss, self.y, f, self.start_bias(), weights=self.sl.w) if self.bias else 0.0
        return Point(beta, b, dev.to_x(f + b))

    def certify(self, x: Point, smoothing: float) -> common.Certificate:
        """The certificate of ``x`` (:meth:`~mklkit.engines.smoothing.SmoothedLoss.certify_predictions`;
        the dual's projection is one pass on the device)."""
        self.read(self.dev)
        z, norms = self.host(x.z), self.dev.block_norms_of(x.beta)
        return self.certify_predictions(z, norms, smoothing, self.dev.project)

    def offer(self, x: Point, cert: common.Certificate, it: int) -> None:
        inc = self.run.incumbents
        if math.isfinite(cert.primal) and cert.primal < inc.primal:
            inc.offer_primal(cert.primal, it, beta=self.host(x.beta).copy(), bias=x.b, norms=cert.norms)
        inc.offer_dual(cert.dual, it, rho=cert.rho)

    # -- one step ------------------------------------------------------------------
    def gradient_at(self, x: Point, x_prev: Point, momentum: float, smoothing: float) -> Point | dict[str, str]:
        r"""The extrapolated point :math:`v = x + m(x - x_{prev})` (``momentum`` m) with its loss
        ``F``, derivatives ``u`` (host) and gradient ``g`` :math:`= L^\top u` (one pass)."""
        if momentum:
            v = Point(
                x.beta + momentum * (x.beta - x_prev.beta),
                x.b + momentum * (x.b - x_prev.b),
                x.z + momentum * (x.z - x_prev.z),
            )
        else:
            v = Point(x.beta, x.b, x.z)
        v.zh = self.host(v.z)
        v.F, v.u = self.loss_at(v.zh, smoothing)
        if not (math.isfinite(v.F) and np.all(np.isfinite(v.u))):
            return {"error": f"non-finite loss or gradient at step {self.it + 1}"}
        v.g = self.moving_gradient(v.u)
        v.g_b = float(np.sum(v.u)) if self.bias else 0.0
        return v

    def prox_step(self, v: Point, t: float, smoothing: float) -> Point | dict[str, str] | None:
        r"""The prox-gradient step of length :math:`t/s_m` per block from ``v``: the new point
        when the sufficient-decrease test in the metric :math:`D` holds, else None."""
        dev = self.dev
        eta = t / self.scales
        w = v.beta - dev.spread_x(dev.to_x(eta)) * v.g
        nw = self.dev.block_norms_of(w)
        sc = self.kb.block_prox_scales(nw, eta, self.C, self.reg_rec)
        if self.ws is not None:  # the blocks outside the working set stay at zero
            sc = np.where(self.ws, sc, 0.0)
        p = sc * nw
        if not np.all(np.isfinite(sc)):
            return {"error": f"non-finite block prox at step {self.it + 1}"}
        beta = dev.spread_x(dev.to_x(sc)) * w
        b = v.b - (t / self.s_bias) * v.g_b if self.bias else 0.0
        z = self.moving_predictions(beta) + b
        zh = self.host(z)
        F, _ = self.loss_at(zh, smoothing)
        quad = float(self.scales @ self.host(dev.block_squares_x(beta - v.beta))) + self.s_bias * (b - v.b) ** 2
        lin = float(v.u @ (zh - v.zh))
        slack = 1e-12 * (abs(v.F) + abs(lin)) + 1e-300
        if math.isfinite(F) and F <= v.F + lin + quad / (2.0 * t) + slack:
            return Point(beta, b, z, F, F + self.reg_value(p))
        return None

    def moving_gradient(self, u: np.ndarray) -> Any:
        r""":math:`L^\top u` on the blocks the steps move (one pass over the working set's rows, or the
        whole bank), zero on the others."""
        if self.ws_bank is None:
            return self.read(self.dev).project_x(self.dev.to_x(u))
        sub, _ = self.ws_bank
        return self.scatter(self.ws, self.read(sub).project_x(sub.to_x(u)))

    def moving_predictions(self, beta: Any) -> Any:
        r""":math:`L\beta` for ``beta`` zero outside the blocks the steps move (one pass over their rows)."""
        if self.ws_bank is None:
            return self.read(self.dev).expand_x(beta)
        sub, rows = self.ws_bank
        return self.read(sub).expand_x(self.xp.take(beta, rows))

    def step(self, x: Point, x_prev: Point, smoothing: float) -> Point | dict[str, str]:
        r"""One accelerated step with backtracking (Scheinberg, Goldfarb & Bai 2014): the trial
        step :math:`t` (the last one times ``grow``) sets the momentum through
        :math:`q^+ = (1 + \sqrt{1 + 4q^2 t_{prev}/t})/2`; when the test fails :math:`t` shrinks and
        the extrapolated point moves with it.  The new point, or why the run ends
        (``{"error": ...}`` or ``{"stalled": ...}``, the arguments of :meth:`Run.check`)."""
        eng = self.engine
        v: Point | dict[str, str] | None = None
        momentum = math.nan
        for _ in range(int(eng.max_backtrack) + 1):
            t = self.t
            q_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * self.q * self.q * self.t_prev / t))
            m = (self.q - 1.0) / q_new
            if v is None or m != momentum:  # the point moves with the momentum (not at q = 1)
                momentum = m
                v = self.gradient_at(x, x_prev, momentum, smoothing)
                if isinstance(v, dict):
                    return v
            new = self.prox_step(v, t, smoothing)
            if new is not None:
                if isinstance(new, Point):
                    self.q, self.t_prev = q_new, t
                return new
            self.t = t / float(eng.backtrack)
            self.counts["n_backtracks"] += 1
        return {
            "stalled": f"the sufficient-decrease test failed {eng.max_backtrack} times in a row at step {self.it + 1}"
        }

    # -- the loop --------------------------------------------------------------------
    def run_loop(self) -> SolveResult:
        """Steps until the run ends; the incumbents' result."""
        run, eng = self.run, self.engine
        gap_every = int(eng.gap_every)
        self.it = 0
        smoothing = self.initial_smoothing()
        x = self.start()
        cert = self.certify(x, smoothing)
        self.offer(x, cert, 0)
        error = None if math.isfinite(cert.primal) else f"non-finite objective at the start (primal {cert.primal!r})"
        run.check(0, cert.gap, error=error)
        x.obj = math.inf
        x_prev = x
        # the step of orthogonal blocks; backtracking finds the coupling's
        self.t = self.t_prev = 1.0 / self.curvature_scale(smoothing)
        self.grow_working_set(cert)
        self.q = 1.0
        support = None
        while run.status is None:
            new = self.step(x, x_prev, smoothing)
            if isinstance(new, dict):
                run.check(self.it, **new)
                break
            self.it += 1
            if new.obj > x.obj:  # restart: the momentum overshot
                self.counts["n_restarts"] += 1
                self.q = 1.0
            x_prev, x = x, new
            self.t *= float(eng.grow)
            if self.it % gap_every and self.it < run.max_iter:
                continue
            cert = self.check_gap(x, smoothing, "accelerated")
            if run.status is not None:
                break
            active = self.settle(cert)
            if active is not None and eng.newton and support is not None and np.array_equal(active, support):
                x, cert = self.polish(x, cert, smoothing)
                x_prev, self.q, x.obj = x, 1.0, math.inf
                if run.status is not None:
                    break
                active = self.settle(cert)
            support = active
            if run.status is None and not self.smooth:
                new_smoothing = self.next_smoothing(smoothing, cert, run.tol)
                if new_smoothing < smoothing:  # the step is kept: backtracking shrinks it where the curvature grew
                    smoothing, self.q, x.obj, support = new_smoothing, 1.0, math.inf, None
        return run.result(self.it)

    def grow_working_set(self, cert: common.Certificate) -> None:
        r"""The blocks the steps may move (the others held at zero): the non-zero ones and those whose
        prox-gradient step from zero would leave zero, most violating first, :math:`\max(p_0,
        2|\text{active}|)` in all (``ws_start``; skglm's and celer's working sets)."""
        M = cert.norms.size
        p0 = int(self.engine.ws_start)
        if p0 <= 0 or p0 >= M:
            self.ws = None
            return
        g = segment_norms(cert.extra["grad"], self.dev.starts)
        eta = self.t / self.scales
        score = self.kb.block_prox_scales(eta * g, eta, self.C, self.reg_rec) * g
        active = cert.norms > 0.0
        score = np.where(active, np.inf, score)
        size = min(M, max(p0, 2 * int(active.sum())))
        order = np.argsort(-score, kind="stable")[:size]
        ws = np.zeros(M, dtype=bool)
        ws[order[score[order] > 0.0]] = True
        self.ws = None if ws.all() else ws
        self.ws_bank = None if self.ws is None else self.support_bank(self.ws)

    def polish(self, x: Point, cert: common.Certificate, smoothing: float) -> tuple[Point, common.Certificate]:
        """Newton steps on the non-zero blocks (:meth:`~mklkit.engines.apg_newton.SupportNewton.newton_step`),
        each certified, until the run ends, a step fails or ``max_newton``; the last point and certificate."""
        for _ in range(int(self.engine.max_newton)):
            new = self.newton_step(x, smoothing)
            if new is None:
                break
            self.it += 1
            x, before = new, cert.primal
            cert = self.check_gap(x, smoothing, "newton")
            if self.run.status is not None or self.solved_within(cert):
                break
            if before - cert.primal <= NEWTON_STALL * self.run.tol * abs(cert.primal):
                break  # the optimum of these blocks: the steps that change them go on
        return x, cert

    def settle(self, cert: common.Certificate) -> np.ndarray | None:
        """The non-zero blocks of a certified point; None when the working set grew there (its problem
        solved, :meth:`solved_within`), so that the support has to be found again."""
        if self.solved_within(cert):
            self.grow_working_set(cert)
            return None
        return cert.norms > 0.0

    def solved_within(self, cert: common.Certificate) -> bool:
        """Whether the problem restricted to the working set is solved to a fraction of the gap
        (:data:`WS_INNER`; never without a working set)."""
        return self.ws is not None and self.gap_within(cert, self.ws) <= max(self.run.tol, WS_INNER * cert.gap)

    def check_gap(self, x: Point, smoothing: float, step: str) -> common.Certificate:
        """Certify ``x``, offer and record it (``step``: the kind of the steps since the last record)
        and let the run decide."""
        run, it = self.run, self.it
        cert = self.certify(x, smoothing)
        self.offer(x, cert, it)
        if not self.smooth:
            self.offer_kinks(x, smoothing, it)
        extra = {"step": step, "step_size": self.t, "mu": smoothing, **self.counts}
        self.counts = dict.fromkeys(self.counts, 0)
        run.record(it, cert.primal, cert.dual, cert.gap, int(np.sum(cert.norms > 0)), **extra)
        logger.debug("apg it=%d P=%.12g D=%.12g gap=%.3e t=%.3g %s", it, cert.primal, cert.dual, cert.gap, self.t, step)
        finite = math.isfinite(cert.primal) and not math.isnan(cert.gap)
        run.check(it, cert.gap, error=None if finite else f"non-finite objective (primal {cert.primal!r})")
        return cert


class APG(Engine):
    """Accelerated proximal gradient on the factor coordinates (FISTA in a block metric, with
    backtracking and restart), on numpy or an array library's device; non-smooth losses by
    smoothing; gap-certified.

    The options are :attr:`params` (docs/engines.md, section apg).
    """

    name: ClassVar[str] = "apg"
    description: ClassVar[str] = (
        "accelerated proximal gradient on a factor bank's coordinates (FISTA in a block metric, "
        "backtracking, restart): two passes over the bank per step, on numpy or a GPU "
        "(device: cuda, through PyTorch or CuPy); smoothing of non-smooth losses; gap-certified"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 20000, "maximum number of proximal-gradient steps", type=int, low=1),
        Param("device", "cpu", "where the factor bank and its passes are: 'cpu', 'cuda' or 'cuda:K'", type=str),
        Param(
            "array_library",
            "auto",
            "the array library that holds the bank: 'auto' (numpy on the cpu, else torch, else cupy), "
            "'numpy', 'torch', 'cupy', 'array_api_strict'",
            type=str,
            choices=LIBRARIES,
        ),
        Param(
            "precision",
            "float64",
            f"of the bank on the device: 'float32' halves its memory and passes, with tol >= {FLOAT32_MIN_TOL:g}",
            type=str,
            choices=PRECISIONS,
        ),
        Param("gap_every", 10, "steps between duality-gap checks", type=int, low=1),
        Param(
            "backtrack", 2.0, "factor by which the step shrinks when the test fails", low=1.0, low_open=True, high=100.0
        ),
        Param(
            "grow",
            1.0,
            "factor on the step before every step (1: steps only shrink, as in FISTA with backtracking)",
            low=1.0,
            high=10.0,
        ),
        Param("max_backtrack", 60, "failed sufficient-decrease tests in a row before 'stalled'", type=int, low=1),
        Param("power_iter", 10, "power iterations per block for the block metric", type=int, low=1),
        Param(
            "newton",
            True,
            "Newton-CG steps on the non-zero blocks once they are the same at two gap checks in a row",
            type=bool,
        ),
        Param(
            "ws_start",
            10,
            "blocks of the first working set (the steps move those only, and twice the non-zero ones as it "
            "grows); 0: every block at every step",
            type=int,
            low=0,
        ),
        Param("max_newton", 10, "Newton steps in a row on the non-zero blocks", type=int, low=1),
        Param("max_cg", 50, "conjugate-gradient products per Newton step", type=int, low=1),
        Param(
            "max_hessian_flops",
            4e9,
            "Newton systems formed and solved directly up to this cost (r_A^2 N + r_A^3/3 flops on the r_A "
            "coordinates of the non-zero blocks); dearer ones by conjugate gradients",
            low=0.0,
        ),
        Param(
            "cg_sketch",
            100,
            "rank of the Nystroem sketch of a Newton system that preconditions its conjugate gradients "
            "(with the diagonal it leaves); 0: the diagonal alone",
            type=int,
            low=0,
        ),
        Param("cg_tol", 0.1, "relative residual at which conjugate gradients stop", **open_interval(1.0)),
        *SMOOTHING_PARAMS,
    )
    requires: ClassVar[Requires] = Requires(
        regularizer=(common.SEPARABLE_SUMS,), bank=(FACTOR_BANK,), sample_weight=True
    )
    representations: ClassVar[tuple[str, ...]] = ("factor",)

    def _check(self) -> None:
        super()._check()
        if parse_device(self.device) is None:
            raise ParamError("device", self.device, DEVICES, owner=self.name)
        try:  # the library and the device there now, before a bank is built for a solve that cannot run
            array_library(self.device, self.array_library)
        except BankError as exc:
            err = ParamError(exc.key or "device", exc.value, exc.allowed or DEVICES, owner=self.name)
            err.args, err.problem = (f"{self.name}: {exc}",), exc.problem
            raise err from None
        if self.precision == "float32" and float(self.tol) < FLOAT32_MIN_TOL:
            raise ParamError(
                "tol",
                self.tol,
                f">= {FLOAT32_MIN_TOL:g} with precision float32 (its passes round at about 1e-7 relatively, which "
                "the gap carries; or precision float64)",
                owner=self.name,
            )

    def problem_reasons(self, problem: Problem) -> list[str]:
        """What the loss lacks of the kernels the engine calls (:func:`~mklkit.engines.smoothing.loss_reasons`)."""
        return loss_reasons(problem)

    def solve(
        self, problem: Problem, callback: Callback | None = None, warm_start: SolveResult | None = None
    ) -> SolveResult:
        """:meth:`Engine.solve` on the problem whose bank is held on the options' device (made
        once per bank): its zero solution, certificates and result read the bank there."""
        self.check_supported(problem)
        bank = device_bank(problem.bank, self.device, self.array_library, self.precision)
        return super().solve(dataclasses.replace(problem, K=bank), callback, warm_start)

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        from numba.core.errors import NumbaExperimentalFeatureWarning

        with warnings.catch_warnings():
            # the jitted loss evaluation takes the component kernels as first-class functions
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            return _ApgRun(self, problem, run, warm_start).run_loop()
