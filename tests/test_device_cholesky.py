"""Factor banks built on a device by greedy pivoted Cholesky (mklkit.kernels.factorize.on_device,
pivoted_cholesky_on_device), through the array API, run here on numpy and on array-api-strict (what a GPU
library runs).

To full rank the factors reproduce the dense bank (KernelBank.build) and its test kernels (KernelBank.cross);
below it they take the host's pivots (build_factor_bank, method pivoted_cholesky) and leave out the trace
they report.
"""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.components.elasticnet import L1
from mklkit.components.losses import Logistic
from mklkit.engines.apg import APG
from mklkit.kernels.build import KernelBank
from mklkit.kernels.device import array_library
from mklkit.kernels.errors import BankError
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factorize import build_factor_bank
from mklkit.kernels.factorize.on_device import DeviceFactorMap, DeviceNystroemMap, pivoted_cholesky_on_device
from mklkit.problem import Problem

try:  # the libraries, the bank, the points and the blocks of the Nyström tests
    from tests.test_device_factors import BANK, LIBS, _blocks, _points, _reproduces_dense
except ImportError:  # pragma: no cover - run from tests/
    from test_device_factors import BANK, LIBS, _blocks, _points, _reproduces_dense

GAUSS = [{"function": "rbf", "width": [1.0, 3.0], "features": "all"}]


@pytest.mark.parametrize("normalize", ["trace", "diagonal", "none"])
@pytest.mark.parametrize("lib", LIBS)
def test_to_full_rank_the_factors_reproduce_the_dense_bank(lib, normalize):
    X, Xt = _points(), _points(9, seed=1)
    dev = pivoted_cholesky_on_device(BANK, X, array_library("cpu", lib), rank=X.shape[0], normalize=normalize)
    K = _reproduces_dense(dev, X, Xt, normalize, 1e-8, 1e-8)
    assert isinstance(dev.factor_map, DeviceFactorMap)
    assert list(dev.ranks[2:]) == [6] + [1] * 6  # poly on 2 features, the linear kernels
    assert np.all(dev.trace_error <= 1e-10 * np.abs(np.trace(K, axis1=1, axis2=2)).max())


@pytest.mark.parametrize("lib", LIBS)
def test_below_full_rank_it_takes_the_hosts_pivots_and_reports_the_trace_left_out(lib):
    X = _points(200)
    dense = KernelBank.build(X, GAUSS)
    before = None
    for rank in (10, 40, 100):
        dev = pivoted_cholesky_on_device(GAUSS, X, array_library("cpu", lib), rank=rank)
        host = build_factor_bank(GAUSS, X, rank=rank, tol=0.0, method="pivoted_cholesky")
        assert list(dev.ranks) == [rank, rank]
        for m, Lm in enumerate(_blocks(dev)):
            left = np.trace(dense.K[m]) - np.sum(Lm * Lm)
            assert left > 1e-6
            assert dev.trace_error[m] == pytest.approx(left, rel=1e-9, abs=1e-12)
            # K - L L^T is positive semidefinite (Cholesky never overshoots)
            assert np.linalg.eigvalsh(dense.K[m] - Lm.T @ Lm).min() >= -1e-10
            # the same pivots, in the same order, as the host's batched greedy pivoting
            pivots = dev.lib.host(dev.factor_map.kernels[m].points)
            np.testing.assert_array_equal(pivots, host.factor_map.kernels[m].points)
        np.testing.assert_allclose(dev.trace_error, host.trace_error, rtol=1e-9, atol=1e-12)
        if before is not None:
            assert np.all(dev.trace_error < before)
        before = dev.trace_error


@pytest.mark.parametrize("normalize", ["trace", "diagonal"])
def test_tol_stops_where_the_host_stops(normalize):
    X = _points(300)
    lib = array_library("cpu", "array_api_strict")
    for tol in (1e-1, 1e-3):
        dev = pivoted_cholesky_on_device(GAUSS, X, lib, rank=300, tol=tol, normalize=normalize)
        host = build_factor_bank(GAUSS, X, tol=tol, method="pivoted_cholesky", normalize=normalize)
        trace = 1.0 if normalize == "trace" else float(X.shape[0])
        assert np.all(dev.ranks < X.shape[0]) and np.all(dev.trace_error <= tol * trace)
        np.testing.assert_array_equal(dev.ranks, np.diff(host.starts))
        np.testing.assert_allclose(dev.trace_error, host.trace_error, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("batch", [1, 7, 500])
def test_any_batch_gives_the_same_factors_to_full_rank(batch):
    X, Xt = _points(60), _points(5, seed=1)
    dev = pivoted_cholesky_on_device(GAUSS, X, array_library("cpu", "numpy"), rank=60, batch=batch)
    K, Kc = KernelBank.build(X, GAUSS).K, KernelBank.build(X, GAUSS).cross(Xt)
    LTt = dev.factor_map.transform(Xt)
    for m, Lm in enumerate(_blocks(dev)):
        assert np.abs(Lm.T @ Lm - K[m]).max() <= 1e-8 * np.abs(K[m]).max()
        assert np.abs(LTt[dev.starts[m] : dev.starts[m + 1]].T @ Lm - Kc[m]).max() <= 1e-8 * np.abs(K[m]).max()


def test_the_engine_solves_the_bank_on_its_device_as_the_same_factors_on_the_host():
    X = _points(150)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)
    dev = pivoted_cholesky_on_device(BANK, X, array_library("cpu", "array_api_strict"), rank=40)
    host = FactorBank(dev.lib.host(dev.LT), dev.starts)
    solved = [
        APG(tol=1e-8, array_library=library).solve(Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=0.05))
        for bank, library in ((dev, "array_api_strict"), (host, "numpy"))
    ]
    assert all(r.converged for r in solved)
    assert abs(solved[0].objective - solved[1].objective) <= 1e-6 * abs(solved[1].objective)
    # the training predictions through the pivots agree with the bank's own factors
    beta = dev.coefficients(solved[0].alpha)
    z = dev.lib.host(dev.factor_map.decision_x(dev.to_x(beta), solved[0].bias, X))
    np.testing.assert_allclose(z, dev.expand(beta) + solved[0].bias, rtol=1e-7, atol=1e-7)


def test_a_float32_bank_is_the_float64_one_to_single_precision():
    X, Xt = _points(), _points(9, seed=1)
    single = pivoted_cholesky_on_device(
        GAUSS, X, array_library("cpu", "array_api_strict"), rank=60, precision="float32"
    )
    double = pivoted_cholesky_on_device(GAUSS, X, array_library("cpu", "numpy"), rank=60)
    assert single.dtype == single.xp.float32 and list(single.ranks) == [60, 60]
    np.testing.assert_allclose(single.trace_error, double.trace_error, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(single.factor_map.transform(Xt), double.factor_map.transform(Xt), atol=1e-4)


def test_the_nystroem_map_is_the_factor_map():
    assert DeviceNystroemMap is DeviceFactorMap


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"normalize": "max"}, None),
        ({"rank": 0}, "rank"),
        ({"tol": 1.0}, "tol"),
        ({"batch": 0}, "batch"),
        ({"precision": "float16"}, "precision"),
    ],
)
def test_bad_settings_are_refused(kwargs, key):
    with pytest.raises(BankError) as err:
        pivoted_cholesky_on_device(GAUSS, _points(20), array_library("cpu", "numpy"), **kwargs)
    if key is not None:
        assert err.value.key == key
    else:
        assert "normalize must be one of" in str(err.value)


def test_a_factorization_larger_than_the_free_memory_is_refused():
    lib = array_library("cpu", "numpy")
    small = type(lib)(lib.library, lib.name, lib.xp, lib.device, lambda: 10_000, lib.synchronize, lib.to_host)
    with pytest.raises(
        BankError, match=r"pivoted Cholesky to rank 100 on cpu needs about .* but 9.8 KiB is free"
    ) as err:
        pivoted_cholesky_on_device(BANK, _points(100), small, rank=100)
    assert err.value.key == "rank" and err.value.problem == "not enough free memory" and err.value.value == 100
