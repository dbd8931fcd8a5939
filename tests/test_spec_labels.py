"""Labels in specs: any two labels (a configurable positive class), more classes one-vs-rest.

Every run goes through ``mklkit.cli.main`` in-process on bundled data
(liver from mklkit, iris from scikit-learn) with relabelled targets; the
relabelled problem is the same problem, so its objective and accuracies
equal those of the +1/-1 version, and the outputs speak the user's labels.
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

BANK = {"bank": [{"function": "rbf", "width": [0.5, 2.0, 8.0]}, {"function": "linear"}], "normalize": "trace"}
PROBLEM = {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.1}
ENGINE = {"name": "spicy", "tol": 1.0e-8, "max_iter": 200}


def _csv(path: Path, X: np.ndarray, y: Any, names: list[str], target: str = "y") -> Path:
    lines = [",".join([*names, target])]
    lines += [",".join([*(repr(float(v)) for v in row), str(t)]) for row, t in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _spec(tmp_path: Path, name: str, data: dict[str, Any], **problem: Any) -> Path:
    spec = {"data": data, "kernels": BANK, "problem": {**PROBLEM, **problem}, "engine": ENGINE}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def _run(spec: Path, out: Path, capsys) -> tuple[int, str, str]:
    code = main(["run", str(spec), "--out", str(out), "--quiet"])
    o, e = capsys.readouterr()
    return code, o, e


def _summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def liver() -> Any:
    return load_builtin("liver")


# ---------------------------------------------------------------------------
# two classes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, relabel, positive, classes",
    [
        ("zero-one", lambda y: np.where(y > 0, 1, 0), None, [0, 1]),
        ("words", lambda y: np.where(y > 0, "sick", "well"), "sick", ["sick", "well"]),
        ("two-seven", lambda y: np.where(y > 0, 2, 7), 2, [2, 7]),
        ("smaller-positive", lambda y: np.where(y > 0, 0, 1), 0, [0, 1]),
    ],
    ids=["zero-one", "words", "two-seven", "smaller-positive"],
)
def test_any_two_labels_solve_the_same_problem(tmp_path, capsys, liver, name, relabel, positive, classes):
    names = list(liver.feature_names)
    _csv(tmp_path / "pm.csv", liver.X, liver.y.astype(int), names)
    _csv(tmp_path / "re.csv", liver.X, relabel(liver.y), names)
    data = {"test_size": 0.25, "seed": 0}
    code, _, err = _run(_spec(tmp_path, "pm", {"train": "pm.csv", **data}), tmp_path / "pm", capsys)
    assert code == 0, err
    given = {"positive": positive} if positive is not None else {}
    code, _, err = _run(_spec(tmp_path, "re", {"train": "re.csv", **data, **given}), tmp_path / "re", capsys)
    assert code == 0, err
    ref, got = _summary(tmp_path / "pm"), _summary(tmp_path / "re")
    assert ref["converged"] and got["converged"]
    assert got["train_accuracy"] == ref["train_accuracy"] and got["test_accuracy"] == ref["test_accuracy"]
    assert got["objective"] == pytest.approx(ref["objective"], rel=1e-9)
    assert got["n_train"] == ref["n_train"] and got["n_test"] == ref["n_test"]
    # the outputs in the user's labels: the positive class is the one labelled +1 in liver
    assert got["classes"] == classes
    assert got["positive_class"] == relabel(np.array([1.0]))[0].item()
    assert ref["classes"] == [-1, 1] and ref["positive_class"] == 1


def test_default_positive_class_is_the_greater_label(tmp_path, capsys, liver):
    _csv(tmp_path / "w.csv", liver.X, np.where(liver.y > 0, "sick", "well"), list(liver.feature_names))
    code, out, err = _run(_spec(tmp_path, "w", {"train": "w.csv"}), tmp_path / "w", capsys)
    assert code == 0, err
    s = _summary(tmp_path / "w")
    assert s["classes"] == ["sick", "well"] and s["positive_class"] == "well"
    assert main(["validate", str(tmp_path / "w.yaml")]) == 0
    assert "classes 'sick', 'well' (positive 'well')" in capsys.readouterr().out


def test_precomputed_kernels_take_any_two_labels(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    K = np.stack([X @ X.T, np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 3.0)])
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(40) > 0, 1.0, -1.0)
    out = {}
    for name, labels, data in (("pm", y, {}), ("ab", np.where(y > 0, 5.0, 3.0), {"positive": 5})):
        np.savez(tmp_path / f"{name}.npz", K_train=K, y_train=labels)
        spec = {
            "kernels": {"precomputed": f"{name}.npz"},
            "problem": PROBLEM,
            "engine": ENGINE,
            "data": {"test_size": 0.25, "seed": 1, **data},
        }
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(spec))
        code, _, err = _run(tmp_path / f"{name}.yaml", tmp_path / name, capsys)
        assert code == 0, err
        out[name] = _summary(tmp_path / name)
    assert out["ab"]["test_accuracy"] == out["pm"]["test_accuracy"]
    assert out["ab"]["objective"] == pytest.approx(out["pm"]["objective"], rel=1e-9)
    assert out["ab"]["classes"] == [3, 5] and out["ab"]["positive_class"] == 5


# ---------------------------------------------------------------------------
# more classes: one-vs-rest
# ---------------------------------------------------------------------------
SPECIES = np.array(["setosa", "versicolor", "virginica"])


@pytest.fixture(scope="module")
def iris() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    X, y = load_iris(return_X_y=True)
    return tuple(train_test_split(X, y, test_size=0.3, random_state=0, stratify=y))  # type: ignore[return-value]


NAMES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def test_three_classes_one_vs_rest(tmp_path, capsys, iris):
    X_tr, X_te, y_tr, y_te = iris
    runs = {}
    for name, lab in (("codes", lambda c: c), ("words", lambda c: SPECIES[c])):
        _csv(tmp_path / f"{name}_tr.csv", X_tr, lab(y_tr), NAMES, "species")
        _csv(tmp_path / f"{name}_te.csv", X_te, lab(y_te), NAMES, "species")
        spec = _spec(tmp_path, name, {"train": f"{name}_tr.csv", "test": f"{name}_te.csv"})
        code, out, err = _run(spec, tmp_path / name, capsys)
        assert code == 0, err
        assert "class 'versicolor' vs rest" in out if name == "words" else "class 1 vs rest" in out
        runs[name] = _summary(tmp_path / name)
    words, codes = runs["words"], runs["codes"]
    assert words["classes"] == list(SPECIES) and codes["classes"] == [0, 1, 2]
    assert words["n_classes"] == 3 and words["multiclass"] == "ovr"
    assert words["train_accuracy"] == codes["train_accuracy"] and words["test_accuracy"] == codes["test_accuracy"]
    assert words["test_accuracy"] >= 0.9
    assert [p["class"] for p in words["problems"]] == list(SPECIES)
    assert words["files"]["problems"] == ["class_0", "class_1", "class_2"]
    for p in words["problems"]:
        assert p["status"] == "converged" and p["duality_gap"] <= ENGINE["tol"]
    assert words["status"] == "converged" and words["converged"] is True

    # each problem is the binary problem of its class against the rest, with +1/-1 labels
    for k, species in enumerate(SPECIES):
        _csv(tmp_path / "b_tr.csv", X_tr, np.where(y_tr == k, 1, -1), NAMES, "species")
        _csv(tmp_path / "b_te.csv", X_te, np.where(y_te == k, 1, -1), NAMES, "species")
        code, _, err = _run(_spec(tmp_path, "b", {"train": "b_tr.csv", "test": "b_te.csv"}), tmp_path / f"b{k}", capsys)
        assert code == 0, err
        binary = _summary(tmp_path / f"b{k}")
        mine = _summary(tmp_path / "words" / f"class_{k}")
        assert mine["class"] == species and words["problems"][k]["dir"] == f"class_{k}"
        assert mine["test_accuracy"] == binary["test_accuracy"] == words["problems"][k]["test_accuracy"]
        assert mine["objective"] == pytest.approx(binary["objective"], rel=1e-9)
        assert (tmp_path / "words" / f"class_{k}" / "solution.npz").is_file()

    # the accuracy of the predicted class: argmax of the three decision values
    from mklkit.api import load_spec, run

    res = run(load_spec(tmp_path / "words.yaml"))
    assert res.metrics["test_accuracy"] == words["test_accuracy"]


def test_three_classes_one_vs_one(tmp_path, capsys, iris):
    """``problem.multiclass: ovo``: one problem per pair of classes on their rows, each the binary
    problem of those rows (same objective, same test accuracy on the pair's test rows, raw features
    and kernels so that the pair's data are those rows exactly); the predicted class is the vote of
    the pairs (scikit-learn's rule)."""
    X_tr, X_te, y_tr, y_te = iris
    raw = {"standardize": False}
    _csv(tmp_path / "tr.csv", X_tr, SPECIES[y_tr], NAMES, "species")
    _csv(tmp_path / "te.csv", X_te, SPECIES[y_te], NAMES, "species")
    spec = _spec(tmp_path, "ovo", {"train": "tr.csv", "test": "te.csv", **raw}, multiclass="ovo")
    spec.write_text(spec.read_text().replace("normalize: trace", "normalize: none"))
    code, out, err = _run(spec, tmp_path / "ovo", capsys)
    assert code == 0, err
    assert "3 one-vs-one problems" in out and "class 'versicolor' vs 'setosa'" in out
    top = _summary(tmp_path / "ovo")
    assert top["multiclass"] == "ovo" and top["files"]["problems"] == ["pair_0_1", "pair_0_2", "pair_1_2"]
    assert [(p["class"], p["versus"]) for p in top["problems"]] == [
        ("versicolor", "setosa"),
        ("virginica", "setosa"),
        ("virginica", "versicolor"),
    ]
    assert top["test_accuracy"] >= 0.9
    for (i, j), p in zip([(0, 1), (0, 2), (1, 2)], top["problems"]):
        tr, te = np.isin(y_tr, (i, j)), np.isin(y_te, (i, j))
        _csv(tmp_path / "p_tr.csv", X_tr[tr], np.where(y_tr[tr] == j, 1, -1), NAMES, "species")
        _csv(tmp_path / "p_te.csv", X_te[te], np.where(y_te[te] == j, 1, -1), NAMES, "species")
        pspec = _spec(tmp_path, "p", {"train": "p_tr.csv", "test": "p_te.csv", **raw})
        pspec.write_text(pspec.read_text().replace("normalize: trace", "normalize: none"))
        code, _, err = _run(pspec, tmp_path / f"p{i}{j}", capsys)
        assert code == 0, err
        binary = _summary(tmp_path / f"p{i}{j}")
        mine = _summary(tmp_path / "ovo" / f"pair_{i}_{j}")
        assert mine["n_train"] == int(tr.sum()) and mine["n_test"] == int(te.sum())
        assert p["duality_gap"] <= ENGINE["tol"]
        assert mine["objective"] == pytest.approx(binary["objective"], rel=1e-9)
        assert mine["test_accuracy"] == binary["test_accuracy"] == p["test_accuracy"]
    # the predicted class: the votes of the pairs' decision values
    from mklkit._multiclass import ovo_decision, ovo_tasks
    from mklkit.api import load_spec, run

    spec_obj = load_spec(tmp_path / "ovo.yaml")
    res = run(spec_obj)
    assert res.metrics["test_accuracy"] == top["test_accuracy"]
    prepared = spec_obj.prepare(build=True)
    tasks = ovo_tasks(np.asarray(y_tr), 3)
    F = np.column_stack(
        [prepared.test.decision_function(r.result, prepared.bank, rows=t.rows) for r, t in zip(res.runs, tasks)]
    )
    votes = np.argmax(ovo_decision(F, tasks, 3), axis=1)
    assert np.mean(votes == y_te) == top["test_accuracy"]


def test_one_vs_one_needs_gram_matrices(tmp_path, capsys, iris, cli_error):
    X_tr, _, y_tr, _ = iris
    _csv(tmp_path / "tr.csv", X_tr, SPECIES[y_tr], NAMES, "species")
    spec = {
        "data": {"train": "tr.csv"},
        "kernels": {**BANK, "factor": True},
        "problem": {**PROBLEM, "multiclass": "ovo"},
        "engine": "auto",
    }
    p = tmp_path / "f.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    line = cli_error(["run", p, "--out", tmp_path / "o"])
    assert "problem.multiclass" in line and "Gram matrices" in line and "ovr" in line, line


def test_report_of_a_multiclass_run(tmp_path, capsys, iris):
    pytest.importorskip("matplotlib")
    X_tr, _, y_tr, _ = iris
    _csv(tmp_path / "tr.csv", X_tr, SPECIES[y_tr], NAMES, "species")
    code, _, err = _run(_spec(tmp_path, "m", {"train": "tr.csv", "test_size": 0}), tmp_path / "m", capsys)
    assert code == 0, err
    assert main(["report", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "3 one-vs-rest problems" in out and "class_<k>" in out
    assert (tmp_path / "m" / "weights.png").is_file()
    assert main(["report", str(tmp_path / "m" / "class_2")]) == 0


def test_sweep_folds_refuse_more_than_two_classes(tmp_path, capsys, iris, cli_error):
    from mklkit.pipeline import CVSettings, PipelineError, make_folds
    from mklkit.spec import parse_spec

    X_tr, _, y_tr, _ = iris
    _csv(tmp_path / "tr.csv", X_tr, SPECIES[y_tr], NAMES, "species")
    spec = parse_spec(
        {"data": {"train": "tr.csv", "test_size": 0}, "kernels": BANK, "problem": PROBLEM},
        file="m.yaml",
        folder=tmp_path,
    )
    with pytest.raises(PipelineError, match=r"cv: .*target of tr.*3 classes") as info:
        make_folds(CVSettings(), spec.load_data())
    assert info.value.key == "cv"
    sweep = {"data": {"train": "tr.csv"}, "kernels": BANK, "problem": {**PROBLEM, "C": [0.1, 1.0]}, "cv": {"folds": 3}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sweep))
    line = cli_error(["sweep", tmp_path / "s.yaml", "--dry-run"])
    assert ": cv: the target of tr has 3 classes" in line
    assert "got ['setosa', 'versicolor', 'virginica']" in line and "allowed: a target with two classes" in line


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def test_continuous_target_with_a_classification_loss(tmp_path, capsys, cli_error):
    spec = _spec(tmp_path, "c", {"builtin": "liver", "target": "drinks", "drop": ["y"]})
    line = cli_error(["validate", spec])
    assert line.startswith(f"{spec}: problem.loss: ")
    assert "looks continuous (16 distinct values" in line
    assert "got 'logistic'" in line
    assert "allowed: a regression loss (" in line and "squared" in line and "eps_insensitive" in line


def test_integer_classes_are_not_called_continuous(tmp_path, capsys, liver):
    _csv(tmp_path / "k.csv", liver.X, np.arange(liver.X.shape[0]) % 4, list(liver.feature_names))
    assert main(["validate", str(_spec(tmp_path, "k", {"train": "k.csv"}))]) == 0
    assert "4 classes one-vs-rest: 0, 1, 2, 3" in capsys.readouterr().out


@pytest.mark.parametrize(
    "labels, positive, loss, key, needles",
    [
        (
            "words",
            "ill",
            "logistic",
            "data.positive",
            ["is not one of the labels", "got 'ill'", "allowed: one of the labels present: 'sick', 'well'"],
        ),
        ("words", 1, "logistic", "data.positive", ["got 1", "'sick', 'well'"]),
        ("three", 2, "logistic", "data.positive", ["only for two classes", "has 3 (0, 1, 2)", "got 2"]),
        ("pm", 1, "squared", "data.positive", ["only used with a classification loss", "got 1", "'squared'"]),
    ],
)
def test_positive_class_errors(tmp_path, capsys, liver, labels, positive, loss, key, needles, cli_error):
    y = {
        "words": np.where(liver.y > 0, "sick", "well"),
        "three": np.arange(liver.X.shape[0]) % 3,
        "pm": liver.y.astype(int),
    }[labels]
    _csv(tmp_path / "d.csv", liver.X, y, list(liver.feature_names))
    spec = _spec(tmp_path, "e", {"train": "d.csv", "positive": positive}, loss=loss)
    line = cli_error(["validate", spec])
    assert line.startswith(f"{spec}: {key}: ")
    for n in needles:
        assert n in line, line


def test_test_file_with_a_label_the_training_data_lack(tmp_path, capsys, liver, cli_error):
    names = list(liver.feature_names)
    _csv(tmp_path / "tr.csv", liver.X[:200], np.where(liver.y[:200] > 0, "sick", "well"), names)
    y_te = np.where(liver.y[200:] > 0, "sick", "well").astype(object)
    y_te[3] = "cured"
    _csv(tmp_path / "te.csv", liver.X[200:], y_te, names)
    line = cli_error(["validate", _spec(tmp_path, "t", {"train": "tr.csv", "test": "te.csv"})])
    assert ": data.test: has the label 'cured'" in line and "allowed: labels among 'sick', 'well'" in line


def test_a_class_with_one_row_cannot_be_split(tmp_path, capsys, liver, cli_error):
    y = np.where(liver.y > 0, "sick", "well").astype(object)
    y[0] = "rare"
    _csv(tmp_path / "d.csv", liver.X, y, list(liver.feature_names))
    line = cli_error(["validate", _spec(tmp_path, "r", {"train": "d.csv"})])
    assert ": data.test_size: cannot split: the class 'rare' has 1 row" in line
