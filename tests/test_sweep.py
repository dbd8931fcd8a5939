"""``mklkit sweep``: grid expansion, errors, backends, interruption and resume, best refit."""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from mklkit.cli import main
from mklkit.spec import SpecError, parse_spec
from mklkit.sweep import (
    COLUMNS,
    KEY_COLUMNS,
    RESULTS,
    TIMING_COLUMNS,
    load_sweep,
    parse_sweep,
    read_results,
    run_sweep,
    select_best,
)

SPECS = Path(__file__).resolve().parent.parent / "specs"

#: 2 regularizer values x 2 C values x 3 folds: 6 tasks, 12 rows, each a few ms.
GRID: dict[str, Any] = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}]},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": [0.2, 0.5]}, "C": [0.1, 1.0]},
    "engine": {"name": "spicy", "tol": 1.0e-4, "max_iter": 100},
    "cv": {"folds": 3, "seed": 0},
}


def grid(**changes: Any) -> dict[str, Any]:
    """GRID with ``section={...}`` updates merged in (a None value deletes the key)."""
    g = copy.deepcopy(GRID)
    for section, update in changes.items():
        if update is None:
            g.pop(section, None)
        elif isinstance(update, dict) and isinstance(g.get(section), dict):
            for k, v in update.items():
                if v is None:
                    g[section].pop(k, None)
                else:
                    g[section][k] = v
        else:
            g[section] = update
    return g


def write_spec(tmp_path: Path, spec: dict, name: str = "sw.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def problem_columns(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{c: r[c] for c in COLUMNS if c not in TIMING_COLUMNS} for r in rows]


def assert_rows_close(a: list[dict[str, str]], b: list[dict[str, str]], rtol: float = 1e-6) -> None:
    """Same rows in the same order; numbers equal to ``rtol`` (solver tolerance is far looser)."""
    assert len(a) == len(b) and len(a) > 0
    for ra, rb in zip(a, b):
        assert [ra[c] for c in KEY_COLUMNS] == [rb[c] for c in KEY_COLUMNS]
        for c in COLUMNS:
            if c in TIMING_COLUMNS:
                continue
            x, y = ra[c], rb[c]
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                assert x == y, (c, x, y)
            else:
                assert fx == pytest.approx(fy, rel=rtol, abs=1e-12), (c, ra, rb)


# ---------------------------------------------------------------------------
# grammar
# ---------------------------------------------------------------------------
def test_sweep_grid_expands_lists_and_sorts_C_descending():
    sw = parse_sweep(grid(problem={"C": [0.1, 1.0, 0.5]}), file="g.yaml")
    assert sw.Cs == (1.0, 0.5, 0.1)
    assert [c.labels["regularizer"] for c in sw.configs] == ["elasticnet(lam=0.2)", "elasticnet(lam=0.5)"]
    assert [k for k, _ in sw.axes] == ["problem.regularizer.lam", "problem.C"]
    assert sw.cv.kind == "folds" and sw.cv.n == 3
    assert (sw.n_tasks, sw.n_rows) == (6, 18)
    assert all(c.spec.problem.C == 1.0 for c in sw.configs)


def test_sweep_data_loss_and_engine_axes_form_a_product():
    sw = parse_sweep(
        grid(
            data={"builtin": ["sonar", "liver"]},
            problem={"loss": ["hinge", "logistic"], "regularizer": ["l1", {"name": "elasticnet", "lam": [0.2, 0.5]}]},
            engine={"tol": [1e-3, 1e-4]},
            cv={"splits": 4, "test_size": 0.2, "seed": 3, "folds": None},
        ),
        file="g.yaml",
    )
    assert len(sw.configs) == 2 * 2 * 3 * 2
    assert sw.data_values == ["sonar", "liver"]
    first = sw.configs[0].labels
    assert first == {
        "dataset": "sonar",
        "loss": "hinge",
        "regularizer": "l1",
        "weighting": "none",
        "engine": "spicy(tol=0.001, max_iter=100)",
        "bias": "true",
    }
    assert sw.configs[-1].labels["dataset"] == "liver"
    assert {c.labels["regularizer"] for c in sw.configs} == {"l1", "elasticnet(lam=0.2)", "elasticnet(lam=0.5)"}
    assert sw.cv.model_dump(exclude_none=True) == {"splits": 4, "test_size": 0.2, "seed": 3}
    assert sw.n_tasks == len(sw.configs) * 4


def test_sweep_without_cv_uses_five_folds():
    sw = parse_sweep(grid(cv=None), file="g.yaml")
    assert (sw.cv.kind, sw.cv.n, sw.cv.seed) == ("folds", 5, 0)


def test_sweep_overrides_may_set_lists(tmp_path):
    p = write_spec(tmp_path, grid())
    sw = load_sweep(p, ["problem.C=[0.01, 0.1, 1]", "cv.folds=2"])
    assert sw.Cs == (1.0, 0.1, 0.01) and sw.cv.n == 2


BAD_SWEEPS = [
    (dict(problem={"C": []}), "problem.C", "an empty list", "[]"),
    (dict(problem={"C": [0.1, 0.1]}), "problem.C", "the same value twice", "[0.1, 0.1]"),
    (dict(problem={"C": [0.1, -1]}), "problem.C", "invalid value", "-1"),
    (
        dict(problem={"regularizer": {"name": "elasticnet", "lam": [0.2, 1.5]}}),
        "problem.regularizer.lam",
        "invalid value",
        "1.5",
    ),
    (dict(problem={"loss": ["logistic", "logistc"]}), "problem.loss", "unknown loss", "'logistc'"),
    (
        dict(problem={"loss": ["logistic", "squared"]}),
        "problem.loss",
        "mixes classification and regression",
        "squared (regression)",
    ),
    (
        dict(problem={"loss": ["logistic", "logistic"]}),
        "problem.loss",
        "two grid points are the same problem",
        "logistic",
    ),
    (dict(engine={"tol": [1e-3, -1]}), "engine.tol", "invalid value", "-1"),
    (dict(data={"builtin": ["sonar", "sonarr"]}), "data.builtin", "unknown builtin data set", "'sonarr'"),
    (dict(cv={"folds": 1}), "cv.folds", "invalid value", "1"),
    (dict(cv={"folds": 3, "splits": 4}), "cv.splits", "exclusive", "4"),
    (dict(cv={"folds": 3, "test_size": 0.2}), "cv.test_size", "only used with cv.splits", "0.2"),
    (dict(cv={"folds": None, "splits": 3, "test_size": 1.5}), "cv.test_size", "out of range", "1.5"),
    (dict(cv={"fold": 3}), "cv.fold", "did you mean 'folds'", "'fold'"),
    (dict(cv=[3]), "cv", "must be a mapping", "[3]"),
    (dict(problem={"C": [[0.1, 1.0]]}), "problem.C", "a single value", "[0.1, 1.0]"),
    (
        dict(data={"builtin": "sonar", "inlier": 1}, problem={"loss": "one_class", "regularizer": "l1", "bias": False}),
        "problem.loss",
        "inliers only",
        "'one_class'",
    ),
]


@pytest.mark.parametrize("changes, key, problem, shown", BAD_SWEEPS, ids=[f"{c[1]}-{c[2][:20]}" for c in BAD_SWEEPS])
def test_sweep_errors_name_key_and_value(changes, key, problem, shown):
    with pytest.raises(SpecError) as info:
        parse_sweep(grid(**changes), file="g.yaml")
    err = info.value
    msg = str(err)
    assert "\n" not in msg and msg.startswith("g.yaml: ")
    assert err.key == key, msg
    assert problem in msg and shown in msg and "allowed:" in msg, msg


def test_too_many_folds_for_a_class_is_refused_before_solving(tmp_path):
    sw = parse_sweep(grid(cv={"folds": 200}), file="g.yaml")
    with pytest.raises(SpecError, match=r"g\.yaml: cv\.folds.*200 stratified folds.*class .* \d+ training rows"):
        sw.check()


@pytest.mark.parametrize(
    "key, value",
    [
        ("problem.C", [0.1, 1.0]),
        ("problem.regularizer.lam", [0.2, 0.5]),
        ("problem.loss", ["hinge", "logistic"]),
        ("engine.tol", [1e-3, 1e-4]),
        ("data.builtin", ["sonar", "liver"]),
    ],
)
def test_run_spec_refuses_sweep_lists_and_points_to_sweep(key, value):
    raw = grid(cv=None)
    raw["problem"]["C"] = 0.5
    raw["problem"]["regularizer"]["lam"] = 0.5
    section, *path = key.split(".")
    node = raw[section]
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(SpecError) as info:
        parse_spec(raw, file="g.yaml")
    msg = str(info.value)
    assert info.value.key == key
    assert "a list of values makes a sweep" in msg and "'mklkit sweep g.yaml'" in msg, msg
    assert repr(value).replace("'", "") in msg.replace("'", "")


def test_run_spec_refuses_cv_section():
    raw = grid(problem={"C": 0.5, "regularizer": "l1"})
    with pytest.raises(SpecError, match=r"g\.yaml: cv.*'mklkit sweep'.*got \{'folds': 3"):
        parse_spec(raw, file="g.yaml")


def test_kernel_bank_lists_are_not_sweep_axes():
    raw = grid(problem={"C": 0.5, "regularizer": "l1"}, cv=None)
    spec = parse_spec(raw, file="g.yaml")  # width: [1.0, 5.0] is two kernels
    assert spec.kernels.bank[0]["width"] == [1.0, 5.0]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_cli_validate_and_run_refuse_a_sweep_spec(tmp_path, capsys, command):
    p = write_spec(tmp_path, grid(cv=None))
    code = main([command, str(p)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert (
        f"{p}: problem.regularizer.lam: a list of values makes a sweep (this spec has 2: problem.regularizer.lam, problem.C)"
        in line
    )
    assert f"'mklkit sweep {p}'" in line


def test_shipped_sweep_spec_is_the_spicymkl_grid():
    sw = load_sweep(SPECS / "sweep_uci.yaml")
    assert sw.data_values == ["liver", "pima", "ionosphere", "wpbc", "sonar"]
    assert {c.labels["loss"] for c in sw.configs} == {"hinge", "logistic"}
    assert sw.Cs == (0.5, 0.05, 0.005)
    assert sw.cv.model_dump(exclude_none=True) == {"splits": 10, "test_size": 0.2, "seed": 0}
    assert (len(sw.configs), sw.n_tasks, sw.n_rows) == (10, 100, 300)


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def serial_rows(tmp_path_factory) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("serial")
    res = run_sweep(parse_sweep(GRID, file="g.yaml"), out)
    return res.rows


def test_serial_sweep_writes_rows_in_grid_order(serial_rows):
    rows = serial_rows
    assert len(rows) == 12
    assert [r["C"] for r in rows[:4]] == ["1.0", "0.1", "1.0", "0.1"]  # C descending within a task
    assert [r["split"] for r in rows[:4]] == ["0", "0", "1", "1"]
    assert [r["warm_start"] for r in rows[:2]] == ["false", "true"]  # spicy warm-starts along C
    for r in rows:
        assert r["status"] == "converged" and float(r["gap"]) <= 1e-4
        assert 0.0 <= float(r["val_accuracy"]) <= 1.0 and r["val_rmse"] == ""
        assert int(r["n_train"]) + int(r["n_val"]) == 156  # sonar 208 rows, 25 % held out
        assert r["n_kernels"] == "3"


def test_local_pool_gives_the_same_rows(tmp_path, serial_rows):
    res = run_sweep(parse_sweep(GRID, file="g.yaml"), tmp_path / "pool", workers=2)
    assert res.backend.startswith("local pool of 2")
    assert_rows_close(res.rows, serial_rows)
    assert_rows_close(read_results(tmp_path / "pool" / RESULTS), serial_rows)


def test_local_pool_from_a_script_without_a_main_guard(tmp_path, serial_rows):
    # the pool's worker processes do not run the main script again: a sweep at its top level
    # (no 'if __name__ == "__main__":') solves every task in the workers
    spec = write_spec(tmp_path, GRID)
    out = tmp_path / "out"
    script = tmp_path / "run_grid.py"
    script.write_text(
        "from mklkit.api import sweep\n\n"
        f"res = sweep({str(spec)!r}, out_dir={str(out)!r}, workers=2)\n"
        "print(len(res.rows), res.backend)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["12", "local", "pool", "of", "2", "processes"]
    assert_rows_close(read_results(out / RESULTS), serial_rows)


def test_splits_rows_equal_mklkit_run_with_that_seed(tmp_path):
    """Split i of ``cv: {splits: n, test_size: f, seed: s}`` is ``mklkit run`` with data.seed = s + i."""
    from mklkit.api import run

    raw = grid(
        data={"test_size": 0},
        problem={"regularizer": "l1", "C": 0.5},
        cv={"folds": None, "splits": 2, "test_size": 0.2, "seed": 4},
    )
    res = run_sweep(parse_sweep(raw, file="g.yaml"), tmp_path / "o")
    for r in res.rows:
        single = grid(
            data={"test_size": 0.2, "seed": 4 + int(r["split"])}, problem={"regularizer": "l1", "C": 0.5}, cv=None
        )
        ref = run(parse_spec(single, file="g.yaml"))
        assert float(r["objective"]) == pytest.approx(ref.result.objective, rel=1e-10)
        assert float(r["val_accuracy"]) == ref.metrics["test_accuracy"]
        assert int(r["n_val"]) == ref.n_test


def test_best_configuration_is_refitted_and_written(tmp_path):
    sw = parse_sweep(GRID, file="g.yaml")
    res = run_sweep(sw, tmp_path / "o")
    # the best mean validation accuracy, computed here from results.csv
    rows = read_results(tmp_path / "o" / RESULTS)
    means: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        means.setdefault((r["regularizer"], r["C"]), []).append(float(r["val_accuracy"]))
    top = max(np.mean(v) for v in means.values())
    (best,) = res.best
    assert best.mean == pytest.approx(top)
    assert np.mean(means[(best.labels["regularizer"], repr(best.C))]) == pytest.approx(top)
    summary = json.loads((tmp_path / "o" / "best" / "summary.json").read_text())
    assert summary["C"] == best.C
    assert summary["regularizer"] == "elasticnet"
    assert summary["spec"]["problem"]["regularizer"]["lam"] == float(
        best.labels["regularizer"][len("elasticnet(lam=") : -1]
    )
    assert summary["n_train"] == 156 and summary["n_test"] == 52  # refit on all training rows, held-out test part
    assert (tmp_path / "o" / "best" / "solution.npz").is_file()
    meta = json.loads((tmp_path / "o" / "sweep.json").read_text())
    assert meta["complete"] is True and meta["best"][0]["C"] == best.C
    assert select_best(sw, rows)[0][2] == best.C


def test_weighting_axis_compares_two_stage_methods_with_mkl(tmp_path):
    """``problem.weighting`` as a list (``null`` for no weighting, a weighting's list-valued parameter too): one
    grid point per entry, labelled in ``results.csv``; every row of a weighting is its second stage (the uniform
    regularizer), scored like any other and equal to ``mklkit run`` of that point."""
    from mklkit import api
    from mklkit.spec.models import parse_spec

    g = grid(problem={"regularizer": None, "weighting": [None, "average", {"name": "easymkl", "lam": [0.1, 0.9]}]})
    g["problem"]["C"] = [1.0]
    sw = parse_sweep(g, file="g.yaml")
    labels = [(c.labels["weighting"], c.labels["regularizer"]) for c in sw.configs]
    assert labels == [
        ("none", "l1"),  # the spec's default regularizer
        ("average", "uniform"),
        ("easymkl(lam=0.1)", "uniform"),
        ("easymkl(lam=0.9)", "uniform"),
    ]
    assert ("problem.weighting", g["problem"]["weighting"]) in sw.axes
    res = run_sweep(sw, tmp_path / "o")
    rows = read_results(tmp_path / "o" / RESULTS)
    assert {r["weighting"] for r in rows} == {"none", "average", "easymkl(lam=0.1)", "easymkl(lam=0.9)"}
    assert all(r["status"] == "converged" and float(r["gap"]) <= 1e-4 for r in rows)
    assert res.best[0].labels["weighting"] in {r["weighting"] for r in rows}
    # a row of the sweep is the run of its grid point on that fold's rows: the refit of the best on all rows
    best = json.loads((tmp_path / "o" / "best" / "summary.json").read_text())
    spec = parse_spec({k: v for k, v in best["spec"].items() if k != "output"})
    assert api.run(spec).result.objective == pytest.approx(best["objective"], rel=1e-9)


def test_existing_sweep_is_not_overwritten(tmp_path):
    sw = parse_sweep(grid(problem={"C": 1.0}), file="g.yaml")
    run_sweep(sw, tmp_path / "o")
    with pytest.raises(
        SpecError, match=r"--out.*already holds a sweep.*results\.csv.*nothing was overwritten.*allowed: --resume"
    ):
        run_sweep(sw, tmp_path / "o")
    assert len(run_sweep(sw, tmp_path / "o", force=True).rows) == 6


class Interrupt(KeyboardInterrupt):
    pass


def test_interrupted_sweep_keeps_rows_and_resume_solves_only_the_rest(tmp_path, serial_rows):
    sw = parse_sweep(GRID, file="g.yaml")
    out = tmp_path / "o"

    def stop_after_two(ev: dict[str, Any]) -> None:
        if ev["event"] == "task" and ev["done"] == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        run_sweep(sw, out, progress=stop_after_two)
    kept = read_results(out / RESULTS)
    assert len(kept) == 4  # two tasks x two C
    assert not (out / "best").exists()
    events: list[dict[str, Any]] = []
    res = run_sweep(parse_sweep(GRID, file="g.yaml"), out, resume=True, progress=events.append)
    start = events[0]
    assert start["event"] == "start" and start["n_skipped"] == 2
    solved = [e["task"] for e in events if e["event"] == "task"]
    assert len(solved) == 4 and res.n_run == 4 and res.n_skipped == 2
    assert not any("split 0" in t and "lam=0.2" in t for t in solved)  # the finished tasks were not redone
    assert_rows_close(res.rows, serial_rows)
    # the kept rows are the ones written before the interruption, byte for byte
    assert res.rows[:4] == kept


def test_resume_after_a_cut_off_line_redoes_only_the_incomplete_task(tmp_path, serial_rows):
    sw = parse_sweep(GRID, file="g.yaml")
    out = tmp_path / "o"
    run_sweep(sw, out)
    path = out / RESULTS
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    # keep the header, task 0 (2 rows), and half of the first row of task 1
    path.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert len(read_results(path)) == 2
    events: list[dict[str, Any]] = []
    res = run_sweep(parse_sweep(GRID, file="g.yaml"), out, resume=True, progress=events.append)
    assert events[0]["n_skipped"] == 1 and res.n_run == 5
    assert_rows_close(res.rows, serial_rows)
    assert path.read_text().count("\n") == 13


def test_a_failing_task_keeps_the_other_rows_and_resume_retries_it(tmp_path, capsys, monkeypatch, serial_rows):
    import mklkit.sweep.runner as sweep_module  # run_sweep looks solve_task up here

    real = sweep_module.solve_task

    def lose_task_3(task):
        if task.index == 3:
            raise RuntimeError("worker lost")
        return real(task)

    spec = write_spec(tmp_path, GRID)
    out = tmp_path / "o"
    monkeypatch.setattr(sweep_module, "solve_task", lose_task_3)
    code = main(["sweep", str(spec), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "1 of 6 task(s) failed" in err and "RuntimeError: worker lost" in err and "--resume" in err
    assert "FAILED sonar, logistic, elasticnet(lam=0.5)" in err
    assert len(read_results(out / RESULTS)) == 10 and not (out / "best").exists()
    monkeypatch.setattr(sweep_module, "solve_task", real)
    assert main(["sweep", str(spec), "--out", str(out), "--resume", "--quiet"]) == 0
    assert_rows_close(read_results(out / RESULTS), serial_rows)
    assert (out / "best" / "summary.json").is_file()


def test_resume_with_a_complete_sweep_solves_nothing(tmp_path):
    sw = parse_sweep(grid(problem={"C": 1.0}), file="g.yaml")
    first = run_sweep(sw, tmp_path / "o")
    again = run_sweep(sw, tmp_path / "o", resume=True)
    assert again.n_run == 0 and again.n_skipped == 6 and again.backend.startswith("none")
    assert again.rows == first.rows


def test_resume_refuses_a_different_grid(tmp_path):
    run_sweep(parse_sweep(grid(problem={"C": 1.0}), file="g.yaml"), tmp_path / "o")
    other = parse_sweep(grid(problem={"C": 1.0}, cv={"seed": 1}), file="g.yaml")
    with pytest.raises(SpecError, match=r"--resume.*results\.csv.*another sweep.*grid or the cross-validation"):
        run_sweep(other, tmp_path / "o", resume=True)


def test_resume_refuses_a_sweep_json_with_configs_under_solver(tmp_path):
    # a sweep.json whose configurations hold the engine under "solver" is another grid
    sw = parse_sweep(grid(problem={"C": 1.0}), file="g.yaml")
    run_sweep(sw, tmp_path / "o")
    path = tmp_path / "o" / "sweep.json"
    meta = json.loads(path.read_text())
    for config in meta["grid"]["configs"]:
        config["solver"] = config.pop("engine")
    path.write_text(json.dumps(meta))
    with pytest.raises(SpecError, match=r"--resume.*results\.csv.*another sweep.*grid or the cross-validation"):
        run_sweep(sw, tmp_path / "o", resume=True)


def test_workers_and_scheduler_are_exclusive(tmp_path):
    sw = parse_sweep(GRID, file="g.yaml")
    with pytest.raises(SpecError, match="--workers.*Dask scheduler.*own workers"):
        run_sweep(sw, tmp_path / "o", workers=2, scheduler="tcp://127.0.0.1:1")


@pytest.mark.parametrize("extra", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_cli_rejects_bad_workers(tmp_path, capsys, extra):
    p = write_spec(tmp_path, grid(problem={"C": 1.0}))
    code = main(["sweep", str(p), "--out", str(tmp_path / "o"), "--workers", "0", *extra])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "--workers: invalid value" in err and "got 0" in err and "an integer >= 1" in err
    assert not (tmp_path / "o").exists()


def test_missing_dask_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    sw = parse_sweep(grid(problem={"C": 1.0}), file="g.yaml")
    with pytest.raises(
        SpecError, match=r"g\.yaml: --scheduler.*dask\.distributed.*allowed: pip install 'mklkit\[dask\]'"
    ):
        run_sweep(sw, tmp_path / "o", scheduler="tcp://127.0.0.1:1")


def test_cli_sweep_runs_and_reports_best(tmp_path, capsys):
    p = write_spec(tmp_path, grid(problem={"C": [0.1, 1.0]}))
    out = tmp_path / "o"
    assert main(["sweep", str(p), "--dry-run"]) == 0
    assert "6 tasks, 12 rows" in capsys.readouterr().out
    code = main(["sweep", str(p), "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "best        sonar: loss logistic" in cap.out and str(out / "best") in cap.out
    assert "mklkit sweep: 6/6 " in cap.err and "running on serial" in cap.err
    with (out / RESULTS).open() as fh:
        assert len(list(csv.DictReader(fh))) == 12
    code = main(["sweep", str(p), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "already holds a sweep" in err and len(err.strip().splitlines()) == 1
    code = main(["sweep", str(p), "--out", str(out), "--workers", "2", "--scheduler", "tcp://x:1"])
    err = capsys.readouterr().err
    assert code == 2 and "not allowed with argument" in err


def _site_with_a_broken_plugin(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH with an installed distribution whose mklkit plugin cannot be imported."""
    site = tmp_path / "site"
    (site / "mklkit_broken_demo").mkdir(parents=True)
    (site / "mklkit_broken_demo" / "__init__.py").write_text("")
    (site / "mklkit_broken_demo" / "plugin.py").write_text("import numba_nightly  # not installed\n")
    info = site / "mklkit_broken_demo-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mklkit-broken-demo\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[mklkit]\nbroken_demo = mklkit_broken_demo.plugin\n")
    return site


def _pool_sweep_with_a_broken_plugin(tmp_path: Path, *options: str) -> str:
    """stderr of a two-worker sweep (two tasks that do not converge) with a broken plugin installed."""
    p = write_spec(
        tmp_path,
        grid(
            problem={"regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 1.0},
            engine={"tol": 1e-14, "max_iter": 1},
            cv={"folds": 2, "seed": 0},
        ),
    )
    site = _site_with_a_broken_plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-m", "mklkit.cli", "sweep", str(p), "--workers", "2", "--out", str(tmp_path / "o"), *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    # the solves that did not converge are reported by the parent, not by each worker
    assert "ConvergenceWarning" not in r.stderr
    assert "2 of 2 solves did not converge" in r.stderr
    return r.stderr


@pytest.mark.slow
def test_a_pool_sweep_with_quiet_does_not_repeat_a_broken_plugin_per_worker(tmp_path):
    # every spawned worker loads the entry points again and printed the warning
    err = _pool_sweep_with_a_broken_plugin(tmp_path, "--quiet")
    assert "broken_demo" not in err, err


@pytest.mark.slow
def test_a_pool_sweep_reports_a_broken_plugin_once(tmp_path):
    err = _pool_sweep_with_a_broken_plugin(tmp_path)
    broken = [ln for ln in err.splitlines() if "'broken_demo'" in ln]
    assert len(broken) == 1, err
    assert broken[0].startswith("warning: ") and "mklkit-broken-demo 0.1.0" in broken[0]
    assert "ModuleNotFoundError: No module named 'numba_nightly'" in broken[0]


# ---------------------------------------------------------------------------
# Dask (the `test` extra installs dask[distributed]; these must run in CI)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_cluster():
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    try:
        yield cluster
    finally:
        cluster.close()


def test_dask_local_cluster_gives_the_same_rows(tmp_path, local_cluster, serial_rows):
    res = run_sweep(parse_sweep(GRID, file="g.yaml"), tmp_path / "dask", scheduler=local_cluster.scheduler_address)
    assert res.backend.startswith("Dask cluster at") and "(2 workers)" in res.backend
    assert_rows_close(res.rows, serial_rows)
    assert (tmp_path / "dask" / "best" / "summary.json").is_file()


def test_gridsearchcv_runs_mklclassifier_on_the_dask_joblib_backend(local_cluster):
    import joblib
    from distributed import Client, get_task_stream
    from sklearn.model_selection import GridSearchCV

    from mklkit import MKLClassifier
    from mklkit.data import load_builtin
    from mklkit.result import TrivialModelWarning

    ds = load_builtin("sonar")
    X, y = ds.X[:120], ds.y[:120]
    est = MKLClassifier(
        kernels=[{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}], regularizer="l1", tol=1e-4
    )
    params = {"C": [0.1, 0.3]}  # below C_max (about 0.8 on these folds): every fit selects kernels
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrivialModelWarning)
        serial = GridSearchCV(est, params, cv=3).fit(X, y)
    with Client(local_cluster) as client, get_task_stream(client) as stream:
        with joblib.parallel_config(backend="dask"):
            dist = GridSearchCV(est, params, cv=3, n_jobs=2).fit(X, y)
    assert len(stream.data) >= 6  # the 2 x 3 fits ran as Dask tasks
    np.testing.assert_allclose(dist.cv_results_["mean_test_score"], serial.cv_results_["mean_test_score"])
    assert dist.best_params_ == serial.best_params_
    assert dist.predict(X[:5]).shape == (5,)
