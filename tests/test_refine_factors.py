"""Factors that follow the solution: the kernels the solution uses get more rank, and the problems
are solved again (``mklkit.pipeline.refine``)."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.data import load_builtin
from mklkit.estimators import MKLClassifier
from mklkit.kernels.factorize import build_factor_bank
from mklkit.kernels.factorize.build import refactor_kernels
from mklkit.pipeline.refine import RefineSettings, refine_factors, wanted_kernels

pytestmark = pytest.mark.usefixtures("one_thread")

BANK = [{"function": "rbf", "width": [0.5, 2.0], "features": "all"}, {"function": "linear", "features": "all"}]


@pytest.mark.parametrize("method", ["pivoted_cholesky", "nystrom"])
def test_refactored_kernel_is_the_larger_factorization(method):
    """Kernel 0 factored again at rank 160 is what a bank built at rank 160 holds (the same pivots or
    nested landmarks), rows and map to new points; the other kernels keep their rows."""
    rng = np.random.default_rng(0)
    X, X_new = rng.normal(size=(400, 5)), rng.normal(size=(9, 5))
    coarse = build_factor_bank(BANK, X, rank=40, method=method, tol=0.0)
    direct = build_factor_bank(BANK, X, rank=160, method=method, tol=0.0)
    refined = refactor_kernels(coarse, X, [0], 160, tol=0.0)
    assert refined.ranks.tolist() == [160, 40, coarse.ranks[2]]
    np.testing.assert_array_equal(refined.block(0), direct.block(0))
    np.testing.assert_array_equal(refined.block(1), coarse.block(1))
    np.testing.assert_array_equal(refined.block(2), coarse.block(2))
    assert refined.relative_trace_error[0] == pytest.approx(direct.relative_trace_error[0])
    assert refined.relative_trace_error[0] < coarse.relative_trace_error[0]
    new = refined.transform(X_new)
    np.testing.assert_allclose(new[:160], direct.transform(X_new)[:160], rtol=0, atol=1e-12)
    np.testing.assert_allclose(new[160:], coarse.transform(X_new)[40:], rtol=0, atol=1e-12)


def test_refactor_refuses_what_it_cannot_do():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 5))
    fb = build_factor_bank(BANK, X, rank=10)
    with pytest.raises(ValueError, match="not an approximated kernel"):
        refactor_kernels(fb, X, [2], 20)  # the linear kernel is exact
    with pytest.raises(ValueError, match="shape"):
        refactor_kernels(fb, X[:50], [0], 20)


@pytest.mark.parametrize("bad", [{"growth": 1.0}, {"tol": 1.0}, {"near": 0.0}, {"rounds": -1}])
def test_refine_settings_are_checked(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        RefineSettings(**bad)


@pytest.fixture(scope="module")
def ionosphere():
    ds = load_builtin("ionosphere")
    X = np.asarray(ds.X)[:, 2:]
    return (X - X.mean(0)) / X.std(0), np.asarray(ds.y)


NARROW = [{"function": "rbf", "width": [1.0, 3.0, 8.0]}, {"function": "linear"}]


def _fit(X, y, factor, **kw):
    return MKLClassifier(kernels=NARROW, factor=factor, standardize=False, C=kw.pop("C", 0.05), tol=1e-7, **kw).fit(
        X, y
    )


def test_refinement_moves_the_solution_to_the_exact_problem(ionosphere):
    """Rank 8 per kernel leaves most of the narrow kernels out; refined, the kernels in use are
    factored to the tolerance and the certified objective and the decision function come to those of
    the same problem on the Gram matrices."""
    X, y = ionosphere
    exact = _fit(X, y, False)
    coarse = _fit(X, y, {"rank": 8})
    refined = _fit(X, y, {"rank": 8, "refine": True, "tol": 1e-6})
    info = refined.factor_refinement_
    assert coarse.factor_refinement_ is None
    assert info.rounds and info.stopped in ("converged", "rank cap")
    rel = np.asarray(refined.factor_approximation_["kernel_relative_trace_error"])
    used = np.flatnonzero(refined.kernel_weights_ > 0)
    assert np.all((rel[used] <= 1e-6) | (np.asarray(refined.factor_approximation_["ranks"])[used] == X.shape[0]))
    for est in (exact, coarse, refined):
        assert est.dual_gap_ <= 1e-6 * abs(est.result_.objective)
    P = exact.result_.objective
    assert abs(refined.result_.objective - P) < 0.1 * abs(coarse.result_.objective - P)
    assert abs(refined.result_.objective - P) <= 1e-5 * abs(P)
    f_exact = exact.decision_function(X)
    err = [np.abs(e.decision_function(X) - f_exact).max() for e in (coarse, refined)]
    assert err[1] < 0.1 * err[0]


def test_refinement_keeps_within_the_budget_and_the_rounds(ionosphere):
    """``refine`` rounds bound the rounds; the factors together stay within the budget's share, and a
    budget with no room stops it and says so."""
    X, y = ionosphere
    one = _fit(X, y, {"rank": 8, "refine": 1, "tol": 1e-6})
    assert len(one.factor_refinement_.rounds) == 1 and one.factor_refinement_.stopped == "rounds"
    est = _fit(X, y, {"rank": 8})
    bank, N = _bank(X), X.shape[0]
    R = int(bank.total_rank)
    solves = []

    def resolve(new_bank, results):
        solves.append(new_bank.total_rank)
        return results

    for rows, stopped in ((R, "memory budget"), (R + 30, None)):
        out, _, info = refine_factors(
            bank,
            X,
            [est.result_],
            resolve,
            memory_budget=8 * N * 1000,
            settings=RefineSettings(rounds=3, share=rows / 1000),
        )
        assert out.total_rank <= rows
        if stopped:
            assert info.stopped == stopped and not info.rounds and out is bank
        else:
            assert info.rounds and out.total_rank > R


def test_wanted_kernels_are_the_active_and_the_nearly_active(ionosphere):
    X, y = ionosphere
    est = _fit(X, y, {"rank": 8})
    res = est.result_
    active = res.kernel_weights > 0
    assert np.array_equal(wanted_kernels(_bank(X), [res], 1.0) | active, wanted_kernels(_bank(X), [res], 1.0))
    assert wanted_kernels(_bank(X), [res], 1e-12).all()  # every kernel is "near" at a tiny fraction


def _bank(X):
    return build_factor_bank(NARROW, X, rank=8)


@pytest.mark.parametrize("value", ["yes", -1, 1.5, None])
def test_bad_refine_values_are_named(ionosphere, value):
    X, y = ionosphere
    with pytest.raises(ValueError, match="refine"):
        _fit(X, y, {"rank": 8, "refine": value})


def test_a_spec_refines_its_factors_and_reports_it(tmp_path, capsys):
    """``kernels.factor.refine`` in a spec: the run refines, summary.json has the rounds and the
    refined bank's residual, and the test predictions use the refined factors."""
    import json

    import yaml

    from mklkit.cli import main

    spec = {
        "data": {"builtin": "ionosphere", "test_size": 0.25, "seed": 0, "standardize": True},
        "kernels": {"bank": [{"function": "rbf", "width": [1.0, 3.0]}], "factor": {"rank": 8, "refine": 2}},
        "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.05},
        "engine": {"name": "bcd", "tol": 1e-6},
    }
    runs = {}
    for refine in (2, False):
        spec["kernels"]["factor"]["refine"] = refine
        p = tmp_path / f"s{refine}.yaml"
        p.write_text(yaml.safe_dump(spec))
        assert main(["run", str(p), "--out", str(tmp_path / f"o{refine}")]) == 0
        runs[refine] = json.loads(next((tmp_path / f"o{refine}").rglob("summary.json")).read_text())
    out = capsys.readouterr().out
    assert "refined in" in out
    ref, plain = runs[2], runs[False]
    assert plain["factor_refinement"] is None
    rounds = ref["factor_refinement"]["rounds"]
    assert 1 <= len(rounds) <= 2
    assert ref["factor"]["total_rank"] > plain["factor"]["total_rank"]
    assert ref["factor"]["relative_trace_error"] < plain["factor"]["relative_trace_error"]
    assert ref["timings"]["refine_s"] > 0


def test_refine_auto_follows_a_C_chosen_on_held_out_rows(ionosphere):
    """The default ``refine: "auto"`` refines when C is chosen on held-out rows (``C="path"``, whose
    small C values need the kernels in use accurately), not at a given C."""
    X, y = ionosphere
    given = _fit(X, y, {"rank": 8})
    path = MKLClassifier(kernels=NARROW, factor={"rank": 8}, standardize=False, C="path").fit(X, y)
    assert given.factor_refinement_ is None
    assert path.factor_refinement_ is not None and path.factor_refinement_.rounds
    assert path.factor_approximation_["total_rank"] > given.factor_approximation_["total_rank"]
    assert path.C_ == pytest.approx(path.C_selection_.C)


@pytest.mark.parametrize("method", ["pivoted_cholesky", "nystrom"])
def test_the_warm_start_predicts_what_the_last_solution_predicted(ionosphere, method):
    """``carried``: on the refined bank the warm start gives the same training predictions and no
    larger block norms (the continued factorization's span holds the old one)."""
    from mklkit.pipeline.refine import carried

    X, y = ionosphere
    est = _fit(X, y, {"rank": 8, "method": method})
    old = build_factor_bank(NARROW, X, rank=8, method=method)
    new = refactor_kernels(old, X, [0, 1, 2], 60)
    res = est.result_
    warm = carried(old, new, [0, 1, 2], res)
    act = np.arange(old.shape[0])
    f_old, f_new = old.combine(res.alpha, act), new.combine(warm.alpha, act)
    np.testing.assert_allclose(f_new, f_old, rtol=0, atol=1e-8 * np.abs(f_old).max())
    assert np.all(new.block_norms(warm.alpha) <= old.block_norms(res.alpha) * (1 + 1e-8) + 1e-12)
    np.testing.assert_array_equal(warm.alpha[3], res.alpha[3])  # the exact linear kernel: unchanged


def test_a_spec_with_C_path_refines_at_the_chosen_C(tmp_path):
    """``problem.C: path`` on factors: the refined problem is solved at the C the path chose (not at
    the prior the spec was prepared with), and certified there."""
    from mklkit.api import load_spec, run

    p = tmp_path / "s.yaml"
    p.write_text(
        "data: {builtin: ionosphere, test_size: 0.25, seed: 0, standardize: true}\n"
        "kernels: {bank: [{function: rbf, width: [1.0, 3.0]}], factor: {rank: 8}}\n"
        "problem: {loss: logistic, regularizer: l1, C: path}\n"
        "engine: {name: bcd, tol: 1.0e-6}\n"
    )
    res = run(load_spec(str(p)))
    assert res.factor_refinement is not None and res.factor_refinement.rounds
    assert res.spec.problem.C == pytest.approx(res.C_selection.C)
    assert res.result.converged and res.result.gap <= 1e-6
    assert len(res.result.active_set) > 0


def test_a_factor_mapping_with_only_refine_takes_autos_factors():
    """factor={"refine": False} switches refinement off and keeps the factors factor=True takes
    (auto's rank), not factors to tol with no rank cap."""
    from mklkit.data import load_builtin

    ds = load_builtin("ionosphere")
    X, y = ds.X, ds.y
    bank = [{"function": "rbf", "width": [0.5, 4.0]}]
    plain = MKLClassifier(kernels=bank, factor=True, C=0.01).fit(X, y)
    off = MKLClassifier(kernels=bank, factor={"refine": False}, C="path").fit(X, y)
    on = MKLClassifier(kernels=bank, factor={"refine": 1}, C=0.01).fit(X, y)
    assert off.factor_approximation_["ranks"] == plain.factor_approximation_["ranks"]
    assert off.factor_refinement_ is None  # C="path" would refine by default
    assert on.factor_refinement_ is not None and len(on.factor_refinement_.rounds) <= 1
    assert on.factor_approximation_["ranks"][0] >= plain.factor_approximation_["ranks"][0]
