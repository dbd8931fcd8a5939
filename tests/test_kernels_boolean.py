"""Boolean kernels against a literal count of the formulas both points satisfy; PSD, sparse input, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.kernels import DNF, BankError, Conjunctive, Disjunctive, KernelBank, Tanimoto, build_factor_bank


def _points(n=9, d=6, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    X = (rng.random((n, d)) < density).astype(float)
    X[0] = 0.0  # an all-zero row
    X[1] = 1.0  # an all-one row
    return X


def _brute(X, Z, satisfied, formulas):
    return np.array([[sum(satisfied(f, x) and satisfied(f, z) for f in formulas) for z in Z] for x in X], float)


def _conj(S, x):
    return all(x[j] for j in S)


def _disj(S, x):
    return any(x[j] for j in S)


@pytest.mark.parametrize("c", [1, 2, 3])
def test_conjunctive_counts_conjunctions(c):
    X, Z = _points(), _points(5, seed=1)
    subsets = list(itertools.combinations(range(X.shape[1]), c))
    np.testing.assert_array_equal(Conjunctive(c=c).gram(X, Z), _brute(X, Z, _conj, subsets))
    np.testing.assert_array_equal(Conjunctive(c=c).gram(X), _brute(X, X, _conj, subsets))


@pytest.mark.parametrize("d", [1, 2, 3])
def test_disjunctive_counts_disjunctions(d):
    X, Z = _points(), _points(5, seed=1)
    subsets = list(itertools.combinations(range(X.shape[1]), d))
    np.testing.assert_array_equal(Disjunctive(d=d).gram(X, Z), _brute(X, Z, _disj, subsets))


@pytest.mark.parametrize("d,c", [(1, 2), (2, 2), (2, 1), (3, 2)])
def test_dnf_counts_dnfs(d, c):
    X, Z = _points(7, 5), _points(4, 5, seed=2)
    clauses = list(itertools.combinations(range(5), c))
    dnfs = list(itertools.combinations(clauses, d))

    def sat(dnf, x):
        return any(_conj(S, x) for S in dnf)

    np.testing.assert_array_equal(DNF(d=d, c=c).gram(X, Z), _brute(X, Z, sat, dnfs))


def test_dnf_with_one_literal_is_disjunctive():
    X = _points(8, 7)
    np.testing.assert_array_equal(DNF(d=3, c=1).gram(X), Disjunctive(d=3).gram(X))


def test_tanimoto_is_jaccard_with_empty_rows_equal():
    X, Z = _points(), _points(5, seed=1)
    want = np.array([[(x @ z) / np.sum(np.maximum(x, z)) if np.any(x + z) else 1.0 for z in Z] for x in X])
    np.testing.assert_allclose(Tanimoto().gram(X, Z), want, rtol=1e-15)
    G = Tanimoto().gram(X)
    assert G[0, 0] == 1.0 and np.all(G[0, 1:] == 0.0)
    np.testing.assert_array_equal(Tanimoto().diag(X), np.ones(X.shape[0]))


@pytest.mark.parametrize("func", [Conjunctive(c=2), Disjunctive(d=2), DNF(d=2, c=2), Tanimoto()])
def test_psd_diag_and_sparse_input(func):
    X = _points(60, 15, seed=3, density=0.3)
    G = func.gram(X)
    lam = np.linalg.eigvalsh(G)
    assert lam[0] >= -1e-10 * lam[-1]
    np.testing.assert_array_equal(G, G.T)
    np.testing.assert_allclose(func.diag(X), np.diagonal(G), rtol=1e-15)
    Xs = sp.csr_matrix(X)
    np.testing.assert_array_equal(func.gram(Xs), G)
    np.testing.assert_array_equal(func.gram(Xs, Xs[:7]), G[:, :7])
    np.testing.assert_array_equal(func.diag(Xs), np.diagonal(G))


def test_large_binomials_are_exact_integers():
    # n = 120 features, d = 3: C(120, 3) = 280840, all values exact integers
    rng = np.random.default_rng(5)
    X = (rng.random((6, 120)) < 0.4).astype(float)
    G = Disjunctive(d=3).gram(X)
    n, s, L = 120, X.sum(1), X @ X.T
    from math import comb

    want = [
        [comb(n, 3) - comb(n - int(s[i]), 3) - comb(n - int(s[j]), 3) + comb(n - int(s[i] + s[j] - L[i, j]), 3)]
        for i in range(6)
        for j in range(6)
    ]
    np.testing.assert_array_equal(G.ravel(), np.array(want, float).ravel())


def test_overflow_is_an_error():
    X = np.ones((2, 3000))
    with pytest.raises(BankError) as exc:
        Disjunctive(d=200).gram(X)
    assert "overflows float64" in str(exc.value) and exc.value.value == 200


@pytest.mark.parametrize("Xbad,where", [(np.array([[0, 1, 0.5], [1, 0, 0]]), (0, 2)), (np.array([[0, 2.0]]), (0, 1))])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_binary_input_is_named(Xbad, where, sparse):
    X = sp.csr_matrix(Xbad) if sparse else Xbad
    with pytest.raises(BankError) as exc:
        Conjunctive().gram(X)
    e = exc.value
    assert e.key == f"X[{where[0]}, {where[1]}]"
    assert e.value == Xbad[where] and e.allowed == "0 or 1"
    assert f"column {where[1]}" in str(e) and "conjunctive" in str(e)


def test_bank_and_factors_on_sparse_binary_data():
    X = _points(50, 12, seed=7, density=0.3)
    bank = [{"function": "conjunctive", "c": [1, 2]}, {"function": "tanimoto"}, {"function": "dnf"}]
    dense = KernelBank.build(X, bank, normalize="trace")
    sparse = KernelBank.build(sp.csr_matrix(X), bank, normalize="trace")
    np.testing.assert_allclose(sparse.K, dense.K, rtol=1e-14, atol=0)
    fb = build_factor_bank(bank, sp.csr_matrix(X), method="pivoted_cholesky", tol=0.0)
    for m in range(dense.n_kernels):
        L = fb.LT[fb.starts[m] : fb.starts[m + 1]].T
        np.testing.assert_allclose(L @ L.T, dense.K[m], atol=1e-10 * np.abs(dense.K[m]).max())
    # cross kernels through the factor map reproduce k(X_new, X)
    Xn = _points(5, 12, seed=8, density=0.3)
    rows = fb.factor_map.transform(Xn)
    cross = dense.cross(Xn)
    for m in range(dense.n_kernels):
        Lm = fb.LT[fb.starts[m] : fb.starts[m + 1]]
        Rm = rows[fb.starts[m] : fb.starts[m + 1]]
        np.testing.assert_allclose(Rm.T @ Lm, cross[m], atol=1e-8 * np.abs(cross[m]).max())


def test_conjunctive_explicit_map_is_exact_and_chosen_when_small():
    X = _points(40, 10, seed=9, density=0.4)
    bank = [{"function": "conjunctive", "c": [2, 5]}]  # C(10, 2) = 45 and C(10, 5) = 252 dimensions
    dense = KernelBank.build(X, bank, normalize="trace")
    fb = build_factor_bank(bank, X, max_exact_dim=100)
    assert fb.factor_map.methods == ["feature_map", "pivoted_cholesky"]
    assert fb.ranks[0] == 45
    L = fb.LT[: fb.starts[1]].T
    np.testing.assert_allclose(L @ L.T, dense.K[0], atol=1e-14)
    Xn = _points(4, 10, seed=10)
    np.testing.assert_allclose(fb.factor_map.transform(Xn)[: fb.starts[1]].T @ L.T, dense.cross(Xn)[0], atol=1e-14)
