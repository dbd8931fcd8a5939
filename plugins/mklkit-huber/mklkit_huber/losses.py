r"""Huber (regression) and squared-hinge (classification) losses.

Both follow the loss contract of :mod:`mklkit.components.base`: a plain
class that declares its parameters, and ``@kernel`` methods (compiled
``njit(cache=True)``) of float64 arrays plus the parameter vector.  Each
also gives its cvxpy expression (``cvxpy_expr``), so mklkit's conic reference
solves problems with it.

Both conjugates have a bounded domain on which their gradient stays finite,
so they are not ``smooth_conjugate``: each also gives the constrained
representation of SpicyMKL §3.4.2 (eq. 33) that the engine uses instead.
"""

from __future__ import annotations

import numpy as np

from mklkit.components.base import CLASSIFICATION, REGRESSION, Loss, Param, kernel

__all__ = ["Huber", "SquaredHinge"]


# ---------------------------------------------------------------------------
# Huber: params = [delta]
# ---------------------------------------------------------------------------
class Huber(Loss):
    r"""Huber loss for robust regression.

    .. math::
        \ell(y, z) = \begin{cases} \tfrac12 r^2 & |r| \le \delta \\
                     \delta(|r| - \tfrac12\delta) & |r| > \delta \end{cases},
        \qquad r = z - y,

    with conjugate (Huber 1964)

    .. math::
        \ell^*(y, u) = uy + \tfrac12 u^2 \ \text{on}\ |u| \le \delta,
        \quad +\infty \ \text{otherwise}.

    Its gradient :math:`y + u` stays finite at :math:`u = \pm\delta`, so the
    engine uses the constrained form :math:`\ell_0^*(y, u) = uy + \tfrac12 u^2`
    with :math:`u - \delta \le 0` and :math:`-\delta - u \le 0`
    (SpicyMKL eq. 33).

    Parameters
    ----------
    delta : float, default 1.0
        Residual size at which the loss turns from quadratic to linear; > 0.
    """

    name = "huber"
    description = "Huber loss for robust regression: quadratic near 0, linear beyond delta"
    task = REGRESSION
    params = (Param("delta", 1.0, "residual at which the loss turns linear", low=0.0, low_open=True),)
    smooth_conjugate = False
    n_aux = 0
    n_cons = 2
    smooth_primal = True

    def deriv_lipschitz(self) -> float:
        """The derivative clip(r, -delta, delta) is 1-Lipschitz."""
        return 1.0

    @kernel
    def value(y, z, params):
        delta = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            r = abs(z[i] - y[i])
            out[i] = 0.5 * r * r if r <= delta else delta * (r - 0.5 * delta)
        return out

    @kernel
    def deriv(y, z, params):
        delta = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = min(max(z[i] - y[i], -delta), delta)
        return out

    @kernel
    def deriv2(y, z, params):
        delta = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 1.0 if abs(z[i] - y[i]) < delta else 0.0
        return out

    @kernel
    def conj(y, u, params):
        delta = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            if abs(u[i]) <= delta:
                out[i] = u[i] * y[i] + 0.5 * u[i] * u[i]
            else:
                out[i] = np.inf
        return out

    @kernel
    def conj_grad(y, u, params):
        return y + u

    @kernel
    def conj_hess(y, u, params):
        return np.ones(y.shape[0])

    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -params[0])

    @kernel
    def conj_upper(y, params):
        return np.full(y.shape[0], params[0])

    # Constrained form: l0*(y, u) = uy + u²/2 subject to u - delta <= 0 and
    # -delta - u <= 0; no auxiliary variables (B' = 0, B = 2).
    @kernel
    def l0(y, u, ut, params):
        return u * y + 0.5 * u * u

    @kernel
    def l0_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = y + u
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.ones((y.shape[0], 1, 1))

    @kernel
    def cons(y, u, ut, params):
        delta = params[0]
        out = np.empty((y.shape[0], 2))
        out[:, 0] = u - delta
        out[:, 1] = -delta - u
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 2, 1))
        out[:, 0, 0] = 1.0
        out[:, 1, 0] = -1.0
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 2, 1, 1))

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        terms = cp.huber(z - y, self.delta)  # cvxpy's huber is twice ours
        return 0.5 * (cp.sum(terms) if w is None else cp.sum(cp.multiply(w, terms)))


# ---------------------------------------------------------------------------
# Squared hinge: no parameters (params is empty)
# ---------------------------------------------------------------------------
class SquaredHinge(Loss):
    r"""Squared hinge loss for classification (the L2-SVM loss).

    .. math::
        \ell(y, z) = \tfrac12 \max(0, 1 - yz)^2, \qquad y \in \{-1, +1\},

    with conjugate

    .. math::
        \ell^*(y, u) = uy + \tfrac12 u^2 \ \text{on}\ uy \le 0,
        \quad +\infty \ \text{otherwise}

    (substitute :math:`t = yz`, :math:`s = uy`: the supremum of
    :math:`st - \tfrac12\max(0, 1-t)^2` is at :math:`t = 1 + s` for
    :math:`s \le 0`).  The constrained form is :math:`\ell_0^*(y, u) = uy +
    \tfrac12 u^2` with the single constraint :math:`uy \le 0`.
    """

    name = "squared_hinge"
    description = "Squared hinge loss 0.5*max(0, 1 - yz)^2 for classification (L2-SVM)"
    task = CLASSIFICATION
    params = ()
    smooth_conjugate = False
    n_aux = 0
    n_cons = 1
    smooth_primal = True

    def deriv_lipschitz(self) -> float:
        """The derivative -y max(0, 1 - yz) is 1-Lipschitz in z for y = ±1."""
        return 1.0

    @kernel
    def value(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            m = max(1.0 - y[i] * z[i], 0.0)
            out[i] = 0.5 * m * m
        return out

    @kernel
    def deriv(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -y[i] * max(1.0 - y[i] * z[i], 0.0)
        return out

    @kernel
    def deriv2(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = y[i] * y[i] if y[i] * z[i] < 1.0 else 0.0
        return out

    @kernel
    def conj(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            if u[i] * y[i] <= 0.0:
                out[i] = u[i] * y[i] + 0.5 * u[i] * u[i]
            else:
                out[i] = np.inf
        return out

    @kernel
    def conj_grad(y, u, params):
        return y + u

    @kernel
    def conj_hess(y, u, params):
        return np.ones(y.shape[0])

    @kernel
    def conj_lower(y, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -np.inf if y[i] > 0.0 else 0.0
        return out

    @kernel
    def conj_upper(y, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 0.0 if y[i] > 0.0 else np.inf
        return out

    # Constrained form: l0*(y, u) = uy + u²/2 subject to uy <= 0 (B' = 0, B = 1).
    @kernel
    def l0(y, u, ut, params):
        return u * y + 0.5 * u * u

    @kernel
    def l0_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = y + u
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.ones((y.shape[0], 1, 1))

    @kernel
    def cons(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        out[:, 0] = u * y
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1, 1))
        out[:, 0, 0] = y
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 1, 1, 1))

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        r = cp.pos(1 - cp.multiply(y, z))
        return 0.5 * (cp.sum_squares(r) if w is None else cp.sum(cp.multiply(w, cp.square(r))))
