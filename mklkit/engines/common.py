r"""Quantities every engine computes the same way.

The primal problem (SpicyMKL eq. 42 in representer form) and its dual
(eq. 48, with the generalized conjugate of eq. 45) are

.. math::
    P(\alpha, b) &= \sum_i \ell\big(y_i, \textstyle\sum_m (K_m\alpha_m)_i + b\big)
                  + \sum_m \tilde g_C(\|\alpha_m\|_{K_m}), \\
    D(\rho) &= -\sum_i \ell^*(y_i, -\rho_i) - \sum_m \tilde g_C^*(\|\rho\|_{K_m}),
    \qquad \mathbf 1^\top\rho = 0 \text{ (with a bias)}.

Weak duality gives :math:`D(\rho) \le P(\alpha, b)` for every feasible pair,
so the relative gap :math:`(P - D)/|P|` certifies a solution.  Every engine
reports it the paper's way (§6.1): the dual point is projected onto
:math:`\mathbf 1^\top\rho = 0` within the box that the domain of the loss
conjugate gives (:func:`project_sum_box`) and, where the domain of
:math:`\tilde g_C^*` is bounded, scaled into it (:func:`project_dual`).

Sign convention (``components/base.py``): ``loss.kernels.conj(y, u)`` is the
ordinary conjugate :math:`\ell^*(y, u)`; the dual uses :math:`u = -\rho`.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kernels import blocks
from ..components.base import Loss, Regularizer
from ..kernels.ops import GramBank
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult, Status
from .capabilities import SEPARABLE, needs

__all__ = [
    "not_separable",
    "as_vector",
    "block_norms",
    "dual_block_norms",
    "predict",
    "loss_value",
    "loss_conjugate",
    "regularizer_value",
    "regularizer_conjugate",
    "primal_objective",
    "dual_objective",
    "project_dual",
    "project_sum_box",
    "scale_into_radius",
    "dual_box",
    "projected_dual_objective",
    "relative_gap",
    "kernel_weights",
    "optimal_bias",
    "ZeroSolution",
    "zero_solution",
    "zero_result",
    "Incumbents",
    "incumbent_result",
    "build_result",
    "UNCONVERGED",
]

logger = logging.getLogger(__name__)

#: Statuses that come with a :class:`~mklkit.result.ConvergenceWarning`.
UNCONVERGED = (Status.MAX_ITER, Status.STALLED, Status.NUMERICAL_ERROR)

#: Relative size of :math:`|\mathbf 1^\top\rho| / \|\rho\|_1` below which the
#: projection onto :math:`\mathbf 1^\top\rho = 0` keeps the given block norms.
_CENTRED = 1e-12


#: Why engines of sums over kernels need ``separable`` (the reason of :data:`SEPARABLE_SUMS`).
SEPARABLE_WHY = "this engine solves sums over kernels of a function of one block norm"

#: SpicyMKL and the proximal engine minimize :math:`C\\sum_m g(\\|\\alpha_m\\|_{K_m})`
#: block by block (prox, conjugate and envelope of one block norm); a
#: regularizer that couples the blocks (``separable = False``) is a
#: different problem, so it is declined rather than solved block-wise.
SEPARABLE_SUMS = needs(SEPARABLE, why=SEPARABLE_WHY)


def not_separable(reg: Regularizer) -> str | None:
    """The reason why an engine of sums over kernels cannot take ``reg``, or ``None``
    (:data:`SEPARABLE_SUMS`)."""
    if SEPARABLE_SUMS.met(reg):
        return None
    return f"{SEPARABLE_SUMS.lack(reg)}: {SEPARABLE_WHY}"


def as_vector(x: Any) -> np.ndarray:
    """A C-contiguous float64 array (so that cached jitted signatures match)."""
    return np.ascontiguousarray(x, dtype=np.float64)


# ---------------------------------------------------------------------------
# Block norms and predictions
# ---------------------------------------------------------------------------
def block_norms(K: np.ndarray | GramBank, alpha: np.ndarray) -> np.ndarray:
    r"""Primal block norms :math:`\|\alpha_m\|_{K_m} = \sqrt{\alpha_m^\top K_m \alpha_m}`.

    Parameters
    ----------
    K : ndarray (M, N, N) or GramBank
    alpha : ndarray (M, N)

    Returns
    -------
    ndarray (M,)
    """
    if isinstance(K, GramBank):
        return K.block_norms(as_vector(alpha))
    return blocks.block_norms_rows(as_vector(K), as_vector(alpha))


def dual_block_norms(K: np.ndarray | GramBank, rho: np.ndarray) -> np.ndarray:
    r"""Dual block norms :math:`\|\rho\|_{K_m}` for every kernel (SpicyMKL eq. 45).

    Parameters
    ----------
    K : ndarray (M, N, N) or GramBank
    rho : ndarray (N,)

    Returns
    -------
    ndarray (M,)
    """
    if isinstance(K, GramBank):
        return K.dual_block_norms(as_vector(rho))
    return blocks.block_norms(as_vector(K), as_vector(rho))


def predict(K: np.ndarray | GramBank, alpha: np.ndarray, bias: float = 0.0) -> np.ndarray:
    r"""Training predictions :math:`z = \sum_m K_m\alpha_m + b` (SpicyMKL eq. 7).

    Only the non-zero blocks are touched.  ``K`` is an (M, N, N) array or a
    :class:`~mklkit.kernels.ops.GramBank`.
    """
    alpha = as_vector(alpha)
    idx = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
    if idx.size == 0:
        return np.full(K.shape[1], float(bias))
    if isinstance(K, GramBank):
        return K.combine(alpha, idx) + float(bias)
    return blocks.combine(as_vector(K), alpha, idx) + float(bias)


# ---------------------------------------------------------------------------
# Objectives
# ---------------------------------------------------------------------------
def loss_value(loss: Loss, y: np.ndarray, z: np.ndarray) -> float:
    r""":math:`L(z) = \sum_i \ell(y_i, z_i)`."""
    return float(np.sum(loss.kernels.value(as_vector(y), as_vector(z), loss.param_vector)))


def loss_conjugate(loss: Loss, y: np.ndarray, rho: np.ndarray) -> float:
    r""":math:`L^*(-\rho) = \sum_i \ell^*(y_i, -\rho_i)` (SpicyMKL eq. 15); ``inf``
    outside the domain."""
    v = loss.kernels.conj(as_vector(y), as_vector(-np.asarray(rho, dtype=np.float64)),
                          loss.param_vector)
    return float(np.sum(v))


def regularizer_value(reg: Regularizer, norms: np.ndarray, C: float) -> float:
    r""":math:`\sum_m \tilde g_C(x_m)` at primal block norms ``x`` (SpicyMKL eq. 42)."""
    return float(np.sum(reg.kernels.value(as_vector(norms), float(C), reg.param_vector)))


def regularizer_conjugate(reg: Regularizer, norms: np.ndarray, C: float) -> float:
    r""":math:`\sum_m \tilde g_C^*(y_m)` at dual block norms ``y`` (SpicyMKL eq. 45);
    ``inf`` outside its domain."""
    return float(np.sum(reg.kernels.conj(as_vector(norms), float(C), reg.param_vector)))


def primal_objective(
    problem: Problem,
    alpha: np.ndarray,
    bias: float,
    *,
    norms: np.ndarray | None = None,
    z: np.ndarray | None = None,
) -> float:
    r"""Primal objective :math:`P(\alpha, b)` (SpicyMKL eq. 42 / eq. 7).

    Parameters
    ----------
    problem : Problem
    alpha : ndarray (M, N)
    bias : float
        Ignored (taken as 0) when ``problem.bias`` is False.
    norms : ndarray (M,), optional
        :math:`\|\alpha_m\|_{K_m}` if already known.
    z : ndarray (N,), optional
        :math:`\sum_m K_m\alpha_m + b` if already known.
    """
    b = float(bias) if problem.bias else 0.0
    if norms is None:
        norms = block_norms(problem.bank, alpha)
    if z is None:
        z = predict(problem.bank, alpha, b)
    return loss_value(problem.loss, problem.y, z) + regularizer_value(
        problem.regularizer, norms, problem.C
    )


def dual_objective(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> float:
    r"""Dual objective :math:`D(\rho)` of SpicyMKL eq. (48) at ``rho`` as given.

    No projection is made (see :func:`projected_dual_objective`); the value
    is ``-inf`` outside the domain of the conjugates.

    Parameters
    ----------
    problem : Problem
    rho : ndarray (N,)
    norms : ndarray (M,), optional
        :math:`\|\rho\|_{K_m}` if already known.
    """
    if norms is None:
        norms = dual_block_norms(problem.bank, rho)
    val = loss_conjugate(problem.loss, problem.y, rho) + regularizer_conjugate(
        problem.regularizer, norms, problem.C
    )
    return -val


def project_sum_box(
    rho: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    r"""Euclidean projection onto :math:`\{\rho: \mathbf 1^\top\rho = 0,\ l \le \rho \le u\}`.

    The projection is :math:`\tilde\rho_i = \mathrm{clip}(\rho_i - \tau, l_i, u_i)`
    with the shift :math:`\tau` that makes the sum vanish (KKT conditions of
    the projection).  :math:`S(\tau) = \sum_i\tilde\rho_i(\tau)` is continuous,
    non-increasing and piecewise linear with breakpoints :math:`\rho_i - u_i`
    and :math:`\rho_i - l_i`: a binary search over the sorted breakpoints
    (:math:`O(N\log N)`) finds the piece where it crosses zero, on which
    :math:`\tau` follows exactly from the unclipped coordinates.  Infinite
    bounds are allowed.

    Parameters
    ----------
    rho : ndarray (N,)
    lower, upper : ndarray (N,)
        Box with ``lower <= upper``.

    Returns
    -------
    ndarray (N,)

    Raises
    ------
    ValueError
        When the set is empty (:math:`\sum_i l_i > 0` or :math:`\sum_i u_i < 0`).
    """
    rho = np.asarray(rho, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    if float(np.sum(lo)) > 0.0 or float(np.sum(hi)) < 0.0:
        raise ValueError("no point of the box has a zero sum: the dual is infeasible "
                         f"(sum of lower ends {float(np.sum(lo)):g}, of upper ends "
                         f"{float(np.sum(hi)):g})")

    def total(tau: float) -> float:
        return float(np.sum(np.clip(rho - tau, lo, hi)))

    with np.errstate(invalid="ignore"):
        bp = np.concatenate([rho - hi, rho - lo])
    bp = np.unique(bp[np.isfinite(bp)])
    # S(left) >= 0 >= S(right) on the piece [left, right]
    left, right = -math.inf, math.inf
    if bp.size:
        i, j = 0, bp.size - 1
        if total(bp[0]) < 0.0:
            right = bp[0]
        elif total(bp[-1]) > 0.0:
            left = bp[-1]
        else:
            while j - i > 1:                      # S(bp[i]) >= 0 >= S(bp[j])
                mid = (i + j) // 2
                if total(bp[mid]) >= 0.0:
                    i = mid
                else:
                    j = mid
            left, right = bp[i], bp[j]
            if total(left) == 0.0:
                return np.clip(rho - left, lo, hi)
    # on the open piece every coordinate is clipped at the same end or free
    probe = (left + right) / 2 if math.isfinite(left) and math.isfinite(right) else (
        left + 1.0 if math.isfinite(left) else (right - 1.0 if math.isfinite(right) else 0.0))
    shifted = rho - probe
    free = (shifted > lo) & (shifted < hi)
    fixed = np.clip(shifted, lo, hi)[~free]
    if np.any(free):
        tau = (float(np.sum(rho[free])) + float(np.sum(fixed))) / int(np.sum(free))
        if math.isfinite(left):
            tau = max(tau, left)
        if math.isfinite(right):
            tau = min(tau, right)
    else:
        tau = probe
    return np.clip(rho - tau, lo, hi)


def dual_box(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    r"""Bounds of :math:`\rho_i` from the loss conjugate's domain.

    ``conj_lower``/``conj_upper`` bound :math:`u = -\rho_i`, so
    :math:`\rho_i \in [-\mathrm{upper}_i, -\mathrm{lower}_i]`.
    """
    loss = problem.loss
    y = as_vector(problem.y)
    lo_u = np.asarray(loss.kernels.conj_lower(y, loss.param_vector), dtype=np.float64)
    hi_u = np.asarray(loss.kernels.conj_upper(y, loss.param_vector), dtype=np.float64)
    return -hi_u, -lo_u


def project_dual(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Make a dual point feasible the way of SpicyMKL §6.1.

    First the point is projected onto the equality constraint *and* the box
    :math:`[l_i, u_i]` that the domain of :math:`\ell^*(y_i, -\rho_i)` gives
    (:func:`dual_box`): the exact Euclidean projection
    :math:`\tilde\rho_i = \mathrm{clip}(\rho_i - \tau, l_i, u_i)`
    (:func:`project_sum_box`; without a bias only the clipping).  Inside the
    box this is the paper's centring :math:`\rho - \mathbf 1(\mathbf 1^\top\rho)/N`;
    plain centring would leave the domain of e.g. the hinge conjugate.  Then,
    when the domain of :math:`\tilde g_C^*` is the ball of radius
    :math:`R` = ``regularizer.conj_radius(C)`` (finite), the point is scaled
    into it:

    .. math::
        \tilde\rho' = \tilde\rho / \max\{\max_m \|\tilde\rho\|_{K_m}/R,\ 1\}.

    Scaling towards 0 keeps the box when it contains 0 (every loss bounded
    below).

    Parameters
    ----------
    problem : Problem
    rho : ndarray (N,)
    norms : ndarray (M,), optional
        :math:`\|\rho\|_{K_m}`.  They are reused when the projection leaves
        ``rho`` unchanged up to rounding (it is already centred,
        :math:`|\mathbf 1^\top\rho| \le 10^{-12}\|\rho\|_1`, and inside the
        box), otherwise recomputed for the projected point (one pass over the
        bank).

    Returns
    -------
    rho_feasible : ndarray (N,)
    norms : ndarray (M,)
        :math:`\|\tilde\rho'\|_{K_m}`.
    """
    rho = np.array(rho, dtype=np.float64)
    lo, hi = dual_box(problem)
    inside = bool(np.all((rho >= lo) & (rho <= hi)))
    if problem.bias:
        total = float(np.sum(rho))
        if inside and abs(total) <= _CENTRED * float(np.sum(np.abs(rho))):
            rho -= total / rho.size
            rho = np.clip(rho, lo, hi)
        else:
            norms = None
            rho = project_sum_box(rho, lo, hi)
    elif not inside:
        norms = None
        rho = np.clip(rho, lo, hi)
    if norms is None:
        norms = dual_block_norms(problem.bank, rho)
    else:
        norms = np.array(norms, dtype=np.float64)
    rho, norms = scale_into_radius(rho, norms, float(problem.regularizer.conj_radius(problem.C)))
    return rho, norms


def scale_into_radius(
    rho: np.ndarray, norms: np.ndarray, radius: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""Scale a dual point into the ball :math:`\max_m\|\rho\|_{K_m} \le R` (SpicyMKL §6.1).

    :math:`\rho' = \rho/s` with :math:`s = \max\{\max_m\|\rho\|_{K_m}/R, 1\}`, made
    a few ulps larger when needed so that rounding cannot leave a norm above
    :math:`R` (the conjugate of the block 1-norm is infinite there).  Returns
    new arrays; an infinite radius leaves the point as it is.
    """
    rho = np.array(rho, dtype=np.float64)
    norms = np.array(norms, dtype=np.float64)
    if not (math.isfinite(radius) and norms.size):
        return rho, norms
    top = float(np.max(norms))
    if top <= radius:
        return rho, norms
    scale = top / radius
    for _ in range(8):
        if float(np.max(norms / scale)) <= radius:
            break
        scale *= 1.0 + 4.0 * np.finfo(np.float64).eps
    return rho / scale, norms / scale


def projected_dual_objective(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    r"""Dual objective at the projected point of :func:`project_dual` (SpicyMKL §6.1).

    Returns
    -------
    dual : float
    rho_feasible : ndarray (N,)
    norms : ndarray (M,)
    """
    rho_f, norms_f = project_dual(problem, rho, norms=norms)
    return dual_objective(problem, rho_f, norms=norms_f), rho_f, norms_f


def relative_gap(primal: float, dual: float) -> float:
    r"""Relative duality gap :math:`(P - D)/|P|` (SpicyMKL §6.1).

    When :math:`P = 0` the absolute gap :math:`P - D` is returned.  The
    value is ``inf`` when the dual point is outside the domain
    (:math:`D = -\infty`) and ``nan`` when either value is ``nan``.
    """
    primal = float(primal)
    dual = float(dual)
    if math.isnan(primal) or math.isnan(dual):
        return math.nan
    if math.isinf(primal) or math.isinf(dual):
        return math.inf if primal != dual else math.nan
    diff = primal - dual
    return diff / abs(primal) if primal != 0.0 else diff


def kernel_weights(reg: Regularizer, norms: np.ndarray) -> np.ndarray:
    r"""Kernel weights :math:`d_m = 1/(2 g'(\|\alpha_m\|_{K_m}^2))` (SpicyMKL §4.1), summing to 1.

    Blocks with :math:`\|\alpha_m\|_{K_m} = 0` get weight 0 (they take no part
    in the predictor whatever the formula gives there); if every block is
    zero all weights are zero.

    Parameters
    ----------
    reg : Regularizer
    norms : ndarray (M,)
        Primal block norms.
    """
    norms = as_vector(norms)
    w = np.asarray(reg.kernels.weight(norms, reg.param_vector), dtype=np.float64)
    bad = (norms > 0) & ~np.isfinite(w)
    if np.any(bad):
        logger.warning(
            "regularizer %r gave %d non-finite kernel weights at non-zero block norms; "
            "they are set to 0", reg.name, int(np.sum(bad)))
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
) -> float:
    r"""The offset minimizing :math:`\phi(b) = \sum_i \ell(y_i, f_i + b)` for fixed ``f``.

    :math:`\phi` is convex, so its (sub)derivative :math:`\sum_i\partial_z\ell`
    is non-decreasing: the minimizer is bracketed by doubling steps from
    ``b0``, then located by Newton steps that stay inside the bracket,
    falling back to bisection (the only option for piecewise-linear losses
    such as the hinge, whose second derivative vanishes).  The returned value
    never has a larger :math:`\phi` than ``b0``.

    Parameters
    ----------
    loss : Loss
    y, f : ndarray (N,)
        Labels and the kernel part :math:`\sum_m K_m\alpha_m` of the prediction.
    b0 : float
        Starting point (e.g. the multiplier of :math:`\mathbf 1^\top\rho = 0`).
    """
    k = loss.kernels
    p = loss.param_vector
    y = as_vector(y)
    f = as_vector(f)

    def phi(b: float) -> float:
        return float(np.sum(k.value(y, f + b, p)))

    def slope(b: float) -> tuple[float, float]:
        d = k.deriv(y, f + b, p)
        return float(np.sum(d)), float(np.sum(np.abs(d)))

    b = float(b0) if math.isfinite(b0) else 0.0
    f0 = phi(b)
    if not math.isfinite(f0):
        b, f0 = 0.0, phi(0.0)
    start = b
    d1, dabs = slope(b)
    if abs(d1) <= tol * (1.0 + dabs) or not math.isfinite(d1):
        return b
    # bracket [lo, hi] with slope(lo) <= 0 <= slope(hi)
    d2 = float(np.sum(k.deriv2(y, f + b, p)))
    step = abs(d1) / d2 if d2 > 0.0 and math.isfinite(d2) else 1.0
    step = max(step, 1e-12 * (1.0 + abs(b)))
    direction = -1.0 if d1 > 0.0 else 1.0
    lo = hi = b
    far = b
    for _ in range(80):
        far = b + direction * step
        dfar, _ = slope(far)
        if not math.isfinite(dfar) or dfar * d1 <= 0.0:
            break
        b, d1 = far, dfar
        step *= 2.0
    if d1 > 0.0:
        lo, hi = far, b
    else:
        lo, hi = b, far
    # Newton inside the bracket, else bisection
    for _ in range(max_iter):
        d1, dabs = slope(b)
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
        d2 = float(np.sum(k.deriv2(y, f + b, p)))
        cand = b - d1 / d2 if d2 > 0.0 and math.isfinite(d2) else math.nan
        b = cand if lo < cand < hi else 0.5 * (lo + hi)
    if not phi(b) <= f0:
        return start
    return b


# ---------------------------------------------------------------------------
# The zero solution and C_max
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ZeroSolution:
    r"""The solution :math:`\alpha = 0` with the optimal offset, its dual point and ``C_max``.

    Attributes
    ----------
    bias : float
        :math:`b_0 = \mathrm{argmin}_b \sum_i\ell(y_i, b)` (0 without a bias).
    objective : float
        :math:`P(0, b_0)`.
    dual_objective : float
        When ``C >= C_max``: :math:`D` at :attr:`rho` made feasible
        (:func:`project_dual`), equal to :attr:`objective` up to rounding;
        ``-inf`` (not evaluated) below.
    rho : ndarray (N,)
        :math:`\rho^0 = -u` with :math:`u_i \in \partial_z\ell(y_i, b_0)` and
        :math:`\mathbf 1^\top\rho^0 = 0` (with a bias): the dual point of the
        zero solution, before any scaling into the regularizer's domain.
    dual_norms : ndarray (M,)
        :math:`\|\rho^0\|_{K_m}` (NaN when the regularizer has no threshold,
        :math:`t_1 = 0`: they are not needed then).
    C : float
        The problem's ``C``, at which :attr:`dual_objective` is evaluated.
    C_max : float
        :math:`\max_m\|\rho^0\|_{K_m} / t_1` with :math:`t_1` the regularizer's
        :meth:`~mklkit.components.base.Regularizer.zero_threshold` at ``C = 1``:
        for every :math:`C \ge C_{max}`, :math:`\alpha = 0` is optimal, with a
        zero duality gap.  ``inf`` when no ``C`` makes it optimal (a non-sparse
        regularizer and :math:`\rho^0 \ne 0`).
    """

    bias: float
    objective: float
    dual_objective: float
    rho: np.ndarray
    dual_norms: np.ndarray
    C_max: float
    C: float

    @property
    def gap(self) -> float:
        """Relative duality gap of the zero solution at the problem's ``C``."""
        return relative_gap(self.objective, self.dual_objective)

    def optimal(self, tol: float) -> bool:
        """Whether α = 0 is the certified solution: ``C >= C_max`` and gap <= ``tol``."""
        gap = self.gap
        return self.C >= self.C_max and math.isfinite(gap) and gap <= tol


def _zero_dual(loss: Loss, y: np.ndarray, b: float, bias: bool,
               lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r"""A subgradient :math:`u \in \partial_z\ell(y, b)` with :math:`\mathbf 1^\top u = 0`
    (with a bias); returns :math:`\rho = -u`.

    ``loss.kernels.deriv`` gives one subgradient per sample.  Where the loss
    has a kink at :math:`b`, the one-sided derivatives (a step of
    :math:`10^{-9}(1 + |b|)` either side) span the subdifferential, and the
    given subgradients are projected onto the zero sum within those intervals
    (:func:`project_sum_box`): the selection nearest to ``deriv``.  ``lower``
    and ``upper`` (the domain of the conjugate) are the fallback box.
    """
    k, p = loss.kernels, loss.param_vector
    n = y.size

    def d(z: float) -> np.ndarray:
        return np.asarray(k.deriv(y, np.full(n, z), p), dtype=np.float64)

    u = d(b)
    if not bias:
        return -u
    h = 1e-9 * (1.0 + abs(b))
    left, right = d(b - h), d(b + h)
    lo = np.minimum(np.minimum(left, right), u)
    hi = np.maximum(np.maximum(left, right), u)
    try:
        u = project_sum_box(u, lo, hi)
    except ValueError:
        u = project_sum_box(u, lower, upper)
    return -u


def zero_solution(problem: Problem) -> ZeroSolution:
    r"""The zero solution :math:`(\alpha, b) = (0, b_0)` of ``problem``, certified against ``C_max``.

    At :math:`\alpha = 0` the optimality conditions of eq. (42) are
    :math:`-\rho^0 \in \partial L(b_0\mathbf 1)`, :math:`\mathbf 1^\top\rho^0 = 0` and
    :math:`\|\rho^0\|_{K_m} \le \tilde g_C'(0^+)` for every kernel: the
    lasso-type threshold (as ``lambda_max`` in glmnet and celer), here
    :math:`C_{max} = \max_m\|\rho^0\|_{K_m}/t_1`.  Weak duality certifies it:
    for :math:`C \ge C_{max}` the dual point :math:`\rho^0` is feasible and
    Fenchel–Young makes :math:`D(\rho^0) = P(0, b_0)`.

    For a loss differentiable at :math:`b_0` (logistic, squared) ``C_max`` is
    the exact threshold.  Where the loss has kinks at :math:`b_0` (hinge,
    ε-insensitive) the dual point is one subgradient selection
    (:func:`_zero_dual`), so ``C_max`` is an upper bound of the exact
    threshold: α = 0 is still certified optimal for every :math:`C \ge C_{max}`,
    and engines reach it iteratively below.

    Costs one pass over the bank (:math:`\|\rho^0\|_{K_m}`; none for a regularizer
    without a threshold) and a 1-d search for :math:`b_0`.
    """
    loss, reg = problem.loss, problem.regularizer
    y = as_vector(problem.y)
    N = problem.n_samples
    b0 = optimal_bias(loss, y, np.zeros(N)) if problem.bias else 0.0
    lo, hi = dual_box(problem)
    rho = _zero_dual(loss, y, b0, problem.bias, -hi, -lo)
    t1 = float(reg.zero_threshold(1.0))
    M = problem.n_kernels
    if not np.any(rho != 0.0):
        norms, C_max = np.zeros(M), 0.0
    elif t1 > 0.0 and math.isfinite(t1):
        norms = dual_block_norms(problem.bank, rho)
        top = float(np.max(norms)) if norms.size else 0.0
        C_max = top / t1 if top > 0.0 else 0.0
    else:
        # no threshold: alpha = 0 is never optimal, and the pass over the bank is skipped
        norms, C_max = np.full(M, math.nan), math.inf
    primal = loss_value(loss, y, np.full(N, b0)) + regularizer_value(reg, np.zeros(norms.size),
                                                                      problem.C)
    dual = -math.inf
    if problem.C >= C_max:
        dual, _, _ = projected_dual_objective(problem, rho, norms=norms)
    return ZeroSolution(bias=float(b0), objective=float(primal), dual_objective=float(dual),
                        rho=rho, dual_norms=norms, C_max=float(C_max), C=float(problem.C))


def zero_result(problem: Problem, zero: ZeroSolution, *, engine: str, t0: float) -> SolveResult:
    r"""The certified result :math:`\alpha = 0`, :math:`b = b_0` when ``C >= C_max``.

    Engines return it before iterating (:meth:`ZeroSolution.optimal`); one
    history record (iteration 0) carries the objectives.
    """
    M, N = problem.n_kernels, problem.n_samples
    gap = zero.gap
    elapsed = time.perf_counter() - t0
    record = {"iteration": 0, "objective": zero.objective, "dual_objective": zero.dual_objective,
              "gap": gap, "n_active": 0, "time_s": elapsed}
    message = (f"{engine}: alpha = 0 is optimal: C = {problem.C:g} >= C_max = {zero.C_max:.6g} "
               f"(relative duality gap {gap:.3e}); every kernel weight is 0")
    rho, _ = project_dual(problem, zero.rho, norms=zero.dual_norms)
    return build_result(problem, engine=engine, status=Status.CONVERGED, alpha=np.zeros((M, N)),
                        bias=zero.bias, primal=zero.objective, dual=zero.dual_objective,
                        iterations=0, history=[record], message=message, time_s=elapsed,
                        norms=np.zeros(M), rho=rho, C_max=zero.C_max)


class Incumbents:
    r"""The best primal point and the best dual point an engine has seen.

    Weak duality holds between *any* primal point and *any* feasible dual
    point, so the smallest primal value and the largest dual value seen
    bound the optimum from both sides: their relative gap certifies the
    primal incumbent, and it is never larger than the gap of the current
    iterate.  Engines return the incumbents, so a solve that stalls or
    oscillates never returns a point worse than one it has already seen
    (the zero solution included, when given).

    ``offer_primal(value, **state)`` and ``offer_dual(value, **state)`` keep
    the state of the better value (copies are the caller's concern: pass
    arrays that are not modified later).
    """

    def __init__(self, zero: ZeroSolution | None = None, M: int = 0, N: int = 0) -> None:
        self.primal = math.inf
        self.dual = -math.inf
        self.primal_state: dict[str, Any] = {}
        self.dual_state: dict[str, Any] = {}
        self.primal_iteration = self.dual_iteration = -2
        if zero is not None:                      # iteration -1: the zero solution
            self.offer_primal(zero.objective, -1, alpha=np.zeros((M, N)), bias=zero.bias,
                              norms=np.zeros(M))

    def offer_primal(self, value: float, iteration: int, **state: Any) -> bool:
        """Keep ``state`` if ``value`` is a finite primal value below the incumbent."""
        if math.isfinite(value) and value < self.primal:
            self.primal, self.primal_state, self.primal_iteration = float(value), state, iteration
            return True
        return False

    def offer_dual(self, value: float, iteration: int, **state: Any) -> bool:
        """Keep ``state`` if ``value`` is a finite dual value above the incumbent."""
        if math.isfinite(value) and value > self.dual:
            self.dual, self.dual_state, self.dual_iteration = float(value), state, iteration
            return True
        return False

    @property
    def gap(self) -> float:
        """:func:`relative_gap` of the incumbents (``inf`` before both exist)."""
        if not (math.isfinite(self.primal) and math.isfinite(self.dual)):
            return math.inf
        return relative_gap(self.primal, self.dual)


def incumbent_result(
    problem: Problem,
    inc: Incumbents,
    *,
    engine: str,
    status: Status,
    message: str,
    iterations: int,
    history: list[dict[str, Any]],
    t0: float,
    C_max: float | None,
    unit: str = "iteration",
    stacklevel: int = 4,
    warn: bool = True,
) -> SolveResult:
    """The result of a run from its :class:`Incumbents`: best primal and best dual point.

    The primal state offered must hold ``alpha`` (M, N), ``bias`` and
    ``norms`` (M,); the dual state ``rho``.  When the primal point is not
    the last iterate, the message says where it comes from (``unit`` names
    an iteration of the engine).  ``warn``: as for :func:`build_result`
    (:class:`mklkit.engines.base.Run` builds results without and
    :meth:`mklkit.engines.base.Engine.solve` warns once).
    """
    st = inc.primal_state
    if inc.primal_iteration != iterations:
        where = ("alpha = 0 (the zero solution)" if inc.primal_iteration < 0
                 else f"{unit} {inc.primal_iteration}")
        message += f"; the primal point is that of {where}"
    return build_result(
        problem,
        engine=engine,
        status=status,
        alpha=st["alpha"],
        bias=st["bias"],
        primal=inc.primal,
        dual=inc.dual,
        iterations=iterations,
        history=history,
        message=message,
        time_s=time.perf_counter() - t0,
        norms=st["norms"],
        rho=inc.dual_state.get("rho"),
        C_max=C_max,
        stacklevel=stacklevel + 1,
        warn=warn,
    )


# ---------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------
def build_result(
    problem: Problem,
    *,
    engine: str,
    status: Status,
    alpha: np.ndarray,
    bias: float,
    primal: float,
    dual: float,
    iterations: int,
    history: list[dict[str, Any]],
    message: str,
    time_s: float,
    norms: np.ndarray | None = None,
    rho: np.ndarray | None = None,
    C_max: float | None = None,
    stacklevel: int = 3,
    weights: np.ndarray | None = None,
    warn: bool = True,
) -> SolveResult:
    r"""Assemble a :class:`~mklkit.result.SolveResult` and warn when unconverged.

    Kernel weights are :func:`kernel_weights` of the primal block norms
    unless given.  With ``warn``, statuses in :data:`UNCONVERGED` emit
    ``message`` as a :class:`~mklkit.result.ConvergenceWarning` (never an
    exception).

    Parameters
    ----------
    norms : ndarray (M,), optional
        :math:`\|\alpha_m\|_{K_m}`; computed when not given.
    rho : ndarray (N,), optional
        The dual point used for ``dual``.
    C_max : float, optional
        :attr:`ZeroSolution.C_max` of the problem, when the engine computed it.
    weights : ndarray (M,), optional
        Kernel weights summing to 1 (or all 0), for an engine whose
        regularizer's ``weight`` kernel does not give them (a regularizer
        that couples the blocks).
    """
    alpha = np.array(alpha, dtype=np.float64)
    if norms is None:
        norms = block_norms(problem.bank, alpha)
    norms = np.array(norms, dtype=np.float64)
    if weights is None:
        weights = kernel_weights(problem.regularizer, norms)
    else:
        weights = np.array(weights, dtype=np.float64)
    gap = relative_gap(primal, dual)
    if warn and status in UNCONVERGED:
        warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel)
    return SolveResult(
        status=status,
        objective=float(primal),
        dual_objective=float(dual),
        gap=float(gap),
        iterations=int(iterations),
        alpha=alpha,
        bias=float(bias) if problem.bias else 0.0,
        kernel_weights=weights,
        block_norms=norms,
        history=history,
        message=message,
        time_s=float(time_s),
        engine=engine,
        dual=None if rho is None else np.array(rho, dtype=np.float64),
        C_max=None if C_max is None else float(C_max),
    )
