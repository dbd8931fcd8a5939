"""Building factor banks (mklkit.kernels.factorize): exact and approximate factors of real data."""

from __future__ import annotations

import functools
import logging
import re

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import load_builtin
from mklkit.engines.spicy import Spicy
from mklkit.kernels import BankError, KernelBank
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factorize import FactorError, build_factor_bank, poly_map_dim
from mklkit.problem import Problem

# small problems: thread start-up would dominate
pytestmark = pytest.mark.usefixtures("one_thread")

NORMALIZE = ["trace", "diagonal", "none"]


def standardize(X):
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def sonar_points(n=120):
    ds = load_builtin("sonar")
    rows = np.random.default_rng(0).permutation(ds.n_samples)[:n]
    return standardize(ds.X[rows]), ds.y[rows], standardize(ds.X)[np.setdiff1d(np.arange(ds.n_samples), rows)]


def ionosphere_points():
    X = load_builtin("ionosphere").X
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


@functools.lru_cache(maxsize=None)
def a9a_points(n=300, n_new=40):
    """The first ``n`` training and ``n_new`` test points of a9a, sparse (123 binary features)."""
    return (sp.csr_matrix(load_builtin("a9a").X[:n]), sp.csr_matrix(load_builtin("a9a_test").X[:n_new]))


def widths(d, factors=(0.5, 1.0, 2.0)):
    return [float(f * np.sqrt(d)) for f in factors]


EXACT_BANK = [
    {"function": "linear", "features": [[0, 1, 2, 3], [7], [10, 20, 30, 40, 50]]},
    {"function": "poly", "degree": [1, 2, 3], "offset": [0.0, 1.0], "features": [[4, 5, 6]]},
    {"function": "poly", "degree": 2, "scale": 0.25, "offset": 2.0, "features": [[11, 12, 13, 14, 15, 16]]},
]


def max_rel(A, B):
    return float(np.max(np.abs(A - B)) / np.max(np.abs(B)))


@pytest.mark.parametrize("normalize", NORMALIZE)
def test_exact_factors_reproduce_the_dense_bank_and_its_cross_kernels(normalize):
    X, _, Xn = sonar_points()
    kb = KernelBank.build(X, EXACT_BANK, normalize=normalize)
    fb = build_factor_bank(EXACT_BANK, X, normalize=normalize)
    assert fb.factor_map.methods == ["linear"] * 3 + ["poly_map"] * 7
    assert fb.factor_map.names == kb.names
    assert fb.ranks.tolist() == [4, 1, 5] + [poly_map_dim(3, p, c) for p in (1, 2, 3) for c in (0.0, 1.0)] + [28]
    K = fb.to_array()
    for m in range(fb.n_kernels):
        assert max_rel(K[m], kb.K[m]) <= 1e-10, (m, kb.names[m])
    assert np.all(fb.relative_trace_error <= 1e-12)
    C, LTn = kb.cross(Xn), fb.transform(Xn)
    for m in range(fb.n_kernels):
        a, b = fb.starts[m], fb.starts[m + 1]
        assert max_rel(LTn[a:b].T @ fb.LT[a:b], C[m]) <= 1e-10, (m, kb.names[m])


@pytest.mark.parametrize("normalize", NORMALIZE)
def test_linear_factors_of_sparse_features_stay_sparse(normalize):
    X, Xn = a9a_points()
    bank = [{"function": "linear", "features": [list(range(0, 60)), list(range(60, 123)), list(range(0, 123, 2))]}]
    fb = build_factor_bank(bank, X, normalize=normalize)
    kb = KernelBank.build(X, bank, normalize=normalize)
    assert fb.sparse and fb.factor_map.sparse
    assert fb.nbytes < 8 * fb.total_rank * fb.n_samples / 3  # a9a is 11 % dense
    K = fb.to_array()
    for m in range(3):
        assert max_rel(K[m], kb.K[m]) <= 1e-10
    LTn = fb.transform(Xn)
    assert sp.issparse(LTn) and LTn.shape == (fb.total_rank, Xn.shape[0])
    C = kb.cross(Xn)
    for m in range(3):
        a, b = fb.starts[m], fb.starts[m + 1]
        assert max_rel((LTn[a:b].T @ fb.LT[a:b]).toarray(), C[m]) <= 1e-10


def test_a_bank_with_approximate_kernels_on_sparse_features_is_dense():
    X, Xn = a9a_points(200, 30)
    bank = [{"function": "linear", "features": [list(range(0, 60))]}, {"function": "rbf", "width": 3.0}]
    fb = build_factor_bank(bank, X, tol=0.0)
    kb = KernelBank.build(X, bank)
    assert not fb.sparse and fb.factor_map.methods == ["linear", "pivoted_cholesky"]
    assert max_rel(fb.to_array(), kb.K) <= 1e-8
    C = kb.cross(Xn)
    LTn = fb.transform(Xn)
    for m in range(2):
        a, b = fb.starts[m], fb.starts[m + 1]
        assert max_rel(LTn[a:b].T @ fb.LT[a:b], C[m]) <= 1e-8


@pytest.mark.parametrize("normalize", NORMALIZE)
def test_pivoted_cholesky_to_full_rank_reproduces_the_bank(normalize):
    X, _, _ = sonar_points()
    d = X.shape[1]
    bank = [
        {"function": "rbf", "width": widths(d)},
        {"function": "poly", "degree": 3, "scale": 1.0 / d},
    ]  # map too large: approximated
    fb = build_factor_bank(bank, X, tol=0.0, normalize=normalize)
    kb = KernelBank.build(X, bank, normalize=normalize)
    assert fb.factor_map.methods == ["pivoted_cholesky"] * 4
    assert max_rel(fb.to_array(), kb.K) <= 1e-8
    assert fb.overall_trace_error <= 1e-10


def assert_new_points_within_the_residual(fb, kb, Xn, normalize):
    """The residual is a positive semidefinite kernel, so every entry of
    K_m(X_new, X) - L_m(X_new) L_m^T is bounded by the residual diagonals of the new and the
    training points (both normalised).  Returns (approximate, exact) cross kernels per kernel."""
    C = kb.cross(Xn)
    K = fb.to_array()
    LTn = fb.transform(Xn)
    out = []
    for m, spec in enumerate(kb.specs):
        a, b = fb.starts[m], fb.starts[m + 1]
        r_train = np.diagonal(kb.K[m]) - np.diagonal(K[m])
        k_new = spec.function.diag(Xn)
        k_new = {"trace": k_new / kb.traces[m], "diagonal": np.ones_like(k_new), "none": k_new}[normalize]
        r_new = k_new - np.einsum("rn,rn->n", LTn[a:b], LTn[a:b])
        assert np.all(r_new >= -1e-12)
        approx = LTn[a:b].T @ fb.LT[a:b]
        bound = np.sqrt(np.maximum(np.outer(r_new, r_train), 0.0))
        assert np.all(np.abs(approx - C[m]) <= bound + 1e-12 * np.max(np.abs(C[m])))
        out.append((approx, C[m]))
    return out


@pytest.mark.parametrize("normalize", NORMALIZE)
def test_repeated_points_are_factored_once_with_their_multiplicity(normalize):
    """Binary a9a points repeat (and some are repeated on purpose here): pivoted Cholesky
    runs on the distinct points weighted by their counts; the factor of every copy, the
    residual trace, the tolerance and the map to new points are those of the whole bank."""
    from mklkit.kernels.factorize.points import _distinct_rows

    X0, Xn = a9a_points()
    X = sp.vstack([X0, X0[:60], X0[10:20]], format="csr")
    A = X.toarray()
    U, inverse, counts = _distinct_rows(A)
    assert U.shape[0] <= X.shape[0] - 70 and np.array_equal(U[inverse], A) and counts.sum() == X.shape[0]
    U2, inv2, c2 = np.unique(A, axis=0, return_inverse=True, return_counts=True)
    assert U.shape == U2.shape and np.array_equal(np.sort(counts), np.sort(c2.astype(float)))
    sub = A[:, :12]  # a few features: many copies
    Us, inv_s, _ = _distinct_rows(sub)
    assert Us.shape[0] < 40 and np.array_equal(Us[inv_s], sub)
    bank = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "rbf", "width": 2.0, "features": list(range(12))}]
    kb = KernelBank.build(X, bank, normalize=normalize)
    full = build_factor_bank(bank, X, tol=0.0, method="pivoted_cholesky", normalize=normalize)
    assert max_rel(full.to_array(), kb.K) <= 1e-8 and full.overall_trace_error <= 1e-10
    assert full.ranks[2] <= Us.shape[0]
    true_tr = np.trace(kb.K, axis1=1, axis2=2)
    fb = build_factor_bank(bank, X, tol=1e-2, method="pivoted_cholesky", normalize=normalize)
    assert np.all(fb.relative_trace_error <= 1e-2)
    # exact up to the rounding of the traces (about N = 370 with unit diagonals)
    np.testing.assert_allclose(fb.trace_error, true_tr - fb.trace(), rtol=0, atol=1e-13 * np.max(true_tr))
    # copies get equal rows, and the map to new points gives the training rows back
    LT = fb.LT
    np.testing.assert_array_equal(LT[:, :60], LT[:, 300:360])
    np.testing.assert_allclose(fb.transform(X), LT, rtol=0, atol=1e-9 * np.abs(LT).max())
    assert_new_points_within_the_residual(fb, kb, Xn.toarray(), normalize)


@pytest.mark.parametrize("method", ["pivoted_cholesky", "nystrom"])
def test_trace_error_falls_with_tol_and_is_the_residual_trace(method):
    X = ionosphere_points()
    d = X.shape[1]
    bank = [{"function": "rbf", "width": widths(d, (1.0, 2.0, 4.0))}]
    kb = KernelBank.build(X, bank)
    true_tr = np.trace(kb.K, axis1=1, axis2=2)
    last_err, last_rank = np.inf, 0
    tols = (1e-1, 1e-2, 1e-3, 1e-4) + ((1e-6,) if method == "pivoted_cholesky" else ())
    for tol in tols:
        fb = build_factor_bank(bank, X, tol=tol, method=method)
        err = fb.trace_error
        assert np.all(fb.relative_trace_error <= tol)
        assert np.allclose(err, true_tr - fb.trace(), rtol=0, atol=1e-13)  # exact, from the diagonal
        assert np.all(err <= last_err) and fb.total_rank >= last_rank
        assert fb.overall_trace_error == pytest.approx(err.sum() / true_tr.sum())
        last_err, last_rank = err, fb.total_rank
        # the residual is positive semidefinite, so its entries are bounded by its diagonal
        # (to round-off; Nyström's rounding is amplified by up to 1/cut-off = 1e8)
        R = kb.K - fb.to_array()
        dR = np.diagonal(R, axis1=1, axis2=2)
        slack = (1e-11 if method == "pivoted_cholesky" else 1e-8) * np.max(np.abs(kb.K))
        assert np.all(dR >= -slack)
        assert np.all(np.abs(R) <= np.sqrt(np.maximum(dR[:, :, None] * dR[:, None, :], 0)) + slack)
    assert last_err.max() <= tols[-1]


def test_rank_caps_the_factors_and_reports_the_error():
    X = ionosphere_points()
    bank = [{"function": "rbf", "width": widths(X.shape[1], (0.5, 4.0))}]
    for method in ("pivoted_cholesky", "nystrom"):
        fb = build_factor_bank(bank, X, rank=25, tol=1e-9, method=method)
        assert fb.ranks.max() <= 25 and fb.ranks[0] == 25
        assert fb.relative_trace_error[0] > 1e-2  # a narrow kernel: far from the tol


@pytest.mark.parametrize("method", ["pivoted_cholesky", "nystrom"])
@pytest.mark.parametrize("normalize", NORMALIZE)
def test_approximate_factors_extend_to_new_points_within_their_error(method, normalize):
    X, _, Xn = sonar_points()
    d = X.shape[1]
    bank = [
        {"function": "rbf", "width": widths(d, (1.0, 2.0))},
        {"function": "poly", "degree": 3, "scale": 1.0 / d, "offset": 1.0},
    ]
    kb = KernelBank.build(X, bank, normalize=normalize)
    fb = build_factor_bank(bank, X, tol=1e-3, method=method, normalize=normalize)
    for approx, exact in assert_new_points_within_the_residual(fb, kb, Xn, normalize):
        assert max_rel(approx, exact) <= 0.1


def test_predictions_from_factors_match_the_dense_ones():
    X, y, Xn = sonar_points()
    d = X.shape[1]
    bank = [{"function": "rbf", "width": widths(d)}, {"function": "linear", "features": [[0, 1, 2]]}]
    kb = KernelBank.build(X, bank)
    res = Spicy(tol=1e-8).solve(Problem(K=kb.K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.5))
    f_ref = res.decision_function(kb.cross(Xn))
    fb = build_factor_bank(bank, X, tol=0.0)
    f = fb.decision_function(Xn, res.alpha, res.bias)
    assert np.max(np.abs(f - f_ref)) <= 1e-8 * np.max(np.abs(f_ref))


@pytest.mark.parametrize("reg", [ElasticNet(lam=0.5), L1()], ids=["elasticnet", "l1"])
def test_spicy_on_factored_kernels_converges_to_the_dense_optimum(reg):
    X, y, _ = sonar_points()
    d = X.shape[1]
    bank = [
        {"function": "rbf", "width": widths(d, (1.0, 2.0, 4.0))},
        {"function": "poly", "degree": 2, "scale": 1.0 / d},
        {"function": "linear", "features": [[0, 1, 2, 3, 4], [10, 11, 12]]},
    ]
    kb = KernelBank.build(X, bank)
    ref = Spicy(tol=1e-10).solve(Problem(K=kb.K, y=y, loss=Logistic(), regularizer=reg, C=0.5))
    assert ref.converged
    gaps = []
    for tol in (1e-1, 1e-2, 1e-3, 1e-5):
        fb = build_factor_bank(bank, X, tol=tol)
        res = Spicy(tol=1e-10).solve(Problem(K=fb, y=y, loss=Logistic(), regularizer=reg, C=0.5))
        assert res.converged and res.gap <= 1e-10
        gaps.append(abs(res.objective - ref.objective) / ref.objective)
    assert gaps[0] > 1e-4  # a coarse factor changes the problem
    assert all(b <= a for a, b in zip(gaps, gaps[1:]))
    assert gaps[-1] <= 1e-6


def test_factorizations_are_deterministic():
    X = ionosphere_points()[:150]
    bank = [{"function": "rbf", "width": widths(X.shape[1])}]
    for method, rank in (("pivoted_cholesky", None), ("nystrom", 40)):
        a = build_factor_bank(bank, X, tol=1e-3, rank=rank, method=method, seed=3)
        b = build_factor_bank(bank, X, tol=1e-3, rank=rank, method=method, seed=3)
        assert np.array_equal(a.LT, b.LT) and np.array_equal(a.starts, b.starts)
    c = build_factor_bank(bank, X, rank=30, method="nystrom", seed=4)
    d_ = build_factor_bank(bank, X, rank=30, method="nystrom", seed=3)
    assert not np.array_equal(c.LT, d_.LT)  # other landmarks


def test_auto_says_when_it_approximates_a_polynomial_kernel(caplog):
    X, _, _ = sonar_points(60)
    bank = [{"function": "poly", "degree": 2, "features": [[0, 1, 2]]}, {"function": "poly", "degree": 2}]
    with caplog.at_level(logging.INFO, logger="mklkit.kernels.factorize"):
        fb = build_factor_bank(bank, X, tol=1e-4)
    assert fb.factor_map.methods == ["poly_map", "pivoted_cholesky"]
    assert re.search(r"monomial map of 1891 dimensions.*max_exact_dim = 256.*pivoted Cholesky", caplog.text)
    assert build_factor_bank(bank, X, max_exact_dim=2000).factor_map.methods == ["poly_map"] * 2
    # a rank below the exact one: approximated within the rank
    fb = build_factor_bank([{"function": "linear"}], X, rank=10)
    assert fb.factor_map.methods == ["pivoted_cholesky"] and fb.ranks.tolist() == [10]


def test_a_rank_that_does_not_fit_is_capped_to_what_fits():
    from mklkit.kernels.factorize import RankCapWarning

    X = ionosphere_points()
    bank = [{"function": "rbf", "width": widths(X.shape[1])}]
    with pytest.warns(
        RankCapWarning,
        match=r"kernels\.factor\.rank = 300.*3 approximated kernels.*351 points.*"
        r"2\.4 MiB.*memory_budget.*976\.6 KiB.*rank <= (\d+) fits.*capped to rank \1\b",
    ) as rec:
        fb = build_factor_bank(bank, X, rank=300, memory_budget=1e6, root="kernels.factor")
    assert rec[0].message.key == "kernels.factor.rank" and rec[0].message.value == 300
    fits = int(re.search(r"capped to rank (\d+)", str(rec[0].message)).group(1))
    assert 1 <= fb.ranks.max() <= fits < 300


def test_a_tolerance_that_does_not_fit_is_reported_with_what_fits():
    X = ionosphere_points()
    bank = [{"function": "rbf", "width": widths(X.shape[1])}]
    with pytest.raises(
        FactorError,
        match=r"kernels\.factor\.tol = 1e-06.*kernels\.memory_budget = 976\.6 KiB.*"
        r"kernel 0 'rbf\(width=2\.915\)\[all\]'.*residual trace.*kernels\.factor\.rank <= \d+",
    ) as err:
        build_factor_bank(bank, X, tol=1e-6, memory_budget=1e6, root="kernels.factor")
    assert err.value.key == "kernels.factor.tol"
    fit = int(re.search(r"rank <= (\d+)", str(err.value)).group(1))
    fb = build_factor_bank(bank, X, rank=fit, tol=1e-6, memory_budget=1e6)  # what it says fits
    assert fb.ranks.tolist() == [fit] * 3
    with pytest.raises(
        FactorError,
        match=r"memory_budget.*exact factors.*1\.3 MiB.*976\.6 KiB.*raise memory_budget.*"
        r"'pivoted_cholesky'",
    ):
        build_factor_bank(
            [{"function": "poly", "degree": 2, "features": [list(range(30))]}], X, memory_budget=1e6, max_exact_dim=1000
        )
    # nothing exact: only the approximation's working space is over the budget, and a rank
    # (which the user may have given) is no way out
    with pytest.raises(
        FactorError,
        match=r"memory_budget.*3 kernels on \d+ points.*[\d.]+ KiB of working space.*"
        r"9\.8 KiB.*raise memory_budget",
    ) as err:
        build_factor_bank(bank, X, rank=5, memory_budget=1e4)
    assert err.value.key == "memory_budget" and "rank" not in str(err.value)


@pytest.mark.parametrize(
    "kwargs, allowed",
    [
        ({"rank": 0}, "an integer >= 1 or None"),
        ({"rank": 2.5}, "an integer >= 1 or None"),
        ({"rank": True}, "an integer >= 1 or None"),
        ({"tol": 1.0}, "a number in [0, 1)"),
        ({"tol": -1e-3}, "a number in [0, 1)"),
        ({"tol": "small"}, "a number in [0, 1)"),
        ({"tol": float("nan")}, "a number in [0, 1)"),
        ({"method": "exakt"}, "'auto', 'exact', 'pivoted_cholesky', 'nystrom'"),
        ({"seed": -1}, "an integer >= 0"),
        ({"normalize": "unit"}, "'trace', 'diagonal', 'none'"),
        ({"memory_budget": 0}, "a number of bytes > 0 or None"),
        ({"max_exact_dim": 0}, "an integer >= 1"),
    ],
)
def test_bad_settings_are_one_line_errors(kwargs, allowed):
    """Each names its key, the offending value and what is allowed, on one line."""
    X = ionosphere_points()[:50]
    ((key, value),) = kwargs.items()
    with pytest.raises(FactorError, match=rf"{key}.*{re.escape(allowed)}.*got {re.escape(repr(value))}") as info:
        build_factor_bank([{"function": "rbf", "width": 1.0}], X, **kwargs)
    err = info.value
    assert err.key == key and allowed in err.allowed and "\n" not in str(err)
    assert err.value == value or (value != value and err.value != err.value)  # nan is nan
    if value == "exakt":
        assert "did you mean 'exact'" in str(err)


def test_exact_method_errors_name_the_setting():
    X = ionosphere_points()[:50]
    with pytest.raises(
        FactorError,
        match=r"f\.method.*kernel 0 'poly\(degree=3\)\[all\]'.*7770 dimensions.*"
        r"max_exact_dim = 256.*method 'auto'.*raise max_exact_dim",
    ) as info:
        build_factor_bank([{"function": "poly", "degree": 3}], X, method="exact", root="f")
    assert info.value.key == "f.method"
    with pytest.raises(
        FactorError,
        match=r"method.*kernel 0 'linear\[all\]'.*rank 34 > rank = 10.*raise rank.*"
        r"method 'auto'",
    ) as info:
        build_factor_bank(["linear"], X, method="exact", rank=10)
    assert info.value.key == "method"
    # a kernel without an explicit feature map: the methods that factor it
    with pytest.raises(
        FactorError,
        match=r"method.*kernel 0 'rbf\(width=1\)\[all\]'.*no explicit feature map.*"
        r"'auto', 'pivoted_cholesky' or 'nystrom'",
    ) as info:
        build_factor_bank([{"function": "rbf", "width": 1.0}], X, method="exact")
    assert info.value.key == "method" and "\n" not in str(info.value)


def test_bad_data_and_unnormalisable_kernels_are_refused():
    X = ionosphere_points()[:50]
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(BankError, match=r"X\[3, 2\] is nan.*not allowed"):
        build_factor_bank(["linear"], bad)
    zero = X.copy()
    zero[:, 1] = 0.0
    with pytest.raises(BankError, match=r"kernel 0 'linear\[x1\]'.*trace 0\.0.*unit-trace"):
        build_factor_bank([{"function": "linear", "features": [1]}], zero)
    zero[7, 0] = 0.0
    with pytest.raises(BankError, match=r"kernel 0 'linear\[x0\]'.*k\(x, x\) = 0\.0 at sample 7.*unit-diagonal"):
        build_factor_bank([{"function": "linear", "features": [0]}], zero, normalize="diagonal")
    fb = build_factor_bank(["linear"], X)
    with pytest.raises(BankError, match=r"X_new.*\(n, 34\).*got \(4, 3\)"):
        fb.transform(np.ones((4, 3)))
    with pytest.raises(
        ValueError,
        match=r"no map to new points.*FactorBank\(LT, starts\).*build_factor_bank.*"
        r"FactorBank\.from_factors",
    ):
        FactorBank(np.ones((2, 3)), [0, 2]).transform(np.ones((2, 3)))


def test_diagonal_normalisation_gives_new_points_with_zero_diagonal_a_zero_row():
    X = ionosphere_points()[:60]
    bank = [
        {"function": "linear", "features": [[2, 3]]},
        {"function": "poly", "degree": 2, "offset": 0.0, "features": [[2, 3]]},
    ]
    fb = build_factor_bank(bank, X, normalize="diagonal")
    Xn = X[:5].copy()
    Xn[1, [2, 3]] = 0.0
    kb = KernelBank.build(X, bank, normalize="diagonal")
    LTn = fb.transform(Xn)
    assert np.all(LTn[:, 1] == 0.0)
    C = kb.cross(Xn)
    for m in range(2):
        a, b = fb.starts[m], fb.starts[m + 1]
        assert max_rel(LTn[a:b].T @ fb.LT[a:b], C[m]) <= 1e-10


@pytest.mark.parametrize("cols", [1, 5, 34], ids=lambda c: f"{c}-columns")
@pytest.mark.parametrize("kind", ["sqdist", "inner"])
def test_base_rows_are_the_base_matrix_rows(kind, cols):
    from mklkit.kernels.functions import BaseRows, base_matrix

    X = ionosphere_points()[:, :cols]
    X[7] = X[3]  # a duplicate point: distance exactly 0
    idx = np.array([3, 7, 0, 100], dtype=np.int64)
    got, ref = BaseRows(kind, X)(idx), base_matrix(kind, X)[idx]
    assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref))
    if kind == "sqdist":
        assert got[0, 7] == 0.0 and got[1, 3] == 0.0
    with pytest.raises(ValueError, match=r"base kind.*'sqdist', 'inner'.*got 'l1'"):
        BaseRows("l1", X)


def test_docs_factor_banks_examples_run():
    import doctest
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "factor_banks.md"
    failures, tried = doctest.testfile(
        str(doc), module_relative=False, report=True, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    assert tried >= 20 and failures == 0, (failures, tried)


def test_resolved_kernel_specs_and_datasets_are_accepted():
    from mklkit.kernels import expand_bank

    ds = load_builtin("ionosphere")
    bank = [{"function": "rbf", "width": [3.0, 6.0], "features": {"random_subsets": 2, "size": 5}}]
    a = build_factor_bank(bank, ds, tol=1e-4)  # a Dataset
    b = build_factor_bank(expand_bank(bank, ds.n_features, ds.feature_names), ds.X, tol=1e-4)
    assert a.factor_map.names == b.factor_map.names and len(a.factor_map.names) == 4
    assert np.array_equal(a.LT, b.LT)
    assert np.array_equal(a.transform(ds), b.transform(ds.X))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_weighted_trace_is_the_weighted_sum_of_the_diagonals(sparse):
    """``weighted_trace(w)``: sum_i w_i (L_m L_m^T)_ii per kernel, for dense and CSR factors."""
    rng = np.random.default_rng(0)
    blocks = [np.where(np.abs(B) > 0.5, B, 0.0) for B in (rng.normal(size=(30, 3)), rng.normal(size=(30, 5)))]
    bank = FactorBank.from_blocks([sp.csr_matrix(B) for B in blocks] if sparse else blocks)
    assert bank.sparse == sparse
    w = rng.uniform(0.5, 2.0, 30)
    expected = [float(np.sum(w * np.sum(B * B, axis=1))) for B in blocks]
    np.testing.assert_allclose(bank.weighted_trace(w), expected, rtol=1e-12)
    np.testing.assert_allclose(bank.weighted_trace(np.ones(30)), bank.trace(), rtol=1e-12)
