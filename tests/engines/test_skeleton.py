"""The engine skeleton (mklkit.engines.base), capabilities and what components declare."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from numba import njit

from mklkit.components.base import WeightNorm
from mklkit.declaration import declaration_problems
from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.engines.base import Engine, Requires, Run, UnsupportedBankError, check_warm_start, stop_message
from mklkit.engines.capabilities import HINGE_CONJUGATE, LINEAR_CONJUGATE, SMOOTH_PRIMAL, Requirement
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.ops import BankAccessError
from mklkit.plugins import ComponentValidationError, Registry, hookimpl
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, SolveResult, Status
from mklkit.testing import check_component

try:
    from tests.engines.pinball import Pinball
    from tests.engines.shared import sonar
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from engines.pinball import Pinball
    from engines.shared import sonar


def _problem(loss=None, reg=None, C=0.1, n=40):
    K, y = sonar(n)
    return Problem(K=K, y=y, loss=loss or Logistic(), regularizer=reg or L1(), C=C)


# ---------------------------------------------------------------------------
# stop messages and the run
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "status, kw, expected",
    [
        (Status.CONVERGED, {}, "e: converged, relative duality gap 1.000e-03 <= tol 0.01 after 3 Newton steps"),
        (Status.MAX_ITER, {}, "e: max_iter=3 Newton steps reached; relative duality gap 1.000e-03 > tol 0.01"),
        (Status.STOPPED, {}, "e: stopped by the callback after 3 Newton steps (relative duality gap 1.000e-03)"),
        (
            Status.STALLED,
            {"why": "line search failed"},
            "e: stalled after 3 Newton steps: line search failed; relative duality gap 1.000e-03 > tol 0.01",
        ),
        (
            Status.NUMERICAL_ERROR,
            {"why": "NaN in the Hessian"},
            "e: numerical error after 3 Newton steps: NaN in the Hessian; relative duality gap 1.000e-03",
        ),
        (
            Status.CONVERGED,
            {"why": "at the start"},
            "e: converged, relative duality gap 1.000e-03 <= tol 0.01 after 3 Newton steps (at the start)",
        ),
    ],
)
def test_one_message_for_every_ending(status, kw, expected):
    assert stop_message("e", status, 3, unit="Newton step", gap=1e-3, tol=1e-2, max_iter=3, **kw) == expected
    assert stop_message("e", Status.CONVERGED, 1, gap=0.0, tol=1.0).endswith("after 1 iteration")


class _Counting(Engine):
    name = "counting"
    description = "test engine: records a made-up gap that halves every iteration"

    def _solve(self, problem, run, warm_start):
        it, gap = 0, 1.0
        while True:
            it += 1
            gap /= 2
            run.record(it, 1.0, 1.0 - gap, gap, 0)
            if run.check(it, stalled="no progress" if it == 5 else None):
                return run


def test_check_ends_in_the_documented_order():
    pb = _problem()
    # converged wins over a stop request and over the limit at the same record
    eng = _Counting(tol=0.3, max_iter=2)
    run = eng._solve(pb, Run(eng, pb, lambda r: r["gap"] <= 0.3), None)
    assert run.status == Status.CONVERGED and len(run.history) == 2
    # the callback stops before the limit
    eng = _Counting(tol=1e-9, max_iter=2)
    run = eng._solve(pb, Run(eng, pb, lambda r: r["iteration"] >= 1), None)
    assert run.status == Status.STOPPED and len(run.history) == 1
    assert run.message.startswith("counting: stopped by the callback after 1 iteration ")
    # a stall before the limit, the limit last
    eng = _Counting(tol=1e-9, max_iter=5)
    assert eng._solve(pb, Run(eng, pb), None).status == Status.STALLED
    eng = _Counting(tol=1e-9, max_iter=4)
    run = eng._solve(pb, Run(eng, pb), None)
    assert run.status == Status.MAX_ITER and run.message.startswith("counting: max_iter=4 ")
    # the engine's numerical error first, even when converged
    run = Run(eng, pb)
    run.record(1, 1.0, 1.0, 0.0, 0)
    assert run.check(1, 0.0, error="NaN in the step") and run.status == Status.NUMERICAL_ERROR
    assert run.message.startswith("counting: numerical error after 1 iteration: NaN in the step")


def test_result_before_the_end_is_an_error():
    pb = _problem()
    with pytest.raises(RuntimeError, match="counting: Run.result before the run ended"):
        Run(_Counting(), pb).result(0)


# ---------------------------------------------------------------------------
# a third-party engine needs only its algorithm
# ---------------------------------------------------------------------------
class GradientMKL(Engine):
    """Proximal gradient with a fixed step: nothing but the algorithm."""

    name = "gradient_mkl"
    description = "test engine: proximal gradient with step 1/(L lambda_max) on the skeleton"
    requires = Requires(loss=(SMOOTH_PRIMAL,), regularizer=(common.SEPARABLE_SUMS,))

    def _solve(self, problem, run, warm_start):
        K, y, loss, reg = problem.K, problem.y, problem.loss, problem.regularizer
        M, N = problem.n_kernels, problem.n_samples
        step = 1.0 / (loss.deriv_lipschitz() * np.linalg.eigvalsh(K.sum(axis=0))[-1])
        alpha, b = np.zeros((M, N)), run.zero.bias
        it = 0
        while True:
            it += 1
            z = common.predict(K, alpha, b)
            r = loss.jit.deriv(y, z, loss.param_vector)
            w = alpha - step * r
            nw = common.block_norms(K, w)
            p = reg.jit.prox(nw, step * problem.C, reg.param_vector)
            alpha = w * np.where(nw > 0, p / np.where(nw > 0, nw, 1.0), 0.0)[:, None]
            b = common.optimal_bias(loss, y, common.predict(K, alpha, 0.0), b)
            P = common.primal_objective(problem, alpha, b)
            rho = -loss.jit.deriv(y, common.predict(K, alpha, b), loss.param_vector)
            D, rho_f, _ = common.projected_dual_objective(problem, rho)
            run.offer(it, primal=P, alpha=alpha, bias=b, dual=D, rho=rho_f)
            run.record(it, P, D, n_active=int(np.sum(nw > 0)))
            if run.check(it):
                return run.result(it)


def test_a_skeleton_engine_is_registered_and_solves():
    reg = Registry()

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(GradientMKL)

    reg.register_plugin(Plugin, "mklkit-gradient", "0.1")
    pb = _problem(reg=ElasticNet(lam=0.5), C=0.3)
    eng = reg.create("engine", {"name": "gradient_mkl", "tol": 1e-6, "max_iter": 5000})
    res = eng.solve(pb)
    assert res.converged and res.gap <= 1e-6 and res.engine == "gradient_mkl"
    # a certified gap bounds the distance to the optimum
    best = Spicy(tol=1e-10).solve(pb).objective
    assert best <= res.objective <= best + 1e-6 * abs(res.objective)
    assert res.C_max == common.zero_solution(pb).C_max
    # what it does not support, it says, from its declaration alone
    why = eng.supports(_problem(Hinge()))
    assert "loss hinge" in why and "smooth_primal is False" in why


class OldStyle(Engine):
    """An engine of the contract before the skeleton: it overrides solve."""

    name = "old_style"
    description = "test engine: overrides solve itself"

    def solve(self, problem, callback=None, warm_start=None):
        self.check_supported(problem)
        return Spicy(tol=self.tol).solve(problem, callback, warm_start)


def test_an_engine_that_overrides_solve_keeps_working():
    reg = Registry()

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(OldStyle)

    reg.register_plugin(Plugin, "mklkit-old", "0.1")
    res = reg.create("engine", "old_style").solve(_problem())
    assert res.converged and OldStyle().supports(_problem()) is None


def test_an_engine_without_an_algorithm_is_refused_at_registration():
    class Nothing(Engine):
        name = "nothing"
        description = "neither solve nor _solve"

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(Nothing)

    with pytest.raises(ComponentValidationError, match=r"engine .*Nothing.*solve\(problem, callback\).*_solve"):
        Registry().register_plugin(Plugin, "d")


def test_requires_must_be_a_requires():
    class Wrong(GradientMKL):
        name = "wrong_requires"
        requires = (SMOOTH_PRIMAL,)

    assert declaration_problems(Wrong) == ["'requires' must be a mklkit.engines.base.Requires; got tuple"]


# ---------------------------------------------------------------------------
# warm starts
# ---------------------------------------------------------------------------
def _result(alpha, bias=0.0, dual=None):
    return SolveResult(
        status=Status.CONVERGED,
        objective=1.0,
        dual_objective=1.0,
        gap=0.0,
        iterations=1,
        alpha=np.asarray(alpha),
        bias=bias,
        kernel_weights=np.zeros(1),
        block_norms=np.zeros(1),
        dual=dual,
    )


@pytest.mark.parametrize(
    "ws, match",
    [
        (
            lambda M, N: _result(np.zeros((M, N + 1))),
            r"warm_start.alpha has shape \(10, 41\); this problem needs \(10, 40\)",
        ),
        (
            lambda M, N: _result(np.zeros((M, N)), dual=np.zeros(N - 1)),
            r"warm_start.dual has shape \(39,\); this problem needs \(40,\)",
        ),
        (
            lambda M, N: _result(np.full((M, N), np.nan), bias=np.inf),
            r"warm_start has non-finite alpha, bias; a warm start must be a finite result",
        ),
        (lambda M, N: _result(np.zeros((M, N)), dual=np.full(N, np.nan)), r"warm_start has non-finite dual"),
    ],
)
def test_warm_starts_that_do_not_fit_are_refused(ws, match):
    pb = _problem()
    bad = ws(pb.n_kernels, pb.n_samples)
    with pytest.raises(ValueError, match=match):
        check_warm_start(pb, bad)
    for eng in (Spicy(), Proximal()):  # both use warm starts: the template checks them
        with pytest.raises(ValueError, match=match):
            eng.solve(pb, warm_start=bad)


def test_an_engine_without_warm_starts_ignores_one():
    pb = _problem(reg=ElasticNet(lam=0.5), C=0.3)
    res = GradientMKL(tol=1e-4, max_iter=5000).solve(pb, warm_start=_result(np.zeros((1, 1))))
    assert res.converged


# ---------------------------------------------------------------------------
# capabilities and requirements
# ---------------------------------------------------------------------------
def test_reasons_come_from_the_declaration():
    # alternatives, then a reason shared by two lacks said once
    eng = Spicy(method="one_step")
    why = eng.supports(_problem(Hinge(), L1()))
    assert re.search(
        r"loss hinge.*smooth_conjugate = False.*regularizer l1.*smooth_conjugate = False.*"
        r"method 'one_step'.*'iterative'.*'auto'",
        why,
    ), why
    assert why.count("needs smooth conjugates") == 1


def test_a_requirement_is_of_one_kind():
    with pytest.raises(
        ValueError,
        match=r"the options of a requirement are of one kind; "
        r"got \['loss', 'regularizer'\]",
    ):
        Requirement((SMOOTH_PRIMAL, common.SEPARABLE_SUMS.options[0]))
    with pytest.raises(ValueError, match=r"Requires\.regularizer.*requirement of the loss"):
        Requires(regularizer=(SMOOTH_PRIMAL,))


class _OpaqueFactors(FactorBank):
    """Factors under a representation of their own: neither one array nor a factor bank
    that the proximal engine reads."""

    representation = "opaque"


def test_a_bank_that_is_not_one_array_is_declined_with_its_own_words():
    K, y = sonar(30)
    LT = np.concatenate([np.linalg.cholesky(k + 1e-9 * np.eye(30)).T for k in K[:3]])
    bank = _OpaqueFactors(LT, [0, 30, 60, 90])
    pb = Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=0.1)
    why = Proximal().supports(pb)
    assert why.startswith("problem.K: ") and "FactorBank" in why and "(M, N, N) array" in why
    with pytest.raises(UnsupportedBankError, match=r"engine 'proximal'.*problem\.K: .*FactorBank") as err:
        Proximal().solve(pb)
    assert isinstance(err.value, BankAccessError) and isinstance(err.value, ValueError)
    assert Spicy().supports(pb) is None  # spicy works through the bank's operations


def test_linear_conjugate_is_a_property_of_the_mathematics():
    assert LINEAR_CONJUGATE.holds(Hinge()) and LINEAR_CONJUGATE.holds(EpsInsensitive())
    assert not LINEAR_CONJUGATE.holds(Logistic())
    assert HINGE_CONJUGATE.holds(Hinge()) and not HINGE_CONJUGATE.holds(EpsInsensitive())

    class HingeByAnotherName(Hinge):
        name = "svm"

    assert HINGE_CONJUGATE.holds(HingeByAnotherName())
    y = np.array([0.5, -1.0])
    lo, hi, s_lo, s_hi = EpsInsensitive(eps=0.2).linear_pieces(y)
    np.testing.assert_array_equal(lo, [-1.0, -1.0])
    np.testing.assert_array_equal(hi, [1.0, 1.0])
    np.testing.assert_allclose(s_lo, y - 0.2)
    np.testing.assert_allclose(s_hi, y + 0.2)
    lo, hi, s_lo, s_hi = Pinball(tau=0.3).linear_pieces(y)
    np.testing.assert_allclose([lo[0], hi[0], s_lo[0], s_hi[0]], [-0.3, 0.7, 0.5, 0.5])


# ---------------------------------------------------------------------------
# what a component declares
# ---------------------------------------------------------------------------
@njit(cache=True)
def _nop(a, b, c):
    return a


def test_envelope_derivatives_are_derived_from_the_prox():
    for cls in (L1, ElasticNet, Lq, Uniform):
        assert cls.jit.env_grad is cls.jit.prox
        assert cls.jit.env_hess is cls.jit.prox_deriv

    class OwnProx(ElasticNet):
        prox = staticmethod(_nop)

    assert OwnProx.jit.env_grad is _nop and OwnProx.jit.prox is _nop
    assert OwnProx.jit.env_hess is ElasticNet.jit.prox_deriv


class PlainElasticNet(ElasticNet):
    """The elastic net, which writes no ``env_grad``/``env_hess`` kernels (module level: it pickles)."""

    name = "plain_en"


def test_a_regularizer_without_envelope_derivatives_conforms_and_registers():
    Plain = PlainElasticNet
    report = check_component(Plain(lam=0.3), n_points=16)
    assert report.ok, str(report)

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(Plain)

    reg = Registry()
    reg.register_plugin(Plugin, "d")
    pb = _problem(reg=Plain(lam=0.3))
    ref = _problem(reg=ElasticNet(lam=0.3))
    assert Spicy(tol=1e-8, method="iterative").solve(pb).objective == pytest.approx(
        Spicy(tol=1e-8, method="iterative").solve(ref).objective, rel=1e-10
    )


def test_registry_and_kit_say_the_same_about_a_declaration():
    class Ranking(Squared):
        name = "ranking_loss"
        task = "ranking"

    class Plugin:
        @staticmethod
        @hookimpl
        def mklkit_register_components(register):
            register(Ranking)

    with pytest.raises(ComponentValidationError) as err:
        Registry().register_plugin(Plugin, "d")
    phrase = "task must be 'classification' or 'regression'; got 'ranking'"
    assert phrase in str(err.value)
    assert phrase in check_component(Ranking(), n_points=8)["declaration"].detail


def test_a_wrong_linear_conjugate_claim_fails_the_component_kit():
    class ClaimsLinear(Logistic):
        name = "claims_linear"
        linear_conjugate = True

    report = check_component(ClaimsLinear(), n_points=16)
    res = report["linear_conjugate_claim"]
    assert not res.passed and "linear_conjugate: conj(y, t u) vs t conj(y, u)" in res.detail
    assert check_component(Pinball(tau=0.3), n_points=16)["linear_conjugate_claim"].passed


@pytest.mark.parametrize("wn", [WeightNorm(1.0), WeightNorm(2.0, 0.7), WeightNorm(1.5, 0.3), WeightNorm(3.0)])
def test_weight_norm_value_and_conjugate(wn):
    from scipy.optimize import minimize

    x = np.array([0.3, 1.2, 0.0, 2.0])
    s = wn.block_exponent
    norm = float(np.sum(x**s)) ** (1 / s)
    expected = 0.5 * 2.0 * norm**2 if wn.lam is None else 2.0 * 0.75 * (2 * wn.lam) ** (1 / 3) * norm ** (4 / 3)
    assert wn.value(x, 2.0) == pytest.approx(expected, rel=1e-12)
    y = np.array([1.0, 3.0, 0.5])
    best = max(
        -minimize(
            lambda v: -(np.abs(v) @ y - wn.value(np.abs(v), 2.0)),
            x0,
            method="Nelder-Mead",
            options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 40000},
        ).fun
        for x0 in (np.ones(3), np.array([0.1, 5.0, 0.1]), np.full(3, 3.0))
    )
    assert wn.conj(y, 2.0) == pytest.approx(best, rel=1e-7)


def test_unconverged_results_warn_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = Spicy(tol=1e-12, max_iter=1).solve(_problem())
    assert res.status == Status.MAX_ITER
    assert [w.category for w in caught] == [ConvergenceWarning]
    assert str(caught[0].message) == res.message and caught[0].filename == __file__
    assert math.isfinite(res.gap)
