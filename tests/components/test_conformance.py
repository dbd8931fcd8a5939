"""Every registered loss and regularizer conforms to its contract.

Components are taken from the plugin registry (built-ins and installed
plugins alike) and checked with :mod:`mklkit.testing`; ``hypothesis`` picks
the seeds of the random points, the regularization constants and parameter
values.  The second half tests the kit's own API on the reference components
of ``conftest.py``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from mklkit.components.base import Loss, Regularizer
from mklkit.testing import (
    LOSS_IDENTITIES,
    REGULARIZER_IDENTITIES,
    CheckResult,
    ConformanceReport,
    assert_conforms,
    check_component,
    check_loss,
    check_regularizer,
)

from .conftest import (
    REFERENCE_COMPONENTS,
    RefElasticNet,
    RefElasticNetBregman,
    RefEpsInsensitive,
    RefLogistic,
    RefSquared,
)

N_POINTS = 24

# A seed is not worth shrinking, and the example database would only write
# files into the tree.
FEW = settings(max_examples=3, deadline=None, database=None,
               phases=(Phase.explicit, Phase.generate),
               suppress_health_check=[HealthCheck.too_slow])

seeds = st.integers(min_value=0, max_value=2**32 - 1)
Cs = st.lists(st.floats(min_value=0.05, max_value=5.0), min_size=1, max_size=3)


def registered(kind: str) -> list[tuple[str, type]]:
    """(name, class) of every registered component of ``kind``."""
    try:
        from mklkit.plugins import get_registry
    except ImportError:  # registry not available: the built-in tuples
        from mklkit.components.losses import BUILTIN_LOSSES
        from mklkit.components.regularizers import BUILTIN_REGULARIZERS

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


def _param_values(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    """Values inside the declared range of every numeric parameter.

    Open lower bounds keep a margin of 0.1 (``q -> 1`` is the block 1-norm,
    which no finite-precision check can tell apart from ``q = 1 + 1e-9``);
    unbounded ranges are cut to a span of 4; subnormal values are left out
    (an elastic net with ``lam = 5e-324`` has a conjugate that overflows).
    """
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for p in cls.params:
        if p.type is not float or p.choices is not None:
            continue
        lo = p.low if p.low is not None else (p.high - 4.0 if p.high is not None else -2.0)
        hi = p.high if p.high is not None else lo + 4.0
        if p.low is not None and p.low_open:
            lo = lo + 0.1
        if p.high is not None and p.high_open:
            hi = hi - 0.1
        fields[p.name] = st.floats(min_value=lo, max_value=hi, allow_subnormal=False)
    return st.fixed_dictionaries(fields)


_WITH_PARAMS = [(kind, n, c) for (kind, n), c in _CLASSES.items()
                if any(p.type is float for p in c.params)]


@pytest.mark.parametrize("kind, name, cls", _WITH_PARAMS, ids=[f"{k}:{n}" for k, n, _ in _WITH_PARAMS])
@FEW
@given(data=st.data(), seed=seeds)
def test_drawn_parameters_conform(kind, name, cls, data, seed):
    params = data.draw(_param_values(cls), label="params")
    component = cls(**params)
    report = _check(component, seed, data.draw(Cs, label="C") if kind == "regularizer" else None)
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
    assert _identities(smooth) == [i for i in LOSS_IDENTITIES
                                   if not i.startswith(("constrained", "l0_", "cons_"))]


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
    assert [(x.identity, x.worst_error) for x in a.checks] == \
        [(x.identity, x.worst_error) for x in b.checks]
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
        kernels = RefSquared.kernels._replace(conj=conj_off)

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
    with pytest.raises(TypeError, match="needs a loss or a regularizer"):
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
        kernels = RefElasticNet.kernels._replace(prox=prox_shifted, env_grad=prox_shifted)

    bad = check_regularizer(Shifted(lam=0.0), n_points=N_POINTS, C=[0.25])
    assert bad["prox_optimality"].point["C"] == 0.25


def test_components_are_base_class_instances():
    # the kit dispatches on ``kind``; the registry's classes derive from the contracts
    for _, cls in LOSSES:
        assert issubclass(cls, Loss)
    for _, cls in REGULARIZERS:
        assert issubclass(cls, Regularizer)
