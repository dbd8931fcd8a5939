r"""Built-in losses as SpicyMKL §2.1 writes them: hinge, logistic, squared, ε-insensitive, and the one-class hinge
(conjugates: eqs. 16, 17, 34, 35)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .base import INF, REGRESSION, Loss, kernel
from .params import Param

__all__ = ["Hinge", "Logistic", "Squared", "EpsInsensitive", "OneClass", "BUILTIN_LOSSES"]


# the domain -1 <= y u <= 0 of a classification loss's conjugate
@njit(cache=True)
def cls_conj_lower(y, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = min(-y[i], 0.0)
    return out


@njit(cache=True)
def cls_conj_upper(y, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = max(-y[i], 0.0)
    return out


class Hinge(Loss):
    r"""Hinge loss :math:`\ell(y, z) = \max(1 - yz, 0)`.

    Conjugate (eq. 17): :math:`\ell^*(y, u) = yu` on :math:`-1 \le yu \le 0`.
    Its gradient is finite at the boundary, so engines use the constrained
    form (§3.4.1): :math:`\ell_0^* = yu`, :math:`h_1 = -1 - yu`, :math:`h_2 = yu`.
    """

    name = "hinge"
    description = "hinge loss max(1 - y z, 0) (SVM)"
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True
    n_cons = 2

    @kernel
    def value(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = max(1.0 - y[i] * z[i], 0.0)
        return out

    @kernel
    def deriv(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -y[i] if y[i] * z[i] < 1.0 else 0.0
        return out

    @kernel
    def conj(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = y[i] * u[i]
            out[i] = t if (-1.0 <= t <= 0.0) else INF
        return out

    @kernel
    def conj_grad(y, u, params):
        return y.copy()

    conj_lower = staticmethod(cls_conj_lower)
    conj_upper = staticmethod(cls_conj_upper)

    # constrained form (B' = 0, B = 2):  l0* = y u,  h1 = -1 - y u,  h2 = y u
    @kernel
    def l0(y, u, ut, params):
        return y * u

    @kernel
    def l0_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 1))
        for i in range(y.shape[0]):
            out[i, 0] = y[i]
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 1, 1))

    @kernel
    def cons(y, u, ut, params):
        out = np.empty((y.shape[0], 2))
        for i in range(y.shape[0]):
            out[i, 0] = -1.0 - y[i] * u[i]
            out[i, 1] = y[i] * u[i]
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 2, 1))
        for i in range(y.shape[0]):
            out[i, 0, 0] = -y[i]
            out[i, 1, 0] = y[i]
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 2, 1, 1))

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum(_weighted(cp.pos(1 - cp.multiply(y, z)), w))


@njit(cache=True)
def _log1pexp(a):
    # log(1 + exp(a)) without overflow
    if a > 0.0:
        return a + np.log1p(np.exp(-a))
    return np.log1p(np.exp(a))


@njit(cache=True)
def _sigmoid(a):
    if a >= 0.0:
        return 1.0 / (1.0 + np.exp(-a))
    e = np.exp(a)
    return e / (1.0 + e)


@njit(cache=True)
def _xlogx(t):
    return t * np.log(t) if t > 0.0 else 0.0


class Logistic(Loss):
    r"""Logistic loss :math:`\ell(y, z) = \log(1 + e^{-yz})`.

    Conjugate (eq. 16 with :math:`u = -\rho`): with :math:`t = -yu \in [0, 1]`,
    :math:`\ell^*(y, u) = t\log t + (1-t)\log(1-t)`, whose gradient is
    unbounded at the boundary: Newton with back-tracking stays inside.
    """

    name = "logistic"
    description = "logistic loss log(1 + exp(-y z))"

    @kernel
    def value(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = _log1pexp(-y[i] * z[i])
        return out

    @kernel
    def deriv(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -y[i] * _sigmoid(-y[i] * z[i])
        return out

    @kernel
    def deriv2(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            s = _sigmoid(y[i] * z[i])
            out[i] = s * (1.0 - s)
        return out

    @kernel
    def conj(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = -y[i] * u[i]
            if 0.0 <= t <= 1.0:
                out[i] = _xlogx(t) + _xlogx(1.0 - t)
            else:
                out[i] = INF
        return out

    @kernel
    def conj_grad(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = -y[i] * u[i]
            if 0.0 < t < 1.0:
                out[i] = -y[i] * (np.log(t) - np.log1p(-t))
            elif t == 0.0:
                out[i] = y[i] * INF
            elif t == 1.0:
                out[i] = -y[i] * INF
            else:
                out[i] = np.nan
        return out

    @kernel
    def conj_hess(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            t = -y[i] * u[i]
            if 0.0 < t < 1.0:
                out[i] = 1.0 / (t * (1.0 - t))
            else:
                out[i] = INF
        return out

    conj_lower = staticmethod(cls_conj_lower)
    conj_upper = staticmethod(cls_conj_upper)

    def deriv_lipschitz(self) -> float:
        return 0.25

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum(_weighted(cp.logistic(-cp.multiply(y, z)), w))


class Squared(Loss):
    r"""Squared loss :math:`\ell(y, z) = (y - z)^2`.

    Conjugate: :math:`\ell^*(y, u) = uy + u^2/4` on all of :math:`\mathbb{R}`.
    """

    name = "squared"
    description = "squared loss (y - z)^2 (regression)"
    task = REGRESSION

    @kernel
    def value(y, z, params):
        r = y - z
        return r * r

    @kernel
    def deriv(y, z, params):
        return 2.0 * (z - y)

    @kernel
    def deriv2(y, z, params):
        return np.full(y.shape[0], 2.0)

    @kernel
    def conj(y, u, params):
        return u * y + 0.25 * u * u

    @kernel
    def conj_grad(y, u, params):
        return y + 0.5 * u

    @kernel
    def conj_hess(y, u, params):
        return np.full(y.shape[0], 0.5)

    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -INF)

    @kernel
    def conj_upper(y, params):
        return np.full(y.shape[0], INF)

    def deriv_lipschitz(self) -> float:
        return 2.0

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum_squares(y - z) if w is None else cp.sum(_weighted(cp.square(y - z), w))


class EpsInsensitive(Loss):
    r"""ε-insensitive loss :math:`\ell(y, z) = \max(|y - z| - \varepsilon, 0)`.

    Conjugate (eq. 34): :math:`\ell^*(y, u) = yu + \varepsilon|u|` on
    :math:`|u| \le 1`, non-differentiable at 0; constrained form (eq. 35):
    :math:`\ell_0^* = yu + \varepsilon(u + 2\tilde u)` with
    :math:`u - 1 \le 0,\ -1 - u \le 0,\ -\tilde u \le 0,\ -u - \tilde u \le 0`.
    ``params = [eps]``.
    """

    name = "eps_insensitive"
    description = "epsilon-insensitive loss max(|y - z| - eps, 0) (support vector regression)"
    task = REGRESSION
    params = (Param("eps", 0.1, "half-width of the insensitive tube", low=0.0),)
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True
    n_aux = 1
    n_cons = 4

    @kernel
    def value(y, z, params):
        eps = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = max(abs(y[i] - z[i]) - eps, 0.0)
        return out

    @kernel
    def deriv(y, z, params):
        eps = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            r = z[i] - y[i]
            if r > eps:
                out[i] = 1.0
            elif r < -eps:
                out[i] = -1.0
            else:
                out[i] = 0.0
        return out

    @kernel
    def conj(y, u, params):
        eps = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            if -1.0 <= u[i] <= 1.0:
                out[i] = y[i] * u[i] + eps * abs(u[i])
            else:
                out[i] = INF
        return out

    @kernel
    def conj_grad(y, u, params):
        eps = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = y[i] + eps * np.sign(u[i])
        return out

    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -1.0)

    @kernel
    def conj_upper(y, params):
        return np.full(y.shape[0], 1.0)

    # constrained form (B' = 1, B = 4), eq. (35):
    #   l0* = y u + eps (u + 2 ut);  h = (u - 1, -1 - u, -ut, -u - ut)
    @kernel
    def l0(y, u, ut, params):
        eps = params[0]
        return y * u + eps * (u + 2.0 * ut[:, 0])

    @kernel
    def l0_grad(y, u, ut, params):
        eps = params[0]
        out = np.empty((y.shape[0], 2))
        for i in range(y.shape[0]):
            out[i, 0] = y[i] + eps
            out[i, 1] = 2.0 * eps
        return out

    @kernel
    def l0_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 2, 2))

    @kernel
    def cons(y, u, ut, params):
        out = np.empty((y.shape[0], 4))
        for i in range(y.shape[0]):
            out[i, 0] = u[i] - 1.0
            out[i, 1] = -1.0 - u[i]
            out[i, 2] = -ut[i, 0]
            out[i, 3] = -u[i] - ut[i, 0]
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.zeros((y.shape[0], 4, 2))
        for i in range(y.shape[0]):
            out[i, 0, 0] = 1.0
            out[i, 1, 0] = -1.0
            out[i, 2, 1] = -1.0
            out[i, 3, 0] = -1.0
            out[i, 3, 1] = -1.0
        return out

    @kernel
    def cons_hess(y, u, ut, params):
        return np.zeros((y.shape[0], 4, 2, 2))

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum(_weighted(cp.pos(cp.abs(y - z) - self.eps), w))


class OneClass(Loss):
    r"""One-class hinge :math:`\ell(y, z) = \max(y - z, 0)`: the value :math:`z` is pushed up to the level
    :math:`y`, with no penalty above it.

    With every target :math:`y_i = 1`, no bias and the ``l1`` regularizer, the MKL problem
    :math:`\min_\alpha \sum_i \max(1 - f(x_i), 0) + C\sum_m \|\alpha_m\|_{K_m}` is the one-class SVM
    that separates the data from the origin with margin 1 (Schölkopf et al. 2001), with learned kernel
    weights (``docs/one_class.md``); :class:`~mklkit.estimators.MKLOneClassSVM` solves it.

    Conjugate: :math:`\ell^*(y, u) = yu` on :math:`-1 \le u \le 0` (the hinge's at :math:`y = +1`), a
    bounded domain, so engines use the constrained form :math:`\ell_0^* = yu`, :math:`h_1 = -1 - u`,
    :math:`h_2 = u`.  The targets are real numbers (the task is ``regression``): the level of each sample.
    """

    name = "one_class"
    description = "one-class hinge max(y - z, 0) (one-class SVM at y = 1)"
    task = REGRESSION
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True
    n_cons = 2

    @kernel
    def value(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = max(y[i] - z[i], 0.0)
        return out

    @kernel
    def deriv(y, z, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -1.0 if z[i] < y[i] else 0.0
        return out

    @kernel
    def conj(y, u, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = y[i] * u[i] if (-1.0 <= u[i] <= 0.0) else INF
        return out

    # the conjugate's gradient and the constrained form's l0* = y u are the hinge's
    conj_grad = staticmethod(Hinge.conj_grad)

    @kernel
    def conj_lower(y, params):
        return np.full(y.shape[0], -1.0)

    @kernel
    def conj_upper(y, params):
        return np.zeros(y.shape[0])

    # constrained form (B' = 0, B = 2):  l0* = y u,  h1 = -1 - u,  h2 = u
    l0 = staticmethod(Hinge.l0)
    l0_grad = staticmethod(Hinge.l0_grad)
    l0_hess = staticmethod(Hinge.l0_hess)
    cons_hess = staticmethod(Hinge.cons_hess)

    @kernel
    def cons(y, u, ut, params):
        out = np.empty((y.shape[0], 2))
        for i in range(y.shape[0]):
            out[i, 0] = -1.0 - u[i]
            out[i, 1] = u[i]
        return out

    @kernel
    def cons_grad(y, u, ut, params):
        out = np.empty((y.shape[0], 2, 1))
        for i in range(y.shape[0]):
            out[i, 0, 0] = -1.0
            out[i, 1, 0] = 1.0
        return out

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum(_weighted(cp.pos(y - z), w))


def _weighted(terms, w):
    """The per-sample terms of a cvxpy loss, times the sample weights ``w`` (if any)."""
    if w is None:
        return terms
    import cvxpy as cp

    return cp.multiply(w, terms)


BUILTIN_LOSSES = (Hinge, Logistic, Squared, EpsInsensitive, OneClass)
