"""The command line: every bad input is one line on stderr with exit code 2.

Most cases call ``mklkit.cli.main(argv)`` in-process (fast: numba and the
registry load once); a few go through a subprocess to check the real console
behaviour (no traceback, exit codes, ``--help`` speed).
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mklkit import __version__, progress
from mklkit.cli import main
from mklkit.engines.base import Engine
from mklkit.plugins import get_registry
from mklkit.testing import registered

SPECS = Path(__file__).resolve().parent.parent / "specs"

TINY: dict[str, Any] = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0, "standardize": True},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}], "normalize": "trace"},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.5, "bias": True},
    "engine": {"name": "spicy", "tol": 1.0e-4, "max_iter": 100},
}


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_user_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"


def spec_file(tmp_path: Path, spec: dict | None = None, name: str = "exp.yaml", **changes: Any) -> Path:
    """Write TINY (with ``section={...}`` updates; a None value deletes a key) to a YAML file."""
    s = copy.deepcopy(TINY if spec is None else spec)
    for section, update in changes.items():
        if update is None:
            s.pop(section, None)
            continue
        sec = s.setdefault(section, {})
        for k, v in update.items():
            if v is None:
                sec.pop(k, None)
            else:
                sec[k] = v
    p = tmp_path / name
    p.write_text(yaml.safe_dump(s, sort_keys=False))
    return p


def write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    path.write_text(",".join(header) + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return path


def csv_rows(n: int = 30, d: int = 3, labels: Any = None, seed: int = 0) -> list[list[Any]]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).round(4)
    y = np.where(np.arange(n) % 2 == 0, 1, -1) if labels is None else labels
    return [list(X[i]) + [y[i]] for i in range(n)]


# ---------------------------------------------------------------------------
# bad spec values (in-process)
# ---------------------------------------------------------------------------
BAD_SPECS = [
    # id, changes, key path, offending value as shown
    ("unknown-top-key", {"kernel": {"preset": "simplemkl"}}, "kernel", "'kernel'"),
    ("unknown-section-key", {"problem": {"los": "logistic"}}, "problem.los", "did you mean 'loss'"),
    ("wrong-type-C", {"problem": {"C": "abc"}}, "problem.C", "'abc'"),
    ("C-zero", {"problem": {"C": 0}}, "problem.C", "got 0"),
    ("C-negative", {"problem": {"C": -1.5}}, "problem.C", "got -1.5"),
    ("bias-not-bool", {"problem": {"bias": "maybe"}}, "problem.bias", "'maybe'"),
    (
        "lam-out-of-range",
        {"problem": {"regularizer": {"name": "elasticnet", "lam": 1.5}}},
        "problem.regularizer.lam",
        "got 1.5",
    ),
    ("q-not-above-1", {"problem": {"regularizer": {"name": "lq", "q": 1}}}, "problem.regularizer.q", "got 1"),
    (
        "unknown-param",
        {"problem": {"regularizer": {"name": "elasticnet", "lamda": 0.2}}},
        "problem.regularizer.lamda",
        "'lamda'",
    ),
    ("unknown-loss", {"problem": {"loss": "logistc"}}, "problem.loss", "'logistc'"),
    (
        "unknown-regularizer",
        {"problem": {"regularizer": "no_such_regularizer"}},
        "problem.regularizer",
        "'no_such_regularizer'",
    ),
    ("unknown-engine", {"engine": {"name": "no_such_engine"}}, "engine.name", "'no_such_engine'"),
    ("engine-option-range", {"engine": {"tol": -1.0}}, "engine.tol", "got -1.0"),
    ("engine-option-type", {"engine": {"max_iter": "many"}}, "engine.max_iter", "'many'"),
    ("engine-unknown-option", {"engine": {"tolerance": 1e-3}}, "engine.tolerance", "'tolerance'"),
    ("unknown-builtin", {"data": {"builtin": "sonr"}}, "data.builtin", "'sonr'"),
    ("test-size-range", {"data": {"test_size": 1.5}}, "data.test_size", "1.5"),
    ("seed-negative", {"data": {"seed": -3}}, "data.seed", "-3"),
    ("standardize-type", {"data": {"standardize": "sometimes"}}, "data.standardize", "'sometimes'"),
    ("missing-data-file", {"data": {"builtin": None, "train": "missing.csv"}}, "data.train", "'missing.csv'"),
    ("builtin-and-train", {"data": {"train": "x.csv"}}, "data.train", "'x.csv'"),
    ("no-kernels", {"kernels": None}, "kernels", "required section is missing"),
    ("two-kernel-sources", {"kernels": {"preset": "simplemkl"}}, "kernels.bank", "exclusive"),
    ("unknown-preset", {"kernels": {"bank": None, "preset": "simplmkl"}}, "kernels.preset", "'simplmkl'"),
    ("normalize-choice", {"kernels": {"normalize": "unit"}}, "kernels.normalize", "'unit'"),
    ("memory-budget-text", {"kernels": {"memory_budget": "plenty"}}, "kernels.memory_budget", "'plenty'"),
    ("unknown-kernel-function", {"kernels": {"bank": [{"function": "rbff"}]}}, "kernels.bank[0].function", "'rbff'"),
    ("kernel-param-range", {"kernels": {"bank": [{"function": "poly", "degree": 0}]}}, "kernels.bank[0].degree", "0"),
    ("kernel-unknown-key", {"kernels": {"bank": [{"function": "rbf", "widht": 2}]}}, "kernels.bank[0].widht", "widht"),
    (
        "kernel-feature-name",
        {"kernels": {"bank": [{"function": "rbf", "features": ["x1", "x999"]}]}},
        "kernels.bank[0].features[1]",
        "'x999'",
    ),
    ("missing-loss", {"problem": {"loss": None}}, "problem.loss", "required key is missing"),
    ("memory-budget-too-small", {"kernels": {"memory_budget": "10KiB"}}, "kernels.memory_budget", "'10KiB'"),
    ("target-unknown-column", {"data": {"target": "nope"}}, "data.target", "'nope'"),
    (
        "continuous-target",
        {"data": {"builtin": "liver", "target": "drinks", "drop": ["y"]}},
        "problem.loss",
        "'logistic'",
    ),
]


RUN_CASES = ("wrong-type-C", "unknown-engine", "continuous-target", "kernel-param-range")
CASES = [("validate", *c) for c in BAD_SPECS] + [("run", *c) for c in BAD_SPECS if c[0] in RUN_CASES]


@pytest.mark.parametrize("command, case, changes, key, shown", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bad_spec(tmp_path, capsys, command, case, changes, key, shown):
    p = spec_file(tmp_path, **changes)
    argv = [command, p] + (["--out", tmp_path / "out"] if command == "run" else [])
    code, out, err = run_cli(argv, capsys)
    assert_user_error(code, err, str(p), key, shown)
    assert out == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_memory_budget_counts_the_test_kernels(tmp_path, capsys, command):
    # sonar, half held out: 104 training and 104 test points, 3 kernels; the training bank
    # is held while the test kernels are computed, so the budget must cover both at once
    from mklkit.kernels import estimate_bytes, format_bytes

    M, N, n = 3, 104, 104
    train, test = estimate_bytes(M, N), estimate_bytes(M, N, n)
    peak = 8 * M * N * N + test
    budget = (max(train, test) + peak) // 2  # either part alone fits, both together do not
    assert max(train, test) < budget < peak
    out_dir = tmp_path / "out"
    extra = ["--out", out_dir, "--quiet"] if command == "run" else []
    # Gram matrices asked for (without kernels.factor a bank over the budget is held as factors)
    p = spec_file(tmp_path, data={"test_size": 0.5}, kernels={"memory_budget": budget, "factor": False})
    code, out, err = run_cli([command, p, *extra], capsys)
    assert_user_error(
        code,
        err,
        str(p),
        "kernels.memory_budget",
        f"the kernel bank needs about {format_bytes(peak)}",
        "held while its test kernels (3 x 104 x 104) are computed",
        f"got {budget}",
    )
    assert out == "" and not out_dir.exists()
    p = spec_file(tmp_path, data={"test_size": 0.5}, kernels={"memory_budget": peak, "factor": False})
    code, out, err = run_cli([command, p, *extra], capsys)
    assert code == 0, err
    if command == "validate":
        assert out.startswith("ok: ") and f"3 kernels (2 bank entries, normalize=trace, ~{format_bytes(peak)})" in out


class Picky(Engine):
    """An engine that supports nothing (the registry is shared, so no real pair is safe to use)."""

    name = "picky_test_engine"
    description = "test engine whose supports() always refuses"

    def supports(self, problem):
        return f"it refuses {problem.loss.name} with {problem.regularizer.name}"

    def solve(self, problem, callback=None):  # pragma: no cover - never reached
        raise AssertionError("solve must not be called")


@pytest.fixture
def picky_engine():
    with registered(Picky) as name:
        yield name


@pytest.mark.parametrize("command", ["validate", "run"])
def test_engine_does_not_support_the_problem(tmp_path, capsys, picky_engine, command):
    p = spec_file(tmp_path, engine={"name": picky_engine, "tol": None, "max_iter": None})
    argv = [command, p] + (["--out", tmp_path / "out"] if command == "run" else [])
    code, out, err = run_cli(argv, capsys)
    assert_user_error(
        code,
        err,
        str(p),
        "engine.name",
        f"'{picky_engine}'",
        "cannot solve this problem",
        "it refuses logistic with elasticnet",
        "allowed: an engine that supports loss 'logistic' x regularizer 'elasticnet': ",
    )
    # the list of capable engines is the registry's: spicy among them, the picky one not
    capable = err.strip().rsplit(": ", 1)[1].split(", ")
    assert "spicy" in capable and picky_engine not in capable
    assert out == "" and not (tmp_path / "out").exists()


def test_unknown_component_lists_available(tmp_path, capsys):
    p = spec_file(tmp_path, problem={"loss": "logistc"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, "did you mean 'logistic'", "allowed:", "hinge", "squared")


#: docs/specs.md's table of the shipped specs: (spec, "runs today" column).
SPEC_TABLE = re.findall(
    r"^\| `([\w.]+\.yaml)` \| .*? \| (.*?) \|$", (SPECS.parent / "docs" / "specs.md").read_text(encoding="utf-8"), re.M
)


def test_spec_table_lists_every_shipped_spec():
    assert sorted(name for name, _ in SPEC_TABLE) == sorted(p.name for p in SPECS.glob("*.yaml"))


#: The shipped specs whose run takes seconds (each one also runs in `-m slow`).
SLOW_SPECS = {"smomkl_uci.yaml", "spicymkl_uci.yaml", "spicymkl_ida.yaml"}


@pytest.mark.parametrize(
    "name, runs",
    [pytest.param(n, r, marks=pytest.mark.slow) if n in SLOW_SPECS else (n, r) for n, r in SPEC_TABLE],
    ids=[name for name, _ in SPEC_TABLE],
)
def test_spec_table_says_what_runs(tmp_path, capsys, name, runs):
    if runs.startswith("with `mklkit sweep`"):
        code, out, err = run_cli(["sweep", SPECS / name, "--dry-run"], capsys)
        assert code == 0 and "100 tasks, 300 rows" in out, err
        return
    assert runs.startswith("yes"), f"docs/specs.md: {name}: {runs!r}"
    if "`mklkit-smo` plugin" in runs and "skm_smo" not in get_registry().names("engine"):
        pytest.skip("the mklkit-smo plugin is not installed")
    code, _, err = run_cli(["run", SPECS / name, "--out", tmp_path, "--quiet"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "converged"


@pytest.mark.parametrize(
    "name, regularizer, engine",
    [("smomkl_uci.yaml", "pnorm_squared", "smo_mkl"), ("skm.yaml", "l1_squared", "skm_smo")],
)
def test_shipped_specs_with_missing_plugins_say_so(capsys, monkeypatch, name, regularizer, engine):
    """Without the mklkit-smo plugin (its entry point 'smo' skipped through
    $MKLKIT_DISABLE_PLUGINS, whether or not it is installed), 'validate' names the
    first missing component in one line; with it, the spec validates."""
    from mklkit.plugins import DISABLE_ENV, reset_registry

    with monkeypatch.context() as m:
        m.setenv(DISABLE_ENV, "smo")
        reset_registry()
        try:
            reg = get_registry()
            assert regularizer not in reg.names("regularizer") and engine not in reg.names("engine")
            code, _, err = run_cli(["validate", SPECS / name], capsys)
        finally:
            reset_registry()
    assert_user_error(
        code, err, name, "problem.regularizer.name", repr(regularizer), "unknown", "allowed:", "elasticnet"
    )
    assert regularizer not in err.split("allowed:")[1]
    if "smo" in get_registry().plugins:  # installed (the README's install): the spec validates
        code, out, err = run_cli(["validate", SPECS / name], capsys)
        assert code == 0 and out.startswith("ok: "), err


# ---------------------------------------------------------------------------
# bad data files
# ---------------------------------------------------------------------------
def test_nan_in_data(tmp_path, capsys):
    rows = csv_rows()
    rows[4][1] = "nan"
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "y"], rows)
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "data.train", "'d.csv'", "row 5", "'b'", "NaN")


def test_inf_in_data(tmp_path, capsys):
    rows = csv_rows()
    rows[2][0] = "inf"
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "y"], rows)
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "data.train", "'d.csv'", "inf")


def test_non_numeric_cell(tmp_path, capsys):
    rows = csv_rows()
    rows[3][2] = "abc"
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "y"], rows)
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "data.train", "'abc'")


def test_labels_outside_plus_minus_one(tmp_path, capsys):
    # any two labels are classes (tests/test_spec_labels.py); the greater is the positive class
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "y"], csv_rows(labels=np.arange(30) % 2))
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv"})
    code, out, err = run_cli(["validate", p], capsys)
    assert code == 0, err
    assert "classes 0, 1 (positive 1)" in out


def test_single_class(tmp_path, capsys):
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "y"], csv_rows(labels=np.ones(30, int)))
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv", "test_size": 0})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "problem.loss", "'logistic'", "at least 2 classes", "only the label 1")


def test_classification_loss_on_continuous_target(tmp_path, capsys):
    labels = np.round(np.linspace(0.0, 7.0, 30), 3)
    write_csv(tmp_path / "d.csv", ["a", "b", "c", "t"], csv_rows(labels=labels))
    p = spec_file(tmp_path, data={"builtin": None, "train": "d.csv", "target": "t"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "problem.loss", "'logistic'", "continuous target", "regression loss")


def test_test_file_shape_mismatch(tmp_path, capsys):
    write_csv(tmp_path / "tr.csv", ["a", "b", "c", "y"], csv_rows())
    write_csv(tmp_path / "te.csv", ["a", "b", "y"], [r[:2] + r[3:] for r in csv_rows(10)])
    p = spec_file(tmp_path, data={"builtin": None, "train": "tr.csv", "test": "te.csv", "test_size": None})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "data.test", "'te.csv'", "2 feature columns", "3")


def _write_npz(tmp_path: Path, K: np.ndarray, y: np.ndarray) -> Path:
    np.savez(tmp_path / "k.npz", K_train=K, y_train=y)
    spec = copy.deepcopy(TINY)
    del spec["data"]
    spec["kernels"] = {"precomputed": "k.npz"}
    return spec_file(tmp_path, spec)


def _psd(n: int = 20, m: int = 2, seed: int = 0) -> np.ndarray:
    A = np.random.default_rng(seed).standard_normal((m, n, 4))
    return np.einsum("mik,mjk->mij", A, A) + 0.01 * np.eye(n)


def test_precomputed_not_symmetric(tmp_path, capsys):
    K = _psd()
    K[1, 2, 5] += 0.5
    p = _write_npz(tmp_path, K, np.where(np.arange(20) % 2 == 0, 1.0, -1.0))
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "kernels.precomputed", "'k.npz'", "K_train[1] is not symmetric")


def test_precomputed_not_psd(tmp_path, capsys):
    K = _psd()
    K[0] -= 3.0 * np.eye(20)
    p = _write_npz(tmp_path, K, np.where(np.arange(20) % 2 == 0, 1.0, -1.0))
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "kernels.precomputed", "'k.npz'", "not positive semidefinite")


def test_precomputed_shape_mismatch(tmp_path, capsys):
    p = _write_npz(tmp_path, _psd(), np.ones(19))
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "kernels.precomputed", "'k.npz'", "(20,)", "(19,)")


# ---------------------------------------------------------------------------
# YAML problems, overrides, files
# ---------------------------------------------------------------------------
def test_yaml_object_tag(tmp_path, capsys):
    p = tmp_path / "evil.yaml"
    p.write_text("data: !!python/object/apply:os.system ['echo pwned']\n")
    code, out, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "line 1, column 7", "python/object/apply:os.system", "YAML tag not allowed")
    assert "pwned" not in out


def test_yaml_syntax_error(tmp_path, capsys):
    p = tmp_path / "broken.yaml"
    p.write_text("data:\n  builtin: sonar\nproblem: {loss: logistic\nengine: spicy\n")
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "line 4", "YAML syntax error")


def test_yaml_duplicate_key(tmp_path, capsys):
    p = tmp_path / "dup.yaml"
    p.write_text("problem:\n  loss: logistic\n  loss: hinge\n")
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "line 3", "duplicate key", "'loss'")


def test_spec_not_a_mapping(tmp_path, capsys):
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "must be a mapping", "['a', 'b']")


def test_empty_spec(tmp_path, capsys):
    p = tmp_path / "empty.yaml"
    p.write_text("# nothing\n")
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "empty")


def test_missing_spec_file(tmp_path, capsys):
    p = tmp_path / "nope.yaml"
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, str(p), "not found")


@pytest.mark.parametrize(
    "override, needles",
    [
        ("problem.C=-1", ["problem.C", "got -1", "(set by --set)"]),
        ("problem.regularizer.lam=2", ["problem.regularizer.lam", "got 2"]),
        ("engine.name=smo", ["engine.name", "'smo'"]),
        ("problem.bais=false", ["problem.bais", "did you mean 'bias'"]),
        ("problem.C", ["--set", "key.path=value", "'problem.C'"]),
        ("problem..C=1", ["--set", "malformed key path"]),
        ("problem.C=[1, 2", ["--set problem.C", "YAML syntax error"]),
    ],
)
def test_bad_overrides(tmp_path, capsys, override, needles):
    p = spec_file(tmp_path)
    code, _, err = run_cli(["validate", p, "--set", override], capsys)
    assert_user_error(code, err, str(p), *needles)


def test_usage_errors_are_one_line(capsys):
    code, _, err = run_cli(["run"], capsys)
    assert_user_error(code, err, "mklkit run", "SPEC")
    code, _, err = run_cli(["frobnicate"], capsys)
    assert_user_error(code, err, "frobnicate")
    code, _, err = run_cli([], capsys)
    assert_user_error(code, err, "command is required")


def test_report_without_summary(tmp_path, capsys):
    code, _, err = run_cli(["report", tmp_path], capsys)
    assert_user_error(code, err, str(tmp_path), "summary.json")
    code, _, err = run_cli(["report", tmp_path / "missing"], capsys)
    assert_user_error(code, err, "missing", "no such run directory")


def test_check_plugin_unknown_and_ok(capsys):
    code, _, err = run_cli(["check-plugin", "hindge"], capsys)
    assert_user_error(code, err, "'hindge'", "did you mean 'hinge'", "loss:logistic")
    code, _, err = run_cli(["check-plugin", "widget:hinge"], capsys)
    assert_user_error(code, err, "unknown component kind 'widget'", "loss")
    code, _, err = run_cli(["check-plugin", "kernel:rbf"], capsys)  # engines: tests/test_check_plugin_engine.py
    assert_user_error(code, err, "kernel 'rbf'", "losses, regularizers, engines, weightings and multiclass losses")
    code, out, err = run_cli(["check-plugin", "loss:logistic"], capsys)
    assert code == 0, err
    assert "logistic" in out and "OK" in out


def test_plugins_lists_builtins(capsys):
    code, out, _ = run_cli(["plugins"], capsys)
    assert code == 0
    for name in ("logistic", "elasticnet", "spicy", "rbf"):
        assert name in out


def test_new_plugin(tmp_path, capsys):
    code, out, err = run_cli(["new-plugin", "my_loss", "--dest", tmp_path], capsys)
    assert code == 0, err
    assert (tmp_path / "mklkit-my-loss" / "pyproject.toml").is_file()
    assert "created" in out
    code, _, err = run_cli(["new-plugin", "Bad-Name", "--dest", tmp_path], capsys)
    assert_user_error(code, err, "'Bad-Name'")


def test_schema(capsys):
    code, out, _ = run_cli(["schema"], capsys)
    assert code == 0
    schema = json.loads(out)
    assert "problem" in schema["properties"]
    assert "cv" not in schema["properties"]
    code, out, _ = run_cli(["schema", "--sweep"], capsys)
    assert code == 0
    sweep = json.loads(out)
    assert sweep["title"] == "mklkit sweep spec" and "cv" in sweep["properties"]


# ---------------------------------------------------------------------------
# successful runs
# ---------------------------------------------------------------------------
def test_validate_ok(tmp_path, capsys):
    p = spec_file(tmp_path)
    code, out, err = run_cli(["validate", p], capsys)
    assert code == 0, err
    assert out.startswith("ok: ") and "3 kernels" in out and "156 train / 52 test" in out


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_files_follow_the_umask(tmp_path, capsys, umask):
    # results are written through a temporary file and a rename: that file must be
    # created like any other (0666 less the umask), not 0600
    run_spec = spec_file(tmp_path)
    sweep_spec = spec_file(tmp_path, name="sw.yaml", problem={"C": [0.1, 1.0]}, cv={"folds": 2, "seed": 0})

    def modes() -> dict[str, str]:
        files = sorted(p for d in ("run", "sweep") for p in (tmp_path / d).rglob("*") if p.is_file())
        return {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}

    old = os.umask(umask)
    try:
        assert main(["run", str(run_spec), "--out", str(tmp_path / "run"), "--quiet"]) == 0
        assert main(["sweep", str(sweep_spec), "--out", str(tmp_path / "sweep"), "--quiet"]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    written = modes()
    assert {"summary.json", "history.json", "solution.npz", "results.csv", "sweep.json"} <= {
        Path(p).name for p in written
    }
    assert set(written.values()) == {oct(0o666 & ~umask)}, written
    # the plots of 'mklkit report' (the optional 'plot' extra) are written the same way
    pytest.importorskip("matplotlib")
    old = os.umask(umask)
    try:
        assert main(["report", str(tmp_path / "run")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    written = modes()
    assert {"run/gap.png", "run/active.png", "run/weights.png"} <= set(written)
    assert set(written.values()) == {oct(0o666 & ~umask)}, written


def test_run_writes_results_and_refuses_to_overwrite(tmp_path, capsys, monkeypatch):
    p = spec_file(tmp_path)
    out_dir = tmp_path / "out"
    code, out, err = run_cli(["run", p, "--out", out_dir, "--quiet"], capsys)
    assert code == 0, err
    assert "status      converged" in out and "accuracy    train" in out
    for name in ("summary.json", "history.json", "solution.npz"):
        assert (out_dir / name).is_file()
    s = json.loads((out_dir / "summary.json").read_text())
    for key in (
        "status",
        "objective",
        "duality_gap",
        "iterations",
        "time_s",
        "n_kernels",
        "n_active_kernels",
        "kernel_weights",
        "train_accuracy",
        "test_accuracy",
        "spec",
        "mklkit_version",
        "engine",
    ):
        assert key in s, key
    import mklkit

    assert s["status"] == "converged" and s["engine"] == "spicy"
    assert s["mklkit_version"] == mklkit.__version__
    assert s["n_kernels"] == 3 and [k["name"] for k in s["kernel_weights"]][0].startswith("rbf")
    assert s["duality_gap"] <= 1e-4 and s["objective"] > 0
    assert 0.5 < s["test_accuracy"] <= 1.0 and s["n_test"] == 52
    assert s["spec"]["engine"]["tol"] == 1e-4 and s["spec"]["engine"]["armijo"] == 1e-4
    hist = json.loads((out_dir / "history.json").read_text())
    assert len(hist) == s["iterations"] and {"objective", "gap", "n_active", "time_s"} <= set(hist[-1])
    with np.load(out_dir / "solution.npz") as z:
        assert z["alpha"].shape == (s["n_active_kernels"], 156)
        assert list(z["kernel_names"]) == [k["name"] for k in s["kernel_weights"]]
        assert z["active"].shape == (s["n_active_kernels"],)
        assert float(z["bias"]) == pytest.approx(s["bias"])
    # objective = sum of losses + C * sum of g~(||alpha_m||), recomputed from the written solution
    from mklkit.api import load_spec

    prepared = load_spec(p).prepare()
    prob = prepared.problem
    with np.load(out_dir / "solution.npz") as z:
        act, alpha, b = z["active"], z["alpha"], float(z["bias"])
    zpred = np.einsum("mij,mj->i", prob.K[act], alpha) + b
    norms = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, prob.K[act], alpha), 0.0))
    reg = prob.regularizer
    primal = (
        prob.loss.jit.value(prob.y, zpred, prob.loss.param_vector).sum()
        + reg.jit.value(np.ascontiguousarray(norms), prob.C, reg.param_vector).sum()
    )
    assert s["objective"] == pytest.approx(primal, rel=1e-6)
    assert s["train_accuracy"] == pytest.approx(np.mean(np.where(zpred >= 0, 1, -1) == prob.y))
    before = (out_dir / "summary.json").read_text()
    code, _, err = run_cli(["run", p, "--out", out_dir], capsys)
    assert_user_error(code, err, str(p), "--out", str(out_dir), "--force", "summary.json")
    assert (out_dir / "summary.json").read_text() == before
    # --force overwrites; --set overrides are validated and recorded
    code, out, err = run_cli(["run", p, "--out", out_dir, "--force", "--quiet", "--set", "problem.C=0.25"], capsys)
    assert code == 0, err
    s2 = json.loads((out_dir / "summary.json").read_text())
    assert s2["spec"]["problem"]["C"] == 0.25 and s2["C"] == 0.25
    # report draws the plots; a forced re-run removes them (they showed the old run)
    pytest.importorskip("matplotlib")
    code, out, err = run_cli(["report", out_dir], capsys)
    assert code == 0, err
    for name in ("gap.png", "active.png", "weights.png"):
        assert (out_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, err = run_cli(["run", p, "--out", out_dir, "--force", "--quiet"], capsys)
    assert code == 0, err
    assert not (out_dir / "gap.png").exists()


def test_run_default_output_dir_is_relative_to_cwd(tmp_path, capsys, monkeypatch):
    p = spec_file(tmp_path, name="mini.yaml")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _, err = run_cli(["run", p, "--quiet"], capsys)
    assert code == 0, err
    assert (work / "runs" / "mini" / "summary.json").is_file()


def test_not_converged_warns_and_strict_exits_3(tmp_path, capsys):
    p = spec_file(tmp_path, engine={"tol": 1e-14, "max_iter": 1})
    code, out, err = run_cli(["run", p, "--out", tmp_path / "a", "--quiet"], capsys)
    assert code == 0
    assert "warning: the solver did not converge" in err and "max_iter" in err
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["status"] == "max_iter" and s["converged"] is False
    code, out, err = run_cli(["run", p, "--out", tmp_path / "b", "--quiet", "--strict"], capsys)
    assert code == 3
    assert "warning: the solver did not converge" in err
    assert (tmp_path / "b" / "summary.json").is_file()


def test_progress_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    p = spec_file(tmp_path)
    code, _, err = run_cli(["run", p, "--out", tmp_path / "a"], capsys)
    assert code == 0
    assert "mklkit: iteration 1: objective" in err and "gap" in err
    code, _, err = run_cli(["run", p, "--out", tmp_path / "b", "--quiet"], capsys)
    assert code == 0 and "iteration" not in err


@pytest.fixture
def compiling_engine():
    """An engine that compiles a new numba function, then solves with spicy."""
    from numba import njit

    class Compiling(Engine):
        name = "compiling_test_engine"
        description = "compiles a new jitted function, then delegates to spicy"

        def solve(self, problem, callback=None):
            @njit(cache=False)
            def fresh(x):
                return x + 1.0

            fresh(1.0)
            spicy = get_registry().get("engine", "spicy")(tol=self.tol, max_iter=self.max_iter)
            return spicy.solve(problem, callback)

    with registered(Compiling) as name:
        yield name


def test_run_says_once_that_numba_compiles(tmp_path, capsys, compiling_engine):
    p = spec_file(tmp_path, engine={"name": compiling_engine})
    code, _, err = run_cli(["run", p, "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    notes = [ln for ln in err.splitlines() if "compiling" in ln]
    assert len(notes) == 1 and notes[0].startswith("mklkit: compiling numba code"), err
    assert re.search(rf"loss 'logistic'.*regularizer 'elasticnet'.*engine '{compiling_engine}'", notes[0])
    code, _, err = run_cli(["run", p, "--out", tmp_path / "b", "--quiet"], capsys)
    assert code == 0 and "compiling" not in err


def test_regression_run_reports_rmse(tmp_path, capsys):
    p = spec_file(
        tmp_path,
        data={"builtin": "liver", "target": "drinks", "drop": ["y"]},
        problem={"loss": "squared", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 1.0},
    )
    code, out, err = run_cli(["run", p, "--out", tmp_path / "r", "--quiet"], capsys)
    assert code == 0, err
    assert "rmse        train" in out
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["task"] == "regression" and s["test_rmse"] > 0 and "test_accuracy" not in s


@pytest.mark.parametrize("C", [1000.0, 2.0])
def test_svr_with_l1_above_and_below_c_max(tmp_path, capsys, C):
    # specs/regression_eps.yaml with the block 1-norm: at C = 1000 (far above C_max) the
    # iterative method used to end at max_iter with an objective worse than alpha = 0
    bank = "[{function: rbf, width: [1, 2, 4]}, {function: linear, features: each}]"
    code, out, err = run_cli(
        [
            "run",
            SPECS / "regression_eps.yaml",
            "--set",
            "problem.regularizer=l1",
            "--set",
            f"problem.C={C}",
            "--set",
            f"kernels.bank={bank}",
            "--set",
            "engine.max_iter=100",
            "--out",
            tmp_path / "r",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["status"] == "converged" and s["duality_gap"] <= 1e-3
    assert s["C_max"] > 0 and "C_max" in out
    if C > s["C_max"]:
        assert s["iterations"] == 0 and s["n_active_kernels"] == 0 and s["duality_gap"] <= 1e-12
    else:
        assert s["iterations"] > 0 and s["n_active_kernels"] > 0


# ---------------------------------------------------------------------------
# real processes
# ---------------------------------------------------------------------------
def _proc(*args: Any, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mklkit.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_subprocess_help_is_fast():
    t0 = time.perf_counter()
    r = _proc("--help")
    elapsed = time.perf_counter() - t0
    assert r.returncode == 0 and "validate" in r.stdout
    assert elapsed < 2.0  # well under a second in practice; loose for loaded machines
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, mklkit.cli; print(sorted(m for m in ('numpy', 'numba', 'mklkit.plugins', 'yaml') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "[]"


def test_python_m_mklkit_is_the_command():
    r = subprocess.run([sys.executable, "-m", "mklkit", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"mklkit {__version__}"
    r = subprocess.run([sys.executable, "-m", "mklkit", "no-such-command"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_subprocess_bad_spec_no_traceback(tmp_path):
    p = spec_file(tmp_path, problem={"regularizer": {"name": "elasticnet", "lam": -0.1}})
    r = _proc("validate", p)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and "problem.regularizer.lam" in lines[0] and "-0.1" in lines[0]
    assert r.stdout == ""


def test_subprocess_validate_quickstart():
    r = _proc("validate", SPECS / "quickstart.yaml")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: ") and "1647 kernels" in r.stdout


@pytest.fixture
def dual_only_engine():
    """An engine whose first records hold only a dual objective (as smo_mkl's between its
    certificates), then spicy's solve."""

    class DualOnly(Engine):
        name = "dual_only_test_engine"
        description = "records a dual objective alone, then delegates to spicy"

        def solve(self, problem, callback=None, warm_start=None):
            M = problem.n_kernels
            if callback is not None:
                callback(
                    {
                        "iteration": 621,
                        "objective": float("nan"),
                        "dual_objective": 27.5,
                        "gap": float("nan"),
                        "n_active": M,
                    }
                )
                callback({"iteration": 700, "objective": 27.3, "dual_objective": 27.25, "gap": 1e-3, "n_active": 1})
            spicy = get_registry().get("engine", "spicy")(tol=self.tol, max_iter=self.max_iter)
            return spicy.solve(problem)

    with registered(DualOnly) as name:
        yield name


def test_progress_line_of_a_record_between_certificates(tmp_path, capsys, monkeypatch, dual_only_engine):
    """smo_mkl records only its dual objective between certificates: no 'objective nan, gap nan'."""
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    p = spec_file(tmp_path, engine={"name": dual_only_engine})
    code, _, err = run_cli(["run", p, "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    assert re.search(r"iteration 621: .*dual objective 27\.5.*gap not computed.*active 3/3", err), err
    assert re.search(r"iteration 700: .*objective 27\.3.*gap 1\.00e-03.*active 1/3", err), err
    assert "nan" not in err


def test_validate_says_when_the_bank_is_chosen_as_approximate_factors(tmp_path, capsys):
    """Without kernels.factor, a bank whose Gram matrices do not fit is held as approximate
    factors: validate says so on stderr (with the reason) and in its summary line; with
    kernels.factor: false the memory check refuses it."""
    spec = {
        "data": {"builtin": "a9a", "test_size": 0.2, "seed": 0},
        "kernels": {"bank": [{"function": "rbf", "width": [3, 10]}]},
        "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.01},
        "engine": {"name": "auto"},
    }
    p = spec_file(tmp_path, spec)
    code, out, err = run_cli(["validate", p], capsys)
    assert code == 0, err
    assert re.match(r"mklkit: kernels: .*approximate factors.*2 kernels on 26048 points", err), err
    assert "more than memory_budget 4.0 GiB" in err
    assert re.search(r"factor bank \(approximate.*rank <= 256.*tol 0\.001.*for its size", out), out
    p = spec_file(tmp_path, spec, name="gram.yaml", kernels={"factor": False})
    code, out, err = run_cli(["validate", p], capsys)
    assert_user_error(code, err, "kernels.memory_budget", "the kernel bank needs about")
