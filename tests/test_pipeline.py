"""The pipeline behind run, sweep and the estimators: engine section, representations, precomputed folds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mklkit.api import run
from mklkit.cli import main
from mklkit.data import Standardizer, load_builtin
from mklkit.kernels import KernelBank
from mklkit.pipeline import PipelineError
from mklkit.spec import SpecError, parse_spec
from mklkit.sweep import load_sweep, run_sweep

LINEAR = [{"function": "linear", "features": [0, 1, 2]}, {"function": "linear", "features": "each"}]
BASE = {
    "data": {"builtin": "liver", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": LINEAR},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.5},
    "engine": {"name": "spicy", "tol": 1e-9, "max_iter": 500},
}


def write(tmp_path: Path, spec: dict, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def _with(**changes: dict) -> dict:
    spec = json.loads(json.dumps(BASE))
    for section, update in changes.items():
        spec[section] = {**spec.get(section, {}), **update} if isinstance(update, dict) else update
    return spec


# ---------------------------------------------------------------------------
# engine: is the section that selects the engine
# ---------------------------------------------------------------------------
def test_engine_errors_name_the_engine_key():
    with pytest.raises(SpecError, match=r"t\.yaml: engine\.tol.*got -1") as info:
        parse_spec(_with(engine={"tol": -1}), file="t.yaml")
    assert info.value.key == "engine.tol"


@pytest.mark.parametrize("with_engine", [False, True], ids=["alone", "with-engine"])
def test_a_solver_section_is_an_unknown_key(tmp_path, capsys, with_engine):
    spec = {k: v for k, v in BASE.items() if with_engine or k != "engine"}
    spec["solver"] = {"name": "spicy"}
    with pytest.raises(SpecError) as info:
        parse_spec(spec, file="t.yaml")
    assert info.value.key == "solver" and "unknown key" in str(info.value)
    assert info.value.allowed is not None and "engine" in info.value.allowed.split(", ")
    assert "solver" not in info.value.allowed.split(", ")
    assert main(["validate", str(write(tmp_path, spec))]) == 2
    assert "solver: unknown key" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# factor banks
# ---------------------------------------------------------------------------
def test_exact_factors_give_the_dense_answer_through_run(tmp_path):
    gram = _with(kernels={"factor": False})
    dense = run(parse_spec(gram, file="d.yaml"))
    fac = run(parse_spec(_with(kernels={"factor": {"method": "exact"}}), file="f.yaml"))
    assert dense.converged and fac.converged
    assert fac.result.objective == pytest.approx(dense.result.objective, rel=1e-8)
    np.testing.assert_allclose(fac.result.kernel_weights, dense.result.kernel_weights, atol=1e-8)
    assert fac.metrics == pytest.approx(dense.metrics, abs=1e-12)
    out = tmp_path / "out"
    assert (
        main(
            ["run", str(write(tmp_path, _with(kernels={"factor": {"method": "exact"}}))), "--out", str(out), "--quiet"]
        )
        == 0
    )
    s = json.loads((out / "summary.json").read_text())
    assert s["spec"]["kernels"]["factor"]["method"] == "exact"
    assert s["objective"] == pytest.approx(dense.result.objective, rel=1e-8)
    assert s["factor"]["relative_trace_error"] == pytest.approx(0.0, abs=1e-12)
    assert s["factor"]["total_rank"] == sum(s["factor"]["ranks"]) > 0
    assert main(["run", str(write(tmp_path, gram, "d.yaml")), "--out", str(tmp_path / "d"), "--quiet"]) == 0
    assert json.loads((tmp_path / "d" / "summary.json").read_text())["factor"] is None


def test_approximate_factors_report_what_they_leave_out(tmp_path, capsys):
    """The relative trace the factors miss, per kernel and overall, from the bank itself."""
    rbf = [{"function": "rbf", "width": [0.5, 2.0]}]
    spec = _with(kernels={"bank": rbf, "factor": {"method": "pivoted_cholesky", "tol": 0.05}})
    prep = parse_spec(spec, file="f.yaml").prepare()
    fb = prep.problem.bank
    full = fb.trace() + fb.trace_error
    assert fb.trace_error.sum() > 0  # the narrow kernel is not low-rank
    out = tmp_path / "out"
    assert main(["run", str(write(tmp_path, spec)), "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())["factor"]
    assert s["relative_trace_error"] == pytest.approx(fb.trace_error.sum() / full.sum(), rel=1e-12)
    assert s["kernel_relative_trace_error"] == pytest.approx(list(fb.trace_error / full), rel=1e-12)
    assert 0 < s["relative_trace_error"] <= 0.05 * (1 + 1e-9)
    assert s["ranks"] == [int(r) for r in fb.ranks]
    assert "factors     total rank" in capsys.readouterr().out


@pytest.mark.parametrize(
    "factor, key, shown",
    [
        ({"rank": 0}, "kernels.factor.rank", "got 0"),
        ({"rank": 2.5}, "kernels.factor.rank", "got 2.5"),
        ({"tol": 1.5}, "kernels.factor.tol", "got 1.5"),
        ({"method": "cholesky"}, "kernels.factor.method", "got 'cholesky'"),
        ({"rnak": 3}, "kernels.factor.rnak", "got 'rnak'"),
        ({"refine": "yes"}, "kernels.factor.refine", "got 'yes'"),
        ("maybe", "kernels.factor", "got 'maybe'; allowed: a mapping with keys"),
        (7, "kernels.factor", "got 7; allowed: a mapping with keys"),
    ],
)
def test_bad_factor_settings_are_one_line_errors(tmp_path, capsys, factor, key, shown):
    p = write(tmp_path, _with(kernels={"factor": factor}))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"{p}: {key}: ") and shown in err and "allowed: " in err


def test_a_sweep_over_C_on_a_factor_bank_equals_the_dense_sweep(tmp_path):
    # every C of a task reuses the fold's bank: the problem at the next C keeps the factor bank
    grid = {**BASE, "problem": {**BASE["problem"], "C": [0.5, 0.05]}, "cv": {"folds": 2, "seed": 0}}
    dense = run_sweep(load_sweep(write(tmp_path, grid, "d.yaml")), tmp_path / "d")
    fac = run_sweep(
        load_sweep(
            write(
                tmp_path,
                _with(**{k: v for k, v in grid.items() if k != "kernels"}, kernels={"factor": {"method": "exact"}}),
                "f.yaml",
            )
        ),
        tmp_path / "f",
    )
    assert len(fac.rows) == len(dense.rows) == 4
    for a, b in zip(dense.rows, fac.rows):
        assert (a["C"], a["split"]) == (b["C"], b["split"]) and b["status"] == "converged"
        assert float(b["objective"]) == pytest.approx(float(a["objective"]), rel=1e-7)
        assert float(b["val_accuracy"]) == pytest.approx(float(a["val_accuracy"]), abs=1e-12)


def test_factor_test_predictions_need_no_test_kernels():
    prep = parse_spec(_with(kernels={"factor": {"method": "exact"}}), file="f.yaml").prepare()
    assert prep.representation == "factor" and prep.K_test is None and prep.test.X is not None
    assert prep.problem.representation == "factor"


# ---------------------------------------------------------------------------
# representations the engine cannot use are refused before building
# ---------------------------------------------------------------------------
def test_an_engine_that_needs_an_array_is_refused_for_a_factor_bank(monkeypatch):
    from mklkit.kernels import factorize

    monkeypatch.setattr(factorize, "build_factor_bank", lambda *a, **k: pytest.fail("bank built"))
    spec = parse_spec(
        _with(
            kernels={"factor": {"method": "exact"}},
            problem={"loss": "hinge", "regularizer": {"name": "kl"}, "C": 0.5},
            engine={"name": "smo_mkl", "tol": 1e-6},
        ),
        file="t.yaml",
    )
    with pytest.raises(
        SpecError,
        match=r"t\.yaml: engine\.name.*'smo_mkl'.*not as a factor bank.*allowed:.*"
        r"factor bank.*spicy",
    ) as info:
        spec.prepare()
    assert info.value.key == "engine.name"


def test_proximal_is_accepted_for_a_factor_bank():
    from mklkit.pipeline import ProblemSettings, check_support, probe_problem
    from mklkit.plugins import get_registry

    reg = get_registry()
    settings = ProblemSettings(loss=reg.create("loss", "logistic"), regularizer=reg.create("regularizer", "l1"))
    y = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    check_support(reg.create("engine", "proximal"), probe_problem(y, 3, settings, "factor"))


def test_auto_skips_an_engine_that_cannot_use_the_representation():
    from mklkit.pipeline.choose import Auto
    from mklkit.pipeline import ProblemSettings, probe_problem
    from mklkit.plugins import get_registry

    reg = get_registry()
    settings = ProblemSettings(loss=reg.create("loss", "logistic"), regularizer=reg.create("regularizer", "l1"))
    y = np.where(np.arange(8) % 2 == 0, 1.0, -1.0)
    auto = Auto(proximal_min_samples=1, proximal_ratio=0.0)
    assert auto.choose(probe_problem(y, 3, settings))[0].name == "proximal"
    assert auto.choose(probe_problem(y, 3, settings, "factor"))[0].name == "bcd"
    assert auto.choose(probe_problem(y, 3, settings, "sharded"))[0].name == "spicy"


# ---------------------------------------------------------------------------
# precomputed kernels in a cross-validated sweep
# ---------------------------------------------------------------------------
def _raw_liver():
    ds = load_builtin("liver")
    X = Standardizer().fit(ds.X).transform(ds.X)
    K = KernelBank.build(X, [{"function": "rbf", "width": [1.0, 3.0]}, "linear"], normalize="none").K.copy()
    return K, np.where(ds.y > 0, 1.0, -1.0)


def test_sweep_over_precomputed_kernels_equals_the_folds_by_hand(tmp_path):
    from mklkit.pipeline import CVSettings, gram_data, make_folds
    from mklkit.plugins import get_registry
    from mklkit.problem import Problem

    K, y = _raw_liver()
    np.savez(tmp_path / "k.npz", K_train=K, y_train=y)
    spec = {
        "data": {"test_size": 0},
        "kernels": {"precomputed": "k.npz", "normalize": "trace"},
        "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": [0.5, 0.1]},
        "engine": {"name": "spicy", "tol": 1e-8, "max_iter": 300},
        "cv": {"folds": 3, "seed": 0},
    }
    res = run_sweep(load_sweep(write(tmp_path, spec)), tmp_path / "out")
    assert len(res.rows) == 6
    reg = get_registry()
    loss, rg = reg.create("loss", "logistic"), reg.create("regularizer", {"name": "elasticnet", "lam": 0.5})
    engine = reg.create("engine", {"name": "spicy", "tol": 1e-8, "max_iter": 300})
    folds = make_folds(CVSettings(folds=3, seed=0), gram_data(K, y, "classification"))
    for split, (tr, va) in enumerate(folds):
        Ktr = K[:, tr][:, :, tr]
        traces = np.einsum("mii->m", Ktr)
        Kva = K[:, va][:, :, tr] / traces[:, None, None]
        for C in (0.5, 0.1):
            r = engine.solve(Problem(K=Ktr / traces[:, None, None], y=y[tr], loss=loss, regularizer=rg, C=C))
            acc = float(np.mean(np.where(r.decision_function(Kva) >= 0, 1.0, -1.0) == y[va]))
            row = next(w for w in res.rows if w["split"] == str(split) and float(w["C"]) == C)
            assert float(row["objective"]) == pytest.approx(r.objective, rel=1e-6)
            assert float(row["val_accuracy"]) == pytest.approx(acc, abs=1e-10)


def test_pipeline_errors_carry_their_key_as_data():
    exc = PipelineError("kernels.bank[1].width", "invalid value", -2, "a number > 0")
    assert (exc.key, exc.value, exc.allowed) == ("kernels.bank[1].width", -2, "a number > 0")
    assert str(exc) == "kernels.bank[1].width: invalid value; got -2; allowed: a number > 0"
    assert exc.message("width") == "width: invalid value; got -2; allowed: a number > 0"


@pytest.mark.parametrize("layout", ["samples first", "kernels first", "view of kernels first", "float32"])
def test_given_kernels_are_copied_kernels_first_and_their_rows_taken(layout):
    """The estimators' (N, N, M) input becomes one (M, N, N) copy, whatever its memory layout,
    and the held-out path's fitting rows of it are the same rows and columns of every kernel."""
    from mklkit.pipeline.bank import rows_of
    from mklkit.pipeline.data import kernels_in_order

    rng = np.random.default_rng(3)
    K = rng.normal(size=(4, 37, 37))
    if layout == "samples first":  # np.stack(..., axis=-1): C-contiguous (N, N, M)
        given = np.moveaxis(np.ascontiguousarray(np.moveaxis(K, 0, -1)), 2, 0)
    elif layout == "kernels first":
        given = K
    elif layout == "view of kernels first":  # np.moveaxis(K, 0, -1) passed, moved back
        given = np.moveaxis(np.moveaxis(K, 0, -1), 2, 0)
    else:
        given = np.moveaxis(np.moveaxis(K, 0, -1).astype(np.float32), 2, 0)
    out = kernels_in_order(given)
    assert out.flags.c_contiguous and out.dtype == np.float64 and not np.shares_memory(out, given)
    np.testing.assert_array_equal(out, np.asarray(given, dtype=np.float64))
    rows = np.array([5, 0, 36, 5, 17])
    np.testing.assert_array_equal(rows_of(out, rows), out[:, rows][:, :, rows])
    strided, few = out[:, ::2, ::2], rows[:3] % 19  # not contiguous: numpy's gather
    np.testing.assert_array_equal(rows_of(strided, few), strided[:, few][:, :, few])
