r"""Proximal-gradient engine: generalized iterative soft-thresholding with FISTA.

Mosci, Santoro, Verri, Villa & Rosasco (2008), "A new algorithm to learn an
optimal kernel based on Fenchel duality" (``shared/papers/mosci2008_fenchel_prox_mkl.md``),
Algorithm 1, run in the product RKHS :math:`\mathcal H = \mathcal H_1 \times
\dots \times \mathcal H_M` for every loss with a differentiable primal
(``loss.smooth_primal``) and every regularizer (through its block prox).

The problem (SpicyMKL eq. 42 in representer form, :math:`f_m = \sum_i
\alpha_{m,i} k_m(x_i, \cdot)`, :math:`\|f_m\|_{\mathcal H_m} = \|\alpha_m\|_{K_m}`)

.. math::
    \min_{\alpha, b}\ F(\alpha, b) + \sum_m \tilde g_C(\|\alpha_m\|_{K_m})
        + \mu \sum_m \|\alpha_m\|_{K_m}^2,
    \qquad F = \sum_i \ell\big(y_i, z_i\big),\quad z = \sum_m K_m\alpha_m + b,

where the last term is the optional :math:`\mu\|f\|^2_{\mathcal H}` of the
paper's Remark 1 (``mu``, default 0).

Relation to the paper
---------------------
The paper minimizes :math:`\frac1n\|S_x f - y\|^2 + 2\tau J(f)` with
:math:`J(f) = \sum_m\|f_m\|`.  Multiplying by ``n`` gives mklkit's
squared loss :math:`\sum_i (y_i - z_i)^2` with the block 1-norm and
:math:`C = 2\tau n`.  The paper's step :math:`f - \frac{1}{2\sigma}\nabla F`
on the :math:`\frac1n`-scaled objective is the step :math:`\eta = 1/(2\sigma
n)` here, and its threshold :math:`\tau/\sigma` equals :math:`\eta C`.

Iteration
---------
The functional gradient of :math:`F` in :math:`\mathcal H_m` is
:math:`\sum_i r_i k_m(x_i,\cdot)` with :math:`r = \partial_z\ell(y, z)`
(``loss.jit.deriv``): its coefficients are ``r`` in every block.  One
proximal-gradient step from a point :math:`(v, b_v)` is

.. math::
    w_m = v_m - \eta r, \qquad
    \alpha_m^+ = w_m\,\frac{\mathrm{prox}(\|w_m\|_{K_m} \mid \tilde g_{\eta C})}{\|w_m\|_{K_m}},
    \qquad b^+ = b_v - \frac{\eta}{\omega}\mathbf 1^\top r,

using :math:`\eta\,\tilde g_C = \tilde g_{\eta C}` (the regularizer's
``prox`` kernel is called with :math:`C' = \eta C`).  For ``l1`` this is the
generalized soft-thresholding :math:`\hat S_{\eta C}` of the paper.  With
:math:`\mu > 0` the prox of :math:`\eta(\tilde g_C(x) + \mu x^2)` is
:math:`\mathrm{prox}(x/c \mid \tilde g_{\eta C/c})` with :math:`c = 1 + 2\eta\mu`.

The bias is unregularized; it is measured with the metric
:math:`\omega b^2`, :math:`\omega = N/\lambda_{\max}(\sum_m K_m)`, so that the
direction of the constant (eigenvalue ``N`` of :math:`\mathbf 1\mathbf 1^\top`)
does not dictate the step length.  The gradient of :math:`F` in this metric
is Lipschitz with

.. math::
    L = \sup|\partial_z^2\ell| \cdot \lambda_{\max}\Big(\sum_m K_m
        + \omega^{-1}\mathbf 1\mathbf 1^\top\Big),

the first factor being ``loss.deriv_lipschitz()`` and the second a power
iteration on the :math:`N\times N` sum, times a safety factor.

Every step is checked with the sufficient-decrease test of the smooth part
(Beck & Teboulle 2009), which costs :math:`O(MN)` because
:math:`u_m = K_m\alpha_m` is carried along:

.. math::
    F(x^+) \le F(v) + \langle\nabla F(v), x^+ - v\rangle + \tfrac L2\|x^+ - v\|^2,
    \quad \langle\nabla F(v), x^+ - v\rangle = r^\top(z^+ - z_v).

If it fails, :math:`L` is multiplied by ``backtrack``.  ``step`` chooses
the rule:

* ``adaptive`` (default): start from the bound and try :math:`L\cdot`
  ``shrink`` before every step (back-tracking that may also decrease,
  Scheinberg, Goldfarb & Bai 2014).  A failed trial needs no new product
  with the bank, and the curvature on the active kernels is often far below
  the bound.
* ``lipschitz``: the bound, fixed; the test only guards against an
  under-estimated :math:`\lambda_{\max}`.
* ``backtracking``: monotone back-tracking from the curvature at the start
  (also used whenever ``deriv_lipschitz()`` is infinite).

Acceleration (FISTA, Beck & Teboulle 2009) is on by default
(``accelerated``); ``accelerated: false`` is the paper's plain iteration.
The momentum is reset when :math:`\langle v - x^+, x^+ - x\rangle > 0`
(gradient restart of O'Donoghue & Candès 2015; ``restart: gradient``).

Cost and screening
------------------
With :math:`u_m` carried along, the extrapolation and the block norms
:math:`\|w_m\|_{K_m}^2 = w_m^\top(u_{v,m} - \eta K_m r)` cost :math:`O(N)`
per block, so an iteration reads each Gram matrix at most once, for
:math:`K_m r` (``blocks.matvecs_subset``, parallel over kernels).

A block whose point :math:`v_m` is zero is skipped when it provably stays
zero: with a reference vector ``q`` whose norm :math:`\|q\|_{K_m}` was
computed exactly earlier,

.. math::
    \|r\|_{K_m} \le \|q\|_{K_m} + \sqrt{\|K_m\|_F}\,\min(\|r - q\|_2, \|r + q\|_2)
        =: B_m,

and if :math:`\mathrm{prox}(\eta B_m \mid \tilde g_{\eta C}) = 0` then, the prox
being non-decreasing, :math:`\alpha_m^+ = 0` without computing
:math:`K_m r`.  References are the gradient ``r`` of the last iteration
that computed the block and the dual point of the last gap check.  Only
sparse regularizers (``l1``, ``elasticnet`` with ``lam < 1``) ever skip a
block.

Duality gap
-----------
Every ``gap_every`` iterations (and at the end) the current iterate is
certified the way of ``spicy`` (SpicyMKL §6.1): the bias is replaced by
:math:`b^\star = \arg\min_b \sum_i\ell(y_i, f_i + b)` (a scalar Newton;
this only lowers the primal objective), the dual point is
:math:`\rho = -\partial_z\ell(y, f + b^\star)`, which then lies inside the
domain of the loss conjugate and has :math:`\mathbf 1^\top\rho = 0` up to
rounding (the rest is removed by the projection onto the zero sum in the
box, :func:`~mklkit.engines.common.centre_dual`), and
:meth:`Certificate.at <mklkit.engines.common.Certificate.at>` scales it and
assembles the gap.  Its block norms are computed exactly except for blocks whose
bound :math:`B_m` already gives :math:`\tilde g_C^*(B_m) = 0` inside the
conjugate's domain (then the exact norm gives the same dual value).  The
primal objective :math:`P(\alpha, b^\star)` is recomputed from an exact
:math:`K_m\alpha_m` in the same read of the bank.  With :math:`\mu > 0`
the dual uses the conjugate of :math:`\tilde g_C(x) + \mu x^2`,
:math:`h^*(y) = x^\star y - \tilde g_C(x^\star) - \mu x^{\star2}` with
:math:`x^\star = \mathrm{prox}(y/(2\mu) \mid \tilde g_{C/(2\mu)})`, whose domain is
unbounded; objective, dual and gap then all refer to the problem with the
:math:`\mu` term.
"""
from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import numpy as np

from .._jit import proximal as kprox
from ..components.params import Param
from ..problem import Problem
from ..result import SolveResult, Status
from . import common
from .base import COMMON_PARAMS, Algorithm, Engine, Requires, Run, needs
from .capabilities import ARRAY_BANK, FACTOR_BANK, SMOOTH_PRIMAL
from .proximal_passes import lipschitz_estimate, passes_for, power_iteration

__all__ = ["Proximal", "PROXIMAL_ENGINES", "lipschitz_estimate", "power_iteration"]

logger = logging.getLogger(__name__)

class _Iterate:
    """A primal point in compact form: the non-zero blocks only."""

    __slots__ = ("idx", "A", "U", "b", "z")

    def __init__(self, idx: np.ndarray, A: np.ndarray, U: np.ndarray, b: float,
                 z: np.ndarray) -> None:
        self.idx = idx        # (P,) int64, sorted: non-zero blocks
        self.A = A            # (P, N) coefficients alpha_m
        self.U = U            # (P, N) K_m alpha_m, carried along
        self.b = b
        self.z = z            # (N,) sum_m u_m + b


def _embed(src_idx: np.ndarray, rows: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """Rows of ``src_idx`` placed at their positions in the sorted superset ``dst_idx``."""
    out = np.zeros((dst_idx.size, rows.shape[1] if rows.ndim == 2 else 0))
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = rows
    return out


class _Screen:
    r"""Upper bounds of :math:`\|v\|_{K_m}` from exactly known norms of reference vectors.

    :math:`\|v\|_{K_m} \le \|q\|_{K_m} + \sqrt{\|K_m\|_F}\min(\|v-q\|, \|v+q\|)`
    (triangle inequality for the seminorm, :math:`\lambda_{\max}(K_m) \le
    \|K_m\|_F`).  A relative margin of :math:`10^{-10}` covers the rounding
    of the stored norms.  Block ``m`` refers to reference ``ref_id[m]``
    (-1: none, bound ``inf``); references no block uses are dropped.
    """

    def __init__(self, lsq: np.ndarray, N: int) -> None:
        self.lsq = lsq
        M = lsq.size
        self.ref_id = np.full(M, -1, dtype=np.int64)
        self.ref_norm = np.full(M, np.inf)
        self.Q = np.zeros((8, N))
        self.n = 0

    def add(self, vec: np.ndarray, blocks_: np.ndarray, norms: np.ndarray) -> None:
        if blocks_.size == 0:
            return
        if self.n == self.Q.shape[0]:
            self.compact()
            if self.n == self.Q.shape[0]:
                self.Q = np.concatenate([self.Q, np.zeros_like(self.Q)])
        self.Q[self.n] = vec
        self.ref_id[blocks_] = self.n
        self.ref_norm[blocks_] = norms
        self.n += 1

    def bounds(self, v: np.ndarray, blocks_: np.ndarray) -> np.ndarray:
        out = np.full(blocks_.size, np.inf)
        if blocks_.size == 0 or self.n == 0:
            return out
        ids = self.ref_id[blocks_]
        has = ids >= 0
        if not np.any(has):
            return out
        Q = self.Q[:self.n]
        d_minus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q - v, Q - v), 0.0))
        d_plus = np.sqrt(np.maximum(np.einsum("ij,ij->i", Q + v, Q + v), 0.0))
        dist = np.minimum(d_minus, d_plus)
        b = blocks_[has]
        lsq = self.lsq[b]
        vn = float(np.sqrt(v @ v))
        out[has] = (self.ref_norm[b] + lsq * dist[ids[has]]) * (1.0 + 1e-10) + 1e-12 * lsq * vn
        return out

    def compact(self) -> None:
        """Drop reference vectors that no block uses any more."""
        if self.n == 0:
            return
        used = np.unique(self.ref_id[self.ref_id >= 0])
        if used.size == self.n:
            return
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        self.Q[:used.size] = self.Q[used]
        self.n = int(used.size)
        has = self.ref_id >= 0
        self.ref_id[has] = remap[self.ref_id[has]]


class Proximal(Engine):
    r"""Generalized iterative soft-thresholding with FISTA (Mosci et al. 2008).

    Solves the primal for any loss with ``smooth_primal`` (squared,
    logistic, plugin losses such as ``huber``) and any regularizer, through
    its block prox.  ``max_iter`` counts proximal-gradient steps.

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop (SpicyMKL §6.1).
    max_iter : int
        Maximum number of proximal-gradient steps.
    step : {"lipschitz", "backtracking"}
        Start from the Lipschitz bound ``deriv_lipschitz() * lambda_max`` or
        from the curvature at the start point; either way :math:`L` grows by
        ``backtrack`` whenever the sufficient-decrease test fails.
    accelerated : bool
        FISTA momentum (the paper's plain iteration when False).
    restart : {"gradient", "none"}
        Adaptive momentum restart (O'Donoghue & Candès 2015).
    mu : float
        Weight of the :math:`\mu\|f\|^2` term of Remark 1 (included in the
        objective, the dual and the gap).
    gap_every : int
        Iterations between duality-gap checks.
    backtrack : float
        Factor by which :math:`L` grows when the test fails.
    max_backtrack : int
        Failed tests in a row after which the solve is declared stalled.
    safety : float
        Factor applied to the power-iteration estimate of :math:`\lambda_{\max}`.
    power_iter : int
        Maximum number of power iterations.
    screening : bool
        Skip zero blocks that provably stay zero.
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
        Param("step", "adaptive",
              "step size 1/L: 'lipschitz' keeps the bound deriv_lipschitz*lambda_max, "
              "'backtracking' starts from the curvature at the start point, 'adaptive' "
              "starts from the bound and tries L*shrink before every step; all grow L "
              "when the sufficient-decrease test fails",
              type=str, choices=("lipschitz", "backtracking", "adaptive")),
        Param("shrink", 0.5, "with step 'adaptive': factor applied to L before every step",
              low=0.0, high=1.0, low_open=True),
        Param("accelerated", True, "FISTA momentum (false: the paper's plain iteration)",
              type=bool),
        Param("restart", "gradient", "adaptive momentum restart (O'Donoghue & Candes)",
              type=str, choices=("gradient", "none")),
        Param("mu", 0.0, "weight of the strictly convex term mu*||f||^2 (Remark 1)", low=0.0),
        Param("gap_every", 10, "iterations between duality-gap checks", type=int, low=1),
        Param("backtrack", 2.0, "factor by which L grows when the sufficient-decrease test fails",
              low=1.0, low_open=True, high=100.0),
        Param("max_backtrack", 60, "failed sufficient-decrease tests in a row before 'stalled'",
              type=int, low=1),
        Param("safety", 1.02, "factor applied to the power-iteration estimate of lambda_max",
              low=1.0, high=10.0),
        Param("power_iter", 100, "maximum number of power iterations for lambda_max",
              type=int, low=1),
        Param("screening", True, "skip zero blocks that provably stay zero", type=bool),
    )

    requires: ClassVar[Requires] = Requires(
        loss=(needs(SMOOTH_PRIMAL, why="the proximal-gradient method steps along the gradient "
                                       "of the loss; use spicy"),),
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(needs(ARRAY_BANK, FACTOR_BANK,
                    why="the proximal-gradient engine reads the kernels as one array or "
                        "through their factors"),),
        sample_weight=True,  # the loss enters through SampleLoss only
    )
    representations: ClassVar[tuple[str, ...]] = ("array", "factor")

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Accelerated proximal gradient (the class docstring); a ``warm_start``'s α and b
        start the solve."""
        return _Run(self, problem, run, warm_start).run_loop()


class _Run(Algorithm):
    """State of one proximal-gradient solve."""

    def __init__(self, engine: Proximal, problem: Problem, run: Run,
                 warm_start: SolveResult | None) -> None:
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
        return np.asarray(self.rk.prox(common.as_vector(v / c), eta * self.C / c, self.pr),
                          dtype=np.float64)

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
        x = np.asarray(self.rk.prox(common.as_vector(ynorm / c2), self.C / c2, self.pr),
                       dtype=np.float64)
        gx = np.asarray(self.rk.value(common.as_vector(x), self.C, self.pr), dtype=np.float64)
        return x * ynorm - gx - self.mu * x * x

    # -- certificate ----------------------------------------------------------
    def certificate(self, x: _Iterate) -> common.Certificate:
        """Exact primal at (alpha, b*) and the projected dual (module docstring)."""
        y = self.y
        f_approx = x.z - x.b
        b_star = 0.0
        if self.bias:
            b_star = common.optimal_bias(self.loss, y, f_approx, x.b, weights=self.sl.w)
        rho = -self.deriv(common.as_vector(f_approx + b_star))
        if self.bias:        # the rounding residue of the sum, removed inside the box
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
        arow = np.full(sel.size, -1, dtype=np.int64)
        if x.idx.size:
            arow[np.searchsorted(sel, x.idx)] = np.arange(x.idx.size)
        want = need[sel]
        KA, nr = self.passes.certificate_pass(sel, x.A.reshape(x.idx.size, self.N), arow, rho,
                                              want)
        norms_rho = bnd.copy()
        norms_rho[sel[want]] = nr[want]
        self.screen.add(rho, sel[want], nr[want])
        self.screen.compact()
        # exact primal.  The carried u_m = K_m alpha_m are not replaced: alpha_m
        # may carry components in the null space of K_m (invisible to the
        # objective) that make a fresh product differ from u_m by rounding, and
        # mixing the two would perturb the momentum x - x_prev.
        norms = np.sqrt(np.maximum(np.einsum("ij,ij->i", x.A, KA), 0.0)) if x.idx.size \
            else np.zeros(0)
        f = KA.sum(axis=0) if x.idx.size else np.zeros(self.N)
        zs = f + b_star if self.bias else f
        P = float(np.sum(self.loss_values(common.as_vector(zs)))) + self.reg_value(norms)
        # dual
        extra = {"b_star": b_star, "n_exact": int(np.sum(want))}
        if self.mu == 0.0:
            return common.Certificate.at(self.problem, P, rho, norms, dual_norms=norms_rho,
                                         **extra)
        # the conjugate of g_C + mu x^2 has an unbounded domain: rho is feasible as it is
        D = -common.loss_conjugate(self.loss, y, rho, self.sl.w) - float(np.sum(self.reg_conj(norms_rho)))
        return common.Certificate.of(P, D, rho, norms, **extra)

    def offer(self, x: _Iterate, cert: common.Certificate, it: int) -> None:
        """Offer a certified iterate to the incumbents (the gap uses the best of each)."""
        alpha = norms = None
        if math.isfinite(cert.primal) and cert.primal < self.run.incumbents.primal:
            alpha = np.zeros((self.M, self.N))
            norms = np.zeros(self.M)
            if x.idx.size:
                alpha[x.idx] = x.A
                norms[x.idx] = cert.norms
        self.run.offer(it, primal=cert.primal if alpha is not None else None, alpha=alpha,
                       bias=cert.extra["b_star"], norms=norms, dual=cert.dual, rho=cert.rho)

    # -- main loop -------------------------------------------------------------
    def start(self) -> _Iterate:
        """Zero, or the warm start; the bias is optimal for the start's kernel part."""
        N = self.N
        if self.warm_start is not None:
            A0 = np.array(self.warm_start.alpha, dtype=np.float64)
            idx = np.flatnonzero(np.any(A0 != 0.0, axis=1)).astype(np.int64)
            A = np.ascontiguousarray(A0[idx])
            U, _ = self.passes.certificate_pass(idx, A, np.arange(idx.size, dtype=np.int64),
                                                np.zeros(N), np.zeros(idx.size, dtype=bool))
            b0 = float(self.warm_start.bias) if self.bias else 0.0
        else:
            idx = np.zeros(0, dtype=np.int64)
            A = np.zeros((0, N))
            U = np.zeros((0, N))
            b0 = 0.0
        f0 = U.sum(axis=0) if idx.size else np.zeros(N)
        b = common.optimal_bias(self.loss, self.y, f0, b0, weights=self.sl.w) if self.bias else 0.0
        return _Iterate(idx, A, U, b, f0 + b)

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

    def run_loop(self) -> SolveResult:
        eng, run = self.engine, self.run
        max_iter = int(eng.max_iter)
        gap_every = int(eng.gap_every)
        M = self.M
        self.lower, self.upper = self.conj_domain()
        self.radius = float(self.reg.conj_radius(self.C)) if self.mu == 0.0 else math.inf

        # ---- one read of the bank: sum of kernels, Frobenius norms ----
        lam, omega, frob = self.passes.summary(self.bias, eng.power_iter)
        lam *= float(eng.safety)
        self.screen = _Screen(np.sqrt(np.maximum(frob, 0.0)), self.N)

        x = self.start()
        xp = x

        # ---- initial L ----
        L_loss = self.sl.deriv_lipschitz()
        if eng.step != "backtracking" and math.isfinite(L_loss) and L_loss > 0.0:
            L = L_loss * lam
            step_rule = eng.step
        else:
            d2 = self.sl.deriv2(common.as_vector(x.z))
            c = float(np.max(np.abs(d2))) if d2.size else 0.0
            L = lam * (c if (c > 0.0 and math.isfinite(c)) else 1.0)
            step_rule = "adaptive" if eng.step == "adaptive" else "backtracking"
        adaptive = step_rule == "adaptive"
        shrink = float(eng.shrink)
        backtrack = float(eng.backtrack)
        L_floor = 1e-12 * L
        accelerated = bool(eng.accelerated)
        gradient_restart = eng.restart == "gradient"

        it = 0
        t_mom = 1.0
        beta = 0.0
        counts = {"restarts": 0, "backtracks": 0, "computed": 0}

        def record(c: common.Certificate) -> dict[str, Any]:
            extra = {"step_size": 1.0 / L, "momentum": beta, "n_restarts": counts["restarts"],
                     "n_backtracks": counts["backtracks"], "n_computed": counts["computed"],
                     "n_exact_dual": c.extra["n_exact"], "bias": c.extra["b_star"], "step_rule": step_rule}
            for key in counts:
                counts[key] = 0
            return run.record(it, c.primal, c.dual, c.gap, x.idx.size, **extra)

        cert = self.certificate(x)
        checked = 0
        self.offer(x, cert, it)
        if not (math.isfinite(cert.primal) and not math.isnan(cert.gap)):
            run.end(Status.NUMERICAL_ERROR, 0, f"non-finite objective at the start "
                                               f"(primal {cert.primal!r})")
        elif cert.gap <= run.tol:
            run.end(Status.CONVERGED, 0, f"at the start, {x.idx.size} active kernels",
                    gap=cert.gap)

        while run.status is None:
            # ---- the point v = x + beta (x - x_prev): prediction and gradient ----
            if beta != 0.0:
                sup = np.union1d(x.idx, xp.idx).astype(np.int64)
                zv = x.z + beta * (x.z - xp.z)
                bv = x.b + beta * (x.b - xp.b)
            else:
                sup = x.idx
                zv, bv = x.z, x.b
            zv = common.as_vector(zv)
            r = self.deriv(zv)
            gb = float(np.sum(r)) if self.bias else 0.0
            lv = self.loss_values(zv)
            Fv = float(np.sum(lv))
            if not (math.isfinite(Fv) and np.all(np.isfinite(r))):
                run.end(Status.NUMERICAL_ERROR, it, f"non-finite loss or gradient at iteration "
                                                    f"{it + 1}")
                break

            # ---- blocks to compute: non-zero in v, or admitted by screening ----
            if adaptive:
                L = max(L * shrink, L_floor)
            zero_mask = np.ones(M, dtype=bool)
            zero_mask[sup] = False
            zero = np.flatnonzero(zero_mask).astype(np.int64)
            cand = self.admitted(r, zero, 1.0 / L)
            comp = np.union1d(sup, cand).astype(np.int64) if cand.size else sup
            KR = self.passes.matvecs(r, comp)
            counts["computed"] += int(comp.size)
            if comp.size:
                self.screen.add(r, comp, np.sqrt(np.maximum(KR @ r, 0.0)))
            xrow = _rows(x.idx, comp)
            prow = _rows(xp.idx, comp) if beta != 0.0 else np.full(comp.size, -1, dtype=np.int64)
            V, UV = kprox.extrapolate(xrow, x.A, x.U, prow, xp.A, xp.U, beta)

            # ---- prox-gradient step with the sufficient-decrease test ----
            n_bt = 0
            accepted = False
            while True:
                eta = 1.0 / L
                W, KW, nw = kprox.gradient_step(V, UV, r, KR, eta)
                p = self.prox(nw, eta) if comp.size else np.zeros(0)
                with np.errstate(invalid="ignore", divide="ignore"):
                    sc = np.where(nw > 0.0, p / nw, 0.0)
                if not np.all(np.isfinite(sc)):
                    run.end(Status.NUMERICAL_ERROR, it, f"non-finite block prox at iteration "
                                                        f"{it + 1}")
                    break
                A_new, U_new, f_new, dist2, ip = kprox.prox_finish(
                    sc, W, KW, V, UV, xrow, x.U)
                b_new = bv - (eta / omega) * gb if self.bias else 0.0
                z_new = f_new + b_new
                l_new = self.loss_values(z_new)
                dz = z_new - zv
                breg = float(np.sum(l_new - lv - r * dz))
                if self.bias:
                    dist2 += omega * (b_new - bv) ** 2
                slack = 1e-12 * (abs(Fv) + abs(float(r @ dz))) + 1e-300
                if math.isfinite(breg) and breg <= 0.5 * L * dist2 + slack:
                    accepted = True
                    break
                n_bt += 1
                counts["backtracks"] += 1
                if n_bt > eng.max_backtrack:
                    break
                L *= backtrack
                # the zero test of a block is independent of eta mathematically;
                # re-check it numerically and compute any newly admitted block
                rest = np.setdiff1d(zero, cand, assume_unique=True)
                extra = self.admitted(r, rest, 1.0 / L) if rest.size else rest
                if extra.size:
                    KRx = self.passes.matvecs(r, extra)
                    counts["computed"] += int(extra.size)
                    self.screen.add(r, extra, np.sqrt(np.maximum(KRx @ r, 0.0)))
                    cand = np.union1d(cand, extra).astype(np.int64)
                    new_comp = np.union1d(comp, extra).astype(np.int64)
                    KR = _embed(comp, KR, new_comp)
                    KR[np.searchsorted(new_comp, extra)] = KRx
                    comp = new_comp
                    xrow = _rows(x.idx, comp)
                    prow = _rows(xp.idx, comp) if beta != 0.0 \
                        else np.full(comp.size, -1, dtype=np.int64)
                    V, UV = kprox.extrapolate(xrow, x.A, x.U, prow, xp.A, xp.U, beta)
            if run.status is not None:
                break
            if not accepted:
                run.end(Status.STALLED, it, f"the sufficient-decrease test failed "
                                            f"{eng.max_backtrack} times in a row at iteration "
                                            f"{it + 1} (L = {L:.3e})")
                break
            keep = sc > 0.0
            new = _Iterate(comp[keep], np.ascontiguousarray(A_new[keep]),
                           np.ascontiguousarray(U_new[keep]), b_new, z_new)

            # ---- momentum: FISTA with gradient restart ----
            if accelerated:
                if self.bias:
                    ip += omega * (bv - b_new) * (b_new - x.b)
                if gradient_restart and ip > 0.0:
                    counts["restarts"] += 1
                    t_mom = 1.0
                    beta = 0.0
                else:
                    t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_mom * t_mom))
                    beta = (t_mom - 1.0) / t_next
                    t_mom = t_next
            xp, x = x, new
            it += 1

            # ---- duality gap ----
            if it % gap_every == 0 or it >= max_iter:
                cert = self.certificate(x)
                checked = it
                self.offer(x, cert, it)
                record(cert)
                logger.debug("proximal it=%d P=%.12g D=%.12g gap=%.3e active=%d L=%.3g",
                             it, cert.primal, cert.dual, cert.gap, x.idx.size, L)
                if not (math.isfinite(cert.primal) and not math.isnan(cert.gap)):
                    run.end(Status.NUMERICAL_ERROR, it, f"non-finite objective (primal "
                                                        f"{cert.primal!r}, dual {cert.dual!r})")
                else:
                    run.check(it)

        if checked != it:
            # stalled or a numerical error inside an iteration: certify the last
            # accepted iterate too
            self.offer(x, self.certificate(x), it)
        return run.result(it)


def _rows(src_idx: np.ndarray, dst_idx: np.ndarray) -> np.ndarray:
    """For each block of the sorted set ``dst_idx``, its row in ``src_idx`` (or -1)."""
    out = np.full(dst_idx.size, -1, dtype=np.int64)
    if src_idx.size:
        out[np.searchsorted(dst_idx, src_idx)] = np.arange(src_idx.size, dtype=np.int64)
    return out


PROXIMAL_ENGINES = (Proximal,)
