r"""Huber (regression) and squared-hinge (classification) losses.

Both follow the loss contract of :mod:`mklkit.components.base`: a plain
class that declares its parameters, and module-level ``@njit(cache=True)``
functions of float64 arrays plus the parameter vector, gathered in a
:class:`~mklkit.components.base.LossJit` named tuple.

Both conjugates have a bounded domain on which their gradient stays finite,
so they are not ``smooth_conjugate``: each also gives the constrained
representation of SpicyMKL §3.4.2 (eq. 33) that the engine uses instead.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from mklkit.components.base import (
    CLASSIFICATION,
    REGRESSION,
    ConstrainedConjugate,
    Loss,
    LossJit,
    Param,
)

__all__ = ["Huber", "SquaredHinge"]


# ---------------------------------------------------------------------------
# Huber: params = [delta]
# ---------------------------------------------------------------------------
@njit(cache=True)
def huber_value(y, z, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        r = abs(z[i] - y[i])
        out[i] = 0.5 * r * r if r <= delta else delta * (r - 0.5 * delta)
    return out


@njit(cache=True)
def huber_deriv(y, z, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = min(max(z[i] - y[i], -delta), delta)
    return out


@njit(cache=True)
def huber_deriv2(y, z, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = 1.0 if abs(z[i] - y[i]) < delta else 0.0
    return out


@njit(cache=True)
def huber_conj(y, u, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if abs(u[i]) <= delta:
            out[i] = u[i] * y[i] + 0.5 * u[i] * u[i]
        else:
            out[i] = np.inf
    return out


@njit(cache=True)
def huber_conj_grad(y, u, params):
    return y + u


@njit(cache=True)
def huber_conj_hess(y, u, params):
    return np.ones(y.shape[0])


@njit(cache=True)
def huber_conj_lower(y, params):
    return np.full(y.shape[0], -params[0])


@njit(cache=True)
def huber_conj_upper(y, params):
    return np.full(y.shape[0], params[0])


# Constrained form: l0*(y, u) = uy + u²/2 subject to u - delta <= 0 and
# -delta - u <= 0; no auxiliary variables (B' = 0, B = 2).
@njit(cache=True)
def huber_l0(y, u, ut, params):
    return u * y + 0.5 * u * u


@njit(cache=True)
def huber_l0_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 1))
    out[:, 0] = y + u
    return out


@njit(cache=True)
def huber_l0_hess(y, u, ut, params):
    return np.ones((y.shape[0], 1, 1))


@njit(cache=True)
def huber_cons(y, u, ut, params):
    delta = params[0]
    out = np.empty((y.shape[0], 2))
    out[:, 0] = u - delta
    out[:, 1] = -delta - u
    return out


@njit(cache=True)
def huber_cons_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 2, 1))
    out[:, 0, 0] = 1.0
    out[:, 1, 0] = -1.0
    return out


@njit(cache=True)
def huber_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 2, 1, 1))


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
    params = (
        Param("delta", 1.0, "residual at which the loss turns linear", low=0.0, low_open=True),
    )
    jit = LossJit(
        value=huber_value,
        deriv=huber_deriv,
        deriv2=huber_deriv2,
        conj=huber_conj,
        conj_grad=huber_conj_grad,
        conj_hess=huber_conj_hess,
        conj_lower=huber_conj_lower,
        conj_upper=huber_conj_upper,
    )
    smooth_conjugate = False
    constrained = ConstrainedConjugate(
        l0=huber_l0,
        l0_grad=huber_l0_grad,
        l0_hess=huber_l0_hess,
        cons=huber_cons,
        cons_grad=huber_cons_grad,
        cons_hess=huber_cons_hess,
    )
    n_aux = 0
    n_cons = 2
    smooth_primal = True

    def deriv_lipschitz(self) -> float:
        """The derivative clip(r, -delta, delta) is 1-Lipschitz."""
        return 1.0


# ---------------------------------------------------------------------------
# Squared hinge: no parameters (params is empty)
# ---------------------------------------------------------------------------
@njit(cache=True)
def sqhinge_value(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        m = max(1.0 - y[i] * z[i], 0.0)
        out[i] = 0.5 * m * m
    return out


@njit(cache=True)
def sqhinge_deriv(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -y[i] * max(1.0 - y[i] * z[i], 0.0)
    return out


@njit(cache=True)
def sqhinge_deriv2(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = y[i] * y[i] if y[i] * z[i] < 1.0 else 0.0
    return out


@njit(cache=True)
def sqhinge_conj(y, u, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if u[i] * y[i] <= 0.0:
            out[i] = u[i] * y[i] + 0.5 * u[i] * u[i]
        else:
            out[i] = np.inf
    return out


@njit(cache=True)
def sqhinge_conj_grad(y, u, params):
    return y + u


@njit(cache=True)
def sqhinge_conj_hess(y, u, params):
    return np.ones(y.shape[0])


@njit(cache=True)
def sqhinge_conj_lower(y, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -np.inf if y[i] > 0.0 else 0.0
    return out


@njit(cache=True)
def sqhinge_conj_upper(y, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = 0.0 if y[i] > 0.0 else np.inf
    return out


# Constrained form: l0*(y, u) = uy + u²/2 subject to uy <= 0 (B' = 0, B = 1).
@njit(cache=True)
def sqhinge_l0(y, u, ut, params):
    return u * y + 0.5 * u * u


@njit(cache=True)
def sqhinge_l0_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 1))
    out[:, 0] = y + u
    return out


@njit(cache=True)
def sqhinge_l0_hess(y, u, ut, params):
    return np.ones((y.shape[0], 1, 1))


@njit(cache=True)
def sqhinge_cons(y, u, ut, params):
    out = np.empty((y.shape[0], 1))
    out[:, 0] = u * y
    return out


@njit(cache=True)
def sqhinge_cons_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 1, 1))
    out[:, 0, 0] = y
    return out


@njit(cache=True)
def sqhinge_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 1, 1, 1))


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
    jit = LossJit(
        value=sqhinge_value,
        deriv=sqhinge_deriv,
        deriv2=sqhinge_deriv2,
        conj=sqhinge_conj,
        conj_grad=sqhinge_conj_grad,
        conj_hess=sqhinge_conj_hess,
        conj_lower=sqhinge_conj_lower,
        conj_upper=sqhinge_conj_upper,
    )
    smooth_conjugate = False
    constrained = ConstrainedConjugate(
        l0=sqhinge_l0,
        l0_grad=sqhinge_l0_grad,
        l0_hess=sqhinge_l0_hess,
        cons=sqhinge_cons,
        cons_grad=sqhinge_cons_grad,
        cons_hess=sqhinge_cons_hess,
    )
    n_aux = 0
    n_cons = 1
    smooth_primal = True

    def deriv_lipschitz(self) -> float:
        """The derivative -y max(0, 1 - yz) is 1-Lipschitz in z for y = ±1."""
        return 1.0
