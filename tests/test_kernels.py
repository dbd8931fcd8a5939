"""Kernel functions, bank descriptions, KernelBank building, cross kernels, precomputed banks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.metrics.pairwise import laplacian_kernel, pairwise_kernels

from mklkit.components.params import Param, ParamError
from mklkit.data import Standardizer, load_builtin
from mklkit.kernels import (
    BUILTIN_KERNEL_FUNCTIONS,
    CHI2_DF,
    RBF,
    BankError,
    KernelBank,
    KernelFunction,
    Linear,
    Poly,
    count_kernels,
    estimate_bytes,
    expand_bank,
    make_resolver,
    squared_distances,
    validate_bank,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 5))
    Z = rng.standard_normal((17, 5))
    return X, Z


@pytest.fixture(scope="module")
def sonar():
    ds = load_builtin("sonar")
    return ds, Standardizer().fit_transform(ds.X)


def sk_kernel(func: KernelFunction, X, Z=None):
    """The same kernel computed by scikit-learn."""
    if isinstance(func, RBF):
        return pairwise_kernels(X, Z, metric="rbf", gamma=1.0 / (2.0 * func.width**2))
    if isinstance(func, Poly):
        return pairwise_kernels(X, Z, metric="polynomial", degree=func.degree, gamma=func.scale, coef0=func.offset)
    if isinstance(func, Linear):
        return pairwise_kernels(X, Z, metric="linear")
    raise AssertionError(func)


FUNCS = [
    RBF(width=0.7),
    RBF(width=3.0),
    Poly(degree=1),
    Poly(degree=2, offset=0.5, scale=0.3),
    Poly(degree=3),
    Linear(),
]


# ---------------------------------------------------------------------------
# Kernel functions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("func", FUNCS, ids=repr)
def test_gram_matches_sklearn(func, data):
    X, Z = data
    np.testing.assert_allclose(func.gram(X), sk_kernel(func, X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(func.gram(X, Z), sk_kernel(func, X, Z), rtol=1e-12, atol=1e-12)
    # a single column takes the exact-difference path
    np.testing.assert_allclose(
        func.gram(X[:, :1], Z[:, :1]), sk_kernel(func, X[:, :1], Z[:, :1]), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("func", FUNCS, ids=repr)
def test_gram_symmetric_psd_and_diag(func, data):
    X, _ = data
    K = func.gram(X)
    assert K.dtype == np.float64 and K.flags.c_contiguous
    assert np.array_equal(K, K.T)
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * np.trace(K)
    np.testing.assert_allclose(func.diag(X), np.diagonal(K), rtol=1e-13)


def test_rbf_width_convention():
    # k(x, z) = exp(-||x - z||^2 / (2 sigma^2)), computed by hand
    x, z = np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]])
    assert RBF(width=2.0).gram(x, z)[0, 0] == pytest.approx(np.exp(-25.0 / 8.0), rel=1e-14)


@pytest.mark.parametrize("d", [1, 4, 20])  # exact differences, term-by-term sums, BLAS + refinement
def test_squared_distances_exact_for_duplicates(d):
    rng = np.random.default_rng(1)
    X = 1e3 + rng.standard_normal((30, d))  # large offset: the plain BLAS form would cancel
    X[5] = X[9]
    D = squared_distances(X)
    assert np.array_equal(D, D.T)
    assert D[5, 9] == 0.0 and np.all(np.diagonal(D) == 0.0)
    np.testing.assert_allclose(D, cdist(X, X, "sqeuclidean"), rtol=1e-9, atol=1e-9)
    Dc = squared_distances(X[:7], X)
    np.testing.assert_allclose(Dc, cdist(X[:7], X, "sqeuclidean"), rtol=1e-9, atol=1e-9)
    assert Dc[5, 9] == 0.0


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (RBF, {"width": 0.0}, r"width must be a number > 0; got 0\.0"),
        (RBF, {"widht": 1.0}, r"did you mean 'width'"),
        (Poly, {"degree": 1.5}, r"degree must be an integer >= 1"),
        (Poly, {"offset": -1.0}, r"offset must be a number >= 0"),
    ],
)
def test_kernel_function_param_errors(cls, kwargs, match):
    with pytest.raises(ParamError, match=match):
        cls(**kwargs)


def test_builtin_registry_tuple():
    assert {c.name for c in BUILTIN_KERNEL_FUNCTIONS} == {"rbf", "poly", "linear"}
    assert all(issubclass(c, KernelFunction) and c.kind == "kernel" for c in BUILTIN_KERNEL_FUNCTIONS)


# ---------------------------------------------------------------------------
# Bank descriptions
# ---------------------------------------------------------------------------
SPICY_WIDTHS = [0.1, 0.25, 0.5, 0.75] + list(range(1, 21))  # SpicyMKL §6.1


def test_simplemkl_preset_matches_paper(sonar):
    ds, _ = sonar
    d = ds.n_features
    assert d == 60
    assert count_kernels("simplemkl", d) == 27 * (d + 1) == 1647
    specs = expand_bank("simplemkl", d)
    rbf_all = [s.function.width for s in specs if s.function.name == "rbf" and len(s.features) == d]
    assert rbf_all == pytest.approx(SPICY_WIDTHS)
    polys = sorted(s.function.degree for s in specs if s.function.name == "poly" and len(s.features) == d)
    assert polys == [1, 2, 3]
    singles = [s for s in specs if len(s.features) == 1]
    assert len(singles) == 27 * d
    assert {s.features[0] for s in singles} == set(range(d))


@pytest.mark.parametrize("name, d, M", [("liver", 6, 91), ("australian", 14, 195), ("sonar", 60, 793)])
def test_smomkl_preset_counts_match_table1(name, d, M):
    # SMO-MKL Table 1 kernel counts: 13 kernels per single feature and on all features
    assert load_builtin(name).n_features == d
    assert count_kernels("smomkl", d) == M


def test_expansion_lists_each_names_and_groups():
    names = ["a", "b", "c", "d"]
    specs = expand_bank(
        [
            {"function": "rbf", "width": [0.5, 1, 2], "features": "all"},
            {"function": "poly", "degree": [1, 2], "offset": [0, 1], "features": "each"},
            {"function": "linear", "features": ["b", 3]},
            {"function": "rbf", "features": [[0, 1], ["c", "d"]]},
            "linear",
        ],
        4,
        feature_names=names,
    )
    assert len(specs) == 3 + 2 * 2 * 4 + 1 + 2 + 1
    assert [s.function.width for s in specs[:3]] == [0.5, 1.0, 2.0]
    assert specs[0].label == "rbf(width=0.5)[all]"
    poly = specs[3:19]
    assert [s.features for s in poly[:4]] == [(0,)] * 4  # features outer, parameters inner
    assert {(s.function.degree, s.function.offset) for s in poly[:4]} == {(1, 0.0), (1, 1.0), (2, 0.0), (2, 1.0)}
    assert specs[19].features == (1, 3) and specs[19].label == "linear[b,d]"
    assert [s.features for s in specs[20:22]] == [(0, 1), (2, 3)]
    assert specs[22].features == (0, 1, 2, 3)


def test_random_subsets_and_chi2_widths():
    entry = {"function": "rbf", "width": "chi2", "features": {"random_subsets": 50, "size": 3, "seed": 4}}
    specs = expand_bank([entry], 10)
    assert len(specs) == 50
    assert all(len(s.features) == 3 and len(set(s.features)) == 3 for s in specs)
    assert all(0 <= c < 10 for s in specs for c in s.features)
    widths = np.array([s.function.width for s in specs])
    assert widths.min() >= 0.1 and len(set(widths)) == 50
    # sigma = 5 chi2 + 0.1: (sigma - 0.1) / 5 has the chi2 mean CHI2_DF (loose check, 50 draws)
    assert 0.3 * CHI2_DF < np.mean((widths - 0.1) / 5) < 3 * CHI2_DF
    again = expand_bank([entry], 10)
    assert [s.features for s in again] == [s.features for s in specs]
    assert [s.function.width for s in again] == list(widths)
    other = expand_bank([{**entry, "seed": 1, "features": {"random_subsets": 50, "size": 3, "seed": 5}}], 10)
    assert [s.features for s in other] != [s.features for s in specs]
    assert [s.function.width for s in other] != list(widths)
    frac = expand_bank([{"function": "linear", "features": {"random_subsets": 3, "size": 0.5}}], 10)
    assert [len(s.features) for s in frac] == [5, 5, 5]


@pytest.mark.parametrize(
    "entries, match",
    [
        (
            [{"function": "rfb"}],
            r"bank\[0\]\.function: unknown kernel function 'rfb' \(did you mean 'rbf'\?\); available: all_subsequences, conjunctive, disjunctive, dnf, linear, poly, rbf, spectrum, "
            r"subsequences, tanimoto, weighted_degree, weighted_degree_shift",
        ),
        ([{"width": 1}], r"bank\[0\]\.function is required"),
        ([{"function": "rbf"}, {"function": "poly", "degree": 0}], r"bank\[1\]\.degree must be an integer >= 1; got 0"),
        ([{"function": "rbf", "width": [1, -2]}], r"bank\[0\]\.width\[1\] must be a number > 0; got -2"),
        ([{"function": "rbf", "width": []}], r"bank\[0\]\.width must be .* non-empty list"),
        ([{"function": "rbf", "widht": 1}], r"bank\[0\]: unknown key 'widht' \(did you mean 'width'\?\)"),
        ([{"function": "poly", "degree": "chi2"}], r"bank\[0\]\.degree .*'chi2' draws are only for real-valued"),
        ([{"function": "rbf", "features": "al"}], r"bank\[0\]\.features must be 'all', 'each'.*did you mean 'all'"),
        ([{"function": "rbf", "features": [0, 9]}], r"bank\[0\]\.features\[1\] must be a column index in \[0, 3\]"),
        ([{"function": "rbf", "features": ["x9"]}], r"bank\[0\]\.features\[0\]: unknown feature name 'x9'"),
        ([{"function": "rbf", "features": [1, 1]}], r"bank\[0\]\.features lists column 1 twice"),
        ([{"function": "rbf", "features": [[0], 1]}], r"not a mix"),
        ([{"function": "rbf", "features": {"random_subsets": 2}}], r"bank\[0\]\.features\.size is required"),
        (
            [{"function": "rbf", "features": {"random_subsets": 2, "size": 7}}],
            r"bank\[0\]\.features\.size must be .*<= the number of features \(4\)",
        ),
        ([{"function": "rbf", "features": {"random_subset": 2, "size": 1}}], r"did you mean 'random_subsets'"),
        ([{"function": "rbf", "seed": -1}], r"bank\[0\]\.seed must be an integer >= 0"),
        (
            [{"preset": "simplmkl"}],
            r"bank\[0\]\.preset: unknown kernel-bank preset 'simplmkl' \(did you mean 'simplemkl'\?\)",
        ),
        ("smo", r"bank: unknown kernel-bank preset 'smo'"),
        ([], r"bank must be a non-empty list"),
        ([3], r"bank\[0\] must be a mapping"),
    ],
)
def test_bank_description_errors(entries, match):
    with pytest.raises(BankError, match=match) as info:
        expand_bank(entries, 4)
    assert info.value.key is None or info.value.key.startswith("bank")


def test_bank_error_key_path_and_validate_without_data():
    with pytest.raises(BankError) as info:
        validate_bank([{"function": "rbf"}, {"function": "poly", "degree": [1, 2.5]}], root="kernels.bank")
    assert info.value.key == "kernels.bank[1].degree[1]"
    assert str(info.value).startswith("kernels.bank[1].degree[1] must be an integer")
    validate_bank([{"function": "rbf", "width": "chi2", "features": {"random_subsets": 3, "size": 2}}])


# ---------------------------------------------------------------------------
# Building banks
# ---------------------------------------------------------------------------
ENTRIES = [
    {"function": "rbf", "width": [0.5, 2.0], "features": "all"},
    {"function": "poly", "degree": [1, 2], "features": "each"},
    {"function": "linear", "features": [0, 2]},
    {"function": "rbf", "width": "chi2", "features": {"random_subsets": 3, "size": 2, "seed": 0}},
]


def _raw(spec, X, Z=None):
    cols = list(spec.features)
    return sk_kernel(spec.function, X[:, cols], None if Z is None else Z[:, cols])


@pytest.mark.parametrize("normalize", ["none", "trace", "diagonal"])
def test_bank_values_normalization_and_cross(normalize, data):
    X, Z = data
    bank = KernelBank.build(X, ENTRIES, normalize=normalize)
    M = 2 + 2 * 5 + 1 + 3
    assert bank.K.shape == (M, 40, 40) and bank.n_kernels == M and bank.n_samples == 40
    assert bank.K.flags.c_contiguous and bank.K.dtype == np.float64
    assert len(bank.names) == len(bank.specs) == M
    C = bank.cross(Z)
    assert C.shape == (M, 17, 40)
    for m, spec in enumerate(bank.specs):
        R = _raw(spec, X)
        Rc = _raw(spec, Z, X)
        if normalize == "trace":
            expect, expect_c = R / np.trace(R), Rc / np.trace(R)
            assert np.trace(bank.K[m]) == pytest.approx(1.0, rel=1e-13)
        elif normalize == "diagonal":
            d, dz = np.diagonal(R), np.diagonal(_raw(spec, Z))
            expect, expect_c = R / np.sqrt(np.outer(d, d)), Rc / np.sqrt(np.outer(dz, d))
            assert np.all(np.diagonal(bank.K[m]) == 1.0)
        else:
            expect, expect_c = R, Rc
        np.testing.assert_allclose(bank.K[m], expect, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(C[m], expect_c, rtol=1e-10, atol=1e-12)
        assert np.array_equal(bank.K[m], bank.K[m].T)
    # cross on the training points reproduces K
    np.testing.assert_allclose(bank.cross(X), bank.K, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("d", [1, 5, 20])  # outer difference, term by term, BLAS
@pytest.mark.parametrize("normalize", ["trace", "diagonal"])
def test_read_only_points(normalize, d):
    """Read-only points (``setflags(write=False)``, memory-mapped data) build and cross."""
    rng = np.random.default_rng(d)
    X, Z = rng.standard_normal((30, d)), rng.standard_normal((9, d))
    entries = [
        {"function": "rbf", "width": [1.0, 2.0]},
        {"function": "poly", "degree": 2},
        {"function": "rbf", "width": 1.0, "features": [0]},
    ]
    ref = KernelBank.build(X, entries, normalize=normalize)
    ref_c = ref.cross(Z)
    Xr, Zr = X.copy(), Z.copy()
    Xr.setflags(write=False)
    Zr.setflags(write=False)
    bank = KernelBank.build(Xr, entries, normalize=normalize)
    np.testing.assert_array_equal(bank.K, ref.K)
    np.testing.assert_array_equal(bank.cross(Zr), ref_c)
    np.testing.assert_array_equal(ref.cross(Zr), ref_c)
    assert not Xr.flags.writeable and not Zr.flags.writeable  # not made writeable in place


def test_preset_bank_on_sonar(sonar):
    ds, X = sonar
    bank = KernelBank.build(X[:60], "simplemkl", feature_names=ds.feature_names)
    assert bank.n_kernels == 1647
    assert len(set(bank.names)) == 1647
    assert "rbf(width=0.5)[x3]" in bank.names and "poly(degree=3)[all]" in bank.names
    np.testing.assert_allclose(np.trace(bank.K, axis1=1, axis2=2), 1.0, rtol=1e-12)
    np.testing.assert_allclose(bank.cross(X[:60]), bank.K, rtol=1e-12, atol=1e-15)


def test_sparse_input_equals_dense():
    ds = load_builtin("a9a_test")
    Xs = ds.X[:80]
    entries = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "linear", "features": [5, 20, 40]}]
    a = KernelBank.build(Xs, entries)
    b = KernelBank.build(Xs.toarray(), entries)
    np.testing.assert_allclose(a.K, b.K, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(a.cross(ds.X[80:95]), b.cross(ds.X[80:95].toarray()), rtol=1e-14, atol=1e-16)


def test_sparse_input_is_left_as_given():
    """A CSR input whose indices are not sorted gives the same kernels as its sorted form, and the
    caller's matrix keeps its arrays (the bank sorts a copy)."""
    import scipy.sparse as sp

    from mklkit.kernels import build_factor_bank

    ds = load_builtin("a9a_test")
    sorted_X = ds.X[:60].tocsr()
    X = sorted_X.copy()
    for i in range(X.shape[0]):  # reverse each row's entries
        lo, hi = X.indptr[i], X.indptr[i + 1]
        X.indices[lo:hi] = X.indices[lo:hi][::-1].copy()
        X.data[lo:hi] = X.data[lo:hi][::-1].copy()
    X.has_sorted_indices = False
    given = (X.indices.copy(), X.data.copy())
    entries = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "linear", "features": [5, 20, 40]}]
    bank = KernelBank.build(X, entries)
    np.testing.assert_array_equal(bank.K, KernelBank.build(sorted_X, entries).K)
    np.testing.assert_array_equal(bank.cross(X[:10]), bank.cross(sorted_X[:10]))
    factors = build_factor_bank(entries, X, rank=20)
    np.testing.assert_array_equal(factors.transform(X[:10]), factors.transform(sorted_X[:10]))
    assert sp.issparse(X) and np.array_equal(X.indices, given[0]) and np.array_equal(X.data, given[1])


def test_memory_budget_error(data):
    X, _ = data
    need = estimate_bytes(3, 40)
    assert need >= 3 * 40 * 40 * 8
    with pytest.raises(BankError, match=r"needs about .*KiB.*memory_budget_bytes is 1\.0 KiB"):
        KernelBank.build(X, [{"function": "rbf", "width": [1, 2, 3]}], memory_budget_bytes=1024)
    KernelBank.build(X, [{"function": "rbf", "width": [1, 2, 3]}], memory_budget_bytes=need)
    big = estimate_bytes(1647, 7400)
    assert big > 1647 * 7400**2 * 8
    with pytest.raises(BankError, match=r"GiB"):
        KernelBank.build(np.zeros((7400, 60)), "simplemkl")  # about 672 GiB, refused before allocating


def test_build_errors(data):
    X, Z = data
    X0 = X.copy()
    X0[:, 1] = 0.0
    with pytest.raises(BankError, match=r"kernel 0 'linear\[x1\]' has trace 0\.0") as built:
        KernelBank.build(X0, [{"function": "linear", "features": [1]}])
    assert "feature" in str(built.value)  # a built kernel's hint names its features
    K0 = np.stack([X @ X.T, np.zeros((X.shape[0], X.shape[0]))])
    with pytest.raises(BankError, match=r"\[1\] has trace 0\.0.*normalize='diagonal' or 'none'") as given:
        KernelBank.from_precomputed(K0, normalize="trace")
    assert "feature" not in str(given.value)  # a given kernel has none
    with pytest.raises(BankError, match=r"has k\(x, x\) = 0\.0 at sample 0"):
        KernelBank.build(X0, [{"function": "linear", "features": [1]}], normalize="diagonal")
    with pytest.raises(BankError, match=r"NaN or infinite values"):
        KernelBank.build(X * 1e120, [{"function": "poly", "degree": 3}])
    with pytest.raises(BankError, match=r"normalize.*'trace', 'diagonal', 'none'.*got 'unit'"):
        KernelBank.build(X, ["linear"], normalize="unit")
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(BankError, match=r"X\[3, 2\] is nan"):
        KernelBank.build(Xn, ["linear"])
    bank = KernelBank.build(X, ["linear"])
    with pytest.raises(BankError, match=r"X_new must have shape \(n, 5\)"):
        bank.cross(Z[:, :3])


def test_progress_bar(data, capsys):
    X, _ = data
    events = []
    KernelBank.build(X, [{"function": "rbf", "width": [1, 2]}], progress=events.append)
    assert events[-1]["what"] == "building kernel bank" and events[-1]["done"] == events[-1]["total"] == 2
    KernelBank.build(X, [{"function": "rbf", "width": [1, 2]}], progress=True)
    assert capsys.readouterr().err == ""  # library code never writes to the terminal
    KernelBank.build(X, [{"function": "rbf", "width": [1, 2]}], progress=False)
    assert capsys.readouterr().err == ""


class Laplace(KernelFunction):
    """A third-party kernel that only implements gram()."""

    name = "laplace"
    params = (Param("gamma", 1.0, "scale", low=0.0, low_open=True),)

    def gram(self, X, Z=None):
        return laplacian_kernel(X, X if Z is None else Z, gamma=self.gamma)


def test_third_party_function_through_resolve(data):
    X, Z = data
    resolve = make_resolver(list(BUILTIN_KERNEL_FUNCTIONS) + [Laplace])
    entries = [{"function": "laplace", "gamma": [0.1, 0.5], "features": [0, 1, 2]}, {"function": "rbf"}]
    bank = KernelBank.build(X, entries, normalize="diagonal", resolve=resolve)
    assert bank.names[:2] == ["laplace(gamma=0.1)[x0,x1,x2]", "laplace(gamma=0.5)[x0,x1,x2]"]
    expect = laplacian_kernel(Z[:, :3], X[:, :3], gamma=0.5)  # unit diagonal already
    np.testing.assert_allclose(bank.cross(Z)[1], expect, rtol=1e-12)
    np.testing.assert_allclose(bank.K[0], laplacian_kernel(X[:, :3], gamma=0.1), rtol=1e-12)
    with pytest.raises(BankError, match=r"unknown kernel function 'laplace'"):
        KernelBank.build(X, entries)  # not known to the built-in lookup
    mapped = KernelBank.build(X, entries[:1], resolve={"laplace": Laplace})
    np.testing.assert_allclose(mapped.K[0], bank.K[0] / 40.0, rtol=1e-12)


# ---------------------------------------------------------------------------
# Precomputed kernels
# ---------------------------------------------------------------------------
def _npz(tmp_path, name="k.npz", **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


@pytest.fixture
def precomputed(data):
    X, Z = data
    K = np.stack([pairwise_kernels(X, metric="rbf", gamma=g) for g in (0.1, 1.0)])
    Kt = np.stack([pairwise_kernels(Z, X, metric="rbf", gamma=g) for g in (0.1, 1.0)])
    y = np.where(np.arange(40) % 2 == 0, 1.0, -1.0)
    yt = np.where(np.arange(17) % 3 == 0, 1.0, -1.0)
    return K, Kt, y, yt


def test_from_npz_roundtrip(tmp_path, precomputed):
    K, Kt, y, yt = precomputed
    path = _npz(tmp_path, K_train=K, y_train=y, K_test=Kt, y_test=yt, names=np.array(["a", "b"]))
    pre = KernelBank.from_npz(path, normalize="trace")
    assert pre.bank.names == ["a", "b"] and pre.bank.specs is None
    np.testing.assert_allclose(pre.bank.K, K / 40.0, rtol=1e-13)  # rbf: trace = N
    np.testing.assert_allclose(pre.K_test, Kt / 40.0, rtol=1e-13)
    assert np.array_equal(pre.y_train, y) and np.array_equal(pre.y_test, yt)
    with pytest.raises(BankError, match=r"loaded from precomputed kernels"):
        pre.bank.cross(np.zeros((2, 5)))
    plain = KernelBank.from_npz(_npz(tmp_path, "p.npz", K_train=K, y_train=y))
    assert plain.K_test is None and plain.bank.names == ["k0", "k1"]
    np.testing.assert_allclose(plain.bank.K, K, rtol=1e-14, atol=1e-16)
    assert all(np.array_equal(k, k.T) for k in plain.bank.K)  # symmetrised exactly


def test_from_npz_errors(tmp_path, precomputed):
    K, Kt, y, yt = precomputed
    with pytest.raises(BankError, match=r"nope\.npz: precomputed kernel file not found"):
        KernelBank.from_npz(tmp_path / "nope.npz")
    with pytest.raises(BankError, match=r"missing array 'y_train'; the file has: K_train"):
        KernelBank.from_npz(_npz(tmp_path, K_train=K))
    bad = K.copy()
    bad[1, 3, 4] = np.nan
    with pytest.raises(BankError, match=r"k\.npz: K_train\[1\] has a NaN or infinite value at \[3, 4\]"):
        KernelBank.from_npz(_npz(tmp_path, K_train=bad, y_train=y))
    asym = K.copy()
    asym[0, 0, 5] += 0.1
    with pytest.raises(BankError, match=r"K_train\[0\] is not symmetric"):
        KernelBank.from_npz(_npz(tmp_path, K_train=asym, y_train=y))
    indef = K.copy()
    indef[1] -= 2.0 * np.eye(40)
    with pytest.raises(BankError, match=r"K_train\[1\] is not positive semidefinite: smallest eigenvalue"):
        KernelBank.from_npz(_npz(tmp_path, K_train=indef, y_train=y))
    with pytest.raises(BankError, match=r"y_train must have shape \(40,\)"):
        KernelBank.from_npz(_npz(tmp_path, K_train=K, y_train=y[:-1]))
    with pytest.raises(BankError, match=r"K_test must have shape \(2, N_test, 40\)"):
        KernelBank.from_npz(_npz(tmp_path, K_train=K, y_train=y, K_test=Kt[:, :, :30]))
    with pytest.raises(BankError, match=r"needs the array K_test_diag"):
        KernelBank.from_npz(_npz(tmp_path, K_train=K, y_train=y, K_test=Kt), normalize="diagonal")
    with pytest.raises(BankError, match=r"unknown array 'Ktest'"):
        KernelBank.from_npz(_npz(tmp_path, K_train=K, y_train=y, Ktest=Kt))


def test_precomputed_diagonal_with_test_diag(tmp_path, data):
    X, Z = data
    K = np.stack([pairwise_kernels(X, metric="polynomial", degree=2, gamma=1.0, coef0=1.0)])
    Kt = np.stack([pairwise_kernels(Z, X, metric="polynomial", degree=2, gamma=1.0, coef0=1.0)])
    dz = ((Z * Z).sum(1) + 1.0) ** 2
    pre = KernelBank.from_npz(
        _npz(tmp_path, K_train=K, y_train=np.ones(40), K_test=Kt, K_test_diag=dz[None]), normalize="diagonal"
    )
    built = KernelBank.build(X, [{"function": "poly", "degree": 2}], normalize="diagonal")
    np.testing.assert_allclose(pre.bank.K, built.K, rtol=1e-12)
    np.testing.assert_allclose(pre.K_test, built.cross(Z), rtol=1e-12)


def test_bank_kernels_are_bank_kernel_and_the_package_names_are_the_modules():
    """Expanded kernels are ``BankKernel``s; ``mklkit.kernels`` serves the names of its modules."""
    import mklkit.kernels as kernels
    from mklkit.kernels import build, description, precomputed

    specs = kernels.expand_bank([{"function": "rbf", "width": [1.0, 2.0]}], 3)
    assert [type(s) for s in specs] == [kernels.BankKernel, kernels.BankKernel]
    assert kernels.BankKernel is description.BankKernel and kernels.BankError is description.BankError
    assert kernels.KernelBank is build.KernelBank and kernels.PrecomputedKernels is precomputed.PrecomputedKernels
    assert not hasattr(kernels, "KernelSpec")
