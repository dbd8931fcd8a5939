"""Unnamed columns are ``x0, x1, ...``: 0-based like ``features`` indices and scikit-learn's names.

Data without column names (an NPZ without ``feature_names``, a LIBSVM
file, arrays given to the estimators) name their columns from ``x0``; the
spec's ``features`` take those names or the same 0-based indices, and the
kernel names in ``summary.json`` and ``solution.npz`` use them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mklkit.cli import main
from mklkit.data import load_builtin, load_file

PROBLEM = {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.1}
ENGINE = {"name": "spicy", "tol": 1.0e-8, "max_iter": 200}


@pytest.fixture(scope="module")
def liver() -> Any:
    return load_builtin("liver")


def _bank(cols: list[Any]) -> list[dict[str, Any]]:
    return [{"function": "linear", "features": cols}, {"function": "rbf", "width": 2.0, "features": "each"}]


def _run(tmp_path: Path, name: str, train: str, cols: list[Any], capsys) -> dict[str, Any]:
    spec = {
        "data": {"train": train, "test_size": 0.25, "seed": 0},
        "kernels": {"bank": _bank(cols)},
        "problem": PROBLEM,
        "engine": ENGINE,
    }
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    code = main(["run", str(p), "--out", str(tmp_path / name), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 0, err
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_unnamed_columns_are_named_from_x0(tmp_path, capsys, liver):
    np.savez(tmp_path / "unnamed.npz", X=liver.X, y=liver.y)
    np.savez(tmp_path / "named.npz", X=liver.X, y=liver.y, feature_names=np.array(liver.feature_names))
    assert load_file(tmp_path / "unnamed.npz").feature_names == [f"x{j}" for j in range(6)]

    by_name = _run(tmp_path, "by_name", "unnamed.npz", ["x0", "x5"], capsys)
    by_index = _run(tmp_path, "by_index", "unnamed.npz", [0, 5], capsys)
    named = _run(tmp_path, "named", "named.npz", ["mcv", "drinks"], capsys)
    # the same columns, so the same problem: x0 is the first column, as index 0 is
    for s in (by_index, named):
        assert s["test_accuracy"] == by_name["test_accuracy"] and s["train_accuracy"] == by_name["train_accuracy"]
        assert s["objective"] == pytest.approx(by_name["objective"], rel=1e-12)
    names = ["linear[x0,x5]"] + [f"rbf(width=2)[x{j}]" for j in range(6)]
    assert [k["name"] for k in by_name["kernel_weights"]] == names
    assert [k["name"] for k in by_index["kernel_weights"]] == names
    with np.load(tmp_path / "by_name" / "solution.npz") as z:
        assert list(z["kernel_names"]) == names
    assert [k["name"] for k in named["kernel_weights"]][0] == "linear[mcv,drinks]"


def test_a_name_past_the_last_column_lists_the_names(tmp_path, capsys, liver):
    np.savez(tmp_path / "unnamed.npz", X=liver.X, y=liver.y)
    spec = {
        "data": {"train": "unnamed.npz"},
        "kernels": {"bank": [{"function": "linear", "features": ["x6"]}]},
        "problem": PROBLEM,
    }
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(spec))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{p}: kernels.bank[0].features[0]: ")
    assert "got 'x6'; allowed: x0, x1, x2, x3, x4, x5" in err


def test_libsvm_columns_are_named_from_x0(tmp_path, capsys, liver):
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(liver.X, liver.y, str(tmp_path / "liver.libsvm"), zero_based=False)
    np.savez(tmp_path / "named.npz", X=liver.X, y=liver.y, feature_names=np.array(liver.feature_names))
    assert load_file(tmp_path / "liver.libsvm").feature_names == [f"x{j}" for j in range(6)]
    sparse = _run(tmp_path, "sparse", "liver.libsvm", ["x0", "x5"], capsys)
    named = _run(tmp_path, "named", "named.npz", ["mcv", "drinks"], capsys)
    assert [k["name"] for k in sparse["kernel_weights"]][:2] == ["linear[x0,x5]", "rbf(width=2)[x0]"]
    # LIBSVM data are sparse: scaled, not centred, so only the names and the run are compared here
    assert sparse["status"] == "converged" and sparse["n_features"] == named["n_features"] == 6


def test_estimator_names_array_columns_from_x0(liver):
    from mklkit import MKLClassifier

    X, y = liver.X[:120], liver.y[:120]
    each = {"function": "linear", "features": "each"}
    by_name = MKLClassifier([{"function": "linear", "features": ["x0", "x5"]}, each], C=0.1, tol=1e-8).fit(X, y)
    by_index = MKLClassifier([{"function": "linear", "features": [0, 5]}, each], C=0.1, tol=1e-8).fit(X, y)
    assert by_name.kernel_names_ == ["linear[x0,x5]"] + [f"linear[x{j}]" for j in range(6)]
    assert by_index.kernel_names_ == by_name.kernel_names_
    np.testing.assert_array_equal(by_name.predict(X), by_index.predict(X))
