r"""The elastic-net family :math:`g(t) = a\sqrt t + b\,t/2`: the block 1-norm ``l1``
(:math:`b = 0`), ``elasticnet`` and ``uniform`` (:math:`a = 0`)."""

from __future__ import annotations

import numpy as np

from .base import INF, Regularizer, kernel
from .params import Param


class L1(Regularizer):
    r"""Block 1-norm :math:`C\sum_m\|\alpha_m\|_{K_m}`, :math:`g(t) = \sqrt t` (eq. 4).

    prox: block soft-threshold :math:`(v - C)_+` (eq. 13); conjugate: the
    indicator of :math:`[0, C]` (eq. 21); envelope :math:`(y - C)_+^2/2`;
    kernel weight :math:`d_m = \|\alpha_m\|_{K_m}`, :math:`h(d) = d`.
    """

    name = "l1"
    description = "block 1-norm (sparse MKL, SpicyMKL eq. 4)"

    @kernel
    def value(x, C, params):
        return C * x

    @kernel
    def prox(v, C, params):
        return np.maximum(v - C, 0.0)

    @kernel
    def prox_deriv(v, C, params):
        return (v > C).astype(np.float64)

    @kernel
    def conj(y, C, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 0.0 if y[i] <= C else INF
        return out

    conj_grad = conj_hess = conj  # 0 on the domain, inf outside

    @kernel
    def env(y, C, params):
        r = np.maximum(y - C, 0.0)
        return 0.5 * r * r

    @kernel
    def weight(x, params):
        return x.copy()

    @kernel
    def penalty(d, params):
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            out[i] = d[i] if d[i] >= 0.0 else INF
        return out

    def conj_radius(self, C: float) -> float:
        return float(C)

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        return C * cp.sum(cp.hstack(norms))


class ElasticNet(Regularizer):
    r"""Elastic net :math:`C\sum_m((1-\lambda)\|\alpha_m\|_{K_m} + \tfrac\lambda2\|\alpha_m\|_{K_m}^2)` (eq. 43).

    prox :math:`(v - C(1-\lambda))_+/(1 + C\lambda)`; conjugate (46)
    :math:`(y - C(1-\lambda))_+^2/(2C\lambda)`, smooth for :math:`\lambda > 0`
    (one-step method, §4.3.1); kernel weight
    :math:`d = x/(1 - \lambda + \lambda x)`; :math:`h(d) = (1-\lambda)^2 d/(1 - \lambda d)`.
    ``lam = 0`` is the block 1-norm, ``lam = 1`` the uniform combination.
    """

    name = "elasticnet"
    description = "elastic-net MKL: (1-lam)*block 1-norm + lam/2*squared block 2-norm"
    params = (Param("lam", 0.5, "weight of the squared (smooth) part", low=0.0, high=1.0),)

    @kernel
    def value(x, C, params):
        lam = params[0]
        return C * (1.0 - lam) * x + 0.5 * C * lam * x * x

    @kernel
    def prox(v, C, params):
        lam = params[0]
        return np.maximum(v - C * (1.0 - lam), 0.0) / (1.0 + C * lam)

    @kernel
    def prox_deriv(v, C, params):
        lam = params[0]
        return (v > C * (1.0 - lam)).astype(np.float64) / (1.0 + C * lam)

    @kernel
    def conj(y, C, params):
        lam = params[0]
        a = C * (1.0 - lam)
        b = C * lam
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            r = y[i] - a
            if r <= 0.0:
                out[i] = 0.0
            elif b > 0.0:
                out[i] = r * r / (2.0 * b)
            else:
                out[i] = INF
        return out

    @kernel
    def conj_grad(y, C, params):
        lam = params[0]
        a = C * (1.0 - lam)
        b = C * lam
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            r = y[i] - a
            if r <= 0.0:
                out[i] = 0.0
            elif b > 0.0:
                out[i] = r / b
            else:
                out[i] = INF
        return out

    @kernel
    def conj_hess(y, C, params):
        lam = params[0]
        a = C * (1.0 - lam)
        b = C * lam
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            if y[i] <= a:
                out[i] = 0.0
            elif b > 0.0:
                out[i] = 1.0 / b
            else:
                out[i] = INF
        return out

    @kernel
    def env(y, C, params):
        lam = params[0]
        r = np.maximum(y - C * (1.0 - lam), 0.0)
        return 0.5 * r * r / (1.0 + C * lam)

    @kernel
    def weight(x, params):
        # d = 1 / (2 g'(x^2)) = x / ((1 - lam) + lam x)
        lam = params[0]
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            if lam >= 1.0:
                out[i] = 1.0
            else:
                out[i] = x[i] / ((1.0 - lam) + lam * x[i])
        return out

    @kernel
    def penalty(d, params):
        # Table 3: h(d) = (1 - lam)^2 d / (1 - lam d) on 0 <= d < 1/lam
        lam = params[0]
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            di = d[i]
            den = 1.0 - lam * di
            if di < 0.0:
                out[i] = INF
            elif lam >= 1.0:
                out[i] = 0.0 if di <= 1.0 else INF
            elif den <= 0.0:
                out[i] = INF
            else:
                out[i] = (1.0 - lam) ** 2 * di / den
        return out

    @property
    def smooth_conjugate(self) -> bool:
        return self.lam > 0.0

    @property
    def sparse(self) -> bool:
        return self.lam < 1.0

    def conj_radius(self, C: float) -> float:
        return float(C) if self.lam == 0.0 else float("inf")

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        lam = self.lam
        return C * ((1 - lam) * cp.sum(cp.hstack(norms)) + lam / 2 * cp.sum(cp.hstack(squares)))


class Uniform(Regularizer):
    r"""Uniform combination :math:`\frac C2\sum_m\|\alpha_m\|_{K_m}^2`: every :math:`d_m = 1`.

    Equivalent to an SVM-type problem on :math:`\sum_m K_m`;
    :math:`h = I_{[0,1]}` (Table 3).
    """

    name = "uniform"
    description = "uniform kernel weights (squared block 2-norm, all d_m = 1)"
    smooth_conjugate = True
    sparse = False

    @kernel
    def value(x, C, params):
        return 0.5 * C * x * x

    @kernel
    def prox(v, C, params):
        return v / (1.0 + C)

    @kernel
    def prox_deriv(v, C, params):
        return np.full(v.shape[0], 1.0 / (1.0 + C))

    @kernel
    def conj(y, C, params):
        return y * y / (2.0 * C)

    @kernel
    def conj_grad(y, C, params):
        return y / C

    @kernel
    def conj_hess(y, C, params):
        return np.full(y.shape[0], 1.0 / C)

    @kernel
    def env(y, C, params):
        return y * y / (2.0 * (1.0 + C))

    @kernel
    def weight(x, params):
        return np.ones(x.shape[0])

    @kernel
    def penalty(d, params):
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            out[i] = 0.0 if 0.0 <= d[i] <= 1.0 else INF
        return out

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        return C / 2 * cp.sum(cp.hstack(squares))
