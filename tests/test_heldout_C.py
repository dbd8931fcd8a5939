"""C="path": C chosen on held-out rows along a warm-started path (mklkit.pipeline.heldout).

Most tests here are of the walk on one held-out part, on data small enough to be cheap: ``ONE`` (``folds=1``) and
the ``one_part`` fixture ask for it at any number of rows; below 2,500 rows ``C="auto"`` and ``C="path"`` otherwise
cross-validate (the tests at the end)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mklkit import MKLClassifier, MKLRegressor
from mklkit.engines.common import zero_solution
from mklkit.kernels.factor import FactorBank
from mklkit.pipeline import problem_at
from mklkit.pipeline.heldout import PathSettings, select_C
from mklkit.pipeline.heldout_rows import HeldoutRows, split_rows
from mklkit.plugins import get_registry
from mklkit.problem import Problem


#: One held-out part at any number of rows (else below AUTO_MIN_HELD held-out rows: cross-validation).
ONE = PathSettings(folds=1)


@pytest.fixture
def one_part(monkeypatch):
    """The estimators' and specs' paths on one held-out part at any number of rows."""
    import mklkit.pipeline.heldout as heldout

    monkeypatch.setattr(heldout, "AUTO_MIN_HELD", 1)


def create(kind, name):
    return get_registry().create(kind, name)


KERNELS = [
    {"function": "rbf", "width": [0.5, 2.0, 8.0], "features": "all"},
    {"function": "poly", "degree": 1, "features": "all"},
]


def _data(n: int, seed: int = 0, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 - 1 + noise * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def _gram_problem(n: int, seed: int = 0, loss: str = "logistic") -> Problem:
    X, y = _data(n, seed)
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.stack([np.exp(-sq / (2 * w * w)) for w in (0.5, 2.0, 8.0)] + [X @ X.T + 1.0])
    K /= np.einsum("mii->m", K)[:, None, None] / n
    return Problem(
        K=K, y=y.astype(float), loss=create("loss", loss), regularizer=create("regularizer", "elasticnet"), C=1.0
    )


def _solve(problem: Problem, warm):
    engine = create("engine", "spicy")
    return engine.solve(problem, None, warm_start=warm) if warm is not None else engine.solve(problem, None)


def _exact_factors(problem: Problem) -> Problem:
    blocks = []
    for K in problem.K:
        w, V = np.linalg.eigh(K)
        keep = w > 1e-12 * w.max()
        blocks.append(V[:, keep] * np.sqrt(w[keep]))
    return problem_at(problem, K=FactorBank.from_blocks(blocks))


def test_split_is_stratified_disjoint_and_complete():
    y = np.array([1.0] * 90 + [-1.0] * 10)
    fit, held = split_rows(y, 0.2, seed=3, stratify=True)
    assert np.intersect1d(fit, held).size == 0
    assert np.array_equal(np.union1d(fit, held), np.arange(100))
    assert (y[held] == 1).sum() == 18 and (y[held] == -1).sum() == 2
    again = split_rows(y, 0.2, seed=3, stratify=True)
    assert np.array_equal(again[1], held)  # the seed makes it reproducible


def test_held_out_predictions_match_the_result_on_gram_and_factor_banks():
    problem = _gram_problem(120)
    fit, held = split_rows(problem.y, 0.25, seed=0, stratify=True)
    rows = HeldoutRows(problem, fit, held)
    result = _solve(problem_at(rows.problem, C=0.05 * zero_solution(rows.problem).C_max), None)
    assert result.active_set.size > 0
    # the result's own prediction from the cross kernels of the held-out rows
    expected = result.decision_function(problem.K[:, held][:, :, fit])
    assert np.allclose(rows.decision(result), expected, rtol=0, atol=1e-10)
    # the same kernels as exact factors (eigen-decomposition): the factor route predicts the same
    fproblem = _exact_factors(problem)
    frows = HeldoutRows(fproblem, fit, held)
    assert np.allclose(frows.problem.bank.to_array(), rows.problem.K, atol=1e-9)
    assert np.allclose(frows.decision(result), expected, rtol=0, atol=1e-7)


def test_a_bad_prior_is_overruled_by_enough_held_out_data():
    problem = _gram_problem(600)
    c_max = zero_solution(problem).C_max
    sel = select_C(problem, _solve, prior=lambda p: 0.9 * zero_solution(p).C_max, settings=ONE)  # every kernel off
    assert sel.excess[sel.chosen] <= sel.excess_se[sel.chosen]
    majority = max(np.mean(problem.y == 1), np.mean(problem.y == -1))
    assert sel.metrics[sel.chosen] > majority + 0.1  # held-out accuracy: it learned
    assert sel.excess[0] > 3 * sel.excess_se[0]  # the trivial start is told apart
    assert sel.C < 0.5 * c_max
    # the path went on while the held-out loss fell, and stopped where it rose significantly
    assert "rose" in sel.stopped and 1 <= sel.Cs.size - 1 - sel.best < sel.settings.patience
    assert sel.excess[-1] > sel.excess_se[-1]
    assert np.all(sel.losses[1 : sel.best + 1] <= sel.losses[0])
    # the C of all rows is the chosen fraction of all rows' C_max
    assert sel.C == pytest.approx(sel.ratios[sel.chosen] * c_max, rel=1e-12)
    assert sel.n_held + sel.n_fit == 600


def test_the_choice_is_the_value_nearest_the_prior_within_one_standard_error():
    problem = _gram_problem(300)
    sel = select_C(problem, _solve, prior=lambda p: 0.02 * zero_solution(p).C_max, settings=ONE)
    ok = np.flatnonzero(sel.excess <= sel.excess_se)
    assert np.allclose(sel.excess, sel.losses - sel.losses[sel.best], atol=1e-12)
    assert sel.prior_ratio == pytest.approx(0.02)
    dist = np.abs(np.log(sel.ratios / 0.02))
    assert sel.chosen in ok
    assert dist[sel.chosen] == pytest.approx(dist[ok].min())
    assert np.all(np.diff(sel.Cs) < 0)  # from C_max down
    assert "chosen" in sel.summary()


def test_the_fit_on_all_rows_starts_from_the_chosen_solution():
    problem = _gram_problem(300)
    sel = select_C(problem, _solve, prior=lambda p: 0.02 * zero_solution(p).C_max, settings=ONE)
    fit, held = split_rows(problem.y, 0.2, seed=0, stratify=True)
    start = sel.start
    assert start.alpha.shape == (4, 300) and not np.any(start.alpha[:, held])
    # the same predictor: on the held-out rows the start predicts what the path scored
    rows = HeldoutRows(problem, fit, held)
    fit_result = type(start)(**{**start.__dict__, "alpha": start.alpha[:, fit]})
    assert np.allclose(start.decision_function(problem.K[:, held]), rows.decision(fit_result), atol=1e-12)
    engine = create("engine", {"name": "proximal", "tol": 1e-6})  # an engine that starts from alpha
    at = problem_at(problem, C=sel.C)
    warm, cold = engine.solve(at, None, warm_start=start), engine.solve(at, None)
    assert warm.gap <= 1e-6 and cold.gap <= 1e-6
    assert warm.objective == pytest.approx(cold.objective, rel=3e-6)


@pytest.mark.parametrize("bank", ["factor", "array"])
def test_the_start_survives_a_long_path(bank, monkeypatch):
    """However many values the path solves, the fit on all rows starts from the chosen solution
    (factors: kept as their coordinates) or from the nearest one kept (Gram matrices)."""
    import mklkit.pipeline.heldout as heldout

    monkeypatch.setattr(heldout, "KEEP_BYTES", 0)  # as if every solution were too large to keep
    problem = _gram_problem(300)
    if bank == "factor":
        problem = _exact_factors(problem)
    engine = create("engine", {"name": "bcd" if bank == "factor" else "spicy", "tol": 1e-8})
    results = []

    def solve(p, warm):
        results.append(engine.solve(p, None, warm_start=warm) if warm is not None else engine.solve(p, None))
        return results[-1]

    sel = select_C(problem, solve, prior=lambda p: 0.02 * zero_solution(p).C_max, settings=ONE)
    assert sel.chosen < sel.Cs.size - 1  # values were solved after the chosen one
    fit, held = split_rows(problem.y, 0.2, seed=0, stratify=True)
    start = sel.start
    assert start is not None and not np.any(start.alpha[:, held])
    if bank == "factor":
        # the chosen solution's coordinates and predictions, on all rows
        chosen = results[sel.chosen]
        L = problem.bank
        beta = FactorBank(L.sample_columns(fit), L.starts).coefficients(chosen.alpha)
        assert np.allclose(L.coefficients(start.alpha), beta, rtol=0, atol=1e-9 * np.abs(beta).max())
        assert np.allclose(L.expand(L.coefficients(start.alpha)), L.expand(beta), atol=1e-8)
        assert np.allclose(start.block_norms, chosen.block_norms)
    else:
        # only the least held-out criterion's solution is never freed: the start is that one, the
        # kept solution nearest the chosen one
        assert np.allclose(start.block_norms, results[sel.best].block_norms)
        assert not np.allclose(start.block_norms, results[-1].block_norms)


def _well_specified(n: int = 1500) -> Problem:
    """A logistic model on 4 of 6 features, one linear kernel per feature and one on all: the held-out
    loss falls and then stays flat as C shrinks (nothing to overfit)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 6))
    p = 1.0 / (1.0 + np.exp(-(X @ np.array([2.0, -1.0, 1.0, 0.5, 0.0, 0.0]))))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    K = np.stack([np.outer(X[:, j], X[:, j]) for j in range(6)] + [X @ X.T])
    K /= np.einsum("mii->m", K)[:, None, None] / n
    return Problem(K=K, y=y, loss=create("loss", "logistic"), regularizer=create("regularizer", "elasticnet"), C=1.0)


def test_a_flat_held_out_loss_ends_the_path():
    problem = _well_specified()
    prior = lambda p: 0.05 * zero_solution(p).C_max  # noqa: E731  (passed on the second value)
    every = select_C(problem, _solve, prior, settings=PathSettings(flat=0.0, folds=1))
    flat = select_C(problem, _solve, prior, settings=PathSettings(flat=0.05, folds=1))
    assert "flattened" in flat.stopped and "flattened" not in every.stopped
    assert flat.Cs.size < every.Cs.size
    assert np.allclose(flat.losses, every.losses[: flat.Cs.size], rtol=1e-6)  # the same path, cut short
    # the last material minimum: the values after it lowered the loss by at most 5 % of its decrease so
    # far; `patience` of them ended the path
    L = flat.losses
    material = 0
    for j in range(1, L.size):
        if L[material] - L[j] > 0.05 * (L[0] - L[material]):
            material = j
    assert L.size - 1 - material == flat.settings.patience
    assert np.all(L[material] - L[material + 1 :] <= 0.05 * (L[0] - L[material]))
    assert flat.best > material  # a new minimum, but not a material one
    # the choice is the same: within one standard error of the least loss, nearest the prior
    assert flat.C == pytest.approx(every.C, rel=1e-12)
    with pytest.raises(ValueError, match="flat"):
        PathSettings(flat=1.0)


def test_the_path_solves_to_a_multiple_of_the_fits_tolerance(monkeypatch, one_part):
    from mklkit.pipeline.choose import Auto
    from mklkit.pipeline.heldout import path_engine

    engine = create("engine", {"name": "bcd", "tol": 1e-4, "max_iter": 77})
    looser = path_engine(engine)
    assert looser.get_params() == {**engine.get_params(), "tol": pytest.approx(3e-4)}
    assert path_engine(engine, PathSettings(tol_ratio=1.0)) is engine
    with pytest.raises(ValueError, match="tol_ratio"):
        PathSettings(tol_ratio=0.5)
    # the estimator: every solve of the path at 3 x tol, the fit on all rows at tol
    used = []
    solve = Auto.solve  # the estimator's engine: each of its solves, its delegates' aside
    monkeypatch.setattr(Auto, "solve", lambda e, *a, **k: used.append(e.tol) or solve(e, *a, **k))
    X, y = _data(400)
    clf = MKLClassifier(KERNELS, C="path", tol=1e-4).fit(X, y)
    assert len(used) == clf.C_selection_.Cs.size + 1
    assert used[:-1] == [pytest.approx(3e-4)] * (len(used) - 1) and used[-1] == 1e-4
    assert np.all(clf.C_selection_.gaps <= 3e-4) and clf.dual_gap_ <= 1e-4


def test_the_hinge_chooses_by_the_held_out_error_rate_and_the_logistic_by_its_loss():
    from mklkit.pipeline.heldout import criterion_of

    hinge = _gram_problem(400, loss="hinge")
    sel = select_C(hinge, _solve, prior=lambda p: 0.02 * zero_solution(p).C_max, settings=ONE)
    assert sel.criterion == "error" and criterion_of(hinge.loss) == "error"
    errors = 1.0 - sel.metrics  # unweighted rows: the mean error rate
    assert sel.best == int(np.argmin(errors))
    assert np.allclose(sel.excess, errors - errors[sel.best], atol=1e-12)
    assert sel.excess[sel.chosen] <= sel.excess_se[sel.chosen]
    assert np.all(sel.losses > 0) and not np.allclose(sel.losses, errors)  # the hinge loss is still reported
    assert "error" in sel.stopped or sel.stopped == "the end of the path"
    assert "least error" in sel.summary() or sel.chosen == sel.best
    logistic = select_C(_gram_problem(300), _solve, prior=lambda p: 0.02 * zero_solution(p).C_max, settings=ONE)
    assert logistic.criterion == "loss"
    assert np.allclose(logistic.excess, logistic.losses - logistic.losses[logistic.best], atol=1e-12)
    assert criterion_of(create("loss", "squared")) == criterion_of(create("loss", "eps_insensitive")) == "loss"


def test_too_few_rows_keep_the_prior():
    problem = _gram_problem(40)
    sel = select_C(problem, _solve, prior=lambda p: 0.123, settings=PathSettings(min_held=20, folds=1))
    assert sel.C == 0.123 and sel.chosen == -1 and "prior" in sel.stopped


def test_classifier_reports_the_path_and_fits_all_rows_at_the_chosen_C(one_part):
    X, y = _data(500, seed=1)
    clf = MKLClassifier(kernels=KERNELS, C="path").fit(X, y)
    sel = clf.C_selection_
    assert clf.C_ == pytest.approx(sel.C)
    assert clf.C_ == pytest.approx(sel.ratios[sel.chosen] * clf.C_max_, rel=1e-9)
    assert clf.dual_gap_ <= 1e-2  # the fit on all rows is certified
    assert sel.losses.size == sel.metrics.size == sel.Cs.size >= 2
    assert clf.score(X, y) > 0.8
    assert sel.start is None  # used by the fit, not kept
    # a refit at a number forgets the selection
    clf.set_params(C=1.0).fit(X, y)
    assert not hasattr(clf, "C_selection_")


def test_multiclass_chooses_per_problem_and_regression_scores_r2(one_part):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((450, 3))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    clf = MKLClassifier(kernels=KERNELS, C="path", multiclass="ovr").fit(X, y)
    assert len(clf.C_selection_) == 3 and clf.C_.shape == (3,)
    assert np.allclose(clf.C_, [s.C for s in clf.C_selection_])
    t = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(450)
    reg = MKLRegressor(kernels=KERNELS, C="path").fit(X, t)
    sel = reg.C_selection_
    assert 0.8 < sel.metrics[sel.chosen] <= 1.0  # R^2 on held-out rows


def test_a_wrong_C_names_path_among_the_allowed_values():
    X, y = _data(60)
    with pytest.raises(ValueError, match="'path'"):
        MKLClassifier(kernels=KERNELS, C="best").fit(X, y)


def test_the_path_is_reported_in_the_log(caplog, one_part):
    X, y = _data(200)
    with caplog.at_level("INFO", logger="mklkit"):
        MKLClassifier(kernels=KERNELS, C="path", verbose=1).fit(X, y)
    assert any("C='path' chose" in r.getMessage() for r in caplog.records)
    assert math.isfinite(float(MKLClassifier(kernels=KERNELS, C="path").fit(X, y).C_))


def _path_spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "data: {builtin: liver, test_size: 0.3, seed: 0, standardize: true}\n"
        "kernels: {bank: [{function: rbf, width: [1, 3, 10], features: all}], normalize: trace}\n"
        "problem: {loss: logistic, regularizer: {name: elasticnet, lam: 0.5}, C: path}\n"
        "engine: {name: spicy, tol: 1.0e-6}\n"
    )
    return spec


def test_a_spec_with_C_path_records_the_choice(tmp_path, one_part):
    from mklkit.api import load_spec, run
    from mklkit.io import read_summary

    spec = _path_spec(tmp_path)
    res = run(load_spec(spec))
    sel = res.C_selection
    assert res.result.C_max is not None
    assert float(res.spec.problem.C) == pytest.approx(sel.ratios[sel.chosen] * res.result.C_max, rel=1e-9)
    assert res.result.gap <= 1e-6
    res.write(tmp_path / "out")
    summary = read_summary(tmp_path / "out")
    assert summary["C_selection"]["chosen"] == sel.chosen
    assert summary["C"] == pytest.approx(sel.C) and 0.0 <= summary["timings"]["path_s"] <= summary["timings"]["solve_s"]


def test_the_command_line_shows_the_path_and_the_choice(tmp_path, capsys, monkeypatch, one_part):
    from mklkit import progress
    from mklkit.cli import main

    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    spec = _path_spec(tmp_path)
    assert main(["run", str(spec), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.startswith("mklkit: C path:")]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(lines) == len(summary["C_selection"]["Cs"])  # one line per value of C
    assert "chosen on" in out.out and "held-out rows" in out.out


# ---------------------------------------------------------------------------
# C="auto": the held-out path where there are enough rows, the "scale" rule below
# ---------------------------------------------------------------------------
def test_path_decides_by_the_effective_number_of_held_out_rows():
    from mklkit.pipeline.heldout import AUTO_MIN_HELD, path_decides

    n = int(AUTO_MIN_HELD / PathSettings().held_out)
    X, y = _data(n)
    bank = FactorBank(np.ascontiguousarray(X.T), [0, 2, 4])
    base = Problem(
        K=bank, y=y.astype(float), loss=create("loss", "logistic"), regularizer=create("regularizer", "l1"), C=1.0
    )
    assert path_decides(base)
    assert not path_decides(
        problem_at(base, y=y[:-1].astype(float), K=FactorBank(np.ascontiguousarray(X[:-1].T), [0, 2, 4]))
    )
    # weights: the effective number of rows (Kish), not their count
    w = np.ones(n)
    w[: n // 2] = 1e-6
    assert not path_decides(problem_at(base, sample_weight=w))


def _indicators(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = _data(n, seed)
    return np.column_stack([X, X[:, :2] ** 2]), y


def test_auto_chooses_C_on_held_out_rows_from_2500_rows_and_scale_never_does():
    X, y = _indicators(2600)
    linear = [{"function": "linear", "features": [[0], [1], [2], [3], [4], [5]]}]  # exact factors: cheap
    auto = MKLClassifier(kernels=linear, regularizer="l1").fit(X, y)
    sel = auto.C_selection_
    assert sel.n_held >= 500 and sel.chosen >= 0
    assert auto.C_ == pytest.approx(sel.ratios[sel.chosen] * auto.C_max_, rel=1e-9)
    assert auto.dual_gap_ <= 1e-2 and auto.factor_refinement_ is None  # auto's path does not refine
    scale = MKLClassifier(kernels=linear, regularizer="l1", C="scale").fit(X, y)
    assert not hasattr(scale, "C_selection_")
    assert scale.C_ == pytest.approx(1.0 / np.sqrt(X.shape[0]), rel=1e-12)  # unit-trace kernels
    # below 2,500 rows "auto" cross-validates the rule's C and the values below it
    small = MKLClassifier(kernels=linear, regularizer="l1").fit(X[:2400], y[:2400])
    sel = small.C_selection_
    assert sel.folds == 3 and sel.n_held == 2400 and sel.reference == "prior"
    assert small.C_ == pytest.approx(sel.ratios[sel.chosen] / np.sqrt(2400), rel=1e-12)


def test_a_spec_with_C_auto_chooses_on_held_out_rows_with_enough_rows(tmp_path):
    from mklkit.api import load_spec, run

    X, y = _indicators(3600)
    path = tmp_path / "d.csv"
    np.savetxt(
        path,
        np.column_stack([X, y]),
        delimiter=",",
        header=",".join([f"x{j}" for j in range(X.shape[1])] + ["y"]),
        comments="",
    )
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"data: {{train: {path}, target: y, test_size: 0.25, seed: 0}}\n"
        "kernels: {bank: [{function: linear, features: each}], factor: true}\n"
        "problem: {loss: logistic, regularizer: l1}\n"
    )
    res = run(load_spec(spec))
    assert res.C_selection is not None and res.C_selection.chosen >= 0
    assert float(res.spec.problem.C) == pytest.approx(
        res.C_selection.ratios[res.C_selection.chosen] * res.result.C_max, rel=1e-9
    )
    scaled = run(load_spec(spec, overrides=["problem.C=scale"]))
    assert scaled.C_selection is None


# ---------------------------------------------------------------------------
# Below AUTO_MIN_HELD held-out rows: cross-validation over the prior and the values below it
# ---------------------------------------------------------------------------
def test_folds_hold_out_every_row_once_and_keep_the_classes_balanced():
    from mklkit.pipeline.heldout_rows import fold_rows

    y = np.array([1.0] * 70 + [-1.0] * 11 + [2.0] * 4)
    folds = fold_rows(y, 3, seed=5, stratify=True)
    held = np.concatenate([h for _, h in folds])
    assert np.array_equal(np.sort(held), np.arange(y.size))  # every row held out once
    for fit, h in folds:
        assert np.array_equal(np.union1d(fit, h), np.arange(y.size)) and np.intersect1d(fit, h).size == 0
    for c in np.unique(y):
        counts = [int(np.sum(y[h] == c)) for _, h in folds]
        assert max(counts) - min(counts) <= 1
    assert max(h.size for _, h in folds) - min(h.size for _, h in folds) <= 1
    again = fold_rows(y, 3, seed=5, stratify=True)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(again, folds))


def _tight(problem: Problem, warm):
    engine = create("engine", {"name": "spicy", "tol": 1e-9})
    return engine.solve(problem, None, warm_start=warm) if warm is not None else engine.solve(problem, None)


def test_cross_validation_scores_every_row_once_and_takes_the_least_mean_loss():
    from mklkit.pipeline.heldout_rows import fold_rows

    problem = _gram_problem(240, seed=2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, 240)
    problem = problem_at(problem, sample_weight=w)
    prior = lambda p: 0.3 * zero_solution(p).C_max  # noqa: E731
    sel = select_C(problem, _tight, prior)
    assert sel.folds == 3 and sel.n_held == 240 and sel.reference == "prior"
    assert sel.ratios.size >= 2 and np.allclose(sel.ratios, [1.0, 10**-0.5, 0.1][: sel.ratios.size], rtol=1e-12)
    # an independent computation: each fold solved cold at its ratio of its own prior, every row scored once
    losses = np.zeros(sel.ratios.size)
    for fit, held in fold_rows(problem.y, 3, seed=0, stratify=True):
        rows = HeldoutRows(problem, fit, held)
        for i, r in enumerate(sel.ratios):
            res = _tight(problem_at(rows.problem, C=r * prior(rows.problem)), None)
            f = rows.decision(res)
            losses[i] += np.sum(w[held] * np.logaddexp(0.0, -problem.y[held] * f))
    losses /= w.sum()
    assert np.allclose(sel.losses, losses, rtol=1e-6)
    assert sel.chosen == sel.best == int(np.argmin(losses))  # the least, no standard-error rule
    assert sel.chosen_rows @ w / w.sum() == pytest.approx(sel.losses[sel.chosen], rel=1e-12)
    assert sel.C == pytest.approx(sel.ratios[sel.chosen] * prior(problem), rel=1e-12)
    assert "3 folds of 240 rows" in sel.summary()


def test_cross_validation_refuses_a_single_fold():
    from mklkit.pipeline.heldout import select_C_folds

    with pytest.raises(ValueError, match="folds >= 2"):
        select_C_folds(_gram_problem(60), _solve, lambda p: 1.0, PathSettings(folds=1))


def test_cross_validation_overrules_a_prior_that_turns_every_kernel_off():
    problem = _gram_problem(300)
    sel = select_C(problem, _solve, prior=lambda p: 1.5 * zero_solution(p).C_max)
    assert sel.folds == 3 and sel.n_active[0] == 0  # the prior's solves are trivial
    majority = max(np.mean(problem.y == 1), np.mean(problem.y == -1))
    assert sel.chosen > 0 and sel.metrics[sel.chosen] > majority + 0.05  # 0.15 C_max: it learned
    assert sel.excess[0] > 2 * sel.excess_se[0]  # the trivial prior is told apart


def test_a_class_smaller_than_the_folds_keeps_the_prior():
    problem = _gram_problem(60)
    y = np.asarray(problem.y).copy()
    y[:] = 1.0
    y[:2] = -1.0
    sel = select_C(problem_at(problem, y=y), _solve, prior=lambda p: 0.123)
    assert sel.C == 0.123 and sel.chosen == -1 and "fewer than the 3 folds" in sel.stopped


def test_classifiers_cross_validate_below_2500_rows_and_regressors_and_joint_multiclass_keep_the_rule():
    X, y = _data(200, seed=4)
    clf = MKLClassifier(kernels=KERNELS).fit(X, y)
    sel = clf.C_selection_
    scale = MKLClassifier(kernels=KERNELS, C="scale").fit(X, y)
    assert sel.folds == 3 and clf.C_ == pytest.approx(sel.ratios[sel.chosen] * scale.C_, rel=1e-9)
    assert clf.dual_gap_ <= 1e-2 and clf.score(X, y) > 0.8
    t = np.sin(X[:, 0])
    reg = MKLRegressor(kernels=KERNELS).fit(X, t)
    assert (
        getattr(reg, "C_selection_", None) is None and reg.C_ == MKLRegressor(kernels=KERNELS, C="scale").fit(X, t).C_
    )
    asked = MKLRegressor(kernels=KERNELS, C="path").fit(X, t)  # asked for: cross-validated
    assert asked.C_selection_.folds == 3 and 0.5 < asked.C_selection_.metrics[asked.C_selection_.chosen] <= 1.0
    rng = np.random.default_rng(0)
    X3 = rng.standard_normal((150, 3))
    y3 = np.digitize(X3[:, 0] + 0.5 * X3[:, 1], [-0.5, 0.5])
    joint = MKLClassifier(kernels=KERNELS, multiclass="joint").fit(X3, y3)
    assert not hasattr(joint, "C_selection_") or joint.C_selection_ is None


def test_a_spec_below_2500_rows_cross_validates_and_says_so(tmp_path, capsys):
    from mklkit.cli import main

    spec = _path_spec(tmp_path)
    assert main(["run", str(spec), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    sel = summary["C_selection"]
    assert sel["folds"] == 3 and sel["reference"] == "prior" and sel["chosen"] >= 0
    assert summary["C"] == pytest.approx(sel["ratios"][sel["chosen"]] * sel["prior_C"], rel=1e-12)
    assert "each held out once in 3 folds" in capsys.readouterr().out
