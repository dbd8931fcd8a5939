"""The engine that produced the answer is recorded: ``SolveResult.solved_by``, ``solved_by_``, summary.json."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import yaml

from mklkit.estimators import MKLClassifier
from mklkit.result import SolveResult, Status

BANK = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "poly", "degree": 1}]

pytestmark = pytest.mark.usefixtures("one_thread")


def _delegate(message: str) -> str:
    m = re.match(r"auto -> (\w+)", message)
    assert m is not None, message
    return m.group(1)


@pytest.mark.parametrize("engine", ["spicy", "proximal"])
def test_named_engine_solves_itself(sonar_xy, engine):
    X, y = sonar_xy
    clf = MKLClassifier(BANK, engine=engine).fit(X, y)
    assert clf.solved_by_ == engine == clf.result_.solved_by == clf.result_.engine


def test_auto_records_its_delegate(sonar_xy):
    X, y = sonar_xy
    clf = MKLClassifier(BANK, engine="auto").fit(X, y)
    assert clf.result_.engine == "auto"
    assert clf.solved_by_ == clf.result_.solved_by == _delegate(clf.result_.message)
    assert clf.solved_by_ != "auto"


def test_replacing_the_engine_name_keeps_the_solver():
    """A wrapper that renames the result (auto does) keeps who solved it."""
    r = SolveResult(
        status=Status.CONVERGED,
        objective=1.0,
        dual_objective=1.0,
        gap=0.0,
        iterations=1,
        alpha=np.zeros((1, 2)),
        bias=0.0,
        kernel_weights=np.ones(1),
        block_norms=np.ones(1),
        engine="bcd",
    )
    assert r.solved_by == "bcd"
    wrapped = dataclasses.replace(r, engine="auto")
    assert (wrapped.engine, wrapped.solved_by) == ("auto", "bcd")


def test_summary_records_the_solving_engine(tmp_path):
    from mklkit import api

    spec = {
        "data": {"builtin": "sonar", "test_size": 0.2, "seed": 0},
        "kernels": {"bank": BANK},
        "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.1},
        "engine": {"name": "auto"},
        "output": {"dir": str(tmp_path / "out")},
    }
    path = tmp_path / "auto.yaml"
    path.write_text(yaml.safe_dump(spec))
    summary = api.run(path, progress=False).summary()
    assert summary["engine"] == "auto"
    assert summary["solved_by"] == _delegate(summary["message"]) != "auto"


# ---------------------------------------------------------------------------
# auto's routes on a dense bank: bcd on exact factors, and spicy continuing it
# ---------------------------------------------------------------------------
N_A9A = 300


@pytest.fixture(scope="module")
def a9a_problem():
    from mklkit.components.losses import Hinge
    from mklkit.components.elasticnet import L1
    from mklkit.data import load_builtin
    from mklkit.engines import common
    from mklkit.kernels.build import KernelBank
    from mklkit.problem import Problem

    ds = load_builtin("a9a")
    rows = np.sort(np.random.default_rng(0).permutation(ds.n_samples)[:N_A9A])
    K = KernelBank.build(ds.X[rows], [{"function": "rbf", "width": [5.0, 10.0, 20.0]}]).K
    y = ds.y[rows].astype(np.float64)
    C_max = common.zero_solution(Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=1.0)).C_max
    return Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.1 * C_max)


def test_auto_on_exact_factors_is_solved_by_bcd(a9a_problem):
    from mklkit.pipeline.choose import Auto

    res = Auto(tol=1e-6, dense_factor_min_samples=N_A9A).solve(a9a_problem)
    assert res.message.startswith("auto -> bcd on exact factors")
    assert (res.engine, res.solved_by) == ("auto", "bcd")


def test_auto_fallback_is_solved_by_the_engine_that_continued(a9a_problem, monkeypatch):
    import mklkit.pipeline.choose as auto_module
    from mklkit.engines.bcd import BCD

    class Loose(BCD):  # says converged at a loose gap: the dense certificate misses tol
        def solve(self, problem, callback=None, warm_start=None):
            return dataclasses.replace(BCD(tol=0.3).solve(problem), status=Status.CONVERGED)

    monkeypatch.setattr(auto_module, "BCD", Loose)
    res = auto_module.Auto(tol=1e-8, dense_factor_min_samples=N_A9A).solve(a9a_problem)
    last = res.history[-1]["engine"]
    assert res.engine == "auto" and res.solved_by == last != "bcd"
