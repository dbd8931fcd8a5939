"""The numerical checks of a regularizer: the sparsity claim, ``prox``, the Moreau envelope, and the
conjugate (derivatives, numerical supremum, Fenchel-Young)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..components.base import RegularizerJit
from ._common import (
    _EPS,
    _ROUND,
    _arr,
    _compare_fd,
    _f64,
    _fin,
    _RegPoints,
    _scalar_min,
    _sensitivity,
    _steps,
    _sum_identity,
    _sup_checks,
    _sup_one,
    _sup_within,
    _tol,
    _ulps,
)
from ._report import _Runner


def _reg_sparse(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    r"""``sparse`` and ``zero_threshold`` against :math:`a = \tilde g_C'(0^+) \approx 2D(h) - D(2h)`,
    :math:`h = 10^{-12}C` (Richardson): sparse needs :math:`a` above its noise and ``prox`` = 0 below
    :math:`0.45a`; non-sparse, difference quotients shrinking by 10 % from step :math:`10^{-3}C`."""
    ident = r.identity("sparse_claim")
    zt = r.identity("zero_threshold")
    k, p = reg.jit, P.p
    for c, _ in P.groups():
        v0 = float(k.value(_f64([0.0]), c, p)[0])

        def val(h: float) -> float:
            return float(k.value(_f64([h]), c, p)[0])

        h = 1e-12 * c
        vh, v2h = val(h), val(2 * h)
        a = 2 * (vh - v0) / h - (v2h - v0) / (2 * h)
        noise = 100 * 8 * _EPS * (abs(v0) + abs(vh) + abs(v2h)) / h
        pt = {"x": 0.0, "C": c}
        if reg.sparse:
            if not a > noise:
                ident.fail(
                    f"sparse is True but the right derivative of value at 0 is about "
                    f"{a:.3e} (rounding noise {noise:.1e}, C = {c:g}): blocks cannot be "
                    "exactly zero",
                    pt,
                )
                continue
            vs = _f64(a * np.array([0.01, 0.1, 0.45]))
            pr = _arr(k.prox(vs, c, p))
            ident.require(
                pr == 0.0,
                {"v": vs, "C": np.full(vs.size, c)},
                lambda i: (
                    f"sparse is True but prox(v) = {pr[i]:.6g} != 0 below the right derivative of value at 0 ({a:.6g})"
                ),
            )
            t = float(reg.zero_threshold(c))
            tol_t = rtol * abs(a) + noise
            if abs(t - a) <= tol_t:
                zt.note()
            else:
                zt.fail(
                    f"zero_threshold(C) = {t:.10g} but the right derivative of value at 0 "
                    f"is {a:.10g} (tolerance {tol_t:.1e}, C = {c:g})",
                    pt,
                )
        else:
            t = float(reg.zero_threshold(c))
            if t == 0.0:
                zt.note()
            else:
                zt.fail(f"sparse is False but zero_threshold(C) = {t:.6g} != 0 (C = {c:g})", pt)
            s_far = (val(1e-3 * c) - v0) / (1e-3 * c)
            s_near = (vh - v0) / h
            if (s_near <= 0.9 * s_far) or (abs(s_near) <= atol):
                ident.note()
            else:
                ident.fail(
                    f"sparse is False but value has a positive right derivative at 0: "
                    f"difference quotients {s_far:.6g} (step 1e-3 C) and {s_near:.6g} "
                    f"(step 1e-12 C) do not tend to 0 (C = {c:g})",
                    pt,
                )


def _reg_prox(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    v = np.concatenate([[0.0], P.v])
    C = np.concatenate([[P.Cs[0]], P.C])
    Pv = P.view(C)
    pr = Pv.by_C(k.prox, v)
    pts = {"v": v, "C": C}
    ident = r.identity("prox_optimality")
    tolb = atol + rtol * v
    ident.at_least(pr, 0.0, tolb, pts, "prox(v) >= 0")
    ident.at_least(v, pr, tolb, pts, "prox(v) <= v (value is non-decreasing)")
    pc = np.maximum(pr, 0.0)
    H = 1e-6 * np.maximum(pc, C)
    Hl = np.minimum(H, pc)
    f0 = Pv.by_C(k.value, pc)
    fp = Pv.by_C(k.value, pc + H)
    fm = Pv.by_C(k.value, pc - Hl)
    with np.errstate(invalid="ignore", divide="ignore"):
        dplus = (fp - f0) / ((pc + H) - pc)
        dminus = np.where(Hl > 0, (f0 - fm) / np.where(Hl > 0, pc - (pc - Hl), 1.0), -np.inf)
    fmax = np.maximum(np.abs(f0), np.maximum(np.abs(fp), np.abs(fm)))
    resid = v - pr
    tol = atol + rtol * np.maximum(v, np.abs(dplus)) + 2 * _ROUND * fmax / np.maximum(Hl, H * (Hl == 0))
    ident.at_least(dplus, resid, tol, pts, "optimality of prox: v - prox(v) <= right derivative of value at prox(v)")
    ident.at_least(
        resid, dminus, tol, pts, "optimality of prox: v - prox(v) >= left derivative of value at prox(v)", mask=Hl > 0
    )
    ident2 = r.identity("prox_numeric")
    pnum, dx, fobj = np.zeros(v.size), np.zeros(v.size), np.zeros(v.size)
    for i in range(v.size):
        c, vi = float(C[i]), float(v[i])
        if vi == 0.0:  # prox(0) = 0
            continue

        def obj(t: float, c: float = c, vi: float = vi) -> float:
            return float(k.value(_f64([t]), c, p)[0]) + 0.5 * (t - vi) ** 2

        grid = np.linspace(0.0, vi, 65)
        gv = _arr(k.value(_f64(grid), c, p)) + 0.5 * (grid - vi) ** 2
        j = int(np.argmin(gv))
        a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
        xb, fb, _, dx[i] = _scalar_min(obj, a, b)
        pnum[i] = xb if fb <= gv[j] else grid[j]
        fobj[i] = _fin(k.value(_f64([pnum[i]]), c, p)[0]) + 0.5 * (pnum[i] - vi) ** 2
    # the minimiser of a 1-strongly convex objective is known to dx and 2 sqrt(its rounding)
    tolx = _tol(rtol, atol, (pr, pnum), extra=dx + 2.0 * np.sqrt(_ROUND * fobj))
    ident2.compare(pr, pnum, tolx, pts, "prox(v) vs scipy minimize_scalar of value(x) + (x - v)^2/2 over [0, v]")
    ident3 = r.identity("prox_deriv_fd")
    vv = P.v
    h = _steps(vv, P.C)
    an, _ = _compare_fd(ident3, P.at, ("prox", "prox_deriv"), vv, h, rtol, atol, {"v": vv, "C": P.C}, vv - 4 * h > 0)
    ident3.at_least(an, 0.0, atol, {"v": vv, "C": P.C}, "prox_deriv >= 0")
    ident3.at_least(1.0, an, atol + rtol, {"v": vv, "C": P.C}, "prox_deriv <= 1")


def _env_min_one(k: Any, p: np.ndarray, c: float, yi: float, b: float, pr: float) -> tuple[float, float, float]:
    """``min_{0 <= t <= b} conj(t) + (t - y)^2/2`` over a grid, Brent and the hint ``y - prox(y)``:
    the minimum, the size of its terms and the error bound of :func:`_scalar_min`."""

    def obj(t: float) -> float:
        return float(k.conj(_f64([t]), c, p)[0]) + 0.5 * (t - yi) ** 2

    cands = [(obj(0.0), 0.0), (obj(b), b)]
    err = 0.0
    if b > 0:
        grid = np.linspace(0.0, b, 65)
        gv = _arr(k.conj(_f64(grid), c, p)) + 0.5 * (grid - yi) ** 2
        gv = np.where(np.isnan(gv), np.inf, gv)
        j = int(np.argmin(gv))
        cands.append((float(gv[j]), float(grid[j])))
        tb, fb, err, _ = _scalar_min(obj, grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)])
        cands.append((fb, tb))
    hint = yi - float(pr)
    if math.isfinite(hint) and 0.0 <= hint <= b:
        cands.append((obj(hint), hint))
    finite = [q for q in cands if math.isfinite(q[0])]
    num, arg = min(finite) if finite else (math.inf, 0.0)
    return num, _fin(k.conj(_f64([arg]), c, p)[0]) + 0.5 * (arg - yi) ** 2, err


def _reg_moreau(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    y = np.concatenate([[0.0], P.v])
    C = np.concatenate([[P.Cs[0]], P.C])
    V = P.view(C)
    pts = {"y": y, "C": C}
    env = V.by_C(k.env, y)
    pr = V.by_C(k.prox, y)
    gp = V.by_C(k.value, np.maximum(pr, 0.0))
    pc = np.maximum(pr, 0.0)
    cond, ok = _sensitivity(lambda a: V.by_C(k.value, a), pc, _ulps(pc, y))
    what = "Moreau decomposition env(y) + value(p) + (p - y)^2/2 vs y^2/2, p = prox(y)"
    parts = (env, gp, 0.5 * (pr - y) ** 2)
    _sum_identity(r.identity("moreau_decomposition"), parts, 0.5 * y**2, rtol, atol, pts, what, cond=cond, mask=ok)
    eg = V.by_C(k.env_grad, y)
    # prox(y) is computed from y (a shrinkage y - t): its rounding is relative to y
    r.identity("env_grad_prox").compare(eg, pr, _tol(rtol, atol, (eg, pr), (y,)), pts, "env_grad(y) vs prox(y)")
    eh = V.by_C(k.env_hess, y)
    pd = V.by_C(k.prox_deriv, y)
    r.identity("env_hess_prox_deriv").compare(eh, pd, _tol(rtol, atol, (eh, pd)), pts, "env_hess(y) vs prox_deriv(y)")
    rad = np.array([float(reg.conj_radius(c)) for c in C])
    one = [_env_min_one(k, p, float(C[i]), float(y[i]), min(float(y[i]), rad[i]), pr[i]) for i in range(y.size)]
    num, terms, err = (np.array(col, dtype=np.float64) for col in zip(*one))
    # relative to the envelope itself (not to y^2/2, the size of the objective at y' = 0)
    what = "env(y) vs numerical min_{y' >= 0} conj(y') + (y' - y)^2/2"
    r.identity("env_min").compare(env, num, _tol(rtol, atol, (env, num), (terms,), err), pts, what)
    vv, pts_v = P.v, {"y": P.v, "C": P.C}
    h = _steps(vv, P.C)
    okd = vv - 4 * h > 0
    _, fd = _compare_fd(r.identity("env_grad_fd"), P.at, ("env", "env_grad"), vv, h, rtol, atol, pts_v, okd)
    _compare_fd(r.identity("env_hess_fd"), P.at, ("env_grad", "env_hess"), vv, h, rtol, atol, pts_v, okd & ~fd.kink)


def _reg_conj(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    y = P.y_in
    h = _steps(y, P.C)
    inside = (y - 4 * h > 0) & (y + 4 * h < P.radius)
    ident = r.identity("conj_grad_fd")
    an, fd = _compare_fd(ident, P.at, ("conj", "conj_grad"), y, h, rtol, atol, {"y": y, "C": P.C}, inside)
    ident.at_least(an, 0.0, atol, {"y": y, "C": P.C}, "conj_grad >= 0", mask=inside)
    ident2 = r.identity("conj_hess_fd")
    an2, _ = _compare_fd(
        ident2, P.at, ("conj_grad", "conj_hess"), y, h, rtol, atol, {"y": y, "C": P.C}, inside & ~fd.kink
    )
    ident2.at_least(an2, 0.0, atol, {"y": y, "C": P.C}, "conj_hess >= 0", mask=inside)


_REG_GRID = np.concatenate([[0.0], 10.0 ** np.linspace(-8, 8, 161)])


def _reg_sup(k: RegularizerJit, p: np.ndarray, c: float, yi: float, hints: Sequence[float]) -> tuple:
    """:func:`_sup_one` of ``sup_{x >= 0} x y - value(x)`` on ``s _REG_GRID``, ``s = max(1, C, y)``."""
    s = max(1.0, c, yi)
    return _sup_one(lambda x: k.value(x, c, p), yi, 0.0, s * _REG_GRID, hints, 0.0)


def _reg_conj_sup(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    ident = r.identity("conj_sup")
    m = P.out_mask
    ys = np.concatenate([P.y_in, [0.0] * len(P.Cs), P.radius[m]])
    Cs = np.concatenate([P.C, P.Cs, P.C[m]])
    V = P.view(Cs)
    cv = V.by_C(k.conj, ys)
    hint = V.by_C(k.conj_grad, ys)
    found = [_reg_sup(k, p, float(c), float(yi), [float(h), 0.0])[:4] for yi, c, h in zip(ys, Cs, hint)]
    what = "conj vs numerical sup_{x>=0} (x y - value(x))"
    below = "conj must be >= x y - value(x) for every x >= 0 (supremum not attained on x <= 1e8 max(1, C, y), checked from below)"
    _sup_checks(ident, cv, found, {"y": ys, "C": Cs}, rtol, atol, what, below)
    ident2 = r.identity("conj_unbounded")
    if not m.any():
        ident2.note()
        return
    yo, Co = P.y_out[m], P.C[m]

    within = [_sup_within(*_reg_sup(k, p, c, yi, [])[4:], max(1.0, c, yi)) for yi, c in zip(yo.tolist(), Co.tolist())]
    s1, s2 = np.array(within).T
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
    gv = P.by_C(k.value, x)
    cv = P.by_C(k.conj, y)
    what = "Fenchel-Young inequality value(x) + conj(y) >= x y"
    _sum_identity(ident, (gv, cv), x * y, rtol, atol, {"x": x, "y": y, "C": P.C}, what, at_least=True)
    pr = P.by_C(k.prox, P.v)
    pr = np.maximum(pr, 0.0)
    ys = P.v - pr
    near = np.isfinite(P.radius) & (ys > P.radius) & (ys <= P.radius * (1 + 1e-12))
    ys = np.where(near, P.radius, np.maximum(ys, 0.0))
    gp = P.by_C(k.value, pr)
    cy = P.by_C(k.conj, ys)
    du = _ulps(P.v, pr, ys)
    cond_c, ok_c = _sensitivity(lambda a: P.by_C(k.conj, a), ys, du)
    cond_g, ok_g = _sensitivity(lambda a: P.by_C(k.value, a), pr, du)
    pts = {"v": P.v, "x": pr, "y": ys, "C": P.C}
    what = "Fenchel-Young equality at x = prox(v), y = v - x"
    _sum_identity(ident, (gp, cy), pr * ys, rtol, atol, pts, what, cond=cond_c + cond_g, mask=ok_c & ok_g)
    xg = P.by_C(k.conj_grad, y)
    gx = P.by_C(k.value, np.maximum(xg, 0.0))
    reach = np.abs(xg) <= 1e8 * np.maximum(np.maximum(1.0, P.C), y)  # beyond the supremum's grid value may overflow
    xs = np.where(reach, np.maximum(xg, 0.0), 0.0)
    cond, ok = _sensitivity(lambda a: P.by_C(k.value, a), xs, _ulps(xs))
    what = "Fenchel-Young equality at x = conj_grad(y)"
    _sum_identity(ident, (gx, cv), xg * y, rtol, atol, {"y": y, "x": xg, "C": P.C}, what, cond=cond, mask=reach & ok)
