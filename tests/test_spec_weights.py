"""Weights in specs: ``data.sample_weight`` (a column of per-row weights) and ``data.class_weight``.

The estimators' semantics (``docs/api.md``): integer weights are the rows
repeated that many times, a weight 0 leaves the row out, ``balanced`` is
``n / (k * count)`` on the training labels.  Runs go through
``mklkit.cli.main`` in-process on liver with a small bank, solved to a
tight gap so that objectives can be compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mklkit.cli import main
from mklkit.data import load_builtin

BANK = {"bank": [{"function": "rbf", "width": [0.5, 2.0]}, {"function": "linear"}], "normalize": "trace"}
ENGINE = {"name": "spicy", "tol": 1.0e-9, "max_iter": 500}


def _csv(path: Path, X: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> Path:
    names = [f"f{j}" for j in range(X.shape[1])] + ([] if w is None else ["w"]) + ["y"]
    rows = [",".join(names)]
    for i in range(X.shape[0]):
        cells = [repr(float(v)) for v in X[i]] + ([] if w is None else [repr(float(w[i]))])
        rows.append(",".join(cells + [str(int(y[i]))]))
    path.write_text("\n".join(rows) + "\n")
    return path


def _spec(
    tmp_path: Path, name: str, data: dict[str, Any], loss: Any = "hinge", engine: Any = ENGINE, regularizer: str = "l1"
) -> Path:
    spec = {
        "data": {"test_size": 0, "standardize": False, **data},
        "kernels": BANK,
        "problem": {"loss": loss, "regularizer": regularizer, "C": 0.5},
        "engine": engine,
    }
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def _run(spec: Path, out: Path, capsys) -> dict[str, Any]:
    code = main(["run", str(spec), "--out", str(out), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 0, err
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def liver() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """60 rows of liver (40 of class 0, 20 of class 1; standardized), labels 0/1, integer weights in
    {0, 1, 2, 3}."""
    ds = load_builtin("liver")
    y_all = np.asarray(ds.y)
    rows = np.sort(np.r_[np.flatnonzero(y_all < 0)[:40], np.flatnonzero(y_all > 0)[:20]])
    X = np.asarray(ds.X, dtype=np.float64)[rows]
    X = (X - X.mean(0)) / X.std(0)
    y = (y_all[rows] > 0).astype(int)
    w = np.random.default_rng(0).integers(0, 4, size=60).astype(np.float64)
    return X, y, w


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_a_weight_column_equals_the_repeated_rows(tmp_path, capsys, liver, loss):
    """The column's integer weights (zeros included) solve the problem of the rows repeated that many
    times: the same objective (and C_max), both certified; the column is not a feature."""
    X, y, w = liver
    weighted = _csv(tmp_path / "w.csv", X, y, w)
    rep = np.repeat(np.arange(y.size), w.astype(int))
    repeated = _csv(tmp_path / "r.csv", X[rep], y[rep])
    a = _run(_spec(tmp_path, "a", {"train": str(weighted), "sample_weight": "w"}, loss), tmp_path / "a", capsys)
    b = _run(_spec(tmp_path, "b", {"train": str(repeated)}, loss), tmp_path / "b", capsys)
    assert a["status"] == b["status"] == "converged"
    assert a["duality_gap"] <= 1e-9 and b["duality_gap"] <= 1e-9
    assert a["objective"] == pytest.approx(b["objective"], rel=1e-6)
    if loss == "logistic":  # (the hinge's zero solution, and so its C_max, need not be unique)
        assert a["C_max"] == pytest.approx(b["C_max"], rel=1e-9)
    assert a["n_features"] == X.shape[1] and a["n_train"] == int(np.sum(w > 0))


def test_class_weight_balanced_and_as_a_mapping(tmp_path, capsys, liver):
    """``balanced`` gives n / (2 count) per class, recorded in summary.json under the data's labels;
    a mapping with the same numbers is the same problem, and both differ from the unweighted one."""
    X, y, _ = liver
    f = _csv(tmp_path / "d.csv", X, y)
    bal = _run(_spec(tmp_path, "bal", {"train": str(f), "class_weight": "balanced"}), tmp_path / "bal", capsys)
    counts = np.bincount(y)
    expected = {str(c): y.size / (2 * counts[c]) for c in (0, 1)}
    assert bal["class_weights"] == pytest.approx(expected)
    mapping = {0: float(expected["0"]), 1: float(expected["1"])}
    as_map = _run(_spec(tmp_path, "map", {"train": str(f), "class_weight": mapping}), tmp_path / "map", capsys)
    plain = _run(_spec(tmp_path, "plain", {"train": str(f)}), tmp_path / "plain", capsys)
    assert as_map["objective"] == pytest.approx(bal["objective"], rel=1e-7)
    assert abs(plain["objective"] - bal["objective"]) > 1e-3 * abs(plain["objective"])
    # a class missing from the mapping weighs 1: {1: 2} is the rows of class 1 written twice
    rep = np.concatenate([np.arange(y.size), np.flatnonzero(y == 1)])
    twice = _csv(tmp_path / "t.csv", X[rep], y[rep])
    one = _run(_spec(tmp_path, "one", {"train": str(f), "class_weight": {1: 2}}), tmp_path / "one", capsys)
    ref = _run(_spec(tmp_path, "twice", {"train": str(twice)}), tmp_path / "twice", capsys)
    assert one["objective"] == pytest.approx(ref["objective"], rel=1e-6)


def test_folds_keep_the_weights_of_their_rows(liver):
    """Cross-validation folds slice the training weights with the rows."""
    from mklkit.pipeline.data import array_data, fold

    X, y, w = liver
    d = array_data(X, y * 2.0 - 1.0, "classification")
    d.w_train = w + 1.0
    part = fold(d, np.arange(10, 40), np.arange(10))
    np.testing.assert_array_equal(part.w_train, w[10:40] + 1.0)
    assert part.X_train.shape[0] == part.w_train.size


@pytest.mark.parametrize(
    "data,loss,key,needles",
    [
        ({"sample_weight": "nope"}, "hinge", "data.sample_weight", ["no such column", "'w'"]),
        ({"sample_weight": "y"}, "hinge", "data.sample_weight", ["target"]),
        ({"sample_weight": "w", "drop": ["w"]}, "hinge", "data.drop", ["sample_weight"]),
        ({"class_weight": "balance"}, "hinge", "data.class_weight", ["balanced"]),
        ({"class_weight": {0: -1}}, "hinge", "data.class_weight", [">= 0"]),
        ({"class_weight": {7: 2.0}}, "hinge", "data.class_weight", ["7", "labels among 0, 1"]),
        ({"class_weight": "balanced"}, "squared", "data.class_weight", ["classification"]),
    ],
    ids=["unknown-column", "the-target", "dropped", "misspelt", "negative", "unknown-label", "regression"],
)
def test_weight_errors_name_the_key(tmp_path, capsys, liver, data, loss, key, needles, cli_error):
    X, y, w = liver
    f = _csv(tmp_path / "w.csv", X, y, w)
    line = cli_error(["validate", _spec(tmp_path, "bad", {"train": str(f), "target": "y", **data}, loss)])
    assert key in line, line
    for needle in needles:
        assert needle in line, line


def test_a_negative_weight_in_the_column(tmp_path, capsys, liver):
    X, y, w = liver
    f = _csv(tmp_path / "w.csv", X, y, np.where(np.arange(y.size) == 5, -2.0, w))
    code = main(
        [
            "run",
            str(_spec(tmp_path, "neg", {"train": str(f), "sample_weight": "w"})),
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2 and "data.sample_weight" in err and "-2" in err and "Traceback" not in err, err


def test_an_engine_that_refuses_weights_is_named(tmp_path, capsys, liver):
    """A weighted spec with an engine that does not accept weights fails before any kernel is built."""
    pytest.importorskip("mklkit_smo")
    X, y, w = liver
    f = _csv(tmp_path / "w.csv", X, y)
    spec = _spec(tmp_path, "smo", {"train": str(f), "class_weight": "balanced"}, engine="smo_mkl", regularizer="kl")
    code = main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2 and "sample weights" in err and "Traceback" not in err, err
