"""The plugin registry, the built-in plugin, the scaffold and the plugin tutorial."""

from __future__ import annotations

import importlib
import pickle
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pluggy
import pytest
from numba import njit

import mklkit
import mklkit.builtin
from mklkit import plugins as plugins_mod
from mklkit.components.base import Loss, Regularizer
from mklkit.components.params import Param, ParamError
from mklkit.engines.base import Engine
from mklkit.plugins import (
    DISABLE_ENV,
    BrokenPlugin,
    ComponentValidationError,
    DuplicateComponentError,
    PluginWarning,
    Registry,
    UnknownComponentError,
    format_listing,
    get_registry,
    hookimpl,
    reset_registry,
)
from mklkit.scaffold import new_plugin

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# Fake components (the real built-ins are tested elsewhere)
# ---------------------------------------------------------------------------
@njit(cache=True)
def _nop(a, b, c):  # never called: registration only checks that it is jitted
    return a


def _py_nop(a, b, c):
    return a


#: Every kernel method of a loss, of its constrained form, of a regularizer: a jitted no-op.
LOSS_KERNELS = dict.fromkeys(Loss.KERNELS, staticmethod(_nop))
CONSTRAINED_KERNELS = dict.fromkeys(Loss.CONSTRAINED_KERNELS, staticmethod(_nop))
REG_KERNELS = dict.fromkeys(Regularizer.KERNELS, staticmethod(_nop))

FakeHinge = type(
    "FakeHinge",
    (Loss,),
    {
        "__module__": __name__,
        "name": "hinge",
        "description": "fake hinge",
        "smooth_conjugate": False,
        "n_cons": 2,
        **LOSS_KERNELS,
        **CONSTRAINED_KERNELS,
    },
)
FakeLogistic = type(
    "FakeLogistic",
    (Loss,),
    {"__module__": __name__, "name": "logistic", "description": "fake logistic", **LOSS_KERNELS},
)
FakeHuber = type(
    "FakeHuber",
    (Loss,),
    {
        "__module__": __name__,
        "name": "huber_fake",
        "description": "fake huber with a parameter",
        "task": "regression",
        "params": (Param("delta", 1.0, "kink", low=0.0, low_open=True),),
        **LOSS_KERNELS,
    },
)
OtherHinge = type(
    "OtherHinge", (Loss,), {"__module__": __name__, "name": "hinge", "description": "another hinge", **LOSS_KERNELS}
)
FakeL1 = type("FakeL1", (Regularizer,), {"__module__": __name__, "name": "l1", "description": "fake l1", **REG_KERNELS})


class FakeEngine(Engine):
    name = "fake_engine"
    description = "fake engine"

    def solve(self, problem, callback=None):
        raise NotImplementedError


def make_plugin(modname: str, *classes: type) -> types.ModuleType:
    """A plugin module whose hook registers ``classes``."""
    mod = types.ModuleType(modname)

    @hookimpl
    def mklkit_register_components(register):
        for cls in classes:
            register(cls)

    mod.mklkit_register_components = mklkit_register_components
    return mod


class FakeDist:
    def __init__(self, name: str, version: str):
        self.name = name
        self.version = version
        self.metadata = {"Name": name}


class FakeEntryPoint:
    """Stands for an importlib.metadata.EntryPoint of the ``mklkit`` group."""

    def __init__(
        self,
        name: str,
        target: Any = None,
        error: BaseException | None = None,
        dist: str = "",
        version: str = "1.0",
        value: str | None = None,
    ):
        self.name = name
        self.value = value or f"{name}_pkg.plugin"
        self.group = "mklkit"
        self.dist = FakeDist(dist or f"mklkit-{name}", version)
        self._target = target
        self._error = error
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        if self._error is not None:
            raise self._error
        return self._target


@pytest.fixture
def fake_core(monkeypatch):
    """Make mklkit.builtin register fake components (the real ones are tested apart)."""

    @hookimpl
    def mklkit_register_components(register):
        for cls in (FakeHinge, FakeLogistic, FakeL1, FakeEngine):
            register(cls)

    monkeypatch.setattr(mklkit.builtin, "mklkit_register_components", mklkit_register_components)
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def reg() -> Registry:
    r = Registry()
    r.register_plugin(
        make_plugin("core_fake", FakeHinge, FakeLogistic, FakeHuber, FakeL1), "mklkit", "0.1.0", name="mklkit"
    )
    return r


# ---------------------------------------------------------------------------
# Import cost
# ---------------------------------------------------------------------------
def test_importing_the_plugin_modules_loads_no_numerics() -> None:
    code = (
        "import sys, mklkit.plugins, mklkit.hookspecs, mklkit.scaffold\n"
        "heavy = [m for m in ('numpy', 'numba', 'scipy', 'mklkit.builtin') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_hookimpl_is_the_mklkit_marker() -> None:
    assert plugins_mod.hookimpl.project_name == "mklkit"
    from mklkit.hookspecs import hookspec

    assert hookspec.project_name == "mklkit"


# ---------------------------------------------------------------------------
# Registration records and lookups
# ---------------------------------------------------------------------------
def test_registration_records_kind_name_dist_version_module(reg: Registry) -> None:
    reg.register_plugin(make_plugin("eng_pkg.plugin", FakeEngine), "mklkit-eng", "2.3")
    (record,) = reg.registrations("engine")
    assert (record.kind, record.name, record.cls) == ("engine", "fake_engine", FakeEngine)
    assert (record.dist, record.version, record.module) == ("mklkit-eng", "2.3", __name__)
    assert record.plugin == "eng_pkg.plugin"
    assert reg.registration("loss", "hinge").dist == "mklkit"
    assert reg.names("loss") == ["hinge", "huber_fake", "logistic"]
    assert reg.get("regularizer", "l1") is FakeL1
    assert [r.kind for r in reg.registrations()] == ["loss"] * 3 + ["regularizer", "engine"]


def test_register_returns_the_class_so_it_works_as_a_decorator() -> None:
    seen = []
    mod = types.ModuleType("deco")

    @hookimpl
    def mklkit_register_components(register):
        seen.append(register(FakeL1))

    mod.mklkit_register_components = mklkit_register_components
    Registry().register_plugin(mod, "x")
    assert seen == [FakeL1]


def test_unknown_component_says_did_you_mean_and_lists_the_available(reg: Registry) -> None:
    with pytest.raises(UnknownComponentError) as info:
        reg.get("loss", "hindge")
    assert str(info.value) == ("unknown loss 'hindge' (did you mean 'hinge'?); available: hinge, huber_fake, logistic")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
    assert info.value.available == ["hinge", "huber_fake", "logistic"]
    assert str(pickle.loads(pickle.dumps(info.value))) == str(info.value)
    with pytest.raises(UnknownComponentError, match=r"^unknown engine 'spicy'; available: none$"):
        reg.get("engine", "spicy")
    with pytest.raises(UnknownComponentError, match=r"unknown component kind 'lose' \(did you mean 'loss'\?\)"):
        reg.names("lose")


def test_create_from_a_name_a_mapping_or_an_instance(reg: Registry) -> None:
    assert isinstance(reg.create("loss", "hinge"), FakeHinge)
    huber = reg.create("loss", {"name": "huber_fake", "delta": 2})
    assert isinstance(huber, FakeHuber) and huber.delta == 2.0
    assert reg.create("loss", huber) is huber


@pytest.mark.parametrize(
    "spec, error, match",
    [
        ({"name": "huber_fake", "delta": -1}, ParamError, r"huber_fake: delta must be a number > 0; got -1"),
        ({"name": "huber_fake", "delt": 1}, ParamError, r"huber_fake: .*'delt'.*\(did you mean 'delta'\?\)"),
        (
            {"delta": 1},
            ParamError,
            r"loss: name must be given: a loss spec names its loss \(one of hinge, huber_fake, logistic\)",
        ),
        ({"name": 3}, ParamError, r"loss: name must be a string naming a loss; got 3"),
        (3.5, ParamError, r"loss must be a loss name or a mapping with a 'name' key; got 3.5"),
        ("hubber_fake", UnknownComponentError, r"did you mean 'huber_fake'"),
    ],
    ids=["bad-value", "unknown-param", "no-name", "name-not-str", "not-a-spec", "unknown-name"],
)
def test_create_rejects_bad_specs(reg: Registry, spec: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        reg.create("loss", spec)


# ---------------------------------------------------------------------------
# Duplicates
# ---------------------------------------------------------------------------
def test_duplicate_name_names_both_distributions_and_registers_nothing(reg: Registry) -> None:
    other = make_plugin("other_pkg.plugin", FakeEngine, OtherHinge)
    with pytest.raises(DuplicateComponentError) as info:
        reg.register_plugin(other, "mklkit-other", "9.9")
    message = str(info.value)
    assert "loss 'hinge' is provided twice" in message
    assert "mklkit 0.1.0 (module tests.test_plugins" in message or f"(module {__name__}" in message
    assert "mklkit-other 9.9" in message
    assert info.value.first.dist == "mklkit" and info.value.second.dist == "mklkit-other"
    # all or nothing: the engine registered before the clash is gone too
    assert reg.names("engine") == []
    assert reg.get("loss", "hinge") is FakeHinge
    assert not reg.plugin_manager.is_registered(other)


def test_duplicate_within_one_plugin_is_an_error() -> None:
    with pytest.raises(DuplicateComponentError, match="by distribution solo 1.0.*by distribution solo 1.0"):
        Registry().register_plugin(make_plugin("solo", FakeHinge, OtherHinge), "solo", "1.0")


# ---------------------------------------------------------------------------
# Loading entry points: broken, disabled, the core
# ---------------------------------------------------------------------------
def test_broken_plugin_gives_one_warning_and_the_rest_loads() -> None:
    bad = FakeEntryPoint("bad", error=ImportError("no module named 'scipy_nightly'"), version="0.2")
    good = FakeEntryPoint("good", target=make_plugin("good_pkg.plugin", FakeHuber))
    with pytest.warns(PluginWarning) as record:
        reg = Registry.load([bad, good], builtin=False, disabled=())
    assert len(record) == 1
    text = str(record[0].message)
    assert "'bad'" in text and "mklkit-bad 0.2" in text
    assert "ImportError: no module named 'scipy_nightly'" in text
    assert f"{DISABLE_ENV}=bad" in text
    assert reg.broken == [BrokenPlugin("bad", "mklkit-bad", ImportError(), "0.2")]
    assert reg.broken[0].message == "ImportError: no module named 'scipy_nightly'"
    assert reg.names("loss") == ["huber_fake"]
    listing = format_listing(reg)
    assert "broken plugins" in listing
    assert "bad (mklkit-bad 0.2): ImportError: no module named 'scipy_nightly'" in listing


@pytest.mark.parametrize(
    "plugin, match",
    [
        (make_plugin("dup_pkg", FakeHinge, FakeHinge), "DuplicateComponentError"),
        (make_plugin("bad_pkg", int), "ComponentValidationError"),
    ],
    ids=["duplicate", "invalid"],
)
def test_a_plugin_failing_at_registration_is_broken_too(plugin, match) -> None:
    eps = [FakeEntryPoint("x", target=plugin), FakeEntryPoint("y", target=make_plugin("y", FakeL1))]
    with pytest.warns(PluginWarning, match=match):
        reg = Registry.load(eps, builtin=False, disabled=())
    assert [b.name for b in reg.broken] == ["x"]
    assert reg.names("loss") == [] and reg.names("regularizer") == ["l1"]


def test_strict_load_raises_the_plugin_error() -> None:
    bad = FakeEntryPoint("bad", error=RuntimeError("boom"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeError, match="boom"):
            Registry.load([bad], builtin=False, disabled=(), strict=True)


def test_disable_env_var_skips_entry_points_without_importing_them(monkeypatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, " bad , mklkit-other-dist")
    bad = FakeEntryPoint("bad", error=ImportError("would warn"))
    by_dist = FakeEntryPoint("z", target=make_plugin("z", FakeL1), dist="mklkit_other.dist")
    good = FakeEntryPoint("good", target=make_plugin("good", FakeHuber))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = Registry.load([bad, by_dist, good], builtin=False)
    assert bad.loads == 0 and by_dist.loads == 0 and good.loads == 1
    assert reg.disabled == ["bad", "z"]
    assert reg.plugin_manager.is_blocked("bad")
    assert reg.broken == [] and reg.names("loss") == ["huber_fake"]
    assert reg.names("regularizer") == []
    assert f"disabled plugins ({DISABLE_ENV}): bad, z" in format_listing(reg)
    with pytest.raises(ValueError, match="plugin 'bad' is disabled"):
        reg.register_plugin(make_plugin("bad", FakeL1), "d", name="bad")


def test_the_core_is_registered_first_and_once(fake_core) -> None:
    core_ep = FakeEntryPoint("mklkit", error=AssertionError("loaded twice"), dist="mklkit", value="mklkit.builtin")
    clash = FakeEntryPoint("clash", target=make_plugin("clash_pkg.plugin", OtherHinge))
    with pytest.warns(PluginWarning, match="loss 'hinge' is provided twice"):
        reg = Registry.load([clash, core_ep], disabled=())
    assert core_ep.loads == 0
    record = reg.registration("loss", "hinge")
    assert (record.cls, record.dist, record.version) == (FakeHinge, "mklkit", mklkit.__version__)
    assert reg.plugins["mklkit"] == ("mklkit", mklkit.__version__)
    # without mklkit's own entry point (a source tree), the core loads anyway
    reg2 = Registry.load([], disabled=())
    assert reg2.names("loss") == ["hinge", "logistic"]


def test_the_core_cannot_be_disabled(fake_core) -> None:
    with pytest.warns(PluginWarning, match="cannot be disabled"):
        reg = Registry.load([], disabled=["mklkit"])
    assert reg.names("engine") == ["fake_engine"]


def test_builtin_failures_are_loud(monkeypatch) -> None:
    @hookimpl
    def mklkit_register_components(register):
        raise ImportError("cannot import name 'Spicy'")

    monkeypatch.setattr(mklkit.builtin, "mklkit_register_components", mklkit_register_components)
    with pytest.raises(ImportError, match="Spicy"):
        Registry.load([], disabled=())


def test_installed_entry_points_include_the_example_plugin() -> None:
    reg = Registry.load(builtin=False, disabled=())
    record = reg.registration("loss", "huber")
    assert (record.dist, record.version, record.plugin) == ("mklkit-huber", "0.1.0", "huber")
    assert reg.get("loss", "squared_hinge").__module__ == "mklkit_huber.losses"
    assert reg.broken == []


def test_get_registry_is_process_wide_and_lists_the_example_plugin(fake_core) -> None:
    reg = get_registry()
    assert get_registry() is reg
    assert reg.registration("loss", "huber").provider == "mklkit-huber 0.1.0"
    assert reg.registration("loss", "hinge").provider == f"mklkit {mklkit.__version__}"
    listing = format_listing(reg)
    assert re.search(r"^loss\s+huber\s+mklkit-huber 0\.1\.0\s+Huber loss", listing, re.M)
    assert "delta=1.0 (a number > 0): residual at which the loss turns linear" in listing
    # temporary registrations into the global registry are undone in finally
    name = reg.register_plugin(make_plugin("tmp_pkg", FakeHuber), "mklkit-tmp", "0.0.1")
    try:
        assert reg.registration("loss", "huber_fake").dist == "mklkit-tmp"
    finally:
        reg.unregister_plugin(name)
    assert "huber_fake" not in reg.names("loss")
    assert "tmp_pkg" not in reg.plugins
    reset_registry()
    assert get_registry() is not reg


def test_get_registry_refuses_reentry_from_a_plugin(monkeypatch) -> None:
    @hookimpl
    def mklkit_register_components(register):
        get_registry()

    monkeypatch.setattr(mklkit.builtin, "mklkit_register_components", mklkit_register_components)
    reset_registry()
    try:
        with pytest.raises(RuntimeError, match="while the mklkit registry is being built"):
            get_registry()
    finally:
        reset_registry()


def test_unregister_unknown_plugin(reg: Registry) -> None:
    with pytest.raises(ValueError, match="no plugin named 'nope' is registered; registered: mklkit"):
        reg.unregister_plugin("nope")


def test_provided_by_accepts_plugin_or_distribution_names() -> None:
    reg = Registry()
    reg.register_plugin(make_plugin("p", FakeHuber, FakeL1), "mklkit-extra", "1", name="extra")
    assert [r.name for r in reg.provided_by("extra")] == ["huber_fake", "l1"]
    assert [r.name for r in reg.provided_by("mklkit_extra")] == ["huber_fake", "l1"]
    assert reg.provided_by("other") == []


# ---------------------------------------------------------------------------
# Validation at registration
# ---------------------------------------------------------------------------
def _subclass(base: type, **attrs: Any) -> type:
    defaults: dict[str, Any] = {"name": "thing", "description": "a thing", "__module__": "bad_mod"}
    if base is Loss:
        defaults.update(LOSS_KERNELS)
    if base is Regularizer:
        defaults.update(REG_KERNELS)
    defaults.update(attrs)
    return type("Thing", (base,), defaults)


class NotAComponent:
    kind = "loss"
    name = "plain"
    description = "not derived from Loss"


VALIDATION_CASES = [
    (FakeHinge(), r"register\(\) takes a component class; got FakeHinge\(\)"),
    (
        _subclass(Loss, kind="losss"),
        r"kind must be one of 'loss', 'regularizer', 'kernel', 'engine', 'weighting', 'multiclass_loss'; got 'losss'",
    ),
    (NotAComponent, r"loss .*NotAComponent must be a subclass of mklkit.components.base.Loss"),
    (_subclass(Loss, name=""), r"lacks 'name' \(a non-empty string\)"),
    (_subclass(Loss, name="two words"), r"name 'two words' is not allowed: use letters"),
    (_subclass(Loss, description=None), r"lacks 'description' \(a non-empty string\)"),
    (
        _subclass(Loss, conj_grad=None),
        r"bad_mod.Thing lacks the kernel method conj_grad: a loss needs value, deriv, conj, "
        r"conj_grad, conj_lower, conj_upper, each a @kernel method of \(y, z, params\)",
    ),
    (
        _subclass(Loss, conj=staticmethod(_py_nop), deriv=staticmethod(_py_nop)),
        r"deriv, conj must be numba-jitted functions \(@kernel methods",
    ),
    (_subclass(Loss, task="ranking"), r"task must be 'classification' or 'regression'; got 'ranking'"),
    (
        _subclass(Loss, smooth_conjugate=False, n_cons=1),
        r"has smooth_conjugate=False but lacks the kernel methods l0, l0_grad, l0_hess, cons, "
        r"cons_grad, cons_hess: the constrained form \(SpicyMKL eq. 33\) needs ",
    ),
    (
        _subclass(Loss, **{**CONSTRAINED_KERNELS, "l0_hess": None}),
        r"lacks the kernel method l0_hess: the constrained form",
    ),
    (_subclass(Loss, smooth_conjugate=False, **CONSTRAINED_KERNELS), r"n_cons must be an integer >= 1; got 0"),
    (
        _subclass(Loss, params=(Param("delta", 0.0, low=0.0, low_open=True),)),
        r"parameter 'delta' has default 0.0, which its own declaration does not allow \(a number > 0\)",
    ),
    (_subclass(Loss, params=[Param("a", 1.0)]), r"'params' must be a tuple of mklkit.components.params.Param"),
    (_subclass(Loss, params=(Param("a", 1.0), Param("a", 2.0))), r"declares parameter\(s\) a twice"),
    (
        _subclass(Regularizer, prox=None, weight=None),
        r"lacks the kernel methods prox, weight: a regularizer needs value, prox, prox_deriv, "
        r"conj, conj_grad, conj_hess, env, weight, penalty",
    ),
    (
        _subclass(Regularizer, bregman_F=staticmethod(_nop)),
        r"lacks the kernel methods bregman_f, bregman_finv, bregman_d0: a Bregman form needs ",
    ),
    (_subclass(Engine), r"engine bad_mod.Thing does not implement solve\(problem, callback\)"),
]


@pytest.mark.parametrize("cls, match", VALIDATION_CASES, ids=[m[:40] for _, m in VALIDATION_CASES])
def test_registration_validates_the_contract(cls: Any, match: str) -> None:
    reg = Registry()
    with pytest.raises(ComponentValidationError, match=match) as info:
        reg.register_plugin(make_plugin("bad_pkg.plugin", FakeL1, cls), "mklkit-bad", "0.3")
    assert str(info.value).startswith("plugin 'bad_pkg.plugin' (mklkit-bad 0.3): ")
    assert "\n" not in str(info.value)
    assert reg.registrations() == [] and reg.plugins == {}


def test_several_problems_are_reported_together() -> None:
    cls = _subclass(Loss, name="", description="", value=None)
    with pytest.raises(
        ComponentValidationError, match="lacks 'name'.*; lacks 'description'.*; lacks the kernel method value"
    ):
        Registry().register_plugin(make_plugin("p", cls), "d")


def test_kernel_functions_are_validated() -> None:
    functions = pytest.importorskip("mklkit.kernels.functions")
    base = functions.KernelFunction

    class NoGram(base):
        name = "nogram"
        description = "neither uses nor gram"

    class Uses(base):
        name = "uses"
        description = "uses sqdist"
        uses = "sqdist"

        def from_base(self, b, out):
            return out

    reg = Registry()
    with pytest.raises(ComponentValidationError, match="must override gram\\(\\) or set 'uses'"):
        reg.register_plugin(make_plugin("k", NoGram), "d")
    reg.register_plugin(make_plugin("k2", Uses), "d")
    assert reg.get("kernel", "uses") is Uses


def test_hook_without_hookimpl_marker_is_reported() -> None:
    mod = types.ModuleType("undecorated")
    mod.mklkit_register_components = lambda register: register(FakeL1)
    with pytest.raises(pluggy.PluginValidationError, match="not decorated with @hookimpl"):
        Registry().register_plugin(mod, "mklkit-undecorated")


def test_hook_with_wrong_arguments_or_unknown_name_is_rejected() -> None:
    wrong_args = types.ModuleType("wrong_args")

    @hookimpl
    def mklkit_register_components(registrar):
        pass

    wrong_args.mklkit_register_components = mklkit_register_components
    reg = Registry()
    with pytest.raises(pluggy.PluginValidationError, match="registrar"):
        reg.register_plugin(wrong_args, "d")

    unknown = types.ModuleType("unknown_hook")

    @hookimpl
    def mklkit_register_everything(register):
        pass

    unknown.mklkit_register_everything = mklkit_register_everything
    with pytest.raises(pluggy.PluginValidationError, match="unknown hook 'mklkit_register_everything'"):
        reg.register_plugin(unknown, "d")
    assert reg.plugin_manager.get_plugins() == set()


# ---------------------------------------------------------------------------
# The real built-ins (once every built-in module exists)
# ---------------------------------------------------------------------------
def test_real_builtins_register_through_the_hook() -> None:
    pytest.importorskip("mklkit.engines.spicy")
    reg = Registry.load([], disabled=())
    for kind in ("loss", "regularizer", "kernel", "engine"):
        names = reg.names(kind)
        assert names, kind
        assert {reg.registration(kind, n).dist for n in names} == {"mklkit"}
    assert "hinge" in reg.names("loss") and "l1" in reg.names("regularizer")
    assert "spicy" in reg.names("engine")


# ---------------------------------------------------------------------------
# Scaffold
# ---------------------------------------------------------------------------
def _import_scaffolded(folder: Path, package: str):
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return importlib.import_module(f"{package}.plugin")


def _forget(folder: Path, package: str) -> None:
    sys.path.remove(str(folder))
    for mod in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[mod]


def test_new_loss_plugin_loads_and_its_kernels_run(tmp_path: Path) -> None:
    folder = new_plugin("demo_loss", tmp_path)
    assert folder == tmp_path / "mklkit-demo-loss"
    pyproject = (folder / "pyproject.toml").read_text()
    assert 'name = "mklkit-demo-loss"' in pyproject
    assert '[project.entry-points.mklkit]\ndemo_loss = "mklkit_demo_loss.plugin"' in pyproject
    test_text = (folder / "tests" / "test_demo_loss.py").read_text()
    assert "assert_conforms(DemoLoss())" in test_text
    plugin = _import_scaffolded(folder, "mklkit_demo_loss")
    try:
        reg = Registry()
        reg.register_plugin(plugin, "mklkit-demo-loss", "0.1.0")
        loss = reg.create("loss", {"name": "demo_loss", "scale": 2.0})
        k, p = loss.jit, loss.param_vector
        y = np.array([0.0, 1.0, -2.0])
        z = np.array([0.5, -1.0, 3.0])
        np.testing.assert_allclose(k.value(y, z, p), (z - y) ** 2)
        u = k.deriv(y, z, p)  # Fenchel-Young equality at the derivative
        np.testing.assert_allclose(k.value(y, z, p) + k.conj(y, u, p), u * z)
        np.testing.assert_allclose(k.conj_grad(y, u, p), z)
        assert loss.deriv_lipschitz() == 2.0
    finally:
        _forget(folder, "mklkit_demo_loss")


def test_new_regularizer_plugin_loads_and_its_kernels_run(tmp_path: Path) -> None:
    folder = new_plugin("grp", tmp_path, kind="regularizer")
    plugin = _import_scaffolded(folder, "mklkit_grp")
    try:
        reg = Registry()
        reg.register_plugin(plugin, "mklkit-grp", "0.1.0")
        r = reg.create("regularizer", "grp")
        assert type(r).__name__ == "GrpRegularizer"
        k, p, C = r.jit, r.param_vector, 0.7
        y = np.array([0.0, 0.3, 0.7, 1.5, 4.0])
        prox = k.prox(y, C, p)
        # Moreau decomposition: env(y) + value(prox) + (prox - y)^2 / 2 = y^2 / 2
        np.testing.assert_allclose(k.env(y, C, p) + k.value(prox, C, p) + 0.5 * (prox - y) ** 2, 0.5 * y**2)
        # Tikhonov form: g(x^2) = min_d x^2/(2d) + h(d)/2 at d = weight(x)
        x = np.array([0.5, 1.0, 3.0])
        d = k.weight(x, p)
        np.testing.assert_allclose(x**2 / (2 * d) + k.penalty(d, p) / 2, x)
    finally:
        _forget(folder, "mklkit_grp")


def test_scaffolded_plugins_conform(tmp_path: Path) -> None:
    testing = pytest.importorskip("mklkit.testing")
    for name, kind, package in (("sc_loss", "loss", "mklkit_sc_loss"), ("sc_reg", "regularizer", "mklkit_sc_reg")):
        folder = new_plugin(name, tmp_path, kind=kind)
        plugin = _import_scaffolded(folder, package)
        try:
            reg = Registry()
            reg.register_plugin(plugin, folder.name)
            testing.assert_conforms(reg.create(kind, name))
            for report in testing.check_parameter_points(reg.get(kind, name), n_random=5, seed=0):
                assert report.ok, str(report)
            test_text = (folder / "tests" / f"test_{name}.py").read_text()
            assert "check_parameter_points(" in test_text
        finally:
            _forget(folder, package)


def test_new_plugin_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "mklkit-taken").mkdir()
    with pytest.raises(FileExistsError, match="mklkit-taken already exists; choose another plugin name"):
        new_plugin("taken", tmp_path)
    assert list((tmp_path / "mklkit-taken").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mklkit-taken"]  # no staging left


@pytest.mark.parametrize("name", ["My-Loss", "1loss", "", "loss_", "ünï", "a" * 41, "two words"])
def test_new_plugin_validates_the_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(
        ValueError, match=r"plugin name .* is not allowed: use lowercase letters, digits and underscores"
    ):
        new_plugin(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_new_plugin_validates_the_kind(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"plugin kind must be one of 'loss', 'regularizer'; got 'engine'"):
        new_plugin("fast", tmp_path, kind="engine")


# ---------------------------------------------------------------------------
# The tutorial quotes the example plugin verbatim
# ---------------------------------------------------------------------------
def test_tutorial_code_is_copied_from_the_example_plugin() -> None:
    doc = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- from: (\S+) -->\n```[a-z]*\n(.*?)```", doc, re.S)
    assert len(blocks) >= 4
    for path, block in blocks:
        source = (ROOT / path).read_text(encoding="utf-8")
        for chunk in block.split("\n...\n"):
            assert chunk.strip("\n") in source, f"docs/plugins.md block from {path} is not in it"


def test_a_component_declaring_kernel_tuples_instead_of_methods_is_refused() -> None:
    """``jit``, ``constrained`` and ``bregman`` are derived from the kernel methods: a class
    that assigns them is refused when it is defined, saying what to write instead."""
    for base, attrs in (
        (Loss, {"jit": FakeLogistic.jit}),
        (Loss, {"constrained": FakeHinge.constrained, **LOSS_KERNELS}),
        (Regularizer, {"bregman": None, **REG_KERNELS}),
    ):
        with pytest.raises(
            TypeError,
            match=r"old_mod.OldStyle assigns '(jit|constrained|bregman)': "
            r"a component writes its numerics as @kernel methods",
        ):
            type("OldStyle", (base,), {"__module__": "old_mod", "name": "old", **attrs})
    loss = FakeLogistic()
    with pytest.raises(AttributeError, match="'jit' of FakeLogistic is derived from its @kernel"):
        loss.jit = FakeHinge.jit
    assert FakeLogistic.jit.conj is _nop and FakeLogistic.constrained is None
    assert FakeHinge.constrained.l0 is _nop
