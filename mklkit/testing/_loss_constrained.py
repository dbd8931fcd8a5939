"""The checks of a loss's constrained conjugate (:class:`~mklkit.components.base.ConstrainedConjugate`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize

from ..components.base import ConstrainedConjugate
from ._common import _SOLVER_RTOL, _arr, _central, _check_output, _f64, _fd_tol, _LossPoints, _mag, _steps, _tol
from ._report import _Runner


def _cons_call(cc: ConstrainedConjugate, name: str, y, u, ut, p) -> np.ndarray:
    return _arr(getattr(cc, name)(_f64(y), _f64(u), _f64(ut), p))


def _loss_constrained(
    r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator
) -> None:
    cc: ConstrainedConjugate = loss.constrained
    p, y = P.p, P.y
    n = y.size
    Ba, B = int(loss.n_aux), int(loss.n_cons)
    W = 1 + Ba
    ident = r.identity("constrained_shapes")
    tails = {"l0": (), "l0_grad": (W,), "l0_hess": (W, W), "cons": (B,), "cons_grad": (B, W), "cons_hess": (B, W, W)}
    ut0 = _f64(np.zeros((n, Ba)))
    outs = [
        _check_output(ident, f"{name}(y, u, ut)", getattr(cc, name)(y, P.u, ut0, p), (n, *tail), {"y": y, "u": P.u})
        for name, tail in tails.items()
    ]
    if any(out is None for out in outs):
        return
    r.run(["constrained_value", "constrained_feasibility"], _constrained_value, r, loss, P, rtol, atol)
    derivs = ["l0_grad_fd", "l0_hess_fd", "cons_grad_fd", "cons_hess_fd", "constrained_convexity"]
    r.run(derivs, _constrained_derivs, r, loss, P, rtol, atol, rng)


def _solve_constrained(
    cc: ConstrainedConjugate, p: np.ndarray, yi: float, ui: float, Ba: int, affine: bool
) -> tuple[str, float, float]:
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
        res = optimize.linprog(l0g(t0), A_ub=consg(t0), b_ub=-cons(t0), bounds=[(None, None)] * Ba, method="highs")
        if res.status == 2:
            return "infeasible", math.inf, math.inf
        if res.status == 3:
            return "unbounded", -math.inf, 0.0
        if res.status != 0:
            return f"linprog status {res.status}: {res.message}", math.nan, math.nan
        t = np.asarray(res.x)
        return "ok", l0(t), float(max(np.max(cons(t)), 0.0))
    # phase 1: min s s.t. cons <= s
    c0 = cons(t0)
    z0 = np.concatenate([t0, [float(np.max(c0)) + 1.0]])
    ph1 = optimize.minimize(
        lambda w: w[-1],
        z0,
        jac=lambda w: np.concatenate([np.zeros(Ba), [1.0]]),
        constraints=[
            {
                "type": "ineq",
                "fun": lambda w: w[-1] - cons(w[:-1]),
                "jac": lambda w: np.hstack([-consg(w[:-1]), np.ones((c0.size, 1))]),
            }
        ],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    s = float(ph1.x[-1])
    if s > 1e-9:
        return "infeasible", math.inf, s
    res = optimize.minimize(
        l0,
        ph1.x[:-1],
        jac=l0g,
        constraints=[{"type": "ineq", "fun": lambda t: -cons(t), "jac": lambda t: -consg(t)}],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    t = np.asarray(res.x)
    return "ok", l0(t), float(max(np.max(cons(t)), 0.0))


def _constrained_value(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    cc: ConstrainedConjugate = loss.constrained
    k, p, y = loss.jit, P.p, P.y
    Ba = int(loss.n_aux)
    ident = r.identity("constrained_value")
    feas = r.identity("constrained_feasibility")
    ys_in, us_in = P.with_ends()
    ut = np.zeros((ys_in.size, Ba))
    affine = all(np.all(_cons_call(cc, name, ys_in, us_in, ut, p) == 0.0) for name in ("l0_hess", "cons_hess"))
    cv = _arr(k.conj(_f64(ys_in), _f64(us_in), p))
    solved = [_solve_constrained(cc, p, float(yi), float(ui), Ba, affine) for yi, ui in zip(ys_in, us_in)]
    status, vals, viol = zip(*solved)
    vals, viol = np.array(vals, dtype=np.float64), np.array(viol, dtype=np.float64)
    okst = np.array([s == "ok" for s in status])
    # constraints affine in u (every loss of the paper): violations of the order of max(|u|, 1)
    ctol = atol + rtol * np.maximum(np.abs(us_in), 1.0)
    feas.require(
        okst & (viol <= ctol),
        {"y": ys_in, "u": us_in},
        lambda i: (
            f"the constraints cons(y, (u, ut)) <= 0 must be satisfiable for u in the domain "
            f"[conj_lower, conj_upper]; the solver reports {status[i]!r} (violation {viol[i]:.3e})"
        ),
    )
    # HiGHS or SLSQP is credited with a relative accuracy of the size of its data
    data = _mag(cv, vals, us_in)
    solver = 0.0 if Ba == 0 else _SOLVER_RTOL + (0.0 if affine else 1e-6)
    tol = _tol(rtol, atol, (vals, cv), extra=solver * data)
    what = "min over ut of l0(y,(u,ut)) s.t. cons <= 0 vs conj(y,u)"
    ident.compare(vals, cv, tol, {"y": ys_in, "u": us_in}, what, mask=okst)
    m = P.out_mask
    if m.any():
        yo, uo = y[m], P.u_out[m]
        width = np.where(np.isfinite(P.hi - P.lo), P.hi - P.lo, 1.0)[m]
        near = np.where(uo > P.hi[m], P.hi[m] + 1e-3 * width, P.lo[m] - 1e-3 * width)
        yo2, uo2 = np.concatenate([yo, yo]), np.concatenate([uo, near])
        st_out = [_solve_constrained(cc, p, float(yo2[i]), float(uo2[i]), Ba, affine)[0] for i in range(yo2.size)]
        feas.require(
            np.array([s == "infeasible" for s in st_out]),
            {"y": yo2, "u": uo2},
            lambda i: (
                f"cons(y, (u, ut)) <= 0 is satisfiable at u outside the domain "
                f"[conj_lower, conj_upper] (solver: {st_out[i]!r})"
            ),
        )


def _constrained_derivs(
    r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float, rng: np.random.Generator
) -> None:
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

    pts = {"y": y, "u": w[:, 0], **{f"ut{j - 1}": w[:, j] for j in range(1, W)}}
    for fname, gname, ident_name in (
        ("l0", "l0_grad", "l0_grad_fd"),
        ("l0_grad", "l0_hess", "l0_hess_fd"),
        ("cons", "cons_grad", "cons_grad_fd"),
        ("cons_grad", "cons_hess", "cons_hess_fd"),
    ):
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
            what = f"{gname}[..., {c}] vs central difference of {fname} in w[{c}]"
            ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), pts, what)
    ident = r.identity("constrained_convexity")
    for name in ("l0_hess", "cons_hess"):
        H = call(name, w)
        Hs = H.reshape(-1, W, W)
        asym = np.max(np.abs(Hs - np.swapaxes(Hs, -1, -2)), axis=(-1, -2)).reshape(H.shape[:-2])
        mag = np.max(np.abs(Hs), axis=(-1, -2)).reshape(H.shape[:-2])
        tol = atol + rtol * mag
        ident.compare(asym, 0.0, tol, pts, f"{name} must be symmetric (largest |H - H^T|)")
        eig = np.linalg.eigvalsh(0.5 * (Hs + np.swapaxes(Hs, -1, -2))).min(axis=-1).reshape(H.shape[:-2])
        ident.at_least(eig, 0.0, tol, pts, f"{name} must be positive semi-definite (smallest eigenvalue)")
