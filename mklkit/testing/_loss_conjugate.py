"""The conjugate checks of a loss: Fenchel-Young, and ``conj`` against a numerical supremum."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..components.base import LossJit
from ._common import _arr, _attained, _best, _f64, _fin, _grid_sup, _sensitivity, _tol, _ulps
from ._loss_points import _LossPoints
from ._report import _Runner


def _loss_fenchel_young(
    r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator
) -> None:
    ident = r.identity("fenchel_young")
    k, p, y, z, u = loss.jit, P.p, P.y, P.z, P.u
    zr = _f64(rng.permutation(z))
    lv, cv = _arr(k.value(y, zr, p)), _arr(k.conj(y, u, p))
    uz = u * zr
    tol = _tol(rtol, atol, (lv + cv, uz), (lv, cv, uz))
    ident.at_least(lv + cv, uz, tol, {"y": y, "z": zr, "u": u}, "Fenchel-Young inequality l(y,z) + l*(y,u) >= u z")
    lz = _arr(k.value(y, z, p))
    g = _arr(k.deriv(y, z, p))
    cg = _arr(k.conj(y, g, p))
    gz = g * z
    cond, ok = _sensitivity(lambda a: k.conj(y, a, p), g, _ulps(1.0, g))
    ident.compare(
        lz + cg,
        gz,
        _tol(rtol, atol, (lz + cg, gz), (lz, cg, gz), cond),
        {"y": y, "z": z, "u": g},
        "Fenchel-Young equality at u = deriv(y,z): l + l* vs u z",
        mask=ok,
    )
    zg = _arr(k.conj_grad(y, u, p))
    lg = _arr(k.value(y, _f64(zg), p))
    uzg = u * zg
    # beyond the supremum's grid the loss may overflow
    reach = np.abs(zg - y) <= 1e8
    cond, ok = _sensitivity(lambda a: k.value(y, a, p), zg, _ulps(1.0, zg))
    ident.compare(
        lg + cv,
        uzg,
        _tol(rtol, atol, (lg + cv, uzg), (lg, cv, uzg), cond),
        {"y": y, "u": u, "z": zg},
        "Fenchel-Young equality at z = conj_grad(y,u): l + l* vs u z",
        mask=reach & ok,
    )


_LOSS_GRID = np.concatenate([-(10.0 ** np.linspace(8, -4, 121)), [0.0], 10.0 ** np.linspace(-4, 8, 121)])


def _loss_sup_one(
    k: LossJit, p: np.ndarray, yi: float, ui: float, hints: Sequence[float]
) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_z u z - l(y, z)``: (best, argmax, attained, err, grid offsets, grid values), ``err``
    bounding how far the supremum may lie above ``best``."""
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
    k, p, y = loss.jit, P.p, P.y
    ident = r.identity("conj_sup")
    ys, us = P.with_ends()
    cv = _arr(k.conj(_f64(ys), _f64(us), p))
    hint = _arr(k.conj_grad(_f64(ys), _f64(us), p))
    sup = np.empty(ys.size)
    terms = np.empty(ys.size)
    err = np.empty(ys.size)
    attained = np.empty(ys.size, dtype=bool)
    for i in range(ys.size):
        best, arg, attained[i], err[i], _, _ = _loss_sup_one(k, p, float(ys[i]), float(us[i]), [float(hint[i])])
        sup[i] = best
        lv = float(k.value(np.array([ys[i]]), np.array([arg]), p)[0])
        terms[i] = abs(us[i] * arg) + _fin(lv)
    # rtol of the values compared only: a flat supremum may lie at |z| ~ 1e8 where l* ~ 1
    tol = _tol(rtol, atol, (cv, sup), (terms,), err)
    pts = {"y": ys, "u": us}
    ident.compare(cv, sup, tol, pts, "conj vs numerical sup_z (u z - l(y,z))", mask=attained)
    ident.at_least(
        cv,
        sup,
        tol,
        pts,
        "conj must be >= u z - l(y,z) for every z (supremum not attained on |z - y| <= 1e8, checked from below)",
        mask=~attained,
    )
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
    ident2.require(
        grows,
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
