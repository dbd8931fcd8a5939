"""The numerical checks of a loss: derivatives against central differences (subgradients at kinks),
``deriv_lipschitz``, Fenchel-Young and the conjugate against a numerical supremum."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..components.base import LossJit
from ._common import (
    _sup_checks,
    _sup_within,
    _sum_identity,
    _FD,
    _ROUND,
    _arr,
    _attained,
    _best,
    _bisect_jumps,
    _central,
    _compare_fd,
    _f64,
    _fin,
    _grid_sup,
    _interior,
    _jumps,
    _LossPoints,
    _sensitivity,
    _steps,
    _tol,
    _ulps,
)
from ._report import _Runner


def _loss_kinks(
    fun: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ys: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    n_grid: int = 3001,
) -> tuple[np.ndarray, np.ndarray]:
    """Jumps of ``fun(y, .)`` on ``[lo, hi]`` per label: (y, x) at both sides of each."""
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
    h = _steps(z, 1.0)
    fd = _central(lambda zz: k.value(y, zz, p), z, h)
    an = _arr(k.deriv(y, z, p))
    _compare_fd(ident, an, fd, rtol, atol, {"y": y, "z": z}, "deriv vs central difference of value")
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
    fd = _central(lambda zz: k.deriv(y, zz, p), z, h)
    fv = _central(lambda zz: k.value(y, zz, p), z, h)
    an = _arr(k.deriv2(y, z, p))
    _compare_fd(ident, an, fd, rtol, atol, {"y": y, "z": z}, "deriv2 vs central difference of deriv", ~fv.kink)
    ident.at_least(an, np.zeros_like(an), atol, {"y": y, "z": z}, "deriv2 of a convex loss must be >= 0")


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
    ident.at_least(np.full_like(an, L), np.abs(an), atol + rtol * L, {"y": y, "z": z}, "deriv_lipschitz() >= |deriv2|")
    z2 = _f64(z + rng.normal(0.0, 1.0, z.size))
    d1, d2 = _arr(k.deriv(y, z, p)), _arr(k.deriv(y, z2, p))
    ident.at_least(
        L * np.abs(z2 - z),
        np.abs(d2 - d1),
        _tol(rtol, atol, (L * np.abs(z2 - z), d2 - d1), (d1, d2)),
        {"y": y, "z": z, "z2": z2},
        "deriv_lipschitz() * |z2 - z| >= |deriv(z2) - deriv(z)|",
    )


def _loss_conj_derivs(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y, u = loss.jit, P.p, P.y, P.u
    h = _steps(u, 1.0)
    inside = _interior(P, u, h)
    ident = r.identity("conj_grad_fd")
    fd = _central(lambda uu: k.conj(y, uu, p), u, h)
    an = _arr(k.conj_grad(y, u, p))
    _compare_fd(ident, an, fd, rtol, atol, {"y": y, "u": u}, "conj_grad vs central difference of conj", inside)
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
    fd2 = _central(lambda uu: k.conj_grad(y, uu, p), u, h)
    an2 = _arr(k.conj_hess(y, u, p))
    what = "conj_hess vs central difference of conj_grad"
    _compare_fd(ident2, an2, fd2, rtol, atol, {"y": y, "u": u}, what, inside & ~fd.kink)
    ident2.at_least(
        an2, np.zeros_like(an2), atol, {"y": y, "u": u}, "conj_hess of a convex conjugate must be >= 0", mask=inside
    )


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


def _loss_sup_one(
    k: LossJit, p: np.ndarray, yi: float, ui: float, hints: Sequence[float]
) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_z u z - l(y, z)``: (best, the size of its terms, attained, err, grid offsets, grid
    values), ``err`` bounding how far the supremum may lie above ``best``."""
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
    arg = float(arg)
    terms = abs(ui * arg) + _fin(float(k.value(np.array([yi]), np.array([arg]), p)[0]))
    return float(best), terms, ok, err, _LOSS_GRID, vals


def _loss_conj_sup(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y = loss.jit, P.p, P.y
    ident = r.identity("conj_sup")
    ys, us = P.with_ends()
    cv = _arr(k.conj(_f64(ys), _f64(us), p))
    hint = _arr(k.conj_grad(_f64(ys), _f64(us), p))
    found = [_loss_sup_one(k, p, float(yi), float(ui), [float(h)])[:4] for yi, ui, h in zip(ys, us, hint)]
    below = "conj must be >= u z - l(y,z) for every z (supremum not attained on |z - y| <= 1e8, checked from below)"
    _sup_checks(ident, cv, found, {"y": ys, "u": us}, rtol, atol, "conj vs numerical sup_z (u z - l(y,z))", below)
    ident2 = r.identity("conj_unbounded")
    m = P.out_mask
    if not m.any():
        ident2.note()
        return
    yo, uo = y[m], P.u_out[m]
    co = _arr(k.conj(_f64(yo), _f64(uo), p))
    s1, s2 = np.array(
        [_sup_within(*_loss_sup_one(k, p, float(yi), float(ui), [])[4:], 1.0) for yi, ui in zip(yo, uo)]
    ).T
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
