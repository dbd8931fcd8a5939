"""Every registered loss and regularizer conforms to its contract.

Components are taken from the plugin registry (built-ins and installed
plugins alike) and checked with :mod:`mklkit.testing`, at their defaults and
at random parameter points drawn from their declarations
(:func:`mklkit.testing.check_parameter_points`); ``hypothesis`` picks the
seeds and the regularization constants.  The second half tests the kit's own
API on the reference components of ``conftest.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from mklkit.components.base import Loss, Regularizer
from mklkit.components.params import Param, ParamError, UnknownParamError
from mklkit.testing import (
    LOSS_IDENTITIES,
    REGULARIZER_IDENTITIES,
    CheckResult,
    ConformanceReport,
    assert_conforms,
    check_component,
    check_loss,
    check_parameter_points,
    check_regularizer,
    parameter_points,
    random_params,
)

from .test_broken_components import SwappedPinball
from .conftest import (
    REFERENCE_COMPONENTS,
    RefElasticNet,
    RefElasticNetBregman,
    RefEpsInsensitive,
    RefLogistic,
    RefPinball,
    RefSquared,
)

N_POINTS = 24

# A seed is not worth shrinking, and the example database would only write
# files into the tree.
FEW = settings(
    max_examples=3,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow],
)

seeds = st.integers(min_value=0, max_value=2**32 - 1)
Cs = st.lists(st.floats(min_value=0.05, max_value=5.0), min_size=1, max_size=3)


def registered(kind: str) -> list[tuple[str, type]]:
    """(name, class) of every registered component of ``kind``."""
    try:
        from mklkit.plugins import get_registry
    except ImportError:  # registry not available: the built-in tuples
        from mklkit.components.losses import BUILTIN_LOSSES
        from mklkit.builtin import BUILTIN_REGULARIZERS

        classes = BUILTIN_LOSSES if kind == "loss" else BUILTIN_REGULARIZERS
        return [(cls.name, cls) for cls in classes]
    reg = get_registry()
    return [(name, reg.get(kind, name)) for name in reg.names(kind)]


LOSSES = registered("loss")
REGULARIZERS = registered("regularizer")
_CLASSES = {("loss", n): c for n, c in LOSSES} | {("regularizer", n): c for n, c in REGULARIZERS}

VARIANTS = [
    ("loss", "eps_insensitive", {"eps": 0.0}),
    ("loss", "eps_insensitive", {"eps": 0.1}),
    ("regularizer", "elasticnet", {"lam": 0.0}),
    ("regularizer", "elasticnet", {"lam": 0.3}),
    ("regularizer", "elasticnet", {"lam": 1.0}),
    ("regularizer", "lq", {"q": 1.5}),
    ("regularizer", "lq", {"q": 2.0}),
    ("regularizer", "lq", {"q": 3.0}),
    ("regularizer", "kl", {"d0": 0.5}),
    ("regularizer", "kl", {"d0": 1.0}),
    ("regularizer", "kl", {"d0": 2.0}),
]


def _variant_id(v: tuple[str, str, dict[str, Any]]) -> str:
    return v[1] + "(" + ",".join(f"{k}={x:g}" for k, x in v[2].items()) + ")"


def _check(component: Any, seed: int, C: list[float] | None = None) -> ConformanceReport:
    if component.kind == "regularizer":
        return check_regularizer(component, n_points=N_POINTS, seed=seed, C=C)
    return check_loss(component, n_points=N_POINTS, seed=seed)


# ---------------------------------------------------------------------------
# registered components
# ---------------------------------------------------------------------------
def test_registry_has_the_builtins():
    assert {"hinge", "logistic", "squared", "eps_insensitive"} <= {n for n, _ in LOSSES}
    assert {"l1", "elasticnet", "lq", "uniform", "kl"} <= {n for n, _ in REGULARIZERS}


@pytest.mark.parametrize("name, cls", LOSSES, ids=[n for n, _ in LOSSES])
@FEW
@given(seed=seeds)
@example(seed=0)
def test_registered_loss_conforms(name, cls, seed):
    report = _check(cls(), seed)
    assert report.ok, str(report)


@pytest.mark.parametrize("name, cls", REGULARIZERS, ids=[n for n, _ in REGULARIZERS])
@FEW
@given(seed=seeds, C=Cs)
@example(seed=0, C=[0.05, 1.0, 5.0])
@example(seed=0, C=[0.05])
def test_registered_regularizer_conforms(name, cls, seed, C):
    report = _check(cls(), seed, C)
    assert report.ok, str(report)


@pytest.mark.parametrize("variant", VARIANTS, ids=[_variant_id(v) for v in VARIANTS])
@FEW
@given(seed=seeds, C=Cs)
@example(seed=0, C=[0.05, 1.0, 5.0])
@example(seed=0, C=[0.05])
def test_parameter_variant_conforms(variant, seed, C):
    kind, name, params = variant
    cls = _CLASSES.get((kind, name))
    if cls is None:
        pytest.skip(f"no {kind} {name!r} registered")
    report = _check(cls(**params), seed, C)
    assert report.ok, str(report)


@pytest.mark.parametrize(
    "kind, name, cls",
    [
        pytest.param(k, n, c, marks=pytest.mark.slow if (k, n) == ("loss", "eps_insensitive") else ())
        for (k, n), c in _CLASSES.items()
    ],
    ids=[f"{k}:{n}" for k, n in _CLASSES],
)
@FEW
@given(seed=seeds)
@example(seed=0)
def test_registered_component_conforms_at_random_parameter_points(kind, name, cls, seed):
    for report in check_parameter_points(cls, n_random=3, seed=seed, n_points=N_POINTS):
        assert report.ok, str(report)


# ---------------------------------------------------------------------------
# the kit itself, on the reference components
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("component", REFERENCE_COMPONENTS, ids=repr)
@FEW
@given(seed=seeds)
def test_reference_components_conform(component, seed):
    report = check_component(component, n_points=N_POINTS, seed=seed)
    assert report.ok, str(report)


def _identities(report: ConformanceReport) -> list[str]:
    return [c.identity for c in report.checks]


def test_loss_identities_are_all_checked():
    with_constraints = check_component(RefEpsInsensitive(), n_points=N_POINTS)
    assert _identities(with_constraints) == list(LOSS_IDENTITIES)
    smooth = check_component(RefSquared(), n_points=N_POINTS)
    assert _identities(smooth) == [i for i in LOSS_IDENTITIES if not i.startswith(("constrained", "l0_", "cons_"))]


def test_regularizer_identities_are_all_checked():
    with_bregman = check_component(RefElasticNetBregman(), n_points=N_POINTS)
    assert _identities(with_bregman) == list(REGULARIZER_IDENTITIES)
    plain = check_component(RefElasticNet(), n_points=N_POINTS)
    assert _identities(plain) == [i for i in REGULARIZER_IDENTITIES if not i.startswith("bregman")]


def test_checks_count_their_points():
    report = check_component(RefLogistic(), n_points=N_POINTS)
    for res in report.checks:
        assert isinstance(res, CheckResult)
        assert res.passed and res.point is None
        assert res.worst_error <= res.tolerance or res.worst_error == 0.0
    n = int(report["deriv_fd"].detail.split()[0])
    assert n >= N_POINTS


def test_check_component_accepts_a_class_and_is_deterministic():
    a = check_component(RefLogistic, n_points=N_POINTS, seed=7)
    b = check_component(RefLogistic(), n_points=N_POINTS, seed=7)
    assert a.component == RefLogistic()
    assert str(a) == str(b)
    assert [(x.identity, x.worst_error) for x in a.checks] == [(x.identity, x.worst_error) for x in b.checks]
    c = check_component(RefLogistic(), n_points=N_POINTS, seed=8)
    assert [x.worst_error for x in a.checks] != [x.worst_error for x in c.checks]


def test_report_text_has_one_line_per_identity():
    report = check_component(RefElasticNet(lam=0.3), n_points=N_POINTS)
    lines = str(report).splitlines()
    assert lines[0] == "conformance of regularizer 'ref_elasticnet' (RefElasticNet(lam=0.3)): OK"
    body = lines[1:]
    assert len(body) == len(report.checks)
    for line, res in zip(body, report.checks):
        assert line.split()[:2] == ["PASS", res.identity]
    assert report.ok and report.failures == []


def test_assert_conforms_passes_and_raises_with_the_report():
    assert assert_conforms(RefSquared(), n_points=N_POINTS).ok

    from numba import njit

    @njit(cache=False)
    def conj_off(y, u, params):
        return 0.5 * u * u + u * y + 1.0

    class Off(RefSquared):
        name = "off"
        conj = staticmethod(conj_off)

    with pytest.raises(AssertionError) as info:
        assert_conforms(Off(), n_points=N_POINTS, seed=3)
    message = str(info.value)
    assert message == str(check_component(Off(), n_points=N_POINTS, seed=3))
    assert "FAIL  conj_sup" in message and "FAILED" in message.splitlines()[0]


def test_report_lookup_by_identity():
    report = check_component(RefSquared(), n_points=N_POINTS)
    assert report["fenchel_young"].identity == "fenchel_young"
    with pytest.raises(KeyError):
        report["no_such_identity"]


@pytest.mark.parametrize("thing", [object(), 3.0, "hinge"])
def test_check_component_rejects_non_components(thing):
    with pytest.raises(TypeError, match="needs a loss, a regularizer, a weighting or a multiclass loss"):
        check_component(thing)


def test_check_regularizer_rejects_bad_C():
    with pytest.raises(ValueError, match="C must be positive and finite"):
        check_regularizer(RefElasticNet(), C=[1.0, 0.0])


def test_explicit_C_values_are_used():
    report = check_regularizer(RefElasticNet(lam=0.0), n_points=N_POINTS, C=[0.25])
    assert report.ok, str(report)
    # a failure at C = 0.25 reports that C
    from numba import njit

    @njit(cache=False)
    def prox_shifted(v, C, params):
        return np.maximum(v - 1.5 * C, 0.0)

    class Shifted(RefElasticNet):
        name = "shifted"
        prox = env_grad = staticmethod(prox_shifted)

    bad = check_regularizer(Shifted(lam=0.0), n_points=N_POINTS, C=[0.25])
    assert bad["prox_optimality"].point["C"] == 0.25


def test_components_are_base_class_instances():
    # the kit dispatches on ``kind``; the registry's classes derive from the contracts
    for _, cls in LOSSES:
        assert issubclass(cls, Loss)
    for _, cls in REGULARIZERS:
        assert issubclass(cls, Regularizer)


# ---------------------------------------------------------------------------
# parameter points
# ---------------------------------------------------------------------------
class _Knobs(RefSquared):
    """Every kind of declaration a parameter can have."""

    name = "knobs"
    params = (
        Param("closed", 0.5, "in [0, 1]", low=0.0, high=1.0),
        Param("open", 0.5, "in (0, 1)", low=0.0, high=1.0, low_open=True, high_open=True),
        Param("positive", 2.0, "> 0", low=0.0, low_open=True),
        Param("above", 3.0, ">= 1", low=1.0),
        Param("below", -1.0, "< 0", high=0.0, high_open=True),
        Param("free", 0.0, "any number"),
        Param("count", 3, "an integer >= 1", type=int, low=1),
        Param("flag", True, "a flag", type=bool),
        Param("mode", "a", "a choice", type=str, choices=("a", "b", "c")),
        Param("limit", None, "optional", type=int, low=1, nullable=True),
    )


def test_parameter_points_start_at_the_defaults_and_respect_every_declaration():
    points = parameter_points(_Knobs, n_random=40, seed=3)
    assert points[0] == {p.name: p.default for p in _Knobs.params}
    assert len(points) == 41
    for point in points:
        assert list(point) == [p.name for p in _Knobs.params]
        for p in _Knobs.params:
            assert p.validate(point[p.name]) == point[p.name]
        _Knobs(**point)
    drawn = points[1:]
    assert all(0.0 < q["open"] < 1.0 for q in drawn)
    assert all(q["positive"] > 0.0 for q in drawn)
    assert all(type(q["count"]) is int and type(q["flag"]) is bool for q in drawn)
    # the points spread over the ranges, closed ends and every choice included
    assert {0.0, 1.0} <= {q["closed"] for q in drawn}
    assert len({q["positive"] for q in drawn}) > 30
    assert {q["mode"] for q in drawn} == {"a", "b", "c"}
    assert {q["flag"] for q in drawn} == {True, False}
    assert None in {q["limit"] for q in drawn} and any(q["limit"] is not None for q in drawn)
    # floats are printed exactly: four significant digits
    assert all(float(f"{q['free']:.4g}") == q["free"] for q in drawn)


def test_parameter_points_are_reproducible_and_keep_fixed_values():
    a = parameter_points(_Knobs, n_random=5, seed=11)
    assert a == parameter_points(_Knobs, n_random=5, seed=11)
    assert a[1:] != parameter_points(_Knobs, n_random=5, seed=12)[1:]
    fixed = parameter_points(_Knobs, n_random=5, seed=11, fixed={"open": 0.2, "mode": "c"})
    assert fixed[0] == {**a[0], "open": 0.2, "mode": "c"}
    assert all(q["open"] == 0.2 and q["mode"] == "c" for q in fixed)
    assert len({q["positive"] for q in fixed}) == 6
    # a class without parameters has one point
    assert parameter_points(RefSquared, n_random=5, seed=0) == [{}]
    assert parameter_points(_Knobs, n_random=0) == [a[0]]


@pytest.mark.parametrize(
    "fixed, error, match",
    [
        (
            {"tua": 0.2},
            UnknownParamError,
            r"ref_pinball: unknown parameter 'tua' \(did you mean 'tau'\?\); allowed: one of tau",
        ),
        ({"tau": 1.5}, ParamError, r"ref_pinball: tau must be a number in \(0, 1\); got 1.5"),
        ({"tau": "abc"}, ParamError, r"tau must be a number in \(0, 1\); got 'abc'"),
    ],
)
def test_parameter_points_reject_bad_fixed_values(fixed, error, match):
    with pytest.raises(error, match=match):
        parameter_points(RefPinball, fixed=fixed)


def test_random_params_respect_cross_parameter_checks():
    class Ordered(RefSquared):
        name = "ordered"
        params = (Param("a", 1.0, "", low=0.0, high=10.0), Param("b", 2.0, "", low=0.0, high=10.0))

        def _check(self):
            if not self.a < self.b:
                raise ParamError("b", self.b, f"a number > a = {self.a}", self.name)

    rng = np.random.default_rng(0)
    for _ in range(30):
        point = random_params(Ordered, rng)
        assert point["a"] < point["b"]

    class Impossible(Ordered):
        name = "impossible"

        def _check(self):
            raise ParamError("b", self.b, "nothing", self.name)

    with pytest.raises(ValueError, match="no parameter point accepted by the class in 100 draws"):
        random_params(Impossible, rng)
    with pytest.raises(ValueError, match="n_random must be >= 0"):
        parameter_points(Ordered, n_random=-1)


def test_a_bug_away_from_the_defaults_is_caught_at_random_parameter_points():
    assert check_component(SwappedPinball, n_points=N_POINTS, seed=0).ok  # tau = 0.5
    reports = check_parameter_points(SwappedPinball, n_random=3, seed=4, n_points=N_POINTS)
    assert [r.origin for r in reports] == [
        "the default parameters",
        "random parameter point 1 of 3",
        "random parameter point 2 of 3",
        "random parameter point 3 of 3",
    ]
    assert reports[0].ok
    failed = [r for r in reports if not r.ok]
    assert failed
    for r in failed:
        assert r.component.tau != 0.5
        assert {"conj_domain", "conj_unbounded"} <= {c.identity for c in r.failures}
        head = str(r).splitlines()[0]
        # the point and the seed that reproduce the failure
        assert head.startswith(
            f"conformance of loss 'swapped_pinball' (SwappedPinball(tau={r.component.tau!r})) at {r.origin}: "
        )
        assert head.endswith("FAILED (seed 4)")
        again = check_component(SwappedPinball(tau=r.component.tau), n_points=N_POINTS, seed=4)
        assert str(again).splitlines()[1:] == str(r).splitlines()[1:]
    # given parameters are checked as they are
    given = check_parameter_points(SwappedPinball, n_random=0, seed=4, fixed={"tau": 0.2}, n_points=N_POINTS)
    assert len(given) == 1 and given[0].origin == "the given parameters" and not given[0].ok
