r"""Conformance kit of components: check a loss or regularizer against its mathematical contract.

Every component, built-in or from a plugin, can be checked with

>>> from mklkit.testing import check_component          # doctest: +SKIP
>>> report = check_component(MyLoss(delta=0.5))         # doctest: +SKIP
>>> print(report)                                       # doctest: +SKIP

or asserted in a test suite with :func:`assert_conforms`;
:func:`check_parameter_points` checks a class at its defaults and at random
parameter points drawn from its ``Param`` declarations (``mklkit
check-plugin`` does this).  A report holds one
:class:`CheckResult` per *identity*: a named property of the contract in
:mod:`mklkit.components.base`, verified at random points drawn from a seeded
:class:`numpy.random.Generator`.  A failing identity names the point where it
broke worst, the size of the error (absolute and relative) and the tolerance.

Identities of a loss :math:`\ell(y, z)` (conjugate in the second argument,
:math:`\ell^*(y, u) = \sup_z uz - \ell(y, z)`; Suzuki & Tomioka 2011, eqs.
(15)-(17), (33)-(35)):

``declaration``
    class attributes (``kind``, ``name``, ``description``, ``params``, ``task``,
    ``kernels``, the flags, ``constrained``), ``param_vector``, pickling: the
    checker the registry uses at ``register``
    (:func:`mklkit.declaration.declaration_problems`).
``numba_kernels``
    every kernel is a numba dispatcher (engines call them from jitted loops).
``kernel_shapes``
    float64 arrays of the right shape, inputs left unchanged; finite values
    for :math:`|z| \lesssim 300` and inside the conjugate's domain, never NaN
    at extreme predictions :math:`|z| = 10^3, 10^6` (a fast-growing loss may
    overflow to ``inf`` there).
``conj_domain``
    ``conj_lower < conj_upper``; :math:`\ell^*` finite inside, ``+inf`` outside,
    never NaN.
``smooth_conjugate_claim``
    a declared smooth conjugate has a gradient that grows without bound at a
    finite end of its domain.
``linear_conjugate_claim``
    a declared ``linear_conjugate`` has a bounded domain :math:`[l, u] \ni 0`,
    :math:`\ell^*(y, 0) = 0` and :math:`\ell^*` linear on :math:`[l, 0]` and
    :math:`[0, u]`.
``convexity``
    :math:`\ell(y,\cdot)` and :math:`\ell^*(y,\cdot)` midpoint convex, ``deriv``
    non-decreasing.
``deriv_fd``, ``deriv2_fd``, ``deriv_lipschitz``
    derivatives against central differences; at kinks ``deriv`` must be a
    subgradient (between the one-sided differences).  ``deriv2`` is compared
    wherever ``deriv`` is locally smooth, for every loss: the contract defines
    it as :math:`\partial_z^2\ell` where that exists (0 only where it does
    not).  With ``smooth_primal``, :math:`|\ell''| \le` ``deriv_lipschitz()``,
    which must be finite.
``conj_grad_fd``, ``conj_hess_fd``
    derivatives of the conjugate against central differences inside the domain.
``fenchel_young``
    :math:`\ell(y,z) + \ell^*(y,u) \ge uz`, with equality at
    :math:`u = \ell'(y,z)` and at :math:`z = \partial_u\ell^*(y,u)`.
``conj_sup``
    :math:`\ell^*` against a numerical supremum (grid + bounded Brent).
``conj_unbounded``
    outside the domain the supremum grows without bound.
``constrained_*``, ``l0_*_fd``, ``cons_*_fd``
    the constrained representation (33): its minimum equals :math:`\ell^*`,
    it is feasible exactly on the domain, its derivatives match central
    differences and its Hessians are symmetric positive semi-definite.
``labels``
    valid labels accepted, invalid ones rejected with
    :class:`~mklkit.components.base.LabelError`.

Identities of a regularizer :math:`\tilde g_C(x) = C g(x^2)` on block norms
:math:`x \ge 0` (§4, eqs. (13), (21)-(23), (42)-(47), Table 3):

``declaration``, ``numba_kernels``, ``kernel_shapes``, ``conj_domain``
    as for losses (domain :math:`[0, r_C]` with ``conj_radius(C)``).
``convexity``
    :math:`\tilde g_C` convex and non-decreasing, :math:`g` concave,
    :math:`\tilde g_C^*` convex and non-decreasing.
``value_scaling``
    :math:`\tilde g_C(x) = C\,\tilde g_1(x)`.
``sparse_claim``
    ``sparse`` is True exactly when :math:`\tilde g_C'(0^+) > 0` (then
    ``prox`` is exactly 0 below that slope); a non-sparse regularizer's right
    difference quotient at 0 must shrink between steps :math:`10^{-3}C` and
    :math:`10^{-12}C` (``lq`` with :math:`q - 1 \lesssim 0.004` cannot be told
    from the block 1-norm in double precision).
``prox_optimality``
    :math:`v - p \in \partial\tilde g_C(p)` checked with one-sided
    differences, :math:`0 \le p \le v`.
``prox_numeric``
    ``prox`` against ``scipy.optimize.minimize_scalar`` (bounded).
``prox_deriv_fd``
    against central differences of ``prox`` (away from kinks), in [0, 1].
``conj_sup``, ``conj_unbounded``, ``conj_grad_fd``, ``conj_hess_fd``
    the conjugate (45) against a numerical supremum over :math:`x \ge 0`.
``fenchel_young``
    inequality; equality at :math:`(p, v - p)` and at
    :math:`(\partial\tilde g_C^*(y), y)`.
``moreau_decomposition``
    :math:`\widehat{\tilde g_C^*}(y) + \tilde g_C(p) + (p-y)^2/2 = y^2/2`
    with :math:`p = \mathrm{prox}(y)`, eq. (23).
``env_min``
    the envelope against :math:`\min_{y'\ge 0}\tilde g_C^*(y') + (y'-y)^2/2`.
``env_grad_prox``, ``env_hess_prox_deriv``, ``env_grad_fd``, ``env_hess_fd``
    :math:`\nabla` envelope = prox, its derivative = prox_deriv, and both
    against central differences.
``weight_value``, ``weight_argmin``
    with :math:`g(t) = \tilde g_1(\sqrt t)` and :math:`d` = ``weight(x)``:
    :math:`g(x^2) = x^2/(2d) + h(d)/2` and :math:`d` minimises the right-hand
    side over :math:`d > 0`, eq. (44); ``d = 0`` is allowed at ``x = 0``.  A
    regularizer whose ``g`` is not concave (``lq`` with :math:`q > 2`) has no
    such form; it declares ``tikhonov_form = False`` and these identities and
    the concavity of ``g`` are skipped.
``bregman_f_fd``, ``bregman_finv``
    :math:`f = F'` and :math:`f^{-1}(f(d)) = d`.

Tolerances.  An identity between computed quantities holds when
:math:`|a - b| \le \mathrm{atol} + \mathrm{rtol}\max(|a|, |b|) + r + e`:
``rtol`` applies to the size of the values compared, never to the terms
they were computed from (Fenchel-Young compares :math:`\ell + \ell^*` with
:math:`uz` at their own size even where :math:`|\ell|` and :math:`|\ell^*|`
are much larger); ``r`` credits each of those terms with a rounding error of
64 ulps, and ``e`` is the error estimate of what was computed numerically
(below).  A derivative is compared with the central difference of step
:math:`h = 10^{-5}\max(|x|, s_x)` (``s_x`` the natural scale: 1 for losses,
``C`` for regularizers) and the tolerance also adds that difference's own error
estimate: the change between steps ``h`` and ``2h`` (truncation) plus
:math:`64\,\epsilon \max|f| / h` (rounding).  A point is treated as lying near
a kink, and skipped by derivative checks, when the second differences with
steps ``h``, ``2h`` and ``4h`` disagree by more than 5 % and by more than a
hundred times their rounding noise (at a smooth point they agree to
:math:`O(h^2)`; a kink within ``h`` makes them differ by at least a third).
Kinks of a loss and of its conjugate are also located on purpose (jumps of
``deriv``/``conj_grad`` on a grid, refined by bisection) and there the
derivative must lie between the one-sided differences (a subgradient).
A numerical optimum is taken over a grid, the bounded Brent refinement and
the component's own candidate (which only sharpens a bound that holds for
any candidate); its error estimate is the rise of the objective over Brent's
final bracket (a bound for a convex objective), and the rounding is that of
the terms at the optimum.  So a conjugate whose supremum is flat out to
:math:`|z| \sim 10^8` (a piecewise-linear loss at an end of its domain) is
compared at the size of :math:`\ell^*`, not of :math:`|uz|` there.  The
minimum of a constrained representation is computed by HiGHS or SLSQP,
credited with :math:`10^{-7}` (:math:`10^{-6}` for SLSQP) of the size of its
data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy import optimize

from ..components.base import (
    CLASSIFICATION,
    BregmanKernels,
    ConstrainedConjugate,
    LabelError,
    LossKernels,
    RegularizerKernels,
)
from ..declaration import declaration_problems, unjitted_problem
from ..components.params import Param, ParamError, UnknownParamError
from ._report import CheckResult, ConformanceReport, _Identity, _Runner

__all__ = [
    "CheckResult",
    "ConformanceReport",
    "check_component",
    "check_loss",
    "check_regularizer",
    "assert_conforms",
    "check_parameter_points",
    "parameter_points",
    "random_params",
    "LOSS_IDENTITIES",
    "REGULARIZER_IDENTITIES",
]

LOSS_IDENTITIES: tuple[str, ...] = (
    "declaration", "numba_kernels", "kernel_shapes", "conj_domain",
    "smooth_conjugate_claim", "linear_conjugate_claim", "convexity", "deriv_fd", "deriv2_fd",
    "deriv_lipschitz", "conj_grad_fd", "conj_hess_fd", "fenchel_young",
    "conj_sup", "conj_unbounded", "constrained_shapes", "constrained_value",
    "constrained_feasibility", "l0_grad_fd", "l0_hess_fd", "cons_grad_fd",
    "cons_hess_fd", "constrained_convexity", "labels",
)
"""Names of the identities checked for a loss (constrained ones only when
the loss declares ``constrained``)."""

REGULARIZER_IDENTITIES: tuple[str, ...] = (
    "declaration", "numba_kernels", "kernel_shapes", "conj_domain", "convexity",
    "value_scaling", "sparse_claim", "zero_threshold", "prox_optimality", "prox_numeric",
    "prox_deriv_fd", "conj_sup", "conj_unbounded", "conj_grad_fd", "conj_hess_fd",
    "fenchel_young", "moreau_decomposition", "env_grad_prox", "env_hess_prox_deriv",
    "env_min", "env_grad_fd", "env_hess_fd", "weight_value",
    "weight_argmin", "bregman_f_fd", "bregman_finv",
)
"""Names of the identities checked for a regularizer (Bregman ones only when
the regularizer declares ``bregman``)."""

_EPS = float(np.finfo(np.float64).eps)
_SQRT_EPS = math.sqrt(_EPS)
_ROUND = 64.0 * _EPS          # relative evaluation error credited to a kernel
_FD_STEP = 1e-5               # relative central-difference step
_SOLVER_RTOL = 1e-7           # relative accuracy credited to the solvers of constrained_value
_KINK_SPREAD = 0.05           # relative disagreement of second differences at a kink
_BIG = 1e300                  # stands for +inf inside scalar solvers


# ---------------------------------------------------------------------------
# Numerical utilities
# ---------------------------------------------------------------------------
def _f64(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


def _arr(out: Any) -> np.ndarray:
    return np.asarray(out, dtype=np.float64)


def _fin(*arrays: Any) -> np.ndarray:
    """Sum of the absolute values of the finite entries (a scale for tolerances)."""
    total = 0.0
    for a in arrays:
        a = np.abs(np.asarray(a, dtype=np.float64))
        total = total + np.where(np.isfinite(a), a, 0.0)
    return np.asarray(total)


def _mag(*arrays: Any) -> np.ndarray:
    """Elementwise largest absolute finite entry: the magnitude of the values compared."""
    top: Any = 0.0
    for a in arrays:
        a = np.abs(np.asarray(a, dtype=np.float64))
        top = np.maximum(top, np.where(np.isfinite(a), a, 0.0))
    return np.asarray(top)


def _tol(rtol: float, atol: float, compared: Sequence[Any], terms: Sequence[Any] = (),
         extra: Any = 0.0) -> np.ndarray:
    """Tolerance of an identity between computed values (see the module docstring).

    ``rtol`` applies to the magnitude of the values compared (``compared``),
    never to the terms they were computed from: a sum of large terms that
    cancel is compared at its own size.  The rounding of those terms (each
    credited with :data:`_ROUND` relative error) and ``extra`` (the error
    estimate of a finite difference, a numerical optimum or a computed
    point) are added on top.
    """
    return atol + rtol * _mag(*compared) + _ROUND * _fin(*terms) + extra


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
        noise = 4 * _ROUND * fmax / hb ** 2
        finite = np.all(np.isfinite(np.stack(list(vals.values()))), axis=0)
        kink = ~finite | ((spread > _KINK_SPREAD * smax) & (spread > 100 * noise))
        dplus = (vals[1] - vals[0]) / ((xb + hb) - xb)
        dminus = (vals[0] - vals[-1]) / (xb - (xb - hb))
    return _FD(d1, err, kink, fmax, dplus, dminus)


def _fd_tol(an: np.ndarray, fd: _FD, rtol: float, atol: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return atol + rtol * np.maximum(np.abs(an), np.abs(fd.d)) + fd.err


def _sensitivity(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                 delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How much ``f`` moves when its (computed) argument moves by ``delta``.

    Returns the spread ``max |f(x +- delta) - f(x)|`` and a mask of the points
    where it is finite.  An identity evaluated at a computed point is only
    checkable up to this spread; where ``f`` jumps to ``inf`` within a few
    ulps (the edge of a domain) it is not checkable at all.
    """
    x = np.asarray(x, dtype=np.float64)
    f0, fp, fm = (_arr(f(_f64(a))) for a in (x, x + delta, np.maximum(x - delta, 0.0)
                                             if np.all(x >= 0) else x - delta))
    with np.errstate(invalid="ignore"):
        spread = np.maximum(np.abs(fp - f0), np.abs(fm - f0))
    same_inf = np.isposinf(f0) & np.isposinf(fp) & np.isposinf(fm)
    spread = np.where(same_inf, 0.0, spread)
    return np.where(np.isfinite(spread), spread, 0.0), np.isfinite(spread) | same_inf


def _ulps(*scales: Any) -> np.ndarray:
    """A few ulps of the largest of ``scales`` (rounding of a computed point)."""
    m = 0.0
    for a in scales:
        m = np.maximum(m, _fin(a))
    return 4.0 * _EPS * m


def _scalar_min(fun: Callable[[float], float], a: float,
                b: float) -> tuple[float, float, float, float]:
    """Bounded Brent minimisation of a scalar function that may return inf.

    Returns ``(x, fun(x), err, dx)``.  :func:`scipy.optimize.fminbound` stops
    once the minimiser is bracketed within ``dx = 2 (sqrt(eps) |x| + xatol/3)``
    of ``x``; for a convex ``fun`` the rise over ``dx`` on the side away from
    the minimiser is at least ``fun(x) - min fun``, so ``err``, the larger
    rise of the two sides, bounds how far the value found lies above the
    minimum (rounding of the values is credited by the callers).
    """
    if not (b > a):
        return a, fun(a), 0.0, 0.0

    def safe(t: float) -> float:
        v = fun(t)
        return v if math.isfinite(v) else _BIG

    xatol = 1e-14 * max(1.0, abs(a), abs(b))
    res = optimize.minimize_scalar(
        safe, bounds=(a, b), method="bounded", options={"xatol": xatol, "maxiter": 500},
    )
    x = float(res.x)
    fx = fun(x)
    dx = 2.0 * (_SQRT_EPS * abs(x) + xatol / 3.0)
    rise = [fun(min(max(t, a), b)) - fx for t in (x - dx, x + dx)] if math.isfinite(fx) else []
    err = max([0.0] + [r for r in rise if math.isfinite(r)])
    return x, fx, err, dx


def _best(cands: list[tuple[float, float]]) -> tuple[float, float]:
    """Largest value among ``(value, arg)`` candidates; ties go to the smallest ``|arg|``.

    A flat supremum (hinge at the end of its domain) is then reported at a
    moderate argument, which keeps the tolerance scale ``|u z|`` honest.
    """
    finite = [c for c in cands if math.isfinite(c[0])]
    if not finite:
        return -math.inf, 0.0
    top = max(c[0] for c in finite)
    near = [c for c in finite if c[0] >= top - 1e-12 * (1.0 + abs(top))]
    val, arg = min(near, key=lambda c: abs(c[1]))
    return top, arg


def _attained(best: float, grid: np.ndarray, vals: np.ndarray, hints: Sequence[float],
              hint_vals: Sequence[float]) -> bool:
    """Whether a numerical supremum over ``grid`` (plus refinements) is trustworthy.

    It is not when the objective still rises at an end of the grid, or when a
    candidate maximiser offered by the component lies beyond the grid and the
    objective cannot be evaluated there (overflow): the supremum is then only
    known from below.
    """
    for e, nb in ((0, 1), (vals.size - 1, vals.size - 2)):
        ve, vn = vals[e], vals[nb]
        if (math.isfinite(ve) and ve >= best - 1e-12 * (1.0 + abs(best))
                and ve - vn > 1e-9 * (1.0 + abs(ve))):
            return False
    extent = float(np.max(np.abs(grid)))
    for t, v in zip(hints, hint_vals):
        if math.isfinite(t) and abs(t) > extent and not math.isfinite(v):
            return False
    return True


def _jumps(xs: np.ndarray, d: np.ndarray, scale: float) -> np.ndarray:
    """Indices ``i`` where ``d`` jumps between ``xs[i]`` and ``xs[i+1]``."""
    delta = np.abs(np.diff(d, axis=-1))
    left = np.concatenate([delta[..., :1] * 0 + np.inf, delta[..., :-1]], axis=-1)
    right = np.concatenate([delta[..., 1:], delta[..., :1] * 0 + np.inf], axis=-1)
    with np.errstate(invalid="ignore"):
        big = (delta > 1e-6 * scale) & (delta > 10 * np.maximum(left, right))
    return big


def _bisect_jumps(fun: Callable[[np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray,
                  fa: np.ndarray, fb: np.ndarray, iters: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Shrink brackets ``[a, b]`` around a jump of ``fun`` to adjacent floats."""
    a, b = a.copy(), b.copy()
    mid = 0.5 * (fa + fb)
    sgn = np.sign(fb - fa)
    for _ in range(iters):
        c = 0.5 * (a + b)
        fc = _arr(fun(_f64(c)))
        left = sgn * (fc - mid) < 0
        a = np.where(left, c, a)
        b = np.where(left, b, c)
    return a, b


def _check_output(ident: _Identity, name: str, out: Any, shape: tuple[int, ...],
                  points: dict[str, Any], allow_inf: bool = False) -> np.ndarray | None:
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


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------
class _LossPoints:
    """Random points for a loss."""

    def __init__(self, loss: Any, rng: np.random.Generator, n: int):
        k = loss.kernels
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


def _declaration(r: _Runner, comp: Any, kind: str) -> None:
    """The declaration, by the checker the registry uses
    (:func:`mklkit.declaration.declaration_problems`)."""
    ident = r.identity("declaration")
    problems = declaration_problems(comp, kind=kind)
    if problems:
        ident.fail("; ".join(problems))
    else:
        ident.note()


def _numba_kernels(r: _Runner, comp: Any) -> None:
    ident = r.identity("numba_kernels")
    problem = unjitted_problem(comp)
    if problem is not None:
        ident.fail(problem)
    else:
        ident.note()


def _loss_shapes(r: _Runner, loss: Any, P: _LossPoints) -> None:
    ident = r.identity("kernel_shapes")
    k, p, y, z, u = loss.kernels, P.p, P.y, P.z, P.u
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
    k, p, y = loss.kernels, P.p, P.y
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
    k, p, y = loss.kernels, P.p, P.y
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
    k, p, y, lo, hi = loss.kernels, P.p, P.y, P.lo, P.hi
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
    k, p, y = loss.kernels, P.p, P.y
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
    k, p, y, z = loss.kernels, P.p, P.y, P.z
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
    k, p, y, z = loss.kernels, P.p, P.y, P.z
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
    k, p, y, z = loss.kernels, P.p, P.y, P.z
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
    k, p, y, u = loss.kernels, P.p, P.y, P.u
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
    k, p, y, z, u = loss.kernels, P.p, P.y, P.z, P.u
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


def _loss_sup_one(k: LossKernels, p: np.ndarray, yi: float, ui: float, hints: Sequence[float]
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
    vals = np.where(np.isnan(vals), -np.inf, vals)
    i = int(np.argmax(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]

    def neg(t: float) -> float:
        return -(ui * t - float(k.value(np.array([yi]), np.array([t]), p)[0]))

    xb, fb, err, _ = _scalar_min(neg, a, b)
    cands = [(float(v), float(g)) for v, g in zip(vals, grid)] + [(-fb, xb)]
    hint_vals = [-neg(t) if math.isfinite(t) else -math.inf for t in hints]
    cands += [(v, t) for t, v in zip(hints, hint_vals) if math.isfinite(t)]
    best, arg = _best(cands)
    ok = _attained(best, grid - yi, vals, [t - yi for t in hints], hint_vals)
    return float(best), float(arg), ok, err, _LOSS_GRID, vals


def _loss_conj_sup(r: _Runner, loss: Any, P: _LossPoints, rtol: float, atol: float) -> None:
    k, p, y, u = loss.kernels, P.p, P.y, P.u
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
    k, p, y = loss.kernels, P.p, P.y
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
    k, p, y = loss.kernels, P.p, P.y
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
        Relative and absolute tolerances (see the module docstring for how
        finite-difference and solver errors are added).

    Returns
    -------
    ConformanceReport
    """
    rng = np.random.default_rng(seed)
    r = _Runner(loss)
    r.run("declaration", _declaration, r, loss, "loss")
    r.run("numba_kernels", _numba_kernels, r, loss)
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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


def _reg_sup_one(k: RegularizerKernels, p: np.ndarray, c: float, yi: float, s: float,
                 hints: Sequence[float]) -> tuple[float, float, bool, float, np.ndarray, np.ndarray]:
    """``sup_{x >= 0} x y - value(x)``: (best, argmax, attained, err, grid, grid values).

    ``err`` bounds how far the supremum may lie above ``best``, as in
    :func:`_loss_sup_one`.
    """
    grid = _f64(s * _REG_GRID)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = yi * grid - _arr(k.value(grid, c, p))
    vals = np.where(np.isnan(vals), -np.inf, vals)
    i = int(np.argmax(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]

    def neg(t: float) -> float:
        return -(yi * t - float(k.value(_f64([t]), c, p)[0]))

    xb, fb, err, _ = _scalar_min(neg, a, b)
    cands = [(float(v), float(g)) for v, g in zip(vals, grid)] + [(-fb, xb)]
    hints = [t for t in hints if math.isfinite(t) and t >= 0]
    hint_vals = [-neg(t) for t in hints]
    cands += list(zip(hint_vals, hints))
    best, arg = _best(cands)
    # x >= 0: only the upper end of the grid can leave the supremum open
    ok = _attained(best, grid, np.concatenate([[-np.inf, -np.inf], vals]), hints, hint_vals)
    return float(best), float(arg), ok, err, grid, vals


def _reg_conj_sup(r: _Runner, reg: Any, P: _RegPoints, rtol: float, atol: float) -> None:
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
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
    k, p = reg.kernels, P.p
    x = np.concatenate([[0.0], np.sort(P.x)[:: max(1, P.x.size // 32)]])
    d = _arr(k.weight(_f64(x), p))
    g = _arr(k.value(_f64(x), 1.0, p))
    pts = {"x": x}
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
    b: BregmanKernels = reg.bregman
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
    rng = np.random.default_rng(seed)
    r = _Runner(reg)
    r.run("declaration", _declaration, r, reg, "regularizer")
    r.run("numba_kernels", _numba_kernels, r, reg)
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


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------
def check_component(component: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6,
                    atol: float = 1e-8) -> ConformanceReport:
    """Check a loss or regularizer against its contract.

    Parameters
    ----------
    component : Loss or Regularizer, instance or class
        A class is instantiated with its default parameters.
    n_points : int
        Number of random points per identity.
    seed : int
        Seed of the random points; the same seed gives the same report.
    rtol, atol : float
        Relative and absolute tolerances.

    Returns
    -------
    ConformanceReport
        ``report.ok`` tells whether every identity held; ``str(report)``
        describes each failure.

    Raises
    ------
    TypeError
        If ``component`` is neither a loss nor a regularizer.
    """
    if isinstance(component, type):
        component = component()
    kind = getattr(component, "kind", None)
    if kind == "loss":
        return check_loss(component, n_points=n_points, seed=seed, rtol=rtol, atol=atol)
    if kind == "regularizer":
        return check_regularizer(component, n_points=n_points, seed=seed, rtol=rtol, atol=atol)
    raise TypeError(
        f"check_component needs a loss or a regularizer (kind 'loss' or 'regularizer'); "
        f"got {type(component).__name__} with kind {kind!r}"
    )


def assert_conforms(component: Any, **kw: Any) -> ConformanceReport:
    """Run :func:`check_component` and raise ``AssertionError(str(report))`` on failure.

    Parameters
    ----------
    component : Loss or Regularizer, instance or class
    **kw
        Passed to :func:`check_component`.

    Returns
    -------
    ConformanceReport
        The (passing) report.
    """
    report = check_component(component, **kw)
    if not report.ok:
        raise AssertionError(str(report))
    return report


# ---------------------------------------------------------------------------
# Parameter points
# ---------------------------------------------------------------------------
#: Draws tried before :func:`random_params` gives up (a constructor that
#: rejects every combination its declarations allow).
_DRAW_TRIES = 100
#: Probability of drawing each closed end of a range exactly (the ends are
#: valid values and often special cases: the elastic net at lam = 0 and 1).
_END_PROBABILITY = 0.15


def _draw_value(p: Param, rng: np.random.Generator) -> Any:
    """One value allowed by ``p``, before validation.

    Ranges with both ends finite are drawn uniformly (open ends kept 2 % of
    the width away), one-sided ranges log-uniformly at a tenth to ten times
    the default's distance from the bound, unbounded ones around the
    default.  Closed ends are drawn exactly with probability
    :data:`_END_PROBABILITY` each.  Floats are rounded to four significant
    digits, so that a printed point reproduces exactly.
    """
    if p.nullable and rng.random() < 0.2:
        return None
    if p.choices is not None:
        return list(p.choices)[int(rng.integers(len(p.choices)))]
    if p.type is bool:
        return bool(rng.random() < 0.5)
    if p.type not in (int, float):
        return p.default  # a free-form string: nothing to draw
    default = p.default if isinstance(p.default, (int, float)) and not isinstance(p.default, bool) \
        and math.isfinite(p.default) else None
    lo, hi = p.low, p.high
    r = rng.random()
    if lo is not None and not p.low_open and r < _END_PROBABILITY:
        x = float(lo)
    elif hi is not None and not p.high_open and r > 1.0 - _END_PROBABILITY:
        x = float(hi)
    elif lo is not None and hi is not None:
        margin = 0.02 * (hi - lo)
        x = rng.uniform(lo + (margin if p.low_open else 0.0), hi - (margin if p.high_open else 0.0))
    elif lo is not None:
        base = default - lo if default is not None and default > lo else 1.0
        x = lo + base * 10.0 ** rng.uniform(-1.0, 1.0)
    elif hi is not None:
        base = hi - default if default is not None and default < hi else 1.0
        x = hi - base * 10.0 ** rng.uniform(-1.0, 1.0)
    else:
        centre = default if default is not None else 0.0
        x = centre + max(1.0, abs(centre)) * rng.normal()
    if p.type is int:
        return int(round(x))
    return float(f"{x:.4g}")


def random_params(component: type, rng: np.random.Generator,
                  fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One random valid parameter point of a component class.

    Every parameter is drawn from its :class:`~mklkit.components.params.Param`
    declaration (type, ``low``/``high`` and whether they are open,
    ``choices``, ``nullable``), except those given in ``fixed``; the point is
    accepted when the class can be built with it (cross-parameter checks
    included).

    Parameters
    ----------
    component : type
        A component class (loss, regularizer, kernel function, engine).
    rng : numpy.random.Generator
    fixed : mapping, optional
        Values kept as given.

    Returns
    -------
    dict
        Parameter name -> value, in declaration order.

    Raises
    ------
    ValueError
        No valid point was found in :data:`_DRAW_TRIES` draws.
    """
    fixed = dict(fixed or {})
    last: Exception | None = None
    for _ in range(_DRAW_TRIES):
        point: dict[str, Any] = {}
        for p in component.params:
            if p.name in fixed:
                point[p.name] = fixed[p.name]
                continue
            for _ in range(_DRAW_TRIES):
                value = _draw_value(p, rng)
                try:
                    point[p.name] = p.validate(value)
                    break
                except ParamError as exc:  # rounding met an open end: draw again
                    last = exc
            else:
                raise ValueError(f"{component.__name__}: no valid value of {p.name!r} "
                                 f"({p.allowed()}) in {_DRAW_TRIES} draws; last: {last}")
        try:
            component(**point)
        except ParamError as exc:
            last = exc
            continue
        return point
    raise ValueError(f"{component.__name__}: no parameter point accepted by the class in "
                     f"{_DRAW_TRIES} draws from its declarations; last: {last}")


def parameter_points(component: type, *, n_random: int = 3, seed: int = 0,
                     fixed: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The parameter points at which to check a component class.

    The default parameters first (with ``fixed`` values instead of the
    defaults; left out when a required parameter is not given), then
    ``n_random`` points of :func:`random_params` that keep ``fixed``;
    repeated points are dropped, so a class without free parameters gives
    one point.  The same arguments give the same points.

    Parameters
    ----------
    component : type
        A component class.
    n_random : int
        Number of random points drawn.
    seed : int
        Seed of the draws.
    fixed : mapping, optional
        Parameter values to check at (each validated by its declaration).

    Returns
    -------
    list of dict
        Complete parameter mappings, in declaration order.

    Raises
    ------
    UnknownParamError, ParamError
        A ``fixed`` name the class does not declare, or a value its
        declaration does not allow.
    ValueError
        ``n_random`` is negative, or no valid random point can be drawn.
    """
    if int(n_random) < 0:
        raise ValueError(f"n_random must be >= 0; got {n_random!r}")
    owner = getattr(component, "name", "") or component.__name__
    declared = {p.name: p for p in component.params}
    given: dict[str, Any] = {}
    for key, value in (fixed or {}).items():
        if key not in declared:
            raise UnknownParamError(key, value, list(declared), owner)
        given[key] = declared[key].validate(value, owner)
    points: list[dict[str, Any]] = []
    if all(p.name in given or not p.required for p in component.params):
        base = {p.name: given.get(p.name, p.default) for p in component.params}
        component(**base)  # cross-parameter checks: a ParamError names the problem
        points.append(base)
    rng = np.random.default_rng([int(seed), 1])
    for _ in range(int(n_random)):
        point = random_params(component, rng, given)
        if point not in points:
            points.append(point)
    return points


def check_parameter_points(component: type, *, n_random: int = 3, seed: int = 0,
                           fixed: Mapping[str, Any] | None = None, n_points: int = 64,
                           rtol: float = 1e-6, atol: float = 1e-8) -> list[ConformanceReport]:
    """Check a loss or regularizer class at its defaults and at random parameter points.

    A bug that shows only away from the defaults (a quantile ``tau`` read
    as ``1 - tau``) passes a check at the defaults; this one draws the
    points of :func:`parameter_points` and checks each with
    :func:`check_component`.  Each report names its point (``origin``) and
    the seed; the component's ``repr`` gives the parameter values, so
    ``check_component(<repr>, seed=<seed>)`` reproduces a failure.

    Parameters
    ----------
    component : type
        A loss or regularizer class.
    n_random : int
        Number of random parameter points besides the defaults.
    seed : int
        Seed of the parameter draws and of the random points of every check.
    fixed : mapping, optional
        Parameter values kept in every point (see :func:`parameter_points`).
    n_points, rtol, atol
        Passed to :func:`check_component`.

    Returns
    -------
    list of ConformanceReport
        One per parameter point, the defaults first.
    """
    points = parameter_points(component, n_random=n_random, seed=seed, fixed=fixed)
    has_base = bool(points) and all(
        p.name in (fixed or {}) or not p.required for p in component.params)
    reports = []
    n_drawn = len(points) - (1 if has_base else 0)
    for i, params in enumerate(points):
        report = check_component(component(**params), n_points=n_points, seed=seed,
                                 rtol=rtol, atol=atol)
        if has_base and i == 0:
            report.origin = "the given parameters" if fixed else "the default parameters"
        else:
            k = i if has_base else i + 1
            report.origin = f"random parameter point {k} of {n_drawn}"
        reports.append(report)
    return reports

