"""auto's stall rule: a delegate whose certified gap stops shrinking is stopped, and
another general engine continues from its incumbents.

The rule (:class:`mklkit.pipeline.choose.StallWatch`) compares the best gap after
k records with the best gap after k/2: steady solvers (gap ~ 1/k or faster)
are left alone, a gap that stays put is caught.  The switched solve must be
certified (its gap, weak duality against the conic reference) and its work
bounded.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import L1
from mklkit.pipeline.choose import Auto, EngineSwitchWarning, StallWatch
from mklkit.engines.base import Engine, Requires
from mklkit.engines.proximal import Proximal
from mklkit.engines.capabilities import SEPARABLE, Capability, needs
from mklkit.problem import Problem
from mklkit.result import Status
from mklkit.testing import registered

try:
    from tests.conic_reference import solve_reference
    from tests.engines.certificates import assert_certified
    from tests.engines.test_spicy_rank_one import wdbc_rank_one
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import solve_reference
    from engines.certificates import assert_certified
    from engines.test_spicy_rank_one import wdbc_rank_one

C, TOL = 1e-3, 1e-6


def _gaps(watch: StallWatch, gaps: list[float]) -> int | None:
    """The record (1-based) at which ``watch`` stops, or None."""
    for k, g in enumerate(gaps, start=1):
        if watch({"iteration": k, "gap": g}):
            return k
    return None


@pytest.mark.parametrize("rate", [0.5, 1.0, 2.0], ids=["1/sqrt(k)", "1/k", "1/k^2"])
def test_stall_rule_leaves_steady_progress_alone(rate):
    assert _gaps(StallWatch(8, 0.9), [k**-rate for k in range(1, 2001)]) is None


def test_stall_rule_fires_on_a_flat_gap_after_the_window():
    watch = StallWatch(8, 0.9)
    assert _gaps(watch, [0.35] * 20) == 8
    assert watch.reason is not None and "3.500e-01" in watch.reason


def test_stall_rule_fires_once_progress_stops():
    # progress for 10 records, then flat: caught when the records have doubled
    gaps = [0.5**k for k in range(1, 11)] + [0.5**10] * 30
    assert _gaps(StallWatch(8, 0.9), gaps) == 20
    # infinite or NaN gaps are no progress
    assert _gaps(StallWatch(4, 0.9), [math.inf, math.nan, math.inf, math.inf]) == 4


LOGISTIC_ONLY = Capability(
    "logistic_only",
    "loss",
    has="the logistic loss",
    lacks="is not the logistic loss",
    test=lambda loss: loss.name == "logistic",
)


class _Idle(Engine):
    """A specialist (logistic loss only) that never leaves its start: a solve built to stall."""

    name = "idle_logistic"
    description = "test engine: offers its start point again and again"
    requires = Requires(loss=(needs(LOGISTIC_ONLY),), regularizer=(needs(SEPARABLE),))
    supports_warm_start = True
    representations = ("array", "factor")

    def _solve(self, problem, run, warm_start):
        zero = run.zero
        it = 0
        while True:
            it += 1
            run.offer(it, dual=zero.dual_objective, rho=zero.rho)
            run.record(it, zero.objective, zero.dual_objective)
            if run.check(it):
                return run.result(it)


@pytest.fixture
def idle_plugin():
    with registered(_Idle):
        yield


def test_auto_switches_from_a_stalled_engine_and_the_result_is_certified(idle_plugin):
    K, y = wdbc_rank_one()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    auto = Auto(tol=TOL)
    assert auto.choose(pb)[0].name == "idle_logistic"
    with pytest.warns(EngineSwitchWarning, match="idle_logistic made no progress") as rec:
        res = auto.solve(pb)
    assert "spicy continues" in str(rec[0].message)
    assert res.engine == "auto" and res.status == Status.CONVERGED
    assert res.message.startswith("auto -> idle_logistic then spicy")
    # the idle engine ran exactly the window, then spicy finished in few outer iterations
    engines = [h["engine"] for h in res.history]
    assert engines.count("idle_logistic") == auto.stall_window
    assert engines[auto.stall_window :] == ["spicy"] * (len(engines) - auto.stall_window)
    assert len(engines) - auto.stall_window <= 10
    assert [h["iteration"] for h in res.history] == list(range(1, len(engines) + 1))
    ref = solve_reference(K, y, "logistic", "l1", C)
    assert_certified(res, K, y, ref, "logistic", "l1", C, tol=TOL, problem=pb)


def test_no_switch_without_fallback(idle_plugin):
    K, y = wdbc_rank_one()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineSwitchWarning)
        warnings.simplefilter("ignore", UserWarning)
        res = Auto(tol=TOL, max_iter=30, fallback=False).solve(pb)
    assert res.status == Status.MAX_ITER and res.iterations == 30


def test_auto_on_rank_one_kernels_needs_no_switch():
    K, y = wdbc_rank_one()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineSwitchWarning)
        res = Auto(tol=TOL).solve(pb)
    assert res.status == Status.CONVERGED and res.gap <= TOL
    assert {h["engine"] for h in res.history} == {"spicy"}
    assert res.iterations <= 10
    assert np.isfinite(res.objective)


def test_the_rule_also_watches_bcd_on_exact_factors_of_a_dense_bank(monkeypatch):
    # a rule that no solver can satisfy (the gap must fall 1e12-fold each time the
    # records double) stops bcd after two records; spicy finishes on the dense bank.
    # (auto factors a dense bank where proximal does not apply: made to refuse here)
    monkeypatch.setattr(Proximal, "supports", lambda self, problem: "refused in this test")
    K, y = wdbc_rank_one()
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    auto = Auto(
        tol=TOL,
        dense_factor_min_samples=K.shape[1],
        dense_factor_max_kernels=K.shape[0],
        stall_window=2,
        stall_ratio=1e-12,
    )
    with pytest.warns(EngineSwitchWarning, match="bcd made no progress"):
        res = auto.solve(pb)
    assert "bcd on exact factors" in res.message and "then spicy" in res.message
    engines = [h["engine"] for h in res.history]
    assert engines[:2] == ["bcd", "bcd"] and set(engines[2:]) == {"spicy"}
    ref = solve_reference(K, y, "logistic", "l1", C)
    assert_certified(res, K, y, ref, "logistic", "l1", C, tol=TOL, problem=pb)


def test_a_path_keeps_the_engine_that_finished_after_a_stall(idle_plugin):
    # warm-started at a smaller C from a solve where the first choice stalled, auto starts
    # with the engine that finished that solve instead of stalling again
    K, y = wdbc_rank_one()
    auto = Auto(tol=TOL)
    first_pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C)
    with pytest.warns(EngineSwitchWarning):
        first = auto.solve(first_pb)
    assert first.engine == "auto" and first.solved_by == "spicy"
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C / 2)
    assert auto.choose(pb)[0].name == "idle_logistic"  # the choice without a warm start
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineSwitchWarning)
        res = auto.solve(pb, warm_start=first)
    assert {h["engine"] for h in res.history} == {"spicy"}
    assert res.solved_by == "spicy" and "finished the warm start" in res.message
    ref = solve_reference(K, y, "logistic", "l1", C / 2)
    assert_certified(res, K, y, ref, "logistic", "l1", C / 2, tol=TOL, problem=pb)
    # and at the next C again (the rule carries along the path)
    third_pb = Problem(K=K, y=y, loss=Logistic(), regularizer=L1(), C=C / 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineSwitchWarning)
        third = auto.solve(third_pb, warm_start=res)
    assert {h["engine"] for h in third.history} == {"spicy"} and third.status == Status.CONVERGED
    # a warm start that the first choice finished itself, or one carried without its history
    # (from other rows: the held-out path's start of the fit on all rows), changes nothing
    for other in (dataclasses.replace(first, solved_by="idle_logistic"), dataclasses.replace(first, history=[])):
        with pytest.warns(EngineSwitchWarning, match="idle_logistic made no progress"):
            auto.solve(pb, warm_start=other)
