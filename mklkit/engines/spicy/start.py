"""The dual start and the Newton system the two SpicyMKL methods share (``docs/engines.md``)."""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import scipy.linalg

from ...kernels.factor import FactorBank
from .. import common
from ..base import Algorithm
from .factor_newton import LowRankHessian
from .factor_newton import newton_direction as low_rank_direction


class _SpicyAlgorithm(Algorithm):
    """What both methods unpack: the conjugate's domain and how the Hessians are held."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lower, self.upper = self.conj_domain()
        self.row_block = max(8, -(-self.N // (2 * numba.get_num_threads())))
        self.factored = isinstance(self.bank, FactorBank)

    def newton_matrix(self, d, idx, s, t, KR, vecs, ones: float = 0.0) -> tuple[Any, bool]:
        r""":math:`\mathrm{diag}(d) + \omega\mathbf 1\mathbf 1^\top + \sum_p s_pK_{m_p} + t_pr_pr_p^\top`,
        :math:`r_p` = ``KR[p]`` :math:`= K_{m_p}v_p` (eqs. 27, 50), a :class:`LowRankHessian` on a
        factor bank (``vecs``: the :math:`v_p`), and whether it is finite."""
        if self.factored:
            H = LowRankHessian(self.bank, d, idx, s, t, vecs, ones)
            return H, H.finite
        H = np.diag(d)
        if ones:
            H += ones
        if idx.size:
            contiguous = np.ascontiguousarray
            self.bank.accumulate_hessian(H, idx, contiguous(s), contiguous(KR), contiguous(t), self.row_block)
        return H, bool(np.all(np.isfinite(H)))


def initial_dual(lower: np.ndarray, upper: np.ndarray, bias: bool) -> np.ndarray:
    r"""A dual start strictly inside the box :math:`(-upper, -lower)` of the loss conjugate's domain.

    Every coordinate follows one monotone path :math:`\rho_i(\theta)` through its interval;
    :math:`\theta = 1/2`, or with a bias the :math:`\theta` of :math:`\mathbf 1^\top\rho = 0` by
    bisection (the class-balanced point for the logistic loss).  ``ValueError`` when there is
    none (one class only).
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
    r"""``rho`` shifted onto :math:`\mathbf 1^\top\rho = 0`, the sum spread over the coordinates that
    stay strictly inside the box :math:`(a, b)`: unlike the certificate's projection, the Newton
    iterate must stay where the conjugate's derivatives are finite."""
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


def _newton_direction(
    H: Any, g: np.ndarray, bias: bool, ridge: np.ndarray | None = None
) -> tuple[np.ndarray, float, str]:
    r"""``(delta, nu, method)``: the Newton step, with a bias under :math:`\mathbf 1^\top\Delta = 0`
    (``nu`` its multiplier, else ``nan``), by Cholesky, a growing ridge (``"ridge"``) or ``"lstsq"``
    of the KKT matrix (§4.3); with a Levenberg–Marquardt ``ridge`` (N,), growing a hundredfold
    after each failure, or steepest descent (``"gradient"``); on a factor bank by
    :func:`.factor_newton.newton_direction`."""
    if isinstance(H, LowRankHessian):
        return low_rank_direction(H, g, bias, ridge=ridge)
    N = g.size
    ones = np.ones(N)
    diag = np.abs(np.diag(H))
    scale = max(float(np.max(diag)), 1e-300)
    for k in range(6 if ridge is None else 8):
        if ridge is None:
            Hk = H if k == 0 else H + (scale * 1e-12 * 100.0 ** (k - 1)) * np.eye(N)
        else:
            if k > 0:
                ridge = np.maximum(ridge * 100.0, 1e-12 * np.where(diag > 0.0, diag, scale))
            Hk = H.copy()
            Hk[np.diag_indices(N)] += ridge
        method = "cholesky" if k == 0 else "ridge"
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
    if ridge is not None:
        return -g / scale, math.nan, "gradient"
    if bias:
        A = np.block([[H, ones[:, None]], [ones[None, :], np.zeros((1, 1))]])
        rhs = np.concatenate([-g, [0.0]])
        sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
        return sol[:N], float(sol[N]), "lstsq"
    return np.linalg.lstsq(H, -g, rcond=None)[0], math.nan, "lstsq"


def warm_dual(dual: np.ndarray, lower: np.ndarray, upper: np.ndarray, bias: bool) -> np.ndarray:
    """A warm start's dual point clipped into the closed box and, with a bias, projected onto
    :math:`\\mathbf 1^\\top\\rho = 0` within it."""
    lo, hi = -upper, -lower
    cand = np.clip(np.asarray(dual, dtype=np.float64), lo, hi)
    if bias:
        cand = common.project_sum_box(cand, lo, hi)
    return cand
