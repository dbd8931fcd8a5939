"""Jitted numerics of the built-in losses.

Array-only functions (numpy/numba); the component classes in
:mod:`mklkit.components.losses` expose them through ``LossJit``.
Signature convention: ``f(y, z_or_u, params) -> ndarray`` with all arrays
float64 and C-contiguous; ``params`` is the component's parameter vector.
"""
from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf


# ---------------------------------------------------------------------------
# shared: classification conjugate domain  -1 <= y u <= 0
# ---------------------------------------------------------------------------
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


@njit(cache=True)
def unit_lower(y, params):
    return np.full(y.shape[0], -1.0)


@njit(cache=True)
def unit_upper(y, params):
    return np.full(y.shape[0], 1.0)


@njit(cache=True)
def unbounded_lower(y, params):
    return np.full(y.shape[0], -INF)


@njit(cache=True)
def unbounded_upper(y, params):
    return np.full(y.shape[0], INF)


@njit(cache=True)
def zeros_like(y, z, params):
    return np.zeros(y.shape[0])


# ---------------------------------------------------------------------------
# hinge  l(y,z) = max(1 - y z, 0);  l*(y,u) = y u on -1 <= y u <= 0  (eq. 17)
# ---------------------------------------------------------------------------
@njit(cache=True)
def hinge_value(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = max(1.0 - y[i] * z[i], 0.0)
    return out


@njit(cache=True)
def hinge_deriv(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -y[i] if y[i] * z[i] < 1.0 else 0.0
    return out


@njit(cache=True)
def hinge_conj(y, u, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = y[i] * u[i]
        out[i] = t if (-1.0 <= t <= 0.0) else INF
    return out


@njit(cache=True)
def hinge_conj_grad(y, u, params):
    return y.copy()


# constrained form (B' = 0, B = 2):  l0* = y u,  h1 = -1 - y u,  h2 = y u
@njit(cache=True)
def hinge_l0(y, u, ut, params):
    return y * u


@njit(cache=True)
def hinge_l0_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 1))
    for i in range(y.shape[0]):
        out[i, 0] = y[i]
    return out


@njit(cache=True)
def hinge_l0_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 1, 1))


@njit(cache=True)
def hinge_cons(y, u, ut, params):
    out = np.empty((y.shape[0], 2))
    for i in range(y.shape[0]):
        out[i, 0] = -1.0 - y[i] * u[i]
        out[i, 1] = y[i] * u[i]
    return out


@njit(cache=True)
def hinge_cons_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 2, 1))
    for i in range(y.shape[0]):
        out[i, 0, 0] = -y[i]
        out[i, 1, 0] = y[i]
    return out


@njit(cache=True)
def hinge_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 2, 1, 1))


# ---------------------------------------------------------------------------
# logistic  l(y,z) = log(1 + exp(-y z));  l*(y,u) = t log t + (1-t) log(1-t),
# t = -y u in [0, 1]  (eq. 16 with u = -rho)
# ---------------------------------------------------------------------------
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
def logistic_value(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = _log1pexp(-y[i] * z[i])
    return out


@njit(cache=True)
def logistic_deriv(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -y[i] * _sigmoid(-y[i] * z[i])
    return out


@njit(cache=True)
def logistic_deriv2(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        s = _sigmoid(y[i] * z[i])
        out[i] = s * (1.0 - s)
    return out


@njit(cache=True)
def _xlogx(t):
    return t * np.log(t) if t > 0.0 else 0.0


@njit(cache=True)
def logistic_conj(y, u, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = -y[i] * u[i]
        if 0.0 <= t <= 1.0:
            out[i] = _xlogx(t) + _xlogx(1.0 - t)
        else:
            out[i] = INF
    return out


@njit(cache=True)
def logistic_conj_grad(y, u, params):
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


@njit(cache=True)
def logistic_conj_hess(y, u, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = -y[i] * u[i]
        if 0.0 < t < 1.0:
            out[i] = 1.0 / (t * (1.0 - t))
        else:
            out[i] = INF
    return out


# ---------------------------------------------------------------------------
# squared  l(y,z) = (y - z)^2;  l*(y,u) = u y + u^2 / 4
# ---------------------------------------------------------------------------
@njit(cache=True)
def squared_value(y, z, params):
    r = y - z
    return r * r


@njit(cache=True)
def squared_deriv(y, z, params):
    return 2.0 * (z - y)


@njit(cache=True)
def squared_deriv2(y, z, params):
    return np.full(y.shape[0], 2.0)


@njit(cache=True)
def squared_conj(y, u, params):
    return u * y + 0.25 * u * u


@njit(cache=True)
def squared_conj_grad(y, u, params):
    return y + 0.5 * u


@njit(cache=True)
def squared_conj_hess(y, u, params):
    return np.full(y.shape[0], 0.5)


# ---------------------------------------------------------------------------
# eps-insensitive  l(y,z) = max(|y - z| - eps, 0);
# l*(y,u) = y u + eps |u| on |u| <= 1  (eq. 34), constrained form (35)
# params = [eps]
# ---------------------------------------------------------------------------
@njit(cache=True)
def eps_value(y, z, params):
    eps = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = max(abs(y[i] - z[i]) - eps, 0.0)
    return out


@njit(cache=True)
def eps_deriv(y, z, params):
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


@njit(cache=True)
def eps_conj(y, u, params):
    eps = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if -1.0 <= u[i] <= 1.0:
            out[i] = y[i] * u[i] + eps * abs(u[i])
        else:
            out[i] = INF
    return out


@njit(cache=True)
def eps_conj_grad(y, u, params):
    eps = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = y[i] + eps * np.sign(u[i])
    return out


# constrained form (B' = 1, B = 4), eq. (35):
#   l0* = y u + eps (u + 2 ut);  h = (u - 1, -1 - u, -ut, -u - ut)
@njit(cache=True)
def eps_l0(y, u, ut, params):
    eps = params[0]
    return y * u + eps * (u + 2.0 * ut[:, 0])


@njit(cache=True)
def eps_l0_grad(y, u, ut, params):
    eps = params[0]
    out = np.empty((y.shape[0], 2))
    for i in range(y.shape[0]):
        out[i, 0] = y[i] + eps
        out[i, 1] = 2.0 * eps
    return out


@njit(cache=True)
def eps_l0_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 2, 2))


@njit(cache=True)
def eps_cons(y, u, ut, params):
    out = np.empty((y.shape[0], 4))
    for i in range(y.shape[0]):
        out[i, 0] = u[i] - 1.0
        out[i, 1] = -1.0 - u[i]
        out[i, 2] = -ut[i, 0]
        out[i, 3] = -u[i] - ut[i, 0]
    return out


@njit(cache=True)
def eps_cons_grad(y, u, ut, params):
    out = np.zeros((y.shape[0], 4, 2))
    for i in range(y.shape[0]):
        out[i, 0, 0] = 1.0
        out[i, 1, 0] = -1.0
        out[i, 2, 1] = -1.0
        out[i, 3, 0] = -1.0
        out[i, 3, 1] = -1.0
    return out


@njit(cache=True)
def eps_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 4, 2, 2))
