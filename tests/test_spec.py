"""Spec parsing and validation (mklkit.spec), without the command line."""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mklkit.plugins import DISABLE_ENV, get_registry, reset_registry
from mklkit.spec import DEFAULTS, SpecError, json_schema, load_spec, parse_bytes, parse_override, parse_spec

SPECS = Path(__file__).resolve().parent.parent / "specs"

TINY = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}]},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.5},
    "engine": {"name": "spicy", "tol": 1e-3, "max_iter": 50},
}


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_quickstart_parses_with_defaults_filled():
    spec = load_spec(SPECS / "quickstart.yaml")
    r = spec.resolved()
    assert r["data"]["builtin"] == "sonar"
    assert r["kernels"] == {"preset": "simplemkl", "normalize": "trace", "memory_budget": None}
    assert r["problem"]["regularizer"] == {"name": "elasticnet", "lam": 0.5}
    assert r["problem"]["loss"] == {"name": "logistic"}
    assert r["engine"]["name"] == "spicy" and r["engine"]["tol"] == 1e-4
    assert "armijo" in r["engine"]  # engine defaults filled in
    assert spec.name == "quickstart"
    json.dumps(r)  # JSON-able


def test_minimal_spec_gets_defaults(tmp_path):
    p = write(
        tmp_path,
        """
        data: {builtin: liver}
        kernels: {preset: smomkl}
        problem: {loss: logistic}
    """,
    )
    spec = load_spec(p)
    assert spec.data.test_size == DEFAULTS["data.test_size"]
    assert spec.data.seed == 0 and spec.data.standardize is True
    assert spec.kernels.normalize == "trace"
    assert spec.problem.regularizer.name == "l1"
    assert spec.problem.C == "auto" == DEFAULTS["problem.C"] and spec.problem.bias is True
    assert spec.engine.name == "spicy"
    assert spec.output.dir == Path("runs") / "s"


def test_scientific_notation_without_dot_is_a_number(tmp_path):
    p = write(
        tmp_path,
        """
        data: {builtin: sonar}
        kernels: {preset: simplemkl}
        problem: {loss: logistic, C: 5e-2}
        engine: {name: spicy, tol: 1e-4, max_iter: 10}
    """,
    )
    spec = load_spec(p)
    assert spec.problem.C == 0.05
    assert spec.engine.engine.tol == 1e-4
    assert spec.engine.engine.max_iter == 10 and isinstance(spec.engine.engine.max_iter, int)


def test_relative_paths_resolve_against_spec_folder(tmp_path):
    sub = tmp_path / "exp"
    sub.mkdir()
    (sub / "d.csv").write_text("a,b,y\n1,2,1\n2,1,-1\n")
    p = write(
        sub,
        """
        data: {train: d.csv}
        kernels: {bank: [{function: linear}]}
        problem: {loss: logistic}
    """,
    )
    spec = load_spec(p)
    assert spec.data.train == sub / "d.csv"


@pytest.mark.parametrize(
    "mutate, key, shown",
    [
        (lambda s: s.update(kernel={}), "kernel", "'kernel'"),
        (lambda s: s["problem"].update(C=0), "problem.C", "0"),
        (lambda s: s["problem"].update(C=float("inf")), "problem.C", "inf"),
        (lambda s: s["problem"].update(C="abc"), "problem.C", "'abc'"),
        (lambda s: s["problem"].update(bias="yes please"), "problem.bias", "'yes please'"),
        (
            lambda s: s["problem"].update(regularizer={"name": "elasticnet", "lam": 1.5}),
            "problem.regularizer.lam",
            "1.5",
        ),
        (lambda s: s["problem"].update(regularizer={"name": "lq", "q": 1}), "problem.regularizer.q", "1"),
        (
            lambda s: s["problem"].update(regularizer={"name": "elasticnet", "lamda": 0.1}),
            "problem.regularizer.lamda",
            "'lamda'",
        ),
        (lambda s: s["problem"].update(loss="logistc"), "problem.loss", "'logistc'"),
        (lambda s: s["problem"].update(loss=3), "problem.loss", "3"),
        (lambda s: s["problem"].update(loss={"eps": 0.1}), "problem.loss.name", "{'eps': 0.1}"),
        (lambda s: s["engine"].update(name="no_such_engine"), "engine.name", "'no_such_engine'"),
        (lambda s: s["engine"].update(tol=-1), "engine.tol", "-1"),
        (lambda s: s["engine"].update(max_iter=2.5), "engine.max_iter", "2.5"),
        (lambda s: s["data"].update(builtin="sonarr"), "data.builtin", "'sonarr'"),
        (lambda s: s["data"].update(test_size=1.5), "data.test_size", "1.5"),
        (lambda s: s["data"].update(seed=-1), "data.seed", "-1"),
        (lambda s: s["data"].update(train="nope.csv"), "data.train", "'nope.csv'"),
        (lambda s: s["kernels"].update(normalize="unit"), "kernels.normalize", "'unit'"),
        (lambda s: s["kernels"].update(preset="simplemkl"), "kernels.bank", "[{"),
        (lambda s: s["kernels"].update(memory_budget="lots"), "kernels.memory_budget", "'lots'"),
        (lambda s: s["kernels"].update(bank=[{"function": "rbff"}]), "kernels.bank[0].function", "'rbff'"),
        (lambda s: s["kernels"].update(bank=[{"function": "poly", "degree": 0}]), "kernels.bank[0].degree", "0"),
        (lambda s: s["kernels"].update(bank=[{"function": "rbf", "widht": 1}]), "kernels.bank[0].widht", "widht"),
    ],
)
def test_bad_values_name_key_and_value(mutate, key, shown):
    raw = json.loads(json.dumps(TINY))
    mutate(raw)
    with pytest.raises(SpecError) as info:
        parse_spec(raw, file="t.yaml")
    err = info.value
    msg = str(err)
    assert "\n" not in msg
    assert msg.startswith("t.yaml: ")
    assert err.key == key, msg
    assert f"{key}:" in msg or f"{key} " in msg
    assert shown in msg, msg


def test_did_you_mean_for_unknown_keys():
    raw = json.loads(json.dumps(TINY))
    raw["problem"]["los"] = raw["problem"].pop("loss")
    with pytest.raises(SpecError, match=r"problem\.los: unknown key \(did you mean 'loss'\?\)"):
        parse_spec(raw, file="t.yaml")


def test_unknown_component_lists_available():
    raw = json.loads(json.dumps(TINY))
    raw["problem"]["regularizer"] = "no_such_regularizer"
    with pytest.raises(SpecError, match=r"allowed: .*elasticnet.*l1"):
        parse_spec(raw, file="t.yaml")


def test_spec_error_format():
    e = SpecError("a.yaml", "problem.C", "invalid value", -1, "a number > 0")
    assert str(e) == "a.yaml: problem.C: invalid value; got -1; allowed: a number > 0"
    assert (e.file, e.key, e.value, e.allowed) == ("a.yaml", "problem.C", -1, "a number > 0")
    assert isinstance(e, ValueError)
    e2 = SpecError("a.yaml", "data", "needs a data source")
    assert str(e2) == "a.yaml: data: needs a data source"


def test_yaml_syntax_error_has_line(tmp_path):
    p = write(tmp_path, "data:\n  builtin: sonar\n  seed: [1, 2\nkernels: {}\n")
    with pytest.raises(SpecError, match=r"s\.yaml: line \d+, column \d+: YAML syntax error"):
        load_spec(p)


def test_python_object_tag_is_refused(tmp_path):
    p = write(tmp_path, "data: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(SpecError, match=r"line 1, column 7: YAML tag not allowed.*python/object/apply:os\.system"):
        load_spec(p)


def test_duplicate_keys_are_refused(tmp_path):
    p = write(tmp_path, "problem:\n  C: 1\n  C: 2\n")
    with pytest.raises(SpecError, match=r"line 3, column 3: duplicate key; got 'C'"):
        load_spec(p)


def test_overrides(tmp_path):
    spec = load_spec(SPECS / "quickstart.yaml", ["problem.C=0.05", "engine.max_iter=7", "data.seed=3"])
    assert spec.problem.C == 0.05 and spec.engine.engine.max_iter == 7 and spec.data.seed == 3
    # a component given by name becomes a mapping when a parameter is set
    spec = load_spec(SPECS / "quickstart.yaml", ["problem.loss=eps_insensitive", "problem.loss.eps=0.3"])
    assert spec.problem.loss.eps == 0.3
    # setting one kernel source drops the exclusive others
    spec = load_spec(SPECS / "quickstart.yaml", ["kernels.bank=[{function: linear}]"])
    assert spec.kernels.preset is None and spec.kernels.bank == ({"function": "linear"},)
    with pytest.raises(SpecError, match=r"problem\.C: invalid value \(set by --set\); got -1"):
        load_spec(SPECS / "quickstart.yaml", ["problem.C=-1"])
    with pytest.raises(SpecError, match=r"--set.*key\.path=value.*got 'problem\.C'"):
        load_spec(SPECS / "quickstart.yaml", ["problem.C"])


def test_parse_override_values():
    assert parse_override("a.b=1e-3") == ("a.b", 1e-3)
    assert parse_override("a=true") == ("a", True)
    assert parse_override("a=[1, 2]") == ("a", [1, 2])
    assert parse_override("a=") == ("a", None)
    assert parse_override("a.b={name: x, p: 2}") == ("a.b", {"name": "x", "p": 2})


def test_parse_bytes():
    assert parse_bytes("4GiB") == 4 * 1024**3
    assert parse_bytes("512 MB") == 512 * 10**6
    assert parse_bytes(1000) == 1000
    assert parse_bytes(np.int64(1000)) == 1000  # numpy numbers too (an estimator's memory_budget)
    assert parse_bytes("1.5kib") == 1536
    for bad in ("lots", -1, 0, True, "5 XB", None):
        with pytest.raises(ValueError):
            parse_bytes(bad)


#: The plugins of this repository (``plugins/*``, by entry-point name) and the
#: components they register: the only components outside the core that a
#: shipped spec may name.
REPO_PLUGINS = {
    "huber": {("loss", "huber"), ("loss", "squared_hinge")},
    "smo": {
        ("regularizer", "l1_squared"),
        ("regularizer", "pnorm_squared"),
        ("engine", "skm_smo"),
        ("engine", "smo_mkl"),
    },
}


@contextlib.contextmanager
def plugins_disabled(monkeypatch, names):
    """The process-wide registry rebuilt without the plugins ``names`` (``$MKLKIT_DISABLE_PLUGINS``)."""
    with monkeypatch.context() as m:
        m.setenv(DISABLE_ENV, ",".join(names))
        reset_registry()
        try:
            yield get_registry()
        finally:
            reset_registry()


def test_repo_plugins_table_is_what_the_plugins_register():
    declared = set()
    for toml in sorted((SPECS.parent / "plugins").glob("*/pyproject.toml")):
        section = toml.read_text().split("[project.entry-points.mklkit]")[1].split("\n[")[0]
        declared |= set(re.findall(r"^\s*([\w.-]+)\s*=", section, re.M))
    assert declared == set(REPO_PLUGINS)
    reg = get_registry()
    for plugin, components in REPO_PLUGINS.items():
        if plugin in reg.plugins:  # installed (the README's install): the table must match
            assert {(r.kind, r.name) for r in reg.provided_by(plugin)} == components, plugin


def check_shipped_spec(path: Path, missing: set[tuple[str, str]]) -> None:
    """``path`` parses fully, or its error names a component of a plugin in ``missing``."""
    __tracebackhide__ = True
    from mklkit.sweep import load_sweep

    try:
        if path.name.startswith("sweep"):  # grids for 'mklkit sweep'; 'mklkit run' refuses them
            with pytest.raises(SpecError, match="mklkit sweep"):
                load_spec(path)
            load_sweep(path)
        else:
            load_spec(path)
    except SpecError as e:
        named = re.match(r"(?:problem\.)?(loss|regularizer|engine)\b", e.key)
        assert e.file.endswith(path.name) and "unknown" in e.problem and named, str(e)
        assert (named.group(1), e.shown) in {(kind, repr(name)) for kind, name in missing}, (
            f"{path.name}: {e.key} names {e.shown}, which neither the installed plugins nor "
            f"the repository's plugins that are not installed ({sorted(missing)}) provide"
        )


@pytest.mark.parametrize(
    "disabled", [(), ("smo",), ("huber",), ("huber", "smo")], ids=["all-plugins", "no-smo", "no-huber", "no-plugins"]
)
def test_every_shipped_spec_parses_or_names_missing_components(monkeypatch, disabled):
    """With every plugin of the repository installed (the README's install) every shipped
    spec parses fully; without some, a spec fails only by naming one of their components."""
    with plugins_disabled(monkeypatch, disabled) as reg:
        missing = {c for p, comps in REPO_PLUGINS.items() if p not in reg.plugins for c in comps}
        for path in sorted(SPECS.glob("*.yaml")):
            check_shipped_spec(path, missing)


def test_builtin_target_and_drop():
    spec = load_spec(SPECS / "regression_eps.yaml", ["problem.loss=squared"])
    data = spec.load_data()
    assert data.task == "regression"
    assert "drinks" not in data.feature_names and "y" not in data.feature_names
    assert data.n_features == 5
    assert set(np.unique(data.y_train)) <= set(np.arange(0, 21, 0.5))
    assert data.n_test == 69 and data.n_train == 276


def test_train_size_subsamples(tmp_path):
    raw = json.loads(json.dumps(TINY))
    raw["data"].update(train_size=40, test_size=50)
    data = parse_spec(raw, file="t.yaml").load_data()
    assert data.n_train == 40 and data.n_test == 50
    assert set(np.unique(data.y_train)) == {-1.0, 1.0}


def test_standardize_uses_training_part_only():
    raw = json.loads(json.dumps(TINY))
    data = parse_spec(raw, file="t.yaml").load_data()
    assert np.allclose(data.X_train.mean(axis=0), 0, atol=1e-10)
    assert not np.allclose(data.X_test.mean(axis=0), 0, atol=1e-3)


def _npz(tmp_path: Path, **arrays) -> Path:
    p = tmp_path / "k.npz"
    np.savez(p, **arrays)
    return p


def _psd_bank(rng, M, N):
    A = rng.standard_normal((M, N, 3))
    return np.einsum("mik,mjk->mij", A, A) + 1e-3 * np.eye(N)


def test_precomputed_kernels_with_split(tmp_path):
    rng = np.random.default_rng(0)
    N = 40
    y = np.where(np.arange(N) % 2 == 0, 1.0, -1.0)
    _npz(tmp_path, K_train=_psd_bank(rng, 3, N), y_train=y, names=np.array(["a", "b", "c"]))
    p = write(
        tmp_path,
        """
        data: {test_size: 0.25, seed: 1}
        kernels: {precomputed: k.npz, normalize: trace}
        problem: {loss: logistic, regularizer: {name: elasticnet, lam: 0.5}}
    """,
    )
    prepared = load_spec(p).prepare()
    K = prepared.problem.K
    assert K.shape == (3, 30, 30) and prepared.K_test.shape == (3, 10, 30)
    assert np.allclose(np.einsum("mii->m", K), 1.0)
    assert prepared.kernel_names == ["a", "b", "c"]


@pytest.mark.parametrize(
    "kind, match",
    [
        ("asym", r"kernels\.precomputed: .*K_train\[0\] is not symmetric.*; got 'k\.npz'"),
        ("neg", r"kernels\.precomputed: .*not positive semidefinite.*; got 'k\.npz'"),
        ("ylen", r"kernels\.precomputed: .*y_train must have shape \(20,\).*; got 'k\.npz'"),
        ("nan", r"kernels\.precomputed: .*NaN or infinite.*; got 'k\.npz'"),
        ("test", r"kernels\.precomputed: .*K_test must have shape \(2, N_test, 20\).*; got 'k\.npz'"),
        (
            "labels",
            r"problem\.loss: labels do not fit the loss: the target looks continuous \(20 distinct values.*; got 'logistic'; allowed: a regression loss",
        ),
    ],
)
def test_precomputed_errors(tmp_path, kind, match):
    rng = np.random.default_rng(1)
    N = 20
    K = _psd_bank(rng, 2, N)
    y = np.where(np.arange(N) < 10, 1.0, -1.0)
    arrays = {"K_train": K, "y_train": y}
    if kind == "asym":
        K[0, 0, 1] += 1.0
    elif kind == "neg":
        K[1] = -K[1]
    elif kind == "ylen":
        arrays["y_train"] = y[:-1]
    elif kind == "nan":
        K[0, 3, 3] = np.nan
    elif kind == "test":
        arrays.update(K_test=np.zeros((2, 5, N + 1)), y_test=np.ones(5))
    elif kind == "labels":
        arrays["y_train"] = np.linspace(0.0, 1.0, N)
    _npz(tmp_path, **arrays)
    p = write(
        tmp_path,
        """
        kernels: {precomputed: k.npz}
        problem: {loss: logistic, regularizer: {name: elasticnet, lam: 0.5}}
    """,
    )
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p).prepare(build=False)
    assert str(info.value).startswith(str(p))


def test_engine_support_is_checked_before_building(monkeypatch):
    from mklkit.engines.spicy import Spicy

    monkeypatch.setattr(Spicy, "supports", lambda self, problem: f"no {problem.regularizer.name} today")
    monkeypatch.setattr(Spicy, "solve", lambda self, problem, callback=None: pytest.fail("solve called"))
    spec = parse_spec(json.loads(json.dumps(TINY)), file="t.yaml")
    with pytest.raises(SpecError, match=r"t\.yaml: engine\.name.*'spicy'.*no elasticnet today.*allowed: "):
        spec.prepare(build=False)
    with pytest.raises(SpecError, match=r"no elasticnet today"):
        spec.prepare()


def test_memory_budget_is_checked_before_building():
    raw = json.loads(json.dumps(TINY))
    raw["kernels"] = {"preset": "simplemkl", "memory_budget": "1MiB"}
    with pytest.raises(SpecError, match=r"kernels\.memory_budget.*kernel bank.*1\.0 MiB.*got '1MiB'"):
        parse_spec(raw, file="t.yaml").prepare(build=False)


def test_check_counts_kernels_without_building():
    from mklkit.api import check

    res = check(SPECS / "quickstart.yaml")
    assert res.prepared.n_kernels == 27 * 61 and res.prepared.problem is None
    assert "1647 kernels" in res.summary()


def test_json_schema_lists_components():
    s = json_schema()
    json.dumps(s)
    assert set(s["properties"]) == {"description", "data", "kernels", "problem", "engine", "output"}
    losses = s["properties"]["problem"]["properties"]["loss"]["oneOf"][0]["enum"]
    assert "logistic" in losses and "hinge" in losses
    assert "simplemkl" in s["properties"]["kernels"]["properties"]["preset"]["enum"]


def test_json_schema_is_generated_from_the_models():
    from mklkit.pipeline import BankSettings, CVSettings, DataSettings, ProblemSettings

    s = json_schema()
    props = s["properties"]
    data = next(a for a in props["data"]["anyOf"] if a.get("type") == "object")
    # the defaults are the models' (one table: DEFAULTS)
    assert (
        data["properties"]["test_size"]["default"]
        == DEFAULTS["data.test_size"]
        == DataSettings.model_fields["test_size"].default
    )
    assert props["problem"]["properties"]["C"]["default"] == DEFAULTS["problem.C"]
    assert props["problem"]["properties"]["C"]["exclusiveMinimum"] == 0
    assert props["kernels"]["properties"]["normalize"]["enum"] == ["trace", "diagonal", "none"]
    assert set(props["kernels"]["properties"]) == set(BankSettings.model_fields)
    assert set(data["properties"]) == set(DataSettings.model_fields)
    assert set(props["problem"]["properties"]) == set(ProblemSettings.model_fields)
    assert data["additionalProperties"] is False
    # the components' parameters come from their Param declarations
    reg = props["problem"]["properties"]["regularizer"]["oneOf"]
    elasticnet = next(v for v in reg[1:] if v["properties"]["name"] == {"const": "elasticnet"})
    assert elasticnet["properties"]["lam"]["minimum"] == 0 and elasticnet["properties"]["lam"]["maximum"] == 1
    # the sweep grammar: lists at the sweep keys and in component parameters, and the cv section
    sw = json_schema(sweep=True)
    C = sw["properties"]["problem"]["properties"]["C"]
    assert {"type": "array", "items": C["anyOf"][0], "minItems": 1} in C["anyOf"]
    reg = sw["properties"]["problem"]["properties"]["regularizer"]["anyOf"][0]["oneOf"]
    lam = next(v for v in reg[1:] if v["properties"]["name"] == {"const": "elasticnet"})["properties"]["lam"]
    assert lam["anyOf"][1]["type"] == "array"
    assert (
        set(sw["properties"]["cv"]["properties"])
        == set(CVSettings.model_fields)
        == {"folds", "splits", "test_size", "seed"}
    )
    assert "cv" not in s["properties"]


def test_messages_say_what_the_schema_allows():
    raw = json.loads(json.dumps(TINY))
    raw["data"]["seed"] = -1
    with pytest.raises(SpecError, match=r"t\.yaml: data\.seed.*got -1.*allowed: an integer >= 0") as info:
        parse_spec(raw, file="t.yaml")
    assert info.value.key == "data.seed" and info.value.allowed == "an integer >= 0"
    raw = json.loads(json.dumps(TINY))
    raw["kernels"]["normalize"] = "unit"
    with pytest.raises(
        SpecError,
        match=r"t\.yaml: kernels\.normalize.*got 'unit'.*"
        r"allowed: one of 'trace', 'diagonal', 'none'",
    ) as info:
        parse_spec(raw, file="t.yaml")
    assert info.value.key == "kernels.normalize"
    raw = json.loads(json.dumps(TINY))
    raw["data"]["sed"] = 1
    with pytest.raises(
        SpecError,
        match=r"t\.yaml: data\.sed.*unknown key.*did you mean 'seed'.*got 'sed'.*"
        r"allowed: ",
    ) as info:
        parse_spec(raw, file="t.yaml")
    assert info.value.key == "data.sed"
    assert info.value.allowed.split(", ") == [
        "builtin",
        "train",
        "test",
        "format",
        "target",
        "drop",
        "positive",
        "inlier",
        "sample_weight",
        "class_weight",
        "test_size",
        "train_size",
        "seed",
        "standardize",
    ]


def test_resolved_spec_is_the_models_dump():
    spec = load_spec(SPECS / "quickstart.yaml")
    r = spec.resolved()
    assert r["kernels"] == spec.kernels.model_dump(mode="json")
    assert r["problem"] == {
        "loss": {"name": "logistic"},
        "regularizer": {"name": "elasticnet", "lam": 0.5},
        "C": spec.problem.C,
        "bias": True,
    }
    assert r["output"] == {"dir": str(Path("runs") / "quickstart")}
