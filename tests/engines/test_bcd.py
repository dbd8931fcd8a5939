"""The primal block-coordinate-descent engine on factor banks.

Against cvxpy + Clarabel (``tests/conic_reference.py``) and SpicyMKL on the
same factor bank, on small real data: the eigen-factors of the RBF and
polynomial banks of ``shared.bank`` (exact up to eigenvalues below
:math:`10^{-10}` of the largest) and linear kernels on feature groups.  The
primal and the dual objective of every result are evaluated again here, in
plain numpy and independently of mklkit's component code, from the returned
``alpha``, ``bias`` and dual point.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.params import ParamError
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.declaration import declaration_problems
from mklkit.engines import common
from mklkit.engines.base import UnsupportedBankError
from mklkit.engines.bcd import BCD
from mklkit.engines.spicy import Spicy
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factor_arrays import alpha_from_beta
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.conic_reference import factor_bank
    from tests.engines.pinball import Pinball
    from tests.engines.shared import assert_incumbents, liver, reference, solve_stopped, sonar, sonar_points
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import factor_bank
    from engines.pinball import Pinball
    from engines.shared import assert_incumbents, liver, reference, solve_stopped, sonar, sonar_points

TOL = 1e-8  # engine tolerance on the relative duality gap
REL_CONIC = 1e-4  # objective agreement with the conic reference
REL_SPICY = 1e-6  # objective agreement with spicy on the same factor bank


# ---------------------------------------------------------------------------
# factor banks
# ---------------------------------------------------------------------------
def eigen_factors(K: np.ndarray) -> FactorBank:
    """Exact factors of every Gram matrix: its eigenvectors times the square roots of the
    eigenvalues above 1e-10 of the largest."""
    return FactorBank.from_blocks([L for L, _ in factor_bank(K, 1e-10)])


@functools.lru_cache(maxsize=None)
def eigen_data(data: str) -> tuple[FactorBank, np.ndarray, np.ndarray]:
    """The factor bank of ``shared.sonar()`` or ``shared.liver()``, its dense bank, the labels."""
    K, y = {"sonar": sonar, "liver": liver}[data]()
    bank = eigen_factors(K)
    return bank, bank.to_array(), y


def group_bank(X: np.ndarray, n_groups: int, sparse: bool = False) -> FactorBank:
    """Linear kernels on ``n_groups`` groups of consecutive features (the group lasso)."""
    groups = np.array_split(np.arange(X.shape[1]), n_groups)
    blocks = [X[:, g] for g in groups]
    if sparse:
        blocks = [sp.csr_matrix(b) for b in blocks]
    return FactorBank.from_blocks(blocks)


# ---------------------------------------------------------------------------
# independent objectives (plain numpy, the formulas of docs/contracts.md)
# ---------------------------------------------------------------------------
def loss_values(name: str, y: np.ndarray, z: np.ndarray, p: dict) -> np.ndarray:
    if name == "logistic":
        return np.logaddexp(0.0, -y * z)
    if name == "squared":
        return (y - z) ** 2
    if name == "hinge":
        return np.maximum(0.0, 1 - y * z)
    if name == "eps_insensitive":
        return np.maximum(0.0, np.abs(y - z) - p["eps"])
    if name == "pinball":
        return np.maximum(p["tau"] * (y - z), (p["tau"] - 1) * (y - z))
    raise ValueError(name)


def loss_conj(name: str, y: np.ndarray, u: np.ndarray, p: dict) -> np.ndarray:
    r""":math:`\ell^*(y, u)` (``inf`` outside the domain, with a rounding margin of 1e-12)."""
    tiny = 1e-12
    if name == "logistic":
        t = np.clip(-y * u, 0.0, 1.0)
        out = np.where(t > 0, t * np.log(np.where(t > 0, t, 1)), 0.0) + np.where(
            t < 1, (1 - t) * np.log(np.where(t < 1, 1 - t, 1)), 0.0
        )
        return np.where((-y * u >= -tiny) & (-y * u <= 1 + tiny), out, np.inf)
    if name == "squared":
        return u * y + u**2 / 4
    if name == "hinge":
        return np.where((y * u >= -1 - tiny) & (y * u <= tiny), y * u, np.inf)
    if name == "eps_insensitive":
        return np.where(np.abs(u) <= 1 + tiny, y * u + p["eps"] * np.abs(u), np.inf)
    if name == "pinball":
        tau = p["tau"]
        return np.where((u >= -tau - tiny) & (u <= 1 - tau + tiny), y * u, np.inf)
    raise ValueError(name)


def reg_values(name: str, x: np.ndarray, C: float, p: dict) -> np.ndarray:
    if name == "l1":
        return C * x
    if name == "elasticnet":
        return C * ((1 - p["lam"]) * x + p["lam"] / 2 * x**2)
    if name == "lq":
        return C / p["q"] * x ** p["q"]
    if name == "uniform":
        return C / 2 * x**2
    if name == "kl":
        from scipy.special import lambertw

        d0 = p["d0"]
        t = x**2
        d = d0 * np.exp(np.real(lambertw(2 * t / d0**2)) / 2)
        return C * (t / d - (d - d0) / 2)
    raise ValueError(name)


def reg_conj(name: str, v: np.ndarray, C: float, p: dict) -> np.ndarray:
    r""":math:`\tilde g_C^*(v)` at dual block norms ``v``."""
    if name == "l1":
        return np.where(v <= C * (1 + 1e-12), 0.0, np.inf)
    if name == "elasticnet":
        lam = p["lam"]
        return np.maximum(v - C * (1 - lam), 0.0) ** 2 / (2 * C * lam)
    if name == "lq":
        r = p["q"] / (p["q"] - 1)
        return C ** (1 - r) * v**r / r
    if name == "uniform":
        return v**2 / (2 * C)
    if name == "kl":
        return C * p["d0"] / 2 * np.expm1(v**2 / C**2)
    raise ValueError(name)


def primal_value(K, y, alpha, b, loss, reg, C, p) -> float:
    z = np.einsum("mij,mj->i", K, alpha) + b
    x = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))
    return float(np.sum(loss_values(loss, y, z, p)) + np.sum(reg_values(reg, x, C, p)))


def dual_value(K, y, rho, loss, reg, C, p) -> float:
    v = np.sqrt(np.maximum(np.einsum("i,mij,j->m", rho, K, rho), 0.0))
    return float(-np.sum(loss_conj(loss, y, -rho, p)) - np.sum(reg_conj(reg, v, C, p)))


# ---------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------
LOSSES = {
    "logistic": Logistic,
    "hinge": Hinge,
    "squared": Squared,
    "eps_insensitive": EpsInsensitive,
    "pinball": Pinball,
}
REGS = {"l1": L1, "elasticnet": ElasticNet, "lq": Lq, "uniform": Uniform, "kl": KL}
LOSS_PARAMS = {"eps_insensitive": {"eps": 0.1}, "pinball": {"tau": 0.3}}
REG_PARAMS = {"elasticnet": {"lam": 0.5}, "lq": {"q": 1.5}, "kl": {"d0": 1.0}}
#: data and C per loss: about a fifth of C_max (sonar) or half of it (liver), where
#: several kernels are active under the block 1-norm
DATA_C = {
    "logistic": ("sonar", 0.25),
    "hinge": ("sonar", 0.45),
    "squared": ("liver", 1.4),
    "eps_insensitive": ("liver", 0.6),
    "pinball": ("liver", 0.18),
}


def make(
    loss: str, reg: str, C: float | None = None, bias: bool = True, data: str | None = None
) -> tuple[Problem, np.ndarray, dict]:
    """The problem on the eigen-factor bank, its dense bank and the parameters."""
    d, C0 = DATA_C[loss]
    bank, K, y = eigen_data(data or d)
    lp, rp = LOSS_PARAMS.get(loss, {}), REG_PARAMS.get(reg, {})
    pb = Problem(K=bank, y=y, loss=LOSSES[loss](**lp), regularizer=REGS[reg](**rp), C=C0 if C is None else C, bias=bias)
    return pb, K, {**lp, **rp}


def check_certificate(
    res, pb: Problem, K: np.ndarray, loss: str, reg: str, p: dict, tol: float = TOL
) -> tuple[float, float]:
    """Converged, and the objective, dual objective and gap hold when evaluated again here."""
    __tracebackhide__ = True
    assert res.status == Status.CONVERGED, res.message
    assert -1e-12 <= res.gap <= tol
    P = primal_value(K, pb.y, res.alpha, res.bias, loss, reg, pb.C, p)
    D = dual_value(K, pb.y, res.dual, loss, reg, pb.C, p)
    assert P == pytest.approx(res.objective, rel=1e-10)
    assert D == pytest.approx(res.dual_objective, rel=1e-10, abs=1e-12)
    assert (P - D) / abs(P) <= tol + 1e-12
    if pb.bias:
        assert abs(np.sum(res.dual)) <= 1e-10 * np.sum(np.abs(res.dual))
    # alpha is a representer of beta: block norms and predictions hold on the dense bank
    x = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", res.alpha, K, res.alpha), 0.0))
    np.testing.assert_allclose(x, res.block_norms, rtol=1e-8, atol=1e-10 * (1 + x.max()))
    w = res.kernel_weights
    assert np.all(w >= 0) and np.all((w == 0) == (res.block_norms == 0))
    return P, D


#: the pairs of the default suite: every loss and every regularizer at least once (the
#: others run with -m slow)
FAST = {
    ("logistic", "l1"),
    ("hinge", "elasticnet"),
    ("squared", "lq"),
    ("eps_insensitive", "uniform"),
    ("pinball", "kl"),
    ("hinge", "l1"),
    ("eps_insensitive", "l1"),
}
GRID = [
    pytest.param(loss, reg, id=f"{loss}-{reg}", marks=() if (loss, reg) in FAST else pytest.mark.slow)
    for loss in LOSSES
    for reg in REGS
]


@pytest.mark.parametrize("loss,reg", GRID)
def test_every_loss_and_regularizer_matches_conic_reference_and_spicy(loss, reg):
    pb, K, p = make(loss, reg)
    res = BCD(tol=TOL).solve(pb)
    check_certificate(res, pb, K, loss, reg, p)
    data = DATA_C[loss][0]
    ref = reference(data, loss, reg, pb.C, **p)
    assert res.objective == pytest.approx(ref.objective, rel=REL_CONIC)
    spicy = Spicy(tol=TOL).solve(pb)
    assert spicy.converged, spicy.message
    assert res.objective == pytest.approx(spicy.objective, rel=REL_SPICY)


SLOW_GRID = [
    (loss, reg, frac, bias)
    for loss in LOSSES
    for reg in REGS
    for frac, bias in ((0.4, True), (2.5, True), (1.0, False))
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "loss,reg,frac,bias", SLOW_GRID, ids=[f"{a}-{b}-{c}-{'bias' if d else 'nobias'}" for a, b, c, d in SLOW_GRID]
)
def test_grid_of_C_and_bias_matches_conic_reference_and_spicy(loss, reg, frac, bias):
    C = DATA_C[loss][1] * frac
    pb, K, p = make(loss, reg, C=C, bias=bias)
    res = BCD(tol=TOL).solve(pb)
    check_certificate(res, pb, K, loss, reg, p)
    ref = reference(DATA_C[loss][0], loss, reg, C, bias=bias, **p)
    assert res.objective == pytest.approx(ref.objective, rel=REL_CONIC)
    spicy = Spicy(tol=TOL).solve(pb)
    assert spicy.converged, spicy.message
    assert res.objective == pytest.approx(spicy.objective, rel=REL_SPICY)


@pytest.mark.parametrize("method", ["bcd", "newton"])
@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared"])
def test_linear_kernels_on_feature_groups_dense_and_sparse(loss, method):
    """The group lasso: linear kernels on groups of sonar's features; a sparse bank of the
    same factors gives the same solution."""
    X, y = sonar_points(80)
    if loss == "squared":
        y = X[:, 0] - 0.5 * X[:, 7] + 0.1 * np.cos(np.arange(X.shape[0]))
        X = X[:, 1:]
    dense = group_bank(X, 8)
    sparse = group_bank(np.where(np.abs(X) > 0.5, X, 0.0), 8, sparse=True)
    K = dense.to_array()
    pb = Problem(K=dense, y=y, loss=LOSSES[loss](), regularizer=L1(), C=1.0)
    pb.C = 0.3 * common.zero_solution(pb).C_max
    res = BCD(tol=TOL, method=method).solve(pb)
    check_certificate(res, pb, K, loss, "l1", {})
    assert 0 < res.active_set.size < 8
    spicy = Spicy(tol=TOL).solve(pb)
    assert res.objective == pytest.approx(spicy.objective, rel=REL_SPICY)
    # a sparse bank and its dense copy
    Ks = sparse.to_array()
    pbs = Problem(K=sparse, y=y, loss=LOSSES[loss](), regularizer=L1(), C=pb.C)
    pbd = Problem(K=FactorBank(sparse.LT.toarray(), sparse.starts), y=y, loss=LOSSES[loss](), regularizer=L1(), C=pb.C)
    rs = BCD(tol=TOL, method=method).solve(pbs)
    rd = BCD(tol=TOL, method=method).solve(pbd)
    check_certificate(rs, pbs, Ks, loss, "l1", {})
    assert rs.objective == pytest.approx(rd.objective, rel=1e-7)
    np.testing.assert_array_equal(rs.active_set, rd.active_set)


def test_methods_agree():
    pb, K, p = make("logistic", "elasticnet")
    a = BCD(tol=TOL, method="bcd").solve(pb)
    b = BCD(tol=TOL, method="newton").solve(pb)
    for res in (a, b):
        check_certificate(res, pb, K, "logistic", "elasticnet", p)
    assert a.objective == pytest.approx(b.objective, rel=1e-8)
    assert {h["method"] for h in a.history} == {"bcd"}
    assert {h["method"] for h in b.history} == {"newton"}


# ---------------------------------------------------------------------------
# beta <-> alpha
# ---------------------------------------------------------------------------
def test_alpha_represents_beta():
    """K_m alpha_m = L_m beta_m and ||alpha_m||_{K_m} = ||beta_m||, also for rank-deficient
    factors and blocks of rank 0."""
    rng = np.random.default_rng(3)
    N = 30
    A = rng.standard_normal((N, 4))
    blocks = [
        A,
        np.hstack([A[:, :2], A[:, :2] @ rng.standard_normal((2, 3))]),
        np.zeros((N, 0)),
        rng.standard_normal((N, 40)),
    ]
    bank = FactorBank.from_blocks(blocks)
    K = bank.to_array()
    # beta in the row space of every L_m^T (as the engine's iterates are)
    beta = bank.project(rng.standard_normal(N))
    alpha = alpha_from_beta(bank, beta)
    assert alpha.shape == (4, N) and np.all(alpha[2] == 0)
    for m, L in enumerate(blocks):
        s, e = bank.starts[m], bank.starts[m + 1]
        np.testing.assert_allclose(K[m] @ alpha[m], L @ beta[s:e], atol=1e-9)
        assert math.sqrt(max(alpha[m] @ K[m] @ alpha[m], 0.0)) == pytest.approx(
            np.linalg.norm(beta[s:e]), rel=1e-9, abs=1e-12
        )
    np.testing.assert_allclose(bank.coefficients(alpha), beta, atol=1e-9)
    np.testing.assert_array_equal(bank.alpha_from_beta(beta), alpha)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_the_solver_arrays_are_computed_once_per_bank_and_hold_the_block_norms(sparse):
    """FactorBank.solver_arrays: the same arrays on every call while the bank lives, with each
    block's squared spectral norm (to its safety margin) and the Gram matrices of the blocks."""
    rng = np.random.default_rng(4)
    N = 25
    blocks = [rng.standard_normal((N, 3)), np.zeros((N, 0)), rng.standard_normal((N, 6))]
    if sparse:
        blocks = [sp.csr_matrix(np.where(np.abs(B) > 0.5, B, 0.0)) for B in blocks]
    bank = FactorBank.from_blocks(blocks)
    f = bank.solver_arrays()
    assert bank.solver_arrays() is f
    assert FactorBank.from_blocks(blocks).solver_arrays() is not f
    for m, B in enumerate(blocks):
        B = B.toarray() if sparse else B
        top = np.linalg.norm(B, 2) ** 2 if B.shape[1] else 0.0
        assert f.lip[m] == pytest.approx(top, rel=1e-9, abs=1e-12)
        if B.shape[1]:
            np.testing.assert_allclose(f.gram(m), B.T @ B, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# the contract of an engine
# ---------------------------------------------------------------------------
def test_zero_solution_is_returned_above_C_max():
    pb, K, p = make("logistic", "l1")
    C_max = common.zero_solution(pb).C_max
    pb.C = 1.01 * C_max
    res = BCD(tol=TOL).solve(pb)
    assert res.converged and res.iterations == 0 and res.active_set.size == 0
    assert res.C_max == pytest.approx(C_max)
    pb.C = 0.99 * C_max
    res = BCD(tol=TOL).solve(pb)
    check_certificate(res, pb, K, "logistic", "l1", p)
    assert res.active_set.size >= 1 and res.C_max == pytest.approx(C_max)


def test_callback_stops_the_solve():
    pb, _, _ = make("logistic", "l1")
    res, seen = solve_stopped(BCD(tol=1e-14), pb, 2)
    assert [s["iteration"] for s in seen] == [1, 2]


def test_callback_falsy_return_does_not_stop():
    pb, _, _ = make("hinge", "elasticnet")
    calls = []
    res = BCD(tol=TOL).solve(pb, callback=lambda s: calls.append(s["iteration"]))
    assert res.converged and calls == list(range(1, res.iterations + 1))


def test_warm_start_from_a_neighbouring_C():
    assert BCD.supports_warm_start
    pb, K, p = make("logistic", "l1")
    first = BCD(tol=TOL).solve(make("logistic", "l1", C=0.3)[0])
    cold = BCD(tol=TOL).solve(pb)
    warm = BCD(tol=TOL).solve(pb, warm_start=first)
    check_certificate(warm, pb, K, "logistic", "l1", p)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-8)
    assert sum(h["epochs"] for h in warm.history) < sum(h["epochs"] for h in cold.history)
    # from its own solution the solve stops at once
    again = BCD(tol=1e-7).solve(pb, warm_start=cold)
    assert again.converged and again.iterations == 0


def test_warm_start_from_another_engine():
    """A dense-bank engine's result starts the factor-bank solve (alpha maps to beta)."""
    pb, K, p = make("squared", "elasticnet")
    spicy = Spicy(tol=1e-3).solve(Problem(K=K, y=pb.y, loss=pb.loss, regularizer=pb.regularizer, C=pb.C))
    res = BCD(tol=TOL).solve(pb, warm_start=spicy)
    check_certificate(res, pb, K, "squared", "elasticnet", p)


def test_warm_start_of_the_wrong_shape_raises():
    pb, _, _ = make("logistic", "l1")
    res = BCD(tol=1e-2).solve(pb)
    bad = dataclasses.replace(res, alpha=res.alpha[:, :10])
    with pytest.raises(ValueError, match=r"warm_start.alpha has shape \(10, 10\)"):
        BCD().solve(pb, warm_start=bad)
    nan = dataclasses.replace(res, alpha=np.full_like(res.alpha, np.nan))
    with pytest.raises(ValueError, match="warm_start has non-finite alpha"):
        BCD().solve(pb, warm_start=nan)


def test_max_iter_gives_status_and_warning():
    pb, K, p = make("hinge", "l1")
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        res = BCD(tol=1e-12, max_iter=2).solve(pb)
    assert res.status == Status.MAX_ITER and not res.converged
    assert res.iterations == 2 and [h["iteration"] for h in res.history] == [1, 2]
    assert math.isfinite(res.gap) and res.gap > 1e-12
    assert res.dual_objective <= res.objective
    assert primal_value(K, pb.y, res.alpha, res.bias, "hinge", "l1", pb.C, p) == pytest.approx(res.objective, rel=1e-10)
    assert_incumbents(res, res.history)


def test_history_records():
    pb, _, _ = make("eps_insensitive", "l1")
    res = BCD(tol=1e-6).solve(pb)
    assert res.engine == "bcd" and len(res.history) == res.iterations >= 1
    for h in res.history:
        for key in (
            "objective",
            "dual_objective",
            "gap",
            "n_active",
            "time_s",
            "ws_size",
            "violation",
            "epochs",
            "newton_steps",
            "line_search",
            "anderson",
            "polish_steps",
            "mu",
        ):
            assert key in h and math.isfinite(h[key]), key
        assert h["dual_objective"] <= h["objective"] + 1e-12 * abs(h["objective"])
        assert h["mu"] > 0  # a smoothed loss
    mus = [h["mu"] for h in res.history]
    assert mus == sorted(mus, reverse=True) and mus[-1] < mus[0]
    assert_incumbents(res, res.history)


class CoupledL1(L1):
    """Block 1-norm kernels, but declared as coupling the blocks."""

    name = "coupled_l1"
    separable = False


class NoConjGrad(Hinge):
    """A non-smooth loss that gives no derivative of its conjugate."""

    name = "hinge_without_conj_grad"
    conj_grad = None


def test_supports_gives_reasons():
    pb, K, _ = make("logistic", "l1")
    assert BCD().supports(pb) is None
    dense = Problem(K=K, y=pb.y, loss=Logistic(), regularizer=L1(), C=0.1)
    why = BCD().supports(dense)
    assert "FactorBank" in why and "spicy" in why
    with pytest.raises(
        UnsupportedBankError,
        match="engine 'bcd' cannot solve this problem: the Gram bank is held as "
        r"ArrayBank \(representation 'array'\), not as a FactorBank",
    ):
        BCD().solve(dense)
    coupled = Problem(K=pb.bank, y=pb.y, loss=Logistic(), regularizer=CoupledL1(), C=0.1)
    assert "coupled_l1" in BCD().supports(coupled)
    with pytest.raises(ValueError, match="not separable over kernels"):
        BCD().solve(coupled)
    bad = Problem(K=pb.bank, y=pb.y, loss=NoConjGrad(), regularizer=L1(), C=0.1)
    with pytest.raises(ValueError, match="hinge_without_conj_grad gives no conj_grad"):
        BCD().solve(bad)


def test_blas_runs_single_threaded_during_a_solve():
    """The factor bank's parallel jitted passes and a multi-threaded Cholesky of the Newton
    steps oversubscribe the cores (a hinge solve on 80 samples took 18 s instead of 0.9 s on
    two busy cores): the solve limits BLAS to one thread, and restores it after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> list[int]:
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    with threadpool_limits(limits=2, user_api="blas"):  # more than one, whatever the test run set
        before = blas_threads()
        seen: list[list[int]] = []
        pb, _, _ = make("hinge", "l1")
        res = BCD(tol=1e-4).solve(pb, callback=lambda rec: seen.append(blas_threads()))
        assert res.converged and seen
        assert all(t == [1] * len(before) for t in seen)
        assert blas_threads() == before and 2 in before


def test_a_spec_with_a_factor_bank_runs_bcd_and_an_array_spec_refuses_it():
    """Through the pipeline: kernels.factor (exact) with engine bcd gives spicy's optimum on
    the dense bank; bcd on a dense bank is refused before the bank is built, naming spicy."""
    from mklkit.api import run
    from mklkit.spec import SpecError, parse_spec

    spec = {
        "data": {"builtin": "liver", "test_size": 0.25, "seed": 0},
        "kernels": {
            "bank": [{"function": "linear", "features": [0, 1, 2]}, {"function": "linear", "features": "each"}]
        },
        "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.5},
        "engine": {"name": "spicy", "tol": 1e-9},
    }
    gram = {**spec, "kernels": {**spec["kernels"], "factor": False}}
    dense = run(parse_spec(gram, file="d.yaml"))
    assert dense.factor is None  # Gram matrices
    fac = run(
        parse_spec(
            {
                **spec,
                "kernels": {**spec["kernels"], "factor": {"method": "exact"}},
                "engine": {"name": "bcd", "tol": 1e-9},
            },
            file="f.yaml",
        )
    )
    assert dense.converged and fac.converged and fac.result.engine == "bcd"
    assert fac.result.objective == pytest.approx(dense.result.objective, rel=1e-7)
    assert fac.metrics == pytest.approx(dense.metrics, abs=1e-6)
    with pytest.raises(
        SpecError,
        match=r"^a\.yaml: engine\.name: engine 'bcd' cannot solve this "
        r"problem: the Gram bank is held as .*not as a FactorBank.*"
        r"allowed: .*spicy",
    ):
        parse_spec({**gram, "engine": {"name": "bcd"}}, file="a.yaml").prepare()
    # without kernels.factor the representation is chosen: linear kernels are their own exact factors
    chosen = parse_spec({**spec, "engine": {"name": "bcd", "tol": 1e-9}}, file="c.yaml").prepare()
    assert chosen.representation == "factor" and chosen.bank.approximation()["relative_trace_error"] < 1e-12


def test_engine_declaration_and_options():
    assert get_registry().get("engine", "bcd") is BCD
    assert declaration_problems(BCD) == []
    assert BCD.representations == ("factor",)
    names = [p.name for p in BCD.params]
    assert names[:2] == ["tol", "max_iter"]
    with pytest.raises(ParamError, match="method"):
        BCD(method="cd")
    with pytest.raises(ParamError, match="mu_factor"):
        BCD(mu_factor=1.0)
    with pytest.raises(ParamError, match="anderson"):
        BCD(anderson=-1)
    with pytest.raises(ParamError, match="polish"):
        BCD(polish="sometimes")


# ---------------------------------------------------------------------------
# losses from the contract alone
# ---------------------------------------------------------------------------
class LogisticNoBound(Logistic):
    """The logistic loss without its curvature bound (deriv_lipschitz is inf)."""

    name = "logistic_no_bound"

    def deriv_lipschitz(self) -> float:
        return math.inf


@pytest.mark.parametrize("method", ["bcd", "newton"])
def test_smooth_loss_without_a_curvature_bound(method):
    """With no Lipschitz bound, the steps use the local curvature and a back-tracking test."""
    pb, K, p = make("logistic", "l1")
    pb_nb = Problem(K=pb.bank, y=pb.y, loss=LogisticNoBound(), regularizer=L1(), C=pb.C)
    res = BCD(tol=TOL, method=method).solve(pb_nb)
    check_certificate(res, pb_nb, K, "logistic", "l1", p)
    ref = BCD(tol=TOL).solve(pb)
    assert res.objective == pytest.approx(ref.objective, rel=1e-8)


def test_huber_plugin_loss():
    huber = pytest.importorskip("mklkit_huber")
    pb, K, _ = make("squared", "elasticnet")
    pbh = Problem(K=pb.bank, y=pb.y, loss=huber.Huber(delta=0.5), regularizer=pb.regularizer, C=pb.C)
    res = BCD(tol=TOL).solve(pbh)
    assert res.converged and -1e-12 <= res.gap <= TOL
    spicy = Spicy(tol=TOL).solve(pbh)
    assert res.objective == pytest.approx(spicy.objective, rel=REL_SPICY)


@pytest.mark.parametrize("loss", ["hinge", "eps_insensitive", "pinball"])
def test_moreau_envelope_of_the_conjugate(loss):
    r"""u*(z) maximizes u z - l*(y, u) - mu u^2 / 2 over the conjugate's domain (brute force on
    a grid), the value is that maximum, and the curvature is 1/mu inside the band, 0 outside."""
    from mklkit._jit import bcd as kb

    obj = LOSSES[loss](**LOSS_PARAMS.get(loss, {}))
    k, lp = obj.jit, obj.param_vector
    rng = np.random.default_rng(1)
    n = 40
    y = np.where(rng.random(n) > 0.5, 1.0, -1.0) if obj.task == "classification" else rng.standard_normal(n)
    z = y + rng.standard_normal(n) * 0.3
    lo, hi = k.conj_lower(y, lp), k.conj_upper(y, lp)
    mu = 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v, u, h = kb.eval_loss(kb.samples(y, lo, hi, None, kb.KIND_ENVELOPE, mu), z, kb.loss_fns(obj), True, True)
    for i in range(n):
        grid = np.linspace(lo[i], hi[i], 200001)
        f = grid * z[i] - k.conj(np.full_like(grid, y[i]), grid, lp) - mu / 2 * grid**2
        assert v[i] == pytest.approx(f.max(), abs=1e-8)
        assert u[i] == pytest.approx(grid[np.argmax(f)], abs=2e-5)
        assert lo[i] <= u[i] <= hi[i]
        inside = lo[i] + 1e-6 < u[i] < hi[i] - 1e-6 and abs(u[i]) > 1e-6
        if inside:
            assert h[i] == pytest.approx(1 / mu)
        elif min(abs(u[i] - lo[i]), abs(u[i] - hi[i]), abs(u[i])) < 1e-12:
            assert h[i] == 0.0
    # the envelope is below the loss by at most mu/2 max u^2
    true = k.value(y, z, lp)
    assert np.all(v <= true + 1e-12)
    assert np.all(true - v <= mu / 2 * np.maximum(lo**2, hi**2) + 1e-12)


def test_the_benchmark_without_skglm_says_so_and_exits_2():
    """benchmarks/bench_group_lasso.py needs the benchmark extra; without skglm it says so."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_group_lasso.py"
    code = (
        "import runpy, sys; sys.modules['skglm'] = None; "
        f"sys.argv = [{str(script)!r}]; runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        'bench_group_lasso: skglm is not installed; install it with pip install -e ".[benchmark]"'
    )


def test_the_newton_step_is_kept_at_the_rounding_of_the_objective():
    """Near the optimum a Newton step lowers the objective by less than its rounding while it
    still lowers the violation the gap depends on: it is kept.  On this group lasso (w8a rows,
    groups of 10 features) the solve stalled at a relative gap of 5.5e-8 when such steps were
    rejected as 'no descent'."""
    from mklkit.data import load_builtin

    ds = load_builtin("w8a")
    rng = np.random.default_rng(0)
    rng.permutation(32561)
    rows = np.sort(rng.permutation(ds.n_samples)[:1000])
    X = sp.csr_matrix(ds.X, dtype=np.float64)[rows].toarray()
    y = np.asarray(ds.y, dtype=np.float64)[rows]
    starts = np.arange(0, X.shape[1] + 1, 10)
    pb = Problem(K=FactorBank(np.ascontiguousarray(X.T), starts), y=y, loss=Squared(), regularizer=L1(), C=1.0)
    pb.C = 0.1 * common.zero_solution(pb).C_max
    res = BCD(tol=1e-8).solve(pb)
    assert res.status == Status.CONVERGED, res.message
    assert res.gap <= 1e-8
    # the gap evaluated again from the returned points, with K_g = X_g X_g^T
    groups = [slice(s, e) for s, e in zip(starts[:-1], starts[1:])]
    z = sum(X[:, g] @ (X[:, g].T @ a) for g, a in zip(groups, res.alpha)) + res.bias
    x = np.array([np.linalg.norm(X[:, g].T @ a) for g, a in zip(groups, res.alpha)])
    v = np.array([np.linalg.norm(X[:, g].T @ res.dual) for g in groups])
    P = float(np.sum(loss_values("squared", y, z, {})) + np.sum(reg_values("l1", x, pb.C, {})))
    D = float(-np.sum(loss_conj("squared", y, -res.dual, {})) - np.sum(reg_conj("l1", v, pb.C, {})))
    assert P == pytest.approx(res.objective, rel=1e-10)
    assert (P - D) / abs(P) <= 1e-8


def test_proximal_newton_does_not_stall_a_little_above_the_optimum():
    """w8a, 16,000 points, 30 groups of 10 binary features, squared loss at C = C_max / 2: the
    proximal Newton working-set solves stopped improving at a relative gap of 1.1e-7 (200
    iterations, tol 1e-8).  An iteration that does not halve the gap hands the next working
    set to plain coordinate descent, and the solve converges."""
    from mklkit.data import load_builtin

    ds = load_builtin("w8a")
    rng = np.random.default_rng(0)
    rng.permutation(32561)  # the subset of benchmarks/bench_group_lasso.py
    rows = np.sort(rng.permutation(ds.n_samples)[:16000])
    X = sp.csr_matrix(ds.X, dtype=np.float64)[rows]
    y = np.asarray(ds.y, dtype=np.float64)[rows]
    starts = np.arange(0, X.shape[1] + 1, 10, dtype=np.int64)
    pb = Problem(K=FactorBank(X.T.tocsr(), starts), y=y, loss=Squared(), regularizer=L1(), C=1.0)
    pb.C = 0.5 * common.zero_solution(pb).C_max
    res = BCD(tol=1e-8, max_iter=30).solve(pb)
    assert res.converged and res.gap <= 1e-8
    ref = BCD(tol=1e-10, method="bcd", max_iter=200).solve(pb)
    assert ref.converged
    assert abs(res.objective - ref.objective) <= 1e-8 * abs(ref.objective)


@pytest.mark.parametrize("loss,reg", [("logistic", "l1"), ("logistic", "elasticnet")])
def test_newton_steps_on_a_working_set_end_at_the_run_tolerance(monkeypatch, loss, reg):
    """On a working set met before, proximal Newton steps are taken one call at a time and the
    point certified after each: no step is taken once the gap is within ``tol``, even when the
    working set's own tolerance (here out of reach: ``inner_ratio`` 1e-12) is not met."""
    from mklkit.engines.bcd.loop import _BcdRun

    pb, K, p = make(loss, reg)
    tol = 1e-3
    runs: list[list[float]] = []  # the gaps certified inside each newton_to_tol call
    within = [False]
    to_tol = _BcdRun.newton_to_tol
    certify = _BcdRun.certify

    def spy_to_tol(self, *args):
        runs.append([])
        within[0] = True
        try:
            return to_tol(self, *args)
        finally:
            within[0] = False

    def spy_certify(self, beta, b, mu):
        out = certify(self, beta, b, mu)
        if within[0]:
            runs[-1].append(out.gap)
        return out

    monkeypatch.setattr(_BcdRun, "newton_to_tol", spy_to_tol)
    monkeypatch.setattr(_BcdRun, "certify", spy_certify)
    # polish="never": Newton steps on the support would take over near the optimum
    res = BCD(tol=tol, inner_ratio=1e-12, p0=pb.n_kernels, polish="never").solve(pb)
    check_certificate(res, pb, K, loss, reg, p, tol=tol)
    inside = [gaps for gaps in runs if gaps]
    assert inside, "no working set was solved by more than one Newton step"
    for gaps in inside:
        assert all(g > tol for g in gaps[:-1])  # a step only while the gap is above
    assert any(gaps[-1] <= tol for gaps in inside)  # and the steps ended there


def _w8a_groups(n: int, sparse: bool, loss: Any) -> Problem:
    """The group lasso on n w8a points (groups of 10 features), l1 at 0.01 C_max."""
    from mklkit.data import load_builtin

    ds = load_builtin("w8a")
    rows = np.sort(np.random.default_rng(0).permutation(ds.n_samples)[:n])
    X = sp.csr_matrix(ds.X, dtype=np.float64)[rows]
    y = np.asarray(ds.y, dtype=np.float64)[rows]
    starts = np.arange(0, X.shape[1] + 1, 10, dtype=np.int64)
    LT = X.T.tocsr() if sparse else np.ascontiguousarray(X.T.toarray())
    pb = Problem(K=FactorBank(LT, starts), y=y, loss=loss, regularizer=L1(), C=1.0)
    pb.C = 0.01 * common.zero_solution(pb).C_max
    return pb


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_smooth_loss_is_polished_on_its_support_near_the_optimum(sparse):
    """polish='auto' takes Newton steps on the support of a smooth loss once the gap is below
    SMOOTH_POLISH_GAP and the system is cheap (the sparse factor's from its entries): the same
    optimum as without them, to the certified gap, and its steps solve the Newton system: the
    gap falls to the objective's rounding (3.4e-14 here, against 5.6e-10 and 6.8e-10 when the
    solve ends without them) in about half the iterations and a third of the epochs."""
    from mklkit.engines.bcd.polish import SMOOTH_POLISH_GAP

    pb = _w8a_groups(1500, sparse, Logistic())
    res = BCD(tol=1e-9).solve(pb)
    assert res.converged and res.gap <= 1e-9
    assert sum(h["polish_steps"] for h in res.history) > 0
    # no steps while the gap before the iteration was above SMOOTH_POLISH_GAP
    for before, rec in zip(res.history, res.history[1:]):
        if before["gap"] > SMOOTH_POLISH_GAP:
            assert rec["polish_steps"] == 0
    ref = BCD(tol=1e-9, polish="never").solve(pb)
    assert ref.converged
    assert sum(h["polish_steps"] for h in ref.history) == 0
    assert abs(res.objective - ref.objective) <= 2e-9 * abs(ref.objective)
    assert res.gap <= 1e-12 < ref.gap
    assert len(res.history) < len(ref.history)
    epochs = [sum(h["epochs"] for h in r.history[1:]) for r in (res, ref)]
    assert 2 * epochs[0] < epochs[1], epochs


def test_the_loops_take_the_component_kernels_by_address():
    """The loss record passed into the jitted loops holds the kernels' compiled addresses,
    resolved once per kernel (a dispatcher is looked up at every call), and is typed without
    looking at its fields; the loops give the same result with it as with a record of the
    dispatchers themselves, and the loss's own values."""
    from numba import typeof

    from mklkit._jit import bcd as kb
    from mklkit._jit import records

    loss = Logistic()
    lk = loss.jit
    rec = kb.loss_fns(loss)
    assert rec.deriv is kb.loss_fns(Logistic()).deriv
    assert typeof(rec.deriv) == kb.LOSS_FN
    assert typeof(rec) is records.LOSS_FNS_T
    y = np.array([1.0, -1.0, 1.0])
    z = np.array([0.3, 0.2, -2.0])
    p = loss.param_vector
    smp = kb.samples(y, lk.conj_lower(y, p), lk.conj_upper(y, p), None, kb.KIND_SMOOTH, 0.0)
    assert typeof(smp) is records.SAMPLES_T
    plain = kb.LossFns(
        *[getattr(lk, k) or lk.value for k in ("value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess")], p
    )
    fast = kb.eval_loss(smp, z, rec, True, True)
    for u, v in zip(kb.eval_loss(smp, z, plain, True, True), fast):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(fast[0], np.log1p(np.exp(-y * z)), rtol=1e-12)
    np.testing.assert_allclose(fast[1], -y / (1.0 + np.exp(y * z)), rtol=1e-12)
    np.testing.assert_allclose(fast[2], np.exp(y * z) / (1.0 + np.exp(y * z)) ** 2, rtol=1e-12)


def test_the_state_a_solve_writes_into_is_checked():
    """The arrays a working-set solve updates in place must already have the record's type
    (the record is typed without looking at them): another dtype or layout is refused."""
    from mklkit._jit import bcd as kb

    ok = np.zeros(3)
    st = kb.bcd_state([0, 1], ok, ok.copy(), np.zeros(1), np.zeros(kb.ST_LEN))
    assert st.ws.dtype == np.int64 and st.beta is ok
    for bad in (np.zeros(3, dtype=np.float32), np.zeros(6)[::2], np.zeros((3, 1))):
        with pytest.raises(TypeError, match="beta"):
            kb.bcd_state([0], bad, ok, np.zeros(1), np.zeros(kb.ST_LEN))


@pytest.mark.parametrize("method", ["newton", "bcd"])
@pytest.mark.parametrize("bias", [False, True])
def test_a_working_set_solve_minimizes_a_block_exactly(method, bias):
    r"""One block with orthogonal columns, :math:`L^\top L = sI`, the squared loss
    :math:`\sum_i(y_i - z_i)^2` and the group lasso: the minimizer is the block
    soft-thresholding :math:`\beta = (1 - C/(2s\|v\|))_+ v`, :math:`v = L^\top y_c/s` (:math:`y_c`: ``y``
    centred with a bias), which one call of the working-set solve reaches (the exact block
    minimization of the Newton model, or coordinate descent), with its objective decrease."""
    from mklkit._jit import bcd as kb

    rng = np.random.default_rng(5)
    N, r, s = 40, 3, 2.5
    Q, _ = np.linalg.qr(rng.standard_normal((N, r)))
    if bias:
        Q, _ = np.linalg.qr(np.column_stack([np.ones(N), Q])[:, : r + 1])
        Q = Q[:, 1:]
    L = np.sqrt(s) * Q
    y = rng.standard_normal(N) + 0.7
    bank = FactorBank(np.ascontiguousarray(L.T), np.array([0, r]))
    f = bank.solver_arrays()
    loss, reg, C = Squared(), L1(), 0.8
    lk = loss.jit
    p = loss.param_vector
    smp = kb.samples(y, lk.conj_lower(y, p), lk.conj_upper(y, p), None, kb.KIND_SMOOTH, 0.0)
    opts = kb.BcdOptions(
        method=kb.METHOD_NEWTON if method == "newton" else kb.METHOD_BCD,
        with_bias=bias,
        check=False,
        max_newton=20,
        max_epochs=1000,
        anderson=0,
        exact_rank=r,
        max_inner=1000,
        C=C,
        lip=loss.deriv_lipschitz(),
        tol=1e-12,
        ratio=0.1,
        scale=loss.deriv_lipschitz(),
    )
    beta, z, b = np.zeros(r), np.zeros(N), np.zeros(1)
    stats = np.zeros(kb.ST_LEN)
    kb.solve_ws(opts, f.record, smp, kb.loss_fns(loss), kb.reg_fns(reg), kb.bcd_state(np.array([0]), beta, z, b, stats))
    yc = y - y.mean() if bias else y
    v = L.T @ yc / s
    want = max(1.0 - C / (2.0 * s * np.linalg.norm(v)), 0.0) * v
    assert np.linalg.norm(want) > 0
    np.testing.assert_allclose(beta, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(z, L @ beta + b[0], rtol=1e-12, atol=1e-12)
    if bias:
        assert b[0] == pytest.approx(y.mean(), rel=1e-9)
    assert int(stats[kb.ST_STATUS]) in (kb.OK, kb.NO_DESCENT)
    assert stats[kb.ST_VIOLATION] <= 1e-9
    f_end = np.sum((z - y) ** 2) + C * np.linalg.norm(beta)
    assert stats[kb.ST_DECREASE] == pytest.approx(np.sum(y**2) - f_end, rel=1e-9)
