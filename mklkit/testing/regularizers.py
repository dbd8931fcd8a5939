"""The regularizer identities of the component kit, :func:`check_regularizer` (docs/plugins.md §7;
Suzuki & Tomioka 2011, §4, eqs. (13), (21)-(23), (42)-(47), Table 3)."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..components.base import BregmanJit
from ._common import (
    _arr,
    _begin,
    _check_output,
    _compare_fd,
    _f64,
    _fin,
    _RegPoints,
    _scalar_min,
    _sensitivity,
    _steps,
    _tol,
    _ulps,
)
from ._reg_numeric import _reg_conj, _reg_conj_sup, _reg_fenchel_young, _reg_moreau, _reg_prox, _reg_sparse
from ._report import ConformanceReport, _Runner

__all__ = ["check_regularizer"]


#: A conjugate may be +inf inside its domain only by overflow: just below, it is at least this large.
_OVERFLOW_FLOOR = 1e250


def _finite_or_overflow(fn: Callable[..., Any], p: np.ndarray, y: np.ndarray, out: np.ndarray, c: float) -> np.ndarray:
    """Where ``out = fn(y, c)`` is finite, or +inf by an overflow: the value just below where it turns
    infinite (bisection on [0, y]) is at least :data:`_OVERFLOW_FLOOR`."""

    def at(t: float) -> float:
        return float(_arr(fn(_f64([t]), c, p))[0])

    ok = np.isfinite(out)
    for i in np.flatnonzero(np.isposinf(out)):
        lo, hi = 0.0, float(y[i])
        if not math.isfinite(at(lo)):
            continue
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if math.isfinite(at(mid)):
                lo = mid
            else:
                hi = mid
        ok[i] = at(lo) >= _OVERFLOW_FLOOR
    return ok


def _reg_shapes(r: _Runner, reg: Any, P: _RegPoints) -> None:
    ident = r.identity("kernel_shapes")
    k, p = reg.jit, P.p
    for c, idx in P.groups():
        x = _f64(np.concatenate([[0.0], P.x[idx]]))
        n = x.size
        x0 = x.copy()
        pts = {"x": x, "C": np.full(n, c)}
        for name in ("value", "prox", "prox_deriv", "env", "env_grad", "env_hess"):
            _check_output(ident, name, getattr(k, name)(x, c, p), (n,), pts)
        yin = _f64(P.y_in[idx])
        for name in ("conj", "conj_grad", "conj_hess"):
            fn = getattr(k, name)
            pts_in = {"y": yin, "C": np.full(n - 1, c)}
            out = _check_output(ident, f"{name} inside the domain", fn(yin, c, p), (n - 1,), pts_in, allow_inf=True)
            if out is not None:
                what = f"{name} inside the domain is not finite (and not a float64 overflow of a huge value)"
                ident.require(_finite_or_overflow(fn, p, yin, out, c), pts_in, what)
        zero, pts0 = _f64([0.0]), {"y": _f64([0.0]), "C": np.full(1, c)}
        _check_output(ident, "conj(0)", k.conj(zero, c, p), (1,), pts0)
        for name in ("conj_grad", "conj_hess"):
            # +inf at the end of [0, inf) is allowed (lq with q > 2)
            out = _check_output(ident, f"{name}(0)", getattr(k, name)(zero, c, p), (1,), pts0, allow_inf=True)
            if out is not None:
                ident.require(out != -np.inf, pts0, f"{name}(0) is -inf")
        if not np.array_equal(x, x0):
            ident.fail("a kernel modified its input array")
    x = _f64(P.x)
    _check_output(ident, "weight", k.weight(x, p), (x.size,), {"x": x}, allow_inf=True)
    _check_output(ident, "penalty", k.penalty(_f64(P.d), p), (x.size,), {"d": P.d}, allow_inf=True)


def _reg_conj_domain(r: _Runner, reg: Any, P: _RegPoints) -> None:
    ident = r.identity("conj_domain")
    k, p = reg.jit, P.p
    cin = P.by_C(k.conj, P.y_in)
    ok = np.isfinite(cin)
    for c, idx in P.groups():
        ok[idx] = _finite_or_overflow(k.conj, p, P.y_in[idx], cin[idx], c)
    what = "conj is not finite inside [0, conj_radius(C)) (and not a float64 overflow)"
    ident.require(ok, {"y": P.y_in, "C": P.C}, what)
    c0 = P.by_C(k.conj, np.zeros_like(P.C))
    ident.require(np.isfinite(c0), {"y": np.zeros_like(P.C), "C": P.C}, "conj(0) is not finite")
    m = P.out_mask
    if m.any():
        cout = P.by_C(k.conj, np.where(m, P.y_out, 0.0), mask=m)
        ident.require(
            np.isposinf(cout[m]),
            {"y": P.y_out[m], "C": P.C[m]},
            lambda i: f"conj beyond conj_radius(C) is {cout[m][i]!r}, expected +inf",
        )
        cb = P.by_C(k.conj, np.where(m, P.radius, 0.0), mask=m)
        ident.require(~np.isnan(cb[m]), {"y": P.radius[m], "C": P.C[m]}, "conj at conj_radius(C) is NaN")


def _reg_convexity(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float, rng: np.random.Generator) -> None:
    ident = r.identity("convexity")
    k, p = reg.jit, P.p
    x2 = P.x * 10.0 ** rng.uniform(-1.0, 1.0, P.x.size)
    xm = 0.5 * (P.x + x2)
    fa, fb, fm = (P.by_C(k.value, a) for a in (P.x, x2, xm))
    tol = atol + rtol * _fin(fa, fb)
    pts = {"x": P.x, "x2": x2, "C": P.C}
    finite = np.isfinite(fa) & np.isfinite(fb)
    ident.at_least(0.5 * (fa + fb), fm, tol, pts, "midpoint convexity of value in x", mask=finite)
    lo, hi = np.minimum(P.x, x2), np.maximum(P.x, x2)
    flo, fhi = (P.by_C(k.value, a) for a in (lo, hi))
    what = "value must be non-decreasing in x"
    ident.at_least(fhi, flo, atol + rtol * np.abs(flo), {"x": lo, "x2": hi, "C": P.C}, what)
    if getattr(reg, "tikhonov_form", True):
        # g(t) = value(sqrt t, 1) concave in t (SpicyMKL eq. 42)
        t1, t2 = P.x**2, x2**2
        g1, g2 = (_arr(k.value(_f64(np.sqrt(t)), 1.0, p)) for t in (t1, t2))
        gm = _arr(k.value(_f64(np.sqrt(0.5 * (t1 + t2))), 1.0, p))
        what = "g(t) = value(sqrt(t), C=1) must be concave in t"
        ident.at_least(gm, 0.5 * (g1 + g2), atol + rtol * (np.abs(g1) + np.abs(g2)), {"x": P.x, "x2": x2}, what)
    y2 = np.where(P.out_mask, P.radius * rng.uniform(0.02, 0.98, P.C.size), P.y * 10 ** rng.uniform(-1, 1, P.C.size))
    ca, cb, cm = (P.by_C(k.conj, a) for a in (P.y_in, y2, 0.5 * (P.y_in + y2)))
    tol, pts = atol + rtol * (np.abs(ca) + np.abs(cb)), {"y": P.y_in, "y2": y2, "C": P.C}
    ident.at_least(0.5 * (ca + cb), cm, tol, pts, "midpoint convexity of conj", mask=np.isfinite(ca) & np.isfinite(cb))
    ylo, yhi = np.minimum(P.y_in, y2), np.maximum(P.y_in, y2)
    clo, chi = (P.by_C(k.conj, a) for a in (ylo, yhi))
    pts = {"y": ylo, "y2": yhi, "C": P.C}
    ident.at_least(chi, clo, atol + rtol * np.abs(clo), pts, "conj must be non-decreasing in y", mask=np.isfinite(clo))


def _reg_scaling(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    ident = r.identity("value_scaling")
    k, p = reg.jit, P.p
    vc = P.by_C(k.value, P.x)
    v1 = _arr(k.value(_f64(P.x), 1.0, p))
    ident.compare(vc, P.C * v1, atol + rtol * np.abs(vc), {"x": P.x, "C": P.C}, "value(x, C) vs C * value(x, 1)")


def _reg_weight(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    x = np.concatenate([[0.0], np.sort(P.x)[:: max(1, P.x.size // 32)]])
    d = _arr(k.weight(_f64(x), p))
    g = _arr(k.value(_f64(x), 1.0, p))
    ident = r.identity("weight_value")
    with np.errstate(divide="ignore", invalid="ignore"):
        quad = np.where(x == 0.0, 0.0, x**2 / (2.0 * d))
    ok_d = (d >= 0) & ~np.isnan(d) & ((d > 0) | (x == 0.0))
    ident.require(ok_d, {"x": x, "d": d}, lambda i: f"weight(x) = {d[i]!r} must be > 0 (0 only at x = 0)")
    dd = np.where(ok_d & np.isfinite(d), d, 1.0)
    h = _arr(k.penalty(_f64(dd), p))
    phi = quad + 0.5 * h
    cond, ok_c = _sensitivity(lambda a: 0.5 * _arr(k.penalty(a, p)), dd, _ulps(dd))
    what = "x^2/(2d) + penalty(d)/2 at d = weight(x) vs g(x^2) = value(x, C=1)"
    checkable = ok_d & np.isfinite(d) & ok_c
    ident.compare(phi, g, _tol(rtol, atol, (phi, g), (quad, 0.5 * h), cond), {"x": x, "d": d}, what, mask=checkable)
    ident2 = r.identity("weight_argmin")
    logd = np.linspace(-10.0, 10.0, 201)
    grid = 10.0**logd
    hg = _arr(k.penalty(_f64(grid), p))
    num = np.empty(x.size)
    err = np.zeros(x.size)
    for i in range(x.size):
        xi = float(x[i])
        vals = xi**2 / (2 * grid) + 0.5 * hg
        vals = np.where(np.isnan(vals), np.inf, vals)
        j = int(np.argmin(vals))

        def obj(t: float, xi: float = xi) -> float:
            dt = 10.0**t
            return xi**2 / (2 * dt) + 0.5 * float(k.penalty(_f64([dt]), p)[0])

        _, fb, err[i], _ = _scalar_min(obj, logd[max(j - 1, 0)], logd[min(j + 1, logd.size - 1)])
        num[i] = min(float(vals[j]), fb if math.isfinite(fb) else math.inf)
    tol = _tol(rtol, atol, (num, g, phi), (quad, 0.5 * h), err)
    ident2.at_least(num, g, tol, {"x": x}, "g(x^2) <= min_d x^2/(2d) + penalty(d)/2 (numerical minimum over d > 0)")
    what = (
        "weight(x) must minimise x^2/(2d) + penalty(d)/2 over d > 0: value at weight(x) exceeds the numerical minimum"
    )
    ident2.at_least(num, phi, tol + cond, {"x": x, "d": d}, what, mask=checkable)


def _reg_bregman(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    b: BregmanJit = reg.bregman
    p = P.p
    ident = r.identity("bregman_f_fd")
    d0 = b.d0(p)
    d0f = float(d0)
    if not (math.isfinite(d0f) and d0f > 0):
        ident.fail(f"d0(params) must be a finite positive scalar; got {d0!r}")
        return
    d = _f64(d0f * P.d)
    h = _steps(d, d0f)
    an, _ = _compare_fd(
        ident, lambda name, a: getattr(b, name)(a, p), ("F", "f"), d, h, rtol, atol, {"d": d}, d - 4 * h > 0
    )
    srt = np.sort(d)
    fs = _arr(b.f(_f64(srt), p))
    ident.require(np.diff(fs) > 0, {"d": srt[:-1]}, "f = F' must be strictly increasing (F strictly convex)")
    ident2 = r.identity("bregman_finv")
    back = _arr(b.finv(_f64(an), p))
    ident2.compare(back, d, atol + rtol * d, {"d": d}, "finv(f(d)) vs d")


def check_regularizer(
    reg: Any,
    *,
    n_points: int = 64,
    seed: int = 0,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    C: float | Sequence[float] | None = None,
) -> ConformanceReport:
    """Check a regularizer against the :class:`~mklkit.components.base.Regularizer` contract, at
    ``n_points`` random points per identity (split over the values of ``C``; by default three
    drawn log-uniformly from [0.05, 5]) drawn with ``seed``, with tolerances ``rtol``, ``atol``."""
    rng, r = _begin(reg, "regularizer", seed)
    try:
        P = _RegPoints(reg, rng, n_points, C)
    except ValueError:
        raise
    except Exception as exc:
        r.identity("kernel_shapes").fail(f"could not draw points (conj_radius raised {type(exc).__name__}: {exc})")
        return r.report(seed)
    r.run("kernel_shapes", _reg_shapes, r, reg, P)
    r.run("conj_domain", _reg_conj_domain, r, reg, P)
    r.run("convexity", _reg_convexity, r, reg, P, rtol, atol, rng)
    r.run("value_scaling", _reg_scaling, r, reg, P, rtol, atol)
    r.run("sparse_claim", _reg_sparse, r, reg, P, rtol, atol)
    r.run(["prox_optimality", "prox_numeric", "prox_deriv_fd"], _reg_prox, r, reg, P, rtol, atol)
    r.run(["conj_sup", "conj_unbounded"], _reg_conj_sup, r, reg, P, rtol, atol)
    r.run(["conj_grad_fd", "conj_hess_fd"], _reg_conj, r, reg, P, rtol, atol)
    r.run("fenchel_young", _reg_fenchel_young, r, reg, P, rtol, atol, rng)
    moreau = ["moreau_decomposition", "env_grad_prox", "env_hess_prox_deriv", "env_min", "env_grad_fd", "env_hess_fd"]
    r.run(moreau, _reg_moreau, r, reg, P, rtol, atol)
    if getattr(reg, "tikhonov_form", True):  # False: g not concave, no weight identities
        r.run(["weight_value", "weight_argmin"], _reg_weight, r, reg, P, rtol, atol)
    if getattr(reg, "bregman", None) is not None:
        r.run(["bregman_f_fd", "bregman_finv"], _reg_bregman, r, reg, P, rtol, atol)
    return r.report(seed)
