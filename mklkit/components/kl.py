r"""The generalized KL divergence on the kernel weights, ``kl`` (``docs/kl_regularizer.md``):
:math:`h(d) = d\log(d/d_0) - d + d_0`, :math:`d = d_0\exp(W(2t/d_0^2)/2)`,
:math:`\tilde g_C^*(y) = \tfrac{C d_0}{2}(e^{y^2/C^2} - 1)`; ``params = [d0]``."""

from __future__ import annotations

import numpy as np
from numba import njit

from .base import INF, Regularizer, kernel
from .params import Param


@njit(cache=True)
def lambertw0(z):
    r"""Principal branch :math:`W_0(z)` for ``z >= 0`` (Halley's iteration)."""
    if z == 0.0:
        return 0.0
    if z < 3.0:
        w = np.log1p(z)
    else:
        lz = np.log(z)
        w = lz - np.log(lz)
    for _ in range(60):
        ew = np.exp(w)
        f = w * ew - z
        wp1 = w + 1.0
        denom = ew * wp1 - (w + 2.0) * f / (2.0 * wp1)
        dw = f / denom
        w -= dw
        if abs(dw) <= 1e-15 * (1.0 + abs(w)):
            break
    return w


@njit(cache=True)
def _lambertw0_log(logz):
    r"""W_0(e^{logz}) for large arguments: Newton on :math:`w + \log w = \log z`."""
    w = logz - np.log(logz)
    for _ in range(60):
        f = w + np.log(w) - logz
        dw = f / (1.0 + 1.0 / w)
        w -= dw
        if abs(dw) <= 1e-15 * w:
            break
    return w


@njit(cache=True)
def _kl_L(x, d0):
    # L = log(d / d0) solving d^2 log(d / d0) = x^2, i.e. L = W(2 x^2 / d0^2) / 2
    if x <= 0.0:
        return 0.0
    r = x / d0
    if r < 1e100:
        return 0.5 * lambertw0(2.0 * r * r)
    return 0.5 * _lambertw0_log(np.log(2.0) + 2.0 * np.log(r))


@njit(cache=True)
def _kl_conj_hess1(y, C, d0):
    s = y / C
    return d0 / C * (1.0 + 2.0 * s * s) * np.exp(s * s)


@njit(cache=True)
def _kl_conj_prox_t(v, C, d0):
    r"""t = s / C for the conjugate's prox :math:`s + d_0 (s/C) e^{(s/C)^2} = v`: Newton on
    :math:`t^2 + \log t + \log d_0 - \log(v - Ct) = 0` (increasing, no overflow), safeguarded
    by bisection."""
    if v <= 0.0:
        return 0.0
    lo = 0.0
    hi = v / C
    t = v / (C + d0)  # root of the linearization e^{t^2} ~ 1; always < hi
    logd0 = np.log(d0)
    for _ in range(200):
        rem = v - C * t
        if rem <= 0.0 or t <= 0.0:
            t = 0.5 * (lo + hi)
            continue
        f = t * t + np.log(t) + logd0 - np.log(rem)
        if f > 0.0:
            hi = t
        else:
            lo = t
        fp = 2.0 * t + 1.0 / t + C / rem
        t_new = t - f / fp
        if not (lo < t_new < hi):
            t_new = 0.5 * (lo + hi)
        if abs(t_new - t) <= 4e-16 * t or hi - lo <= 4e-16 * hi:
            t = t_new
            break
        t = t_new
    return t


class KL(Regularizer):
    r"""Generalized KL divergence on kernel weights (SMO-MKL §5.2, eq. 22):
    :math:`h(d) = d\log(d/d_0) - d + d_0`, :math:`g(t) = t/d - (d - d_0)/2` (SpicyMKL §4.1);
    derivation in ``docs/kl_regularizer.md``."""

    name = "kl"
    description = "generalized KL divergence of the kernel weights from d0 (non-sparse)"
    params = (Param("d0", 1.0, "reference kernel weight", low=0.0, low_open=True),)
    smooth_conjugate = True
    sparse = False

    @kernel
    def value(x, C, params):
        # g~_C(x) = C (x^2 / d - (d - d0) / 2) with x^2 / d = d L  and  d = d0 e^L
        d0 = params[0]
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            xi = x[i]
            L = _kl_L(xi, d0)
            if L < 1.0:
                d = d0 * np.exp(L)
                out[i] = C * (d * L - 0.5 * d0 * np.expm1(L))
            else:
                sL = np.sqrt(L)
                d = xi / sL  # = d0 e^L without overflow
                out[i] = C * (xi * sL - 0.5 * (d - d0))
        return out

    @kernel
    def prox(v, C, params):
        d0 = params[0]
        out = np.empty(v.shape[0])
        for i in range(v.shape[0]):
            out[i] = max(v[i] - C * _kl_conj_prox_t(v[i], C, d0), 0.0)
        return out

    @kernel
    def prox_deriv(v, C, params):
        # d prox / dv = H / (1 + H) = 1 / (1 + 1/H),  H = (g~*_C)''(s), may overflow to inf
        d0 = params[0]
        out = np.empty(v.shape[0])
        for i in range(v.shape[0]):
            if v[i] <= 0.0:
                hs = d0 / C
            else:
                t = _kl_conj_prox_t(v[i], C, d0)
                hs = _kl_conj_hess1(C * t, C, d0)
            out[i] = 1.0 / (1.0 + 1.0 / hs)
        return out

    @kernel
    def conj(y, C, params):
        d0 = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            s = max(y[i], 0.0) / C
            out[i] = 0.5 * C * d0 * np.expm1(s * s)
        return out

    @kernel
    def conj_grad(y, C, params):
        d0 = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            s = max(y[i], 0.0) / C
            out[i] = d0 * s * np.exp(s * s)
        return out

    @kernel
    def conj_hess(y, C, params):
        d0 = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = _kl_conj_hess1(max(y[i], 0.0), C, d0)
        return out

    @kernel
    def env(y, C, params):
        # env(v) = g~*_C(s) + (s - v)^2 / 2 at s = prox of the conjugate.  At the root,
        # d0 e^{t^2} = (v - C t) / t, so g~*_C(s) = (C / 2) ((v - s) / t - d0) needs no exp.
        d0 = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            v = y[i]
            t = _kl_conj_prox_t(v, C, d0)
            s = C * t
            if t * t < 1.0:
                conj = 0.5 * C * d0 * np.expm1(t * t)
            else:
                conj = 0.5 * C * ((v - s) / t - d0)
            out[i] = conj + 0.5 * (s - v) ** 2
        return out

    @kernel
    def weight(x, params):
        d0 = params[0]
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = d0 * np.exp(_kl_L(x[i], d0))
        return out

    @kernel
    def penalty(d, params):
        d0 = params[0]
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            di = d[i]
            if di < 0.0:
                out[i] = INF
            elif di == 0.0:
                out[i] = d0
            else:
                out[i] = di * np.log(di / d0) - di + d0
        return out

    # Bregman generator F(d) = d (log d - 1) (SMO-MKL §5.2)
    @kernel
    def bregman_F(d, params):
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            out[i] = d[i] * (np.log(d[i]) - 1.0) if d[i] > 0.0 else 0.0
        return out

    @kernel
    def bregman_f(d, params):
        return np.log(d)

    @kernel
    def bregman_finv(theta, params):
        return np.exp(theta)

    @kernel
    def bregman_d0(params):
        return params[0]

    def cvxpy_expr(self, norms, squares, C, betas=None):
        r""":math:`C\,g(x^2)` through its Tikhonov form, an exponential cone per block
        (needs the block variables ``betas``)."""
        import cvxpy as cp

        d0 = self.d0
        d = cp.Variable(len(betas), pos=True)
        terms = [cp.quad_over_lin(beta, d[m]) / 2 for m, beta in enumerate(betas)]
        return C * (cp.sum(cp.hstack(terms)) + 0.5 * cp.sum(cp.rel_entr(d, d0 * np.ones(len(betas))) - d + d0))
