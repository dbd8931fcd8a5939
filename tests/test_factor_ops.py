"""FactorBank: every bank operation against the dense bank of its Gram matrices."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.data import load_builtin
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.ops import ArrayBank

REL = 1e-12


def assert_close(got, ref, rel=REL):
    __tracebackhide__ = True
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    assert err <= rel * scale or (scale == 0.0 and err == 0.0), (err, scale)


def standardize(X):
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


# -- the banks the operations are checked on ------------------------------------
def random_dense() -> FactorBank:
    rng = np.random.default_rng(0)
    N, ranks = 37, [3, 0, 5, 1, 12, 0]
    return FactorBank.from_blocks([rng.standard_normal((N, r)) for r in ranks])


def random_sparse() -> FactorBank:
    ranks = [4, 0, 7, 2]
    blocks = [sp.random(41, r, density=0.25, random_state=k, format="csr") for k, r in enumerate(ranks)]
    return FactorBank.from_blocks(blocks)


def sonar_linear() -> FactorBank:
    """Linear kernels on four groups of sonar's columns (each its own factor), scaled."""
    X = standardize(load_builtin("sonar").X[:90])
    groups = [range(0, 15), range(15, 40), range(40, 41), range(41, 60)]
    return FactorBank.from_blocks([X[:, list(g)] / np.sqrt(len(g)) for g in groups])


@functools.lru_cache(maxsize=None)
def a9a_rows(n: int) -> sp.csr_matrix:
    return sp.csr_matrix(load_builtin("a9a").X[:n])


def a9a_linear() -> FactorBank:
    """Sparse binary a9a features: linear kernels on column groups, kept sparse."""
    X = a9a_rows(120)
    groups = [range(0, 40), range(40, 41), range(41, 90), range(90, 123)]
    return FactorBank.from_blocks([X[:, list(g)] for g in groups])


BANKS = {
    "random_dense": random_dense,
    "random_sparse": random_sparse,
    "sonar_linear": sonar_linear,
    "a9a_sparse": a9a_linear,
}


@pytest.fixture(
    params=[(name, par) for name in BANKS for par in (False, True)],
    ids=lambda p: f"{p[0]}-{'parallel' if p[1] else 'serial'}",
)
def banks(request):
    """The factor bank (serial or parallel loops) and the dense bank of its Gram matrices."""
    name, par = request.param
    if par:  # the parallel loops on every core
        request.getfixturevalue("machine_threads")
    fb = BANKS[name]()
    fb._par = par
    return fb, ArrayBank(fb.to_array())


def vectors(N, k, seed=1):
    return np.random.default_rng(seed).standard_normal((k, N))


def test_banks_have_rank_zero_blocks_or_sparse_storage():
    assert 0 in random_dense().ranks and 0 in random_sparse().ranks
    assert random_sparse().sparse and a9a_linear().sparse and not sonar_linear().sparse


def test_trace(banks):
    fb, ab = banks
    assert_close(fb.trace(), ab.trace())


def test_matvecs_and_norms(banks):
    fb, ab = banks
    v, w = vectors(fb.n_samples, 2)
    assert_close(fb.matvecs(v), ab.matvecs(v))
    KV, nw = fb.matvecs_and_norms(v, w)
    KV_ref, nw_ref = ab.matvecs_and_norms(v, w)
    assert_close(KV, KV_ref)
    assert_close(nw, nw_ref)
    assert_close(fb.dual_block_norms(w), ab.dual_block_norms(w))


def test_direction_forms(banks):
    fb, ab = banks
    rho, d = vectors(fb.n_samples, 2)
    KR = ab.matvecs(rho)
    for got, ref in zip(fb.direction_forms(d, KR), ab.direction_forms(d, KR)):
        assert_close(got, ref)


def test_accumulate_hessian(banks):
    fb, ab = banks
    M, N = fb.n_kernels, fb.n_samples
    rng = np.random.default_rng(3)
    idx = np.array([m for m in range(M) if m % 2 == 0] + [M - 1], dtype=np.int64)
    s = rng.uniform(0.5, 2.0, idx.size)
    s[1] = 0.0
    t = rng.standard_normal(idx.size)
    t[0] = 0.0
    KR = np.ascontiguousarray(ab.matvecs(rng.standard_normal(N))[idx])
    H0 = rng.standard_normal((N, N))
    H0 = H0 + H0.T
    H, H_ref = H0.copy(), H0.copy()
    fb.accumulate_hessian(H, idx, s, KR, t, 8)
    ab.accumulate_hessian(H_ref, idx, s, KR, t, 8)
    assert_close(H - H0, H_ref - H0)
    assert np.array_equal(H - H0, (H - H0).T)  # exactly symmetric increments
    HF = np.asfortranarray(H0)  # any layout of H works
    fb.accumulate_hessian(HF, idx, s, KR, t, 8)
    assert_close(HF - H0, H_ref - H0)


def test_matvecs_rows_block_norms_combine(banks):
    fb, ab = banks
    M, N = fb.n_kernels, fb.n_samples
    rng = np.random.default_rng(4)
    idx = np.array([M - 1, 0, 1, 0], dtype=np.int64)  # repeats allowed
    A = rng.standard_normal((idx.size, N))
    assert_close(fb.matvecs_rows(A, idx), ab.matvecs_rows(A, idx))
    alpha = rng.standard_normal((M, N))
    alpha[1] = 0.0  # a zero row is skipped
    assert_close(fb.block_norms(alpha), ab.block_norms(alpha))
    sub = np.array([0, 2, M - 1], dtype=np.int64)
    assert_close(fb.combine(alpha, sub), ab.combine(alpha, sub))
    assert_close(fb.combine(alpha, np.arange(M)), ab.combine(alpha, np.arange(M)))
    assert_close(fb.combine(alpha, np.zeros(0, dtype=np.int64)), np.zeros(N))


def test_coefficients_give_the_combined_prediction(banks):
    fb, ab = banks
    M, N = fb.n_kernels, fb.n_samples
    alpha = np.random.default_rng(5).standard_normal((M, N))
    beta = fb.coefficients(alpha)
    assert beta.shape == (fb.total_rank,)
    assert_close(fb.expand(beta), ab.combine(alpha, np.arange(M)))
    assert_close(np.sqrt(np.bincount(fb._row_block, beta * beta, minlength=M)), ab.block_norms(alpha))


def test_combinations_are_the_blocks_of_the_factors_times_their_coordinates(banks):
    fb, _ = banks
    M, N = fb.n_kernels, fb.n_samples
    c = np.random.default_rng(6).standard_normal(fb.total_rank)
    c[fb.starts[0] : fb.starts[1]] = 0.0  # a kernel with coordinates 0
    L = fb.LT.toarray() if fb.sparse else fb.LT
    ref = np.array([c[fb.starts[m] : fb.starts[m + 1]] @ L[fb.starts[m] : fb.starts[m + 1]] for m in range(M)])
    got = fb.combinations(c)
    assert got.shape == (M, N)
    assert_close(got, ref)
    assert not np.any(got[0])
    # the transpose of coefficients: <c, coefficients(A)> = <combinations(c), A>
    A = np.random.default_rng(7).standard_normal((M, N))
    assert np.isclose(c @ fb.coefficients(A), np.sum(got * A))


def test_sample_columns_are_the_factor_rows_of_those_points(banks):
    fb, _ = banks
    pick = np.array([fb.n_samples - 1, 0, 3, 3])
    got = fb.sample_columns(pick)
    L = fb.LT.toarray() if fb.sparse else fb.LT
    assert_close(got.toarray() if sp.issparse(got) else got, L[:, pick])


def test_bad_factor_values_are_refused():
    L = np.ones((5, 2))
    L[3, 1] = np.nan
    with pytest.raises(ValueError, match="LT has NaN or infinite values"):
        FactorBank(L.T, [0, 1, 2])
    with pytest.raises(ValueError, match=r"trace_error must be finite and >= 0; got \[-1.0, 0.0\]"):
        FactorBank(np.ones((2, 5)), [0, 1, 2], trace_error=[-1.0, 0.0])
    with pytest.raises(ValueError, match=r"alpha must have shape \(2, 5\); got \(5,\)"):
        FactorBank(np.ones((2, 5)), [0, 1, 2]).coefficients(np.ones(5))
