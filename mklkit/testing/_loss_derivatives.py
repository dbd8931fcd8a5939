"""The derivative checks of a loss: central differences, subgradients at kinks, ``deriv_lipschitz``."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ._common import _FD, _ROUND, _arr, _bisect_jumps, _central, _f64, _compare_fd, _jumps, _steps, _tol
from ._loss_points import _LossPoints, _interior
from ._report import _Runner


def _loss_kinks(
    fun: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ys: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    n_grid: int = 3001,
) -> tuple[np.ndarray, np.ndarray]:
    """Jumps of ``fun(y, .)`` on ``[lo, hi]`` per label: (y, x) at both sides of each."""
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


def _subgradient_tol(an: np.ndarray, fd: _FD, h: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Tolerance of ``dminus <= an <= dplus``: rtol of the largest of the three, plus rounding."""
    return (
        atol + rtol * np.maximum(np.abs(an), np.maximum(np.abs(fd.dplus), np.abs(fd.dminus))) + 2 * _ROUND * fd.fmax / h
    )


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
    tol = _subgradient_tol(ans, fds, hs, rtol, atol)
    pts = {"y": ys, "z": zs}
    ident.at_least(ans, fds.dminus, tol, pts, "deriv must be a subgradient: deriv >= left difference of value")
    ident.at_least(fds.dplus, ans, tol, pts, "deriv must be a subgradient: deriv <= right difference of value")


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
        tol = _subgradient_tol(ak, fk, hk, rtol, atol)
        ident.at_least(
            ak,
            fk.dminus,
            tol,
            {"y": ky, "u": ku},
            "conj_grad at a kink must be a subgradient: >= left difference of conj",
        )
        ident.at_least(
            fk.dplus,
            ak,
            tol,
            {"y": ky, "u": ku},
            "conj_grad at a kink must be a subgradient: <= right difference of conj",
        )
    ident2 = r.identity("conj_hess_fd")
    fd2 = _central(lambda uu: k.conj_grad(y, uu, p), u, h)
    an2 = _arr(k.conj_hess(y, u, p))
    what = "conj_hess vs central difference of conj_grad"
    _compare_fd(ident2, an2, fd2, rtol, atol, {"y": y, "u": u}, what, inside & ~fd.kink)
    ident2.at_least(
        an2, np.zeros_like(an2), atol, {"y": y, "u": u}, "conj_hess of a convex conjugate must be >= 0", mask=inside
    )
