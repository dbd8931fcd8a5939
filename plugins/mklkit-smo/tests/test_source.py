"""FeatureKernels: kernel rows on the fly equal the precomputed bank."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.data import load_builtin
from mklkit.components.params import Param
from mklkit.kernels import BankKernel, KernelBank, KernelFunction
from mklkit_smo import FeatureKernels

BANK = [
    {"function": "rbf", "width": [0.5, 2.0], "features": "all"},
    {"function": "rbf", "width": 1.0, "features": "each"},
    {"function": "poly", "degree": [1, 3], "offset": [0.0, 1.0], "scale": 0.5, "features": [[0, 2], [1, 3, 4]]},
    {"function": "linear", "features": "all"},
]


@pytest.fixture(scope="module")
def wbc():
    ds = load_builtin("wbc")
    X = ds.X[:60]
    return (X - X.mean(0)) / X.std(0), ds.X[60:75]


@pytest.mark.parametrize("normalize", ["trace", "diagonal", "none"])
def test_rows_equal_the_bank(wbc, normalize: str) -> None:
    X, _ = wbc
    bank = KernelBank.build(X, BANK, normalize=normalize)
    src = FeatureKernels(X, BANK, normalize=normalize)
    assert src.n_kernels == bank.n_kernels and src.names == bank.names
    G = src.gram()
    np.testing.assert_allclose(G, bank.K, rtol=1e-12, atol=1e-14 * np.abs(bank.K).max())
    np.testing.assert_allclose(src.diag(), np.diagonal(bank.K, axis1=1, axis2=2), rtol=1e-12)


def test_sparse_features_give_the_same_rows(wbc) -> None:
    X, _ = wbc
    Xs = np.where(np.abs(X) < 0.5, 0.0, X)  # many exact zeros
    dense = FeatureKernels(Xs, BANK)
    sparse = FeatureKernels(sp.csr_matrix(Xs), BANK)
    np.testing.assert_allclose(sparse.rows([0, 5, 59]), dense.rows([0, 5, 59]), rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(sparse.rows([3], parallel=True), dense.rows([3]), rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("normalize", ["trace", "diagonal"])
def test_predictions_on_new_points_use_the_training_normalisation(wbc, normalize: str) -> None:
    X, Xnew_raw = wbc
    Xnew = (Xnew_raw - 3.0) / 3.0
    bank = KernelBank.build(X, BANK, normalize=normalize)
    src = FeatureKernels(X, BANK, normalize=normalize)
    coef = np.random.default_rng(0).normal(size=(bank.n_kernels, X.shape[0]))
    Kx = bank.cross(Xnew)
    expect = np.einsum("mij,mj->i", Kx, coef)
    np.testing.assert_allclose(
        src.cross_apply(Xnew, coef, block=4), expect, rtol=1e-10, atol=1e-12 * np.abs(expect).max()
    )


def test_unsupported_kernel_functions_are_refused(wbc) -> None:
    class Laplace(KernelFunction):
        name = "laplace_test"
        description = "exp(-|x - z|_1)"
        params = (Param("width", 1.0, "width", low=0.0, low_open=True),)

        def gram(self, X, Z=None):
            Z = X if Z is None else Z
            return np.exp(-np.abs(X[:, None, :] - Z[None, :, :]).sum(-1) / self.width)

    X, _ = wbc
    with pytest.raises(ValueError, match=r"'laplace_test' cannot be computed on the fly; supported: rbf, poly, linear"):
        FeatureKernels(X, [BankKernel(Laplace(), (0, 1), "laplace", 0)])
    with pytest.raises(ValueError, match="NaN"):
        FeatureKernels(np.array([[np.nan, 1.0]]), "linear")
    with pytest.raises(ValueError, match="normalize must be one of"):
        FeatureKernels(X, BANK, normalize="unit")
