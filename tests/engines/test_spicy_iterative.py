"""The iterative SpicyMKL method (§3–4.2) on real data, against cvxpy + Clarabel.

Every built-in loss with every regularizer reaches the conic optimum of the
same objective; the fast suite keeps at least one case of each loss and of
each regularizer, the full grid is marked slow.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from mklkit.components.base import Loss
from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.params import ParamError
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.engines.spicy import Spicy
from mklkit.engines.spicy.iterative import GAMMA0_SCALE
from mklkit.engines.spicy.loss_terms import _ConstrainedLoss
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.conic_reference import primal_objective_numpy, solve_reference
    from tests.engines.certificates import assert_certified, assert_dual_feasible
    from tests.engines.shared import liver, solve_stopped, sonar, sonar_points
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import primal_objective_numpy, solve_reference
    from engines.certificates import assert_certified, assert_dual_feasible
    from engines.shared import liver, solve_stopped, sonar, sonar_points

TOL = 1e-6  # engine tolerance on the relative duality gap
REL = 1e-4  # agreement with the conic reference
N_FAST = 60

LOSSES = {
    "hinge": (Hinge(), {}),
    "logistic": (Logistic(), {}),
    "squared": (Squared(), {}),
    "eps_insensitive": (EpsInsensitive(eps=0.1), {"eps": 0.1}),
}
REGULARIZERS = {
    "l1": (L1(), "l1", {}),
    "en0": (ElasticNet(lam=0.0), "elasticnet", {"lam": 0.0}),
    "en05": (ElasticNet(lam=0.5), "elasticnet", {"lam": 0.5}),
    "lq15": (Lq(q=1.5), "lq", {"q": 1.5}),
    "lq3": (Lq(q=3.0), "lq", {"q": 3.0}),
    "uniform": (Uniform(), "uniform", {}),
}
#: every loss and every regularizer at least once
FAST = [
    ("hinge", "l1"),
    ("logistic", "en05"),
    ("squared", "lq3"),
    ("eps_insensitive", "uniform"),
    ("hinge", "lq15"),
    ("logistic", "en0"),
    ("eps_insensitive", "l1"),
    ("squared", "l1"),
]
SLOW = [(lo, rg) for lo in LOSSES for rg in REGULARIZERS if (lo, rg) not in FAST]


def data_for(loss, n: int):
    return sonar(n) if loss.task == "classification" else liver(n)


@functools.lru_cache(maxsize=None)
def reference(loss_name: str, reg_key: str, C: float, n: int, bias: bool = True):
    loss, lp = LOSSES[loss_name]
    _, ref_name, rp = REGULARIZERS[reg_key]
    K, y = data_for(loss, n)
    return solve_reference(K, y, loss_name, ref_name, C, bias=bias, **lp, **rp)


def check_against_reference(res, pb, ref, loss_name, ref_name, params, tol=TOL):
    __tracebackhide__ = True
    K, y, C = pb.K, pb.y, pb.C
    assert_certified(res, K, y, ref, loss_name, ref_name, C, params, tol=tol, rel=REL, problem=pb)
    if loss_name in ("logistic", "squared"):
        # strictly convex in z: the predictions are unique
        z = np.einsum("mij,mj->i", K, res.alpha) + res.bias
        z_ref = np.einsum("mij,mj->i", K, ref.alpha) + ref.bias
        assert np.max(np.abs(z - z_ref)) <= 1e-3 * (1 + np.max(np.abs(z_ref)))
    w = res.kernel_weights
    assert np.all(w >= 0) and np.sum(w) == pytest.approx(1.0)
    assert np.all((w == 0) == (res.block_norms == 0))
    assert np.all(res.alpha[res.block_norms == 0] == 0)


def run_case(loss_name: str, reg_key: str, C: float, n: int):
    loss, lp = LOSSES[loss_name]
    reg, ref_name, rp = REGULARIZERS[reg_key]
    K, y = data_for(loss, n)
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=C)
    res = Spicy(tol=TOL, method="iterative", max_iter=100).solve(pb)
    ref = reference(loss_name, reg_key, C, n)
    check_against_reference(res, pb, ref, loss_name, ref_name, {**lp, **rp})
    return res


@pytest.mark.parametrize("loss_name,reg_key", FAST, ids=[f"{a}-{b}" for a, b in FAST])
def test_matches_conic_reference(loss_name, reg_key):
    res = run_case(loss_name, reg_key, 0.05, N_FAST)
    assert res.iterations <= 15


@pytest.mark.slow
@pytest.mark.parametrize("C", [0.05, 0.5])
@pytest.mark.parametrize("loss_name,reg_key", FAST + SLOW, ids=[f"{a}-{b}" for a, b in FAST + SLOW])
def test_matches_conic_reference_full_grid(loss_name, reg_key, C):
    run_case(loss_name, reg_key, C, 80)


def test_block_l1_gives_sparse_solution_certified_by_the_dual():
    """Zero blocks exactly where the projected dual point has ||rho||_{K_m} < C (eqs. 13, 21)."""
    K, y = sonar(N_FAST)
    C = 0.05
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=C)
    res = Spicy(tol=TOL).solve(pb)
    assert res.converged
    zero = res.block_norms == 0
    assert 0 < np.sum(zero) < K.shape[0]
    n = common.dual_block_norms(K, res.dual)
    assert np.all(n <= C * (1 + 1e-12))
    # active kernels sit on the boundary of the dual ball (up to the gap)
    assert np.all(n[~zero] >= C * (1 - 1e-2))


def test_without_bias_matches_conic_reference():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05, bias=False)
    res = Spicy(tol=TOL).solve(pb)
    assert res.bias == 0.0
    ref = solve_reference(K, y, "hinge", "l1", 0.05, bias=False)
    check_against_reference(res, pb, ref, "hinge", "l1", {})


def test_iterative_and_one_step_agree_on_a_smooth_pair():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.1)
    it = Spicy(tol=1e-8, method="iterative").solve(pb)
    one = Spicy(tol=1e-8).solve(pb)
    assert "gamma" in it.history[0] and "gamma" not in one.history[0]
    assert it.converged and one.converged
    assert it.objective == pytest.approx(one.objective, rel=1e-7)
    np.testing.assert_allclose(it.block_norms, one.block_norms, rtol=1e-3, atol=1e-6)


def test_squared_block_l1_is_the_same_problem():
    r"""SpicyMKL eqs. (5)-(6): the block 1-norm solution at C solves the squared block
    1-norm (SimpleMKL) problem with :math:`\tilde C = C/\sum_m\|\alpha^*_m\|_{K_m}`.

    Eq. (6) prints :math:`\tilde C = C\sum_m\|f^*_m\|`; the subgradient relation
    the paper gives next to it,
    :math:`\partial\tfrac12(\sum_m\|f_m\|)^2 = (\sum_m\|f_m\|)\,\partial\|f_m\|`,
    matches the two optimality conditions only with the division (the
    multiplied constant is checked to fail below).
    """
    K, y = sonar(N_FAST)
    C = 0.05
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=C)
    res = Spicy(tol=1e-8).solve(pb)
    assert res.converged
    total = float(np.sum(res.block_norms))
    assert total > 1.5  # the two candidate constants differ
    Ct = C / total
    ref = solve_reference(K, y, "hinge", "squared_l1", Ct)
    ours = primal_objective_numpy(K, y, res.alpha, res.bias, "hinge", "squared_l1", Ct)
    assert ours == pytest.approx(ref.objective, rel=1e-4)
    x_ref = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", ref.alpha, K, ref.alpha), 0))
    np.testing.assert_allclose(res.block_norms, x_ref, atol=1e-3 * (1 + np.max(x_ref)))
    # and the converse: the squared problem's solution has the block 1-norm objective
    Pr = primal_objective_numpy(K, y, ref.alpha, ref.bias, "hinge", "l1", C)
    assert Pr == pytest.approx(res.objective, rel=1e-4)
    # with the constant as printed in eq. (6), alpha* is not optimal for (5)
    wrong = solve_reference(K, y, "hinge", "squared_l1", C * total)
    ours_wrong = primal_objective_numpy(K, y, res.alpha, res.bias, "hinge", "squared_l1", C * total)
    assert ours_wrong > wrong.objective * (1 + 1e-2)


# ---------------------------------------------------------------------------
# non-sparse KL regularizer, plugin losses
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss_name", ["hinge", "logistic", "eps_insensitive"])
def test_kl_converges_with_a_certified_gap(loss_name):
    loss, lp = LOSSES[loss_name]
    K, y = data_for(loss, N_FAST)
    pb = Problem(K=K, y=y, loss=loss, regularizer=KL(d0=1.0), C=0.05)
    res = Spicy(tol=TOL, method="iterative").solve(pb)
    assert res.converged and res.gap <= TOL
    P = common.primal_objective(pb, res.alpha, res.bias)
    D = assert_dual_feasible(pb, res.dual, res.dual_objective)
    assert P == pytest.approx(res.objective, rel=1e-12)
    assert (P - D) / abs(P) <= TOL
    if loss_name == "hinge":
        ref = solve_reference(K, y, "hinge", "kl", 0.05, d0=1.0)
        assert_certified(res, K, y, ref, "hinge", "kl", 0.05, {"d0": 1.0}, tol=TOL, rel=REL)


@pytest.mark.parametrize("reg_key", ["l1", "lq15"])
@pytest.mark.parametrize("loss_name", ["huber", "squared_hinge"])
def test_plugin_losses_need_no_engine_change(loss_name, reg_key):
    plugin = pytest.importorskip("mklkit_huber")
    loss = plugin.Huber(delta=0.5) if loss_name == "huber" else plugin.SquaredHinge()
    params = {"delta": 0.5} if loss_name == "huber" else {}
    reg, ref_name, rp = REGULARIZERS[reg_key]
    K, y = data_for(loss, N_FAST)
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=0.05)
    assert Spicy().supports(pb) is None
    res = Spicy(tol=TOL).solve(pb)
    ref = solve_reference(K, y, loss_name, ref_name, 0.05, **params, **rp)
    check_against_reference(res, pb, ref, loss_name, ref_name, {**params, **rp})


# ---------------------------------------------------------------------------
# the constrained form: sign of the penalty, multipliers
# ---------------------------------------------------------------------------
def test_constraint_penalty_has_the_sign_of_eq_32():
    r"""For the hinge loss the penalized loss terms are exactly those of eq. (32):
    :math:`-y\rho + \frac1{2\gamma}[\max(0, \xi - \gamma(1 - y\rho))^2 + \max(0, \zeta - \gamma y\rho)^2]`,
    i.e. :math:`\xi + \gamma h` with :math:`h_1 = -1 - yu`, :math:`h_2 = yu`, :math:`u = -\rho`
    (Table 2 / eq. 41 print :math:`\xi - \gamma h`)."""
    K, y = sonar(20)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.1)
    part = _ConstrainedLoss(pb, *[-b for b in common.dual_box(pb)][::-1])
    rng = np.random.default_rng(0)
    gamma = 3.7
    part.set_gamma(gamma)
    part.xi = rng.uniform(0, 2, (y.size, 2))
    rho = y * rng.uniform(-0.5, 1.5, y.size)
    xi, zeta = part.xi[:, 0], part.xi[:, 1]
    eq32 = -y * rho + (np.maximum(0, xi - gamma * (1 - y * rho)) ** 2 + np.maximum(0, zeta - gamma * y * rho) ** 2) / (
        2 * gamma
    )
    assert part.value(rho) == pytest.approx(np.sum(eq32), rel=1e-13)
    wrong = -y * rho + (np.maximum(0, xi + gamma * (1 - y * rho)) ** 2 + np.maximum(0, zeta + gamma * y * rho) ** 2) / (
        2 * gamma
    )
    assert part.value(rho) != pytest.approx(np.sum(wrong), rel=1e-3)
    # gradient and curvature in rho by central differences
    g, g_red, d, gu2 = part.derivs(rho)
    np.testing.assert_array_equal(g, g_red)
    h = 1e-6
    for i in range(0, y.size, 4):
        e = np.zeros(y.size)
        e[i] = h
        fd = (part.value(rho + e) - part.value(rho - e)) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_multiplier_estimate_recovers_hinge_slacks():
    """Warm starts: xi from the predictions z are the hinge slack max(0, 1 - yz) and its mirror."""
    K, y = sonar(30)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.1)
    lo, hi = common.dual_box(pb)
    part = _ConstrainedLoss(pb, -hi, -lo)
    z = np.linspace(-2.0, 3.0, y.size)
    rho = part.estimate_multipliers(z, np.zeros(y.size))
    m = y * z
    np.testing.assert_allclose(part.xi[:, 0], np.maximum(0, 1 - m), atol=1e-6)
    np.testing.assert_allclose(part.xi[:, 1], np.maximum(0, m - 1), atol=1e-6)
    # the dual point is -l'(z): y on margin violators, 0 beyond the margin
    np.testing.assert_allclose(rho[m < 0.99], y[m < 0.99], atol=1e-6)
    np.testing.assert_allclose(rho[m > 1.01], 0.0, atol=1e-6)


def test_eps_insensitive_auxiliary_variable_is_minimized_out():
    """eq. (35): at the inner solution the auxiliary variable is max(0, -u) up to O(1/gamma)."""
    K, y = liver(N_FAST)
    pb = Problem(K=K, y=y, loss=EpsInsensitive(eps=0.1), regularizer=L1(), C=0.05)
    lo, hi = common.dual_box(pb)
    part = _ConstrainedLoss(pb, -hi, -lo)
    part.set_gamma(1e6)
    rho = np.linspace(-0.9, 0.9, y.size)
    part.begin(rho)
    np.testing.assert_allclose(part.ut[:, 0], np.maximum(0.0, rho), atol=1e-5)
    # psi(rho) = sum l*(y, -rho) = sum(-y rho + eps |rho|) up to O(1/gamma)
    assert part.value(rho) == pytest.approx(np.sum(-y * rho + 0.1 * np.abs(rho)), abs=1e-4)


# ---------------------------------------------------------------------------
# warm starts, history, callback, non-convergence, options
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [Hinge(), Logistic()], ids=["hinge", "logistic"])
def test_warm_start_reduces_iterations(loss):
    K, y = sonar(N_FAST)
    first = Spicy(tol=1e-6).solve(Problem(K=K, y=y, loss=loss, regularizer=L1(), C=0.05))
    pb = Problem(K=K, y=y, loss=loss, regularizer=L1(), C=0.045)
    cold = Spicy(tol=1e-6).solve(pb)
    warm = Spicy(tol=1e-6).solve(pb, warm_start=first)
    assert Spicy.supports_warm_start
    assert cold.converged and warm.converged
    assert warm.objective == pytest.approx(cold.objective, rel=1e-5)
    newton = [sum(h["newton_steps"] for h in r.history) for r in (cold, warm)]
    assert warm.iterations <= cold.iterations and newton[1] < newton[0]


def test_warm_start_of_the_one_step_method():
    K, y = sonar(N_FAST)
    first = Spicy(tol=1e-8).solve(Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.1))
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=0.09)
    cold = Spicy(tol=1e-8).solve(pb)
    warm = Spicy(tol=1e-8).solve(pb, warm_start=first)
    assert warm.converged and warm.iterations < cold.iterations
    assert warm.objective == pytest.approx(cold.objective, rel=1e-7)


def test_warm_start_must_fit_the_problem():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    other = Spicy().solve(Problem(K=K[:3], y=y, loss=Hinge(), regularizer=L1(), C=0.05))
    with pytest.raises(ValueError, match=r"warm_start.alpha has shape \(3, 60\)"):
        Spicy().solve(pb, warm_start=other)


def test_history_records():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    res = Spicy(tol=TOL, gamma_factor=5.0).solve(pb)
    assert res.engine == "spicy" and res.converged
    assert [h["iteration"] for h in res.history] == list(range(1, res.iterations + 1))
    for h in res.history:
        for key in (
            "objective",
            "dual_objective",
            "gap",
            "n_active",
            "time_s",
            "gamma",
            "gamma_bias",
            "newton_steps",
            "n_backtracks",
            "inner_grad",
            "bias",
        ):
            assert key in h and math.isfinite(h[key]), key
        assert h["inner_status"] in ("converged", "gap reached", "max_newton", "rounding", "line search failed")
        assert h["dual_objective"] <= h["objective"] + 1e-12 * abs(h["objective"])
    gammas = [h["gamma"] for h in res.history]
    assert gammas[0] == pytest.approx(GAMMA0_SCALE / 0.05)
    cap = GAMMA0_SCALE / 0.05 * Spicy().gamma_max_factor
    assert all(b == pytest.approx(min(5 * a, cap)) for a, b in zip(gammas, gammas[1:]))
    assert res.history[-1]["gap"] == res.gap
    assert res.history[-1]["n_active"] == res.active_set.size
    # the dual point is feasible: sum zero, inside the hinge box, inside the l1 ball
    assert abs(np.sum(res.dual)) <= 1e-12 * np.sum(np.abs(res.dual))
    assert np.all(y * res.dual >= 0) and np.all(y * res.dual <= 1)
    assert np.max(common.dual_block_norms(K, res.dual)) <= 0.05 * (1 + 1e-12)


def test_default_tolerance_is_the_papers():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=0.05)
    res = Spicy().solve(pb)
    assert res.converged and res.gap <= 1e-2
    tight = Spicy(tol=1e-8).solve(pb)
    assert tight.converged and tight.iterations >= res.iterations and tight.gap <= 1e-8


def test_max_iter_gives_status_and_warning():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        res = Spicy(tol=1e-12, max_iter=2).solve(pb)
    assert res.status == Status.MAX_ITER and not res.converged
    assert res.iterations == 2 and len(res.history) == 2
    assert res.gap > 1e-12 and math.isfinite(res.gap)
    assert res.dual_objective <= res.objective


def test_callback_stops_the_solve():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    res, seen = solve_stopped(Spicy(tol=1e-12), pb, 2)
    assert res.iterations == 2 and [s["iteration"] for s in seen] == [1, 2]


class NaNEnvelope(L1):
    """A broken regularizer whose envelope is NaN everywhere."""

    env = staticmethod(lambda y, C, p: np.full(y.shape, np.nan))


def test_nan_envelope_is_a_numerical_error_not_an_exception():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=NaNEnvelope(), C=0.05)
    with pytest.warns(ConvergenceWarning, match="non-finite"):
        res = Spicy(tol=TOL).solve(pb)
    assert res.status == Status.NUMERICAL_ERROR and not res.converged


class NoConjugateForm(Loss):
    """A loss with neither a smooth conjugate nor a constrained form."""

    name = "no_form"
    smooth_conjugate = False
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper = (staticmethod(f) for f in Hinge.jit)


def test_a_loss_without_either_form_is_refused():
    K, y = sonar(N_FAST)
    pb = Problem(K=K, y=y, loss=NoConjugateForm(), regularizer=L1(), C=0.1)
    reason = Spicy().supports(pb)
    assert "no_form" in reason and "constrained" in reason
    with pytest.raises(ValueError, match="no_form"):
        Spicy().solve(pb)


def test_options_are_validated():
    with pytest.raises(ParamError, match="method"):
        Spicy(method="newton")
    with pytest.raises(ParamError, match="gamma0"):
        Spicy(gamma0=0.0)
    with pytest.raises(ParamError, match="gamma_factor"):
        Spicy(gamma_factor=0.5)
    assert Spicy(gamma0=None).gamma0 is None
    names = [p.name for p in Spicy.params]
    for name in ("method", "gamma0", "gamma_factor", "gamma_max_factor", "gamma_bias", "max_newton", "inner_tol"):
        assert name in names


def test_gamma_options_change_the_path_not_the_solution():
    K, y = liver(N_FAST)
    pb = Problem(K=K, y=y, loss=EpsInsensitive(eps=0.1), regularizer=L1(), C=0.05)
    a = Spicy(tol=TOL).solve(pb)
    b = Spicy(tol=TOL, gamma0=2.0, gamma_factor=3.0, gamma_bias=10.0).solve(pb)
    assert a.converged and b.converged
    assert a.history[0]["gamma"] != b.history[0]["gamma"]
    assert b.history[0]["gamma_bias"] == pytest.approx(10 * b.history[0]["gamma"])
    assert a.objective == pytest.approx(b.objective, rel=2 * TOL)


# ---------------------------------------------------------------------------
# scale: the SpicyMKL §6.1 bank, outer iterations against the paper's Table 4
# ---------------------------------------------------------------------------
#: Table 4, Spicy columns (hinge, logistic) for sonar at C = 0.005, 0.05, 0.5.
TABLE4_SONAR = {"hinge": (35.2, 16.6, 7.7), "logistic": (27.2, 16.8, 4.2)}


@pytest.mark.slow
@pytest.mark.parametrize("loss_name", ["hinge", "logistic"])
def test_sonar_simplemkl_bank_outer_iterations(loss_name):
    from mklkit.kernels import KernelBank

    X, y = sonar_points(166)
    K = KernelBank.build(X, "simplemkl").K
    loss = LOSSES[loss_name][0]
    for C, paper in zip((0.005, 0.05, 0.5), TABLE4_SONAR[loss_name]):
        pb = Problem(K=K, y=y, loss=loss, regularizer=L1(), C=C)
        res = Spicy().solve(pb)
        assert res.converged and res.gap <= 1e-2
        assert res.iterations <= math.ceil(paper)
        assert res.objective == pytest.approx(common.primal_objective(pb, res.alpha, res.bias), rel=1e-10)
