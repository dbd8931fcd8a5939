r"""Start and Newton helpers the two SpicyMKL methods share.

* :func:`initial_dual`: a strictly feasible dual start;
* :func:`warm_dual`: a warm start's dual point made feasible;
* :func:`_centre`: :math:`\mathbf 1^\top\rho = 0` restored inside the box;
* :func:`_newton_direction`: the equality-constrained Newton system of the
  one-step method (§4.3).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from .. import common

__all__ = ["initial_dual", "warm_dual", "_centre", "_newton_direction"]


def initial_dual(lower: np.ndarray, upper: np.ndarray, bias: bool) -> np.ndarray:
    r"""A strictly feasible dual start.

    ``lower``/``upper`` bound the domain of :math:`\ell^*(y_i, u)` in
    :math:`u = -\rho_i`, so :math:`\rho_i \in (-upper_i, -lower_i)`.  Every
    coordinate follows the same monotone path :math:`\rho_i(\theta)`,
    :math:`\theta \in (0, 1)`, through the interior of its interval (linear
    on a bounded interval, rational on a half-line, ``tan`` on the real
    line); with a bias, :math:`\theta` is chosen by bisection so that
    :math:`\mathbf 1^\top\rho = 0`, otherwise :math:`\theta = 1/2`.

    For the logistic loss this gives the class-balanced point
    :math:`\rho_i = y_i N_{-y_i}/N` (the dual of α = 0 with the optimal
    bias); for the squared loss :math:`\rho = 0`.

    Raises
    ------
    ValueError
        When no strictly interior point with :math:`\mathbf 1^\top\rho = 0`
        exists (e.g. a classification loss with one class only).
    """
    a = -np.asarray(upper, dtype=np.float64)
    b = -np.asarray(lower, dtype=np.float64)
    if np.any(~(a < b)):
        raise ValueError("the domain of the loss conjugate has an empty interior")
    fa, fb = np.isfinite(a), np.isfinite(b)

    def point(theta: float) -> np.ndarray:
        out = np.empty_like(a)
        both = fa & fb
        out[both] = a[both] + theta * (b[both] - a[both])
        lo_only = fa & ~fb
        out[lo_only] = a[lo_only] + theta / (1.0 - theta)
        hi_only = ~fa & fb
        out[hi_only] = b[hi_only] - (1.0 - theta) / theta
        free = ~fa & ~fb
        out[free] = math.tan(math.pi * (theta - 0.5))
        return out

    if not bias:
        return point(0.5)
    lo_t, hi_t = 1e-12, 1.0 - 1e-12
    if not (np.sum(point(lo_t)) < 0.0 < np.sum(point(hi_t))):
        raise ValueError(
            "no dual point strictly inside the loss conjugate's domain satisfies "
            "sum(rho) = 0 (are both classes present?)"
        )
    for _ in range(200):
        mid = 0.5 * (lo_t + hi_t)
        s = float(np.sum(point(mid)))
        if s == 0.0:
            lo_t = hi_t = mid
            break
        if s < 0.0:
            lo_t = mid
        else:
            hi_t = mid
        if hi_t - lo_t <= 1e-15:
            break
    rho = _centre(point(0.5 * (lo_t + hi_t)), a, b)
    if np.any(~((a < rho) & (rho < b))):
        raise ValueError("could not place a centred dual point inside the loss conjugate's domain")
    return rho


def _centre(rho: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""``rho`` shifted onto :math:`\mathbf 1^\top\rho = 0` without leaving the box :math:`(a, b)`.

    Newton steps keep the sum at zero up to rounding, which the shift
    removes.  Subtracting the mean from every coordinate can push one that
    has converged to the boundary of the loss conjugate's domain (it gets
    within 1e-19 of it on badly scaled kernels) outside, where the conjugate
    is infinite.  So the sum is spread evenly over the coordinates that stay
    strictly inside (all of them, normally); ``rho`` is returned as it is
    when none can take it.

    This is not the certificate's projection
    (:func:`~mklkit.engines.common.centre_dual`): the point is the Newton
    iterate itself, which must stay strictly inside the domain (the
    conjugate's derivatives are infinite on its boundary), whereas the
    Euclidean projection puts coordinates on the boundary.  The certificate
    projects a copy (:meth:`~mklkit.engines.common.Certificate.at`).
    """
    total = float(np.sum(rho))
    free = np.ones(rho.size, dtype=bool)
    while total != 0.0 and np.any(free):
        out = rho.copy()
        out[free] -= total / np.count_nonzero(free)
        leave = free & ~((a < out) & (out < b))
        if not np.any(leave):
            return out
        free &= ~leave
    return rho


def _newton_direction(H: np.ndarray, g: np.ndarray, bias: bool) -> tuple[np.ndarray, float, str]:
    r"""Solve the (equality-constrained) Newton system.

    Cholesky of :math:`H`; if :math:`H` is not numerically positive definite,
    a ridge :math:`\tau I` growing from :math:`10^{-12}\max_i H_{ii}`, and as
    a last resort a least-squares solve of the full KKT matrix.

    Returns
    -------
    delta : ndarray (N,)
    nu : float
        Multiplier of :math:`\mathbf 1^\top\rho = 0` (``nan`` without a bias).
    method : str
        ``"cholesky"``, ``"ridge"`` or ``"lstsq"``.
    """
    N = g.size
    ones = np.ones(N)
    scale = max(float(np.max(np.abs(np.diag(H)))), 1e-300)
    method = "cholesky"
    for k in range(6):
        Hk = H
        if k > 0:
            Hk = H + (scale * 1e-12 * 100.0 ** (k - 1)) * np.eye(N)
            method = "ridge"
        try:
            cf = scipy.linalg.cho_factor(Hk, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            continue
        x1 = scipy.linalg.cho_solve(cf, -g, check_finite=False)
        if not bias:
            if np.all(np.isfinite(x1)):
                return x1, math.nan, method
            continue
        x2 = scipy.linalg.cho_solve(cf, ones, check_finite=False)
        den = float(np.sum(x2))
        if den > 0.0 and np.all(np.isfinite(x1)) and np.all(np.isfinite(x2)):
            nu = float(np.sum(x1)) / den
            return x1 - nu * x2, nu, method
    if bias:
        A = np.zeros((N + 1, N + 1))
        A[:N, :N] = H
        A[:N, N] = 1.0
        A[N, :N] = 1.0
        rhs = np.concatenate([-g, [0.0]])
        sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
        return sol[:N], float(sol[N]), "lstsq"
    return np.linalg.lstsq(H, -g, rcond=None)[0], math.nan, "lstsq"


def warm_dual(dual: np.ndarray, lower: np.ndarray, upper: np.ndarray, bias: bool) -> np.ndarray:
    r"""A warm start's dual point projected into the closed domain of the loss conjugate.

    ``lower``/``upper`` bound :math:`u = -\rho_i`; the point is clipped to
    :math:`[-upper, -lower]` and, with a bias, projected onto
    :math:`\mathbf 1^\top\rho = 0` within that box
    (:func:`~mklkit.engines.common.project_sum_box`).  A convex combination
    with a strictly interior start (:func:`initial_dual`) stays strictly inside.
    """
    lo, hi = -upper, -lower
    cand = np.clip(np.asarray(dual, dtype=np.float64), lo, hi)
    if bias:
        cand = common.project_sum_box(cand, lo, hi)
    return cand
