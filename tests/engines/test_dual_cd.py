"""The ``dualcd`` engine: dual coordinate descent with shrinking on factor banks.

Against cvxpy + Clarabel (``tests/conic_reference.py``, weak duality and the
claimed gap checked with :func:`certificates.assert_certified`) and spicy on
the same bank; the primal and dual objectives evaluated again in plain numpy
(``test_bcd.check_certificate``).  Every loss with a piecewise-linear
conjugate (hinge, ε-insensitive, pinball) with every regularizer; without a
bias; integer sample weights against the rows repeated; a sparse bank
against the same factors dense; warm starts; the endings; ``auto``'s route.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mklkit
from mklkit.pipeline.choose import Auto
from mklkit.engines.dual_cd import DualCD
from mklkit.kernels.factor import FactorBank
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.engines.certificates import assert_certified
    from tests.engines.shared import assert_incumbents, reference, solve_stopped, sonar_points
    from tests.engines.test_bcd import DATA_C, check_certificate, eigen_data, group_bank, make
    from tests.engines.test_bcd_weights import _factored
    from tests.test_sample_weight import small  # noqa: F401 - a fixture
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from engines.certificates import assert_certified
    from engines.shared import assert_incumbents, reference, solve_stopped, sonar_points
    from engines.test_bcd import DATA_C, check_certificate, eigen_data, group_bank, make
    from engines.test_bcd_weights import _factored
    from test_sample_weight import small  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-8
LOSSES = ("hinge", "eps_insensitive", "pinball")
REGS = ("l1", "elasticnet", "lq", "uniform", "kl")
FAST = {
    ("hinge", "l1"),
    ("hinge", "elasticnet"),
    ("eps_insensitive", "l1"),
    ("pinball", "kl"),
    ("eps_insensitive", "uniform"),
    ("hinge", "lq"),
}
GRID = [
    pytest.param(loss, reg, id=f"{loss}-{reg}", marks=() if (loss, reg) in FAST else pytest.mark.slow)
    for loss in LOSSES
    for reg in REGS
]


def _solve(pb: Problem, **params) -> mklkit.SolveResult:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return DualCD(**{"tol": TOL, **params}).solve(pb)


@pytest.mark.parametrize("loss,reg", GRID)
def test_every_loss_and_regularizer_matches_conic_reference_and_spicy(loss, reg):
    pb, K, p = make(loss, reg)
    res = _solve(pb)
    check_certificate(res, pb, K, loss, reg, p)
    ref = reference(DATA_C[loss][0], loss, reg, pb.C, **p)
    assert_certified(res, K, pb.y, ref, loss, reg, pb.C, p, tol=TOL, problem=pb)
    spicy = get_registry().create("engine", {"name": "spicy", "tol": TOL}).solve(pb)
    assert spicy.converged, spicy.message
    assert res.objective == pytest.approx(spicy.objective, rel=1e-6)


@pytest.mark.parametrize(
    "loss,reg,frac", [("hinge", "l1", 0.3), ("hinge", "l1", 3.0), ("eps_insensitive", "elasticnet", 0.5)]
)
def test_without_bias_and_at_other_C(loss, reg, frac):
    """No bias (no constraint on the dual's sum), and C far from the grid's."""
    C = DATA_C[loss][1] * frac
    for bias in (False, True):
        pb, K, p = make(loss, reg, C=C, bias=bias)
        res = _solve(pb)
        check_certificate(res, pb, K, loss, reg, p)
        ref = reference(DATA_C[loss][0], loss, reg, C, bias=bias, **p)
        assert_certified(res, K, pb.y, ref, loss, reg, C, p, tol=TOL, problem=pb)


@pytest.mark.parametrize("loss", ["hinge", "eps_insensitive"])
def test_integer_weights_solve_the_repeated_rows(small, loss):  # noqa: F811 - the fixture
    """Sample weights w_i give the solution of the rows repeated w_i times."""
    reg, C = "l1", 0.5
    weighted, repeated, _, rep = _factored(small, loss, reg, C)
    a = _solve(weighted)
    b = _solve(repeated)
    assert a.converged and b.converged
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    np.testing.assert_allclose(a.block_norms, b.block_norms, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss", ["hinge", "eps_insensitive"])
def test_a_sparse_bank_gives_the_solution_of_the_same_factors_dense(loss):
    """Linear kernels on groups of sonar's features (the group lasso), factors in CSR."""
    X, y = sonar_points(80)
    if loss == "eps_insensitive":
        y = X[:, 0] - 0.5 * X[:, 7]
        X = X[:, 1:]
    r = get_registry()
    out = []
    for sparse in (False, True):
        pb = Problem(
            K=group_bank(X, 6, sparse=sparse),
            y=y,
            loss=r.create("loss", loss),
            regularizer=r.create("regularizer", "l1"),
            C=0.5,
        )
        out.append(_solve(pb))
    dense, sparse = out
    assert dense.converged and sparse.converged
    assert sparse.objective == pytest.approx(dense.objective, rel=1e-7)
    np.testing.assert_allclose(sparse.kernel_weights, dense.kernel_weights, atol=1e-5)


def test_warm_start_from_a_neighbouring_C():
    assert DualCD.supports_warm_start
    pb, K, p = make("hinge", "l1")
    first = _solve(make("hinge", "l1", C=0.6)[0])
    cold = _solve(pb)
    warm = DualCD(tol=TOL).solve(pb, warm_start=first)
    check_certificate(warm, pb, K, "hinge", "l1", p)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-7)
    assert sum(h["epochs"] for h in warm.history) < sum(h["epochs"] for h in cold.history)


def test_max_iter_gives_status_and_warning():
    pb, _, _ = make("hinge", "l1")
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        res = DualCD(tol=1e-12, max_iter=2).solve(pb)
    assert res.status == Status.MAX_ITER and not res.converged
    assert res.iterations == 2 and [h["iteration"] for h in res.history] == [1, 2]
    assert res.dual_objective <= res.objective
    assert_incumbents(res, res.history)


def test_callback_stops_the_solve():
    pb, _, _ = make("hinge", "elasticnet")
    res, seen = solve_stopped(DualCD(tol=1e-14), pb, 2)
    assert len(seen) == 2 and all("epochs" in rec for rec in seen)


def test_a_loss_without_a_linear_conjugate_is_refused_with_the_reason():
    pb, _, _ = make("logistic", "l1")
    reason = DualCD().supports(pb)
    assert reason is not None and "linear" in reason
    with pytest.raises(ValueError, match="dualcd"):
        DualCD().solve(pb)
    bank, K, y = eigen_data("sonar")
    on_array = Problem(
        K=K,
        y=y,
        loss=get_registry().create("loss", "hinge"),
        regularizer=get_registry().create("regularizer", "l1"),
        C=0.4,
    )
    assert DualCD().supports(on_array) is not None


def test_auto_takes_dualcd_for_a_hinge_loss_at_small_C_and_bcd_above():
    """On a factor bank: dualcd at C <= dualcd_max_ratio * C_max (0.05), bcd above it and for
    a smooth loss."""
    from mklkit.engines import common

    c_max = common.zero_solution(make("hinge", "l1")[0]).C_max
    small_C, K, p = make("hinge", "l1", C=0.04 * c_max)
    engine, why = Auto().choose(small_C)
    assert engine.name == "dualcd" and "C_max" in why, why
    res = Auto(tol=1e-6).solve(small_C)
    assert res.converged and res.history[-1]["engine"] == "dualcd"
    check_certificate(res, small_C, K, "hinge", "l1", p, tol=1e-6)
    assert Auto().choose(make("hinge", "l1", C=0.2 * c_max)[0])[0].name == "bcd"
    assert Auto(dualcd_max_ratio=0.5).choose(make("hinge", "l1", C=0.2 * c_max)[0])[0].name == "dualcd"
    assert Auto().choose(make("logistic", "l1")[0])[0].name == "bcd"


def test_a_factor_bank_with_a_kernel_of_rank_zero():
    """A kernel whose factor is empty never enters the passes and keeps weight 0."""
    bank, K, y = eigen_data("sonar")
    blocks = [bank.block(m).T for m in range(bank.shape[0])] + [np.zeros((y.size, 0))]
    pb = Problem(
        K=FactorBank.from_blocks(blocks),
        y=y,
        loss=get_registry().create("loss", "hinge"),
        regularizer=get_registry().create("regularizer", "elasticnet"),
        C=DATA_C["hinge"][1],
    )
    res = _solve(pb)
    assert res.converged and res.kernel_weights[-1] == 0.0
    ref, _, _ = make("hinge", "elasticnet")
    assert res.objective == pytest.approx(_solve(ref).objective, rel=1e-7)
