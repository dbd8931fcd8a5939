r"""Huber loss for robust regression, as a plugin writes it in the proposed form."""

import numpy as np

from benchmarks.component_forms.component import Loss, Param, kernel
from mklkit.components.base import REGRESSION


class Huber(Loss):
    r"""Huber loss :math:`\ell(y, z) = \tfrac12 r^2` for :math:`|r| \le \delta`, else
    :math:`\delta(|r| - \tfrac12\delta)`, :math:`r = z - y`; conjugate
    :math:`\ell^*(y, u) = uy + \tfrac12 u^2` on :math:`|u| \le \delta`, given in the
    constrained form :math:`\ell_0^* = uy + \tfrac12 u^2`, :math:`u - \delta \le 0`,
    :math:`-\delta - u \le 0` (SpicyMKL eq. 33).  ``params = [delta]``."""

    name = "huber"
    description = "Huber loss for robust regression: quadratic near 0, linear beyond delta"
    task = REGRESSION
    params = (Param("delta", 1.0, "residual at which the loss turns linear", low=0.0, low_open=True),)
    smooth_conjugate = False
    n_cons = 2

    @kernel
    def value(y, z, p):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            r = abs(z[i] - y[i])
            out[i] = 0.5 * r * r if r <= p[0] else p[0] * (r - 0.5 * p[0])
        return out

    @kernel
    def deriv(y, z, p):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = min(max(z[i] - y[i], -p[0]), p[0])
        return out

    @kernel
    def deriv2(y, z, p):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 1.0 if abs(z[i] - y[i]) < p[0] else 0.0
        return out

    @kernel
    def conj(y, u, p):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = u[i] * y[i] + 0.5 * u[i] * u[i] if abs(u[i]) <= p[0] else np.inf
        return out

    @kernel
    def conj_grad(y, u, p):
        return y + u

    @kernel
    def conj_hess(y, u, p):
        return np.ones(y.shape[0])

    @kernel
    def conj_lower(y, p):
        return np.full(y.shape[0], -p[0])

    @kernel
    def conj_upper(y, p):
        return np.full(y.shape[0], p[0])

    @kernel
    def l0(y, u, ut, p):
        return u * y + 0.5 * u * u

    @kernel
    def l0_grad(y, u, ut, p):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = y + u
        return out

    @kernel
    def l0_hess(y, u, ut, p):
        return np.ones((y.shape[0], 1, 1))

    @kernel
    def cons(y, u, ut, p):
        out = np.empty((y.shape[0], 2))
        out[:, 0] = u - p[0]
        out[:, 1] = -p[0] - u
        return out

    @kernel
    def cons_grad(y, u, ut, p):
        out = np.empty((y.shape[0], 2, 1))
        out[:, 0, 0] = 1.0
        out[:, 1, 0] = -1.0
        return out

    @kernel
    def cons_hess(y, u, ut, p):
        return np.zeros((y.shape[0], 2, 1, 1))

    def deriv_lipschitz(self):
        return 1.0

    def cvxpy_expr(self, y, z):
        import cvxpy as cp

        return 0.5 * cp.sum(cp.huber(z - y, self.delta))  # cvxpy's huber is twice ours
