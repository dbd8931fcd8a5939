r"""The dual point of the certificate, made feasible the way of SpicyMKL §6.1.

A dual point is projected onto :math:`\mathbf 1^\top\rho = 0` (with a bias)
within the box that the domain of the loss conjugate gives (:func:`dual_box`,
:func:`centre_dual`, :func:`project_sum_box`) and, where the domain of
:math:`\tilde g_C^*` is a ball, scaled into it (:func:`scale_into_radius`);
:func:`project_dual` does both, :func:`projected_dual_objective` evaluates the
dual objective (:mod:`mklkit.engines.objectives`) there.
"""

from __future__ import annotations

import math

import numpy as np

from ..problem import Problem
from .objectives import SampleLoss, dual_block_norms, dual_objective

__all__ = [
    "centre_dual",
    "project_dual",
    "project_sum_box",
    "scale_into_radius",
    "dual_box",
    "projected_dual_objective",
]

#: Relative size of :math:`|\mathbf 1^\top\rho| / \|\rho\|_1` below which the
#: projection onto :math:`\mathbf 1^\top\rho = 0` keeps the given block norms.
_CENTRED = 1e-12


def project_sum_box(rho: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
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
        raise ValueError(
            "no point of the box has a zero sum: the dual is infeasible "
            f"(sum of lower ends {float(np.sum(lo)):g}, of upper ends "
            f"{float(np.sum(hi)):g})"
        )

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
            while j - i > 1:  # S(bp[i]) >= 0 >= S(bp[j])
                mid = (i + j) // 2
                if total(bp[mid]) >= 0.0:
                    i = mid
                else:
                    j = mid
            left, right = bp[i], bp[j]
            if total(left) == 0.0:
                return np.clip(rho - left, lo, hi)
    # on the open piece every coordinate is clipped at the same end or free
    probe = (
        (left + right) / 2
        if math.isfinite(left) and math.isfinite(right)
        else (left + 1.0 if math.isfinite(left) else (right - 1.0 if math.isfinite(right) else 0.0))
    )
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
    r"""Bounds of :math:`\rho_i` from the (weighted) loss conjugate's domain.

    ``conj_lower``/``conj_upper`` of :class:`SampleLoss` bound :math:`u = -\rho_i`, so
    :math:`\rho_i \in [-\mathrm{upper}_i, -\mathrm{lower}_i]`.
    """
    sl = SampleLoss.of(problem)
    return -sl.conj_upper(), -sl.conj_lower()


def centre_dual(rho: np.ndarray, lower: np.ndarray, upper: np.ndarray, bias: bool = True) -> np.ndarray:
    r"""The Euclidean projection of a dual point onto :math:`\mathbf 1^\top\rho = 0` in its box.

    With a bias: the projection onto :math:`\{\rho: \mathbf 1^\top\rho = 0,\ l \le \rho
    \le u\}`.  When the plain shift :math:`\rho - \mathbf 1(\mathbf 1^\top\rho)/N` (the
    paper's centring) stays inside the box it is that projection and is returned;
    otherwise :func:`project_sum_box` finds it (plain centring would leave the
    domain of e.g. the hinge conjugate).  Without a bias: the clipping into the
    box.  Returns a new array.

    Raises
    ------
    ValueError
        As :func:`project_sum_box`, when no point of the box has a zero sum.
    """
    rho = np.asarray(rho, dtype=np.float64)
    if not bias:
        return np.clip(rho, lower, upper)
    shifted = rho - float(np.sum(rho)) / rho.size
    if np.all((shifted >= lower) & (shifted <= upper)):
        return shifted
    return project_sum_box(rho, lower, upper)


def project_dual(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Make a dual point feasible the way of SpicyMKL §6.1.

    First the point is projected onto the equality constraint *and* the box
    :math:`[l_i, u_i]` that the domain of :math:`\ell^*(y_i, -\rho_i)` gives
    (:func:`dual_box`, :func:`centre_dual`: the plain centring when it stays in
    the box, the exact projection :func:`project_sum_box` otherwise; without a
    bias only the clipping).  Then, when the domain of :math:`\tilde g_C^*` is
    the ball of radius :math:`R` = ``regularizer.conj_radius(C)`` (finite), the
    point is scaled into it (:func:`scale_into_radius`):

    .. math::
        \tilde\rho' = \tilde\rho / \max\{\max_m \|\tilde\rho\|_{K_m}/R,\ 1\}.

    Scaling towards 0 keeps the box when it contains 0 (every loss bounded
    below).  Every engine's certificate makes its dual point feasible this
    way; an engine that computes the block norms of the projected point in a
    pass of its own calls the two steps itself.

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
    rho = np.asarray(rho, dtype=np.float64)
    lo, hi = dual_box(problem)
    unchanged = bool(np.all((rho >= lo) & (rho <= hi)))
    if problem.bias:
        unchanged = unchanged and abs(float(np.sum(rho))) <= _CENTRED * float(np.sum(np.abs(rho)))
    rho = centre_dual(rho, lo, hi, problem.bias)
    if norms is None or not unchanged:
        norms = dual_block_norms(problem.bank, rho)
    else:
        norms = np.array(norms, dtype=np.float64)
    return scale_into_radius(rho, norms, float(problem.regularizer.conj_radius(problem.C)))


def scale_into_radius(rho: np.ndarray, norms: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
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
