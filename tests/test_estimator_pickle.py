"""What a fitted estimator keeps: predictions after pickling, and pickles the size of what prediction needs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.data import load_builtin
from mklkit.estimators import MKLClassifier, MKLRegressor
from mklkit.kernels import FactorBank, build_factor_bank
from mklkit.kernels.factor import FactorPredictor

pytestmark = pytest.mark.usefixtures("one_thread")

BANK = [
    {"function": "rbf", "width": [1.0, 3.0]},
    {"function": "poly", "degree": 2},
    {"function": "linear", "features": [0, 1, 2]},
]


@pytest.fixture(scope="module")
def a9a():
    ds = load_builtin("a9a")
    X, y = sp.csr_matrix(ds.X), np.asarray(ds.y)
    return X[:3000], y[:3000], X[3000:3400], y[3000:3400]


def _nbytes(X) -> int:
    return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) if sp.issparse(X) else int(X.nbytes)


# ---------------------------------------------------------------------------
# The predictor of a factor bank: the bank's own predictions, without its training factors
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["auto", "pivoted_cholesky", "nystrom"])
@pytest.mark.parametrize("normalize", ["trace", "diagonal", "none"])
def test_factor_predictor_gives_the_banks_predictions(method, normalize):
    rng = np.random.default_rng(0)
    X, X_new = rng.normal(size=(200, 5)), rng.normal(size=(30, 5))
    X[40:50] = X[:10]  # repeated points: pivots of the distinct points
    fb = build_factor_bank(BANK, X, method=method, normalize=normalize, rank=30, tol=1e-8)
    M, N = fb.shape[:2]
    alpha = rng.normal(size=(2, M, N))
    alpha[:, 1] = 0.0  # an inactive kernel is not kept
    pred = fb.predictor(alpha, [0.5, -1.0])
    assert 1 not in pred.kernels.tolist() and pred.n_kernels == M - 1
    expected = np.column_stack([fb.decision_function(X_new, alpha[t], b) for t, b in enumerate((0.5, -1.0))])
    got = pred.decision_function(X_new)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    # it keeps the pivots or landmarks, not the (R, N) training factors
    assert pred.nbytes < fb.nbytes / 4
    again = pickle.loads(pickle.dumps(pred))
    np.testing.assert_array_equal(again.decision_function(X_new), got)


def test_factor_predictor_of_sparse_exact_and_given_factors():
    rng = np.random.default_rng(1)
    Xs = sp.random(300, 40, density=0.1, format="csr", random_state=0)
    Xs_new = sp.random(25, 40, density=0.1, format="csr", random_state=1)
    fb = build_factor_bank([{"function": "linear", "features": "each"}], Xs)
    assert fb.sparse
    alpha = rng.normal(size=fb.shape[:2])
    np.testing.assert_allclose(
        fb.predictor(alpha, 0.3).decision_function(Xs_new)[:, 0],
        fb.decision_function(Xs_new, alpha, 0.3),
        rtol=1e-12,
        atol=1e-12,
    )
    L, L_new = rng.normal(size=(300, 12)), rng.normal(size=(25, 12))
    for normalize in ("trace", "diagonal", "none"):
        given = FactorBank.from_factors(L, ranks=[4, 3, 5], normalize=normalize)
        a = rng.normal(size=(3, 300))
        a[1] = 0.0
        pred = given.predictor(a, -0.2)
        assert pred.kernels.tolist() == [0, 2]
        np.testing.assert_allclose(
            pred.decision_function(L_new)[:, 0], given.decision_function(L_new, a, -0.2), rtol=1e-10, atol=1e-12
        )


def test_factor_predictor_needs_a_map():
    fb = FactorBank(np.ones((2, 4)), [0, 1, 2])
    with pytest.raises(ValueError, match="has no map to new points"):
        fb.predictor(np.ones((2, 4)))


# ---------------------------------------------------------------------------
# Estimators: predictions before and after pickling, on every route
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [False, {"rank": 20}, {"method": "exact"}], ids=["gram", "approx", "exact"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_predictions_survive_pickling_binary_and_multiclass(wine, factor, sparse):
    X_tr, X_te, y_tr, _ = wine
    if sparse:
        X_tr, X_te = sp.csr_matrix(np.maximum(X_tr, 0.0)), sp.csr_matrix(np.maximum(X_te, 0.0))
    bank = (
        [{"function": "linear"}, {"function": "linear", "features": [0, 1, 2]}]
        if factor == {"method": "exact"}
        else BANK
    )
    binary = y_tr != 2
    for clf, X, y in (
        (MKLClassifier(bank, factor=factor), X_tr[binary], y_tr[binary]),
        (MKLClassifier(bank, factor=factor, multiclass="ovr"), X_tr, y_tr),
        (MKLRegressor(bank, factor=factor), X_tr, y_tr.astype(float)),
    ):
        clf.fit(X, y)
        assert (getattr(clf.bank_, "representation", "array") == "factor") == (factor is not False)
        if factor is not False:
            assert isinstance(clf.bank_, FactorPredictor)
            assert clf.bank_.kernels.tolist() == clf.active_kernels_.tolist()
        before = clf.predict(X_te), getattr(clf, "decision_function", clf.predict)(X_te)
        loaded = pickle.loads(pickle.dumps(clf))
        after = loaded.predict(X_te), getattr(loaded, "decision_function", loaded.predict)(X_te)
        np.testing.assert_array_equal(after[0], before[0])
        np.testing.assert_array_equal(after[1], before[1])
        # the results come back whole: the inactive kernels' zero rows of alpha are restored
        for r0, r1 in zip(np.atleast_1d(clf.result_), np.atleast_1d(loaded.result_)):
            np.testing.assert_array_equal(r1.alpha, r0.alpha)
            assert r1.alpha.shape == r0.alpha.shape and r1.gap == r0.gap
        np.testing.assert_array_equal(loaded.kernel_weights_, clf.kernel_weights_)


def test_factor_predictions_match_the_factor_bank(wine):
    """The fitted predictor gives what the training factor bank gives with the result's alpha."""
    from mklkit.data import Standardizer

    X_tr, X_te, y_tr, _ = wine
    clf = MKLClassifier(BANK, factor={"rank": 25}).fit(X_tr, y_tr)
    scaler = Standardizer().fit(X_tr)
    fb = build_factor_bank(BANK, scaler.transform(X_tr), rank=25)
    Z = scaler.transform(X_te)
    expected = np.column_stack([fb.decision_function(Z, r.alpha, r.bias) for r in clf.result_])
    np.testing.assert_allclose(clf.decision_function(X_te), expected, rtol=1e-9, atol=1e-9)


def test_path_on_factors_keeps_no_training_factors(wine):
    X_tr, X_te, y_tr, _ = wine
    binary = y_tr != 2
    path = MKLClassifier(BANK, factor={"rank": 25}, regularizer="l1").fit_path(X_tr[binary], y_tr[binary], Cs=4)
    assert path._prep.bank is None
    loaded = pickle.loads(pickle.dumps(path))
    for i in range(len(path)):
        est, again = path.estimator(i), loaded.estimator(i)
        assert isinstance(est.bank_, FactorPredictor)
        np.testing.assert_array_equal(again.decision_function(X_te), est.decision_function(X_te))
        np.testing.assert_array_equal(est.kernel_weights_, path.kernel_weights[i])
    np.testing.assert_array_equal(loaded.kernel_weights, path.kernel_weights)


# ---------------------------------------------------------------------------
# Size: the pickle holds what prediction needs, not the (R, N) factor bank
# ---------------------------------------------------------------------------
def test_pickle_of_a_factor_fit_is_small(a9a):
    """3,000 a9a points, 8 Gaussian kernels at rank 64: the factor bank is 12 MiB (R x N float64),
    the training data 0.5 MiB; the pickled model holds the active kernels' pivots (sparse, as the
    data), their coefficients and the results (alpha's non-zero rows)."""
    X_tr, y_tr, X_te, _ = a9a
    bank = [
        {"function": "rbf", "width": [3.0, 6.0, 10.0], "features": "all"},
        {"function": "rbf", "width": 4.0, "features": {"random_subsets": 5, "size": 0.2, "seed": 0}},
    ]
    clf = MKLClassifier(bank, factor={"rank": 64}).fit(X_tr, y_tr)
    R, N = clf.factor_approximation_["total_rank"], X_tr.shape[0]
    blob = pickle.dumps(clf)
    active = clf.active_kernels_.size
    # alpha's non-zero rows (active x N) and the rest: at most twice the data plus those rows
    assert len(blob) <= 2 * _nbytes(X_tr) + 8 * active * N + 100_000
    assert len(blob) < 8 * R * N / 5
    assert clf.bank_.nbytes <= _nbytes(X_tr)
    np.testing.assert_array_equal(pickle.loads(blob).decision_function(X_te), clf.decision_function(X_te))
