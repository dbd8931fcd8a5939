r"""A pinball (quantile) loss written against the loss contract alone, as a plugin would.

:math:`\ell(y, z) = \tau(y - z)_+ + (1 - \tau)(z - y)_+`; conjugate
:math:`\ell^*(y, u) = yu` on :math:`-\tau \le u \le 1 - \tau`, whose gradient
is finite at the ends: the constrained form (SpicyMKL eq. 33) with
:math:`\ell_0^* = yu`, :math:`h_1 = -\tau - u`, :math:`h_2 = u - (1 - \tau)`
and no auxiliary variables.  The conjugate is linear on each side of 0
(``linear_conjugate``), so the SMO-MKL engine takes it too.  Nothing in mklkit
knows this class.
"""

from __future__ import annotations

import numpy as np
from mklkit.components.base import REGRESSION, Loss, Param, kernel


class Pinball(Loss):
    """Pinball loss of quantile ``tau`` (see the module docstring)."""

    name = "pinball"
    description = "pinball (quantile) loss"
    task = REGRESSION
    params = (Param("tau", 0.5, "quantile", low=0.0, high=1.0, low_open=True, high_open=True),)
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True  # y u on [-tau, 0] and on [0, 1 - tau]: the SVM-type dual
    n_aux = 0
    n_cons = 2

    @kernel
    def value(y, z, params):
        tau = params[0]
        r = y - z
        return np.maximum(tau * r, (tau - 1.0) * r)

    @kernel
    def deriv(y, z, params):
        tau = params[0]
        return np.where(z > y, 1.0 - tau, -tau)

    @kernel
    def conj(y, u, params):
        tau = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = y[i] * u[i] if -tau <= u[i] <= 1.0 - tau else np.inf
        return out

    @kernel
    def conj_grad(y, u, params):
        return y.copy()

    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -params[0])

    @kernel
    def conj_upper(y, params):
        return np.full(y.shape[0], 1.0 - params[0])

    @kernel
    def l0(y, u, ut, params):
        return y * u

    @kernel
    def l0_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = y
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 1, 1))

    @kernel
    def cons(y, u, ut, params):
        tau = params[0]
        out = np.empty((y.shape[0], 2))
        out[:, 0] = -tau - u
        out[:, 1] = u - (1.0 - tau)
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 2, 1))
        out[:, 0, 0] = -1.0
        out[:, 1, 0] = 1.0
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 2, 1, 1))

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        terms = self.tau * cp.pos(y - z) + (1 - self.tau) * cp.pos(z - y)
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(w, terms))
