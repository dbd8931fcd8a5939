"""What the loss and regularizer checks share: tolerances, central differences, scalar optima and
suprema, the random points, the check of one kernel output and the identities of every component
(docs/plugins.md §7)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from scipy import optimize

from ..components.base import CLASSIFICATION
from ..declaration import declaration_problems, unjitted_problem
from ._report import _Identity, _Runner

_EPS = float(np.finfo(np.float64).eps)
_SQRT_EPS = math.sqrt(_EPS)
_ROUND = 64.0 * _EPS  # relative evaluation error credited to a kernel
_FD_STEP = 1e-5  # relative central-difference step
_SOLVER_RTOL = 1e-7  # relative accuracy credited to the solvers of constrained_value
_KINK_SPREAD = 0.05  # relative disagreement of second differences at a kink
_BIG = 1e300  # stands for +inf inside scalar solvers


def _f64(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def _arr(out: Any) -> np.ndarray:
    return np.asarray(out, dtype=np.float64)


def _finite_abs(a: Any) -> np.ndarray:
    a = np.abs(np.asarray(a, dtype=np.float64))
    return np.where(np.isfinite(a), a, 0.0)


def _fin(*arrays: Any) -> np.ndarray:
    """Sum of the absolute values of the finite entries (a scale for tolerances)."""
    return np.asarray(sum(map(_finite_abs, arrays), 0.0))


def _mag(*arrays: Any) -> np.ndarray:
    """Elementwise largest absolute finite entry: the magnitude of the values compared."""
    return np.asarray(functools.reduce(np.maximum, map(_finite_abs, arrays), 0.0))


def _tol(rtol: float, atol: float, compared: Sequence[Any], terms: Sequence[Any] = (), extra: Any = 0.0) -> np.ndarray:
    """Tolerance of an identity: ``rtol`` of the values ``compared`` (never of the ``terms`` they
    were computed from), plus the rounding of those terms and ``extra``, an error estimate."""
    return atol + rtol * _mag(*compared) + _ROUND * _fin(*terms) + extra


def _sum_identity(ident, parts, rhs, rtol, atol, points, what, cond=0.0, mask=None, at_least=False) -> None:
    """Require ``sum(parts) == rhs`` (``>=`` with ``at_least``) within :func:`_tol`, ``cond`` added."""
    lhs = sum(parts[1:], parts[0])
    tol = _tol(rtol, atol, (lhs, rhs), (*parts, rhs), cond)
    if at_least:
        ident.at_least(lhs, rhs, tol, points, what, mask=mask)
    else:
        ident.compare(lhs, rhs, tol, points, what, mask=mask)


def _steps(x: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    return _FD_STEP * np.maximum(np.abs(x), scale)


@dataclass
class _FD:
    """Central difference of ``f`` at ``x``: value, error estimate, kink mask."""

    d: np.ndarray
    err: np.ndarray
    kink: np.ndarray
    fmax: np.ndarray
    dplus: np.ndarray
    dminus: np.ndarray


def _central(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, h: np.ndarray) -> _FD:
    """Central differences of a vectorized ``f`` (outputs may carry trailing axes)."""
    vals = {k: _arr(f(_f64(x + k * h))) for k in (-4, -2, -1, 0, 1, 2, 4)}
    extra = vals[0].ndim - x.ndim
    hb = h.reshape(h.shape + (1,) * extra)
    xb = x.reshape(x.shape + (1,) * extra)

    def span(k: int) -> np.ndarray:
        return (xb + k * hb) - (xb - k * hb)

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        d1 = (vals[1] - vals[-1]) / span(1)
        d2 = (vals[2] - vals[-2]) / span(2)
        fmax = np.max(np.abs(np.stack(list(vals.values()))), axis=0)
        rnd = _ROUND * fmax / hb
        err = np.abs(d1 - d2) + rnd
        s = np.stack([(vals[k] - 2 * vals[0] + vals[-k]) / (k * hb) ** 2 for k in (1, 2, 4)])
        spread = np.ptp(s, axis=0)
        smax = np.max(np.abs(s), axis=0)
        noise = 4 * _ROUND * fmax / hb**2
        finite = np.all(np.isfinite(np.stack(list(vals.values()))), axis=0)
        kink = ~finite | ((spread > _KINK_SPREAD * smax) & (spread > 100 * noise))
        dplus = (vals[1] - vals[0]) / ((xb + hb) - xb)
        dminus = (vals[0] - vals[-1]) / (xb - (xb - hb))
    return _FD(d1, err, kink, fmax, dplus, dminus)


def _fd_tol(an: np.ndarray, fd: _FD, rtol: float, atol: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return atol + rtol * np.maximum(np.abs(an), np.abs(fd.d)) + fd.err


def _compare_fd(ident: _Identity, at: Callable, names: tuple[str, str], x, h, rtol, atol, points, mask=True) -> tuple:
    """Compare the kernel ``names[1]`` with the central difference of ``names[0]`` at ``x`` (``at(name, x)``
    evaluates one) within ``mask``, where the difference is finite and away from kinks; ``(values, difference)``."""
    fd = _central(functools.partial(at, names[0]), x, h)
    an = _arr(at(names[1], x))
    what = f"{names[1]} vs central difference of {names[0]}"
    ident.compare(an, fd.d, _fd_tol(an, fd, rtol, atol), points, what, mask=mask & ~fd.kink & np.isfinite(fd.d))
    return an, fd


def _sensitivity(
    f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, delta: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``max |f(x +- delta) - f(x)|``, how far an identity at a computed point ``x`` is checkable,
    and where it is finite (not where ``f`` jumps to ``inf`` within ``delta``)."""
    x = np.asarray(x, dtype=np.float64)
    f0, fp, fm = (_arr(f(_f64(a))) for a in (x, x + delta, np.maximum(x - delta, 0.0) if np.all(x >= 0) else x - delta))
    with np.errstate(invalid="ignore"):
        spread = np.maximum(np.abs(fp - f0), np.abs(fm - f0))
    same_inf = np.isposinf(f0) & np.isposinf(fp) & np.isposinf(fm)
    spread = np.where(same_inf, 0.0, spread)
    return np.where(np.isfinite(spread), spread, 0.0), np.isfinite(spread) | same_inf


def _ulps(*scales: Any) -> np.ndarray:
    """A few ulps of the largest of ``scales`` (rounding of a computed point)."""
    return 4.0 * _EPS * functools.reduce(np.maximum, map(_fin, scales), 0.0)


def _scalar_min(fun: Callable[[float], float], a: float, b: float) -> tuple[float, float, float, float]:
    """Bounded Brent minimisation of a scalar function that may return inf: ``(x, fun(x), err, dx)``.

    Brent stops with the minimiser within ``dx`` of ``x``; for a convex ``fun`` the larger rise
    ``err`` over ``dx`` bounds how far ``fun(x)`` lies above the minimum.
    """
    if not (b > a):
        return a, fun(a), 0.0, 0.0

    def safe(t: float) -> float:
        v = fun(t)
        return v if math.isfinite(v) else _BIG

    xatol = 1e-14 * max(1.0, abs(a), abs(b))
    res = optimize.minimize_scalar(safe, bounds=(a, b), method="bounded", options={"xatol": xatol, "maxiter": 500})
    x = float(res.x)
    fx = fun(x)
    dx = 2.0 * (_SQRT_EPS * abs(x) + xatol / 3.0)
    rise = [fun(min(max(t, a), b)) - fx for t in (x - dx, x + dx)] if math.isfinite(fx) else []
    err = max([0.0] + [r for r in rise if math.isfinite(r)])
    return x, fx, err, dx


def _sup_one(
    g: Callable[[np.ndarray], Any], u: float, at: float, offsets: np.ndarray, hints: Sequence[float], x_min: float
) -> tuple[float, Any, bool, float, np.ndarray, np.ndarray]:
    """``sup_{t >= x_min} u t - g(t)`` on the grid ``at + offsets`` (NaN as ``-inf``), refined by Brent
    and the ``hints``: (best, the size of its terms, attained, err, offsets, grid values), ``err``
    bounding how far the supremum may lie above ``best``."""
    grid = _f64(at + offsets)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = u * grid - _arr(g(grid))

    def neg(t: float) -> float:
        return -(u * t - float(g(_f64([t]))[0]))

    vals = np.where(np.isnan(vals), -np.inf, vals)
    i = int(np.argmax(vals))
    xb, fb, err, _ = _scalar_min(neg, grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)])
    hints = [t for t in hints if math.isfinite(t) and t >= x_min]
    hint_vals = [-neg(t) for t in hints]
    cands = [(float(v), float(x)) for v, x in zip(vals, grid)] + [(-fb, xb)] + list(zip(hint_vals, hints))
    # a flat supremum is reported at a moderate argument: ties go to the smallest |t|
    finite = [c for c in cands if math.isfinite(c[0])]
    best = max(c[0] for c in finite) if finite else -math.inf
    near = [c for c in finite if c[0] >= best - 1e-12 * (1.0 + abs(best))]
    arg = min(near, key=lambda c: abs(c[1]))[1] if finite else 0.0
    # over t >= x_min > -inf only the upper end of the grid can leave the supremum open
    ends = vals if x_min == -math.inf else np.concatenate([[-np.inf, -np.inf], vals])
    ok = _attained(best, grid - at, ends, [t - at for t in hints], hint_vals)
    return float(best), abs(u * arg) + _fin(float(g(_f64([arg]))[0])), ok, err, offsets, vals


def _attained(
    best: float, grid: np.ndarray, vals: np.ndarray, hints: Sequence[float], hint_vals: Sequence[float]
) -> bool:
    """Whether a numerical supremum is attained: not when the objective still rises at an end of
    the grid, or a hint beyond the grid cannot be evaluated (then it is known only from below)."""
    for e, nb in ((0, 1), (vals.size - 1, vals.size - 2)):
        ve, vn = vals[e], vals[nb]
        if math.isfinite(ve) and ve >= best - 1e-12 * (1.0 + abs(best)) and ve - vn > 1e-9 * (1.0 + abs(ve)):
            return False
    extent = float(np.max(np.abs(grid)))
    for t, v in zip(hints, hint_vals):
        if math.isfinite(t) and abs(t) > extent and not math.isfinite(v):
            return False
    return True


def _sup_checks(ident, cv, found, points, rtol, atol, what, what_below) -> None:
    """``cv`` against numerical suprema ``found``, rows ``(best, size of its terms, attained, err)``:
    equal where attained, else at least ``best`` (rtol of the values compared only: a flat supremum
    may lie at ``|z| ~ 1e8`` where the conjugate is of order 1)."""
    sup, terms, attained, err = (np.array(col) for col in zip(*found))
    tol = _tol(rtol, atol, (cv, sup), (terms,), err)
    ident.compare(cv, sup, tol, points, what, mask=attained.astype(bool))
    ident.at_least(cv, sup, tol, points, what_below, mask=~attained.astype(bool))


def _sup_within(offsets: np.ndarray, vals: np.ndarray, s: float) -> tuple[float, float]:
    """The largest of ``vals`` over ``|offsets| <= 1e3 s`` and over ``1e6 s``."""
    return tuple(float(np.max(np.where(np.abs(offsets) <= f * s, vals, -np.inf))) for f in (1e3, 1e6))


def _check_output(
    ident: _Identity, name: str, out: Any, shape: tuple[int, ...], points: dict[str, Any], allow_inf: bool = False
) -> np.ndarray | None:
    """Dtype/shape/finiteness of one kernel output; returns it as an array."""
    if not isinstance(out, np.ndarray):
        ident.fail(f"{name} returned {type(out).__name__}, expected a float64 ndarray of shape {shape}")
        return None
    if out.dtype != np.float64:
        ident.fail(f"{name} returned dtype {out.dtype}, expected float64")
        return None
    if out.shape != shape:
        ident.fail(f"{name} returned shape {out.shape}, expected {shape}")
        return None
    flat = out.reshape(shape[0], -1) if out.ndim else out.reshape(1, 1)
    ok = ~np.isnan(flat).any(axis=1)
    if not allow_inf:
        ok &= np.isfinite(flat).all(axis=1)
    ident.require(ok, points, f"{name} is NaN" if allow_inf else f"{name} is not finite")
    return out


def _begin(comp: Any, kind: str, seed: int) -> tuple[np.random.Generator, _Runner]:
    """The random generator and the runner of one check, after the ``declaration`` and ``numba_jit`` identities."""
    rng = np.random.default_rng(seed)
    r = _Runner(comp)
    r.run("declaration", lambda: r.identity("declaration").verdict(declaration_problems(comp, kind=kind)))
    r.run("numba_jit", lambda: r.identity("numba_jit").verdict(unjitted_problem(comp)))
    return rng, r


class _LossPoints:
    """Random points for a loss."""

    def __init__(self, loss: Any, rng: np.random.Generator, n: int):
        k = self.k = loss.jit
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
        z[third : 2 * third] = y[third : 2 * third] + rng.uniform(-1.5, 1.5, third)
        m = n - 2 * third
        z[2 * third :] = rng.choice([-1.0, 1.0], m) * 10.0 ** rng.uniform(-3.0, 2.5, m)
        self.z = _f64(z)
        lo = self.lo = _arr(k.conj_lower(self.y, self.p))
        hi = self.hi = _arr(k.conj_upper(self.y, self.p))
        flo, fhi = np.isfinite(lo), np.isfinite(hi)
        both = flo & fhi
        width = np.where(both, hi - lo, 1.0)
        t = rng.uniform(0.02, 0.98, n)
        mag = 10.0 ** rng.uniform(-1.5, 1.5, n)
        u = np.where(
            both,
            lo + width * t,
            np.where(
                flo, lo + mag, np.where(fhi, hi - mag, rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-2.0, 1.5, n))
            ),
        )
        delta = np.maximum(1.0, np.where(both, width, 1.0)) * rng.uniform(0.05, 1.0, n)
        side_hi = rng.random(n) < 0.5
        out = np.where(fhi & (side_hi | ~flo), hi + delta, lo - delta)
        self.out_mask = flo | fhi
        self.u, self.u_out = _f64(u), _f64(np.where(self.out_mask, out, 0.0))

    def at(self, name: str, a: np.ndarray) -> Any:
        """The kernel ``name`` at the labels ``y`` and ``a``."""
        return getattr(self.k, name)(self.y, a, self.p)

    def with_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(y, u): the points inside the domain, then the finite lower and upper ends."""
        ys, us = [self.y], [self.u]
        for b in (self.lo, self.hi):
            fb = np.isfinite(b)
            ys.append(self.y[fb])
            us.append(b[fb])
        return np.concatenate(ys), np.concatenate(us)


@dataclass
class _RegView:
    """Rows with a value of ``C`` each, over the values ``Cs``."""

    C: np.ndarray
    Cs: list[float]
    p: np.ndarray
    k: Any

    def groups(self) -> list[tuple[float, np.ndarray]]:
        return [(c, np.flatnonzero(self.C == c)) for c in self.Cs]

    def view(self, C: np.ndarray) -> _RegView:
        """Rows with the values ``C``."""
        return _RegView(C, self.Cs, self.p, self.k)

    def by_C(self, fn: Callable[..., Any], a: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """``fn(values, C, params)`` group-wise; rows outside ``mask`` are NaN."""
        a = np.asarray(a, dtype=np.float64)
        out = np.full(a.shape, np.nan)
        for c, idx in self.groups():
            if mask is not None:
                idx = idx[mask[idx]]
            if idx.size:
                out[idx] = _arr(fn(_f64(a[idx]), c, self.p))
        return out

    def at(self, name: str, a: np.ndarray) -> np.ndarray:
        """The kernel ``name`` of the regularizer group-wise."""
        return self.by_C(getattr(self.k, name), a)


class _RegPoints(_RegView):
    """Random points for a regularizer, grouped by ``C``."""

    def __init__(self, reg: Any, rng: np.random.Generator, n: int, C: Any):
        self.p, self.k = _f64(reg.param_vector), reg.jit
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
