"""``factor=True`` takes the factors ``factor="auto"`` takes when it factors; ranks that cannot be used are capped."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mklkit.data import load_builtin
from mklkit.estimators import MKLClassifier
from mklkit.kernels.factorize import RankCapWarning, build_factor_bank
from mklkit.pipeline.bank import AUTO_RANK

pytestmark = pytest.mark.usefixtures("one_thread")

RBF = [{"function": "rbf", "width": [2.0, 5.0, 10.0]}]
LINEAR = [{"function": "linear", "features": [0, 1, 2, 3]}, {"function": "linear", "features": "all"}]


@pytest.fixture(scope="module")
def ionosphere():
    ds = load_builtin("ionosphere")
    return np.asarray(ds.X)[:, 2:], np.asarray(ds.y)


def _built_ranks(est=None, approximation=None, refinement=None):
    """The ranks the bank was built with (before its kernels in use were refined)."""
    if est is not None:
        approximation, refinement = est.factor_approximation_, est.factor_refinement_
    ranks = list(approximation["ranks"])
    for rnd in reversed(refinement.rounds if refinement else []):
        for m, r in zip(rnd["kernels"], rnd["ranks_before"]):
            ranks[m] = r
    return ranks


def _fit(X, y, factor, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RankCapWarning)  # auto's ranks are never capped
        return MKLClassifier(factor=factor, **kw).fit(X, y)


@pytest.mark.parametrize(
    "kernels, budget",
    [(RBF, "2MB"), (RBF, None), (LINEAR, None)],
    ids=["approximate", "approximate-default-budget", "exact"],
)
def test_factor_true_takes_autos_factors(ionosphere, kernels, budget):
    """Where auto factors (here: approximate factors because the Gram matrices exceed a 2 MB budget;
    exact factors of linear kernels), True gives the same factors (method, ranks, residual), the same
    engine route and the same model; where auto keeps Gram matrices, True factors as auto would."""
    X, y = ionosphere
    true = _fit(X, y, True, kernels=kernels, memory_budget=budget)
    assert true.bank_.representation == "factor"
    if budget is not None or kernels is LINEAR:
        auto = _fit(X, y, "auto", kernels=kernels, memory_budget=budget)
        assert auto.bank_.representation == "factor"
        assert true.factor_approximation_ == auto.factor_approximation_
        assert true.result_.message == auto.result_.message
        np.testing.assert_array_equal(true.decision_function(X), auto.decision_function(X))
    else:  # auto holds these as Gram matrices (N small): True takes auto's rule for factors
        assert max(_built_ranks(true)) <= min(AUTO_RANK, X.shape[0])


def test_factor_true_is_not_the_tolerance_route(ionosphere):
    """The former route of True (rank as tol needs, up to N) gave larger factors than auto's rule."""
    X, y = ionosphere
    narrow = [{"function": "rbf", "width": 1.0}]  # nearly diagonal: tol 1e-3 needs almost N columns
    true = _fit(X, y, True, kernels=narrow)
    by_tol = _fit(X, y, {"tol": 1e-3}, kernels=narrow)
    assert _built_ranks(true) == [min(AUTO_RANK, X.shape[0])]
    assert by_tol.factor_approximation_["ranks"][0] > AUTO_RANK


def test_a_rank_above_N_is_capped_with_a_warning(ionosphere):
    X, _ = ionosphere
    N = X.shape[0]
    with pytest.warns(RankCapWarning, match=rf"kernels\.factor\.rank = 1000000000.*N = {N}.*capped to rank {N}\b"):
        fb = build_factor_bank(RBF, X, rank=10**9, tol=0.0, root="kernels.factor")
    assert fb.ranks.max() <= N
    ref = build_factor_bank(RBF, X, rank=N, tol=0.0)
    np.testing.assert_array_equal(fb.LT, ref.LT)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RankCapWarning)
        build_factor_bank(RBF, X, rank=N, tol=1e-3)  # N itself is not capped


def test_estimator_says_a_rank_is_capped(ionosphere):
    X, y = ionosphere
    # the estimator's parameter is named (factor.rank), as in its errors; the warning comes once
    with pytest.warns(
        RankCapWarning,
        match=r"MKLClassifier: factor\.rank = 1000000000.*N = (\d+).*"
        r"capped to rank \1\b",
    ) as rec:
        clf = MKLClassifier(RBF, factor={"rank": 10**9}).fit(X, y)
    caps = [str(w.message) for w in rec if w.category is RankCapWarning]
    assert len(caps) == 1 and "kernels.factor" not in caps[0]
    assert max(clf.factor_approximation_["ranks"]) <= X.shape[0]
    # beyond the budget: capped to what fits, both ranks named
    with pytest.warns(
        RankCapWarning,
        match=r"MKLClassifier: factor\.rank = 300.*3 approximated kernels.*"
        r"rank <= (\d+) fits.*capped to rank \1\b",
    ):
        small = MKLClassifier(RBF, factor={"rank": 300}, memory_budget="1MB").fit(X, y)
    assert max(small.factor_approximation_["ranks"]) < 300
    # outside an estimator the warning names the spec key again
    with pytest.warns(RankCapWarning, match=r"kernels\.factor\.rank = 1000000000") as rec:
        build_factor_bank(RBF, X, rank=10**9, tol=0.0, root="kernels.factor")
    assert all("MKLClassifier" not in str(w.message) for w in rec)


def test_spec_factor_true_takes_autos_factors(tmp_path):
    """``kernels.factor: true`` in a spec is the same route as the estimators' ``factor=True``."""
    from mklkit.api import load_spec, run

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "data: {builtin: ionosphere, test_size: 0.2}\n"
        "kernels: {bank: [{function: rbf, width: 1.0}], factor: true}\n"
        "problem: {loss: logistic, regularizer: l1, C: 0.1}\n"
    )
    res = run(load_spec(str(spec)))
    assert _built_ranks(approximation=res.factor, refinement=res.factor_refinement) == [min(AUTO_RANK, res.n_train)]
