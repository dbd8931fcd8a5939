"""The loss identities of the component kit, :func:`check_loss` (docs/plugins.md §7; Suzuki & Tomioka
2011, eqs. (15)-(17), (33)-(35)): the declared domain and claims, convexity, derivatives against central
differences (subgradients at kinks), ``deriv_lipschitz``, Fenchel-Young, the conjugate against a numerical
supremum and the labels."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..components.base import CLASSIFICATION, LabelError, LossJit
from ._common import (
    _FD,
    _ROUND,
    _arr,
    _begin,
    _central,
    _check_output,
    _compare_fd,
    _f64,
    _LossPoints,
    _sensitivity,
    _steps,
    _sum_identity,
    _sup_checks,
    _sup_one,
    _sup_within,
    _tol,
    _ulps,
)
from ._loss_constrained import _loss_constrained
from ._report import ConformanceReport, _Runner

__all__ = ["check_loss"]


def _loss_shapes(r: _Runner, loss: Any, P: _LossPoints) -> None:
    ident = r.identity("kernel_shapes")
    k, p, y, z, u = loss.jit, P.p, P.y, P.z, P.u
    n = y.size
    # at extreme predictions a fast-growing loss may overflow to inf, never to NaN
    extreme = _f64(np.tile([-1e6, -1e3, 1e3, 1e6], n // 4 + 1)[:n])
    for zz, allow_inf in ((z, False), (extreme, True)):
        y0, z0 = y.copy(), zz.copy()
        for name in ("value", "deriv", "deriv2"):
            out = getattr(k, name)(y, zz, p)
            _check_output(ident, f"{name}(y, z)", out, (n,), {"y": y, "z": zz}, allow_inf=allow_inf)
        if not (np.array_equal(y, y0) and np.array_equal(zz, z0)):
            ident.fail("a kernel modified its input arrays")
    for name in ("conj", "conj_grad", "conj_hess"):
        out = getattr(k, name)(y, u, p)
        _check_output(ident, f"{name}(y, u) inside the domain", out, (n,), {"y": y, "u": u})
    for name in ("conj_lower", "conj_upper"):
        out = getattr(k, name)(y, p)
        _check_output(ident, f"{name}(y)", out, (n,), {"y": y}, allow_inf=True)


def _loss_conj_domain(r: _Runner, loss: Any, P: _LossPoints) -> None:
    ident = r.identity("conj_domain")
    k, p, y = loss.jit, P.p, P.y
    ident.require(
        P.lo < P.hi, {"y": y}, lambda i: f"conj_lower = {P.lo[i]:.6g} is not below conj_upper = {P.hi[i]:.6g}"
    )
    c_in = _arr(k.conj(y, P.u, p))
    ident.require(np.isfinite(c_in), {"y": y, "u": P.u}, "conj is not finite inside its domain")
    for name in ("conj_grad", "conj_hess"):
        out = _arr(getattr(k, name)(y, P.u, p))
        ident.require(np.isfinite(out), {"y": y, "u": P.u}, f"{name} is not finite inside the domain")
    m = P.out_mask
    if m.any():
        c_out = _arr(k.conj(y[m], P.u_out[m], p))
        ident.require(
            np.isposinf(c_out),
            {"y": y[m], "u": P.u_out[m]},
            lambda i: f"conj outside the domain is {c_out[i]!r}, expected +inf",
        )
    for b in (P.lo, P.hi):
        fb = np.isfinite(b)
        if fb.any():
            cb = _arr(k.conj(y[fb], _f64(b[fb]), p))
            ident.require(
                ~np.isnan(cb) & (cb > -np.inf), {"y": y[fb], "u": b[fb]}, "conj at the end of its domain is NaN or -inf"
            )


def _loss_smooth_claim(r: _Runner, loss: Any, P: _LossPoints) -> None:
    ident = r.identity("smooth_conjugate_claim")
    if not loss.smooth_conjugate:
        ident.note()
        return
    k, p, y = loss.jit, P.p, P.y
    width = np.where(np.isfinite(P.hi - P.lo), P.hi - P.lo, 1.0)
    for b, outward in ((P.hi, 1.0), (P.lo, -1.0)):
        fb = np.isfinite(b)
        if not fb.any():
            continue
        yy, bb, ww = y[fb], b[fb], width[fb]
        g = [outward * _arr(k.conj_grad(yy, _f64(bb - outward * t * ww), p)) for t in (1e-3, 1e-6, 1e-12)]
        inc1, inc2 = g[1] - g[0], g[2] - g[1]
        ok = (inc1 > 0) & (inc2 >= 0.5 * inc1)
        ident.require(
            ok,
            {"y": yy, "u": bb},
            lambda i: (
                "smooth_conjugate is True but conj_grad does not grow without bound towards this end "
                f"of the domain (conj_grad at distances 1e-3, 1e-6, 1e-12 of the width: "
                f"{outward * g[0][i]:.6g}, {outward * g[1][i]:.6g}, {outward * g[2][i]:.6g}); "
                "declare smooth_conjugate = False and give a constrained representation"
            ),
        )


def _loss_linear_claim(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("linear_conjugate_claim")
    if not loss.linear_conjugate:
        ident.note()
        return
    k, p, y, lo, hi = loss.jit, P.p, P.y, P.lo, P.hi
    pts = {"y": y, "lower": lo, "upper": hi}
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo <= 0.0) & (hi >= 0.0) & (lo < hi)
    ident.require(
        ok,
        pts,
        lambda i: (
            f"linear_conjugate is True but the domain [{lo[i]:.6g}, {hi[i]:.6g}] of the conjugate "
            "is not a bounded interval containing 0"
        ),
    )
    if not ok.all():
        return
    zero = _arr(k.conj(y, _f64(np.zeros(y.size)), p))
    ident.compare(zero, 0.0, atol + _ROUND, pts, "linear_conjugate: conj(y, 0) vs 0")
    for end in (lo, hi):
        at_end = _arr(k.conj(y, _f64(end), p))
        for t in (0.2, 0.5, 0.9):
            mid = _arr(k.conj(y, _f64(t * end), p))
            line = t * at_end
            what = "linear_conjugate: conj(y, t u) vs t conj(y, u) at an end u of the domain"
            ident.compare(mid, line, _tol(rtol, atol, (mid, line), (at_end, zero)), {**pts, "u": t * end}, what)


def _loss_convexity(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator) -> None:
    ident = r.identity("convexity")
    k, p, y = loss.jit, P.p, P.y
    z2 = _f64(P.z + rng.normal(0.0, 2.0, P.z.size))
    what = "midpoint convexity of value: (l(z)+l(z2))/2 >= l((z+z2)/2)"
    _midpoint_convex(ident, lambda a: k.value(y, a, p), P.z, z2, rtol, atol, {"y": y, "z": P.z, "z2": z2}, what)
    zs = np.sort(np.stack([P.z, z2]), axis=0)
    da, db = _arr(k.deriv(y, _f64(zs[0]), p)), _arr(k.deriv(y, _f64(zs[1]), p))
    what = "deriv must be non-decreasing: deriv(z2) >= deriv(z)"
    ident.at_least(db, da, atol + rtol * np.maximum(np.abs(da), np.abs(db)), {"y": y, "z": zs[0], "z2": zs[1]}, what)
    flo, fhi = np.isfinite(P.lo), np.isfinite(P.hi)
    t = rng.uniform(0.02, 0.98, y.size)
    u2 = np.where(
        flo & fhi,
        P.lo + t * (P.hi - P.lo),
        np.where(
            flo,
            P.lo + 10 ** rng.uniform(-1.5, 1.5, y.size),
            np.where(fhi, P.hi - 10 ** rng.uniform(-1.5, 1.5, y.size), rng.normal(0.0, 3.0, y.size)),
        ),
    )
    u2 = _f64(u2)
    what = "midpoint convexity of conj: (l*(u)+l*(u2))/2 >= l*((u+u2)/2)"
    _midpoint_convex(ident, lambda a: k.conj(y, a, p), P.u, u2, rtol, atol, {"y": y, "u": P.u, "u2": u2}, what)


def _midpoint_convex(
    ident: Any, f: Any, a: np.ndarray, b: np.ndarray, rtol: float, atol: float, pts: dict, what: str
) -> None:
    """Require ``(f(a) + f(b))/2 >= f((a + b)/2)``."""
    fa, fb, fm = (_arr(f(x)) for x in (a, b, _f64(0.5 * (a + b))))
    avg = 0.5 * (fa + fb)
    ident.at_least(avg, fm, _tol(rtol, atol, (avg, fm), (fa, fb, fm)), pts, what)


def _loss_labels(r: _Runner, loss: Any) -> None:
    ident = r.identity("labels")

    def accepts(y: np.ndarray, what: str) -> None:
        try:
            out = loss.validate_labels(y)
        except Exception as exc:
            ident.fail(f"validate_labels rejected valid {what}: {type(exc).__name__}: {exc}")
            return
        out = np.asarray(out)
        same = out.shape == np.shape(y) and np.array_equal(out, np.asarray(y, float))
        if out.dtype != np.float64 or not same:
            ident.fail(f"validate_labels must return the valid {what} as a float64 vector; got {out!r}")
        else:
            ident.note()

    def rejects(y: Any, what: str) -> None:
        try:
            loss.validate_labels(y)
        except LabelError:
            ident.note()
            return
        except Exception as exc:
            ident.fail(f"validate_labels raised {type(exc).__name__} for {what}, expected LabelError: {exc}")
            return
        ident.fail(f"validate_labels accepted {what}; it must raise LabelError")

    if loss.task == CLASSIFICATION:
        accepts(np.array([-1.0, 1.0, 1.0, -1.0]), "labels {-1, +1}")
        accepts(np.array([1, -1, -1]), "integer labels {-1, +1}")
        rejects(np.array([0.0, 1.0, 1.0, 0.0]), "labels {0, 1}")
        rejects(np.array([1.0, 1.0, 1.0]), "a single class")
        rejects(np.linspace(-1.3, 2.7, 25), "a continuous target")
        rejects(np.array([-1.0, 1.0, np.nan]), "labels with NaN")
        rejects(np.array([[-1.0, 1.0], [1.0, -1.0]]), "a 2-d label array")
    else:
        accepts(np.array([0.5, -2.25, 3.0, 0.0]), "real targets")
        rejects(np.array([0.5, np.nan, 1.0]), "targets with NaN")
        rejects(np.array([0.5, np.inf, 1.0]), "targets with inf")
        rejects(np.array([[0.5, 1.0], [1.0, 2.0]]), "a 2-d target array")


def _loss_kinks(
    fun: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ys: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    n_grid: int = 3001,
) -> tuple[np.ndarray, np.ndarray]:
    """Jumps of ``fun(y, .)`` on ``[lo, hi]`` per label, bisected to adjacent floats: (y, x) at both sides of each."""
    t = np.linspace(0.0, 1.0, n_grid)
    Y = np.repeat(ys, n_grid)
    X = (lo[:, None] + (hi - lo)[:, None] * t[None, :]).reshape(-1)
    d = _arr(fun(_f64(Y), _f64(X))).reshape(ys.size, n_grid)
    Xg = X.reshape(ys.size, n_grid)
    scale = max(1.0, float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 1.0)
    # a jump: a step above 1e-6 of the scale and 10 times both neighbouring steps
    delta = np.abs(np.diff(d, axis=-1))
    left = np.concatenate([delta[..., :1] * 0 + np.inf, delta[..., :-1]], axis=-1)
    right = np.concatenate([delta[..., 1:], delta[..., :1] * 0 + np.inf], axis=-1)
    with np.errstate(invalid="ignore"):
        rows, cols = np.nonzero((delta > 1e-6 * scale) & (delta > 10 * np.maximum(left, right)))
    if rows.size == 0:
        return np.empty(0), np.empty(0)
    a, b = Xg[rows, cols], Xg[rows, cols + 1]
    fa, fb = d[rows, cols], d[rows, cols + 1]
    yk = _f64(ys[rows])
    mid, sgn = 0.5 * (fa + fb), np.sign(fb - fa)
    for _ in range(80):
        c = 0.5 * (a + b)
        below = sgn * (_arr(fun(yk, _f64(c))) - mid) < 0
        a = np.where(below, c, a)
        b = np.where(below, b, c)
    return np.concatenate([yk, yk]), np.concatenate([a, b])


def _subgradient(ident: Any, an: Any, fd: _FD, h: Any, rtol: float, atol: float, pts: dict, what: str, f: str) -> None:
    """Require ``dminus <= an <= dplus`` (the one-sided differences of ``f``) within rtol of the largest
    of the three, plus rounding."""
    tol = (
        atol + rtol * np.maximum(np.abs(an), np.maximum(np.abs(fd.dplus), np.abs(fd.dminus))) + 2 * _ROUND * fd.fmax / h
    )
    ident.at_least(an, fd.dminus, tol, pts, f"{what} >= left difference of {f}")
    ident.at_least(fd.dplus, an, tol, pts, f"{what} <= right difference of {f}")


def _loss_deriv(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("deriv_fd")
    k, p, y, z = loss.jit, P.p, P.y, P.z
    _compare_fd(ident, P.at, ("value", "deriv"), z, _steps(z, 1.0), rtol, atol, {"y": y, "z": z})
    uniq = np.unique(y)[:8]
    ky, kz = _loss_kinks(lambda yy, zz: k.deriv(yy, zz, p), uniq, uniq - 30.0, uniq + 30.0)
    ys = np.concatenate([y, ky])
    zs = np.concatenate([z, kz])
    hs = _steps(zs, 1.0)
    fds = _central(lambda zz: k.value(_f64(ys), zz, p), _f64(zs), hs)
    ans = _arr(k.deriv(_f64(ys), _f64(zs), p))
    _subgradient(ident, ans, fds, hs, rtol, atol, {"y": ys, "z": zs}, "deriv must be a subgradient: deriv", "value")


def _loss_deriv2(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("deriv2_fd")
    k, p, y, z = loss.jit, P.p, P.y, P.z
    h = _steps(z, 1.0)
    fv = _central(lambda zz: k.value(y, zz, p), z, h)
    an, _ = _compare_fd(ident, P.at, ("deriv", "deriv2"), z, h, rtol, atol, {"y": y, "z": z}, ~fv.kink)
    ident.at_least(an, 0.0, atol, {"y": y, "z": z}, "deriv2 of a convex loss must be >= 0")


def _loss_lipschitz(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator) -> None:
    ident = r.identity("deriv_lipschitz")
    if not loss.smooth_primal:
        ident.note()
        return
    L = float(loss.deriv_lipschitz())
    if not (L > 0 and math.isfinite(L)):
        ident.fail(
            f"smooth_primal is True but deriv_lipschitz() = {L!r}; a finite positive bound on |deriv2| is required"
        )
        return
    k, p, y, z = loss.jit, P.p, P.y, P.z
    an = _arr(k.deriv2(y, z, p))
    ident.at_least(L, np.abs(an), atol + rtol * L, {"y": y, "z": z}, "deriv_lipschitz() >= |deriv2|")
    z2 = _f64(z + rng.normal(0.0, 1.0, z.size))
    d1, d2 = _arr(k.deriv(y, z, p)), _arr(k.deriv(y, z2, p))
    bound, change = L * np.abs(z2 - z), d2 - d1
    what = "deriv_lipschitz() * |z2 - z| >= |deriv(z2) - deriv(z)|"
    ident.at_least(bound, np.abs(change), _tol(rtol, atol, (bound, change), (d1, d2)), {"y": y, "z": z, "z2": z2}, what)


def _loss_conj_derivs(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y, u = loss.jit, P.p, P.y, P.u
    h = _steps(u, 1.0)
    with np.errstate(invalid="ignore"):
        inside = (u - 4 * h > P.lo) & (u + 4 * h < P.hi)
    ident = r.identity("conj_grad_fd")
    _, fd = _compare_fd(ident, P.at, ("conj", "conj_grad"), u, h, rtol, atol, {"y": y, "u": u}, inside)
    uniq, first = np.unique(y, return_index=True)
    uniq, first = uniq[:8], first[:8]
    lo, hi = P.lo[first], P.hi[first]
    flo, fhi = np.isfinite(lo), np.isfinite(hi)
    a = np.where(flo, lo, np.where(fhi, hi - 60.0, -30.0))
    b = np.where(fhi, hi, a + 60.0)
    pad = 0.01 * (b - a)
    ky, ku = _loss_kinks(lambda yy, uu: k.conj_grad(yy, uu, p), uniq, a + pad, b - pad)
    if ky.size:
        hk = _steps(ku, 1.0)
        fk = _central(lambda uu: k.conj(_f64(ky), uu, p), _f64(ku), hk)
        ak = _arr(k.conj_grad(_f64(ky), _f64(ku), p))
        what = "conj_grad at a kink must be a subgradient:"
        _subgradient(ident, ak, fk, hk, rtol, atol, {"y": ky, "u": ku}, what, "conj")
    ident2 = r.identity("conj_hess_fd")
    an2, _ = _compare_fd(
        ident2, P.at, ("conj_grad", "conj_hess"), u, h, rtol, atol, {"y": y, "u": u}, inside & ~fd.kink
    )
    ident2.at_least(an2, 0.0, atol, {"y": y, "u": u}, "conj_hess of a convex conjugate must be >= 0", mask=inside)


def _loss_fenchel_young(
    r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator
) -> None:
    ident = r.identity("fenchel_young")
    k, p, y, z, u = loss.jit, P.p, P.y, P.z, P.u
    zr = _f64(rng.permutation(z))
    lv, cv = _arr(k.value(y, zr, p)), _arr(k.conj(y, u, p))
    what = "Fenchel-Young inequality l(y,z) + l*(y,u) >= u z"
    _sum_identity(ident, (lv, cv), u * zr, rtol, atol, {"y": y, "z": zr, "u": u}, what, at_least=True)
    g = _arr(k.deriv(y, z, p))
    parts = (_arr(k.value(y, z, p)), _arr(k.conj(y, g, p)))
    cond, ok = _sensitivity(lambda a: k.conj(y, a, p), g, _ulps(1.0, g))
    what = "Fenchel-Young equality at u = deriv(y,z): l + l* vs u z"
    _sum_identity(ident, parts, g * z, rtol, atol, {"y": y, "z": z, "u": g}, what, cond=cond, mask=ok)
    zg = _arr(k.conj_grad(y, u, p))
    reach = np.abs(zg - y) <= 1e8  # beyond the supremum's grid the loss may overflow
    cond, ok = _sensitivity(lambda a: k.value(y, a, p), zg, _ulps(1.0, zg))
    what = "Fenchel-Young equality at z = conj_grad(y,u): l + l* vs u z"
    parts = (_arr(k.value(y, _f64(zg), p)), cv)
    _sum_identity(ident, parts, u * zg, rtol, atol, {"y": y, "u": u, "z": zg}, what, cond=cond, mask=reach & ok)


_LOSS_GRID = np.concatenate([-(10.0 ** np.linspace(8, -4, 121)), [0.0], 10.0 ** np.linspace(-4, 8, 121)])


def _loss_sup(k: LossJit, p: np.ndarray, yi: float, ui: float, hints: Sequence[float]) -> tuple:
    """:func:`_sup_one` of ``sup_z u z - l(y, z)`` on ``y + _LOSS_GRID``."""
    return _sup_one(lambda z: k.value(_f64(np.full(z.size, yi)), z, p), ui, yi, _LOSS_GRID, hints, -math.inf)


def _loss_conj_sup(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y = loss.jit, P.p, P.y
    ident = r.identity("conj_sup")
    ys, us = P.with_ends()
    cv = _arr(k.conj(_f64(ys), _f64(us), p))
    hint = _arr(k.conj_grad(_f64(ys), _f64(us), p))
    found = [_loss_sup(k, p, float(yi), float(ui), [float(h)])[:4] for yi, ui, h in zip(ys, us, hint)]
    below = "conj must be >= u z - l(y,z) for every z (supremum not attained on |z - y| <= 1e8, checked from below)"
    _sup_checks(ident, cv, found, {"y": ys, "u": us}, rtol, atol, "conj vs numerical sup_z (u z - l(y,z))", below)
    ident2 = r.identity("conj_unbounded")
    m = P.out_mask
    if not m.any():
        ident2.note()
        return
    yo, uo = y[m], P.u_out[m]
    co = _arr(k.conj(_f64(yo), _f64(uo), p))
    s1, s2 = np.array([_sup_within(*_loss_sup(k, p, float(yi), float(ui), [])[4:], 1.0) for yi, ui in zip(yo, uo)]).T
    ident2.require(
        s2 >= 10.0 * np.maximum(s1, 1.0),
        {"y": yo, "u": uo},
        lambda i: (
            f"outside [conj_lower, conj_upper] the supremum of u z - l(y,z) should be unbounded, "
            f"but it is {s1[i]:.6g} over |z - y| <= 1e3 and {s2[i]:.6g} over |z - y| <= 1e6: "
            "the declared domain is too small"
        ),
    )
    ident2.require(
        np.isposinf(co), {"y": yo, "u": uo}, lambda i: f"conj outside the domain is {co[i]!r}, expected +inf"
    )


def check_loss(
    loss: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6, atol: float = 1e-8
) -> ConformanceReport:
    """Check a loss against the :class:`~mklkit.components.base.Loss` contract, at ``n_points``
    (at least 8) random points per identity drawn with ``seed``, with tolerances ``rtol``, ``atol``."""
    rng, r = _begin(loss, "loss", seed)
    try:
        P = _LossPoints(loss, rng, n_points)
    except Exception as exc:
        r.identity("kernel_shapes").fail(
            f"could not draw points (conj_lower/conj_upper raised {type(exc).__name__}: {exc})"
        )
        r.run("labels", _loss_labels, r, loss)
        return r.report(seed)
    r.run("kernel_shapes", _loss_shapes, r, loss, P)
    r.run("conj_domain", _loss_conj_domain, r, loss, P)
    r.run("smooth_conjugate_claim", _loss_smooth_claim, r, loss, P)
    r.run("linear_conjugate_claim", _loss_linear_claim, r, loss, P, rtol, atol)
    r.run("convexity", _loss_convexity, r, loss, P, rtol, atol, rng)
    r.run("deriv_fd", _loss_deriv, r, loss, P, rtol, atol)
    r.run("deriv2_fd", _loss_deriv2, r, loss, P, rtol, atol)
    r.run("deriv_lipschitz", _loss_lipschitz, r, loss, P, rtol, atol, rng)
    r.run(["conj_grad_fd", "conj_hess_fd"], _loss_conj_derivs, r, loss, P, rtol, atol)
    r.run("fenchel_young", _loss_fenchel_young, r, loss, P, rtol, atol, rng)
    r.run(["conj_sup", "conj_unbounded"], _loss_conj_sup, r, loss, P, rtol, atol)
    if getattr(loss, "constrained", None) is not None:
        r.run("constrained_shapes", _loss_constrained, r, loss, P, rtol, atol, rng)
    r.run("labels", _loss_labels, r, loss)
    return r.report(seed)
