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
The loss identities are computed in :mod:`mklkit.testing.losses`
(:func:`check_loss`), the regularizer identities in
:mod:`mklkit.testing.regularizers` (:func:`check_regularizer`); both
functions are importable from here.

Identities of a loss :math:`\ell(y, z)` (conjugate in the second argument,
:math:`\ell^*(y, u) = \sup_z uz - \ell(y, z)`; Suzuki & Tomioka 2011, eqs.
(15)-(17), (33)-(35)):

``declaration``
    class attributes (``kind``, ``name``, ``description``, ``params``, ``task``,
    ``jit``, the flags, ``constrained``), ``param_vector``, pickling: the
    checker the registry uses at ``register``
    (:func:`mklkit.declaration.declaration_problems`).
``numba_jit``
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

``declaration``, ``numba_jit``, ``kernel_shapes``, ``conj_domain``
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
``zero_threshold``
    ``zero_threshold(C)`` (the :math:`C_{\max}` of every engine) equals the
    right derivative :math:`\tilde g_C'(0^+)` of a sparse regularizer and is 0
    for a non-sparse one.
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
from typing import Any, Mapping

import numpy as np

from ..components.params import Param, ParamError, UnknownParamError
from ._report import CheckResult, ConformanceReport
from .losses import check_loss
from .regularizers import check_regularizer

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
    "declaration",
    "numba_jit",
    "kernel_shapes",
    "conj_domain",
    "smooth_conjugate_claim",
    "linear_conjugate_claim",
    "convexity",
    "deriv_fd",
    "deriv2_fd",
    "deriv_lipschitz",
    "conj_grad_fd",
    "conj_hess_fd",
    "fenchel_young",
    "conj_sup",
    "conj_unbounded",
    "constrained_shapes",
    "constrained_value",
    "constrained_feasibility",
    "l0_grad_fd",
    "l0_hess_fd",
    "cons_grad_fd",
    "cons_hess_fd",
    "constrained_convexity",
    "labels",
)
"""Names of the identities checked for a loss (constrained ones only when
the loss declares ``constrained``)."""

REGULARIZER_IDENTITIES: tuple[str, ...] = (
    "declaration",
    "numba_jit",
    "kernel_shapes",
    "conj_domain",
    "convexity",
    "value_scaling",
    "sparse_claim",
    "zero_threshold",
    "prox_optimality",
    "prox_numeric",
    "prox_deriv_fd",
    "conj_sup",
    "conj_unbounded",
    "conj_grad_fd",
    "conj_hess_fd",
    "fenchel_young",
    "moreau_decomposition",
    "env_grad_prox",
    "env_hess_prox_deriv",
    "env_min",
    "env_grad_fd",
    "env_hess_fd",
    "weight_value",
    "weight_argmin",
    "bregman_f_fd",
    "bregman_finv",
)
"""Names of the identities checked for a regularizer (Bregman ones only when
the regularizer declares ``bregman``)."""


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------
def check_component(
    component: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6, atol: float = 1e-8
) -> ConformanceReport:
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
    default = (
        p.default
        if isinstance(p.default, (int, float)) and not isinstance(p.default, bool) and math.isfinite(p.default)
        else None
    )
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


def random_params(component: type, rng: np.random.Generator, fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
                raise ValueError(
                    f"{component.__name__}: no valid value of {p.name!r} "
                    f"({p.allowed()}) in {_DRAW_TRIES} draws; last: {last}"
                )
        try:
            component(**point)
        except ParamError as exc:
            last = exc
            continue
        return point
    raise ValueError(
        f"{component.__name__}: no parameter point accepted by the class in "
        f"{_DRAW_TRIES} draws from its declarations; last: {last}"
    )


def parameter_points(
    component: type, *, n_random: int = 3, seed: int = 0, fixed: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
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


def check_parameter_points(
    component: type,
    *,
    n_random: int = 3,
    seed: int = 0,
    fixed: Mapping[str, Any] | None = None,
    n_points: int = 64,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> list[ConformanceReport]:
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
    has_base = bool(points) and all(p.name in (fixed or {}) or not p.required for p in component.params)
    reports = []
    n_drawn = len(points) - (1 if has_base else 0)
    for i, params in enumerate(points):
        report = check_component(component(**params), n_points=n_points, seed=seed, rtol=rtol, atol=atol)
        if has_base and i == 0:
            report.origin = "the given parameters" if fixed else "the default parameters"
        else:
            k = i if has_base else i + 1
            report.origin = f"random parameter point {k} of {n_drawn}"
        reports.append(report)
    return reports
