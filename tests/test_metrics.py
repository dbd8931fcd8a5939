"""mklkit.metrics against direct numpy formulas, factor banks against their dense kernels, and the
radius and margin programs against cvxpy + Clarabel."""

from __future__ import annotations

import doctest
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit import CompilationWarning, ConvergenceWarning, ParamError
from mklkit import metrics
from mklkit.metrics import _inputs
from mklkit.data import load_builtin
from mklkit.kernels import KernelBank
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.ops import ArrayBank

cp = pytest.importorskip("cvxpy")


def rel(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def random_factors(rng, n=40, ranks=(3, 5, 8)):
    """Factors L_m (N, r_m) of three PSD kernels of various ranks, offset so that centring matters."""
    return [rng.normal(size=(n, r)) + rng.normal(size=r) for r in ranks]


def dense_of(Ls):
    return np.stack([L @ L.T for L in Ls])


def centre(K):
    n = K.shape[-1]
    H = np.eye(n) - np.ones((n, n)) / n
    return H @ K @ H


def cosine(A, B):
    return float(np.sum(A * B) / np.sqrt(np.sum(A * A) * np.sum(B * B)))


@pytest.fixture(scope="module")
def iono():
    """Three Gaussian kernels and a linear one on 90 ionosphere rows, with their labels."""
    ds = load_builtin("ionosphere")
    rows = np.random.default_rng(1).choice(ds.X.shape[0], 90, replace=False)
    X, y = ds.X[rows][:, 2:], ds.y[rows]  # the first two columns are an indicator and a constant
    X = (X - X.mean(0)) / X.std(0)
    bank = [{"function": "rbf", "width": [2.0, 6.0, 20.0]}, {"function": "linear"}]
    return KernelBank.build(X, bank), X, y


# --------------------------------------------------------------------------- alignment


def test_alignment_of_one_matrix_and_of_a_stack_against_numpy():
    rng = np.random.default_rng(0)
    K = dense_of(random_factors(rng))
    for a in range(3):
        for b in range(3):
            assert metrics.alignment(K[a], K[b]) == pytest.approx(cosine(K[a], K[b]), rel=1e-12)
            want = cosine(centre(K[a]), centre(K[b]))
            assert metrics.centered_alignment(K[a], K[b]) == pytest.approx(want, rel=1e-12)
    assert isinstance(metrics.alignment(K[0], K[1]), float)
    one = metrics.alignment(K, K[1])
    assert one.shape == (3,) and rel(one, [cosine(K[m], K[1]) for m in range(3)]) <= 1e-12
    pair = metrics.centered_alignment(K, K[::-1])
    assert rel(pair, [cosine(centre(K[m]), centre(K[2 - m])) for m in range(3)]) <= 1e-12


def test_kernel_target_alignment_binary_and_multiclass_targets():
    rng = np.random.default_rng(2)
    K = dense_of(random_factors(rng, n=30))
    y2 = np.array(["a", "b"] * 15)
    s = np.where(y2 == "a", -1.0, 1.0)
    T2 = np.outer(s, s)
    assert np.array_equal(metrics.target_kernel(y2), T2)
    assert rel(metrics.alignment(K, y=y2), [cosine(K[m], T2) for m in range(3)]) <= 1e-12
    assert rel(metrics.centered_alignment(K, y=y2), [cosine(centre(K[m]), centre(T2)) for m in range(3)]) <= 1e-12
    y3 = np.arange(30) % 3
    T3 = (y3[:, None] == y3[None, :]).astype(float)
    assert np.array_equal(metrics.target_kernel(y3), T3)
    assert rel(metrics.alignment(K, y=y3), [cosine(K[m], T3) for m in range(3)]) <= 1e-12
    assert rel(metrics.centered_alignment(K, y=y3), [cosine(centre(K[m]), centre(T3)) for m in range(3)]) <= 1e-12
    # two classes: the centred alignment is the same for the +-1 and the indicator targets
    onehot = np.stack([s < 0, s > 0], axis=1).astype(float)
    assert rel(metrics.centered_alignment(K, y=onehot), metrics.centered_alignment(K, y=y2)) <= 1e-12
    # real targets (N, c) are taken as they are
    t = rng.normal(size=(30, 1))
    assert metrics.alignment(K[0], y=t) == pytest.approx(cosine(K[0], t @ t.T), rel=1e-12)


def test_alignment_invariances():
    rng = np.random.default_rng(3)
    K = dense_of(random_factors(rng))
    assert rel(metrics.alignment(K, 7.5 * K), np.ones(3)) <= 1e-14
    assert rel(metrics.centered_alignment(K, 0.1 * K), np.ones(3)) <= 1e-14
    shifted = K + 4.0  # a constant added to every entry: the same centred kernel
    assert rel(metrics.centered_alignment(shifted, K[0]), metrics.centered_alignment(K, K[0])) <= 1e-12
    assert (
        rel(
            metrics.centered_alignment(shifted, y=np.arange(40) % 2), metrics.centered_alignment(K, y=np.arange(40) % 2)
        )
        <= 1e-12
    )
    assert abs(metrics.alignment(shifted[1], K[1]) - metrics.alignment(K[1], K[1])) > 1e-3  # uncentred: it changes


@pytest.mark.parametrize("centered", [True, False])
def test_alignment_matrix_dense_chunks_and_factors(centered, monkeypatch):
    rng = np.random.default_rng(4)
    Ls = random_factors(rng, ranks=(2, 4, 6, 9))
    K = dense_of(Ls)
    f = centre if centered else (lambda A: A)
    want = np.array([[cosine(f(A), f(B)) for B in K] for A in K])
    got = metrics.alignment_matrix(K, centered=centered)
    assert got.shape == (4, 4) and rel(got, want) <= 1e-12
    assert np.array_equal(got, got.T)
    assert rel(metrics.alignment_matrix(FactorBank.from_blocks(Ls), centered=centered), want) <= 1e-10
    monkeypatch.setattr(_inputs, "CHUNK_BYTES", 2 * 8 * 40 * 40)  # two kernels per chunk
    assert rel(metrics.alignment_matrix(K, centered=centered), want) <= 1e-12
    assert rel(metrics.centered_alignment(K, K[2]), [cosine(centre(A), centre(K[2])) for A in K]) <= 1e-12


def test_frobenius_products_and_the_unnormalised_matrix(iono):
    kb, X, y = iono
    K = kb.K
    T = np.outer(y, y)
    assert rel(metrics.frobenius_products(K, y=y), [np.sum(A * T) for A in K]) <= 1e-12
    assert rel(metrics.frobenius_products(kb, y=y, centered=True), [np.sum(centre(A) * centre(T)) for A in K]) <= 1e-12
    assert metrics.frobenius_products(K[0], K[1]) == pytest.approx(np.sum(K[0] * K[1]), rel=1e-12)
    raw = metrics.alignment_matrix(kb, normalized=False)
    assert rel(raw, [[np.sum(centre(A) * centre(B)) for B in K] for A in K]) <= 1e-12
    assert (
        rel(metrics.alignment_matrix(kb, centered=False, normalized=False), [[np.sum(A * B) for B in K] for A in K])
        <= 1e-12
    )
    fb = FactorBank.from_blocks([np.linalg.cholesky(A + 1e-12 * np.eye(len(y))) for A in K[:2]])
    assert (
        rel(
            metrics.frobenius_products(fb, y=y, centered=True),
            metrics.frobenius_products(fb.to_array(), y=y, centered=True),
        )
        <= 1e-10
    )


def test_banks_on_real_data(iono):
    kb, X, y = iono
    K = kb.K
    assert rel(metrics.centered_alignment(kb, y=y), [cosine(centre(A), centre(np.outer(y, y))) for A in K]) <= 1e-12
    assert rel(metrics.alignment(ArrayBank(K), y=y), metrics.alignment(K, y=y)) == 0.0
    assert rel(metrics.alignment_matrix(kb), metrics.alignment_matrix(K)) == 0.0
    # the widest Gaussian aligns worst with the labels before centring removes its constant part
    ca = metrics.centered_alignment(kb, y=y)
    assert np.all((ca > 0) & (ca < 1))


# --------------------------------------------------------------------------- factor banks


def _all_metrics(K, y):
    return {
        "alignment": metrics.alignment(K, y=y),
        "centered": metrics.centered_alignment(K, y=y),
        "pair": metrics.centered_alignment(K, K),
        "matrix": metrics.alignment_matrix(K),
        "raw_matrix": metrics.alignment_matrix(K, centered=False),
        "spectral": metrics.spectral_ratio(K),
        "radius": metrics.radius(K, tol=1e-12),
        "margin": metrics.margin(K, y, tol=1e-12),
        "ratio": metrics.ratio(K, y, tol=1e-12),
    }


def test_factor_bank_metrics_equal_the_dense_ones():
    rng = np.random.default_rng(5)
    Ls = random_factors(rng, n=50, ranks=(2, 5, 12, 30))
    y = np.where(Ls[0][:, 0] > np.median(Ls[0][:, 0]), 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # low-rank kernels may not separate: ratio inf
        dense = _all_metrics(dense_of(Ls), y)
        factor = _all_metrics(FactorBank.from_blocks(Ls), y)
    assert np.isinf(dense["ratio"]).any() and np.array_equal(np.isinf(factor["ratio"]), np.isinf(dense["ratio"]))
    finite = np.isfinite(dense["ratio"])
    dense["ratio"], factor["ratio"] = dense["ratio"][finite], factor["ratio"][finite]
    for key in dense:
        assert rel(factor[key], dense[key]) <= 1e-10, key
    # mixed: a factor bank against a dense kernel, a dense bank against factors
    fb = FactorBank.from_blocks(Ls)
    K = dense_of(Ls)
    assert rel(metrics.centered_alignment(fb, K[1]), metrics.centered_alignment(K, K[1])) <= 1e-10
    assert rel(metrics.alignment(K, fb), metrics.alignment(K, K)) <= 1e-10


def test_sparse_factor_bank_metrics_equal_the_dense_ones():
    rng = np.random.default_rng(6)
    blocks = [sp.random(60, r, density=0.3, random_state=k, format="csr") + 0.0 for k, r in enumerate((4, 7, 10))]
    fb = FactorBank.from_blocks(blocks)
    assert fb.sparse
    K = fb.to_array()
    y = rng.integers(0, 3, size=60)
    assert rel(metrics.centered_alignment(fb, y=y), metrics.centered_alignment(K, y=y)) <= 1e-10
    assert rel(metrics.alignment_matrix(fb), metrics.alignment_matrix(K)) <= 1e-10
    assert rel(metrics.alignment_matrix(fb, centered=False), metrics.alignment_matrix(K, centered=False)) <= 1e-10
    assert rel(metrics.centered_alignment(fb, fb), np.ones(3)) <= 1e-12
    assert rel(metrics.spectral_ratio(fb), metrics.spectral_ratio(K)) <= 1e-10
    assert rel(metrics.radius(fb), metrics.radius(K)) <= 1e-7


def test_factor_programs_with_a_column_cache_smaller_than_the_kernel(monkeypatch):
    rng = np.random.default_rng(13)
    Ls = random_factors(rng, n=60, ranks=(7, 60))
    y = np.where(rng.random(60) < 0.5, 1, -1)
    K = dense_of(Ls)
    fb = FactorBank.from_blocks(Ls)
    monkeypatch.setattr(_inputs, "CHUNK_BYTES", 8 * 60 * 5)  # five cached columns of the 60
    r, rs = metrics.radius(fb, tol=1e-12, return_solution=True)
    assert rel(r, metrics.radius(K, tol=1e-12)) <= 1e-10 and all(s.status == "converged" for s in rs)
    assert rel(metrics.margin(fb, y, tol=1e-12), metrics.margin(K, y, tol=1e-12)) <= 1e-10


# --------------------------------------------------------------------------- spectral ratio


def test_spectral_ratio_against_the_singular_values():
    rng = np.random.default_rng(7)
    K = dense_of(random_factors(rng, n=30, ranks=(1, 4, 30)))
    sv = [np.linalg.svd(A, compute_uv=False) for A in K]
    want = np.array([s.sum() / np.sqrt((s * s).sum()) for s in sv])
    assert rel(metrics.spectral_ratio(K), want) <= 1e-12
    assert metrics.spectral_ratio(K[0]) == pytest.approx(1.0, rel=1e-12)  # rank one
    assert rel(metrics.spectral_ratio(K, normalized=True), (want - 1) / (np.sqrt(30) - 1)) <= 1e-12
    assert metrics.spectral_ratio(np.eye(30), normalized=True) == pytest.approx(1.0, rel=1e-14)


# --------------------------------------------------------------------------- radius and margin


def clarabel_radius2(K):
    n = K.shape[0]
    b = cp.Variable(n)
    prob = cp.Problem(cp.Maximize(np.diag(K) @ b - cp.quad_form(b, cp.psd_wrap(K))), [b >= 0, cp.sum(b) == 1])
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


def clarabel_margin2(K, y, tight=True):
    """min ||L^T (y * g)||^2 with a factor of K (eigenvalues clipped at 0), one simplex per class."""
    w, V = np.linalg.eigh(K)
    L = V * np.sqrt(np.clip(w, 0, None))
    g = cp.Variable(K.shape[0])
    pos, neg = y > 0, y < 0
    cons = [g >= 0, cp.sum(g[pos]) == 1, cp.sum(g[neg]) == 1]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(L.T @ cp.multiply(y, g))), cons)
    tols = dict(tol_gap_abs=1e-14, tol_gap_rel=1e-12, tol_feas=1e-12) if tight else {}
    prob.solve(solver=cp.CLARABEL, **tols)
    return prob.value


def test_radius_and_margin_against_clarabel_on_real_data(iono):
    kb, X, y = iono
    r, rsol = metrics.radius(kb, return_solution=True)
    m, msol = metrics.margin(kb, y, return_solution=True)
    for k in range(3):  # the Gaussian kernels separate the classes
        assert r[k] ** 2 == pytest.approx(clarabel_radius2(kb.K[k]), rel=1e-6)
        assert m[k] ** 2 == pytest.approx(clarabel_margin2(kb.K[k], y), rel=1e-6)
        assert m[k] > 0 and rsol[k].status == "converged" and msol[k].status == "converged"
        assert rsol[k].gap <= 1e-8 * rsol[k].squared and msol[k].gap <= 1e-8 * msol[k].squared
        beta = rsol[k].coef
        assert beta.min() >= 0 and beta.sum() == pytest.approx(1.0, abs=1e-12)
        # the centre is within R of every point, and R is attained: max_i ||phi_i - c||^2 = R^2
        Kk = kb.K[k]
        d2 = np.diag(Kk) - 2 * Kk @ beta + beta @ Kk @ beta
        assert d2.max() == pytest.approx(r[k] ** 2, rel=1e-6)
        g = msol[k].coef
        assert g[y > 0].sum() == pytest.approx(1.0) and g[y < 0].sum() == pytest.approx(1.0)
    ratio = metrics.ratio(kb.K[:3], y)
    assert rel(ratio, r[:3] ** 2 / (len(y) * m[:3] ** 2)) <= 1e-12


def test_radius_against_clarabel_on_random_kernels():
    rng = np.random.default_rng(8)
    for L in random_factors(rng, n=35, ranks=(2, 6, 35)):
        K = L @ L.T
        assert metrics.radius(K) ** 2 == pytest.approx(clarabel_radius2(K), rel=1e-6)
    # one point repeated: a ball of radius 0
    assert metrics.radius(np.full((5, 5), 2.0)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_margin_of_non_separable_classes_is_zero():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 3))
    y = np.where(rng.random(60) < 0.5, 1, -1)  # labels independent of the points: the hulls overlap
    K = X @ X.T
    assert clarabel_margin2(K, y, tight=False) <= 1e-7
    value, (sol,) = metrics.margin(K[None], y, return_solution=True)
    assert value[0] == 0.0 and sol.status == "converged"
    with pytest.warns(RuntimeWarning, match="cannot be separated"):
        assert metrics.ratio(K, y) == np.inf
    # the same data separated by a margin: the linear kernel on points moved apart along one axis
    Xs = X + 3.0 * y[:, None] * np.array([1.0, 0.0, 0.0])
    Ks = Xs @ Xs.T
    assert metrics.margin(Ks, y) ** 2 == pytest.approx(clarabel_margin2(Ks, y), rel=1e-6)


def test_margin_with_one_point_per_class_is_their_distance():
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    assert metrics.margin(K, [0, 1]) == pytest.approx(np.sqrt(2.0 + 1.0 - 1.0), rel=1e-14)


def test_unconverged_programs_warn():
    rng = np.random.default_rng(10)
    K = dense_of(random_factors(rng, n=80, ranks=(80,)))[0]
    with pytest.warns(ConvergenceWarning, match="max_iter") as record:
        value, (sol,) = metrics.radius(K[None], max_iter=1, return_solution=True)
    assert record[0].filename == __file__  # the warning points at the caller
    assert sol.status == "max_iter" and sol.n_iter == 1 and sol.gap > 1e-8 * sol.squared
    assert value[0] ** 2 <= clarabel_radius2(K) <= sol.squared + sol.gap + 1e-9  # certified bounds


# --------------------------------------------------------------------------- the combined kernel


def test_combine_dense_and_factor():
    rng = np.random.default_rng(11)
    Ls = random_factors(rng)
    K = dense_of(Ls)
    d = np.array([0.5, 0.0, 0.5])
    dense = metrics.combine(K, d)
    assert rel(dense, 0.5 * K[0] + 0.5 * K[2]) <= 1e-14
    fb = metrics.combine(FactorBank.from_blocks(Ls), d)
    assert isinstance(fb, FactorBank) and fb.n_kernels == 1 and fb.total_rank == 3 + 8
    assert rel(fb.to_array()[0], dense) <= 1e-12
    y = np.arange(40) % 2
    assert rel(metrics.centered_alignment(fb, y=y), [metrics.centered_alignment(dense, y=y)]) <= 1e-10


# --------------------------------------------------------------------------- input errors


def test_input_errors_name_the_argument_and_what_is_allowed():
    rng = np.random.default_rng(12)
    K = dense_of(random_factors(rng, n=10))
    with pytest.raises(ParamError) as e:
        metrics.alignment(np.ones((3, 4)), K[0])
    assert e.value.key == "K1.shape" and e.value.value == (3, 4) and "(N, N)" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.alignment(K, np.eye(7))
    assert e.value.key == "K2" and "N = 10" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.alignment(K, K[:2])
    assert e.value.key == "K2" and "M = 3" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.alignment(K, K[0], y=np.arange(10) % 2)
    assert e.value.key == "K2" and "exactly one" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.centered_alignment(K, y=np.arange(9) % 2)
    assert e.value.key == "y.shape" and e.value.value == (9,)
    with pytest.raises(ParamError) as e:
        metrics.centered_alignment(K, y=np.zeros(10))
    assert e.value.key == "y" and "two classes" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.alignment(K, y=np.linspace(0.0, 1.0, 10))  # a real target given as labels
    assert e.value.key == "y" and "y[:, None]" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.margin(K, np.ones(10))
    assert e.value.key == "y" and "two classes" in e.value.allowed and "1 class" in str(e.value.value)
    with pytest.raises(ParamError) as e:
        metrics.margin(K, np.arange(10) % 3)
    assert e.value.key == "y" and "3 classes" in str(e.value.value)
    with pytest.raises(ParamError) as e:
        metrics.ratio(K, np.arange(11) % 2)
    assert e.value.key == "y.shape"
    bad = K[0].copy()
    bad[0, 1] += 1.0
    with pytest.raises(ParamError) as e:
        metrics.radius(bad)
    assert e.value.key == "K" and "symmetric" in e.value.allowed
    nan = K.copy()
    nan[1, 2, 2] = np.nan
    with pytest.raises(ParamError) as e:
        metrics.spectral_ratio(nan)
    assert e.value.key == "K" and "finite" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.alignment(np.zeros((4, 4)), np.eye(4))
    assert e.value.key == "K1" and "non-zero" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.radius(K, tol=0.0)
    assert e.value.key == "tol" and e.value.value == 0.0
    with pytest.raises(ParamError) as e:
        metrics.combine(K, np.ones((2, 3)))
    assert e.value.key == "weights.shape" and e.value.value == (2, 3)
    with pytest.raises(ParamError) as e:
        metrics.combine(K, [0.5, -0.1, 0.6])
    assert e.value.key == "weights" and ">= 0" in e.value.allowed
    with pytest.raises(ParamError) as e:
        metrics.radius("kernels.npz")
    assert e.value.key == "K" and "FactorBank" in e.value.allowed


def test_a_bank_without_gram_matrices_is_refused_with_the_way_to_build_one(iono):
    kb, X, y = iono
    stripped = KernelBank.for_cross(X, kb.specs, "trace", kb.traces)  # what a fitted estimator keeps as bank_
    with pytest.raises(ParamError) as e:
        metrics.centered_alignment(stripped, y=y)
    assert e.value.key == "K1" and "KernelBank.build" in e.value.allowed


def test_the_examples_of_docs_metrics_run(one_thread):
    doc = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an example that warns is a broken example
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=CompilationWarning)
        failures, tried = doctest.testfile(
            str(doc), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
    assert tried >= 15 and failures == 0, f"{failures} of {tried} examples in {doc} failed"
