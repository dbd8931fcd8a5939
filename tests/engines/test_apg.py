"""The apg engine and the factor bank on an array library's device (mklkit.kernels.device).

The same functions run on numpy and on array-api-strict (the array API's reference library, which
refuses anything outside the standard): what passes here is what PyTorch or CuPy run on a GPU.
The engine agrees with bcd on the same factor bank to 1e-6 and with the conic reference on the
dense bank to 1e-4, certifies its own gap, and its dual value never exceeds the reference optimum.
"""

from __future__ import annotations

import importlib.util
import math
import warnings

import numpy as np
import pytest

from mklkit.components.params import ParamError
from mklkit.engines.apg import APG
from mklkit.engines.base import UnsupportedBankError
from mklkit.engines.bcd import BCD
from mklkit.kernels import device as kdevice
from mklkit.kernels.device import DeviceFactorBank, array_library, device_bank
from mklkit.kernels.errors import BankError
from mklkit.kernels.factor import FactorBank
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

try:
    from tests.engines.test_factor_engines import COMPONENTS, PARAMS, _problem, data, reference
except ImportError:  # pragma: no cover - run from tests/
    from engines.test_factor_engines import COMPONENTS, PARAMS, _problem, data, reference

pytestmark = pytest.mark.usefixtures("one_thread")

#: numpy, the array API's strict reference library, and PyTorch (on the CPU) where it is installed
LIBS = ["numpy", "array_api_strict"] + (["torch"] if importlib.util.find_spec("torch") else [])

# (data, loss, regularizer, C, tol): smooth losses, and the smoothed hinge and epsilon-insensitive
CASES = [
    ("sonar_linear", "logistic", "l1", 0.5, 1e-8),
    ("liver_linear", "squared", "elasticnet", 1.0, 1e-8),
    ("sonar_rbf", "logistic", "l1", 0.3, 1e-8),
    ("sonar_rbf", "hinge", "l1", 0.3, 1e-4),
    ("liver_linear", "eps_insensitive", "l1", 1.0, 1e-6),
]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("name,loss,reg,C,tol", CASES, ids=["-".join(map(str, c[:4])) for c in CASES])
def test_apg_agrees_with_bcd_and_the_conic_reference(name, loss, reg, C, tol):
    fb, y = data(name)
    problem = _problem(fb, y, loss, reg, C)
    res = APG(tol=tol).solve(problem)
    assert res.converged and res.gap <= tol
    assert res.engine == "apg" and res.alpha.shape == (fb.shape[0], fb.shape[1])
    ref = reference(name, loss, reg, C, **PARAMS.get(loss, {}), **PARAMS.get(reg, {}))
    # weak duality against the reference optimum, then the objectives
    assert res.dual_objective <= ref * (1 + 1e-7) + 1e-12
    assert _rel(res.objective, ref) <= 1e-4
    exact = BCD(tol=1e-9).solve(problem)
    assert _rel(res.objective, exact.objective) <= max(1e-6, 2 * tol)
    # the result's coefficients reproduce the certified objective on the host bank
    from mklkit.engines.common import certify

    again = certify(problem, res.alpha, res.bias)
    assert _rel(again.primal, res.objective) <= 1e-9


@pytest.mark.parametrize("lib", LIBS[1:])
@pytest.mark.parametrize("name,loss,reg,C,tol", [CASES[0], CASES[4]], ids=["smooth", "smoothed"])
def test_every_array_library_follows_numpy(name, loss, reg, C, tol, lib):
    fb, y = data(name)
    problem = _problem(fb, y, loss, reg, C)
    a = APG(tol=max(tol, 1e-6)).solve(problem)
    b = APG(tol=max(tol, 1e-6), array_library=lib).solve(problem)
    assert b.converged and b.gap <= max(tol, 1e-6)
    if lib == "array_api_strict":  # numpy underneath: the same sums in the same order, step for step
        assert a.iterations == b.iterations
        assert _rel(b.objective, a.objective) <= 1e-12
        np.testing.assert_allclose(b.kernel_weights, a.kernel_weights, rtol=1e-9, atol=1e-12)
    else:  # another BLAS sums in another order: the same optimum within the certificates
        assert _rel(b.objective, a.objective) <= 2 * max(tol, 1e-6)


def _passes(res) -> int:
    return sum(int(h.get("n_passes", 0)) for h in res.history)


def test_a_warm_started_path_is_certified_at_every_C():
    fb, y = data("sonar_rbf")
    engine = APG(tol=1e-7)
    prev = None
    C_max = None
    for C in (0.3, 0.1, 0.03):
        problem = _problem(fb, y, "logistic", "l1", C)
        cold = engine.solve(problem)
        warm = engine.solve(problem, warm_start=prev) if prev is not None else cold
        assert cold.converged and warm.converged
        assert _rel(warm.objective, cold.objective) <= 1e-6
        if prev is not None:  # less work: fewer passes over the bank (a Newton step is one iteration of many passes)
            assert _passes(warm) < _passes(cold)
        C_max = warm.C_max
        prev = warm
    assert C_max is not None and C_max > 0.3


def test_above_C_max_the_zero_solution_is_returned_certified():
    fb, y = data("sonar_linear")
    probe = APG(tol=1e-8).solve(_problem(fb, y, "logistic", "l1", 0.5))
    res = APG(tol=1e-8).solve(_problem(fb, y, "logistic", "l1", 2.0 * probe.C_max))
    assert res.converged and not np.any(res.kernel_weights) and res.iterations == 0


def test_float32_passes_reach_their_stated_tolerance():
    fb, y = data("sonar_rbf")
    problem = _problem(fb, y, "logistic", "l1", 0.3)
    single = APG(tol=1e-4, precision="float32").solve(problem)
    double = APG(tol=1e-8).solve(problem)
    assert single.converged and single.gap <= 1e-4
    assert _rel(single.objective, double.objective) <= 1e-4
    with pytest.raises(ParamError, match=r"apg: tol must be >= 0.0001 with precision float32"):
        APG(tol=1e-6, precision="float32")


def test_sample_weights_are_honoured():
    fb, y = data("sonar_rbf")
    w = np.linspace(0.5, 2.0, y.size)
    problem = Problem(K=fb, y=y, loss=COMPONENTS["logistic"](), regularizer=COMPONENTS["l1"](), C=0.3, sample_weight=w)
    res = APG(tol=1e-8).solve(problem)
    exact = BCD(tol=1e-10).solve(problem)
    assert res.converged and _rel(res.objective, exact.objective) <= 1e-6


def test_an_unconverged_run_says_so():
    fb, y = data("sonar_rbf")
    with pytest.warns(ConvergenceWarning, match="apg: max_iter=5"):
        res = APG(tol=1e-12, max_iter=5, gap_every=1).solve(_problem(fb, y, "logistic", "l1", 0.3))
    assert res.status.value == "max_iter" and math.isfinite(res.gap) and res.gap > 1e-12


def test_a_dense_bank_is_refused_with_the_reason():
    fb, y = data("sonar_linear")
    with pytest.raises(UnsupportedBankError, match="engine 'apg' cannot solve this problem"):
        APG().solve(_problem(fb.to_array(), y, "logistic", "l1", 0.5))


# -- the bank on a device ---------------------------------------------------------------


def _even_bank() -> FactorBank:
    rng = np.random.default_rng(4)
    return FactorBank.from_blocks([rng.standard_normal((40, 4)) for _ in range(5)])


def _uneven_bank() -> FactorBank:
    rng = np.random.default_rng(3)
    N = 40
    blocks = [rng.standard_normal((N, r)) for r in (3, 7, 1, 5)]
    blocks[1][:, 6] = blocks[1][:, 0] + blocks[1][:, 1]  # a rank-deficient block
    return FactorBank.from_blocks(blocks)


@pytest.mark.parametrize("layout", ["even-ranks", "indicator", "block-loop"])
@pytest.mark.parametrize("lib", LIBS)
def test_the_device_bank_computes_what_the_host_bank_computes(lib, layout, monkeypatch):
    if layout == "block-loop":
        monkeypatch.setattr(kdevice, "INDICATOR_MAX", 0)
    host = _uneven_bank() if layout != "even-ranks" else _even_bank()
    bank = DeviceFactorBank.of(host, array_library("cpu", lib))
    assert bool(bank.even_rank) == (layout == "even-ranks")
    rng = np.random.default_rng(0)
    M, N, _ = host.shape
    v, beta = rng.standard_normal(N), rng.standard_normal(host.total_rank)
    alpha = rng.standard_normal((M, N))
    np.testing.assert_allclose(bank.project(v), host.project(v), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bank.expand(beta), host.expand(beta), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bank.dual_block_norms(v), host.dual_block_norms(v), rtol=1e-12)
    np.testing.assert_allclose(bank.trace(), host.trace(), rtol=1e-12)
    np.testing.assert_allclose(bank.block_norms(alpha), host.block_norms(alpha), rtol=1e-10)
    np.testing.assert_allclose(bank.coefficients(alpha), host.coefficients(alpha), rtol=1e-12, atol=1e-12)
    # the minimum-norm coefficients: L_m^T alpha_m = beta_m where beta is in the range, alpha_m in L_m's
    beta_r = host.coefficients(alpha)
    back = bank.alpha_from_beta(beta_r)
    np.testing.assert_allclose(host.coefficients(back), beta_r, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(back, host.alpha_from_beta(beta_r), rtol=1e-7, atol=1e-9)


def test_the_copy_is_made_once_per_bank_library_and_precision():
    host = _uneven_bank()
    a = device_bank(host, "cpu", "array_api_strict")
    assert device_bank(host, "cpu", "array_api_strict") is a
    assert device_bank(host, "cpu", "array_api_strict", "float32") is not a
    assert device_bank(a, "cpu", "array_api_strict") is a  # a device bank stands for its host bank


def test_a_bank_larger_than_the_free_memory_is_refused_before_allocating(monkeypatch):
    host = _uneven_bank()
    real = kdevice.array_library

    def small(device, library):
        lib = real(device, library)
        return kdevice.ArrayLibrary(
            lib.library, lib.name, lib.xp, lib.device, lambda: 1000, lib.synchronize, lib.to_host
        )

    monkeypatch.setattr(kdevice, "array_library", small)
    with pytest.raises(BankError, match=r"needs .* on cpu .* but 1000 B is free there.*float32") as err:
        device_bank(host, "cpu", "array_api_strict")
    assert err.value.key == "device"


@pytest.mark.parametrize(
    "device,library,match",
    [
        ("gpu", "auto", r"device is not a device; got 'gpu' \(allowed: 'cpu', 'cuda' or 'cuda:K'\)"),
        ("cuda", "numpy", r"device is not a device of numpy; got 'cuda'"),
        ("cpu", "jax", r"array_library is not a known array library; got 'jax'"),
    ],
)
def test_unknown_devices_and_libraries_are_refused_with_what_is_allowed(device, library, match):
    with pytest.raises(BankError, match=match):
        array_library(device, library)


def test_a_missing_gpu_library_is_named(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_gpu(name, *args):
        if name in ("torch", "cupy"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(kdevice.importlib, "import_module", no_gpu)
    with pytest.raises(BankError, match=r"device needs cupy, which is not installed; got 'cuda'"):
        array_library("cuda", "cupy")
    monkeypatch.setattr(kdevice.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BankError, match=r"device needs PyTorch or CuPy, and neither is installed; got 'cuda'"):
        array_library("cuda")


def test_the_engine_option_reaches_the_device_and_is_checked():
    fb, y = data("sonar_linear")
    with pytest.raises(ParamError, match=r"apg: device must be 'cpu', 'cuda' or 'cuda:K'; got 'tpu'"):
        APG(device="tpu")  # refused when the engine is made, before any solve
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = APG(tol=1e-8, device="cpu", array_library="array_api_strict").solve(
            _problem(fb, y, "logistic", "l1", 0.5)
        )
    assert res.converged


def _many_groups(n: int = 240, groups: int = 30, width: int = 5, seed: int = 3) -> tuple[FactorBank, np.ndarray]:
    """A factor bank of ``groups`` linear kernels on disjoint feature groups, the labels of two of them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, groups * width))
    w = np.zeros(groups * width)
    w[:width], w[width : 2 * width] = 1.0, -0.7
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    LT = np.ascontiguousarray(X.T) / math.sqrt(n)
    return FactorBank(LT, np.arange(0, groups * width + 1, width)), y


@pytest.mark.parametrize("ratio", [0.3, 0.1])
def test_working_sets_and_direct_newton_reach_the_same_optimum_for_less(ratio):
    fb, y = _many_groups()
    C = ratio * APG(tol=1e-8).solve(_problem(fb, y, "logistic", "l1", 1.0)).C_max
    problem = _problem(fb, y, "logistic", "l1", C)
    ref = BCD(tol=1e-10).solve(problem)
    runs = {
        "default": APG(tol=1e-8),
        "every block": APG(tol=1e-8, ws_start=0),
        "conjugate gradients": APG(tol=1e-8, max_hessian_flops=0.0),
        "diagonal conjugate gradients": APG(tol=1e-8, max_hessian_flops=0.0, cg_sketch=0),
    }
    res = {k: e.solve(problem) for k, e in runs.items()}
    for r in res.values():
        assert r.converged and r.gap <= 1e-8
        assert _rel(r.objective, ref.objective) <= 1e-6
        assert r.dual_objective <= ref.objective + 1e-9 * abs(ref.objective)
    assert 0 < int(np.sum(res["default"].kernel_weights > 0)) <= fb.shape[0] // 3  # sparse: the case of working sets
    assert _passes(res["default"]) < _passes(res["every block"])
    assert sum(h.get("n_hessians", 0) for h in res["default"].history) > 0
    assert sum(h.get("n_hessians", 0) for h in res["conjugate gradients"].history) == 0


@pytest.mark.parametrize("lib", LIBS[1:])
def test_the_sketched_newton_systems_run_on_every_array_library(lib):
    fb, y = _many_groups()
    C = 0.1 * APG(tol=1e-8).solve(_problem(fb, y, "logistic", "l1", 1.0)).C_max
    problem = _problem(fb, y, "logistic", "l1", C)
    a = APG(tol=1e-8, max_hessian_flops=0.0).solve(problem)
    b = APG(tol=1e-8, max_hessian_flops=0.0, array_library=lib).solve(problem)
    assert a.converged and b.converged and b.gap <= 1e-8
    assert _rel(b.objective, a.objective) <= 2e-8


def test_a_device_without_its_library_is_refused_when_the_engine_is_made(monkeypatch, tmp_path):
    import importlib.util

    from mklkit import MKLClassifier
    from mklkit.spec import load_spec

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # neither PyTorch nor CuPy
    with pytest.raises(ParamError, match=r"^apg: device needs PyTorch or CuPy, and neither is installed; got 'cuda'"):
        APG(device="cuda")
    # the estimators and specs make the engine before building any bank: the same message, at once
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ParamError, match=r"device needs PyTorch or CuPy"):
        MKLClassifier(device="cuda").fit(X, np.where(X[:, 0] > 0, 1, -1))
    path = tmp_path / "cuda.yaml"
    path.write_text(
        "data: {builtin: sonar}\nkernels: {preset: simplemkl}\nproblem: {loss: logistic, regularizer: l1, C: 0.1}\n"
        "engine: {name: apg, device: cuda}\n"
    )
    with pytest.raises(
        ValueError, match=r"engine\.device: needs PyTorch or CuPy, and neither is installed; got 'cuda'"
    ):
        load_spec(path)
