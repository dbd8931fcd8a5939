r"""The block lq-norm ``lq``: :math:`g(t) = t^{q/2}/q`, q > 1 (SpicyMKL §4.3.2); ``params = [q]``,
:math:`r = q/(q-1)`, :math:`\tilde g_C^*(y) = C^{1-r} y^r / r`."""

from __future__ import annotations

import numpy as np
from numba import njit

from .base import INF, Regularizer, kernel
from .params import Param


@njit(cache=True)
def solve_power_eq(v, c, k):
    r"""Root :math:`t \in [0, v]` of :math:`t + c t^k = v` (``v >= 0``, ``c > 0``, ``k >= 1``) by
    Newton from :math:`\min(v, (v/c)^{1/k})`, monotone since the left side is convex."""
    if v <= 0.0:
        return 0.0
    t = min(v, (v / c) ** (1.0 / k))
    for _ in range(200):
        f = t + c * t**k - v
        if f <= 0.0:
            break
        fp = 1.0 + c * k * t ** (k - 1.0)
        step = f / fp
        t_new = t - step
        if t_new <= 0.0:
            t_new = 0.5 * t
        if abs(t - t_new) <= 1e-15 * max(t, 1e-300):
            t = t_new
            break
        t = t_new
    return t


@njit(cache=True)
def _lq_prox1(v, C, q):
    # p + C p^(q-1) = v.  For q >= 2 solve it directly (convex in p); for
    # q < 2 solve the conjugate's prox s + C^(1-r) s^(r-1) = v (convex in s,
    # r - 1 = 1/(q-1) > 1) and use Moreau: p = v - s.
    if v <= 0.0:
        return 0.0
    if q >= 2.0:
        return solve_power_eq(v, C, q - 1.0)
    r = q / (q - 1.0)
    s = solve_power_eq(v, C ** (1.0 - r), r - 1.0)
    return max(v - s, 0.0)


class Lq(Regularizer):
    r"""Block ℓq-norm :math:`\frac Cq\sum_m\|\alpha_m\|_{K_m}^q`, :math:`g(t) = t^{q/2}/q` (§4.3.2).

    Conjugate :math:`C^{1-r}y^r/r` with :math:`r = q/(q-1)`: smooth, so the
    one-step method applies.  For :math:`q \le 2`, ``g`` is concave and the
    kernel weight is :math:`d = \|\alpha_m\|^{2-q}` with
    :math:`h(d) = d^p/p`, :math:`p = q/(2-q)` (ℓp-norm MKL; Table 3 prints
    :math:`p = q/(q-2)`, whose sign is off).  For :math:`q > 2` there is no
    Tikhonov form; weights are reported as :math:`\|\alpha_m\|^{2-q}` on the
    non-zero blocks.
    """

    name = "lq"
    description = "block lq-norm (non-sparse lp-norm MKL), q > 1"
    params = (Param("q", 2.0, "exponent of the block norm", low=1.0, low_open=True),)
    smooth_conjugate = True
    sparse = False

    @kernel
    def value(x, C, params):
        q = params[0]
        return C * x**q / q

    @kernel
    def prox(v, C, params):
        q = params[0]
        out = np.empty(v.shape[0])
        for i in range(v.shape[0]):
            out[i] = _lq_prox1(v[i], C, q)
        return out

    @kernel
    def prox_deriv(v, C, params):
        q = params[0]
        out = np.empty(v.shape[0])
        for i in range(v.shape[0]):
            p = _lq_prox1(v[i], C, q)
            if p > 0.0:
                out[i] = 1.0 / (1.0 + C * (q - 1.0) * p ** (q - 2.0))
            elif q < 2.0:
                out[i] = 0.0
            elif q == 2.0:
                out[i] = 1.0 / (1.0 + C)
            else:
                out[i] = 1.0
        return out

    @kernel
    def conj(y, C, params):
        q = params[0]
        r = q / (q - 1.0)
        return C ** (1.0 - r) * np.maximum(y, 0.0) ** r / r

    @kernel
    def conj_grad(y, C, params):
        q = params[0]
        r = q / (q - 1.0)
        return C ** (1.0 - r) * np.maximum(y, 0.0) ** (r - 1.0)

    @kernel
    def conj_hess(y, C, params):
        q = params[0]
        r = q / (q - 1.0)
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            if y[i] > 0.0:
                out[i] = C ** (1.0 - r) * (r - 1.0) * y[i] ** (r - 2.0)
            elif r > 2.0:
                out[i] = 0.0
            elif r == 2.0:
                out[i] = 1.0 / C
            else:
                out[i] = INF
        return out

    @kernel
    def env(y, C, params):
        # Moreau decomposition: env(y) = y^2/2 - [g~(p) + (p - y)^2 / 2],  p = prox(y)
        q = params[0]
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            p = _lq_prox1(y[i], C, q)
            out[i] = p * y[i] - 0.5 * p * p - C * p**q / q
        return out

    @kernel
    def weight(x, params):
        # d = 1 / (2 g'(x^2)) = x^(2 - q); zero blocks get weight 0 (q < 2) or 1 (q = 2)
        q = params[0]
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            if x[i] > 0.0:
                out[i] = x[i] ** (2.0 - q)
            elif q == 2.0:
                out[i] = 1.0
            else:
                out[i] = 0.0
        return out

    @kernel
    def penalty(d, params):
        # h(d) = d^p / p with p = q / (2 - q)  (Table 3 with the sign of p fixed);
        # q = 2 gives the indicator of [0, 1].
        q = params[0]
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            di = d[i]
            if di < 0.0:
                out[i] = INF
            elif q == 2.0:
                out[i] = 0.0 if di <= 1.0 else INF
            else:
                p = q / (2.0 - q)
                out[i] = di**p / p
        return out

    @property
    def tikhonov_form(self) -> bool:
        return self.q <= 2.0

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        q = self.q
        if q == 2:
            return C / 2 * cp.sum(cp.hstack(squares))
        return C / q * cp.sum(cp.hstack([cp.power(n, q) for n in norms]))
