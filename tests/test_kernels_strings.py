"""String kernels against literal counts of k-mers and subsequences; padding, PSD, factors, errors."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from mklkit.kernels import (
    AllSubsequences,
    BankError,
    KernelBank,
    Spectrum,
    Subsequences,
    build_factor_bank,
    encode_sequences,
)

SEQS = ["GATTACA", "ACGT", "TTTT", "A", "CAGGATTC", "GGG", "ACGTACGT"]


def _dot(a: Counter, b: Counter) -> float:
    return float(sum(v * b[u] for u, v in a.items()))


def _kmers(s, k, binary=False):
    c = Counter(s[i : i + k] for i in range(len(s) - k + 1))
    return Counter(dict.fromkeys(c, 1)) if binary else c


def _subseqs(s, p):
    return Counter(itertools.combinations(s, p))


def _all_subseqs(s):
    c = Counter()
    for p in range(len(s) + 1):
        c.update(itertools.combinations(s, p))
    return c


def _brute(embed, X, Z):
    return np.array([[_dot(embed(x), embed(z)) for z in Z] for x in X])


def test_encode_sequences_pads_and_keeps_the_alphabet():
    codes, alphabet = encode_sequences(["ACG", "T", ""])
    assert alphabet == ["A", "C", "G", "T"]
    np.testing.assert_array_equal(codes, [[0, 1, 2], [3, -1, -1], [-1, -1, -1]])
    again, _ = encode_sequences(["GA"], alphabet)
    np.testing.assert_array_equal(again, [[2, 0]])
    with pytest.raises(ValueError, match=r"sequence 0, position 1: symbol 'N'"):
        encode_sequences(["AN"], alphabet)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("binary", [False, True])
def test_spectrum_counts_common_kmers(k, binary):
    X, alphabet = encode_sequences(SEQS)
    Z, _ = encode_sequences(SEQS[:3] + ["TACAG"], alphabet)
    f = Spectrum(k=k, binary=binary)
    np.testing.assert_array_equal(f.gram(X), _brute(lambda s: _kmers(s, k, binary), SEQS, SEQS))
    want = _brute(lambda s: _kmers(s, k, binary), SEQS, SEQS[:3] + ["TACAG"])
    # Z is narrower than X: pad it to the same width
    Zp = np.full((Z.shape[0], X.shape[1]), -1.0)
    Zp[:, : Z.shape[1]] = Z
    np.testing.assert_array_equal(f.gram(X, Zp), want)
    np.testing.assert_array_equal(f.diag(X), np.diagonal(f.gram(X)))


@pytest.mark.parametrize("p", [1, 2, 3])
def test_fixed_length_subsequences_count_index_tuples(p):
    X, _ = encode_sequences(SEQS)
    f = Subsequences(p=p)
    want = _brute(lambda s: _subseqs(s, p), SEQS, SEQS)
    np.testing.assert_array_equal(f.gram(X), want)
    np.testing.assert_array_equal(f.gram(X[:3], X), want[:3])
    np.testing.assert_array_equal(f.diag(X), np.diagonal(want))


def test_all_subsequences_count_every_length():
    X, _ = encode_sequences(SEQS)
    want = _brute(_all_subseqs, SEQS, SEQS)
    f = AllSubsequences()
    np.testing.assert_array_equal(f.gram(X), want)
    np.testing.assert_array_equal(f.gram(X, X[2:4]), want[:, 2:4])
    np.testing.assert_array_equal(f.diag(X), np.diagonal(want))
    assert want.min() >= 1.0  # the empty subsequence


def test_padding_is_not_a_symbol():
    # the same sequences padded to different widths give the same kernel values
    X, alphabet = encode_sequences(SEQS)
    wide = np.full((X.shape[0], X.shape[1] + 5), -7.0)
    wide[:, : X.shape[1]] = X
    for f in (Spectrum(k=2), Subsequences(p=2), AllSubsequences()):
        np.testing.assert_array_equal(f.gram(wide), f.gram(X))


@pytest.mark.parametrize("func", [Spectrum(k=3), Spectrum(k=2, binary=True), Subsequences(p=3), AllSubsequences()])
def test_psd_on_random_sequences(func, random_codes):
    X = random_codes(70, 12, seed=1)
    G = func.gram(X)
    lam = np.linalg.eigvalsh(G)
    assert lam[0] >= -1e-10 * lam[-1]
    np.testing.assert_array_equal(G, G.T)


@pytest.mark.parametrize(
    "bad,key,value",
    [([[0, 1.5, 2]], "X[0, 1]", 1.5), ([[0, 1, -1, 2]], "X[0, 3]", 2.0), ([[0, np.nan]], "X[0, 1]", None)],
)
def test_bad_codes_are_named(bad, key, value):
    with pytest.raises(BankError) as exc:
        Spectrum(k=1).gram(np.array(bad, float))
    assert exc.value.key == key
    if value is not None:
        assert exc.value.value == value
    assert "spectrum" in str(exc.value) and exc.value.allowed


def test_overflow_of_all_subsequences_is_an_error():
    X = np.zeros((1, 600))
    with pytest.raises(BankError, match="overflows float64"):
        AllSubsequences().gram(X)


def test_factors_reproduce_the_bank(random_codes):
    X = random_codes(80, 10, seed=2)
    bank = [{"function": "spectrum", "k": [1, 2, 3]}, {"function": "subsequences", "p": 2}]
    dense = KernelBank.build(X, bank, normalize="trace")
    auto = build_factor_bank(bank, X, tol=0.0)
    assert auto.factor_map.methods == ["feature_map"] * 3 + ["pivoted_cholesky"]
    piv = build_factor_bank(bank, X, method="pivoted_cholesky", tol=0.0)
    Xn = random_codes(6, 10, seed=3)
    Xn[0, :3] = [5, 5, 5]  # a symbol the training sequences never have
    cross = dense.cross(Xn)
    for fb in (auto, piv):
        rows = fb.factor_map.transform(Xn)
        for m in range(dense.n_kernels):
            Lm = fb.LT[fb.starts[m] : fb.starts[m + 1]]
            scale = np.abs(dense.K[m]).max()
            np.testing.assert_allclose(Lm.T @ Lm, dense.K[m], atol=1e-10 * scale)
            np.testing.assert_allclose(rows[fb.starts[m] : fb.starts[m + 1]].T @ Lm, cross[m], atol=1e-9 * scale)


def test_spectrum_map_with_unit_diagonal_normalisation(random_codes):
    X = random_codes(60, 9, seed=4)
    X[:, 0] = np.maximum(X[:, 0], 0.0)  # every sequence has at least one symbol: k(x, x) > 0 for k = 1
    bank = [{"function": "spectrum", "k": 1}]
    dense = KernelBank.build(X, bank, normalize="diagonal")
    fb = build_factor_bank(bank, X, normalize="diagonal")
    assert fb.factor_map.methods == ["feature_map"]
    np.testing.assert_allclose(fb.LT.T @ fb.LT, dense.K[0], atol=1e-14)
    Xn = random_codes(5, 9, seed=5)
    Xn[:, 0] = np.maximum(Xn[:, 0], 0.0)
    np.testing.assert_allclose(fb.factor_map.transform(Xn).T @ fb.LT, dense.cross(Xn)[0], atol=1e-14)
