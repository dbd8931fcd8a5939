"""Two-stage methods: the weightings against independent computations (Clarabel's QPs, direct formulas,
scikit-learn), the second stage on the scaled bank, the estimators and specs with a weighting."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.kernels.factor import FactorBank
from mklkit.kernels.ops import ArrayBank
from mklkit.weighting import (
    PWMK,
    AlignF,
    Average,
    EasyMKL,
    FHeuristic,
    alignf_qp,
    centered_products,
    easymkl_margin,
    nonnegative_qp,
)

cp = pytest.importorskip("cvxpy")


def _banks(N: int = 50, M: int = 6, seed: int = 0) -> tuple[ArrayBank, FactorBank, np.ndarray]:
    """A bank of polynomial-feature kernels on nested column sets (exact factors) and ±1 labels."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 4))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(N) > 0, 1.0, -1.0)
    blocks = []
    for m in range(M):
        Z = X[:, : (m % 4) + 1] * (m + 1)
        blocks.append(np.hstack([Z, Z**2]))
    fb = FactorBank.from_blocks(blocks)
    return ArrayBank(fb.to_array()), fb, y


def _centered(K: np.ndarray) -> np.ndarray:
    N = K.shape[-1]
    H = np.eye(N) - 1.0 / N
    return np.array([H @ k @ H for k in K])


def test_centered_products_match_the_definition_on_gram_and_factor_banks():
    ab, fb, _ = _banks()
    Kc = _centered(ab.as_array())
    ref = np.einsum("kij,lij->kl", Kc, Kc)
    np.testing.assert_allclose(centered_products(ab), ref, rtol=1e-12, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(centered_products(fb), ref, rtol=1e-12, atol=1e-9 * np.abs(ref).max())


def _clarabel_alignf(Mm: np.ndarray, a: np.ndarray) -> np.ndarray:
    v = cp.Variable(a.size)
    cp.Problem(cp.Minimize(cp.quad_form(v, cp.psd_wrap(Mm)) - 2 * a @ v), [v >= 0]).solve(
        solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    return v.value


def test_alignf_is_clarabels_qp_with_nonnegative_weights_where_the_unconstrained_one_is_negative():
    ab, fb, y = _banks()
    sol, Mm, a = alignf_qp(ab, y)
    assert np.any(np.linalg.solve(Mm, a) < 0.0)  # MKLpy's CKA would return these negative weights
    ref = _clarabel_alignf(Mm, a)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * scale)
    assert sol.converged and sol.gap <= 1e-9 and np.all(sol.x >= 0.0)
    eta = AlignF().weights(ab, y)
    np.testing.assert_allclose(eta, sol.x / np.linalg.norm(sol.x), atol=1e-12)
    np.testing.assert_allclose(AlignF().weights(fb, y), eta, atol=1e-9)


def test_alignf_with_several_positive_weights_and_a_real_target():
    rng = np.random.default_rng(3)
    N = 40
    X = rng.standard_normal((N, 3))
    t = X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.standard_normal(N)
    K = np.array([np.outer(X[:, j], X[:, j]) for j in range(3)] + [np.outer(X[:, 1] ** 2, X[:, 1] ** 2)])
    sol, Mm, a = alignf_qp(ArrayBank(K), t)
    ref = _clarabel_alignf(Mm, a)
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * np.abs(ref).max())
    assert np.count_nonzero(sol.x > 1e-8 * sol.x.max()) >= 2


def test_nonnegative_qp_kkt_on_a_random_problem():
    rng = np.random.default_rng(1)
    B = rng.standard_normal((8, 5))
    Mm = B.T @ B
    a = Mm @ rng.standard_normal(5)
    sol = nonnegative_qp(Mm, a)
    ref = _clarabel_alignf(Mm, a)
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * max(1.0, np.abs(ref).max()))
    g = Mm @ sol.x - a
    assert np.all(g >= -1e-9 * np.abs(a).max()) and np.all(np.abs(g[sol.x > 0]) <= 1e-9 * np.abs(a).max())


@pytest.mark.parametrize("lam", [0.1, 0.5])
def test_easymkl_gamma_is_clarabels_and_eta_follows_from_gamma(lam):
    ab, fb, y = _banks()
    sol, s = easymkl_margin(ab, y, lam, tol=1e-12)
    K = ab.as_array()
    N = y.size
    np.testing.assert_allclose(s, N / np.einsum("mii->m", K))
    Kbar = np.einsum("m,mij->ij", s, K)
    Q = (1 - lam) * np.outer(y, y) * Kbar + lam * np.eye(N)
    g = cp.Variable(N)
    pos = y > 0
    cons = [g >= 0, cp.sum(g[pos]) == 1, cp.sum(g[~pos]) == 1]
    cp.Problem(cp.Minimize(cp.quad_form(g, cp.psd_wrap(Q))), cons).solve(
        solver="CLARABEL", tol_gap_abs=1e-13, tol_gap_rel=1e-13, tol_feas=1e-13
    )
    np.testing.assert_allclose(sol.x, g.value, atol=1e-6)
    assert sol.converged and sol.objective <= float(g.value @ Q @ g.value) + 1e-9
    # eta directly from gamma: eta_hat_m = gamma'Y K_hat_m Y gamma / sum, eta_m ∝ eta_hat_m N / tr(K_m)
    yg = y * sol.x
    hat = np.array([yg @ (s[m] * K[m]) @ yg for m in range(K.shape[0])])
    hat /= hat.sum()
    want = hat * s / np.sum(hat * s)
    eta = EasyMKL(lam=lam, tol=1e-12).weights(ab, y)
    np.testing.assert_allclose(eta, want, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(EasyMKL(lam=lam, tol=1e-12).weights(fb, y), eta, rtol=1e-6, atol=1e-9)


def test_fheuristic_is_each_kernels_alignment_normalised():
    ab, fb, y = _banks()
    K = ab.as_array()
    A = np.array([np.sum(k * np.outer(y, y)) / np.sqrt(np.sum(k * k) * np.sum(np.outer(y, y) ** 2)) for k in K])
    want = A / A.sum()
    np.testing.assert_allclose(FHeuristic().weights(ab, y), want, rtol=1e-10)
    np.testing.assert_allclose(FHeuristic().weights(fb, y), want, rtol=1e-10)


@pytest.mark.parametrize("delta", [0.0, 0.5, 1.0])
def test_pwmk_is_each_kernels_cv_accuracy_less_delta_times_the_lowest(delta):
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    ab, fb, y = _banks(N=60)
    K = ab.as_array()
    acc = []
    for k in K:
        scores = []
        for tr, te in StratifiedKFold(n_splits=3).split(np.zeros(y.size), y):
            svc = SVC(kernel="precomputed", C=10.0).fit(k[np.ix_(tr, tr)], y[tr])
            scores.append(np.mean(svc.predict(k[np.ix_(te, tr)]) == y[te]))
        acc.append(np.mean(scores))
    acc = np.array(acc)
    w = acc - delta * acc.min()
    want = w / w.sum() if w.sum() > 0 else np.full(acc.size, 1.0 / acc.size)
    np.testing.assert_allclose(PWMK(delta=delta, C=10.0).weights(ab, y), want, rtol=1e-12)
    np.testing.assert_allclose(PWMK(delta=delta, C=10.0).weights(fb, y), want, rtol=1e-12)


def test_average_is_one_over_m():
    ab, fb, y = _banks(M=5)
    np.testing.assert_array_equal(Average().weights(ab, y), np.full(5, 0.2))
    np.testing.assert_array_equal(Average().weights(fb, y), np.full(5, 0.2))
