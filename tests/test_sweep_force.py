"""``mklkit sweep --force``: the earlier sweep's derived outputs go before the new sweep writes anything.

An interrupted forced sweep must never leave the earlier sweep's ``best/``
beside its own partial ``results.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import mklkit.sweep.runner as runner_module  # run_sweep looks solve_task up here
from mklkit.cli import EXIT_INTERRUPTED, main
from mklkit.spec import SpecError
from mklkit.sweep import RESULTS, parse_sweep, read_results, run_sweep

#: 2 regularizer values x 2 C values x 2 folds: 4 tasks, 8 rows, each a few ms.
GRID: dict[str, Any] = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}]},
    "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": [0.2, 0.5]}, "C": [0.1, 1.0]},
    "engine": {"name": "spicy", "tol": 1.0e-4, "max_iter": 100},
    "cv": {"folds": 2, "seed": 0},
}


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("."))


def test_interrupted_forced_sweep_leaves_no_stale_best(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "sw.yaml"
    spec.write_text(yaml.safe_dump(GRID, sort_keys=False))
    out = tmp_path / "o"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    assert (out / "best" / "summary.json").is_file()
    (out / "best" / "gap.png").write_bytes(b"a plot of the earlier best run")

    real = runner_module.solve_task

    def interrupt_at_task_2(task):
        if task.index == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(runner_module, "solve_task", interrupt_at_task_2)
    code = main(["sweep", str(spec), "--out", str(out), "--force", "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_INTERRUPTED, err
    assert "4 finished rows kept" in err and "Traceback" not in err
    assert len(read_results(out / RESULTS)) == 4  # tasks 0 and 1, two C each
    assert not (out / "best").exists()  # the earlier sweep's refit is gone with its rows
    assert leftovers(out) == []

    monkeypatch.setattr(runner_module, "solve_task", real)
    assert main(["sweep", str(spec), "--out", str(out), "--resume", "--quiet"]) == 0
    assert len(read_results(out / RESULTS)) == 8
    assert (out / "best" / "summary.json").is_file() and not (out / "best" / "gap.png").exists()


def test_forced_sweep_removes_the_best_of_every_earlier_data_set(tmp_path):
    # the earlier sweep had two data sets (best/<name>/); the new one has one (best/)
    out = tmp_path / "o"
    two = parse_sweep(
        {
            **GRID,
            "data": {**GRID["data"], "builtin": ["sonar", "liver"]},
            "problem": {**GRID["problem"], "loss": "squared"},
        },
        file="two.yaml",
    )  # a loss for both
    run_sweep(two, out)
    assert (out / "best" / "liver" / "summary.json").is_file()
    events: list[dict[str, Any]] = []

    def stop_at_start(ev: dict[str, Any]) -> None:
        events.append(ev)
        if ev["event"] == "start":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(parse_sweep(GRID, file="one.yaml"), out, force=True, progress=stop_at_start)
    assert not (out / "best").exists() and leftovers(out) == []
    assert read_results(out / RESULTS) == []


def test_a_hidden_copy_left_by_an_earlier_interruption_is_removed(tmp_path):
    out = tmp_path / "o"
    sw = parse_sweep({**GRID, "problem": {**GRID["problem"], "regularizer": "l1", "C": 1.0}}, file="g.yaml")
    run_sweep(sw, out)
    stale = out / ".best.removed-0123abcd"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "summary.json").write_text("{}")
    res = run_sweep(sw, out, force=True)
    assert leftovers(out) == [] and res.best[0].dir == out / "best"
    assert (out / "best" / "summary.json").is_file()


def test_a_best_that_cannot_be_removed_stops_the_forced_sweep_before_it_writes(tmp_path, monkeypatch):
    out = tmp_path / "o"
    sw = parse_sweep({**GRID, "problem": {**GRID["problem"], "regularizer": "l1", "C": 1.0}}, file="g.yaml")
    run_sweep(sw, out)
    before = (out / RESULTS).read_text()
    real = runner_module.os.replace

    def refuse_best(src, dst):
        if Path(src).name == "best":
            raise PermissionError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(runner_module.os, "replace", refuse_best)
    # (the path may be shortened in the message: any length of tmp_path)
    with pytest.raises(SpecError, match=r"--out.*best/.*Permission denied.*got '.*allowed: .*--out DIR"):
        run_sweep(sw, out, force=True, out_key="--out")
    assert (out / RESULTS).read_text() == before and (out / "best" / "summary.json").is_file()
