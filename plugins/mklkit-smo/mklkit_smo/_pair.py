"""The regularizer's coefficients at the kernel forms and the reduced two-variable problem of one SMO
step (eq. 11), solved by the roots of a cubic (p = 2, eq. 16) or safeguarded Newton-Raphson
(:mod:`mklkit_smo._smo` has the mathematics)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._records import _TINY, REG_PNORM, REG_SKM
from ._skm import skm_coeffs


@njit(cache=True)
def _pnorm_coeffs(c, q, lam, d, u1, u2):  # pragma: no cover - jitted
    """d, u1, u2 of the p-norm form at c; returns (||c||_q, r1)."""
    M = c.shape[0]
    cmax = 0.0
    for k in range(M):
        if c[k] > cmax:
            cmax = c[k]
    if not cmax > 0.0:
        for k in range(M):
            d[k] = 0.0
            u1[k] = 0.0
            u2[k] = 0.0
        return 0.0, (2.0 - q) / lam
    # one power per kernel: t_k = (c_k/cmax)^(q-1), (c_k/cmax)^q = t_k c_k/cmax,
    # rho_k = (c_k/||c||_q)^(q-1) = t_k (cmax/||c||_q)^(q-1)
    s = 0.0
    for k in range(M):
        if c[k] > 0.0:
            r = c[k] / cmax
            tk = r ** (q - 1.0)
            u1[k] = tk
            s += tk * r
        else:
            u1[k] = 0.0
    nrm = cmax * s ** (1.0 / q)
    scale = (cmax / nrm) ** (q - 1.0)
    h = nrm / (2.0 * lam)
    g2 = (q - 1.0) * nrm / lam
    for k in range(M):
        ck = c[k]
        if ck > 0.0:
            rho = u1[k] * scale
            d[k] = h * rho
            u1[k] = rho
            u2[k] = g2 * rho / ck
        else:
            d[k] = 0.0
            u2[k] = 0.0
    return nrm, (2.0 - q) / lam


@njit(cache=True)
def _bregman_coeffs(c, lam, fd0, bpar, finv, d, u1, u2):  # pragma: no cover - jitted
    """d, u1 (= 0), u2 of a Bregman form at c; returns r1 = 0."""
    M = c.shape[0]
    theta = np.empty(M)
    h = np.empty(M)
    tp = np.empty(M)
    tm = np.empty(M)
    for k in range(M):
        th = fd0 + c[k] / (2.0 * lam)
        theta[k] = th
        hk = 1e-5 * max(1.0, abs(th))
        h[k] = hk
        tp[k] = th + hk
        tm[k] = th - hk
    dd = finv(theta, bpar)
    dp = finv(tp, bpar)
    dm = finv(tm, bpar)
    for k in range(M):
        d[k] = dd[k]
        u1[k] = 0.0
        u2[k] = (dp[k] - dm[k]) / (2.0 * h[k]) / lam
    return 0.0


@njit(cache=True)
def reg_coeffs(opts, reg, c, d, u1, u2):  # pragma: no cover - jitted
    """Kernel weights ``d`` (eq. 10 / eq. 20) and curvature coefficients at ``c``.

    Returns ``r1``, the factor of the rank-one part of the Hessian (13).
    """
    if opts.reg_mode == REG_PNORM:
        _, r1 = _pnorm_coeffs(c, opts.q, opts.lam, d, u1, u2)
        return r1
    if opts.reg_mode == REG_SKM:
        return skm_coeffs(c, reg.params, d, u1, u2)
    return _bregman_coeffs(c, opts.lam, opts.fd0, reg.params, reg.finv, d, u1, u2)


@njit(cache=True)
def _slope(opts, reg, t, lin, work, c, d, u1, u2):  # pragma: no cover - jitted
    """phi'(t) and phi''(t) of phi(t) = lin t - Phi(c + 2tw + t^2 a)."""
    a = work.a
    w = work.w
    ct = work.ct
    M = c.shape[0]
    for k in range(M):
        v = c[k] + t * (2.0 * w[k] + t * a[k])
        ct[k] = v if v > 0.0 else 0.0
    r1 = reg_coeffs(opts, reg, ct, d, u1, u2)
    g = lin
    curv = 0.0
    s1 = 0.0
    for k in range(M):
        wk = w[k] + t * a[k]
        g -= d[k] * wk
        curv += d[k] * a[k] + u2[k] * wk * wk
        s1 += u1[k] * wk
    curv += r1 * s1 * s1
    return g, -curv


@njit(cache=True)
def _cubic_root(A3, A2, A1, A0):  # pragma: no cover - jitted
    """The real root of a monotone increasing cubic A3 t^3 + A2 t^2 + A1 t + A0 (A3 > 0)."""
    b = A2 / A3
    cc = A1 / A3
    dd = A0 / A3
    p = cc - b * b / 3.0
    qq = 2.0 * b * b * b / 27.0 - b * cc / 3.0 + dd
    if p < 0.0:
        p = 0.0  # rounding: a monotone cubic has p >= 0
    disc = 0.25 * qq * qq + p * p * p / 27.0
    sd = math.sqrt(disc) if disc > 0.0 else 0.0
    if qq == 0.0:
        x = 0.0
    else:
        m = 0.5 * abs(qq) + sd
        u = -math.copysign(m ** (1.0 / 3.0), qq)
        x = u - p / (3.0 * u) if u != 0.0 else 0.0
    t = x - b / 3.0
    # polish on the original cubic (its derivative is >= 0 everywhere)
    for _ in range(3):
        f = ((A3 * t + A2) * t + A1) * t + A0
        fp = (3.0 * A3 * t + 2.0 * A2) * t + A1
        if fp > 0.0 and math.isfinite(f):
            tn = t - f / fp
            if tn == t:
                break
            t = tn
        else:
            break
    return t


@njit(cache=True)
def _pair_p2(lin, a, w, c, lam, thi):  # pragma: no cover - jitted
    """Analytic step for p = q = 2 (§5.1): root of a cubic, clipped to [0, thi].

    phi'(t) = lin - (1/(2 lam)) sum_k (c_k + 2 t w_k + t^2 a_k)(w_k + t a_k).
    Returns -1.0 when the cubic is degenerate (no a_k > 0): use Newton then.
    """
    M = c.shape[0]
    A3 = 0.0
    A2 = 0.0
    A1 = 0.0
    A0 = 0.0
    for k in range(M):
        ak = a[k]
        wk = w[k]
        A3 += ak * ak
        A2 += 3.0 * ak * wk
        A1 += c[k] * ak + 2.0 * wk * wk
        A0 += c[k] * wk
    scale = A1 + abs(A0) + abs(A2)
    if not A3 > 1e-14 * max(scale, _TINY):
        return -1.0
    t = _cubic_root(A3, A2, A1, A0 - 2.0 * lam * lin)
    if not (t > 0.0):
        return 0.0
    if t > thi:
        return thi
    return t


@njit(cache=True)
def _pair_newton(opts, reg, lin, work, c, thi, d, u1, u2, counter):  # pragma: no cover - jitted
    """Safeguarded Newton-Raphson on phi'(t) = 0 over [0, thi] (phi concave).

    Keeps a bracket [lo, hi] with phi'(lo) > 0 > phi'(hi) and falls back to
    bisection when a Newton step leaves it or does not halve |phi'|.
    """
    g0, h0 = _slope(opts, reg, 0.0, lin, work, c, d, u1, u2)
    counter[0] += 1
    if not (g0 > 0.0):
        return 0.0
    ghi, _ = _slope(opts, reg, thi, lin, work, c, d, u1, u2)
    counter[0] += 1
    if ghi >= 0.0:
        return thi
    if not math.isfinite(ghi):
        # overflow far out (fast-growing Bregman forms): bisect from a finite bracket
        ghi = -1.0
    lo = 0.0
    hi = thi
    if h0 < 0.0:
        t = g0 / (-h0)
    else:
        t = 0.5 * (lo + hi)
    if not (lo < t < hi):
        t = 0.5 * (lo + hi)
    gscale = abs(g0)
    gprev = math.inf
    for _ in range(200):
        g, h = _slope(opts, reg, t, lin, work, c, d, u1, u2)
        counter[0] += 1
        if not math.isfinite(g):
            hi = t
            t = 0.5 * (lo + hi)
            continue
        if g > 0.0:
            lo = t
        else:
            hi = t
        if abs(g) <= 1e-13 * gscale or hi - lo <= 1e-15 * max(hi, _TINY):
            return t
        tn = t - g / h if h < 0.0 else -1.0
        if lo < tn < hi and abs(tn - t) <= 1e-6 * t:
            # a converged Newton step (the error after it is of order 1e-12 t where phi is
            # smooth).  phi' is known only to rounding -- terms of size ~1 cancel down to
            # phi'(0) ~ the KKT violation -- so |phi'| <= 1e-13 phi'(0) may never hold, and
            # bisecting on to a 1e-15 bracket would cost some 30 more evaluations
            return tn
        if not (lo < tn < hi) or abs(g) > 0.5 * gprev:
            tn = 0.5 * (lo + hi)
        gprev = abs(g)
        if tn == t:
            return t
        t = tn
    return t


@njit(cache=True)
def solve_pair(opts, reg, lin, work, c, thi, d, u1, u2, counter):  # pragma: no cover - jitted
    """Optimal step ``t`` of the reduced problem (eq. 11) on [0, thi] along ``work.a``,
    ``work.w`` (``work.ct``: scratch)."""
    if opts.analytic and opts.reg_mode == REG_PNORM and opts.q == 2.0:
        t = _pair_p2(lin, work.a, work.w, c, opts.lam, thi)
        if t >= 0.0:
            return t
    return _pair_newton(opts, reg, lin, work, c, thi, d, u1, u2, counter)
