"""``problem.multiclass: joint`` in specs: one multinomial problem on all training rows with one kernel
weighting, the same problem and answer as ``MKLClassifier(multiclass="joint")`` on the same bank and C."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mklkit import MKLClassifier
from mklkit.api import load_spec, run
from mklkit.cli import main
from mklkit.pipeline.joint import JOINT_TOL
from mklkit.spec import SpecError

BANK = [{"function": "rbf", "width": [1.0, 4.0, 16.0]}, {"function": "linear"}]
REG = {"name": "elasticnet", "lam": 0.5}
TOL = 1e-8


def _csv(path: Path, X: np.ndarray, y: Any) -> None:
    names = [f"f{j}" for j in range(X.shape[1])]
    lines = [",".join([*names, "y"])]
    lines += [",".join([*(repr(float(v)) for v in row), str(t)]) for row, t in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def wine_std(wine):
    """Wine standardized on the training part (the spec and the estimator then see the same features)."""
    X_tr, X_te, y_tr, y_te = wine
    mu, sd = X_tr.mean(0), X_tr.std(0)
    return (X_tr - mu) / sd, (X_te - mu) / sd, np.asarray(y_tr), np.asarray(y_te)


def _spec(
    tmp_path: Path, data: tuple[np.ndarray, ...], problem: dict[str, Any], engine: Any = None, bank: Any = None
) -> Path:
    X_tr, X_te, y_tr, y_te = data
    _csv(tmp_path / "tr.csv", X_tr, y_tr)
    _csv(tmp_path / "te.csv", X_te, y_te)
    spec = {
        "data": {"train": "tr.csv", "test": "te.csv", "standardize": False},
        "kernels": {"bank": BANK if bank is None else bank, "normalize": "none"},
        "problem": {"loss": "multinomial", "regularizer": REG, "multiclass": "joint", **problem},
        "engine": engine if engine is not None else {"name": "auto", "tol": TOL},
    }
    if engine == "omit":
        del spec["engine"]
    path = tmp_path / "joint.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _estimator(data: tuple[np.ndarray, ...], C: Any, tol: float | None = TOL, bank: Any = None) -> MKLClassifier:
    X_tr, _, y_tr, _ = data
    est = MKLClassifier(
        BANK if bank is None else bank,
        multiclass="joint",
        regularizer=REG,
        C=C,
        tol=tol,
        normalize="none",
        standardize=False,
    )
    return est.fit(X_tr, y_tr)


def _test_decisions(spec_path: Path, res: Any) -> np.ndarray:
    prepared = load_spec(spec_path).prepare(build=True)
    return np.column_stack([prepared.test_decision(r.result) for r in res.runs])


@pytest.mark.parametrize("C", [0.5, "scale"])
def test_spec_joint_is_the_estimators_joint_fit(tmp_path, wine_std, C):
    """Same kernel weights, decision values and predictions as ``MKLClassifier(multiclass="joint")``; one
    weighting, one gap and one iteration count in ``summary.json``."""
    spec_path = _spec(tmp_path, wine_std, {"C": C})
    res = run(spec_path)
    est = _estimator(wine_std, C)
    s = res.summary()
    assert s["multiclass"] == "joint" and s["loss"] == "multinomial" and s["n_classes"] == 3
    w = np.array([k["weight"] for k in s["kernel_weights"]])
    assert w.shape == (len(est.kernel_weights_),)
    np.testing.assert_allclose(w, est.kernel_weights_, atol=1e-6)
    assert s["C"] == pytest.approx(est.C_, rel=1e-12)
    assert s["duality_gap"] == res.joint.gap <= TOL and s["converged"]
    assert s["iterations"] == res.joint.iterations == res.runs[0].result.iterations
    F = _test_decisions(spec_path, res)
    np.testing.assert_allclose(F, est.decision_function(wine_std[1]), atol=1e-6)
    pred = np.argmax(F, axis=1)
    assert np.array_equal(est.classes_[pred], est.predict(wine_std[1]))
    assert s["test_accuracy"] == pytest.approx(np.mean(est.predict(wine_std[1]) == wine_std[3]), abs=0)
    assert s["test_accuracy"] >= 0.9


@pytest.mark.parametrize("name", ["crammer_singer", "weston_watkins"])
def test_spec_joint_with_the_smoothed_multiclass_hinge(tmp_path, wine_std, name):
    """``loss: {name: crammer_singer | weston_watkins, smoothing: ...}`` with ``multiclass: joint``: the estimator's
    fit with that loss (a registered multiclass loss named in the spec), reported in ``summary.json``."""
    loss = {"name": name, "smoothing": 0.2}
    res = run(_spec(tmp_path, wine_std, {"C": 0.5, "loss": loss}))
    X_tr, _, y_tr, _ = wine_std
    est = MKLClassifier(BANK, loss=loss, regularizer=REG, C=0.5, tol=TOL, normalize="none", standardize=False).fit(
        X_tr, y_tr
    )
    s = res.summary()
    assert s["loss"] == name and s["duality_gap"] <= TOL
    assert res.spec.problem.multiclass_loss.get_params() == {"smoothing": 0.2}
    np.testing.assert_allclose([k["weight"] for k in s["kernel_weights"]], est.kernel_weights_, atol=1e-6)
    np.testing.assert_allclose(res.joint.objective, est.result_[0].objective, rtol=1e-9)


#: Kernels of single features (linear: rank 1; Gaussian: a low numerical rank): the joint fit runs block descent
#: on their exact factors.
LOW_RANK = [{"function": "linear", "features": "each"}, {"function": "rbf", "width": [2.0], "features": "each"}]


@pytest.mark.parametrize("bank, method", [(None, "fista"), (LOW_RANK, "bcd")])
def test_spec_joint_path_chooses_the_estimators_C(tmp_path, wine_std, bank, method):
    """``problem.C: path``: the held-out choice of the joint problem, as the estimator's ``C="path"``, both at the
    default gaps of the iteration (FISTA on the Gram matrices of ``BANK``, whose exact factors would have more
    than half of their M N rank; block descent on exact factors of low-rank kernels)."""
    res = run(_spec(tmp_path, wine_std, {"C": "path"}, {"name": "auto"}, bank=bank))
    est = _estimator(wine_std, "path", tol=None, bank=bank)
    s = res.summary()
    assert s["C_selection"] is not None and s["C_selection"]["C"] == pytest.approx(s["C"], rel=1e-12)
    assert s["C"] == pytest.approx(est.C_selection_.C, rel=1e-9)
    assert s["tol"] == JOINT_TOL[method] and s["duality_gap"] <= s["tol"] and est.dual_gap_ <= s["tol"]
    np.testing.assert_allclose([k["weight"] for k in s["kernel_weights"]], est.kernel_weights_, atol=1e-6)


def test_spec_joint_two_classes_is_the_binary_problem(tmp_path, wine_std):
    """Two classes: the binary logistic problem, as the estimator (the same objective as ``loss: logistic``)."""
    X_tr, X_te, y_tr, y_te = wine_std
    tr, te = y_tr < 2, y_te < 2
    two = (X_tr[tr], X_te[te], y_tr[tr], y_te[te])
    joint = run(_spec(tmp_path, two, {"C": 0.5}))
    binary = run(_spec(tmp_path, two, {"C": 0.5, "loss": "logistic", "multiclass": "ovr"}))
    assert joint.result.objective == pytest.approx(binary.result.objective, rel=1e-12)
    assert joint.metrics == binary.metrics


@pytest.mark.parametrize(
    "problem, engine, key, value, allowed",
    [
        ({"loss": "hinge"}, None, "problem.loss", "hinge", "crammer_singer"),
        ({"loss": {"name": "crammer_singer", "smoothing": -1}}, None, "problem.loss.smoothing", -1, "> 0"),
        ({}, {"name": "spicy"}, "engine.name", "spicy", "auto"),
        ({"weighting": "alignf"}, None, "problem.weighting", "alignf", "ovr or ovo"),
    ],
)
def test_spec_joint_errors_name_the_key(tmp_path, wine_std, problem, engine, key, value, allowed):
    with pytest.raises(SpecError) as info:
        load_spec(_spec(tmp_path, wine_std, {"C": 0.5, **problem}, engine))
    err = info.value
    assert err.key == key and err.shown == repr(value) and allowed in err.allowed


def test_spec_joint_engine_defaults_to_auto(tmp_path, wine_std):
    """Without an ``engine`` section the joint problem takes ``auto`` (the others keep the spec's default)."""
    assert load_spec(_spec(tmp_path, wine_std, {"C": 0.5}, "omit")).engine.name == "auto"
    ovr = load_spec(_spec(tmp_path, wine_std, {"C": 0.5, "loss": "logistic", "multiclass": "ovr"}, "omit"))
    assert ovr.engine.name == "spicy"


def test_cli_run_validate_and_schema_know_joint(tmp_path, wine_std, capsys):
    spec_path = _spec(tmp_path, wine_std, {"C": 0.5}, {"name": "auto", "tol": 1e-4})
    assert main(["validate", str(spec_path)]) == 0
    assert main(["run", str(spec_path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out, _ = capsys.readouterr()
    assert "one joint problem of 3 classes" in out
    top = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert top["multiclass"] == "joint" and top["files"]["problems"] == ["class_0", "class_1", "class_2"]
    assert top["duality_gap"] <= 1e-4 and top["tol"] == 1e-4
    first = json.loads((tmp_path / "out" / "class_0" / "summary.json").read_text())
    assert [k["weight"] for k in first["kernel_weights"]] == [k["weight"] for k in top["kernel_weights"]]
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr()[0])
    text = json.dumps(schema)
    assert '"joint"' in text and '"ovo"' in text
