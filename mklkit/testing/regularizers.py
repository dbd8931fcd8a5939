r"""The regularizer identities of the component kit: :func:`check_regularizer`.

Each identity is described, with its tolerance, in
:mod:`mklkit.testing.components` (Suzuki & Tomioka 2011, §4, eqs. (13),
(21)-(23), (42)-(47), Table 3).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..components.base import BregmanJit, RegularizerJit
from ._common import (
    _EPS, _FD, _ROUND, _arr, _attained, _begin, _best, _central, _check_output, _f64, _fd_tol,
    _fin, _grid_sup, _scalar_min, _sensitivity, _steps, _tol, _ulps,
)
from ._report import ConformanceReport, _Runner

__all__ = ["check_regularizer"]


# ---------------------------------------------------------------------------
# Regularizers
# ---------------------------------------------------------------------------
class _RegPoints:
    """Random points for a regularizer, grouped by ``C``."""

    def __init__(self, reg: Any, rng: np.random.Generator, n: int, C: Any):
        self.p = _f64(reg.param_vector)
        n = max(int(n), 8)
        if C is None:
            Cs = 10.0 ** rng.uniform(math.log10(0.05), math.log10(5.0), 3)
        else:
            Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
        if Cs.size == 0 or not np.all(Cs > 0) or not np.all(np.isfinite(Cs)):
            raise ValueError(f"C must be positive and finite; got {Cs!r}")
        Cs = np.array(list(dict.fromkeys(float(c) for c in Cs)))
        self.Cs = [float(c) for c in Cs]
        per = max(n // len(self.Cs), 6)
        self.C = np.repeat(Cs, per)
        m = self.C.size

        def draw() -> np.ndarray:
            half = m // 2
            a = np.empty(m)
            a[:half] = self.C[:half] * 10.0 ** rng.uniform(-2.0, 1.3, half)
            a[half:] = 10.0 ** rng.uniform(-2.0, 1.0, m - half)
            return a

        self.x, self.v, self.y = draw(), draw(), draw()
        self.radius = np.array([float(reg.conj_radius(c)) for c in self.C])
        fin = np.isfinite(self.radius)
        t = rng.uniform(0.02, 0.98, m)
        self.y_in = np.where(fin, self.radius * t, self.y)
        self.y_out = np.where(fin, self.radius * (1.0 + rng.uniform(0.05, 1.0, m)), np.nan)
        self.out_mask = fin
        self.d = 10.0 ** rng.uniform(-2.0, 2.0, m)

    def groups(self) -> list[tuple[float, np.ndarray]]:
        return [(c, np.flatnonzero(self.C == c)) for c in self.Cs]


def _by_C(P: _RegPoints, fn: Callable[[np.ndarray, float], Any], a: np.ndarray,
          mask: np.ndarray | None = None) -> np.ndarray:
    """Apply ``fn(values, C)`` group-wise; rows outside ``mask`` are NaN."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.nan)
    for c, idx in P.groups():
        if mask is not None:
            idx = idx[mask[idx]]
        if idx.size:
            out[idx] = _arr(fn(_f64(a[idx]), c))
    return out


#: A conjugate (or its derivatives) may return +inf inside its domain only
#: where the true value exceeds the float64 range: just below the point where
#: it turns infinite, the finite values must already be at least this large.
_OVERFLOW_FLOOR = 1e250


def _overflow_justified(fn: Callable[[np.ndarray, float], Any], y: np.ndarray,
                        c: float) -> np.ndarray:
    """For each ``y`` where ``fn(y, c)`` is +inf, whether that is float64 overflow.

    Bisection on [0, y] finds where ``fn`` turns infinite; the value just
    below must be at least :data:`_OVERFLOW_FLOOR`.
    """
    y = np.asarray(y, dtype=np.float64)
    out = np.zeros(y.shape, dtype=bool)
    for i, yi in enumerate(y):
        lo, hi = 0.0, float(yi)
        if not math.isfinite(float(_arr(fn(_f64([lo]), c))[0])):
            continue
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if math.isfinite(float(_arr(fn(_f64([mid]), c))[0])):
                lo = mid
            else:
                hi = mid
        out[i] = float(_arr(fn(_f64([lo]), c))[0]) >= _OVERFLOW_FLOOR
    return out


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
            out = _check_output(ident, f"{name} inside the domain", fn(yin, c, p), (n - 1,),
                                pts_in, allow_inf=True)
            if out is not None:
                ok = np.isfinite(out)
                bad = np.isposinf(out)
                if bad.any():
                    ok[bad] = _overflow_justified(lambda a, cc: fn(a, cc, p), yin[bad], c)
                ident.require(ok, pts_in, f"{name} inside the domain is not finite "
                              "(and not a float64 overflow of a huge value)")
        zero = _f64([0.0])
        _check_output(ident, "conj(0)", k.conj(zero, c, p), (1,), {"y": zero, "C": np.full(1, c)})
        for name in ("conj_grad", "conj_hess"):
            # a derivative at the end of [0, inf) may be +inf (lq with q > 2)
            out = _check_output(ident, f"{name}(0)", getattr(k, name)(zero, c, p), (1,),
                                {"y": zero, "C": np.full(1, c)}, allow_inf=True)
            if out is not None:
                ident.require(out != -np.inf, {"y": zero, "C": np.full(1, c)}, f"{name}(0) is -inf")
        if not np.array_equal(x, x0):
            ident.fail("a kernel modified its input array")
    x = _f64(P.x)
    _check_output(ident, "weight", k.weight(x, p), (x.size,), {"x": x}, allow_inf=True)
    _check_output(ident, "penalty", k.penalty(_f64(P.d), p), (x.size,), {"d": P.d}, allow_inf=True)


def _reg_conj_domain(r: _Runner, reg: Any, P: _RegPoints) -> None:
    ident = r.identity("conj_domain")
    k, p = reg.jit, P.p
    cin = _by_C(P, lambda a, c: k.conj(a, c, p), P.y_in)
    ok = np.isfinite(cin)
    for c, idx in P.groups():
        bad = idx[np.isposinf(cin[idx])]
        if bad.size:
            ok[bad] = _overflow_justified(lambda a, cc: k.conj(a, cc, p), P.y_in[bad], c)
    ident.require(ok, {"y": P.y_in, "C": P.C},
                  "conj is not finite inside [0, conj_radius(C)) (and not a float64 overflow)")
    c0 = _by_C(P, lambda a, c: k.conj(a, c, p), np.zeros_like(P.C))
    ident.require(np.isfinite(c0), {"y": np.zeros_like(P.C), "C": P.C}, "conj(0) is not finite")
    m = P.out_mask
    if m.any():
        cout = _by_C(P, lambda a, c: k.conj(a, c, p), np.where(m, P.y_out, 0.0), mask=m)
        ident.require(np.isposinf(cout[m]), {"y": P.y_out[m], "C": P.C[m]},
                      lambda i: f"conj beyond conj_radius(C) is {cout[m][i]!r}, expected +inf")
        cb = _by_C(P, lambda a, c: k.conj(a, c, p), np.where(m, P.radius, 0.0), mask=m)
        ident.require(~np.isnan(cb[m]), {"y": P.radius[m], "C": P.C[m]}, "conj at conj_radius(C) is NaN")


def _reg_convexity(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float,
                   rng: np.random.Generator) -> None:
    ident = r.identity("convexity")
    k, p = reg.jit, P.p
    x2 = P.x * 10.0 ** rng.uniform(-1.0, 1.0, P.x.size)
    xm = 0.5 * (P.x + x2)
    fa, fb, fm = (_by_C(P, lambda a, c: k.value(a, c, p), a) for a in (P.x, x2, xm))
    tol = atol + rtol * _fin(fa, fb)
    pts = {"x": P.x, "x2": x2, "C": P.C}
    ident.at_least(0.5 * (fa + fb), fm, tol, pts, "midpoint convexity of value in x",
                   mask=np.isfinite(fa) & np.isfinite(fb))
    lo, hi = np.minimum(P.x, x2), np.maximum(P.x, x2)
    flo, fhi = (_by_C(P, lambda a, c: k.value(a, c, p), a) for a in (lo, hi))
    ident.at_least(fhi, flo, atol + rtol * np.abs(flo), {"x": lo, "x2": hi, "C": P.C},
                   "value must be non-decreasing in x")
    if _tikhonov(reg):
        # g(t) = value(sqrt t, 1) concave in t (SpicyMKL eq. 42)
        t1, t2 = P.x ** 2, x2 ** 2
        g1, g2 = (_arr(k.value(_f64(np.sqrt(t)), 1.0, p)) for t in (t1, t2))
        gm = _arr(k.value(_f64(np.sqrt(0.5 * (t1 + t2))), 1.0, p))
        ident.at_least(gm, 0.5 * (g1 + g2), atol + rtol * (np.abs(g1) + np.abs(g2)),
                       {"x": P.x, "x2": x2}, "g(t) = value(sqrt(t), C=1) must be concave in t")
    # conjugate convex and non-decreasing on its domain
    y2 = np.where(P.out_mask, P.radius * rng.uniform(0.02, 0.98, P.C.size),
                  P.y * 10 ** rng.uniform(-1, 1, P.C.size))
    ca, cb, cm = (_by_C(P, lambda a, c: k.conj(a, c, p), a) for a in (P.y_in, y2, 0.5 * (P.y_in + y2)))
    ident.at_least(0.5 * (ca + cb), cm, atol + rtol * (np.abs(ca) + np.abs(cb)),
                   {"y": P.y_in, "y2": y2, "C": P.C}, "midpoint convexity of conj",
                   mask=np.isfinite(ca) & np.isfinite(cb))
    ylo, yhi = np.minimum(P.y_in, y2), np.maximum(P.y_in, y2)
    clo, chi = (_by_C(P, lambda a, c: k.conj(a, c, p), a) for a in (ylo, yhi))
    ident.at_least(chi, clo, atol + rtol * np.abs(clo), {"y": ylo, "y2": yhi, "C": P.C},
                   "conj must be non-decreasing in y", mask=np.isfinite(clo))


def _reg_scaling(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    ident = r.identity("value_scaling")
    k, p = reg.jit, P.p
    vc = _by_C(P, lambda a, c: k.value(a, c, p), P.x)
    v1 = _arr(k.value(_f64(P.x), 1.0, p))
    ident.compare(vc, P.C * v1, atol + rtol * np.abs(vc), {"x": P.x, "C": P.C},
                  "value(x, C) vs C * value(x, 1)")


def _reg_sparse(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    r"""``sparse`` must match the right derivative of ``value`` at 0.

    The right derivative :math:`a = \tilde g_C'(0^+)` is estimated by
    Richardson extrapolation of difference quotients, :math:`2D(h) - D(2h)`
    with :math:`h = 10^{-12}C` (exact for a linear-plus-quadratic value such
    as the elastic net).  A sparse regularizer needs :math:`a` above the
    rounding noise of that estimate and ``prox(v) = 0`` for
    :math:`0 < v \le 0.45a`.  A non-sparse one needs a difference quotient
    that tends to 0: it must shrink by 10 % or more between steps
    :math:`10^{-3}C` and :math:`10^{-12}C` (so :math:`x^q` with
    :math:`q - 1 \lesssim 0.004` looks sparse in double precision).
    ``zero_threshold(C)`` (derived from ``prox``, or the component's own) must
    equal :math:`a` for a sparse regularizer and 0 otherwise.
    """
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
                ident.fail(f"sparse is True but the right derivative of value at 0 is about "
                           f"{a:.3e} (rounding noise {noise:.1e}, C = {c:g}): blocks cannot be "
                           "exactly zero", pt)
                continue
            vs = _f64(a * np.array([0.01, 0.1, 0.45]))
            pr = _arr(k.prox(vs, c, p))
            ident.require(pr == 0.0, {"v": vs, "C": np.full(vs.size, c)},
                          lambda i: f"sparse is True but prox(v) = {pr[i]:.6g} != 0 below the right "
                                    f"derivative of value at 0 ({a:.6g})")
            # zero_threshold (the C_max of every engine) is that right derivative
            t = float(reg.zero_threshold(c))
            tol_t = rtol * abs(a) + noise
            if abs(t - a) <= tol_t:
                zt.note()
            else:
                zt.fail(f"zero_threshold(C) = {t:.10g} but the right derivative of value at 0 "
                        f"is {a:.10g} (tolerance {tol_t:.1e}, C = {c:g})", pt)
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
                ident.fail(f"sparse is False but value has a positive right derivative at 0: "
                           f"difference quotients {s_far:.6g} (step 1e-3 C) and {s_near:.6g} "
                           f"(step 1e-12 C) do not tend to 0 (C = {c:g})", pt)


def _reg_prox(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    v = np.concatenate([[0.0], P.v])
    C = np.concatenate([[P.Cs[0]], P.C])
    Pv = _RegView(P, C)
    pr = _by_C(Pv, lambda a, c: k.prox(a, c, p), v)
    pts = {"v": v, "C": C}
    ident = r.identity("prox_optimality")
    tolb = atol + rtol * v
    ident.at_least(pr, np.zeros_like(pr), tolb, pts, "prox(v) >= 0")
    ident.at_least(v, pr, tolb, pts, "prox(v) <= v (value is non-decreasing)")
    # subgradient condition with one-sided differences of value at p
    pc = np.maximum(pr, 0.0)
    H = 1e-6 * np.maximum(pc, C)
    Hl = np.minimum(H, pc)
    f0 = _by_C(Pv, lambda a, c: k.value(a, c, p), pc)
    fp = _by_C(Pv, lambda a, c: k.value(a, c, p), pc + H)
    fm = _by_C(Pv, lambda a, c: k.value(a, c, p), pc - Hl)
    with np.errstate(invalid="ignore", divide="ignore"):
        dplus = (fp - f0) / ((pc + H) - pc)
        dminus = np.where(Hl > 0, (f0 - fm) / np.where(Hl > 0, pc - (pc - Hl), 1.0), -np.inf)
    fmax = np.maximum(np.abs(f0), np.maximum(np.abs(fp), np.abs(fm)))
    resid = v - pr
    tol = atol + rtol * np.maximum(v, np.abs(dplus)) + 2 * _ROUND * fmax / np.maximum(Hl, H * (Hl == 0))
    ident.at_least(dplus, resid, tol, pts,
                   "optimality of prox: v - prox(v) <= right derivative of value at prox(v)")
    ident.at_least(resid, dminus, tol, pts,
                   "optimality of prox: v - prox(v) >= left derivative of value at prox(v)",
                   mask=Hl > 0)
    # numerical minimisation
    ident2 = r.identity("prox_numeric")
    pnum = np.empty(v.size)
    dx = np.zeros(v.size)
    fobj = np.zeros(v.size)
    for i in range(v.size):
        c, vi = float(C[i]), float(v[i])

        def obj(t: float, c: float = c, vi: float = vi) -> float:
            return float(k.value(_f64([t]), c, p)[0]) + 0.5 * (t - vi) ** 2

        if vi == 0.0:
            pnum[i] = 0.0
            continue
        grid = np.linspace(0.0, vi, 65)
        gv = _arr(k.value(_f64(grid), c, p)) + 0.5 * (grid - vi) ** 2
        j = int(np.argmin(gv))
        a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
        xb, fb, _, dx[i] = _scalar_min(obj, a, b)
        pnum[i] = xb if fb <= gv[j] else grid[j]
        fobj[i] = _fin(k.value(_f64([pnum[i]]), c, p)[0]) + 0.5 * (pnum[i] - vi) ** 2
    # relative to the prox itself (not to max(v, C)); the minimiser is known to
    # the solver's bracket dx and, as the objective is 1-strongly convex, to
    # 2 sqrt(rounding of the objective) (closer points cannot be told apart)
    tolx = _tol(rtol, atol, (pr, pnum), extra=dx + 2.0 * np.sqrt(_ROUND * fobj))
    ident2.compare(pr, pnum, tolx, pts,
                   "prox(v) vs scipy minimize_scalar of value(x) + (x - v)^2/2 over [0, v]")
    # prox_deriv
    ident3 = r.identity("prox_deriv_fd")
    vv = P.v
    h = _steps(vv, P.C)
    an = _by_C(P, lambda a, c: k.prox_deriv(a, c, p), vv)
    fds = _central_by_C(P, lambda a, c: k.prox(a, c, p), vv, h)
    ok = (vv - 4 * h > 0) & ~fds.kink & np.isfinite(fds.d)
    ident3.compare(an, fds.d, _fd_tol(an, fds, rtol, atol), {"v": vv, "C": P.C},
                   "prox_deriv vs central difference of prox", mask=ok)
    ident3.at_least(an, np.zeros_like(an), atol, {"v": vv, "C": P.C}, "prox_deriv >= 0")
    ident3.at_least(np.ones_like(an), an, atol + rtol, {"v": vv, "C": P.C}, "prox_deriv <= 1")


class _RegView:
    """A :class:`_RegPoints` look-alike over other rows (only ``groups``/``Cs`` used)."""

    def __init__(self, P: _RegPoints, C: np.ndarray):
        self.C = C
        self.Cs = P.Cs

    def groups(self) -> list[tuple[float, np.ndarray]]:
        return [(c, np.flatnonzero(self.C == c)) for c in self.Cs]


def _central_by_C(P: Any, fn: Callable[[np.ndarray, float], Any], x: np.ndarray, h: np.ndarray) -> _FD:
    parts = []
    order = []
    for c, idx in P.groups():
        if idx.size:
            parts.append(_central(lambda a, c=c: fn(a, c), _f64(x[idx]), h[idx]))
            order.append(idx)
    idx = np.concatenate(order)
    inv = np.empty_like(idx)
    inv[idx] = np.arange(idx.size)
    fields = {}
    for name in ("d", "err", "kink", "fmax", "dplus", "dminus"):
        fields[name] = np.concatenate([getattr(pt, name) for pt in parts])[inv]
    return _FD(**fields)


def _reg_conj(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    y = P.y_in
    h = _steps(y, P.C)
    inside = (y - 4 * h > 0) & (y + 4 * h < P.radius)
    ident = r.identity("conj_grad_fd")
    fd = _central_by_C(P, lambda a, c: k.conj(a, c, p), y, h)
    an = _by_C(P, lambda a, c: k.conj_grad(a, c, p), y)
    ok = inside & ~fd.kink & np.isfinite(fd.d)
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"y": y, "C": P.C},
                  "conj_grad vs central difference of conj", mask=ok)
    ident.at_least(an, np.zeros_like(an), atol, {"y": y, "C": P.C}, "conj_grad >= 0", mask=inside)
    ident2 = r.identity("conj_hess_fd")
    fd2 = _central_by_C(P, lambda a, c: k.conj_grad(a, c, p), y, h)
    an2 = _by_C(P, lambda a, c: k.conj_hess(a, c, p), y)
    ok2 = inside & ~fd2.kink & ~fd.kink & np.isfinite(fd2.d)
    ident2.compare(an2, fd2.d, _fd_tol(an2, fd2, rtol, atol), {"y": y, "C": P.C},
                   "conj_hess vs central difference of conj_grad", mask=ok2)
    ident2.at_least(an2, np.zeros_like(an2), atol, {"y": y, "C": P.C}, "conj_hess >= 0", mask=inside)


_REG_GRID = np.concatenate([[0.0], 10.0 ** np.linspace(-8, 8, 161)])


def _reg_sup_one(k: RegularizerJit, p: np.ndarray, c: float, yi: float, s: float,
                 hints: Sequence[float]) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_{x >= 0} x y - value(x)``: (best, argmax, attained, err, grid, grid values).

    ``err`` bounds how far the supremum may lie above ``best``, as in
    :func:`mklkit.testing.losses._loss_sup_one`.
    """
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
    cv = _by_C(V, lambda a, c: k.conj(a, c, p), ys)
    hint = _by_C(V, lambda a, c: k.conj_grad(a, c, p), ys)
    sup = np.empty(ys.size)
    terms = np.empty(ys.size)
    err = np.empty(ys.size)
    attained = np.empty(ys.size, dtype=bool)
    for i in range(ys.size):
        c = float(Cs[i])
        s = max(1.0, c, float(ys[i]))
        best, arg, attained[i], err[i], _, _ = _reg_sup_one(k, p, c, float(ys[i]), s,
                                                            [float(hint[i]), 0.0])
        sup[i] = best
        terms[i] = abs(ys[i] * arg) + _fin(k.value(_f64([arg]), c, p)[0])
    # relative to the values compared, as for losses: at conj_radius(C) the
    # supremum of a block-norm-like regularizer is flat out to x ~ 1e8
    tol = _tol(rtol, atol, (cv, sup), (terms,), err)
    pts = {"y": ys, "C": Cs}
    ident.compare(cv, sup, tol, pts, "conj vs numerical sup_{x>=0} (x y - value(x))",
                  mask=attained)
    ident.at_least(cv, sup, tol, pts, "conj must be >= x y - value(x) for every x >= 0 (supremum "
                   "not attained on x <= 1e8 max(1, C, y), checked from below)", mask=~attained)
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
    ident2.require(s2 >= 10.0 * np.maximum(s1, 1.0), {"y": yo, "C": Co}, lambda i: (
        f"beyond conj_radius(C) the supremum of x y - value(x) should be unbounded, but it is "
        f"{s1[i]:.6g} over x <= 1e3 and {s2[i]:.6g} over x <= 1e6 (scaled): conj_radius is too small"))


def _reg_fenchel_young(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float,
                       rng: np.random.Generator) -> None:
    ident = r.identity("fenchel_young")
    k, p = reg.jit, P.p
    x = rng.permutation(P.x)
    y = P.y_in
    gv = _by_C(P, lambda a, c: k.value(a, c, p), x)
    cv = _by_C(P, lambda a, c: k.conj(a, c, p), y)
    tol = _tol(rtol, atol, (gv + cv, x * y), (gv, cv, x * y))
    ident.at_least(gv + cv, x * y, tol, {"x": x, "y": y, "C": P.C},
                   "Fenchel-Young inequality value(x) + conj(y) >= x y")
    # equality at (p, v - p) with p = prox(v)
    pr = _by_C(P, lambda a, c: k.prox(a, c, p), P.v)
    pr = np.maximum(pr, 0.0)
    ys = P.v - pr
    near = np.isfinite(P.radius) & (ys > P.radius) & (ys <= P.radius * (1 + 1e-12))
    ys = np.where(near, P.radius, np.maximum(ys, 0.0))
    gp = _by_C(P, lambda a, c: k.value(a, c, p), pr)
    cy = _by_C(P, lambda a, c: k.conj(a, c, p), ys)
    du = _ulps(P.v, pr, ys)
    cond_c, ok_c = _sensitivity(lambda a: _by_C(P, lambda b, c: k.conj(b, c, p), a), ys, du)
    cond_g, ok_g = _sensitivity(lambda a: _by_C(P, lambda b, c: k.value(b, c, p), a), pr, du)
    ident.compare(gp + cy, pr * ys,
                  _tol(rtol, atol, (gp + cy, pr * ys), (gp, cy, pr * ys), cond_c + cond_g),
                  {"v": P.v, "x": pr, "y": ys, "C": P.C},
                  "Fenchel-Young equality at x = prox(v), y = v - x", mask=ok_c & ok_g)
    # equality at x = conj_grad(y)
    xg = _by_C(P, lambda a, c: k.conj_grad(a, c, p), y)
    gx = _by_C(P, lambda a, c: k.value(a, c, p), np.maximum(xg, 0.0))
    # beyond the range of the supremum grid value may overflow: not checkable
    reach = np.abs(xg) <= 1e8 * np.maximum(np.maximum(1.0, P.C), y)
    xs = np.where(reach, np.maximum(xg, 0.0), 0.0)
    cond, ok = _sensitivity(lambda a: _by_C(P, lambda b, c: k.value(b, c, p), a), xs, _ulps(xs))
    ident.compare(gx + cv, xg * y, _tol(rtol, atol, (gx + cv, xg * y), (gx, cv, xg * y), cond),
                  {"y": y, "x": xg, "C": P.C},
                  "Fenchel-Young equality at x = conj_grad(y)", mask=reach & ok)


def _reg_moreau(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    y = np.concatenate([[0.0], P.v])
    C = np.concatenate([[P.Cs[0]], P.C])
    V = _RegView(P, C)
    pts = {"y": y, "C": C}
    env = _by_C(V, lambda a, c: k.env(a, c, p), y)
    pr = _by_C(V, lambda a, c: k.prox(a, c, p), y)
    gp = _by_C(V, lambda a, c: k.value(a, c, p), np.maximum(pr, 0.0))
    lhs = env + gp + 0.5 * (pr - y) ** 2
    rhs = 0.5 * y ** 2
    pc = np.maximum(pr, 0.0)
    cond, ok = _sensitivity(lambda a: _by_C(V, lambda b, c: k.value(b, c, p), a), pc, _ulps(pc, y))
    r.identity("moreau_decomposition").compare(
        lhs, rhs, _tol(rtol, atol, (lhs, rhs), (env, gp, 0.5 * (pr - y) ** 2, rhs), cond), pts,
        "Moreau decomposition env(y) + value(p) + (p - y)^2/2 vs y^2/2, p = prox(y)", mask=ok)
    eg = _by_C(V, lambda a, c: k.env_grad(a, c, p), y)
    # prox(y) is computed from y (a shrinkage y - t): its rounding is relative to y
    r.identity("env_grad_prox").compare(eg, pr, _tol(rtol, atol, (eg, pr), (y,)), pts,
                                        "env_grad(y) vs prox(y)")
    eh = _by_C(V, lambda a, c: k.env_hess(a, c, p), y)
    pd = _by_C(V, lambda a, c: k.prox_deriv(a, c, p), y)
    r.identity("env_hess_prox_deriv").compare(eh, pd, _tol(rtol, atol, (eh, pd)), pts,
                                              "env_hess(y) vs prox_deriv(y)")
    # envelope from its definition
    ident = r.identity("env_min")
    rad = np.array([float(reg.conj_radius(c)) for c in C])
    num = np.empty(y.size)
    terms = np.zeros(y.size)
    err = np.zeros(y.size)
    for i in range(y.size):
        c, yi = float(C[i]), float(y[i])
        b = min(yi, rad[i])

        def obj(t: float, c: float = c, yi: float = yi) -> float:
            return float(k.conj(_f64([t]), c, p)[0]) + 0.5 * (t - yi) ** 2

        cands = [(obj(0.0), 0.0), (obj(b), b)]
        if b > 0:
            grid = np.linspace(0.0, b, 65)
            gv = _arr(k.conj(_f64(grid), c, p)) + 0.5 * (grid - yi) ** 2
            gv = np.where(np.isnan(gv), np.inf, gv)
            j = int(np.argmin(gv))
            cands.append((float(gv[j]), float(grid[j])))
            tb, fb, err[i], _ = _scalar_min(obj, grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)])
            cands.append((fb, tb))
        hint = yi - float(pr[i])
        if math.isfinite(hint) and 0.0 <= hint <= b:
            cands.append((obj(hint), hint))
        finite = [q for q in cands if math.isfinite(q[0])]
        num[i], arg = min(finite) if finite else (math.inf, 0.0)
        terms[i] = _fin(k.conj(_f64([arg]), c, p)[0]) + 0.5 * (arg - yi) ** 2
    # relative to the envelope itself (not to y^2/2, the size of the objective at y' = 0)
    ident.compare(env, num, _tol(rtol, atol, (env, num), (terms,), err), pts,
                  "env(y) vs numerical min_{y' >= 0} conj(y') + (y' - y)^2/2")
    # derivatives of the envelope
    vv, Cv = P.v, P.C
    h = _steps(vv, Cv)
    okd = vv - 4 * h > 0
    fd = _central_by_C(P, lambda a, c: k.env(a, c, p), vv, h)
    an = _by_C(P, lambda a, c: k.env_grad(a, c, p), vv)
    r.identity("env_grad_fd").compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"y": vv, "C": Cv},
                                      "env_grad vs central difference of env",
                                      mask=okd & ~fd.kink & np.isfinite(fd.d))
    fd2 = _central_by_C(P, lambda a, c: k.env_grad(a, c, p), vv, h)
    an2 = _by_C(P, lambda a, c: k.env_hess(a, c, p), vv)
    r.identity("env_hess_fd").compare(an2, fd2.d, _fd_tol(an2, fd2, rtol, atol), {"y": vv, "C": Cv},
                                      "env_hess vs central difference of env_grad",
                                      mask=okd & ~fd2.kink & ~fd.kink & np.isfinite(fd2.d))


def _tikhonov(reg: Any) -> bool:
    """False for a regularizer declaring ``tikhonov_form = False`` (``g`` not concave)."""
    return bool(getattr(reg, "tikhonov_form", True))


def _reg_weight(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.jit, P.p
    x = np.concatenate([[0.0], np.sort(P.x)[:: max(1, P.x.size // 32)]])
    d = _arr(k.weight(_f64(x), p))
    g = _arr(k.value(_f64(x), 1.0, p))
    ident = r.identity("weight_value")
    with np.errstate(divide="ignore", invalid="ignore"):
        quad = np.where(x == 0.0, 0.0, x ** 2 / (2.0 * d))
    ok_d = (d >= 0) & ~np.isnan(d) & ((d > 0) | (x == 0.0))
    ident.require(ok_d, {"x": x, "d": d},
                  lambda i: f"weight(x) = {d[i]!r} must be > 0 (0 only at x = 0)")
    dd = np.where(ok_d & np.isfinite(d), d, 1.0)
    h = _arr(k.penalty(_f64(dd), p))
    phi = quad + 0.5 * h
    cond, ok_c = _sensitivity(lambda a: 0.5 * _arr(k.penalty(a, p)), dd, _ulps(dd))
    ident.compare(phi, g, _tol(rtol, atol, (phi, g), (quad, 0.5 * h), cond), {"x": x, "d": d},
                  "x^2/(2d) + penalty(d)/2 at d = weight(x) vs g(x^2) = value(x, C=1)",
                  mask=ok_d & np.isfinite(d) & ok_c)
    # d minimises x^2/(2 d) + h(d)/2 over d > 0
    ident2 = r.identity("weight_argmin")
    logd = np.linspace(-10.0, 10.0, 201)
    grid = 10.0 ** logd
    hg = _arr(k.penalty(_f64(grid), p))
    num = np.empty(x.size)
    err = np.zeros(x.size)
    for i in range(x.size):
        xi = float(x[i])
        vals = xi ** 2 / (2 * grid) + 0.5 * hg
        vals = np.where(np.isnan(vals), np.inf, vals)
        j = int(np.argmin(vals))

        def obj(t: float, xi: float = xi) -> float:
            dt = 10.0 ** t
            return xi ** 2 / (2 * dt) + 0.5 * float(k.penalty(_f64([dt]), p)[0])

        _, fb, err[i], _ = _scalar_min(obj, logd[max(j - 1, 0)], logd[min(j + 1, logd.size - 1)])
        num[i] = min(float(vals[j]), fb if math.isfinite(fb) else math.inf)
    # the terms at the minimum are those at d = weight(x) up to the solver's error
    tol = _tol(rtol, atol, (num, g, phi), (quad, 0.5 * h), err)
    ident2.at_least(num, g, tol, {"x": x},
                    "g(x^2) <= min_d x^2/(2d) + penalty(d)/2 (numerical minimum over d > 0)")
    ident2.at_least(num, phi, tol + cond, {"x": x, "d": d},
                    "weight(x) must minimise x^2/(2d) + penalty(d)/2 over d > 0: value at weight(x) "
                    "exceeds the numerical minimum", mask=ok_d & np.isfinite(d) & ok_c)


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
    fd = _central(lambda a: b.F(a, p), d, h)
    an = _arr(b.f(d, p))
    ok = (d - 4 * h > 0) & ~fd.kink & np.isfinite(fd.d)
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), {"d": d},
                  "f vs central difference of F", mask=ok)
    srt = np.sort(d)
    fs = _arr(b.f(_f64(srt), p))
    ident.require(np.diff(fs) > 0, {"d": srt[:-1]},
                  "f = F' must be strictly increasing (F strictly convex)")
    ident2 = r.identity("bregman_finv")
    back = _arr(b.finv(_f64(an), p))
    ident2.compare(back, d, atol + rtol * d, {"d": d}, "finv(f(d)) vs d")


def check_regularizer(reg: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6,
                      atol: float = 1e-8, C: float | Sequence[float] | None = None) -> ConformanceReport:
    """Check a regularizer against the :class:`~mklkit.components.base.Regularizer` contract.

    Parameters
    ----------
    reg : Regularizer
        The instance to check.
    n_points : int
        Number of random points per identity, split over the values of ``C``.
    seed : int
        Seed of the :func:`numpy.random.default_rng` drawing the points.
    rtol, atol : float
        Relative and absolute tolerances.
    C : float or sequence of float, optional
        Regularization constants to check at; by default three values drawn
        log-uniformly from [0.05, 5].

    Returns
    -------
    ConformanceReport
    """
    rng, r = _begin(reg, "regularizer", seed)
    try:
        P = _RegPoints(reg, rng, n_points, C)
    except ValueError:
        raise
    except Exception as exc:
        r.identity("kernel_shapes").fail(
            f"could not draw points (conj_radius raised {type(exc).__name__}: {exc})")
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
    r.run(["moreau_decomposition", "env_grad_prox", "env_hess_prox_deriv", "env_min",
           "env_grad_fd", "env_hess_fd"], _reg_moreau, r, reg, P, rtol, atol)
    if _tikhonov(reg):
        r.run(["weight_value", "weight_argmin"], _reg_weight, r, reg, P, rtol, atol)
    if getattr(reg, "bregman", None) is not None:
        r.run(["bregman_f_fd", "bregman_finv"], _reg_bregman, r, reg, P, rtol, atol)
    return r.report(seed)


