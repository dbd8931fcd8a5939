"""The default bank's kernels on all features, kept on held-out rows when the whole bank does no
better (mklkit.pipeline.kernel_subset)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mklkit import MKLClassifier
from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import ElasticNet
from mklkit.engines.spicy import Spicy
from mklkit.estimators import default_kernels
from mklkit.kernels import KernelBank, build_factor_bank
from mklkit.pipeline.kernel_subset import prefer_subset, restrict_result, subset_problem, widen_result
from mklkit.problem import Problem

N, D = 800, 4


@pytest.fixture(autouse=True)
def one_part(monkeypatch):
    """The comparison runs where C is chosen on one held-out part (from 2,500 rows); these tests use 300-800 rows
    for speed, so every size counts as enough here (``test_cross_validation_keeps_the_whole_bank``: below)."""
    import mklkit.pipeline.heldout as heldout

    monkeypatch.setattr(heldout, "AUTO_MIN_HELD", 1)


def _points(seed: int, n: int = N) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, D))


def _joint(X: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Classes by the sign of x0 x1: no sum of functions of single features separates them."""
    e = np.random.default_rng(seed).normal(size=X.shape[0])
    return np.where(X[:, 0] * X[:, 1] + noise * e > 0, 1, -1)


def _additive(X: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """Classes by a sum of steep functions of single features."""
    e = np.random.default_rng(seed).normal(size=X.shape[0])
    return np.where(np.sin(3 * X[:, 0]) + np.sin(3 * X[:, 1]) + np.sin(3 * X[:, 2]) + noise * e > 0, 1, -1)


def test_classes_that_need_the_features_jointly_keep_the_kernels_on_all_features():
    X, Xt = _points(0), _points(1, 2000)
    y, yt = _joint(X, 0.3, 2), _joint(Xt, 0.0, 3)
    clf = MKLClassifier(C="path").fit(X, y)
    choice = clf.bank_choice_
    assert choice["kept"] == "kernels on all features"
    assert choice["difference"] <= choice["difference_se"]
    on_all = [i for i, name in enumerate(clf.kernel_names_) if name.endswith("[all]")]
    assert choice["kernels"] == [clf.kernel_names_[i] for i in on_all]
    assert len(clf.kernel_names_) == 7 + 3 * D  # the whole bank is still described
    others = np.setdiff1d(np.arange(len(clf.kernel_names_)), on_all)
    assert np.all(clf.kernel_weights_[others] == 0.0) and np.all(clf.result_.alpha[others] == 0.0)
    assert set(clf.active_kernels_.tolist()) <= set(on_all)
    assert clf.dual_gap_ <= 1e-2 and clf.C_ == pytest.approx(clf.C_selection_.C)
    # the same model as the kernels on all features given by hand, at the same C
    entries = [e for e in default_kernels(D, X) if e["features"] == "all"]
    by_hand = MKLClassifier(kernels=entries, C=clf.C_, tol=1e-6).fit(X, y)
    again = MKLClassifier(C="path", tol=1e-6).fit(X, y)
    assert np.mean(np.sign(again.decision_function(Xt)) == np.sign(by_hand.decision_function(Xt))) >= 0.995
    # and on new points it does no worse than the whole bank at the C the whole bank's path chose
    whole = MKLClassifier(C=choice["whole_bank_C"], tol=1e-6).fit(X, y)
    assert again.score(Xt, yt) >= whole.score(Xt, yt)


def test_classes_that_follow_single_features_keep_the_whole_bank():
    X = _points(4)
    y = _additive(X, 0.3, 5)
    clf = MKLClassifier(C="path").fit(X, y)
    choice = clf.bank_choice_
    assert choice["kept"] == "whole bank"
    assert choice["difference"] > choice["difference_se"] > 0.0
    assert np.any(clf.kernel_weights_[[not n.endswith("[all]") for n in clf.kernel_names_]] > 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kernels": [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "rbf", "width": 1.0, "features": "each"}]},
        {"C": 0.05},
    ],
)
def test_no_choice_without_the_default_bank_and_a_held_out_path(kwargs):
    X = _points(6, 300)
    clf = MKLClassifier(**{"C": "path", **kwargs}).fit(X, _joint(X, 0.3, 7))
    assert clf.bank_choice_ is None


def test_indicator_features_keep_the_whole_bank():
    X = (_points(12, 300) > 0).astype(float)
    y = np.where(X[:, 0] + X[:, 1] > 1, 1, -1)
    clf = MKLClassifier(C="path").fit(X, y)
    assert clf.bank_choice_ is None and len(clf.kernel_names_) == 7 + D


def test_multiclass_keeps_the_whole_bank():
    X = _points(8, 300)
    y = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5])
    clf = MKLClassifier(C="path").fit(X, y)
    assert clf.bank_choice_ is None and len(clf.kernel_names_) == 7 + 3 * D


def test_cross_validation_keeps_the_whole_bank(monkeypatch):
    """Below 2,500 rows C is chosen by cross-validation on the whole bank, with no comparison of kernels."""
    import mklkit.pipeline.heldout as heldout

    monkeypatch.setattr(heldout, "AUTO_MIN_HELD", 500)
    X = _points(0, 300)
    clf = MKLClassifier(C="path").fit(X, _joint(X, 0.3, 2))
    assert clf.bank_choice_ is None and clf.C_selection_.folds == 3
    assert clf.active_kernels_.size > 0 and len(clf.kernel_names_) == 7 + 3 * D


def _rows(diff: np.ndarray) -> tuple[SimpleNamespace, SimpleNamespace]:
    whole = SimpleNamespace(chosen_rows=np.full(diff.size, 0.3), held_weights=np.ones(diff.size))
    return whole, SimpleNamespace(chosen_rows=0.3 + diff, held_weights=np.ones(diff.size))


def test_the_subset_is_kept_unless_the_whole_bank_is_better_beyond_the_paired_error():
    rng = np.random.default_rng(9)
    noise = rng.normal(size=400)
    for shift, kept in ((0.0, True), (-0.05, True), (0.01 * noise.std() / 20, True), (0.3, False)):
        ok, diff, se = prefer_subset(*_rows(shift + 0.1 * noise))
        assert ok is kept
        assert diff == pytest.approx(shift + 0.1 * noise.mean())
        assert se == pytest.approx(0.1 * noise.std() / np.sqrt(400))
    whole, sub = _rows(np.zeros(10))
    sub.chosen_rows = None  # a path that scored nothing keeps the whole bank
    assert prefer_subset(whole, sub)[0] is False


@pytest.mark.parametrize("factored", [False, True])
def test_a_subset_problem_is_the_problem_on_those_kernels(factored):
    X = _points(10, 120)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    specs = [{"function": "rbf", "width": [1.0, 2.0, 4.0]}, {"function": "poly", "degree": 2}]
    bank = build_factor_bank(specs, X, rank=None, tol=1e-12) if factored else KernelBank.build(X, specs).K
    whole = Problem(K=bank, y=y, loss=Logistic(), regularizer=ElasticNet(), C=0.05)
    keep = np.array([0, 3])
    part = subset_problem(whole, keep)
    assert part.n_kernels == 2 and type(part.bank) is type(whole.bank)  # the same kind of bank
    rho = np.random.default_rng(11).normal(size=y.size)
    np.testing.assert_allclose(part.bank.dual_block_norms(rho), whole.bank.dual_block_norms(rho)[keep], rtol=1e-12)
    r = Spicy(tol=1e-8).solve(part)
    wide = widen_result(r, keep, 4)
    assert wide.alpha.shape == (4, y.size) and np.all(wide.alpha[[1, 2]] == 0.0)
    np.testing.assert_array_equal(wide.kernel_weights[keep], r.kernel_weights)
    np.testing.assert_array_equal(wide.active_set, keep[r.active_set])
    back = restrict_result(wide, keep)
    np.testing.assert_array_equal(back.alpha, r.alpha)
    # the widened result predicts on the whole bank what the subset's result predicts on its own
    np.testing.assert_allclose(
        whole.bank.combine(wide.alpha, wide.active_set),
        part.bank.combine(r.alpha, r.active_set),
        rtol=1e-10,
        atol=1e-12,
    )


def test_a_subset_of_exact_factors_keeps_their_pivots():
    from mklkit.kernels.factorize.dense import exact_factors

    X = _points(13, 60)
    K = KernelBank.build(X, [{"function": "rbf", "width": [1.0, 2.0]}, {"function": "poly", "degree": 2}]).K
    whole = exact_factors(K).bank
    keep = np.array([2, 0])
    part = whole.subset(keep)
    assert type(part) is type(whole)
    for i, m in enumerate(keep):
        np.testing.assert_array_equal(part.pivots[i], whole.pivots[m])
        np.testing.assert_array_equal(part.block(i), whole.block(m))
    beta = np.random.default_rng(14).normal(size=part.ranks[0])
    np.testing.assert_array_equal(part.solve_coefficients(0, beta), whole.solve_coefficients(2, beta))
