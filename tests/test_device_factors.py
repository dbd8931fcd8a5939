"""Factor banks built on a device (mklkit.kernels.factorize.on_device): Nyström with landmarks shared by
every kernel, through the array API, run here on numpy and on array-api-strict (what a GPU library runs).

With every point a landmark the factors reproduce the dense bank (KernelBank.build) and its test kernels
(KernelBank.cross) up to the eigenvalue cut; with fewer, the trace left out is what the factors report.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from mklkit.components.params import Param
from mklkit.engines.apg import APG
from mklkit.kernels.build import KernelBank
from mklkit.kernels.device import array_library
from mklkit.kernels.errors import BankError
from mklkit.kernels.factorize.on_device import nystroem_on_device, pivoted_cholesky_on_device
from mklkit.kernels.functions import KernelFunction
from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import L1
from mklkit.problem import Problem

#: numpy, the array API's strict reference library, and PyTorch (on the CPU) where it is installed
LIBS = ["numpy", "array_api_strict"] + (["torch"] if importlib.util.find_spec("torch") else [])

BANK = [
    {"function": "rbf", "width": [1.0, 3.0], "features": "all"},
    {"function": "poly", "degree": 2, "features": [0, 1]},
    {"function": "linear", "features": "each"},
]


def _points(n: int = 120, d: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def _blocks(bank) -> list[np.ndarray]:
    LT = bank.lib.host(bank.LT)
    return [LT[s:e] for s, e in zip(bank.starts[:-1], bank.starts[1:])]


def _reproduces_dense(dev, X, Xt, normalize, gram_tol, cross_tol):
    """Assert that the device factors ``dev`` of ``BANK`` on ``X`` give its dense kernels (to ``gram_tol``) and the
    test kernels of ``Xt`` through their map (to ``cross_tol``), relative to each kernel's largest entry, and the
    decision values of ``Xt`` without their factor rows; the dense kernels ``K``."""
    dense = KernelBank.build(X, BANK, normalize=normalize)
    K, Kc = dense.K, dense.cross(Xt)
    LTt = dev.factor_map.transform(Xt)
    assert dev.shape == K.shape
    if dev.lib.name == "numpy":  # laid out row by row, as the passes read it (a strided bank halves their speed)
        assert dev.LT.flags["C_CONTIGUOUS"]
    for m, Lm in enumerate(_blocks(dev)):
        scale = np.abs(K[m]).max()
        assert np.abs(Lm.T @ Lm - K[m]).max() <= gram_tol * scale
        rows = LTt[dev.starts[m] : dev.starts[m + 1]]
        assert np.abs(rows.T @ Lm - Kc[m]).max() <= cross_tol * scale
    # the decision values of new points without their factor rows
    beta = np.random.default_rng(2).standard_normal(dev.total_rank)
    z = dev.lib.host(dev.factor_map.decision_x(dev.to_x(beta), 0.25, Xt))
    np.testing.assert_allclose(z, LTt.T @ beta + 0.25, rtol=1e-10, atol=1e-10)
    return K


@pytest.mark.parametrize("normalize", ["trace", "diagonal", "none"])
@pytest.mark.parametrize("lib", LIBS)
def test_every_point_a_landmark_reproduces_the_dense_bank(lib, normalize):
    X, Xt = _points(), _points(9, seed=1)
    dev = nystroem_on_device(BANK, X, array_library("cpu", lib), landmarks=X.shape[0], normalize=normalize)
    _reproduces_dense(dev, X, Xt, normalize, 1e-5, 1e-4)


def test_fewer_landmarks_leave_out_the_trace_they_report():
    X = _points(200)
    dev = nystroem_on_device(BANK[:1], X, array_library("cpu", "numpy"), landmarks=15, seed=3)
    dense = KernelBank.build(X, BANK[:1])
    for m, Lm in enumerate(_blocks(dev)):
        left = np.trace(dense.K[m]) - np.sum(Lm * Lm)
        assert left > 1e-6  # 15 landmarks do not hold a Gaussian kernel on 200 points
        assert dev.trace_error[m] == pytest.approx(left, rel=1e-9, abs=1e-12)
        # K - L L^T is positive semidefinite (Nystrom never overshoots)
        assert np.linalg.eigvalsh(dense.K[m] - Lm.T @ Lm).min() >= -1e-10


def test_the_engine_solves_a_bank_built_on_its_device_and_predicts_through_it():
    X = _points(150)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)
    lib = array_library("cpu", "array_api_strict")
    dev = nystroem_on_device(BANK, X, lib, landmarks=60)
    problem = Problem(K=dev, y=y, loss=Logistic(), regularizer=L1(), C=0.05)
    res = APG(tol=1e-6, array_library="array_api_strict").solve(problem)
    assert res.converged and res.gap <= 1e-6
    # the training predictions from the coefficients agree with the bank's own factors
    beta = dev.coefficients(res.alpha)
    z = dev.lib.host(dev.factor_map.decision_x(dev.to_x(beta), res.bias, X))
    np.testing.assert_allclose(z, dev.expand(beta) + res.bias, rtol=1e-8, atol=1e-8)
    # a bank built on a device stays there: another device is refused, not copied
    with pytest.raises(BankError, match="device is not where this bank is"):
        APG(array_library="numpy").solve(problem)


class _NoArrayValues(KernelFunction):
    name = "plain_exp"
    description = "exp(<x, z>) written for numpy only"
    params = (Param("s", 1.0, "scale", low=0.0, low_open=True),)
    uses = "inner"

    def from_base(self, base, out):
        np.exp(base * self.s, out=out)
        return out


@pytest.mark.parametrize(
    "factorize",
    [
        lambda bank, X, lib, **kw: nystroem_on_device(bank, X, lib, landmarks=30, **kw),
        lambda bank, X, lib, **kw: pivoted_cholesky_on_device(bank, X, lib, rank=30, **kw),
    ],
    ids=["nystroem", "pivoted_cholesky"],
)
def test_a_kernel_function_without_array_values_is_refused_by_name(factorize):
    X = _points(30)
    bank = [{"function": "plain_exp", "s": 0.1, "features": "all"}]
    resolve = {"plain_exp": _NoArrayValues}
    # numpy arrays go through from_base
    dev = factorize(bank, X, array_library("cpu", "numpy"), resolve=resolve)
    assert dev.shape[0] == 1
    with pytest.raises(BankError, match="plain_exp.*gives no array_values") as err:
        factorize(bank, X, array_library("cpu", "array_api_strict"), resolve=resolve)
    assert err.value.key == "bank" and err.value.problem == "no array_values"


def test_a_factorization_larger_than_the_free_memory_is_refused(monkeypatch):
    lib = array_library("cpu", "numpy")
    small = type(lib)(lib.library, lib.name, lib.xp, lib.device, lambda: 10_000, lib.synchronize, lib.to_host)
    with pytest.raises(BankError, match=r"Nyström at 100 landmarks on cpu needs about .* but 9.8 KiB is free"):
        nystroem_on_device(BANK, _points(100), small, landmarks=100)


@pytest.mark.parametrize("lib", LIBS[1:])
def test_a_float32_bank_predicts_from_float64_coefficients(lib):
    X, Xt = _points(), _points(9, seed=1)
    single = nystroem_on_device(BANK[:1], X, array_library("cpu", lib), landmarks=60, precision="float32")
    assert single.dtype == single.xp.float32 and single.nbytes * 2 == single.total_rank * X.shape[0] * 8
    beta = np.random.default_rng(3).standard_normal(single.total_rank)
    z = single.lib.host(single.factor_map.decision_x(single.lib.asarray(beta), 0.5, Xt))  # float64 coefficients
    rows = single.factor_map.transform(Xt)  # the same map's factor rows
    np.testing.assert_allclose(z, beta @ rows + 0.5, rtol=1e-4, atol=1e-5 * np.abs(z).max())
