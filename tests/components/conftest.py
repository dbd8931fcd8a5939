"""Small reference components for the conformance-kit tests.

They are written here, independently of the built-ins, so that the kit can be
tested against known-correct components and deliberately broken variants of
them (``test_broken_components.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mklkit.components.base import CLASSIFICATION, REGRESSION, Loss, Param, Regularizer

INF = np.inf


# ---------------------------------------------------------------------------
# squared loss  l(y, z) = (y - z)^2 / 2,  l*(y, u) = u^2/2 + u y
# ---------------------------------------------------------------------------
@njit(cache=True)
def sq_value(y, z, params):
    return 0.5 * (y - z) ** 2


@njit(cache=True)
def sq_deriv(y, z, params):
    return z - y


@njit(cache=True)
def ones(y, z, params):
    return np.ones(y.shape[0])


@njit(cache=True)
def zeros(y, z, params):
    return np.zeros(y.shape[0])


@njit(cache=True)
def sq_conj(y, u, params):
    return 0.5 * u * u + u * y


@njit(cache=True)
def sq_conj_grad(y, u, params):
    return u + y


@njit(cache=True)
def lower_inf(y, params):
    return np.full(y.shape[0], -INF)


@njit(cache=True)
def upper_inf(y, params):
    return np.full(y.shape[0], INF)


class RefSquared(Loss):
    """Squared loss (y - z)^2 / 2."""

    name = "ref_squared"
    description = "squared loss (reference)"
    task = REGRESSION
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper = map(
        staticmethod, (sq_value, sq_deriv, ones, sq_conj, sq_conj_grad, ones, lower_inf, upper_inf)
    )

    def deriv_lipschitz(self) -> float:
        return 1.0


# ---------------------------------------------------------------------------
# logistic loss  l(y, z) = log(1 + exp(-y z)); with t = -y u in [0, 1]:
# l*(y, u) = t log t + (1 - t) log(1 - t)
# ---------------------------------------------------------------------------
@njit(cache=True)
def lg_value(y, z, params):
    m = -y * z
    return np.maximum(m, 0.0) + np.log1p(np.exp(-np.abs(m)))


@njit(cache=True)
def _sigmoid(m):
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        if m[i] >= 0:
            out[i] = 1.0 / (1.0 + np.exp(-m[i]))
        else:
            e = np.exp(m[i])
            out[i] = e / (1.0 + e)
    return out


@njit(cache=True)
def lg_deriv(y, z, params):
    return -y * _sigmoid(-y * z)


@njit(cache=True)
def lg_deriv2(y, z, params):
    s = _sigmoid(-y * z)
    return s * (1.0 - s)


@njit(cache=True)
def lg_conj(y, u, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = -y[i] * u[i]
        if t < 0.0 or t > 1.0:
            out[i] = INF
        else:
            a = t * np.log(t) if t > 0.0 else 0.0
            b = (1.0 - t) * np.log1p(-t) if t < 1.0 else 0.0
            out[i] = a + b
    return out


@njit(cache=True)
def lg_conj_grad(y, u, params):
    t = -y * u
    return -y * (np.log(t) - np.log1p(-t))


@njit(cache=True)
def lg_conj_hess(y, u, params):
    t = -y * u
    return 1.0 / (t * (1.0 - t))


@njit(cache=True)
def cls_lower(y, params):
    return np.minimum(0.0, -y)


@njit(cache=True)
def cls_upper(y, params):
    return np.maximum(0.0, -y)


class RefLogistic(Loss):
    """Logistic loss log(1 + exp(-y z))."""

    name = "ref_logistic"
    description = "logistic loss (reference)"
    task = CLASSIFICATION
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper = map(
        staticmethod, (lg_value, lg_deriv, lg_deriv2, lg_conj, lg_conj_grad, lg_conj_hess, cls_lower, cls_upper)
    )

    def deriv_lipschitz(self) -> float:
        return 0.25


# ---------------------------------------------------------------------------
# epsilon-insensitive loss, conjugate y u + eps |u| on |u| <= 1 (eqs. 34, 35)
# ---------------------------------------------------------------------------
@njit(cache=True)
def ei_value(y, z, params):
    return np.maximum(np.abs(z - y) - params[0], 0.0)


@njit(cache=True)
def ei_deriv(y, z, params):
    r = z - y
    return np.where(np.abs(r) > params[0], np.sign(r), 0.0)


@njit(cache=True)
def ei_conj(y, u, params):
    return np.where(np.abs(u) <= 1.0, y * u + params[0] * np.abs(u), INF)


@njit(cache=True)
def ei_conj_grad(y, u, params):
    return y + params[0] * np.sign(u)


@njit(cache=True)
def unit_lower(y, params):
    return np.full(y.shape[0], -1.0)


@njit(cache=True)
def unit_upper(y, params):
    return np.full(y.shape[0], 1.0)


@njit(cache=True)
def ei_l0(y, u, ut, params):
    return y * u + params[0] * (u + 2.0 * ut[:, 0])


@njit(cache=True)
def ei_l0_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 2))
    out[:, 0] = y + params[0]
    out[:, 1] = 2.0 * params[0]
    return out


@njit(cache=True)
def ei_l0_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 2, 2))


@njit(cache=True)
def ei_cons(y, u, ut, params):
    out = np.empty((y.shape[0], 4))
    out[:, 0] = u - 1.0
    out[:, 1] = -1.0 - u
    out[:, 2] = -ut[:, 0]
    out[:, 3] = -u - ut[:, 0]
    return out


@njit(cache=True)
def ei_cons_grad(y, u, ut, params):
    out = np.zeros((y.shape[0], 4, 2))
    out[:, 0, 0] = 1.0
    out[:, 1, 0] = -1.0
    out[:, 2, 1] = -1.0
    out[:, 3, 0] = -1.0
    out[:, 3, 1] = -1.0
    return out


@njit(cache=True)
def ei_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 4, 2, 2))


class RefEpsInsensitive(Loss):
    """epsilon-insensitive loss max(|z - y| - eps, 0) with its constrained conjugate."""

    name = "ref_eps_insensitive"
    description = "epsilon-insensitive loss (reference)"
    task = REGRESSION
    params = (Param("eps", 0.1, "tube half-width", low=0.0),)
    smooth_conjugate = False
    smooth_primal = False
    n_aux = 1
    n_cons = 4
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper = map(
        staticmethod, (ei_value, ei_deriv, zeros, ei_conj, ei_conj_grad, zeros, unit_lower, unit_upper)
    )
    l0, l0_grad, l0_hess, cons, cons_grad, cons_hess = map(
        staticmethod, (ei_l0, ei_l0_grad, ei_l0_hess, ei_cons, ei_cons_grad, ei_cons_hess)
    )


# ---------------------------------------------------------------------------
# elastic net  g~_C(x) = C (1 - lam) x + C lam x^2 / 2   (eqs. 43, 46)
# ---------------------------------------------------------------------------
@njit(cache=True)
def en_value(x, C, params):
    lam = params[0]
    return C * (1.0 - lam) * x + 0.5 * C * lam * x * x


@njit(cache=True)
def en_prox(v, C, params):
    lam = params[0]
    return np.maximum(v - C * (1.0 - lam), 0.0) / (1.0 + C * lam)


@njit(cache=True)
def en_prox_deriv(v, C, params):
    lam = params[0]
    return np.where(v > C * (1.0 - lam), 1.0 / (1.0 + C * lam), 0.0)


@njit(cache=True)
def en_conj(y, C, params):
    lam = params[0]
    t = C * (1.0 - lam)
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if y[i] <= t:
            out[i] = 0.0
        elif lam == 0.0:
            out[i] = INF
        else:
            out[i] = (y[i] - t) ** 2 / (2.0 * C * lam)
    return out


@njit(cache=True)
def en_conj_grad(y, C, params):
    lam = params[0]
    t = C * (1.0 - lam)
    if lam == 0.0:
        return np.zeros(y.shape[0])
    return np.maximum(y - t, 0.0) / (C * lam)


@njit(cache=True)
def en_conj_hess(y, C, params):
    lam = params[0]
    t = C * (1.0 - lam)
    if lam == 0.0:
        return np.zeros(y.shape[0])
    return np.where(y > t, 1.0 / (C * lam), 0.0)


@njit(cache=True)
def en_env(y, C, params):
    p = en_prox(y, C, params)
    return 0.5 * y * y - en_value(p, C, params) - 0.5 * (p - y) ** 2


@njit(cache=True)
def en_weight(x, params):
    lam = params[0]
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        if lam == 1.0:
            out[i] = 1.0
        else:
            out[i] = x[i] / (1.0 - lam + lam * x[i])
    return out


@njit(cache=True)
def en_penalty(d, params):
    lam = params[0]
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        if d[i] < 0.0:
            out[i] = INF
        elif lam == 1.0:
            out[i] = 0.0 if d[i] <= 1.0 else INF
        elif lam * d[i] < 1.0:
            out[i] = (1.0 - lam) ** 2 * d[i] / (1.0 - lam * d[i])
        else:
            out[i] = INF
    return out


class RefElasticNet(Regularizer):
    """Elastic net (1 - lam) C x + lam C x^2 / 2 on block norms."""

    name = "ref_elasticnet"
    description = "elastic net (reference)"
    params = (Param("lam", 0.5, "weight of the squared part", low=0.0, high=1.0),)
    value, prox, prox_deriv, conj, conj_grad, conj_hess, env, env_grad, env_hess, weight, penalty = map(
        staticmethod,
        (
            en_value,
            en_prox,
            en_prox_deriv,
            en_conj,
            en_conj_grad,
            en_conj_hess,
            en_env,
            en_prox,
            en_prox_deriv,
            en_weight,
            en_penalty,
        ),
    )

    @property
    def smooth_conjugate(self) -> bool:
        return self.lam > 0.0

    @property
    def sparse(self) -> bool:
        return self.lam < 1.0

    def conj_radius(self, C: float) -> float:
        return float(C) if self.lam == 0.0 else float("inf")


# Bregman generator F(d) = d log d - d (generalized KL), attached to the elastic
# net only to exercise the Bregman identities.
@njit(cache=True)
def kl_F(d, params):
    return d * np.log(d) - d


@njit(cache=True)
def kl_f(d, params):
    return np.log(d)


@njit(cache=True)
def kl_finv(theta, params):
    return np.exp(theta)


@njit(cache=True)
def kl_d0(params):
    return 1.0


class RefElasticNetBregman(RefElasticNet):
    """RefElasticNet with a Bregman form."""

    name = "ref_elasticnet_bregman"
    bregman_F, bregman_f, bregman_finv, bregman_d0 = map(staticmethod, (kl_F, kl_f, kl_finv, kl_d0))


# ---------------------------------------------------------------------------
# pinball (quantile) loss  l(y, z) = max(tau (y - z), (tau - 1)(y - z)),
# conjugate u y on [-tau, 1 - tau]: flat suprema at both ends of the domain
# ---------------------------------------------------------------------------
@njit(cache=True)
def pb_value(y, z, params):
    tau = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        r = y[i] - z[i]
        out[i] = tau * r if r >= 0.0 else (tau - 1.0) * r
    return out


@njit(cache=True)
def pb_deriv(y, z, params):
    tau = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        r = y[i] - z[i]
        out[i] = -tau if r > 0.0 else (1.0 - tau if r < 0.0 else 0.0)
    return out


@njit(cache=True)
def pb_conj(y, u, params):
    tau = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = u[i] * y[i] if -tau <= u[i] <= 1.0 - tau else INF
    return out


@njit(cache=True)
def pb_conj_grad(y, u, params):
    return y.copy()


@njit(cache=True)
def pb_lower(y, params):
    return np.full(y.shape[0], -params[0])


@njit(cache=True)
def pb_upper(y, params):
    return np.full(y.shape[0], 1.0 - params[0])


@njit(cache=True)
def pb_l0(y, u, ut, params):
    return u * y


@njit(cache=True)
def pb_l0_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 1))
    out[:, 0] = y
    return out


@njit(cache=True)
def pb_l0_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 1, 1))


@njit(cache=True)
def pb_cons(y, u, ut, params):
    tau = params[0]
    out = np.empty((y.shape[0], 2))
    out[:, 0] = u - (1.0 - tau)
    out[:, 1] = -tau - u
    return out


@njit(cache=True)
def pb_cons_grad(y, u, ut, params):
    out = np.empty((y.shape[0], 2, 1))
    out[:, 0, 0] = 1.0
    out[:, 1, 0] = -1.0
    return out


@njit(cache=True)
def pb_cons_hess(y, u, ut, params):
    return np.zeros((y.shape[0], 2, 1, 1))


class RefPinball(Loss):
    """Pinball loss of the tau-quantile, with its constrained conjugate (no auxiliary variable)."""

    name = "ref_pinball"
    description = "pinball loss of the tau-quantile (reference)"
    task = REGRESSION
    params = (Param("tau", 0.5, "quantile", low=0.0, high=1.0, low_open=True, high_open=True),)
    smooth_conjugate = False
    smooth_primal = False
    n_aux = 0
    n_cons = 2
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper = map(
        staticmethod, (pb_value, pb_deriv, zeros, pb_conj, pb_conj_grad, zeros, pb_lower, pb_upper)
    )
    l0, l0_grad, l0_hess, cons, cons_grad, cons_hess = map(
        staticmethod, (pb_l0, pb_l0_grad, pb_l0_hess, pb_cons, pb_cons_grad, pb_cons_hess)
    )


# ---------------------------------------------------------------------------
# Huber block norm  g~_C(x) = C x^2 / (2 delta) for x <= delta, C (x - delta/2) beyond;
# conjugate delta y^2 / (2 C) on [0, C]: flat supremum at the radius C
# ---------------------------------------------------------------------------
@njit(cache=True)
def hn_value(x, C, params):
    d = params[0]
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = C * x[i] * x[i] / (2.0 * d) if x[i] <= d else C * (x[i] - 0.5 * d)
    return out


@njit(cache=True)
def hn_prox(v, C, params):
    d = params[0]
    out = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        out[i] = v[i] * d / (d + C) if v[i] <= d + C else v[i] - C
    return out


@njit(cache=True)
def hn_prox_deriv(v, C, params):
    d = params[0]
    return np.where(v < d + C, d / (d + C), 1.0)


@njit(cache=True)
def hn_conj(y, C, params):
    d = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = d * y[i] * y[i] / (2.0 * C) if y[i] <= C else INF
    return out


@njit(cache=True)
def hn_conj_grad(y, C, params):
    return np.where(y <= C, params[0] * y / C, INF)


@njit(cache=True)
def hn_conj_hess(y, C, params):
    return np.where(y <= C, params[0] / C, INF)


@njit(cache=True)
def hn_env(y, C, params):
    d = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if y[i] <= d + C:
            p = y[i] * d / (d + C)
            g = C * p * p / (2.0 * d)
        else:
            p = y[i] - C
            g = C * (p - 0.5 * d)
        out[i] = 0.5 * y[i] * y[i] - g - 0.5 * (p - y[i]) ** 2
    return out


@njit(cache=True)
def hn_weight(x, params):
    return np.maximum(x, params[0])


@njit(cache=True)
def hn_penalty(d, params):
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        out[i] = d[i] - params[0] if d[i] >= params[0] else INF
    return out


class RefHuberNorm(Regularizer):
    """Huber function of the block norms: quadratic up to delta, then linear with slope C."""

    name = "ref_huber_norm"
    description = "Huber function of the block norm (reference)"
    params = (Param("delta", 1.0, "end of the quadratic part", low=0.0, low_open=True),)
    value, prox, prox_deriv, conj, conj_grad, conj_hess, env, env_grad, env_hess, weight, penalty = map(
        staticmethod,
        (
            hn_value,
            hn_prox,
            hn_prox_deriv,
            hn_conj,
            hn_conj_grad,
            hn_conj_hess,
            hn_env,
            hn_prox,
            hn_prox_deriv,
            hn_weight,
            hn_penalty,
        ),
    )

    @property
    def sparse(self) -> bool:
        return False

    def conj_radius(self, C: float) -> float:
        return float(C)


REFERENCE_COMPONENTS = (
    RefSquared(),
    RefLogistic(),
    RefEpsInsensitive(),
    RefEpsInsensitive(eps=0.0),
    RefElasticNet(),
    RefElasticNet(lam=0.0),
    RefElasticNet(lam=1.0),
    RefElasticNetBregman(lam=0.3),
    RefPinball(),
    RefPinball(tau=0.2),
    RefHuberNorm(),
    RefHuberNorm(delta=0.1),
)
