"""skm_smo on identical points: the merged dual (``MergedPoints``), its check on all
points, the per-variable box of the SMO loop, and the syncs of ``K_j D(y) alpha``.

Adult (a9a) has binary features, so Gaussian kernels on a few of them give many
identical points; the merged solve must give the certified optimum of the
original problem, which cvxpy + Clarabel solves independently.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mklkit.data import load_builtin
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status
from mklkit_smo import L1Squared, SkmSMO
from mklkit_smo import _smo
from mklkit_smo.merge import MergedPoints
from test_skm_engine import dk_reference, primal_from_blocks

HINGE = get_registry().create("loss", "hinge")


def _gaussian_subsets(X: np.ndarray, m: int, size: int, seed: int) -> np.ndarray:
    """m Gaussian kernels, each on a random subset of ``size`` features (unit diagonal)."""
    rng = np.random.default_rng(seed)
    K = np.empty((m, X.shape[0], X.shape[0]))
    for j in range(m):
        Z = X[:, np.sort(rng.choice(X.shape[1], size, replace=False))]
        sq = np.sum(Z * Z, axis=1)
        D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * Z @ Z.T, 0.0)
        K[j] = np.exp(-D / (2.0 * (1.0 + j)))
    return K


@pytest.fixture(scope="module")
def adult_small():
    ds = load_builtin("a9a")
    X = np.asarray(ds.X[:240].todense(), dtype=np.float64)
    y = np.asarray(ds.y[:240], dtype=np.float64)
    return _gaussian_subsets(X, 3, 10, seed=1), y


def _problem(K: np.ndarray, y: np.ndarray, C: float = 1.0) -> Problem:
    return Problem(K=K, y=y, loss=HINGE, regularizer=L1Squared(), C=C)


def _solve(problem: Problem, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return SkmSMO(**params).solve(problem)


# ---------------------------------------------------------------------------
# finding the groups
# ---------------------------------------------------------------------------
def test_groups_are_exactly_the_identical_points_of_one_label(adult_small) -> None:
    K, y = adult_small
    mp = MergedPoints.find(K, y)
    assert mp is not None
    N = y.size
    assert mp.rep.size < 0.75 * N  # binary features: many repeated points
    rep_of = mp.rep[mp.of]
    # every point has its representative's label and rows (up to rounding)
    assert np.all(y == y[rep_of])
    for k in range(K.shape[0]):
        np.testing.assert_allclose(K[k], K[k][rep_of], atol=1e-12)
    # and no two representatives could have been merged: brute force on all pairs
    key = np.round(np.concatenate([K.transpose(1, 0, 2).reshape(N, -1), y[:, None]], axis=1), 9)
    assert np.unique(key, axis=0).shape[0] == mp.rep.size
    assert np.all(mp.count == np.bincount(mp.of))
    assert mp.K.shape == (K.shape[0], mp.rep.size, mp.rep.size)
    np.testing.assert_array_equal(mp.K, K[:, mp.rep][:, :, mp.rep])
    np.testing.assert_array_equal(mp.y, y[mp.rep])


def test_distinct_points_are_not_grouped(sonar_small, adult_small) -> None:
    _, y, bank = sonar_small
    assert MergedPoints.find(bank.K, y) is None
    # nor when too few points are repeated for a merged bank to pay
    K, ya = adult_small
    G = MergedPoints.find(K, ya).rep.size
    assert MergedPoints.find(K, ya, max_fraction=(G - 1) / ya.size) is None
    assert MergedPoints.find(K, ya, max_fraction=G / ya.size).rep.size == G


def test_identical_points_with_other_labels_stay_apart() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    X[10] = X[3]  # same point, same label: merged
    X[20] = X[5]  # same point, the other label: kept apart
    y = np.where(np.arange(30) % 2 == 0, 1.0, -1.0)
    y[10], y[3] = 1.0, 1.0
    y[20], y[5] = 1.0, -1.0
    K = np.stack([np.exp(-np.sum((X[:, None, :2] - X[None, :, :2]) ** 2, axis=-1)), X @ X.T])
    mp = MergedPoints.find(K, y)
    assert mp is not None and mp.rep.size == 29
    assert mp.of[10] == mp.of[3]
    assert mp.of[20] != mp.of[5]


def test_sparse_points_with_equal_probe_values_are_told_apart() -> None:
    # one-hot points under a linear kernel: almost every point has the same diagonal and
    # zeros at the probe columns, so one signature run holds nearly all of them; the
    # rows' own signature must split it, and only (category, label) pairs may merge
    rng = np.random.default_rng(5)
    cat = rng.integers(0, 300, size=500)
    y = np.where(rng.random(500) < 0.5, 1.0, -1.0)
    X = np.zeros((500, 300))
    X[np.arange(500), cat] = 1.0
    K = np.stack([X @ X.T, 2.0 * X @ X.T])
    mp = MergedPoints.find(K, y)
    assert mp is not None
    key = cat * 2 + (y > 0)
    _, want = np.unique(key, return_inverse=True)
    assert mp.rep.size == want.max() + 1
    # the same partition of the points
    pairs = np.unique(np.stack([mp.of, want], axis=1), axis=0)
    assert pairs.shape[0] == mp.rep.size


def test_expand_fills_the_points_of_each_group() -> None:
    rng = np.random.default_rng(2)
    of = rng.integers(0, 12, size=60)
    of[:12] = np.arange(12)  # every group non-empty
    count = np.bincount(of).astype(float)
    mp = object.__new__(MergedPoints)
    mp.of, mp.count = of, count
    U = 0.7
    beta = rng.uniform(0.0, 1.0, 12) * count * U
    beta[0], beta[1] = 0.0, count[1] * U  # a group at each bound
    alpha = mp.expand(beta, U)
    assert np.all(alpha >= 0.0) and np.all(alpha <= U)
    np.testing.assert_allclose(np.bincount(of, weights=alpha), beta, rtol=1e-12, atol=1e-15)
    for g in range(12):
        a = alpha[of == g]
        assert np.sum((a > 0.0) & (a < U)) <= 1  # at most one point strictly inside the box
    assert np.all(alpha[of == 0] == 0.0) and np.all(alpha[of == 1] == U)


# ---------------------------------------------------------------------------
# the merged solve
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("C", [1.0, 0.1])
def test_merged_solve_is_the_certified_optimum_of_all_points(adult_small, C) -> None:
    K, y = adult_small
    pb = _problem(K, y, C)
    merged = _solve(pb, tol=1e-5)
    assert SkmSMO().get_params()["merge_identical"] is True
    assert merged.status == Status.CONVERGED and 0.0 <= merged.gap <= 1e-5
    loop = [h["n_points_in_loop"] for h in merged.history]
    assert loop[0] < y.size and loop[-1] == y.size  # the last stage was run on all points
    last = merged.history[-1]
    assert last["eps1_per_n"] <= 5e-4 and last["eps2"] <= 1e-4
    # an independent reference on the original points
    ref, _ = dk_reference(K, y, 1.0 / C)
    assert merged.objective == pytest.approx(-C * ref, rel=1e-4)
    assert primal_from_blocks(K, y, C, merged)[0] == pytest.approx(merged.objective, rel=1e-10)
    # the dual point is one of the original problem: C alpha in [0, 1], y^T alpha = 0
    ya = merged.dual * y
    assert np.all(ya >= -1e-12) and np.all(ya <= 1.0 + 1e-12)
    assert abs(float(np.sum(merged.dual))) <= 1e-9
    plain = _solve(pb, tol=1e-5, merge_identical=False)
    assert all(h["n_points_in_loop"] == y.size for h in plain.history)
    assert merged.objective == pytest.approx(plain.objective, rel=1e-4)


def test_a_wrong_grouping_is_caught_on_all_points(adult_small, monkeypatch) -> None:
    # group points that are *not* identical: the merged problem is then another one, and
    # the check of its last stage on all points must fail and the solve go on there
    K, y = adult_small
    right = MergedPoints.find(K, y)
    group = right.rep[right.of].copy()
    # the first twenty groups of each label made one group of that label
    for label in (1.0, -1.0):
        reps = [g for g in right.rep if y[g] == label][:20]
        group[np.isin(group, reps)] = reps[0]
    wrong = MergedPoints(K, y, group)
    monkeypatch.setattr(MergedPoints, "find", classmethod(lambda cls, K, y, **kw: wrong))
    pb = _problem(K, y)
    res = _solve(pb, tol=1e-5)
    assert res.status == Status.CONVERGED
    assert res.history[-1]["n_points_in_loop"] == y.size
    # the pair conditions failed on all points: SMO steps were taken there
    assert res.history[-1]["smo_steps"] > res.history[-2]["smo_steps"]
    ref, _ = dk_reference(K, y, 1.0)
    assert res.objective == pytest.approx(-ref, rel=1e-4)


def test_merging_can_be_turned_off(adult_small) -> None:
    from mklkit_smo.skm_run import _Skm

    K, y = adult_small
    pb = _problem(K, y)
    assert _Skm(SkmSMO(), pb, None).merged is not None
    assert _Skm(SkmSMO(merge_identical=False), pb, None).merged is None


# ---------------------------------------------------------------------------
# K_j D(y) alpha made exact: the serial and the parallel sync
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("add", [False, True])
def test_sync_serial_and_parallel_match_numpy(dense: bool, add: bool) -> None:
    rng = np.random.default_rng(3)
    M, N = 3, 50
    K = rng.standard_normal((M, N, N))
    sv = np.sort(rng.choice(N, 17, replace=False)).astype(np.int64)
    gsv = rng.standard_normal(sv.size)
    pts = (np.arange(N) if dense else np.sort(rng.choice(N, 21, replace=False))).astype(np.int64)
    v0 = rng.standard_normal((M, N))
    want = v0.copy()
    new = np.einsum("r,mrj->mj", gsv, K[:, sv][:, :, pts])
    want[:, pts] = (want[:, pts] if add else 0.0) + new
    for fn in (_smo.sync_precomputed, _smo.sync_precomputed_parallel):
        v = v0.copy()
        fn(K, sv, gsv, pts, pts.size, add, v)
        np.testing.assert_allclose(v, want, rtol=1e-12, atol=1e-12)
