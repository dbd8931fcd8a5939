"""The default bank follows what each feature is: indicators get one linear kernel, constants none."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.estimators import MKLClassifier, default_kernels, feature_kinds
from mklkit.kernels import KernelBank


def _mixed(n: int = 60, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack(
        [
            rng.normal(size=n),  # 0 real
            rng.integers(0, 2, n).astype(float),  # 1 indicator
            np.full(n, 3.0),  # 2 constant
            rng.normal(size=n),  # 3 real
            np.where(rng.random(n) < 0.5, -1.5, 2.0),  # 4 two values, neither 0
            rng.integers(0, 3, n).astype(float),  # 5 three values
        ]
    )


def test_feature_kinds_dense_and_sparse_agree():
    X = _mixed()
    want = ["real", "binary", "constant", "real", "binary", "real"]
    assert list(feature_kinds(X)) == want
    assert list(feature_kinds(sp.csr_matrix(X))) == want
    # sparse: the implicit zeros are a value; a column of stored values only is read as it is
    S = sp.csr_matrix(np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 5.0], [0.0, 1.0, 0.0], [0.0, 1.0, 2.0]]))
    assert list(feature_kinds(S)) == ["constant", "constant", "real"]
    S = sp.csr_matrix(np.array([[0.0, 4.0], [7.0, 4.0], [0.0, 9.0]]))
    assert list(feature_kinds(S)) == ["binary", "binary"]


def test_real_features_keep_the_documented_bank():
    X = np.random.default_rng(1).normal(size=(40, 5))
    assert default_kernels(5, X) == default_kernels(5)


def test_indicators_get_one_linear_kernel_and_constants_none():
    X = _mixed()
    entries = default_kernels(X.shape[1], X)
    bank = KernelBank.build(X, entries, normalize="trace")
    each = [n for n in bank.names if "[x" in n]
    per_feature = {j: [n for n in each if n.endswith(f"[x{j}]")] for j in range(X.shape[1])}
    assert per_feature[2] == []  # constant
    assert [n.split("[")[0] for n in per_feature[1]] == ["linear"]
    assert [n.split("[")[0] for n in per_feature[4]] == ["linear"]
    for j in (0, 3, 5):
        assert len(per_feature[j]) == 3 and all(n.startswith("rbf") for n in per_feature[j])
    assert len(bank.names) == 7 + 2 + 3 * 3


@pytest.mark.parametrize("width", [0.1, 0.5, 1.0, 2.0, 10.0])
def test_every_kernel_on_a_two_valued_feature_spans_a_constant_and_the_feature(width):
    """Why one kernel is enough: a Gaussian of any width on an indicator has the same
    column space as the linear kernel plus the bias's constant."""
    x = _mixed()[:, 4]
    K = np.exp(-((x[:, None] - x[None, :]) ** 2) / (2 * width**2))
    basis = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(basis, K, rcond=None)
    assert np.linalg.norm(basis @ coef - K) <= 1e-10 * np.linalg.norm(K)


def test_estimator_on_indicators_builds_one_kernel_per_feature():
    from mklkit.data import load_builtin

    ds = load_builtin("a9a")
    rng = np.random.default_rng(0)
    rows = rng.choice(ds.X.shape[0], 2300, replace=False)
    X, y = ds.X[rows[:300]], ds.y[rows[:300]]
    X_te, y_te = ds.X[rows[300:]], ds.y[rows[300:]]
    kinds = feature_kinds(X)
    clf = MKLClassifier().fit(X, y)
    n_binary = int(np.sum(kinds == "binary"))
    n_real = int(np.sum(kinds == "real"))
    assert len(clf.kernel_names_) == 7 + n_binary + 3 * n_real
    assert clf.kernels_ == default_kernels(X.shape[1], X)
    assert clf.dual_gap_ <= 1e-2
    # three Gaussians per indicator (the bank without the feature kinds) predict no better
    old = MKLClassifier(kernels=default_kernels(X.shape[1])).fit(X, y)
    assert len(old.kernel_names_) == 7 + 3 * X.shape[1]
    assert clf.score(X_te, y_te) >= old.score(X_te, y_te) - 0.01
