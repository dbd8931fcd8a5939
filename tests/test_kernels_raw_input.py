"""Boolean and string kernels through the spec pipeline and the estimators: the data stays unstandardised."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from mklkit import MKLClassifier
from mklkit.api import load_spec, run
from mklkit.components.params import ParamError
from mklkit.data import load_builtin
from mklkit.pipeline import PipelineError

SPLICE_SPEC = """
    data: {builtin: splice, train_size: 150, test_size: 0.2, seed: 1}
    kernels:
      bank:
        - {function: spectrum, k: [1, 2, 3]}
        - {function: subsequences, p: 2, features: [[20, 21, 22, 23, 24, 25, 26, 27, 28, 29]]}
    problem: {loss: logistic}
"""


def _write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_spec_with_a_spectrum_bank_runs_on_splice_unstandardised(tmp_path):
    spec = load_spec(_write(tmp_path, SPLICE_SPEC))
    assert spec.data.standardize is False
    res = run(spec)
    assert res.n_train == 150 and res.kernel_names[0].startswith("spectrum(k=1")
    assert len(res.kernel_names) == 4
    assert res.metrics["test_accuracy"] > 0.6  # chance is 0.52 on splice's test part
    w = np.asarray(res.result.kernel_weights)
    assert w.shape == (4,) and np.all(w >= 0) and w.sum() > 0


def test_spec_asking_to_standardise_sequences_is_refused(tmp_path):
    text = SPLICE_SPEC.replace("seed: 1}", "seed: 1, standardize: true}")
    with pytest.raises((PipelineError, ValueError)) as exc:
        load_spec(_write(tmp_path, text))
    err = exc.value
    assert "data.standardize" in str(err) and "'spectrum'" in str(err) and "kernels.bank[0].function" in str(err)


def test_numeric_bank_in_a_spec_is_still_standardised(tmp_path):
    spec = load_spec(
        _write(
            tmp_path,
            SPLICE_SPEC.replace("function: spectrum", "function: rbf")
            .replace("k: [1, 2, 3]", "width: 1.0")
            .replace("function: subsequences, p: 2", "function: linear"),
        )
    )
    assert spec.data.standardize is True


def test_estimator_fits_string_kernels_on_codes_as_given():
    ds = load_builtin("splice")
    rng = np.random.default_rng(0)
    idx = rng.permutation(ds.X.shape[0])
    tr, te = idx[:200], idx[200:600]
    bank = [{"function": "spectrum", "k": [1, 2, 3]}]
    # a standardised code would not be an integer: the kernel would refuse it
    auto = MKLClassifier(kernels=bank).fit(ds.X[tr], ds.y[tr])
    off = MKLClassifier(kernels=bank, standardize=False).fit(ds.X[tr], ds.y[tr])
    np.testing.assert_array_equal(auto.decision_function(ds.X[te]), off.decision_function(ds.X[te]))
    assert auto.kernel_weights_.shape == (3,)
    assert auto.score(ds.X[te], ds.y[te]) > 0.55
    with pytest.raises(ParamError) as exc:
        MKLClassifier(kernels=bank, standardize=True).fit(ds.X[tr], ds.y[tr])
    assert exc.value.key == "standardize" and exc.value.value is True and "'spectrum'" in exc.value.allowed


def test_estimator_fits_boolean_kernels_on_dense_binary_features():
    rng = np.random.default_rng(3)
    X = (rng.random((120, 12)) < 0.4).astype(float)
    y = np.where(X[:, 0] + X[:, 1] * X[:, 2] > 0.5, 1, -1)
    clf = MKLClassifier(kernels=[{"function": "conjunctive", "c": [1, 2]}, {"function": "tanimoto"}]).fit(X, y)
    assert clf.kernel_weights_.shape == (3,)
    assert clf.score(X, y) > 0.9
