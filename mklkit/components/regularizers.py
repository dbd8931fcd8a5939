r"""Built-in block-norm regularizers: l1, elasticnet, lq, uniform, kl.

All are of the form :math:`C\sum_m g(\|\alpha_m\|_{K_m}^2)` (SpicyMKL eq. 42)
with :math:`\tilde g_C(x) = C g(x^2)`; Table 3 gives the kernel-weight
penalties.  See ``docs/contracts.md`` and ``docs/kl_regularizer.md``.
Kernel signatures: ``f(x, C, params)`` for everything that scales with C,
``f(x, params)`` for the kernel-weight map and the Tikhonov penalty ``h``
(which are per unit C).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .base import Regularizer, kernel
from .params import Param

__all__ = ["L1", "ElasticNet", "Lq", "Uniform", "KL", "BUILTIN_REGULARIZERS"]

INF = np.inf


# ---------------------------------------------------------------------------
# generic helpers
# ---------------------------------------------------------------------------
@njit(cache=True)
def solve_power_eq(v, c, k):
    r"""Root :math:`t \in [0, v]` of :math:`t + c t^k = v` for ``v >= 0``, ``c > 0``, ``k >= 1``.

    The left side is convex and increasing, so Newton's method started at a
    point where it is non-negative decreases monotonically to the root.
    The start :math:`\min(v, (v/c)^{1/k})` already satisfies that and is
    close to the root when the power term dominates.
    """
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


# ---------------------------------------------------------------------------
# block 1-norm:  g(t) = sqrt(t),  g~_C(x) = C x   (eq. 4, 13, 21, 22)
# ---------------------------------------------------------------------------
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

    @kernel
    def conj_grad(y, C, params):
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = 0.0 if y[i] <= C else INF
        return out

    conj_hess = conj_grad  # 0 on the domain, inf outside

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



# ---------------------------------------------------------------------------
# elastic net:  g(t) = (1-lam) sqrt(t) + lam t / 2   (eq. 43, 46; §4.3.1)
# params = [lam];  a = C (1 - lam),  b = C lam
# ---------------------------------------------------------------------------
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
    params = (
        Param("lam", 0.5, "weight of the squared (smooth) part", low=0.0, high=1.0),
    )
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



# ---------------------------------------------------------------------------
# block lq-norm:  g(t) = t^(q/2) / q,  g~_C(x) = C x^q / q  (§4.3.2), q > 1
# params = [q];  r = q / (q - 1);  g~*_C(y) = C^(1-r) y^r / r
# ---------------------------------------------------------------------------
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
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False

    @property
    def tikhonov_form(self) -> bool:
        return self.q <= 2.0

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        q = self.q
        if q == 2:
            return C / 2 * cp.sum(cp.hstack(squares))
        return C / q * cp.sum(cp.hstack([cp.power(n, q) for n in norms]))



# ---------------------------------------------------------------------------
# uniform:  g(t) = t / 2,  g~_C(x) = C x^2 / 2  (Table 3, d_m = 1)
# ---------------------------------------------------------------------------
class Uniform(Regularizer):
    r"""Uniform combination :math:`\frac C2\sum_m\|\alpha_m\|_{K_m}^2`: every :math:`d_m = 1`.

    Equivalent to an SVM-type problem on :math:`\sum_m K_m`;
    :math:`h = I_{[0,1]}` (Table 3).
    """

    name = "uniform"
    description = "uniform kernel weights (squared block 2-norm, all d_m = 1)"
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

    @property
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False

    def cvxpy_expr(self, norms, squares, C, betas=None):
        import cvxpy as cp

        return C / 2 * cp.sum(cp.hstack(squares))



# ---------------------------------------------------------------------------
# generalized KL divergence on kernel weights (docs/kl_regularizer.md):
#   h(d) = d log(d / d0) - d + d0,
#   g(t) = t / d - d / 2 + d0 / 2  with  d = d0 exp(W(2 t / d0^2) / 2),
#   g~*_C(y) = (C d0 / 2) (exp(y^2 / C^2) - 1).
# params = [d0]
# ---------------------------------------------------------------------------
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
def _kl_conj_grad1(y, C, d0):
    s = y / C
    return d0 * s * np.exp(s * s)


@njit(cache=True)
def _kl_conj_hess1(y, C, d0):
    s = y / C
    return d0 / C * (1.0 + 2.0 * s * s) * np.exp(s * s)


@njit(cache=True)
def _kl_conj_prox_t(v, C, d0):
    r"""t = s / C for the conjugate's prox: :math:`s + d_0 (s/C) e^{(s/C)^2} = v`.

    Solved in log form, :math:`\psi(t) = t^2 + \log t + \log d_0 - \log(v - Ct) = 0`
    on :math:`0 < t < v/C`, where ψ is increasing and Newton's method is
    well behaved even when the exponential is far beyond float64 range;
    safeguarded by bisection on the bracket.
    """
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


@njit(cache=True)
def _kl_conj_prox1(v, C, d0):
    return C * _kl_conj_prox_t(v, C, d0)


class KL(Regularizer):
    r"""Generalized KL divergence on kernel weights (SMO-MKL §5.2, eq. 22).

    Tikhonov penalty :math:`h(d) = d\log(d/d_0) - d + d_0`; through
    :math:`g(t) = \inf_{d>0} t/(2d) + h(d)/2` (SpicyMKL §4.1) this gives
    :math:`d(t) = d_0\exp(W(2t/d_0^2)/2)`,
    :math:`g(t) = t/d - (d - d_0)/2` and the smooth conjugate
    :math:`\tilde g_C^*(y) = \tfrac{C d_0}{2}(e^{y^2/C^2} - 1)`.
    Derivation: ``docs/kl_regularizer.md``.
    """

    name = "kl"
    description = "generalized KL divergence of the kernel weights from d0 (non-sparse)"
    params = (
        Param("d0", 1.0, "reference kernel weight", low=0.0, low_open=True),
    )
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
            out[i] = max(v[i] - _kl_conj_prox1(v[i], C, d0), 0.0)
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
            out[i] = _kl_conj_grad1(max(y[i], 0.0), C, d0)
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

    @property
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False

    def cvxpy_expr(self, norms, squares, C, betas=None):
        r""":math:`C\,g(x^2)` through its Tikhonov form, an exponential cone per block
        (needs the block variables ``betas``)."""
        import cvxpy as cp

        d0 = self.d0
        d = cp.Variable(len(betas), pos=True)
        terms = [cp.quad_over_lin(beta, d[m]) / 2 for m, beta in enumerate(betas)]
        return C * (cp.sum(cp.hstack(terms))
                    + 0.5 * cp.sum(cp.rel_entr(d, d0 * np.ones(len(betas))) - d + d0))



BUILTIN_REGULARIZERS = (L1, ElasticNet, Lq, Uniform, KL)
