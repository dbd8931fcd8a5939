"""The one-step SpicyMKL method (§4.3) against cvxpy + Clarabel on real data."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.params import ParamError
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.engines.spicy import Spicy
from mklkit.plugins import get_registry
from mklkit.engines.spicy.start import _centre, initial_dual
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.engines.certificates import assert_certified, assert_dual_feasible
    from tests.engines.shared import assert_incumbents, liver, reference, solve_stopped, sonar, sonar_points
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from engines.certificates import assert_certified, assert_dual_feasible
    from engines.shared import assert_incumbents, liver, reference, solve_stopped, sonar, sonar_points

TOL = 1e-8  # engine tolerance on the relative duality gap
REL = 1e-4  # agreement with the conic reference


def check_against_reference(res, pb, ref, loss, reg, **params):
    __tracebackhide__ = True
    K, y, C = pb.K, pb.y, pb.C
    # the gap of 1e-8, confirmed by weak duality against Clarabel's point
    assert_certified(res, K, y, ref, loss, reg, C, params, tol=TOL, rel=REL, problem=pb)
    # the loss is strictly convex in z and the block norms unique: both must agree
    z = np.einsum("mij,mj->i", K, res.alpha) + res.bias
    z_ref = np.einsum("mij,mj->i", K, ref.alpha) + ref.bias
    assert np.max(np.abs(z - z_ref)) <= 1e-3 * (1 + np.max(np.abs(z_ref)))
    x_ref = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", ref.alpha, K, ref.alpha), 0))
    assert np.max(np.abs(res.block_norms - x_ref)) <= 1e-3 * (1 + np.max(x_ref))
    # kernel weights: non-negative, sum 1, zero exactly on zero blocks
    w = res.kernel_weights
    assert np.all(w >= 0) and np.sum(w) == pytest.approx(1.0)
    assert np.all((w == 0) == (res.block_norms == 0))


@pytest.mark.parametrize("C", [0.05, 0.5])
@pytest.mark.parametrize("lam", [0.3, 0.7])
def test_logistic_elasticnet_matches_conic_reference(C, lam):
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=lam), C=C)
    res = Spicy(tol=TOL, max_iter=100).solve(pb)
    ref = reference("sonar", "logistic", "elasticnet", C, lam=lam)
    check_against_reference(res, pb, ref, "logistic", "elasticnet", lam=lam)
    # the multiplier of 1'rho = 0 is the bias (KKT condition of §4.3)
    assert res.history[-1]["multiplier"] == pytest.approx(res.bias, abs=1e-4)


def test_elasticnet_leaves_kernels_inactive():
    """With a large C some blocks are exactly zero (eq. 46: flat conjugate)."""
    K, y = sonar()
    C, lam = 0.8, 0.3
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=lam), C=C)
    res = Spicy(tol=TOL, max_iter=100).solve(pb)
    ref = reference("sonar", "logistic", "elasticnet", C, lam=lam)
    check_against_reference(res, pb, ref, "logistic", "elasticnet", lam=lam)
    inactive = res.block_norms == 0
    assert 0 < np.sum(inactive) < K.shape[0]
    assert np.all(res.alpha[inactive] == 0)
    # the dual point certifies it: ||rho||_{K_m} <= C(1 - lam) exactly on those
    n = common.dual_block_norms(K, res.dual)
    np.testing.assert_array_equal(n <= C * (1 - lam), inactive)


@pytest.mark.parametrize("C", [0.1, 1.0])
@pytest.mark.parametrize("q", [1.5, 2.0, 3.0])
def test_squared_lq_matches_conic_reference(q, C):
    K, y = liver()
    pb = Problem(K=K, y=y, loss=Squared(), regularizer=Lq(q=q), C=C)
    res = Spicy(tol=TOL, max_iter=100).solve(pb)
    ref = reference("liver", "squared", "lq", C, q=q)
    check_against_reference(res, pb, ref, "squared", "lq", q=q)


def test_squared_uniform_matches_conic_reference():
    K, y = liver()
    pb = Problem(K=K, y=y, loss=Squared(), regularizer=Uniform(), C=0.3)
    res = Spicy(tol=TOL).solve(pb)
    ref = reference("liver", "squared", "uniform", 0.3)
    check_against_reference(res, pb, ref, "squared", "uniform")


def test_without_bias_matches_conic_reference():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.2, bias=False)
    res = Spicy(tol=TOL).solve(pb)
    ref = reference("sonar", "logistic", "elasticnet", 0.2, bias=False, lam=0.5)
    assert res.bias == 0.0
    check_against_reference(res, pb, ref, "logistic", "elasticnet", lam=0.5)


def test_kl_regularizer_converges_with_certified_gap():
    """KL has a smooth conjugate that grows like exp(y^2/C^2): the start is scaled in."""
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=KL(d0=1.0), C=0.05)
    res = Spicy(tol=TOL).solve(pb)
    assert res.status == Status.CONVERGED and res.gap <= TOL
    P = common.primal_objective(pb, res.alpha, res.bias)
    D = assert_dual_feasible(pb, res.dual, res.dual_objective)
    assert P == pytest.approx(res.objective, rel=1e-12)
    assert (P - D) / abs(P) <= TOL
    ref = reference("sonar", "logistic", "kl", 0.05, d0=1.0)
    assert_certified(res, K, y, ref, "logistic", "kl", 0.05, {"d0": 1.0}, tol=TOL, rel=REL)


# ---------------------------------------------------------------------------
# reporting: history, result fields, the default tolerance
# ---------------------------------------------------------------------------
def test_history_and_result_fields():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.1)
    res = Spicy(tol=TOL).solve(pb)
    assert res.engine == "spicy" and res.converged
    assert len(res.history) == res.iterations >= 2
    assert [h["iteration"] for h in res.history] == list(range(1, res.iterations + 1))
    for h in res.history:
        for key in ("objective", "dual_objective", "gap", "n_active", "time_s", "step_size", "newton_decrement"):
            assert key in h and math.isfinite(h[key]), key
        assert 0 < h["step_size"] <= 1
        assert h["dual_objective"] <= h["objective"] + 1e-12 * abs(h["objective"])
    last = res.history[-1]
    assert_incumbents(res, res.history)
    # Newton converges fast near the optimum: full steps, vanishing decrement
    assert last["step_size"] == 1.0
    assert res.history[-1]["newton_decrement"] < res.history[0]["newton_decrement"]
    # dual objective never decreases along the iterations (a descent method on -D)
    D = [h["dual_objective"] for h in res.history]
    assert all(b >= a - 1e-12 * abs(a) for a, b in zip(D, D[1:]))
    assert np.sum(res.dual) == pytest.approx(0.0, abs=1e-12)
    assert res.alpha.shape == K.shape[:2] and res.time_s > 0


def test_default_tolerance_is_the_papers():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.1)
    res = Spicy().solve(pb)
    assert res.converged and res.gap <= 1e-2
    tight = Spicy(tol=1e-10).solve(pb)
    assert tight.iterations >= res.iterations and tight.gap <= 1e-10


# ---------------------------------------------------------------------------
# non-convergence, callback, unsupported problems, options
# ---------------------------------------------------------------------------
def test_max_iter_gives_status_and_warning():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.3), C=0.05)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        res = Spicy(tol=1e-10, max_iter=1).solve(pb)
    assert res.status == Status.MAX_ITER and not res.converged
    assert res.iterations == 1 and len(res.history) == 1
    assert res.gap > 1e-10 and math.isfinite(res.gap)
    assert res.dual_objective <= res.objective


def test_callback_stops_the_solve():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.3), C=0.05)
    res, seen = solve_stopped(Spicy(tol=1e-12), pb, 2)
    assert res.iterations == 2 and [s["iteration"] for s in seen] == [1, 2]


def test_callback_falsy_return_does_not_stop():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.3), C=0.05)
    calls = []
    res = Spicy(tol=TOL).solve(pb, callback=lambda s: calls.append(s["iteration"]))
    assert res.converged and calls == list(range(1, res.iterations + 1))


def test_failed_line_search_is_reported_as_stalled():
    """A Newton step that no trial step length makes acceptable ends the solve with status stalled.

    With one shrinking by 0.99 and an Armijo constant of 0.49, neither trial step of the first
    Newton step on this problem decreases F enough (with the defaults it converges)."""
    K, y = liver()
    pb = Problem(K=K, y=y, loss=Squared(), regularizer=Lq(q=1.5), C=0.1)
    strict = {"max_backtrack": 1, "backtrack": 0.99, "armijo": 0.49}
    with pytest.warns(ConvergenceWarning, match="line search failed"):
        res = Spicy(tol=TOL, method="one_step", **strict).solve(pb)
    assert res.status == Status.STALLED and res.iterations == 0 and not res.converged
    assert "line search failed at Newton step 1" in res.message
    assert math.isfinite(res.objective) and math.isfinite(res.gap)
    assert Spicy(tol=TOL, method="one_step").solve(pb).converged


class NaNConjugate(ElasticNet):
    """A broken regularizer whose conjugate is NaN everywhere."""

    conj = staticmethod(lambda y, C, p: np.full(y.shape, np.nan))


def test_nan_conjugate_is_a_numerical_error_not_an_exception():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=NaNConjugate(lam=0.5), C=0.1)
    with pytest.warns(ConvergenceWarning, match="non-finite"):
        res = Spicy(tol=TOL).solve(pb)
    assert res.status == Status.NUMERICAL_ERROR and not res.converged


@pytest.mark.parametrize(
    "loss,reg,names",
    [
        (Hinge(), ElasticNet(lam=0.5), ["hinge"]),
        (Logistic(), L1(), ["l1"]),
        (Logistic(), ElasticNet(lam=0.0), ["elasticnet(lam=0)"]),
        (EpsInsensitive(eps=0.1), Lq(q=2.0), ["eps_insensitive(eps=0.1)"]),
        (Hinge(), L1(), ["hinge", "l1"]),
    ],
    ids=["hinge", "l1", "elasticnet-lam0", "eps_insensitive", "hinge-l1"],
)
def test_forced_one_step_needs_smooth_conjugates(loss, reg, names):
    """method='one_step' refuses non-smooth conjugates and names them; 'auto' takes them."""
    K, _ = sonar()
    y = sonar()[1] if loss.task == "classification" else liver()[1]
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=0.1)
    reason = Spicy(method="one_step").supports(pb)
    assert isinstance(reason, str) and "one_step" in reason and "iterative" in reason
    for name in names:
        assert name in reason
    with pytest.raises(ValueError, match="cannot solve this problem.*one_step"):
        Spicy(method="one_step").solve(pb)
    assert Spicy().supports(pb) is None and not Spicy().uses_one_step(pb)


def test_supported_problems():
    K, y = sonar()
    for reg in (ElasticNet(lam=0.1), Lq(q=1.2), Uniform(), KL()):
        pb = Problem(K=K, y=y, loss=Logistic(), regularizer=reg, C=1.0)
        assert Spicy().supports(pb) is None
        assert Spicy().uses_one_step(pb) and not Spicy(method="iterative").uses_one_step(pb)


def test_engine_declaration():
    assert get_registry().get("engine", "spicy") is Spicy
    assert Spicy.name == "spicy" and Spicy.description
    names = [p.name for p in Spicy.params]
    assert names[:2] == ["tol", "max_iter"]
    with pytest.raises(ParamError, match="tol"):
        Spicy(tol=0.0)
    with pytest.raises(ParamError, match="armijo"):
        Spicy(armijo=0.7)
    with pytest.raises(ParamError, match="max_iter"):
        Spicy(max_iter=0)


# ---------------------------------------------------------------------------
# the feasible start
# ---------------------------------------------------------------------------
def test_initial_dual_logistic_is_class_balanced():
    y = np.array([1.0, 1.0, 1.0, -1.0, -1.0])
    loss = Logistic()
    lo = loss.jit.conj_lower(y, loss.param_vector)
    hi = loss.jit.conj_upper(y, loss.param_vector)
    rho = initial_dual(lo, hi, bias=True)
    np.testing.assert_allclose(rho, np.where(y > 0, 2 / 5, -3 / 5), atol=1e-12)
    assert np.all((y * rho > 0) & (y * rho < 1))
    assert abs(np.sum(rho)) < 1e-14


def test_initial_dual_unbounded_and_no_bias():
    y = np.array([0.3, -2.0, 1.0])
    loss = Squared()
    lo = loss.jit.conj_lower(y, loss.param_vector)
    hi = loss.jit.conj_upper(y, loss.param_vector)
    np.testing.assert_allclose(initial_dual(lo, hi, bias=True), 0.0, atol=1e-12)
    yc = np.array([1.0, -1.0, 1.0])
    lg = Logistic()
    r = initial_dual(lg.jit.conj_lower(yc, lg.param_vector), lg.jit.conj_upper(yc, lg.param_vector), bias=False)
    np.testing.assert_allclose(r, 0.5 * yc)


def test_initial_dual_infeasible_raises():
    lo = np.array([-1.0, -1.0])  # one class only: y*rho in (0, 1) for all i
    hi = np.array([0.0, 0.0])
    with pytest.raises(ValueError, match="sum"):
        initial_dual(lo, hi, bias=True)


def test_centring_keeps_the_dual_point_inside():
    """Removing the rounding in 1'rho must not push a coordinate at the boundary out."""
    a, b = np.array([0.0, 0.0, -1.0, -1.0]), np.array([1.0, 1.0, 0.0, 0.0])
    rho = np.array([1e-19, 0.5, -0.2, -0.3 + 1e-15])  # the sum is 1e-15, by rounding
    assert (rho - np.mean(rho))[0] < a[0]  # the plain mean shift leaves the box
    out = _centre(rho, a, b)
    assert np.all((a < out) & (out < b))
    assert out[0] == rho[0]  # the boundary coordinate stays
    assert abs(np.sum(out)) <= 1e-16
    # the usual case is the plain mean shift
    r2 = np.array([0.3, 0.6, -0.45, -0.45 + 1e-16])
    np.testing.assert_array_equal(_centre(r2, a, b), r2 - np.mean(r2))


def test_unnormalized_polynomial_kernel_converges():
    """A degree-3 polynomial kernel without normalization (entries up to 6e4, wine).

    The Newton steps drive some dual coordinates to within 1e-19 of the
    boundary of the logistic conjugate's domain (or onto it: ``y rho = 0``,
    possibly ``-0.0``, which is feasible since ``0 log 0 = 0``); re-centring
    them by the mean once pushed one outside, which made the dual function
    infinite and ended the solve with a ``non-finite objective``.
    """
    from sklearn.datasets import load_wine

    from mklkit.data import Standardizer
    from mklkit.kernels import KernelBank

    X, y = load_wine(return_X_y=True)
    K = KernelBank.build(Standardizer().fit_transform(X), [{"function": "poly", "degree": 3}], normalize="none").K
    for cls in (0, 1):
        pb = Problem(K=K, y=np.where(y == cls, 1.0, -1.0), loss=Logistic(), regularizer=ElasticNet(), C=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            res = Spicy().solve(pb)
        assert res.status == Status.CONVERGED, res.message
        assert math.isfinite(res.objective) and 0.0 <= res.gap <= 1e-2
        # in the closed domain 0 <= y rho <= 1, with D(rho) finite: the certificate holds
        D = assert_dual_feasible(pb, res.dual, res.dual_objective)
        P = common.primal_objective(pb, res.alpha, res.bias)
        assert P == pytest.approx(res.objective, rel=1e-10)
        assert 0.0 <= (P - D) / abs(P) <= 1e-2


def test_logistic_dual_point_on_the_boundary_is_feasible():
    """``y rho = 0`` and ``y rho = 1`` (``-0.0`` included) are in the logistic conjugate's
    domain: ``u log u + (1 - u) log(1 - u)`` is 0 there, and the dual objective is finite."""
    K, y = sonar(20)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=10.0)
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    rho = np.zeros(y.size)
    rho[neg] = -0.0  # y rho = +0.0 on the negatives
    rho[pos[0]], rho[neg[0]] = 1.0, -1.0  # y rho = 1: the other end
    rho[pos[1]] = -0.0  # y rho = -0.0 on a positive
    assert np.sum(rho) == 0.0 and np.signbit(rho[pos[1]])
    loss = Logistic()
    conj = loss.jit.conj(y, -rho, loss.param_vector)
    np.testing.assert_array_equal(conj, 0.0)
    D = assert_dual_feasible(pb, rho)
    assert D == -common.regularizer_conjugate(pb.regularizer, common.dual_block_norms(K, rho), pb.C)
    # one step outside is not: the dual objective is -inf there
    out = rho.copy()
    out[pos[1]], out[pos[2]] = -1e-12, 1e-12
    assert common.dual_objective(pb, out) == -math.inf


# ---------------------------------------------------------------------------
# scale: the SpicyMKL §6.1 bank (sonar, 1647 kernels)
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sonar_simplemkl_bank():
    from mklkit.kernels import KernelBank

    X, y = sonar_points(166)
    K = KernelBank.build(X, "simplemkl").K
    assert K.shape[0] == 1647
    for C in (0.005, 0.05, 0.5):
        pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=C)
        res = Spicy(tol=1e-6).solve(pb)
        assert res.converged and res.gap <= 1e-6
        assert res.objective == pytest.approx(common.primal_objective(pb, res.alpha, res.bias), rel=1e-10)
