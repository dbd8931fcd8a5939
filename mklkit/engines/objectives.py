r"""The primal side of the certificate every engine computes the same way: :math:`P(\alpha, b)`
(SpicyMKL eq. 42), the weighted loss, block norms, predictions, the relative gap, kernel
weights and the optimal offset; the dual side is :mod:`mklkit.engines.common`."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from .._jit import blocks
from ..components.base import Loss, Regularizer
from ..kernels.ops import GramBank
from ..problem import Problem

logger = logging.getLogger(__name__)


def as_vector(x: Any) -> np.ndarray:
    """A C-contiguous float64 array (so that cached jitted signatures match)."""
    return np.ascontiguousarray(x, dtype=np.float64)


def block_norms(K: np.ndarray | GramBank, alpha: np.ndarray) -> np.ndarray:
    r""":math:`\|\alpha_m\|_{K_m} = \sqrt{\alpha_m^\top K_m \alpha_m}` (M,) of ``alpha`` (M, N);
    ``K`` an (M, N, N) array or a :class:`~mklkit.kernels.ops.GramBank`."""
    if isinstance(K, GramBank):
        return K.block_norms(as_vector(alpha))
    return blocks.block_norms(as_vector(K), as_vector(alpha))


def segment_norms(t: np.ndarray, starts: np.ndarray) -> np.ndarray:
    r""":math:`\|t_{s_m:s_{m+1}}\|_2` for every block (0 for blocks of rank 0)."""
    M = starts.size - 1
    out = np.zeros(M)
    ranks = np.diff(starts)
    nz = ranks > 0
    if t.size and np.any(nz):
        sq = np.add.reduceat(t * t, starts[:-1][nz])
        out[nz] = np.sqrt(np.maximum(sq, 0.0))
    return out


def dual_block_norms(K: np.ndarray | GramBank, rho: np.ndarray) -> np.ndarray:
    r"""Dual block norms :math:`\|\rho\|_{K_m}` (M,) of ``rho`` (N,) (SpicyMKL eq. 45)."""
    if isinstance(K, GramBank):
        return K.dual_block_norms(as_vector(rho))
    return blocks.block_norms(as_vector(K), as_vector(rho)[None, :])


def predict(K: np.ndarray | GramBank, alpha: np.ndarray, bias: float = 0.0) -> np.ndarray:
    r"""Training predictions :math:`z = \sum_m K_m\alpha_m + b` (SpicyMKL eq. 7), from the
    non-zero blocks only."""
    alpha = as_vector(alpha)
    idx = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
    if idx.size == 0:
        return np.full(K.shape[1], float(bias))
    if isinstance(K, GramBank):
        return K.combine(alpha, idx) + float(bias)
    return blocks.combine(as_vector(K), alpha, idx) + float(bias)


class SampleLoss:
    r"""The data term :math:`\sum_i w_i\,\ell(y_i, z_i)` per sample, the one place where sample
    weights (> 0, or None) meet the loss, by :math:`(w\ell)^*(y, u) = w\,\ell^*(y, u/w)`;
    methods take and return (N,) float64 arrays."""

    def __init__(self, loss: Loss, y: np.ndarray, weights: np.ndarray | None = None) -> None:
        self.loss = loss
        self.jit = loss.jit
        self.p = loss.param_vector
        self.y = as_vector(y)
        self.w = None if weights is None else as_vector(weights)

    @classmethod
    def of(cls, problem: Problem) -> "SampleLoss":
        """The weighted loss of ``problem`` (its labels and ``sample_weight``)."""
        return cls(problem.loss, problem.y, problem.sample_weight)

    def _scaled(self, v: Any) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        return v if self.w is None else self.w * v

    def value(self, z: np.ndarray) -> np.ndarray:
        r""":math:`w_i\ell(y_i, z_i)`."""
        return self._scaled(self.jit.value(self.y, as_vector(z), self.p))

    def deriv(self, z: np.ndarray) -> np.ndarray:
        r""":math:`w_i\partial_z\ell(y_i, z_i)` (a subgradient at kinks)."""
        return self._scaled(self.jit.deriv(self.y, as_vector(z), self.p))

    def deriv2(self, z: np.ndarray) -> np.ndarray:
        r""":math:`w_i\partial_z^2\ell(y_i, z_i)`."""
        return self._scaled(self.jit.deriv2(self.y, as_vector(z), self.p))

    def _unscaled_u(self, u: np.ndarray) -> np.ndarray:
        return as_vector(u) if self.w is None else as_vector(np.asarray(u, dtype=np.float64) / self.w)

    def conj(self, u: np.ndarray) -> np.ndarray:
        r""":math:`(w_i\ell)^*(y_i, u_i) = w_i\ell^*(y_i, u_i/w_i)`; ``inf`` outside the domain."""
        return self._scaled(self.jit.conj(self.y, self._unscaled_u(u), self.p))

    def conj_grad(self, u: np.ndarray) -> np.ndarray:
        r""":math:`\partial_u (w_i\ell)^* = \ell^{*\prime}(y_i, u_i/w_i)`."""
        return np.asarray(self.jit.conj_grad(self.y, self._unscaled_u(u), self.p), dtype=np.float64)

    def conj_hess(self, u: np.ndarray) -> np.ndarray:
        r""":math:`\partial_u^2 (w_i\ell)^* = \ell^{*\prime\prime}(y_i, u_i/w_i)/w_i`."""
        h = np.asarray(self.jit.conj_hess(self.y, self._unscaled_u(u), self.p), dtype=np.float64)
        return h if self.w is None else h / self.w

    def conj_lower(self) -> np.ndarray:
        r"""Lower ends of the domains of :math:`(w_i\ell)^*(y_i, \cdot)`: :math:`w_i` times the loss's."""
        return self._scaled(self.jit.conj_lower(self.y, self.p))

    def conj_upper(self) -> np.ndarray:
        r"""Upper ends of the domains of :math:`(w_i\ell)^*(y_i, \cdot)`."""
        return self._scaled(self.jit.conj_upper(self.y, self.p))

    def deriv_lipschitz(self) -> float:
        r"""A Lipschitz constant of :math:`\partial_z`: :math:`\max_i w_i` times the loss's."""
        L = float(self.loss.deriv_lipschitz())
        return L if self.w is None or self.w.size == 0 else L * float(np.max(self.w))


def loss_value(loss: Loss, y: np.ndarray, z: np.ndarray, weights: np.ndarray | None = None) -> float:
    r""":math:`L(z) = \sum_i w_i\ell(y_i, z_i)` (:math:`w = 1` without ``weights``)."""
    return float(np.sum(SampleLoss(loss, y, weights).value(z)))


def regularizer_value(reg: Regularizer, norms: np.ndarray, C: float) -> float:
    r""":math:`\sum_m \tilde g_C(x_m)` at primal block norms ``x`` (SpicyMKL eq. 42)."""
    return float(np.sum(reg.jit.value(as_vector(norms), float(C), reg.param_vector)))


def primal_objective(
    problem: Problem, alpha: np.ndarray, bias: float, *, norms: np.ndarray | None = None, z: np.ndarray | None = None
) -> float:
    r"""Primal objective :math:`P(\alpha, b)` (SpicyMKL eq. 42; ``bias`` ignored without one);
    ``norms`` (:math:`\|\alpha_m\|_{K_m}`) and ``z`` (the predictions) when known."""
    b = float(bias) if problem.bias else 0.0
    if norms is None:
        norms = block_norms(problem.bank, alpha)
    if z is None:
        z = predict(problem.bank, alpha, b)
    return primal_value(problem, z, norms)


def primal_value(problem: Problem, z: np.ndarray, norms: np.ndarray) -> float:
    r""":math:`P` (SpicyMKL eq. 42) from the predictions ``z`` and the primal block ``norms``."""
    return loss_value(problem.loss, problem.y, z, problem.sample_weight) + regularizer_value(
        problem.regularizer, norms, problem.C
    )


def relative_gap(primal: float, dual: float) -> float:
    r"""Relative duality gap :math:`(P - D)/|P|` (SpicyMKL §6.1): :math:`P - D` when
    :math:`P = 0`, ``inf`` when :math:`D = -\infty`, ``nan`` when either is ``nan``."""
    primal = float(primal)
    dual = float(dual)
    if math.isnan(primal) or math.isnan(dual):
        return math.nan
    if math.isinf(primal) or math.isinf(dual):
        return math.inf if primal != dual else math.nan
    diff = primal - dual
    return diff / abs(primal) if primal != 0.0 else diff


def kernel_weights(reg: Regularizer, norms: np.ndarray) -> np.ndarray:
    r"""Kernel weights :math:`d_m = 1/(2 g'(\|\alpha_m\|_{K_m}^2))` (SpicyMKL §4.1) at the primal
    block ``norms``, summing to 1; 0 on zero blocks (all 0 when every block is)."""
    norms = as_vector(norms)
    w = np.asarray(reg.jit.weight(norms, reg.param_vector), dtype=np.float64)
    bad = (norms > 0) & ~np.isfinite(w)
    if np.any(bad):
        logger.warning(
            "regularizer %r gave %d non-finite kernel weights at non-zero block norms; they are set to 0",
            reg.name,
            int(np.sum(bad)),
        )
    w = np.where((norms > 0) & np.isfinite(w), w, 0.0)
    total = float(np.sum(w))
    if total > 0.0:
        w = w / total
    return w


def optimal_bias(
    loss: Loss,
    y: np.ndarray,
    f: np.ndarray,
    b0: float = 0.0,
    *,
    tol: float = 1e-13,
    max_iter: int = 100,
    weights: np.ndarray | None = None,
) -> float:
    r"""The offset minimizing the convex :math:`\phi(b) = \sum_i w_i\ell(y_i, f_i + b)` for the
    kernel part ``f`` of the predictions: bracketed by doubling steps from ``b0``, then Newton
    steps inside the bracket or bisection (piecewise-linear losses); never worse than ``b0``."""
    line = _BiasLine(SampleLoss(loss, y, weights), as_vector(f))
    b = float(b0) if math.isfinite(b0) else 0.0
    f0 = line.value(b)
    if not math.isfinite(f0):
        b, f0 = 0.0, line.value(0.0)
    start = b
    d1, dabs = line.slope(b)
    if abs(d1) <= tol * (1.0 + dabs) or not math.isfinite(d1):
        return b
    lo, hi, b = _bracket(line, b, d1)
    b = _newton_in_bracket(line, b, lo, hi, tol, max_iter)
    if not line.value(b) <= f0:
        return start
    return b


class _BiasLine:
    r""":math:`\phi(b) = \sum_i w_i\ell(y_i, f_i + b)` and its derivatives along ``b``."""

    def __init__(self, sl: SampleLoss, f: np.ndarray) -> None:
        self.sl, self.f = sl, f

    def value(self, b: float) -> float:
        return float(np.sum(self.sl.value(self.f + b)))

    def slope(self, b: float) -> tuple[float, float]:
        r""":math:`\phi'(b)` and the sum of the absolute terms (the scale of the test)."""
        d = self.sl.deriv(self.f + b)
        return float(np.sum(d)), float(np.sum(np.abs(d)))

    def curvature(self, b: float) -> float:
        return float(np.sum(self.sl.deriv2(self.f + b)))


def _bracket(line: _BiasLine, b: float, d1: float) -> tuple[float, float, float]:
    """``lo, hi, b``: doubling steps from ``b`` (slope ``d1``) until the slope changes sign."""
    d2 = line.curvature(b)
    step = abs(d1) / d2 if d2 > 0.0 and math.isfinite(d2) else 1.0
    step = max(step, 1e-12 * (1.0 + abs(b)))
    direction = -1.0 if d1 > 0.0 else 1.0
    far = b
    for _ in range(80):
        far = b + direction * step
        dfar, _ = line.slope(far)
        if not math.isfinite(dfar) or dfar * d1 <= 0.0:
            break
        b, d1 = far, dfar
        step *= 2.0
    if d1 > 0.0:
        return far, b, b
    return b, far, b


def _newton_in_bracket(line: _BiasLine, b: float, lo: float, hi: float, tol: float, max_iter: int) -> float:
    """Newton steps from ``b`` that stay inside the shrinking bracket, else bisection."""
    for _ in range(max_iter):
        d1, dabs = line.slope(b)
        if not math.isfinite(d1):
            break
        if abs(d1) <= tol * (1.0 + dabs):
            break
        if d1 > 0.0:
            hi = min(hi, b)
        else:
            lo = max(lo, b)
        if hi - lo <= 4.0 * np.finfo(np.float64).eps * (1.0 + abs(b)):
            break
        d2 = line.curvature(b)
        cand = b - d1 / d2 if d2 > 0.0 and math.isfinite(d2) else math.nan
        b = cand if lo < cand < hi else 0.5 * (lo + hi)
    return b
