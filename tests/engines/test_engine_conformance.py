"""The engine conformance kit (mklkit.testing.check_engine) on the built-in engines.

A fast subset (two problems per engine) runs in the default suite; every
built-in loss x regularizer pair each engine supports runs with ``-m slow``.
Deliberately dishonest engines must fail with a message that names what
disagreed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numba import njit

from mklkit.components.losses import Hinge, Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.pipeline.choose import Auto
from mklkit.engines.apg import APG
from mklkit.engines.bcd import BCD
from mklkit.engines.dual_cd import DualCD
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels.factor import FactorBank
from mklkit.problem import Problem
from mklkit.result import Status
from mklkit.testing import ENGINE_CHECKS, assert_engine_conforms, check_engine, engine_problems

try:
    from tests.engines.pinball import Pinball
    from tests.engines.test_skeleton import GradientMKL
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from engines.pinball import Pinball
    from engines.test_skeleton import GradientMKL

ENGINES = {
    "spicy": Spicy(tol=1e-7),
    "spicy-iterative": Spicy(tol=1e-6, method="iterative"),
    "proximal": Proximal(tol=1e-6),
    "auto": Auto(tol=1e-6),
    "bcd": BCD(tol=1e-7),
    "dualcd": DualCD(tol=1e-7),
    "apg": APG(tol=1e-6),
    # the same engine through the array API's strict reference library: what a GPU library runs
    "apg-array-api-strict": APG(tol=1e-6, array_library="array_api_strict"),
}


@pytest.mark.parametrize("name", list(ENGINES))
def test_builtin_engines_pass_the_kit_on_two_problems(name):
    report = check_engine(ENGINES[name], max_problems=2)
    assert report.ok, str(report)
    assert [c.identity for c in report.checks] == list(ENGINE_CHECKS)
    # the optimum came from a reference on every problem solved
    assert report["gap_bounds_optimum"].detail.startswith("2 checks")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENGINES))
def test_builtin_engines_pass_the_kit_on_every_pair_they_support(name):
    report = assert_engine_conforms(ENGINES[name], extra_losses=[Pinball(tau=0.3)])
    n = int(report["problems"].detail.split()[0])
    assert n >= (20 if name.startswith("spicy") or name in ("auto", "bcd") else 10), str(report)


def test_the_kit_solves_every_pair_an_engine_supports():
    labels = [kp.label for kp in engine_problems(Proximal())]
    # proximal: the smooth losses (logistic, squared) with the five regularizers, and each loss
    # once more with sample weights
    assert len(labels) == 12 and all("hinge" not in s and "eps_insensitive" not in s for s in labels)
    assert sum(s.endswith("weighted") for s in labels) == 2
    spicy = engine_problems(Spicy())
    assert len(spicy) == 24
    weighted = [kp.problem for kp in spicy if kp.label.endswith("weighted")]
    assert len(weighted) == 4 and all(pb.sample_weight is not None for pb in weighted)


class IgnoresWeights(Spicy):
    """Accepts weighted problems but solves them without their weights."""

    name = "ignores_weights"

    def _solve(self, problem, run, warm_start):
        plain = Problem(
            K=problem.K, y=problem.y, loss=problem.loss, regularizer=problem.regularizer, C=problem.C, bias=problem.bias
        )
        return super()._solve(plain, run, warm_start)


def test_the_kit_catches_an_engine_that_ignores_weights():
    """The weighted problems are checked with their weights: solving the unweighted problem
    instead fails ``honest_primal``."""
    report = check_engine(IgnoresWeights(tol=1e-7), losses=[Logistic()], regularizers=[L1()])
    assert not report.ok
    assert not report["honest_primal"].passed and "weighted" in str(report)


def test_the_kit_builds_factor_banks_for_an_engine_that_takes_only_those():
    """bcd takes factor banks only: the kit holds its problems as the exact factors of the
    same bank; an engine that takes arrays keeps them, unless asked for factors."""
    factor = engine_problems(BCD())
    assert len(factor) == 24  # 20 pairs, and each loss with sample weights
    assert all(isinstance(kp.problem.bank, FactorBank) for kp in factor)
    array = engine_problems(Spicy())
    assert all(kp.problem.representation == "array" for kp in array)
    asked = engine_problems(Spicy(), representation="factor", losses=[Logistic()], regularizers=[L1()])
    assert [kp.problem.representation for kp in asked] == ["factor", "factor"]  # and weighted
    # the same problems: the factor bank is the array bank to 1e-10
    K = array[0].problem.K
    np.testing.assert_allclose(factor[0].problem.bank.to_array(), K, atol=1e-9 * np.abs(K).max())
    with pytest.raises(ValueError, match="representation.*array, factor.*got 'x'"):
        engine_problems(Spicy(), representation="x")


def test_a_skeleton_engine_of_a_third_party_passes():
    report = check_engine(
        GradientMKL(tol=1e-5, max_iter=20000), max_problems=1, losses=[Logistic()], regularizers=[ElasticNet(lam=0.5)]
    )
    assert report.ok, str(report)


# ---------------------------------------------------------------------------
# dishonest engines
# ---------------------------------------------------------------------------
class ZeroGap(Spicy):
    """Claims a zero gap (and convergence) whatever it reached."""

    name = "zero_gap"

    def _solve(self, problem, run, warm_start):
        res = super()._solve(problem, run, warm_start)
        return dataclasses.replace(res, gap=0.0, status=Status.CONVERGED)


class DualIsPrimal(Spicy):
    """Reports the primal value as the dual one."""

    name = "dual_is_primal"

    def _solve(self, problem, run, warm_start):
        res = super()._solve(problem, run, warm_start)
        return dataclasses.replace(res, dual_objective=res.objective, gap=0.0)


class NoDual(Spicy):
    """Keeps its dual point to itself."""

    name = "no_dual"

    def _solve(self, problem, run, warm_start):
        return dataclasses.replace(super()._solve(problem, run, warm_start), dual=None)


class Optimistic(Spicy):
    """Reports a primal value below the one its point attains."""

    name = "optimistic"

    def _solve(self, problem, run, warm_start):
        res = super()._solve(problem, run, warm_start)
        return dataclasses.replace(res, objective=0.99 * res.objective)


class EarlyStop(Spicy):
    """Says converged after one iteration, with the gap it really has."""

    name = "early_stop"

    def _solve(self, problem, run, warm_start):
        res = super()._solve(problem, run, warm_start)
        return dataclasses.replace(res, status=Status.CONVERGED)


@pytest.mark.parametrize(
    "engine, failing, words",
    [
        (
            ZeroGap(tol=1e-2, max_iter=1),
            "gap_consistent",
            "reported gap 0.000000e+00 but (P - D)/|P| of the reported values is",
        ),
        (DualIsPrimal(tol=1e-2, max_iter=1), "honest_dual", "but the returned dual point, made feasible, gives"),
        (
            NoDual(tol=1e-6),
            "honest_dual",
            "the result has no dual point (SolveResult.dual): its gap cannot be certified",
        ),
        (Optimistic(tol=1e-6), "honest_primal", "but P(alpha, b) at the returned point is"),
        (EarlyStop(tol=1e-12, max_iter=1), "status", "status converged with gap"),
    ],
    ids=["zero-gap", "dual-is-primal", "no-dual", "optimistic", "early-stop"],
)
def test_a_dishonest_engine_fails_with_a_clear_message(engine, failing, words):
    report = check_engine(engine, max_problems=1, losses=[Hinge()], regularizers=[L1()])
    assert not report.ok
    res = report[failing]
    assert not res.passed and words in res.detail, str(report)
    assert res.point["problem"].startswith("sonar hinge x l1, C = ")
    text = str(report)
    assert f"FAIL  {failing}" in text and "identities FAILED" in text
    with pytest.raises(AssertionError, match=failing):
        assert_engine_conforms(engine, max_problems=1, losses=[Hinge()], regularizers=[L1()])


def test_an_engine_that_supports_nothing_fails_problems():
    report = check_engine(Proximal(), losses=[Hinge()], regularizers=[L1()])
    assert not report["problems"].passed
    assert "the engine supports none of the kit's problems" in report["problems"].detail


@pytest.mark.parametrize(
    "args, kw, error, match",
    [
        ((Logistic(),), {}, TypeError, "check_engine needs an engine instance \\(kind 'engine'\\); got Logistic"),
        ((Spicy,), {}, TypeError, "check_engine needs an engine instance"),
        (
            (Spicy(),),
            {"reference": "exact"},
            ValueError,
            "reference must be 'auto', 'conic', 'engine' or 'none'; got 'exact'",
        ),
    ],
)
def test_check_engine_refuses_what_it_cannot_check(args, kw, error, match):
    with pytest.raises(error, match=match):
        check_engine(*args, **kw)


_en_conj = ElasticNet.conj


@njit(cache=True)
def half_en_conj(y, C, params):
    return 0.5 * _en_conj(y, C, params)


class HalfConjugate(ElasticNet):
    """The elastic net with half its conjugate: engine and kit both trust it, the optimum not."""

    name = "elasticnet"
    conj = staticmethod(half_en_conj)


@pytest.mark.parametrize("reference", ["conic", "engine"])
def test_a_wrong_conjugate_is_caught_against_the_reference(reference):
    report = check_engine(
        Proximal(tol=1e-6),
        max_problems=1,
        losses=[Logistic()],
        regularizers=[HalfConjugate(lam=0.5)],
        reference=reference,
    )
    res = report["gap_bounds_optimum"]
    assert not res.passed and "above the optimum" in res.detail, str(report)
    assert ("cvxpy + Clarabel" if reference == "conic" else "engine 'spicy'") in res.detail
    assert not report["gap_consistent"].passed  # D > P: weak duality violated
    assert "which weak duality forbids" in report["gap_consistent"].detail
    # the same engine on the true elastic net passes against either reference
    assert check_engine(
        Proximal(tol=1e-6), max_problems=1, losses=[Logistic()], regularizers=[ElasticNet(lam=0.5)], reference=reference
    ).ok


# ---------------------------------------------------------------------------
# the engines of the mklkit-smo plugin distribution
# ---------------------------------------------------------------------------
def test_smo_mkl_passes_the_kit_on_two_problems():
    smo = pytest.importorskip("mklkit_smo")
    report = check_engine(smo.SmoMKL(tol=1e-7), max_problems=2)
    assert report.ok, str(report)
    assert report["problems"].detail == "2 checks"


def test_smo_mkl_solves_a_third_party_loss_of_the_svm_form():
    # the pinball loss declares linear_conjugate: SMO-MKL takes it (two boxes of widths
    # tau and 1 - tau per point), and the optimum agrees with cvxpy + Clarabel
    smo = pytest.importorskip("mklkit_smo")
    from mklkit.components.kl import KL

    eng = smo.SmoMKL(tol=1e-8)
    problems = engine_problems(eng, losses=[Pinball(tau=0.3)], regularizers=[KL()])
    assert len(problems) == 1
    report = check_engine(eng, problems=problems, reference="conic")
    assert report.ok, str(report)
    assert report["gap_bounds_optimum"].detail == "1 check"


def test_skm_smo_passes_the_kit_with_its_regularizer():
    smo = pytest.importorskip("mklkit_smo")
    report = check_engine(smo.SkmSMO(tol=1e-5), extra_regularizers=[smo.L1Squared()])
    assert report.ok, str(report)
    assert report["problems"].detail == "1 check"  # hinge x l1_squared


@pytest.mark.slow
def test_smo_engines_pass_the_kit_on_every_pair_they_support():
    smo = pytest.importorskip("mklkit_smo")
    report = assert_engine_conforms(
        smo.SmoMKL(tol=1e-7),
        extra_losses=[Pinball(tau=0.3)],
        extra_regularizers=[smo.PnormSquared(p=1.5, lam=0.7), smo.PnormSquared(p=2.0, lam=0.3)],
    )
    assert int(report["problems"].detail.split()[0]) == 9  # 3 losses x 3 regularizers
    assert_engine_conforms(smo.SkmSMO(tol=1e-5, sparsify=True), extra_regularizers=[smo.L1Squared()])
