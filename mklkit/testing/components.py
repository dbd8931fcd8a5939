r"""Conformance kit of components: check a loss or regularizer against its mathematical contract.

:func:`check_component` (or :func:`assert_conforms`) checks one instance, :func:`check_parameter_points`
a class at its defaults and at random parameter points of its ``Param`` declarations.  The identities
(:data:`LOSS_IDENTITIES`, :data:`REGULARIZER_IDENTITIES`) and their tolerances are described in
docs/plugins.md §7; they are computed in :mod:`mklkit.testing.losses` and
:mod:`mklkit.testing.regularizers`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..components.params import Param, ParamError, UnknownParamError
from ._report import CheckResult, ConformanceReport, _assert_ok
from .losses import check_loss
from .regularizers import check_regularizer
from .multiclass_losses import MULTICLASS_LOSS_IDENTITIES, check_multiclass_loss
from .weightings import WEIGHTING_IDENTITIES, check_weighting

__all__ = [
    "CheckResult",
    "ConformanceReport",
    "check_component",
    "check_loss",
    "check_regularizer",
    "check_weighting",
    "check_multiclass_loss",
    "MULTICLASS_LOSS_IDENTITIES",
    "WEIGHTING_IDENTITIES",
    "assert_conforms",
    "check_parameter_points",
    "parameter_points",
    "random_params",
    "LOSS_IDENTITIES",
    "REGULARIZER_IDENTITIES",
]

#: The identities of a loss (the constrained ones only when it declares ``constrained``).
LOSS_IDENTITIES: tuple[str, ...] = tuple(
    """declaration numba_jit kernel_shapes conj_domain smooth_conjugate_claim linear_conjugate_claim
    convexity deriv_fd deriv2_fd deriv_lipschitz conj_grad_fd conj_hess_fd fenchel_young conj_sup
    conj_unbounded constrained_shapes constrained_value constrained_feasibility l0_grad_fd l0_hess_fd
    cons_grad_fd cons_hess_fd constrained_convexity labels""".split()
)

#: The identities of a regularizer (the Bregman ones only when it declares ``bregman``).
REGULARIZER_IDENTITIES: tuple[str, ...] = tuple(
    """declaration numba_jit kernel_shapes conj_domain convexity value_scaling sparse_claim zero_threshold
    prox_optimality prox_numeric prox_deriv_fd conj_sup conj_unbounded conj_grad_fd conj_hess_fd
    fenchel_young moreau_decomposition env_grad_prox env_hess_prox_deriv env_min env_grad_fd env_hess_fd
    weight_value weight_argmin bregman_f_fd bregman_finv""".split()
)


def check_component(
    component: Any, *, n_points: int = 64, seed: int = 0, rtol: float = 1e-6, atol: float = 1e-8
) -> ConformanceReport:
    """Check a loss, regularizer, weighting or multiclass loss against its contract (a multiclass loss:
    :func:`check_multiclass_loss`; a weighting: :func:`check_weighting`, its
    weights compared to the relative tolerance ``rtol``).

    Parameters
    ----------
    component : Loss, Regularizer or Weighting, instance or class
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
        ``report.ok`` tells whether every identity held; ``str(report)`` describes each failure.

    Raises
    ------
    TypeError
        If ``component`` is not a loss, a regularizer or a weighting.
    """
    if isinstance(component, type):
        component = component()
    kind = getattr(component, "kind", None)
    if kind not in ("loss", "regularizer", "weighting", "multiclass_loss"):
        raise TypeError(
            f"check_component needs a loss, a regularizer, a weighting or a multiclass loss (kind 'loss', "
            f"'regularizer', 'weighting' or 'multiclass_loss'); got {type(component).__name__} with kind {kind!r}"
        )
    if kind == "weighting":
        return check_weighting(component, seed=seed, wtol=rtol)
    if kind == "multiclass_loss":
        return check_multiclass_loss(component, n_points=n_points, seed=seed, rtol=rtol, atol=atol)
    check = check_loss if kind == "loss" else check_regularizer
    return check(component, n_points=n_points, seed=seed, rtol=rtol, atol=atol)


def assert_conforms(component: Any, **kw: Any) -> ConformanceReport:
    """Run :func:`check_component` (``kw`` passed on) and raise ``AssertionError(str(report))`` on failure."""
    return _assert_ok(check_component(component, **kw))


_DRAW_TRIES = 100  # draws before random_params gives up
#: Probability of drawing each closed end of a range (often a special case: the elastic net at lam = 0, 1).
_END_PROBABILITY = 0.15


def _draw_value(p: Param, rng: np.random.Generator) -> Any:
    """One value allowed by ``p``, before validation: uniform on a finite range (open ends 2 %
    away), log-uniform around the default on a one-sided one, closed ends with probability
    :data:`_END_PROBABILITY` each; floats to four digits, so that a printed point reproduces."""
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

    Each parameter not in ``fixed`` is drawn from its :class:`~mklkit.components.params.Param`
    declaration; the point is kept when the class accepts it (cross-parameter checks included).

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

    The defaults first (``fixed`` values instead; left out when a required parameter is not
    given), then ``n_random`` points of :func:`random_params` that keep ``fixed``, repeats dropped.

    Returns
    -------
    list of dict
        Complete parameter mappings, in declaration order.

    Raises
    ------
    UnknownParamError, ParamError
        A ``fixed`` name the class does not declare, or a value its declaration does not allow.
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
    """Check a loss or regularizer class with :func:`check_component` at each of its :func:`parameter_points`.

    A bug away from the defaults (a quantile ``tau`` read as ``1 - tau``) passes at the defaults.
    Each report names its point (``origin``) and the seed; ``check_component(<repr>, seed=<seed>)``
    reproduces a failure.  Returns one report per point, the defaults first.
    """
    points = parameter_points(component, n_random=n_random, seed=seed, fixed=fixed)
    has_base = bool(points) and all(p.name in (fixed or {}) or not p.required for p in component.params)
    reports = []
    for i, params in enumerate(points):
        report = check_component(component(**params), n_points=n_points, seed=seed, rtol=rtol, atol=atol)
        if has_base and i == 0:
            report.origin = "the given parameters" if fixed else "the default parameters"
        else:
            report.origin = f"random parameter point {i + (not has_base)} of {len(points) - has_base}"
        reports.append(report)
    return reports
