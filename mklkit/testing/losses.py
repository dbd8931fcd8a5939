r"""The loss identities of the component kit: :func:`check_loss`.

Each identity is described, with its tolerance, in
:mod:`mklkit.testing.components` (Suzuki & Tomioka 2011, eqs. (15)-(17),
(33)-(35)).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
from scipy import optimize

from ..components.base import CLASSIFICATION, ConstrainedConjugate, LabelError, LossJit
from ._common import (
    _ROUND, _SOLVER_RTOL, _arr, _attained, _begin, _best, _bisect_jumps, _central,
    _check_output, _f64, _fd_tol, _fin, _grid_sup, _jumps, _mag, _sensitivity, _steps, _tol,
    _ulps,
)
from ._report import ConformanceReport, _Runner

__all__ = ["check_loss"]


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------
class _LossPoints:
    """Random points for a loss."""

    def __init__(self, loss: Any, rng: np.random.Generator, n: int):
        k = loss.jit
        self.p = _f64(loss.param_vector)
        n = max(int(n), 8)
        if loss.task == CLASSIFICATION:
            y = rng.choice(np.array([-1.0, 1.0]), size=n)
            y[0], y[1] = -1.0, 1.0
        else:
            y = np.round(rng.normal(0.0, 2.0, size=n), 3)
            y[0] = 0.0
        self.y = _f64(y)
        third = n // 3
        z = np.empty(n)
        z[:third] = rng.uniform(-4.0, 4.0, third)
        z[third:2 * third] = y[third:2 * third] + rng.uniform(-1.5, 1.5, third)
        m = n - 2 * third
        z[2 * third:] = rng.choice([-1.0, 1.0], m) * 10.0 ** rng.uniform(-3.0, 2.5, m)
        self.z = _f64(z)
        lo = _arr(k.conj_lower(self.y, self.p))
        hi = _arr(k.conj_upper(self.y, self.p))
        self.lo, self.hi = lo, hi
        self.u, self.u_out, self.out_mask = self._draw_u(rng, lo, hi)

    def _draw_u(self, rng, lo, hi):
        n = lo.size
        flo, fhi = np.isfinite(lo), np.isfinite(hi)
        both = flo & fhi
        width = np.where(both, hi - lo, 1.0)
        t = rng.uniform(0.02, 0.98, n)
        mag = 10.0 ** rng.uniform(-1.5, 1.5, n)
        u = np.where(both, lo + width * t,
                     np.where(flo, lo + mag,
                              np.where(fhi, hi - mag,
                                       rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-2.0, 1.5, n))))
        delta = np.maximum(1.0, np.where(both, width, 1.0)) * rng.uniform(0.05, 1.0, n)
        side_hi = rng.random(n) < 0.5
        out = np.where(fhi & (side_hi | ~flo), hi + delta, lo - delta)
        out_mask = flo | fhi
        return _f64(u), _f64(np.where(out_mask, out, 0.0)), out_mask


def _loss_shapes(r: _Runner, loss: Any, P: _LossPoints) -> None:
    ident = r.identity("kernel_shapes")
    k, p, y, z, u = loss.jit, P.p, P.y, P.z, P.u
    n = y.size
    # finite on the sampled range; at extreme predictions a fast-growing loss
    # may overflow to inf, but never give NaN
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
    ident.require(P.lo < P.hi, {"y": y}, lambda i: (
        f"conj_lower = {P.lo[i]:.6g} is not below conj_upper = {P.hi[i]:.6g}"))
    c_in = _arr(k.conj(y, P.u, p))
    ident.require(np.isfinite(c_in), {"y": y, "u": P.u}, "conj is not finite inside its domain")
    for name in ("conj_grad", "conj_hess"):
        out = _arr(getattr(k, name)(y, P.u, p))
        ident.require(np.isfinite(out), {"y": y, "u": P.u}, f"{name} is not finite inside the domain")
    m = P.out_mask
    if m.any():
        c_out = _arr(k.conj(y[m], P.u_out[m], p))
        ident.require(np.isposinf(c_out), {"y": y[m], "u": P.u_out[m]},
                      lambda i: f"conj outside the domain is {c_out[i]!r}, expected +inf")
    for b in (P.lo, P.hi):
        fb = np.isfinite(b)
        if fb.any():
            cb = _arr(k.conj(y[fb], _f64(b[fb]), p))
            ident.require(~np.isnan(cb) & (cb > -np.inf), {"y": y[fb], "u": b[fb]},
                          "conj at the end of its domain is NaN or -inf")


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
        g = [outward * _arr(k.conj_grad(yy, _f64(bb - outward * t * ww), p))
             for t in (1e-3, 1e-6, 1e-12)]
        inc1, inc2 = g[1] - g[0], g[2] - g[1]
        ok = (inc1 > 0) & (inc2 >= 0.5 * inc1)
        ident.require(ok, {"y": yy, "u": bb}, lambda i: (
            "smooth_conjugate is True but conj_grad does not grow without bound towards this end "
            f"of the domain (conj_grad at distances 1e-3, 1e-6, 1e-12 of the width: "
            f"{outward * g[0][i]:.6g}, {outward * g[1][i]:.6g}, {outward * g[2][i]:.6g}); "
            "declare smooth_conjugate = False and give a constrained representation"))


def _loss_linear_claim(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("linear_conjugate_claim")
    if not loss.linear_conjugate:
        ident.note()
        return
    k, p, y, lo, hi = loss.jit, P.p, P.y, P.lo, P.hi
    pts = {"y": y, "lower": lo, "upper": hi}
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo <= 0.0) & (hi >= 0.0) & (lo < hi)
    ident.require(ok, pts, lambda i: (
        f"linear_conjugate is True but the domain [{lo[i]:.6g}, {hi[i]:.6g}] of the conjugate "
        "is not a bounded interval containing 0"))
    if not ok.all():
        return
    zero = _arr(k.conj(y, _f64(np.zeros(y.size)), p))
    ident.compare(zero, 0.0, atol + _ROUND, pts, "linear_conjugate: conj(y, 0) vs 0")
    for end in (lo, hi):
        at_end = _arr(k.conj(y, _f64(end), p))
        for t in (0.2, 0.5, 0.9):
            mid = _arr(k.conj(y, _f64(t * end), p))
            line = t * at_end
            ident.compare(mid, line, _tol(rtol, atol, (mid, line), (at_end, zero)),
                          {**pts, "u": t * end},
                          "linear_conjugate: conj(y, t u) vs t conj(y, u) at an end u of the domain")


def _loss_convexity(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float,
                    rng: np.random.Generator) -> None:
    ident = r.identity("convexity")
    k, p, y = loss.jit, P.p, P.y
    z2 = _f64(P.z + rng.normal(0.0, 2.0, P.z.size))
    mid = _f64(0.5 * (P.z + z2))
    fa, fb, fm = (_arr(k.value(y, a, p)) for a in (P.z, z2, mid))
    tol = _tol(rtol, atol, (0.5 * (fa + fb), fm), (fa, fb, fm))
    ident.at_least(0.5 * (fa + fb), fm, tol, {"y": y, "z": P.z, "z2": z2},
                   "midpoint convexity of value: (l(z)+l(z2))/2 >= l((z+z2)/2)")
    # deriv non-decreasing
    zs = np.sort(np.stack([P.z, z2]), axis=0)
    da, db = _arr(k.deriv(y, _f64(zs[0]), p)), _arr(k.deriv(y, _f64(zs[1]), p))
    ident.at_least(db, da, atol + rtol * np.maximum(np.abs(da), np.abs(db)),
                   {"y": y, "z": zs[0], "z2": zs[1]},
                   "deriv must be non-decreasing: deriv(z2) >= deriv(z)")
    # conjugate midpoint convexity inside the domain
    flo, fhi = np.isfinite(P.lo), np.isfinite(P.hi)
    t = rng.uniform(0.02, 0.98, y.size)
    u2 = np.where(flo & fhi, P.lo + t * (P.hi - P.lo),
                  np.where(flo, P.lo + 10 ** rng.uniform(-1.5, 1.5, y.size),
                           np.where(fhi, P.hi - 10 ** rng.uniform(-1.5, 1.5, y.size),
                                    rng.normal(0.0, 3.0, y.size))))
    u2 = _f64(u2)
    um = _f64(0.5 * (P.u + u2))
    ca, cb, cm = (_arr(k.conj(y, a, p)) for a in (P.u, u2, um))
    tol = _tol(rtol, atol, (0.5 * (ca + cb), cm), (ca, cb, cm))
    ident.at_least(0.5 * (ca + cb), cm, tol, {"y": y, "u": P.u, "u2": u2},
                   "midpoint convexity of conj: (l*(u)+l*(u2))/2 >= l*((u+u2)/2)")


def _loss_kinks(fun: Callable[[np.ndarray, np.ndarray], np.ndarray], ys: np.ndarray,
                lo: np.ndarray, hi: np.ndarray, n_grid: int = 3001) -> tuple[np.ndarray, np.ndarray]:
    """Locate jumps of ``fun(y, .)`` on ``[lo, hi]`` per label; return (y, x) at both sides."""
    out_y: list[np.ndarray] = []
    out_x: list[np.ndarray] = []
    t = np.linspace(0.0, 1.0, n_grid)
    Y = np.repeat(ys, n_grid)
    X = (lo[:, None] + (hi - lo)[:, None] * t[None, :]).reshape(-1)
    d = _arr(fun(_f64(Y), _f64(X))).reshape(ys.size, n_grid)
    Xg = X.reshape(ys.size, n_grid)
    scale = max(1.0, float(np.nanmax(np.abs(d))) if np.isfinite(d).any() else 1.0)
    big = _jumps(Xg, d, scale)
    rows, cols = np.nonzero(big)
    if rows.size == 0:
        return np.empty(0), np.empty(0)
    a, b = Xg[rows, cols], Xg[rows, cols + 1]
    fa, fb = d[rows, cols], d[rows, cols + 1]
    yk = _f64(ys[rows])
    a, b = _bisect_jumps(lambda x: fun(yk, x), a, b, fa, fb)
    out_y += [yk, yk]
    out_x += [a, b]
    return np.concatenate(out_y), np.concatenate(out_x)


def _loss_deriv(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("deriv_fd")
    k, p, y, z = loss.jit, P.p, P.y, P.z
    h = _steps(z, 1.0)
    fd = _central(lambda zz: k.value(y, zz, p), z, h)
    an = _arr(k.deriv(y, z, p))
    ok = ~fd.kink & np.isfinite(fd.d)
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"y": y, "z": z},
                  "deriv vs central difference of value", mask=ok)
    # subgradient at located kinks
    uniq = np.unique(y)[:8]
    ky, kz = _loss_kinks(lambda yy, zz: k.deriv(yy, zz, p), uniq, uniq - 30.0, uniq + 30.0)
    ys = np.concatenate([y, ky])
    zs = np.concatenate([z, kz])
    hs = _steps(zs, 1.0)
    fds = _central(lambda zz: k.value(_f64(ys), zz, p), _f64(zs), hs)
    ans = _arr(k.deriv(_f64(ys), _f64(zs), p))
    tol = atol + rtol * np.maximum(np.abs(ans), np.maximum(np.abs(fds.dplus), np.abs(fds.dminus))) \
        + 2 * _ROUND * fds.fmax / hs
    pts = {"y": ys, "z": zs}
    ident.at_least(ans, fds.dminus, tol, pts,
                   "deriv must be a subgradient: deriv >= left difference of value")
    ident.at_least(fds.dplus, ans, tol, pts,
                   "deriv must be a subgradient: deriv <= right difference of value")


def _loss_deriv2(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    ident = r.identity("deriv2_fd")
    k, p, y, z = loss.jit, P.p, P.y, P.z
    h = _steps(z, 1.0)
    fd = _central(lambda zz: k.deriv(y, zz, p), z, h)
    fv = _central(lambda zz: k.value(y, zz, p), z, h)
    an = _arr(k.deriv2(y, z, p))
    ok = ~fd.kink & ~fv.kink & np.isfinite(fd.d)
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"y": y, "z": z},
                  "deriv2 vs central difference of deriv", mask=ok)
    ident.at_least(an, np.zeros_like(an), atol, {"y": y, "z": z},
                   "deriv2 of a convex loss must be >= 0")


def _loss_lipschitz(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float,
                    rng: np.random.Generator) -> None:
    ident = r.identity("deriv_lipschitz")
    if not loss.smooth_primal:
        ident.note()
        return
    L = float(loss.deriv_lipschitz())
    if not (L > 0 and math.isfinite(L)):
        ident.fail(f"smooth_primal is True but deriv_lipschitz() = {L!r}; "
                   "a finite positive bound on |deriv2| is required")
        return
    k, p, y, z = loss.jit, P.p, P.y, P.z
    an = _arr(k.deriv2(y, z, p))
    ident.at_least(np.full_like(an, L), np.abs(an), atol + rtol * L, {"y": y, "z": z},
                   "deriv_lipschitz() >= |deriv2|")
    z2 = _f64(z + rng.normal(0.0, 1.0, z.size))
    d1, d2 = _arr(k.deriv(y, z, p)), _arr(k.deriv(y, z2, p))
    ident.at_least(L * np.abs(z2 - z), np.abs(d2 - d1),
                   _tol(rtol, atol, (L * np.abs(z2 - z), d2 - d1), (d1, d2)),
                   {"y": y, "z": z, "z2": z2}, "deriv_lipschitz() * |z2 - z| >= |deriv(z2) - deriv(z)|")


def _interior(P: _LossPoints, u: np.ndarray, h: np.ndarray, k: int = 4) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (u - k * h > P.lo) & (u + k * h < P.hi)


def _loss_conj_derivs(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y, u = loss.jit, P.p, P.y, P.u
    h = _steps(u, 1.0)
    inside = _interior(P, u, h)
    ident = r.identity("conj_grad_fd")
    fd = _central(lambda uu: k.conj(y, uu, p), u, h)
    an = _arr(k.conj_grad(y, u, p))
    ok = inside & ~fd.kink & np.isfinite(fd.d)
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"y": y, "u": u},
                  "conj_grad vs central difference of conj", mask=ok)
    # subgradient at located kinks of the conjugate (inside the domain)
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
        tol = atol + rtol * np.maximum(np.abs(ak), np.maximum(np.abs(fk.dplus), np.abs(fk.dminus))) \
            + 2 * _ROUND * fk.fmax / hk
        ident.at_least(ak, fk.dminus, tol, {"y": ky, "u": ku},
                       "conj_grad at a kink must be a subgradient: >= left difference of conj")
        ident.at_least(fk.dplus, ak, tol, {"y": ky, "u": ku},
                       "conj_grad at a kink must be a subgradient: <= right difference of conj")
    ident2 = r.identity("conj_hess_fd")
    fd2 = _central(lambda uu: k.conj_grad(y, uu, p), u, h)
    an2 = _arr(k.conj_hess(y, u, p))
    ok2 = inside & ~fd2.kink & ~fd.kink & np.isfinite(fd2.d)
    ident2.compare(an2, fd2.d, _fd_tol(an2, fd2, rtol, atol), {"y": y, "u": u},
                   "conj_hess vs central difference of conj_grad", mask=ok2)
    ident2.at_least(an2, np.zeros_like(an2), atol, {"y": y, "u": u},
                    "conj_hess of a convex conjugate must be >= 0", mask=inside)


def _loss_fenchel_young(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float,
                        rng: np.random.Generator) -> None:
    ident = r.identity("fenchel_young")
    k, p, y, z, u = loss.jit, P.p, P.y, P.z, P.u
    zr = _f64(rng.permutation(z))
    lv, cv = _arr(k.value(y, zr, p)), _arr(k.conj(y, u, p))
    uz = u * zr
    tol = _tol(rtol, atol, (lv + cv, uz), (lv, cv, uz))
    ident.at_least(lv + cv, uz, tol, {"y": y, "z": zr, "u": u},
                   "Fenchel-Young inequality l(y,z) + l*(y,u) >= u z")
    # equality at u = l'(y, z)
    lz = _arr(k.value(y, z, p))
    g = _arr(k.deriv(y, z, p))
    cg = _arr(k.conj(y, g, p))
    gz = g * z
    cond, ok = _sensitivity(lambda a: k.conj(y, a, p), g, _ulps(1.0, g))
    ident.compare(lz + cg, gz, _tol(rtol, atol, (lz + cg, gz), (lz, cg, gz), cond),
                  {"y": y, "z": z, "u": g},
                  "Fenchel-Young equality at u = deriv(y,z): l + l* vs u z", mask=ok)
    # equality at z = d l*/du (y, u)
    zg = _arr(k.conj_grad(y, u, p))
    lg = _arr(k.value(y, _f64(zg), p))
    uzg = u * zg
    # beyond the range of the supremum grid the loss may overflow: not checkable
    reach = np.abs(zg - y) <= 1e8
    cond, ok = _sensitivity(lambda a: k.value(y, a, p), zg, _ulps(1.0, zg))
    ident.compare(lg + cv, uzg, _tol(rtol, atol, (lg + cv, uzg), (lg, cv, uzg), cond),
                  {"y": y, "u": u, "z": zg},
                  "Fenchel-Young equality at z = conj_grad(y,u): l + l* vs u z", mask=reach & ok)


_LOSS_GRID = np.concatenate([-(10.0 ** np.linspace(8, -4, 121)), [0.0], 10.0 ** np.linspace(-4, 8, 121)])


def _loss_sup_one(k: LossJit, p: np.ndarray, yi: float, ui: float, hints: Sequence[float]
                  ) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_z u z - l(y, z)`` at one point.

    Returns (best, argmax, attained, err, grid offsets, grid values), with
    ``err`` the bound of :func:`_scalar_min` on how far the supremum may lie
    above ``best`` (every candidate is a lower bound up to rounding).
    """
    grid = _f64(yi + _LOSS_GRID)
    yv = np.full(grid.size, yi)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = ui * grid - _arr(k.value(yv, grid, p))

    def neg(t: float) -> float:
        return -(ui * t - float(k.value(np.array([yi]), np.array([t]), p)[0]))

    vals, cands, err = _grid_sup(grid, vals, neg)
    hint_vals = [-neg(t) if math.isfinite(t) else -math.inf for t in hints]
    cands += [(v, t) for t, v in zip(hints, hint_vals) if math.isfinite(t)]
    best, arg = _best(cands)
    ok = _attained(best, grid - yi, vals, [t - yi for t in hints], hint_vals)
    return float(best), float(arg), ok, err, _LOSS_GRID, vals


def _loss_conj_sup(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y, u = loss.jit, P.p, P.y, P.u
    ident = r.identity("conj_sup")
    # inside the domain, plus the finite ends of the domain
    uu = [u]
    yy = [y]
    for b in (P.lo, P.hi):
        fb = np.isfinite(b)
        uu.append(b[fb])
        yy.append(y[fb])
    ys, us = np.concatenate(yy), np.concatenate(uu)
    cv = _arr(k.conj(_f64(ys), _f64(us), p))
    hint = _arr(k.conj_grad(_f64(ys), _f64(us), p))
    sup = np.empty(ys.size)
    terms = np.empty(ys.size)
    err = np.empty(ys.size)
    attained = np.empty(ys.size, dtype=bool)
    for i in range(ys.size):
        best, arg, attained[i], err[i], _, _ = _loss_sup_one(k, p, float(ys[i]), float(us[i]),
                                                             [float(hint[i])])
        sup[i] = best
        lv = float(k.value(np.array([ys[i]]), np.array([arg]), p)[0])
        terms[i] = abs(us[i] * arg) + _fin(lv)
    # rtol applies to the values compared only: where the supremum is flat (a
    # piecewise-linear loss at an end of its domain) the maximiser may lie at
    # |z| ~ 1e8 while l* is of order 1, and |u z|, |l| there enter only
    # through the rounding of u z - l (_ROUND each) and the solver's bound
    tol = _tol(rtol, atol, (cv, sup), (terms,), err)
    pts = {"y": ys, "u": us}
    ident.compare(cv, sup, tol, pts, "conj vs numerical sup_z (u z - l(y,z))", mask=attained)
    ident.at_least(cv, sup, tol, pts, "conj must be >= u z - l(y,z) for every z (supremum not "
                   "attained on |z - y| <= 1e8, checked from below)", mask=~attained)
    # outside the domain the supremum is unbounded
    ident2 = r.identity("conj_unbounded")
    m = P.out_mask
    if not m.any():
        ident2.note()
        return
    yo, uo = y[m], P.u_out[m]
    co = _arr(k.conj(_f64(yo), _f64(uo), p))
    s1 = np.empty(yo.size)
    s2 = np.empty(yo.size)
    for i in range(yo.size):
        _, _, _, _, offs, vals = _loss_sup_one(k, p, float(yo[i]), float(uo[i]), [])
        s1[i] = np.max(np.where(np.abs(offs) <= 1e3, vals, -np.inf))
        s2[i] = np.max(np.where(np.abs(offs) <= 1e6, vals, -np.inf))
    grows = s2 >= 10.0 * np.maximum(s1, 1.0)
    ident2.require(grows, {"y": yo, "u": uo}, lambda i: (
        f"outside [conj_lower, conj_upper] the supremum of u z - l(y,z) should be unbounded, "
        f"but it is {s1[i]:.6g} over |z - y| <= 1e3 and {s2[i]:.6g} over |z - y| <= 1e6: "
        "the declared domain is too small"))
    ident2.require(np.isposinf(co), {"y": yo, "u": uo},
                   lambda i: f"conj outside the domain is {co[i]!r}, expected +inf")


# -- constrained representation ---------------------------------------------
def _cons_call(cc: ConstrainedConjugate, name: str, y, u, ut, p) -> np.ndarray:
    return _arr(getattr(cc, name)(_f64(y), _f64(u), _f64(ut), p))


def _loss_constrained(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float,
                      rng: np.random.Generator) -> None:
    cc: ConstrainedConjugate = loss.constrained
    p, y = P.p, P.y
    n = y.size
    Ba, B = int(loss.n_aux), int(loss.n_cons)
    W = 1 + Ba
    ident = r.identity("constrained_shapes")
    ut0 = np.zeros((n, Ba))
    shapes = {"l0": (n,), "l0_grad": (n, W), "l0_hess": (n, W, W), "cons": (n, B),
              "cons_grad": (n, B, W), "cons_hess": (n, B, W, W)}
    outs = {}
    for name, shp in shapes.items():
        out = getattr(cc, name)(y, P.u, _f64(ut0), p)
        outs[name] = _check_output(ident, f"{name}(y, u, ut)", out, shp, {"y": y, "u": P.u})
    if any(v is None for v in outs.values()):
        return
    r.run(["constrained_value", "constrained_feasibility"], _constrained_value,
          r, loss, P, rtol, atol)
    r.run(["l0_grad_fd", "l0_hess_fd", "cons_grad_fd", "cons_hess_fd", "constrained_convexity"],
          _constrained_derivs, r, loss, P, rtol, atol, rng)


def _affine(cc: ConstrainedConjugate, y, u, ut, p) -> bool:
    return (np.all(_cons_call(cc, "l0_hess", y, u, ut, p) == 0.0)
            and np.all(_cons_call(cc, "cons_hess", y, u, ut, p) == 0.0))


def _solve_constrained(cc: ConstrainedConjugate, p: np.ndarray, yi: float, ui: float,
                       Ba: int, affine: bool) -> tuple[str, float, float]:
    """``min_ut l0 s.t. cons <= 0`` at one point: (status, value, max violation)."""
    y1, u1 = np.array([yi]), np.array([ui])

    def l0(t):
        return float(_cons_call(cc, "l0", y1, u1, np.reshape(t, (1, Ba)), p)[0])

    def l0g(t):
        return _cons_call(cc, "l0_grad", y1, u1, np.reshape(t, (1, Ba)), p)[0, 1:]

    def cons(t):
        return _cons_call(cc, "cons", y1, u1, np.reshape(t, (1, Ba)), p)[0]

    def consg(t):
        return _cons_call(cc, "cons_grad", y1, u1, np.reshape(t, (1, Ba)), p)[0, :, 1:]

    t0 = np.zeros(Ba)
    if Ba == 0:
        c = cons(t0)
        return ("ok" if np.max(c) <= 0 else "infeasible"), l0(t0), float(np.max(c))
    if affine:
        res = optimize.linprog(l0g(t0), A_ub=consg(t0), b_ub=-cons(t0),
                               bounds=[(None, None)] * Ba, method="highs")
        if res.status == 2:
            return "infeasible", math.inf, math.inf
        if res.status == 3:
            return "unbounded", -math.inf, 0.0
        if res.status != 0:
            return f"linprog status {res.status}: {res.message}", math.nan, math.nan
        t = np.asarray(res.x)
        return "ok", l0(t), float(max(np.max(cons(t)), 0.0))
    # phase 1: min s subject to cons_j <= s
    c0 = cons(t0)
    z0 = np.concatenate([t0, [float(np.max(c0)) + 1.0]])
    ph1 = optimize.minimize(
        lambda w: w[-1], z0, jac=lambda w: np.concatenate([np.zeros(Ba), [1.0]]),
        constraints=[{"type": "ineq", "fun": lambda w: w[-1] - cons(w[:-1]),
                      "jac": lambda w: np.hstack([-consg(w[:-1]), np.ones((c0.size, 1))])}],
        method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    s = float(ph1.x[-1])
    if s > 1e-9:
        return "infeasible", math.inf, s
    res = optimize.minimize(
        l0, ph1.x[:-1], jac=l0g,
        constraints=[{"type": "ineq", "fun": lambda t: -cons(t), "jac": lambda t: -consg(t)}],
        method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000})
    t = np.asarray(res.x)
    return "ok", l0(t), float(max(np.max(cons(t)), 0.0))


def _constrained_value(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    cc: ConstrainedConjugate = loss.constrained
    k, p, y = loss.jit, P.p, P.y
    Ba = int(loss.n_aux)
    ident = r.identity("constrained_value")
    feas = r.identity("constrained_feasibility")
    ys, us = [y], [P.u]
    for b in (P.lo, P.hi):
        fb = np.isfinite(b)
        ys.append(y[fb])
        us.append(b[fb])
    ys_in, us_in = np.concatenate(ys), np.concatenate(us)
    affine = _affine(cc, ys_in, us_in, np.zeros((ys_in.size, Ba)), p)
    cv = _arr(k.conj(_f64(ys_in), _f64(us_in), p))
    vals = np.empty(ys_in.size)
    viol = np.empty(ys_in.size)
    status: list[str] = []
    for i in range(ys_in.size):
        st, v, vio = _solve_constrained(cc, p, float(ys_in[i]), float(us_in[i]), Ba, affine)
        status.append(st)
        vals[i], viol[i] = v, vio
    okst = np.array([s == "ok" for s in status])
    # the constraints are affine in u for every loss of the paper: their
    # values (and the violation a solver leaves) are of the order of max(|u|, 1)
    ctol = atol + rtol * np.maximum(np.abs(us_in), 1.0)
    feas.require(okst & (viol <= ctol), {"y": ys_in, "u": us_in}, lambda i: (
        f"the constraints cons(y, (u, ut)) <= 0 must be satisfiable for u in the domain "
        f"[conj_lower, conj_upper]; the solver reports {status[i]!r} (violation {viol[i]:.3e})"))
    # rtol applies to the values compared; a solver (HiGHS for affine pieces,
    # SLSQP otherwise) is credited with a relative accuracy of the size of its
    # data, the terms of l0 (of order |u| |y|, |u| |ut|, bounded by these)
    data = _mag(cv, vals, us_in)
    solver = 0.0 if Ba == 0 else _SOLVER_RTOL + (0.0 if affine else 1e-6)
    tol = _tol(rtol, atol, (vals, cv), extra=solver * data)
    ident.compare(vals, cv, tol, {"y": ys_in, "u": us_in},
                  "min over ut of l0(y,(u,ut)) s.t. cons <= 0 vs conj(y,u)", mask=okst)
    # infeasible outside the domain, just outside and far outside
    m = P.out_mask
    if m.any():
        yo = y[m]
        uo = P.u_out[m]
        width = np.where(np.isfinite(P.hi - P.lo), P.hi - P.lo, 1.0)[m]
        near = np.where(uo > P.hi[m], P.hi[m] + 1e-3 * width, P.lo[m] - 1e-3 * width)
        yo2, uo2 = np.concatenate([yo, yo]), np.concatenate([uo, near])
        st_out = [_solve_constrained(cc, p, float(yo2[i]), float(uo2[i]), Ba, affine)[0]
                  for i in range(yo2.size)]
        feas.require(np.array([s == "infeasible" for s in st_out]), {"y": yo2, "u": uo2},
                     lambda i: (f"cons(y, (u, ut)) <= 0 is satisfiable at u outside the domain "
                                f"[conj_lower, conj_upper] (solver: {st_out[i]!r})"))


def _constrained_derivs(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float,
                        rng: np.random.Generator) -> None:
    cc: ConstrainedConjugate = loss.constrained
    p, y = P.p, P.y
    n = y.size
    Ba = int(loss.n_aux)
    W = 1 + Ba
    w = np.empty((n, W))
    w[:, 0] = np.where(P.out_mask & (rng.random(n) < 0.25), P.u_out, P.u)
    w[:, 1:] = rng.normal(0.0, 1.0, (n, Ba)) * 10.0 ** rng.uniform(-1.0, 1.0, (n, Ba))

    def call(name: str, ww: np.ndarray) -> np.ndarray:
        return _cons_call(cc, name, y, ww[:, 0], ww[:, 1:], p)

    pts = {"y": y, "u": w[:, 0]}
    for j in range(1, W):
        pts[f"ut{j - 1}"] = w[:, j]
    for fname, gname, ident_name in (("l0", "l0_grad", "l0_grad_fd"),
                                     ("l0_grad", "l0_hess", "l0_hess_fd"),
                                     ("cons", "cons_grad", "cons_grad_fd"),
                                     ("cons_grad", "cons_hess", "cons_hess_fd")):
        ident = r.identity(ident_name)
        an_all = call(gname, w)
        for c in range(W):
            h = _steps(w[:, c], 1.0)

            def fc(t: np.ndarray, c: int = c) -> np.ndarray:
                ww = w.copy()
                ww[:, c] = t
                return call(fname, ww)

            fd = _central(fc, w[:, c], h)
            an = an_all[..., c]
            ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), pts,
                          f"{gname}[..., {c}] vs central difference of {fname} in w[{c}]")
    ident = r.identity("constrained_convexity")
    for name in ("l0_hess", "cons_hess"):
        H = call(name, w)
        Hs = H.reshape(-1, W, W)
        asym = np.max(np.abs(Hs - np.swapaxes(Hs, -1, -2)), axis=(-1, -2)).reshape(H.shape[:-2])
        mag = np.max(np.abs(Hs), axis=(-1, -2)).reshape(H.shape[:-2])
        ident.compare(asym, np.zeros_like(asym), atol + rtol * mag, pts,
                      f"{name} must be symmetric (largest |H - H^T|)")
        eig = np.linalg.eigvalsh(0.5 * (Hs + np.swapaxes(Hs, -1, -2))).min(axis=-1).reshape(H.shape[:-2])
        ident.at_least(eig, np.zeros_like(eig), atol + rtol * mag, pts,
                       f"{name} must be positive semi-definite (smallest eigenvalue)")


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
            ident.fail(f"validate_labels raised {type(exc).__name__} for {what}, "
                       f"expected LabelError: {exc}")
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


def check_loss(loss: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6,
               atol: float = 1e-8) -> ConformanceReport:
    """Check a loss against the :class:`~mklkit.components.base.Loss` contract.

    Parameters
    ----------
    loss : Loss
        The instance to check.
    n_points : int
        Number of random points per identity (at least 8).
    seed : int
        Seed of the :func:`numpy.random.default_rng` drawing the points.
    rtol, atol : float
        Relative and absolute tolerances (see :mod:`mklkit.testing.components` for how
        finite-difference and solver errors are added).

    Returns
    -------
    ConformanceReport
    """
    rng, r = _begin(loss, "loss", seed)
    try:
        P = _LossPoints(loss, rng, n_points)
    except Exception as exc:
        r.identity("kernel_shapes").fail(
            f"could not draw points (conj_lower/conj_upper raised {type(exc).__name__}: {exc})")
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


