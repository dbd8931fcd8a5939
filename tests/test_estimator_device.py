"""``device=`` on the estimators: the fit runs the engine apg on the factors held by the device's array
library (here the CPU: numpy, and array-api-strict through ``engine_params``), and agrees with the CPU
engine on the same factors; the parameter's errors name it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from mklkit.data import load_builtin
from mklkit.estimators import MKLClassifier, MKLRegressor


@pytest.fixture(scope="module")
def sonar():
    ds = load_builtin("sonar")
    return ds.X, ds.y


@pytest.mark.parametrize("library", ["auto", "array_api_strict"])
def test_a_fit_on_a_device_agrees_with_bcd_on_the_same_factors(sonar, library):
    X, y = sonar
    est = MKLClassifier(device="cpu", C=0.05, tol=1e-7, engine_params={"array_library": library}).fit(X, y)
    ref = MKLClassifier(engine="bcd", factor=True, C=0.05, tol=1e-9).fit(X, y)
    assert est.solved_by_ == "apg" and est.engine_.device == "cpu"
    assert est.result_.gap <= 1e-7
    assert abs(est.result_.objective - ref.result_.objective) <= 1e-6 * abs(ref.result_.objective)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    assert clone(est).get_params()["device"] == "cpu"


def test_a_regressor_takes_the_device_too():
    ds = load_builtin("liver")
    est = MKLRegressor(device="cpu", C=0.5, tol=1e-6).fit(ds.X[:150], ds.y[:150])
    assert est.solved_by_ == "apg" and est.result_.gap <= 1e-6


@pytest.mark.parametrize(
    "params,match",
    [
        ({"engine": "spicy"}, r"engine must be 'auto' or 'apg' with device"),
        ({"factor": False}, r"factor must be 'auto', True or a mapping with device"),
        ({"device": "gpu"}, r"MKLClassifier: device must be None, 'cpu', 'cuda' or 'cuda:K'; got 'gpu'"),
        ({"device": 3}, r"MKLClassifier: device must be None, 'cpu', 'cuda' or 'cuda:K'; got 3"),
    ],
)
def test_the_device_parameter_is_checked(sonar, params, match):
    X, y = sonar
    with pytest.raises(ValueError, match=match):
        MKLClassifier(**{"device": "cpu", "C": 0.05, **params}).fit(X, y)


def test_a_spec_names_the_device_in_its_engine_section(tmp_path):
    import yaml

    from mklkit import api

    spec = {
        "data": {"builtin": "sonar", "test_size": 0.2, "seed": 0},
        "kernels": {"bank": [{"function": "rbf", "width": [1.0, 4.0]}], "factor": {"rank": 30}},
        "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.05},
        "engine": {"name": "apg", "device": "cpu", "array_library": "array_api_strict", "tol": 1e-6},
        "output": {"dir": str(tmp_path / "out")},
    }
    path = tmp_path / "device.yaml"
    path.write_text(yaml.safe_dump(spec))
    summary = api.run(path, progress=False).summary()
    assert summary["solved_by"] == "apg" and summary["status"] == "converged" and summary["duality_gap"] <= 1e-6
    spec["engine"]["device"] = "tpu"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(
        ValueError, match=r"device\.yaml: engine\.device: invalid value; got 'tpu'; allowed: 'cpu', 'cuda'"
    ):
        api.run(path, progress=False)


def test_a_one_class_fit_on_a_device_reaches_its_nu_certified():
    from mklkit.estimators import MKLOneClassSVM

    X = load_builtin("wdbc").X[:200]
    est = MKLOneClassSVM(device="cpu", nu=0.3, tol=1e-4).fit(X)
    ref = MKLOneClassSVM(engine="bcd", factor=True, nu=0.3, tol=1e-4).fit(X)
    assert est.solved_by_ == "apg" and est.dual_gap_ <= 1e-4
    assert abs(est.nu_ - 0.3) <= est.nu_tol and abs(ref.nu_ - 0.3) <= ref.nu_tol
    # the decision values of the two certified solves agree to the certificates' accuracy
    scale = np.max(np.abs(ref.decision_function(X)))
    assert np.max(np.abs(est.decision_function(X) - ref.decision_function(X))) <= 0.05 * scale
