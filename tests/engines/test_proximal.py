"""The proximal-gradient engine against cvxpy + Clarabel and SpicyMKL on real data."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from mklkit.components.losses import Hinge, Logistic, Squared
from mklkit.components.params import ParamError
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.pipeline.choose import Auto
from mklkit.engines.proximal import Proximal
from mklkit.engines.proximal_objective import lipschitz_estimate, power_iteration
from mklkit.engines.spicy import Spicy
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.conic_reference import primal_objective_numpy
    from tests.engines.shared import assert_incumbents, DATA, reference, solve_stopped, sonar, sonar_points
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import primal_objective_numpy
    from engines.shared import assert_incumbents, DATA, reference, solve_stopped, sonar, sonar_points

TOL = 1e-8  # engine tolerance on the relative duality gap
REL = 1e-5  # objective agreement with the conic reference and with spicy


def make(data: str, loss, reg, C: float, bias: bool = True) -> Problem:
    K, y = DATA[data]()
    return Problem(K=K, y=y, loss=loss, regularizer=reg, C=C, bias=bias)


def support(norms: np.ndarray, rel: float = 1e-4) -> np.ndarray:
    """Kernels whose block norm is not negligible (tolerance for interior-point solutions)."""
    return np.flatnonzero(norms > rel * max(float(np.max(norms)), 1e-300))


def ref_norms(K: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))


def check_solution(res, pb: Problem, ref, loss: str, reg: str, **params) -> None:
    __tracebackhide__ = True
    K, y, C = pb.K, pb.y, pb.C
    assert res.status == Status.CONVERGED, res.message
    assert -1e-12 <= res.gap <= TOL
    assert res.objective == pytest.approx(ref.objective, rel=REL)
    # the reported primal is the primal at the returned (alpha, b)
    P = primal_objective_numpy(K, y, res.alpha, res.bias, loss, reg, C, **params)
    assert P == pytest.approx(res.objective, rel=1e-10)
    # and the reported dual is the dual at the returned, feasible dual point
    assert common.dual_objective(pb, res.dual) == pytest.approx(res.dual_objective, rel=1e-10, abs=1e-12)
    if pb.bias:
        assert abs(np.sum(res.dual)) <= 1e-10 * np.sum(np.abs(res.dual))
    # predictions and block norms agree with the reference
    z = np.einsum("mij,mj->i", K, res.alpha) + res.bias
    z_ref = np.einsum("mij,mj->i", K, ref.alpha) + ref.bias
    assert np.max(np.abs(z - z_ref)) <= 1e-3 * (1 + np.max(np.abs(z_ref)))
    x_ref = ref_norms(K, ref.alpha)
    assert np.max(np.abs(res.block_norms - x_ref)) <= 1e-3 * (1 + np.max(x_ref))
    if pb.regularizer.sparse:
        np.testing.assert_array_equal(res.active_set, support(x_ref))
    w = res.kernel_weights
    assert np.all(w >= 0) and np.sum(w) == pytest.approx(1.0)
    assert np.all((w == 0) == (res.block_norms == 0))


CASES = [
    ("liver", "squared", "l1", 2.0, {}),
    ("liver", "squared", "elasticnet", 0.5, {"lam": 0.5}),
    ("liver", "squared", "lq", 0.3, {"q": 1.5}),
    ("liver", "squared", "uniform", 0.3, {}),
    ("sonar", "logistic", "l1", 0.1, {}),
    ("sonar", "logistic", "elasticnet", 0.1, {"lam": 0.5}),
]

LOSSES = {"squared": Squared, "logistic": Logistic}
REGS = {"l1": L1, "elasticnet": ElasticNet, "lq": Lq, "uniform": Uniform}


@pytest.mark.parametrize("data,loss,reg,C,params", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_matches_conic_reference_and_spicy(data, loss, reg, C, params):
    pb = make(data, LOSSES[loss](), REGS[reg](**params), C)
    res = Proximal(tol=TOL).solve(pb)
    ref = reference(data, loss, reg, C, **params)
    check_solution(res, pb, ref, loss, reg, **params)
    if Spicy().supports(pb) is None:
        sp = Spicy(tol=TOL).solve(pb)
        assert sp.converged, sp.message
        assert res.objective == pytest.approx(sp.objective, rel=REL)
        if pb.regularizer.sparse:
            np.testing.assert_array_equal(res.active_set, support(sp.block_norms))


def test_sparse_solution_is_certified_by_the_dual_point():
    """Zero blocks are exactly zero, and the dual point shows why: ||rho||_K <= C."""
    pb = make("sonar", Logistic(), L1(), 0.1)
    res = Proximal(tol=TOL).solve(pb)
    zero = res.block_norms == 0
    assert 0 < np.sum(zero) < pb.n_kernels
    assert np.all(res.alpha[zero] == 0)
    n = common.dual_block_norms(pb.K, res.dual)
    assert np.all(n <= pb.C * (1 + 1e-12))
    # active blocks sit on the boundary of the dual ball (optimality of l1)
    np.testing.assert_allclose(n[~zero], pb.C, rtol=1e-3)


def test_without_bias_matches_conic_reference():
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.2, bias=False)
    res = Proximal(tol=TOL).solve(pb)
    ref = reference("sonar", "logistic", "elasticnet", 0.2, bias=False, lam=0.5)
    assert res.bias == 0.0
    check_solution(res, pb, ref, "logistic", "elasticnet", lam=0.5)


def test_mu_term_is_in_objective_and_dual():
    r"""l1 + mu||f||^2 is elastic net with C' = C + 2 mu and lam' = 2 mu / C' (Remark 1)."""
    C, mu = 0.1, 0.05
    pb = make("sonar", Logistic(), L1(), C)
    res = Proximal(tol=TOL, mu=mu).solve(pb)
    assert res.converged and -1e-12 <= res.gap <= TOL
    Cp = C + 2 * mu
    ref = reference("sonar", "logistic", "elasticnet", Cp, lam=2 * mu / Cp)
    assert res.objective == pytest.approx(ref.objective, rel=REL)
    x = res.block_norms
    P = primal_objective_numpy(pb.K, pb.y, res.alpha, res.bias, "logistic", "l1", C)
    assert P + mu * float(x @ x) == pytest.approx(res.objective, rel=1e-10)
    # without the term the same point is worse for the plain l1 problem
    plain = Proximal(tol=TOL).solve(pb)
    assert plain.objective < P


# ---------------------------------------------------------------------------
# iteration variants
# ---------------------------------------------------------------------------
def test_plain_and_accelerated_iterations_converge_to_the_same_point():
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    fast = Proximal(tol=1e-7).solve(pb)
    plain = Proximal(tol=1e-7, accelerated=False).solve(pb)
    assert fast.converged and plain.converged
    assert plain.objective == pytest.approx(fast.objective, rel=1e-6)
    assert all(h["momentum"] == 0.0 for h in plain.history)
    assert any(h["momentum"] > 0.5 for h in fast.history)
    assert fast.iterations < plain.iterations


def test_plain_iteration_decreases_the_objective_monotonically():
    """Without momentum every accepted step passes the sufficient-decrease test."""
    pb = make("liver", Squared(), L1(), 2.0)
    res = Proximal(tol=TOL, accelerated=False, gap_every=1, max_iter=300).solve(pb)
    P = [h["objective"] for h in res.history]
    assert all(b <= a + 1e-12 * abs(a) for a, b in zip(P, P[1:]))


def test_gradient_restart_fires_and_helps():
    pb = make("sonar", Logistic(), L1(), 0.1)
    on = Proximal(tol=TOL).solve(pb)
    off = Proximal(tol=TOL, restart="none", max_iter=50000).solve(pb)
    assert on.converged and off.converged
    assert sum(h["n_restarts"] for h in on.history) > 0
    assert sum(h["n_restarts"] for h in off.history) == 0
    assert on.iterations < off.iterations
    assert on.objective == pytest.approx(off.objective, rel=1e-6)


@pytest.mark.parametrize("step", ["lipschitz", "backtracking", "adaptive"])
def test_step_rules_agree(step):
    pb = make("liver", Squared(), ElasticNet(lam=0.5), 0.5)
    res = Proximal(tol=TOL, step=step).solve(pb)
    ref = reference("liver", "squared", "elasticnet", 0.5, lam=0.5)
    assert res.converged and res.objective == pytest.approx(ref.objective, rel=REL)
    assert res.history[-1]["step_rule"] == step


def test_lipschitz_step_is_the_bound():
    """With the bound the step never changes: the sufficient-decrease test always holds."""
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    res = Proximal(tol=1e-6, step="lipschitz").solve(pb)
    S = pb.K.sum(axis=0)
    lam_s = np.linalg.eigvalsh(S)[-1]
    omega = pb.n_samples / lam_s
    lam = np.linalg.eigvalsh(S + 1.0 / omega)[-1]
    steps = {h["step_size"] for h in res.history}
    assert len(steps) == 1
    (eta,) = steps
    assert 1.0 / eta == pytest.approx(0.25 * lam * 1.02, rel=1e-4)
    assert sum(h["n_backtracks"] for h in res.history) == 0


class UnboundedCurvature(Squared):
    """The squared loss declaring no Lipschitz bound: forces back-tracking."""

    name = "squared_unbounded"

    def deriv_lipschitz(self) -> float:
        return math.inf


def test_unknown_lipschitz_bound_uses_backtracking():
    pb = make("liver", UnboundedCurvature(), Lq(q=1.5), 0.3)
    res = Proximal(tol=TOL, step="lipschitz").solve(pb)
    ref = reference("liver", "squared", "lq", 0.3, q=1.5)
    assert res.converged and res.objective == pytest.approx(ref.objective, rel=REL)
    assert res.history[-1]["step_rule"] == "backtracking"


def test_power_iteration_and_lipschitz_estimate():
    K, _ = sonar()
    S = K.sum(axis=0)
    exact = np.linalg.eigvalsh(S)[-1]
    assert power_iteration(S) == pytest.approx(exact, rel=1e-5)
    assert power_iteration(S) <= exact * (1 + 1e-12)
    lam, omega = lipschitz_estimate(S, bias=True)
    assert omega == pytest.approx(S.shape[0] / exact, rel=1e-5)
    assert lam == pytest.approx(np.linalg.eigvalsh(S + 1.0 / omega)[-1], rel=1e-5)
    assert lam <= 2 * exact * (1 + 1e-6)
    assert lipschitz_estimate(S, bias=False) == (pytest.approx(exact, rel=1e-5), 1.0)


def test_screening_skips_work_without_changing_the_iterates():
    pb = make("sonar", Logistic(), L1(), 0.1)
    on = Proximal(tol=TOL).solve(pb)
    off = Proximal(tol=TOL, screening=False).solve(pb)
    assert on.iterations == off.iterations
    assert on.objective == pytest.approx(off.objective, rel=1e-12)
    np.testing.assert_allclose(on.alpha, off.alpha, rtol=1e-9, atol=1e-12)
    work_on = sum(h["n_computed"] for h in on.history)
    work_off = sum(h["n_computed"] for h in off.history)
    assert work_off == on.iterations * pb.n_kernels
    assert work_on < 0.7 * work_off


def test_screening_never_skips_for_non_sparse_regularizers():
    pb = make("liver", Squared(), Uniform(), 0.3)
    res = Proximal(tol=1e-6).solve(pb)
    assert res.converged
    # after the first step every block is non-zero and computed every iteration
    assert res.history[-1]["n_computed"] == res.history[-1]["n_active"] * 10


# ---------------------------------------------------------------------------
# warm start, non-convergence, callback, errors
# ---------------------------------------------------------------------------
def test_warm_start_from_a_neighbouring_C():
    assert Proximal.supports_warm_start
    first = Proximal(tol=TOL).solve(make("sonar", Logistic(), L1(), 0.12))
    pb = make("sonar", Logistic(), L1(), 0.1)
    cold = Proximal(tol=TOL).solve(pb)
    warm = Proximal(tol=TOL).solve(pb, warm_start=first)
    assert warm.converged and warm.objective == pytest.approx(cold.objective, rel=1e-7)
    assert warm.iterations < cold.iterations
    # from its own solution the solve stops at once
    again = Proximal(tol=1e-6).solve(pb, warm_start=cold)
    assert again.converged and again.iterations == 0


def test_warm_start_of_the_wrong_shape_raises():
    pb = make("sonar", Logistic(), L1(), 0.1)
    res = Proximal(tol=1e-2).solve(pb)
    bad = dataclasses.replace(res, alpha=res.alpha[:, :10])
    with pytest.raises(ValueError, match=r"warm_start.alpha has shape \(10, 10\)"):
        Proximal().solve(pb, warm_start=bad)


def test_max_iter_gives_status_and_warning():
    pb = make("sonar", Logistic(), L1(), 0.1)
    with pytest.warns(ConvergenceWarning, match="max_iter=25"):
        res = Proximal(tol=1e-10, max_iter=25).solve(pb)
    assert res.status == Status.MAX_ITER and not res.converged
    assert res.iterations == 25
    assert [h["iteration"] for h in res.history] == [10, 20, 25]
    assert res.gap > 1e-10 and math.isfinite(res.gap)
    assert res.dual_objective <= res.objective
    P = primal_objective_numpy(pb.K, pb.y, res.alpha, res.bias, "logistic", "l1", pb.C)
    assert P == pytest.approx(res.objective, rel=1e-10)


def test_callback_stops_the_solve():
    pb = make("sonar", Logistic(), L1(), 0.1)
    res, seen = solve_stopped(Proximal(tol=1e-12), pb, 30)
    assert res.iterations == 30 and [s["iteration"] for s in seen] == [10, 20, 30]


def test_callback_falsy_return_does_not_stop():
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    calls = []
    res = Proximal(tol=TOL, gap_every=5).solve(pb, callback=lambda s: calls.append(s["iteration"]))
    assert res.converged and calls == list(range(5, res.iterations + 1, 5))
    assert calls[-1] == res.iterations


def test_history_records():
    pb = make("sonar", Logistic(), L1(), 0.1)
    res = Proximal(tol=1e-6).solve(pb)
    assert res.engine == "proximal" and len(res.history) >= 2
    for h in res.history:
        for key in (
            "objective",
            "dual_objective",
            "gap",
            "n_active",
            "time_s",
            "step_size",
            "momentum",
            "n_restarts",
            "n_backtracks",
            "n_computed",
            "bias",
        ):
            assert key in h and math.isfinite(h[key]), key
        assert h["dual_objective"] <= h["objective"] + 1e-12 * abs(h["objective"])
    last = res.history[-1]
    assert_incumbents(res, res.history)
    assert last["bias"] == res.bias and last["n_active"] == res.active_set.size


class NaNProx(ElasticNet):
    """A broken regularizer whose prox is NaN everywhere."""

    name = "nan_prox"
    prox = staticmethod(lambda v, C, p: np.full(v.shape, np.nan))


def test_nan_prox_is_a_numerical_error_not_an_exception():
    pb = make("sonar", Logistic(), NaNProx(lam=0.5), 0.1)
    with pytest.warns(ConvergenceWarning, match="non-finite"):
        res = Proximal(tol=TOL).solve(pb)
    assert res.status == Status.NUMERICAL_ERROR and res.iterations == 0
    assert math.isfinite(res.objective)


class TooFlat(Logistic):
    """A logistic loss claiming a far too small curvature bound."""

    name = "logistic_too_flat"

    def deriv_lipschitz(self) -> float:
        return 1e-9


def test_failed_sufficient_decrease_is_reported_as_stalled():
    pb = make("sonar", TooFlat(), ElasticNet(lam=0.5), 0.1)
    with pytest.warns(ConvergenceWarning, match="sufficient-decrease"):
        res = Proximal(tol=TOL, step="lipschitz", max_backtrack=2).solve(pb)
    assert res.status == Status.STALLED and res.iterations == 0
    assert math.isfinite(res.objective) and math.isfinite(res.gap)
    # with enough back-tracking the same bound is repaired
    ok = Proximal(tol=1e-6, step="lipschitz").solve(pb)
    assert ok.converged and sum(h["n_backtracks"] for h in ok.history) > 0


def test_hinge_is_unsupported_with_a_reason():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.1)
    reason = Proximal().supports(pb)
    assert isinstance(reason, str) and "hinge" in reason and "spicy" in reason
    with pytest.raises(ValueError, match="hinge is not differentiable"):
        Proximal().solve(pb)


def test_huber_plugin_loss():
    huber = pytest.importorskip("mklkit_huber")
    pb = make("liver", huber.Huber(delta=0.5), ElasticNet(lam=0.5), 0.3)
    assert Proximal().supports(pb) is None
    res = Proximal(tol=TOL).solve(pb)
    assert res.converged and -1e-12 <= res.gap <= TOL
    z = np.einsum("mij,mj->i", pb.K, res.alpha) + res.bias
    r = np.abs(z - pb.y)
    loss = np.where(r <= 0.5, 0.5 * r**2, 0.5 * (r - 0.25))
    x = ref_norms(pb.K, res.alpha)
    P = np.sum(loss) + 0.3 * np.sum(0.5 * x + 0.25 * x**2)
    assert P == pytest.approx(res.objective, rel=1e-10)
    # the dual point stays inside the conjugate's domain |rho| <= delta
    assert np.max(np.abs(res.dual)) <= 0.5


def test_kl_regularizer_converges():
    pb = make("sonar", Logistic(), KL(d0=1.0), 0.05)
    res = Proximal(tol=1e-6).solve(pb)
    assert res.converged and res.gap <= 1e-6
    sp = Spicy(tol=1e-10).solve(pb)
    assert res.objective == pytest.approx(sp.objective, rel=1e-5)


def test_engine_declaration_and_options():
    assert get_registry().get("engine", "auto") is Auto
    assert Proximal.name == "proximal" and Proximal.description
    names = [p.name for p in Proximal.params]
    assert names[:2] == ["tol", "max_iter"]
    for key in ("step", "accelerated", "restart", "mu", "gap_every"):
        assert key in names
    reg = get_registry()
    assert reg.get("engine", "proximal") is Proximal
    assert reg.get("engine", "auto") is Auto
    with pytest.raises(ParamError, match="step"):
        Proximal(step="newton")
    with pytest.raises(ParamError, match="gap_every"):
        Proximal(gap_every=0)
    with pytest.raises(ParamError, match="mu"):
        Proximal(mu=-1.0)
    with pytest.raises(ParamError, match="restart"):
        Proximal(restart="function")
    with pytest.raises(ParamError, match="accelerated"):
        Proximal(accelerated="yes")


# ---------------------------------------------------------------------------
# auto
# ---------------------------------------------------------------------------
class SmoothPrimalOnly(Squared):
    """A differentiable loss without a usable conjugate form: only proximal applies."""

    name = "squared_primal_only"
    smooth_conjugate = False


def test_auto_prefers_spicy_and_reports_it():
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    seen = []
    res = Auto(tol=1e-8).solve(pb, callback=seen.append)
    assert res.engine == "auto" and res.converged
    assert res.message.startswith("auto -> spicy")
    assert all(h["engine"] == "spicy" for h in res.history) and seen
    assert all(s["engine"] == "spicy" for s in seen)


def test_auto_uses_proximal_when_spicy_does_not_apply():
    pb = make("liver", SmoothPrimalOnly(), ElasticNet(lam=0.5), 0.5)
    assert Spicy().supports(pb) is not None
    res = Auto(tol=TOL).solve(pb)
    assert res.converged and res.message.startswith("auto -> proximal")
    ref = reference("liver", "squared", "elasticnet", 0.5, lam=0.5)
    assert res.objective == pytest.approx(ref.objective, rel=REL)


def test_auto_continues_a_stalled_spicy_solve_with_proximal(monkeypatch):
    import mklkit.pipeline.choose as auto_module

    class Stalls(Spicy):
        def solve(self, problem, callback=None, warm_start=None):
            res = Spicy(tol=self.tol, max_iter=1).solve(problem)
            return dataclasses.replace(res, status=Status.STALLED, message="spicy: stalled")

    monkeypatch.setattr(auto_module, "Spicy", Stalls)
    pb = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = Auto(tol=TOL).solve(pb)
    assert res.converged and "spicy then proximal" in res.message
    assert res.engine == "auto"
    engines = [h["engine"] for h in res.history]
    assert engines[0] == "spicy" and engines[-1] == "proximal"
    its = [h["iteration"] for h in res.history]
    assert its == sorted(its)


def test_auto_prefers_proximal_to_the_iterative_method_for_many_samples_and_few_kernels():
    pb = make("sonar", Logistic(), L1(), 0.1)  # N = 80, M = 10; l1: spicy's iterative method
    engine, why = Auto(proximal_min_samples=50, proximal_ratio=5).choose(pb)
    assert engine.name == "proximal" and "N = 80 samples" in why
    assert Auto(proximal_min_samples=50, proximal_ratio=10).choose(pb)[0].name == "spicy"
    assert Auto(proximal_min_samples=100, proximal_ratio=5).choose(pb)[0].name == "spicy"
    assert Auto().choose(pb)[0].name == "spicy"
    res = Auto(tol=TOL, proximal_min_samples=50, proximal_ratio=5).solve(pb)
    assert res.converged and res.message.startswith("auto -> proximal")
    assert all(h["engine"] == "proximal" for h in res.history)
    # spicy's one-step method (smooth conjugates) was faster at every size measured: it stays
    pb1 = make("sonar", Logistic(), ElasticNet(lam=0.5), 0.1)
    assert Auto(proximal_min_samples=1, proximal_ratio=0.0).choose(pb1)[0].name == "spicy"


class NoWay(Hinge):
    """Neither differentiable nor with a conjugate form any engine accepts."""

    name = "no_way"
    l0 = l0_grad = l0_hess = cons = cons_grad = cons_hess = None


def test_auto_without_an_engine_raises():
    K, y = sonar()
    pb = Problem(K=K, y=y, loss=NoWay(), regularizer=L1(), C=0.1)
    assert "no engine applies" in Auto().supports(pb)
    with pytest.raises(ValueError, match="no engine applies"):
        Auto().solve(pb)


# ---------------------------------------------------------------------------
# scale: the SpicyMKL §6.1 bank (sonar, 1647 kernels)
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sonar_simplemkl_bank_agrees_with_spicy():
    from mklkit.kernels import KernelBank

    X, y = sonar_points(166)
    K = KernelBank.build(X, "simplemkl").K
    assert K.shape[0] == 1647
    for reg in (ElasticNet(lam=0.5), L1()):
        pb = Problem(K=K, y=y, loss=Logistic(), regularizer=reg, C=0.5)
        res = Proximal(tol=1e-6).solve(pb)
        assert res.converged and res.gap <= 1e-6
        if Spicy().supports(pb) is None:
            sp = Spicy(tol=1e-8).solve(pb)
            assert res.objective == pytest.approx(sp.objective, rel=1e-5)


def test_screening_bound_is_an_upper_bound():
    """B_m >= ||v||_{K_m} for any v, from any reference with an exact norm."""
    from mklkit.engines.proximal_objective import ScreeningBounds

    K, _ = sonar()
    frob = np.sqrt(np.einsum("mij,mij->m", K, K))
    scr = ScreeningBounds(np.sqrt(frob), K.shape[1])
    rng = np.random.default_rng(3)
    q1, q2 = rng.standard_normal((2, K.shape[1]))
    scr.add(q1, np.arange(5), common.dual_block_norms(K, q1)[:5])
    scr.add(q2, np.arange(3, 10), common.dual_block_norms(K, q2)[3:])
    for scale in (1e-3, 0.1, 1.0, 10.0):
        v = q2 + scale * rng.standard_normal(K.shape[1])
        exact = common.dual_block_norms(K, v)
        bound = scr.bounds(v, np.arange(10))
        assert np.all(bound >= exact)
        # close references give close bounds
        if scale == 1e-3:
            assert np.all(bound[3:] <= exact[3:] + 0.01)
    # -v is as close to q as v is to -q
    assert np.all(scr.bounds(-q2, np.arange(3, 10)) <= common.dual_block_norms(K, q2)[3:] * (1 + 1e-9))
    scr.add(q1, np.arange(10), common.dual_block_norms(K, q1))
    scr.compact()
    assert scr.n == 1
