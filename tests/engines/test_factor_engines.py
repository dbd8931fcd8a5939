"""spicy (both methods, both Newton solvers) and proximal on factor banks.

Exact factors (linear kernels on feature groups of sonar and liver; the
eigen-factors of the engine kit's RBF/polynomial bank on sonar) make the
factor bank and its dense :meth:`~mklkit.kernels.factor.FactorBank.to_array`
the same problem: the engines must agree on both to 1e-6 relative
objective, and with cvxpy + Clarabel to 1e-4.  On the factor path no N x N
array may be formed (the dense Newton helpers are replaced by ones that
raise, and a tracemalloc peak is held below N^2 float64 / 4).
"""

from __future__ import annotations

import functools
import tracemalloc

import numpy as np
import pytest

from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import load_builtin
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.engines.spicy import factor_newton
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factorize import build_factor_bank
from mklkit.problem import Problem
from mklkit.testing.engines import sample_bank, sample_points

try:
    from tests.conic_reference import factor_bank, solve_reference
except ImportError:  # tests/ itself is on sys.path
    from conic_reference import factor_bank, solve_reference

pytestmark = pytest.mark.usefixtures("one_thread")

GROUPS = {
    "sonar": [
        list(range(0, 12)),
        list(range(12, 24)),
        list(range(24, 36)),
        list(range(36, 48)),
        list(range(48, 60)),
        [0, 10, 20, 30, 40, 50],
    ],
    "liver": [[0], [1], [2], [3], [4], [0, 1, 2, 3, 4]],
}


def _linear_blocks(X: np.ndarray, groups: list[list[int]]) -> FactorBank:
    """Exact factors of linear kernels on feature groups, each of unit trace."""
    blocks = []
    for g in groups:
        L = X[:, g]
        blocks.append(L / np.linalg.norm(L))
    return FactorBank.from_blocks(blocks)


@functools.lru_cache(maxsize=None)
def data(name: str) -> tuple[FactorBank, np.ndarray]:
    """A factor bank with exact factors and the targets."""
    if name == "sonar_rbf":
        X, y = sample_points("sonar", 80, 0)
        return FactorBank.from_blocks([L for L, _ in factor_bank(sample_bank(X), 1e-12)]), y
    base = name.split("_")[0]
    X, y = sample_points(base, 80, 0 if base == "sonar" else 1)
    return _linear_blocks(X, GROUPS[base]), y


@functools.lru_cache(maxsize=None)
def reference(name: str, loss: str, reg: str, C: float, **params: float) -> float:
    fb, y = data(name)
    return solve_reference(fb.to_array(), y, loss, reg, C, **params).objective


COMPONENTS = {
    "logistic": Logistic,
    "hinge": Hinge,
    "squared": Squared,
    "eps_insensitive": lambda: EpsInsensitive(eps=0.1),
    "l1": L1,
    "elasticnet": lambda: ElasticNet(lam=0.5),
}
PARAMS = {"eps_insensitive": {"eps": 0.1}, "elasticnet": {"lam": 0.5}}

# (data, loss, regularizer, C, method): the one-step method on smooth conjugates,
# the iterative method on a smooth and on a constrained (hinge-type) loss
SPICY_CASES = [
    ("sonar_linear", "logistic", "elasticnet", 0.5, "one_step"),
    ("sonar_linear", "logistic", "l1", 0.5, "iterative"),
    ("sonar_linear", "hinge", "l1", 0.5, "iterative"),
    ("liver_linear", "squared", "elasticnet", 1.0, "one_step"),
    ("liver_linear", "eps_insensitive", "l1", 1.0, "iterative"),
    ("sonar_rbf", "logistic", "elasticnet", 0.3, "one_step"),
    ("sonar_rbf", "hinge", "l1", 0.3, "iterative"),
]
PROXIMAL_CASES = [
    ("sonar_linear", "logistic", "l1", 0.5),
    ("liver_linear", "squared", "elasticnet", 1.0),
    ("sonar_rbf", "logistic", "l1", 0.3),
]


def _raise(*args, **kwargs):
    raise AssertionError("an N x N helper was called on the factor path")


#: What forms an N x N matrix from a factor bank: the Hessian sum of both spicy methods and
#: the bank as one array (which the proximal engine's sum of kernels and any dense Newton
#: solve would need; ``problem.K`` of a factor bank refuses by itself).
DENSE_HELPERS = ((FactorBank, "accumulate_hessian"), (FactorBank, "to_array"))

#: How spicy's Newton systems on a factor bank are solved (history key ``solver``): the
#: low-rank solvers, or a gradient step; never a dense N x N factorization.
LOW_RANK_SOLVERS = {"woodbury", "cg", "gradient"}


def _solvers(*results) -> set[str]:
    return {h["solver"].split("+")[0] for r in results for h in r.history if "solver" in h}


@pytest.fixture
def no_dense_helpers(monkeypatch):
    """The helpers that form or factor an N x N matrix raise."""
    for target, attr in DENSE_HELPERS:
        monkeypatch.setattr(target, attr, _raise)


def _problem(K, y, loss: str, reg: str, C: float) -> Problem:
    return Problem(K=K, y=y, loss=COMPONENTS[loss](), regularizer=COMPONENTS[reg](), C=C)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def _check_agreement(engine, name, loss, reg, C, monkeypatch):
    fb, y = data(name)
    dense = engine.solve(_problem(fb.to_array(), y, loss, reg, C))
    assert dense.converged
    with monkeypatch.context() as mp:
        for target, attr in DENSE_HELPERS:
            mp.setattr(target, attr, _raise)
        res = engine.solve(_problem(fb, y, loss, reg, C))
    assert res.converged and res.gap <= engine.tol
    assert _solvers(res) <= LOW_RANK_SOLVERS
    assert _rel(res.objective, dense.objective) <= 1e-6
    ref = reference(name, loss, reg, C, **PARAMS.get(loss, {}), **PARAMS.get(reg, {}))
    assert _rel(res.objective, ref) <= 1e-4
    return res, dense


@pytest.mark.parametrize("solver", ["woodbury", "cg"])
@pytest.mark.parametrize("name,loss,reg,C,method", SPICY_CASES, ids=["-".join(map(str, c)) for c in SPICY_CASES])
def test_spicy_on_exact_factors_agrees_with_the_dense_bank_and_the_conic_reference(
    name, loss, reg, C, method, solver, monkeypatch
):
    monkeypatch.setattr(factor_newton, "SOLVER", solver)
    res, dense = _check_agreement(Spicy(tol=1e-9, method=method), name, loss, reg, C, monkeypatch)
    if method == "one_step":
        # the Newton directions came from the low-rank solver asked for
        assert {h["solver"].split("+")[0] for h in res.history if "solver" in h} == {solver}


@pytest.mark.parametrize("name,loss,reg,C", PROXIMAL_CASES, ids=["-".join(map(str, c)) for c in PROXIMAL_CASES])
def test_proximal_on_exact_factors_agrees_with_the_dense_bank_and_the_conic_reference(name, loss, reg, C, monkeypatch):
    _check_agreement(Proximal(tol=1e-8), name, loss, reg, C, monkeypatch)


@pytest.mark.parametrize(
    "engine,loss,reg",
    [
        (Spicy(tol=1e-9, method="one_step"), "logistic", "elasticnet"),
        (Spicy(tol=1e-9, method="iterative"), "hinge", "l1"),
        (Proximal(tol=1e-8), "logistic", "l1"),
    ],
    ids=["spicy-one_step", "spicy-iterative", "proximal"],
)
def test_warm_starts_on_a_factor_bank_reach_the_dense_optimum(engine, loss, reg, monkeypatch):
    fb, y = data("sonar_rbf")
    dense = engine.solve(_problem(fb.to_array(), y, loss, reg, 0.3))
    with monkeypatch.context() as mp:
        for target, attr in DENSE_HELPERS:
            mp.setattr(target, attr, _raise)
        first = engine.solve(_problem(fb, y, loss, reg, 0.6))
        res = engine.solve(_problem(fb, y, loss, reg, 0.3), warm_start=first)
    assert res.converged and res.gap <= engine.tol
    assert _solvers(first, res) <= LOW_RANK_SOLVERS
    assert _rel(res.objective, dense.objective) <= 1e-6


def test_proximal_declares_the_factor_representation():
    fb, y = data("sonar_linear")
    problem = _problem(fb, y, "logistic", "l1", 0.5)
    assert "factor" in Proximal.representations
    assert Proximal().supports(problem) is None


@pytest.mark.parametrize("solver", ["woodbury", "cg"])
def test_low_rank_hessian_solves_match_a_dense_solve(solver, monkeypatch):
    """Both solvers against the dense matrix they stand for (with a negative t_p, a
    zero-norm kernel and a rank-one bias term), unconstrained and with 1'x = 0."""
    monkeypatch.setattr(factor_newton, "SOLVER", solver)
    fb, _ = data("sonar_rbf")
    N = fb.n_samples
    rng = np.random.default_rng(3)
    d = rng.uniform(0.5, 2.0, N)
    idx = np.array([0, 2, 4, 7], dtype=np.int64)
    s = np.array([3.0, 0.5, 2.0, 1.0])
    V = rng.standard_normal((idx.size, N))
    V[2] = 0.0
    # t_p >= -s_p / ||v_p||_K^2 keeps each term positive semidefinite
    n2 = np.array([fb.dual_block_norms(v)[m] ** 2 for v, m in zip(V, idx)])
    t = np.array([-0.9 * s[0] / n2[0], 4.0, 0.0, 0.3])
    H = factor_newton.LowRankHessian(fb, d, idx, s, t, V, ones_weight=0.7)
    assert H.solver == solver
    K = FactorBank.to_array(fb)
    dense = np.diag(d) + 0.7
    for p, m in enumerate(idx):
        r = K[m] @ V[p]
        dense += s[p] * K[m] + t[p] * np.outer(r, r)
    g = rng.standard_normal(N)
    ridge = np.full(N, 1e-3)
    x = H.solve(-g, ridge)
    assert np.linalg.norm((dense + np.diag(ridge)) @ x + g) <= 1e-8 * np.linalg.norm(g)
    delta, nu = H.solve_constrained(g, ridge)
    assert abs(delta.sum()) <= 1e-10 * np.linalg.norm(delta)
    assert np.linalg.norm((dense + np.diag(ridge)) @ delta + nu + g) <= 1e-8 * np.linalg.norm(g)


def test_the_solver_is_chosen_by_its_cost_estimate():
    assert factor_newton.choose_solver(30000, 300) == "woodbury"
    assert factor_newton.choose_solver(30000, 3000) == "cg"  # N R^2 / 8 > 50 * 2 N R
    assert factor_newton.choose_solver(1000, 600) == "cg"  # R > N / 2
    assert factor_newton.choose_solver(1000, 0) == "woodbury"


@functools.lru_cache(maxsize=None)
def a9a_groups(n: int) -> tuple[FactorBank, np.ndarray]:
    """Linear kernels on six groups of the 123 binary a9a features, n points (exact factors)."""
    ds = load_builtin("a9a")
    X = ds.X[:n].toarray()
    groups = np.array_split(np.arange(X.shape[1]), 6)
    return _linear_blocks(X, [list(g) for g in groups]), ds.y[:n].astype(np.float64)


@pytest.mark.parametrize(
    "engine,loss,reg",
    [
        (Spicy(tol=1e-6, method="one_step"), "logistic", "elasticnet"),
        pytest.param(Spicy(tol=1e-6, method="iterative"), "hinge", "l1", marks=pytest.mark.slow),
        (Spicy(tol=1e-6, method="iterative"), "logistic", "l1"),
        (Proximal(tol=1e-4, max_iter=300), "logistic", "l1"),
    ],
    ids=["spicy-one_step", "spicy-iterative-hinge", "spicy-iterative-logistic", "proximal"],
)
def test_no_n_by_n_array_is_allocated_on_the_factor_path(engine, loss, reg, no_dense_helpers):
    """N = 3000: one N x N float64 array is 72 MB; the solve must peak below a quarter of it."""
    fb, y = a9a_groups(3000)
    N = fb.n_samples
    C_max = Spicy().solve(_problem(fb, y, loss, reg, 1e6)).C_max
    problem = _problem(fb, y, loss, reg, 0.1 * C_max)
    engine.solve(problem)  # compile and warm up outside the measurement
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        res = engine.solve(problem)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.isfinite(res.objective) and res.gap <= 1e-2 and _solvers(res) <= LOW_RANK_SOLVERS
    assert peak < N * N * 8 / 4, f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mklkit.result.ConvergenceWarning")
@pytest.mark.parametrize("solver", ["woodbury", "cg"])
@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_spicy_on_a_pivoted_cholesky_bank_of_a9a_follows_the_dense_bank(loss, solver, monkeypatch):
    """a9a, N = 2000, three Gaussian kernels factored by pivoted Cholesky (approximate
    factors, so the dense bank is the factors' product), block 1-norm at 0.1 C_max.
    Logistic: the same optimum to 1e-6.  Hinge (which needs hundreds of Newton steps
    to reach small gaps here): after 12 outer iterations, the same objective to 1e-6."""
    monkeypatch.setattr(factor_newton, "SOLVER", solver)
    ds = load_builtin("a9a")
    order = np.random.default_rng(0).permutation(ds.n_samples)[:2000]
    X, y = ds.X[np.sort(order)], ds.y[np.sort(order)].astype(np.float64)
    fb = build_factor_bank([{"function": "rbf", "width": [10.0, 20.0, 40.0]}], X, tol=1e-3)
    K = fb.to_array()
    C = 0.1 * Spicy().solve(Problem(K=fb, y=y, loss=COMPONENTS[loss](), regularizer=L1(), C=1e6)).C_max
    engine = Spicy(tol=1e-8) if loss == "logistic" else Spicy(tol=1e-12, max_iter=12)
    dense = engine.solve(Problem(K=K, y=y, loss=COMPONENTS[loss](), regularizer=L1(), C=C))
    del K
    res = engine.solve(Problem(K=fb, y=y, loss=COMPONENTS[loss](), regularizer=L1(), C=C))
    if loss == "logistic":
        assert dense.converged and res.converged
    assert _rel(res.objective, dense.objective) <= 1e-6


@pytest.mark.parametrize("loss,reg", [("hinge", "l1"), ("logistic", "elasticnet")])
def test_auto_solves_a_factor_bank_with_bcd(loss, reg, monkeypatch):
    """auto delegates a factor bank to bcd, and its answer is the dense optimum (and Clarabel's)."""
    from mklkit.pipeline.choose import Auto

    res, _ = _check_agreement(Auto(tol=1e-8), "sonar_rbf", loss, reg, 0.3, monkeypatch)
    assert res.message.startswith("auto -> bcd (a factor bank")
    assert res.engine == "auto"
    # on the dense bank of the same kernels auto does not pick bcd (it needs factors)
    fb, y = data("sonar_rbf")
    assert Auto().choose(_problem(fb.to_array(), y, loss, reg, 0.3))[0].name != "bcd"
