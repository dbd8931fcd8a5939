"""Weighted degree kernels (with and without shifts) against a literal enumeration of positional k-mer
matches; padding, PSD, the positional k-mer map, factors, errors, the estimator and a spec on splice."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from mklkit import MKLClassifier
from mklkit.api import load_spec, run
from mklkit.kernels import (
    BankError,
    KernelBank,
    WeightedDegree,
    WeightedDegreeShift,
    build_factor_bank,
    builtin_resolver,
    encode_sequences,
    raw_input_kernels,
)

SEQS = ["GATTACA", "GATTA", "ACGT", "TTTT", "A", "CAGGATTC", "GGG", "ACGTACGT", "GATTACAGATTACA"]


def _beta(d):
    return [2.0 * (d - k + 1) / (d * (d + 1)) for k in range(1, d + 1)]


def _wd(x, z, d, S=0):
    """Literal sum over lengths k, positions l and shifts s of the indicator of equal k-mers."""
    total = 0.0
    for k, b in zip(range(1, d + 1), _beta(d)):
        for s in range(S + 1):
            delta = 1.0 / (2 * (s + 1))
            for p in range(max(len(x), len(z))):
                # x ahead by s, then z ahead by s (both windows inside both sequences)
                if p + s + k <= len(x) and p + k <= len(z) and x[p + s : p + s + k] == z[p : p + k]:
                    total += b * delta
                if p + k <= len(x) and p + s + k <= len(z) and x[p : p + k] == z[p + s : p + s + k]:
                    total += b * delta
    return total


def _brute(X, Z, d, S=0):
    return np.array([[_wd(x, z, d, S) for z in Z] for x in X])


def _padded(seqs, alphabet, width):
    Z, _ = encode_sequences(seqs, alphabet)
    out = np.full((Z.shape[0], width), -1.0)
    out[:, : Z.shape[1]] = Z
    return out


def test_weights_and_run_weights():
    f = WeightedDegree(degree=4)
    np.testing.assert_allclose(f.betas(), [0.4, 0.3, 0.2, 0.1], rtol=1e-15)
    assert f.betas().sum() == pytest.approx(1.0, abs=1e-15)
    # a run of r matches holds r - k + 1 k-mers of each length k <= r
    w = f.run_weights(6)
    want = [sum(b * max(r - k + 1, 0) for k, b in zip(range(1, 5), _beta(4))) for r in range(7)]
    np.testing.assert_allclose(w, want, rtol=1e-15)
    assert w[0] == 0.0 and w[1] == pytest.approx(0.4)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 20])
def test_weighted_degree_counts_positional_kmers(d):
    X, alphabet = encode_sequences(SEQS)
    f = WeightedDegree(degree=d)
    want = _brute(SEQS, SEQS, d)
    G = f.gram(X)
    np.testing.assert_allclose(G, want, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(G, G.T)
    new = ["GATTTCA", "TTT", "CAGGAT"]
    np.testing.assert_allclose(f.gram(X, _padded(new, alphabet, X.shape[1])), _brute(SEQS, new, d), rtol=1e-13)
    np.testing.assert_allclose(f.diag(X), np.diagonal(want), rtol=1e-13)


@pytest.mark.parametrize("d,S", [(1, 1), (3, 1), (3, 4), (5, 2), (2, 20)])
def test_weighted_degree_shift_counts_shifted_kmers(d, S):
    X, alphabet = encode_sequences(SEQS)
    f = WeightedDegreeShift(degree=d, shift=S)
    want = _brute(SEQS, SEQS, d, S)
    np.testing.assert_allclose(f.gram(X), want, rtol=1e-13)
    new = ["ATTACAG", "TTT"]
    np.testing.assert_allclose(f.gram(X, _padded(new, alphabet, X.shape[1])), _brute(SEQS, new, d, S), rtol=1e-13)
    np.testing.assert_allclose(f.diag(X), np.diagonal(want), rtol=1e-13)


def test_shift_zero_is_the_weighted_degree_kernel(random_codes):
    X = random_codes(30, 15, seed=7)
    np.testing.assert_allclose(WeightedDegreeShift(degree=4, shift=0).gram(X), WeightedDegree(degree=4).gram(X))
    # a shift adds matches: never fewer than without
    assert np.all(WeightedDegreeShift(degree=4, shift=3).gram(X) >= WeightedDegree(degree=4).gram(X) - 1e-12)


def test_padding_is_not_a_symbol():
    X, _ = encode_sequences(SEQS)
    wide = np.full((X.shape[0], X.shape[1] + 5), -3.0)
    wide[:, : X.shape[1]] = X
    for f in (WeightedDegree(degree=3), WeightedDegreeShift(degree=3, shift=2)):
        np.testing.assert_array_equal(f.gram(wide), f.gram(X))
    # a padding code equal in both sequences is no match: only the symbols count
    a = np.array([[0.0, 1.0, -1.0, -1.0], [0.0, 1.0, -1.0, -1.0]])
    np.testing.assert_allclose(WeightedDegree(degree=2).gram(a), _brute(["AC", "AC"], ["AC", "AC"], 2))


@pytest.mark.parametrize(
    "func", [WeightedDegree(degree=1), WeightedDegree(degree=6), WeightedDegreeShift(degree=5, shift=3)]
)
def test_psd_on_random_sequences(func, random_codes):
    X = random_codes(80, 14, seed=1)
    G = func.gram(X)
    lam = np.linalg.eigvalsh(G)
    assert lam[0] >= -1e-10 * lam[-1]


@pytest.mark.parametrize("S", [1, 2, 5, 30, 200])
def test_shift_coupling_matrix_is_positive_definite(S):
    # the WDS kernel is sum_{l,l'} T[l,l'] <phi_l(x), phi_l'(z)>: T banded Toeplitz, 1 on the diagonal and
    # delta_s = 1/(2(s+1)) at distance s <= S; its symbol stays >= 1/2, so every section of T is >= 1/2
    omega = np.linspace(0.0, np.pi, 20001)
    s = np.arange(1, S + 1)
    symbol = 1.0 + (np.cos(np.outer(omega, s)) / (s + 1)).sum(axis=1)
    assert symbol.min() >= 0.5 - 1e-12
    n = 3 * S + 5
    gap = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    T = np.where(gap == 0, 1.0, np.where(gap <= S, 1.0 / (2.0 * (gap + 1.0)), 0.0))
    assert np.linalg.eigvalsh(T)[0] >= 0.5 - 1e-12


def test_positional_map_reproduces_gram_and_cross(random_codes):
    X = random_codes(40, 12, seed=2)
    Xn = random_codes(7, 12, seed=3)
    Xn[0, :3] = [6, 6, 6]  # a symbol the training sequences never have
    f = WeightedDegree(degree=4)
    phi = f.explicit_map(X)
    # the dimension: the distinct (k, position, k-mer) triples of the training sequences
    cx = X.astype(int)
    triples = {
        (k, p, tuple(r[p : p + k]))
        for r in cx
        for k in range(1, 5)
        for p in range(len(r) - k + 1)
        if np.all(r[p : p + k] >= 0)
    }
    assert phi.dim == len(triples)
    B, Bn = phi.rows(X), phi.rows(Xn)
    assert B.shape == (phi.dim, 40) and Bn.shape == (phi.dim, 7)
    np.testing.assert_allclose((B.T @ B).toarray(), f.gram(X), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose((Bn.T @ B).toarray(), f.gram(Xn, X), rtol=1e-13, atol=1e-13)


def test_map_is_refused_when_its_keys_do_not_fit_62_bits():
    X = np.zeros((3, 30))
    X[0, 0] = 1000.0  # base 1001: 30 * 1001**20 is far above 2**62
    assert WeightedDegree(degree=20).explicit_map(X) is None
    assert WeightedDegree(degree=2).explicit_map(X) is not None


def test_factors_reproduce_the_bank(random_codes):
    X = random_codes(80, 10, seed=4)
    bank = [
        {"function": "weighted_degree", "degree": [1, 3]},
        {"function": "weighted_degree_shift", "degree": 3, "shift": 2},
    ]
    dense = KernelBank.build(X, bank, normalize="trace")
    auto = build_factor_bank(bank, X, tol=0.0)
    # degree 1: at most 4 symbols x 10 positions = 40 coordinates (<= max_exact_dim); degree 3: more
    assert auto.factor_map.methods == ["feature_map", "pivoted_cholesky", "pivoted_cholesky"]
    big = build_factor_bank(bank[:1], X, tol=0.0, max_exact_dim=10_000)
    assert big.factor_map.methods == ["feature_map", "feature_map"]
    piv = build_factor_bank(bank, X, method="pivoted_cholesky", tol=0.0)
    Xn = random_codes(6, 10, seed=5)
    Xn[0, :3] = [5, 5, 5]
    cross = dense.cross(Xn)
    for fb, M in ((auto, 3), (piv, 3), (big, 2)):
        rows = fb.factor_map.transform(Xn)
        for m in range(M):
            Lm = fb.LT[fb.starts[m] : fb.starts[m + 1]]
            scale = np.abs(dense.K[m]).max()
            np.testing.assert_allclose(Lm.T @ Lm, dense.K[m], atol=1e-10 * scale)
            np.testing.assert_allclose(rows[fb.starts[m] : fb.starts[m + 1]].T @ Lm, cross[m], atol=1e-9 * scale)


@pytest.mark.parametrize(
    "bad,key,value",
    [([[0, 1.5, 2]], "X[0, 1]", 1.5), ([[0, 1, -1, 2]], "X[0, 3]", 2.0), ([[0, np.nan]], "X[0, 1]", None)],
)
@pytest.mark.parametrize("func", [WeightedDegree(degree=2), WeightedDegreeShift(degree=2, shift=1)])
def test_bad_codes_are_named(func, bad, key, value):
    with pytest.raises(BankError) as exc:
        func.gram(np.array(bad, float))
    assert exc.value.key == key
    if value is not None:
        assert exc.value.value == value
    assert func.name in str(exc.value) and exc.value.allowed


def test_bad_parameters_are_named():
    from mklkit.components.params import ParamError

    with pytest.raises(ParamError) as exc:
        WeightedDegree(degree=0)
    assert "degree" in str(exc.value)
    with pytest.raises(ParamError) as exc:
        WeightedDegreeShift(shift=-1)
    assert "shift" in str(exc.value)


def test_registered_and_read_unstandardised():
    resolve = builtin_resolver
    assert resolve("weighted_degree") is WeightedDegree
    assert resolve("weighted_degree_shift") is WeightedDegreeShift
    keys = raw_input_kernels([{"function": "weighted_degree"}, {"function": "rbf"}])
    assert [name for _, name in keys] == ["weighted_degree"]


def test_estimator_and_spec_on_splice(tmp_path):
    from mklkit.data import load_builtin

    ds = load_builtin("splice")
    idx = np.random.default_rng(0).permutation(ds.X.shape[0])[:400]
    X, y = ds.X[idx], ds.y[idx]
    bank = [{"function": "weighted_degree", "degree": [1, 3, 6]}]
    clf = MKLClassifier(kernels=bank).fit(X[:300], y[:300])
    assert clf.kernel_weights_.shape == (3,) and clf.kernel_names_[1].startswith("weighted_degree(degree=3)")
    assert clf.score(X[300:], y[300:]) > 0.8  # chance is about 0.52
    p = tmp_path / "s.yaml"
    p.write_text(
        textwrap.dedent(
            """
            data: {builtin: splice, train_size: 200, test_size: 0.2, seed: 1}
            kernels:
              bank:
                - {function: weighted_degree, degree: [2, 8]}
                - {function: weighted_degree_shift, degree: 4, shift: 2,
                   features: [[20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]]}
            problem: {loss: logistic}
            """
        )
    )
    spec = load_spec(p)
    assert spec.data.standardize is False
    res = run(spec)
    assert len(res.kernel_names) == 3 and res.metrics["test_accuracy"] > 0.8
