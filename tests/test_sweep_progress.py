"""``mklkit sweep`` says how far it is while its tasks run for long without finishing (heartbeat)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
import yaml

import mklkit.sweep.runner as runner
from mklkit.cli import main
from mklkit.sweep import load_sweep, run_sweep

#: one configuration x one C x 2 folds: 2 tasks of a few ms each
SPEC = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}]},
    "problem": {"loss": "logistic", "regularizer": "l1", "C": [0.1]},
    "engine": {"name": "spicy", "tol": 1.0e-4, "max_iter": 100},
    "cv": {"folds": 2, "seed": 0},
}
SLOW_S = 0.8


@pytest.fixture
def slow_tasks(monkeypatch):
    """Each task sleeps SLOW_S before it solves; a heartbeat is due every 0.1 s without a finished task."""
    solve = runner.solve_task

    def slow(task):
        time.sleep(SLOW_S)
        return solve(task)

    monkeypatch.setattr(runner, "solve_task", slow)
    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.1)


def _spec(tmp_path: Path) -> Path:
    p = tmp_path / "sw.yaml"
    p.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return p


def _heartbeat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mklkit-sweep-heartbeat"]


def test_a_slow_task_gets_heartbeat_events_with_its_label(tmp_path, slow_tasks):
    events: list[dict] = []
    res = run_sweep(load_sweep(str(_spec(tmp_path))), tmp_path / "out", progress=events.append)
    beats = [e for e in events if e["event"] == "heartbeat"]
    assert beats, [e["event"] for e in events]
    first = beats[0]
    assert (first["done"], first["total"], first["running"]) == (0, 2, 1)
    assert first["longest"].endswith("split 0") and "logistic" in first["longest"]
    assert 0.0 < first["longest_s"] <= first["elapsed_s"] + 1e-6
    # a heartbeat after the first task finished counts it
    assert any(b["done"] == 1 and b["longest"].endswith("split 1") for b in beats)
    assert not _heartbeat_threads()  # joined before run_sweep returned
    assert res.n_run == 2 and len(res.rows) == 2


def test_no_heartbeat_for_tasks_that_finish_in_time(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "HEARTBEAT_S", 60.0)
    events: list[dict] = []
    run_sweep(load_sweep(str(_spec(tmp_path))), tmp_path / "out", progress=events.append)
    assert [e["event"] for e in events if e["event"] == "heartbeat"] == []
    assert [e["event"] for e in events].count("task") == 2
    assert not _heartbeat_threads()


def test_cli_prints_the_heartbeat_line_and_not_with_quiet(tmp_path, slow_tasks, capsys):
    spec = _spec(tmp_path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    line = re.search(
        r"mklkit sweep: 0 of 2 tasks finished, 1 running, \d+ s elapsed; "
        r"the longest running: (.*) for \d+ s",
        err,
    )
    assert line is not None, err
    assert line.group(1).endswith("split 0")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "tasks finished" not in err and "longest running" not in err
    assert not _heartbeat_threads()
