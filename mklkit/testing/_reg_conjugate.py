"""The conjugate checks of a regularizer: derivatives, numerical supremum, Fenchel-Young."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..components.base import RegularizerJit
from ._common import _arr, _attained, _best, _f64, _compare_fd, _fin, _grid_sup, _sensitivity, _steps, _tol, _ulps
from ._reg_points import _RegPoints, _RegView, _by_C, _central_by_C
from ._report import _Runner


def _reg_conj(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k = reg.jit
    y = P.y_in
    h = _steps(y, P.C)
    inside = (y - 4 * h > 0) & (y + 4 * h < P.radius)
    ident = r.identity("conj_grad_fd")
    fd = _central_by_C(P, k.conj, y, h)
    an = _by_C(P, k.conj_grad, y)
    _compare_fd(ident, an, fd, rtol, atol, {"y": y, "C": P.C}, "conj_grad vs central difference of conj", inside)
    ident.at_least(an, np.zeros_like(an), atol, {"y": y, "C": P.C}, "conj_grad >= 0", mask=inside)
    ident2 = r.identity("conj_hess_fd")
    fd2 = _central_by_C(P, k.conj_grad, y, h)
    an2 = _by_C(P, k.conj_hess, y)
    what = "conj_hess vs central difference of conj_grad"
    _compare_fd(ident2, an2, fd2, rtol, atol, {"y": y, "C": P.C}, what, inside & ~fd.kink)
    ident2.at_least(an2, np.zeros_like(an2), atol, {"y": y, "C": P.C}, "conj_hess >= 0", mask=inside)


_REG_GRID = np.concatenate([[0.0], 10.0 ** np.linspace(-8, 8, 161)])


def _reg_sup_one(
    k: RegularizerJit, p: np.ndarray, c: float, yi: float, s: float, hints: Sequence[float]
) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_{x >= 0} x y - value(x)``: (best, argmax, attained, err, grid, grid values)."""
    grid = _f64(s * _REG_GRID)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = yi * grid - _arr(k.value(grid, c, p))

    def neg(t: float) -> float:
        return -(yi * t - float(k.value(_f64([t]), c, p)[0]))

    vals, cands, err = _grid_sup(grid, vals, neg)
    hints = [t for t in hints if math.isfinite(t) and t >= 0]
    hint_vals = [-neg(t) for t in hints]
    cands += list(zip(hint_vals, hints))
    best, arg = _best(cands)
    # x >= 0: only the upper end of the grid can leave the supremum open
    ok = _attained(best, grid, np.concatenate([[-np.inf, -np.inf], vals]), hints, hint_vals)
    return float(best), float(arg), ok, err, grid, vals


def _reg_conj_sup(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    ident = r.identity("conj_sup")
    m = P.out_mask
    ys = np.concatenate([P.y_in, [0.0] * len(P.Cs), P.radius[m]])
    Cs = np.concatenate([P.C, P.Cs, P.C[m]])
    V = _RegView(P, Cs)
    cv = _by_C(V, k.conj, ys)
    hint = _by_C(V, k.conj_grad, ys)
    sup = np.empty(ys.size)
    terms = np.empty(ys.size)
    err = np.empty(ys.size)
    attained = np.empty(ys.size, dtype=bool)
    for i in range(ys.size):
        c = float(Cs[i])
        s = max(1.0, c, float(ys[i]))
        best, arg, attained[i], err[i], _, _ = _reg_sup_one(k, p, c, float(ys[i]), s, [float(hint[i]), 0.0])
        sup[i] = best
        terms[i] = abs(ys[i] * arg) + _fin(k.value(_f64([arg]), c, p)[0])
    tol = _tol(rtol, atol, (cv, sup), (terms,), err)
    pts = {"y": ys, "C": Cs}
    ident.compare(cv, sup, tol, pts, "conj vs numerical sup_{x>=0} (x y - value(x))", mask=attained)
    ident.at_least(
        cv,
        sup,
        tol,
        pts,
        "conj must be >= x y - value(x) for every x >= 0 (supremum "
        "not attained on x <= 1e8 max(1, C, y), checked from below)",
        mask=~attained,
    )
    ident2 = r.identity("conj_unbounded")
    if not m.any():
        ident2.note()
        return
    yo, Co = P.y_out[m], P.C[m]
    s1 = np.empty(yo.size)
    s2 = np.empty(yo.size)
    for i in range(yo.size):
        c = float(Co[i])
        s = max(1.0, c, float(yo[i]))
        _, _, _, _, grid, vals = _reg_sup_one(k, p, c, float(yo[i]), s, [])
        s1[i] = np.max(np.where(grid <= 1e3 * s, vals, -np.inf))
        s2[i] = np.max(np.where(grid <= 1e6 * s, vals, -np.inf))
    ident2.require(
        s2 >= 10.0 * np.maximum(s1, 1.0),
        {"y": yo, "C": Co},
        lambda i: (
            f"beyond conj_radius(C) the supremum of x y - value(x) should be unbounded, but it is "
            f"{s1[i]:.6g} over x <= 1e3 and {s2[i]:.6g} over x <= 1e6 (scaled): conj_radius is too small"
        ),
    )


def _reg_fenchel_young(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float, rng: np.random.Generator) -> None:
    ident = r.identity("fenchel_young")
    k = reg.jit
    x = rng.permutation(P.x)
    y = P.y_in
    gv = _by_C(P, k.value, x)
    cv = _by_C(P, k.conj, y)
    tol = _tol(rtol, atol, (gv + cv, x * y), (gv, cv, x * y))
    ident.at_least(
        gv + cv, x * y, tol, {"x": x, "y": y, "C": P.C}, "Fenchel-Young inequality value(x) + conj(y) >= x y"
    )
    pr = _by_C(P, k.prox, P.v)
    pr = np.maximum(pr, 0.0)
    ys = P.v - pr
    near = np.isfinite(P.radius) & (ys > P.radius) & (ys <= P.radius * (1 + 1e-12))
    ys = np.where(near, P.radius, np.maximum(ys, 0.0))
    gp = _by_C(P, k.value, pr)
    cy = _by_C(P, k.conj, ys)
    du = _ulps(P.v, pr, ys)
    cond_c, ok_c = _sensitivity(lambda a: _by_C(P, k.conj, a), ys, du)
    cond_g, ok_g = _sensitivity(lambda a: _by_C(P, k.value, a), pr, du)
    ident.compare(
        gp + cy,
        pr * ys,
        _tol(rtol, atol, (gp + cy, pr * ys), (gp, cy, pr * ys), cond_c + cond_g),
        {"v": P.v, "x": pr, "y": ys, "C": P.C},
        "Fenchel-Young equality at x = prox(v), y = v - x",
        mask=ok_c & ok_g,
    )
    xg = _by_C(P, k.conj_grad, y)
    gx = _by_C(P, k.value, np.maximum(xg, 0.0))
    # beyond the supremum's grid value may overflow
    reach = np.abs(xg) <= 1e8 * np.maximum(np.maximum(1.0, P.C), y)
    xs = np.where(reach, np.maximum(xg, 0.0), 0.0)
    cond, ok = _sensitivity(lambda a: _by_C(P, k.value, a), xs, _ulps(xs))
    ident.compare(
        gx + cv,
        xg * y,
        _tol(rtol, atol, (gx + cv, xg * y), (gx, cv, xg * y), cond),
        {"y": y, "x": xg, "C": P.C},
        "Fenchel-Young equality at x = conj_grad(y)",
        mask=reach & ok,
    )
