r"""The objective as the primal engines on factor coordinates evaluate it (``bcd``, ``apg``;
docs/engines.md): a smooth loss itself, a non-smooth one by its Moreau envelope of smoothing
:math:`\mu` through its conjugate (:func:`mklkit._jit.envelope.loss_terms`), the regularizer's
derivatives at block norms, and the certificate of predictions :math:`z` for the problem itself,
with the smoothed gap and the smoothing error that move :math:`\mu` down (:class:`SmoothedLoss`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import scipy.linalg as sla

from ..components.params import Param
from ..problem import Problem
from . import common
from .base import POSITIVE, open_interval
from .objectives import segment_norms

#: The options of the smoothing, which the engines that smooth (``bcd``, ``apg``) take.
SMOOTHING_PARAMS: tuple[Param, ...] = (
    Param("mu0", None, "initial smoothing of a non-smooth loss (null: from the data)", **POSITIVE, nullable=True),
    Param("mu_factor", 0.1, "factor by which the smoothing of a non-smooth loss decreases", **open_interval(1.0)),
)

#: The loss kernels the engines call, and why: of a smooth loss, and of one they smooth.
LOSS_KERNELS = {
    True: (
        ("value", "deriv", "deriv2", "conj", "conj_lower", "conj_upper"),
        "it is smooth (smooth_primal), so the engine needs",
    ),
    False: (
        ("value", "conj", "conj_grad", "conj_hess", "conj_lower", "conj_upper"),
        "it is not smooth (smooth_primal False), so the engine smooths it through its conjugate and needs",
    ),
}


def loss_reasons(problem: Problem) -> list[str]:
    """What the loss lacks of the kernels of :data:`LOSS_KERNELS` (of a smooth loss, or of one
    smoothed through its conjugate)."""
    loss = problem.loss
    need, why = LOSS_KERNELS[bool(loss.smooth_primal)]
    missing = [k for k in need if getattr(loss.jit, k, None) is None]
    return [f"the loss {loss.describe()} gives no {', '.join(missing)}: {why} them"] if missing else []


def band_step(LB: np.ndarray, target: np.ndarray, bias: bool) -> np.ndarray:
    r"""The smallest change :math:`\delta` of the non-zero blocks' coordinates (and of the bias, last, with
    ``bias``) that moves the predictions of the samples of the smoothing band by ``target``: ``LB`` the
    rows of those blocks at the band's samples (r_A, |band|); the minimum-norm solution of
    :math:`L_B^\top\delta_A + \delta_b = ` ``target``, through the band's Gram matrix when the band is the
    smaller side, else by least squares (``bcd`` and ``apg`` move a smoothed solution onto the loss's
    kinks with it)."""
    n_A = LB.shape[0]
    if LB.shape[1] < n_A + int(bias):
        G = LB.T @ LB + (1.0 if bias else 0.0)
        w = sla.lstsq(G, target, lapack_driver="gelsy", check_finite=False)[0]
        return np.concatenate([LB @ w, [float(np.sum(w))] if bias else []])
    M = LB.T
    if bias:
        M = np.hstack([M, np.ones((LB.shape[1], 1))])
    return np.linalg.lstsq(M, target, rcond=None)[0]


class SmoothedLoss:
    r"""A mixin of an :class:`~mklkit.engines.base.Algorithm` whose engine has the options ``mu0``
    and ``mu_factor``: the loss's arrays for the jitted evaluation (:meth:`set_up_loss`), its
    values and derivatives at a smoothing (:meth:`eval_loss`), the smoothing's start and decrease,
    and the certificate of predictions (:meth:`certify_predictions`)."""

    def set_up_loss(self, kb: Any) -> None:
        """The arrays :meth:`eval_loss` reads; ``kb`` the jitted module (:mod:`mklkit._jit.bcd`)."""
        self.kb = kb
        self.y = common.as_vector(self.problem.y)
        self.loss = self.problem.loss
        lp = common.as_vector(self.pl)
        # the weights of w_i l go next to the domain [lo, hi] of the loss's own conjugate
        self.sw = np.zeros(0) if self.sl.w is None else common.as_vector(self.sl.w)
        self.lo = common.as_vector(self.lk.conj_lower(self.y, lp))
        self.hi = common.as_vector(self.lk.conj_upper(self.y, lp))
        self.rho_lo, self.rho_hi = -self.sl.conj_upper(), -self.sl.conj_lower()
        self.smooth = bool(self.loss.smooth_primal)
        self.kind = kb.KIND_SMOOTH if self.smooth else kb.KIND_ENVELOPE
        self.lip_loss = float(self.sl.deriv_lipschitz()) if self.smooth else math.inf
        self.loss_rec = kb.loss_fns(self.loss)
        self.reg_rec = kb.reg_fns(self.reg)
        self.rp = common.as_vector(self.pr)

    def samples(self, smoothing: float) -> tuple:
        return self.kb.Samples(self.y, self.lo, self.hi, self.sw, self.kind, float(smoothing))

    def eval_loss(
        self, z: np.ndarray, smoothing: float, value: bool, curv: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values (if asked), derivatives and curvatures (if asked) of the loss in use."""
        return self.kb.eval_loss(self.samples(smoothing), common.as_vector(z), self.loss_rec, value, curv)

    def curvature_scale(self, smoothing: float) -> float:
        r"""The bound :math:`L` of the second derivative of the loss in use (:math:`1/\mu` for
        the envelope; 1 if none)."""
        if not self.smooth:
            return 1.0 / smoothing
        return self.lip_loss if math.isfinite(self.lip_loss) and self.lip_loss > 0 else 1.0

    def initial_smoothing(self) -> float:
        r"""``mu0``, or a tenth of the zero solution's objective per unit of
        :math:`\sum_i u_{\max,i}^2/2` over the (weighted) conjugate's domain; 0 when smooth."""
        if self.smooth:
            return 0.0
        if self.engine.mu0 is not None:
            return float(self.engine.mu0)
        umax = np.maximum(np.abs(self.lo), np.abs(self.hi))
        umax = np.where(np.isfinite(umax), umax, 1.0)
        if self.sl.w is not None:
            umax = self.sl.w * umax  # the domain of (w l)^*
        denom = 0.5 * float(np.sum(umax * umax))
        p0 = abs(self.zero.objective)
        return 0.1 * p0 / denom if (p0 > 0.0 and denom > 0.0) else 1.0

    def next_smoothing(self, smoothing: float, cert: Any, tol: float) -> float:
        r"""Smaller once the smoothed problem is solved to within its smoothing error
        :math:`E = P - P_\mu + \tfrac\mu2\|\rho\|^2`."""
        err = cert.extra["smoothing_error"]
        if not (cert.extra["gap_smoothed"] <= err and err > 0.0):
            return smoothing
        target = 0.5 * tol * abs(cert.primal) / err
        return smoothing * max(float(self.engine.mu_factor), min(target, 1.0))

    def reg_derivatives(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`\tilde g_C'(x) = Cx/d(x)` (the weight :math:`d`, SpicyMKL §4.1) and
        :math:`\tilde g_C''(x) = 1/\mathrm{prox}'(x + \tilde g_C'(x)) - 1` at block norms
        ``x > 0``."""
        rk = self.reg.jit
        x = common.as_vector(x)
        d = np.asarray(rk.weight(x, self.rp), dtype=np.float64)
        g1 = self.C * x / d
        pd = np.asarray(rk.prox_deriv(common.as_vector(x + g1), self.C, self.rp), dtype=np.float64)
        with np.errstate(divide="ignore"):
            g2 = np.where(pd > 0.0, 1.0 / pd - 1.0, np.inf)
        return g1, np.maximum(g2, 0.0)

    def certify_predictions(
        self, z: np.ndarray, norms: np.ndarray, smoothing: float, project: Callable[[np.ndarray], np.ndarray]
    ) -> common.Certificate:
        r"""Primal, dual and gap of the point with predictions ``z`` and block norms ``norms``;
        ``project(rho)`` gives :math:`L^\top\rho` (R,) (one pass).  Its ``extra``: the gradient
        ``grad`` :math:`= -L^\top\rho`, ``z``, ``sum_u``; for a smoothed loss also the smoothed
        gap ``gap_smoothed`` and the ``smoothing_error``; ``rho_start`` and ``dual_norms``, the dual point
        before it is made feasible and its block norms (:meth:`gap_within`)."""
        smooth_val, u, _ = self.eval_loss(z, smoothing, not self.smooth, False)
        rho = -u
        if self.bias:
            rho = common.centre_dual(rho, self.rho_lo, self.rho_hi)
        t = project(rho)
        reg_val = common.regularizer_value(self.reg, norms, self.C)
        P = common.loss_value(self.loss, self.y, z, self.sl.w) + reg_val
        starts = self.problem.bank.starts
        dual_norms = segment_norms(t, starts)
        cert = common.Certificate.at(
            self.problem, P, rho, norms, dual_norms=dual_norms, grad=-t, z=z, sum_u=float(np.sum(u)), rho_start=rho
        )
        cert.extra["dual_norms"] = dual_norms
        if not self.smooth:
            rho_f = cert.rho
            P_mu = float(np.sum(smooth_val)) + reg_val
            D_mu = cert.dual - 0.5 * smoothing * float(rho_f @ rho_f)
            cert.extra["gap_smoothed"] = P_mu - D_mu
            cert.extra["smoothing_error"] = (P - P_mu) + 0.5 * smoothing * float(rho_f @ rho_f)
        return cert

    def gap_within(self, cert: common.Certificate, blocks: np.ndarray) -> float:
        """The relative gap of the point of ``cert`` in the problem restricted to the ``blocks`` (a mask;
        the point is zero on the others): the same primal, the dual of those blocks' norms only."""
        dual_norms = np.where(blocks, cert.extra["dual_norms"], 0.0)
        return common.Certificate.at(
            self.problem, cert.primal, cert.extra["rho_start"], cert.norms, dual_norms=dual_norms
        ).gap
