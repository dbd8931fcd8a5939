"""PNG reports of run directories (mklkit.report) and the result files they read (mklkit.io)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mklkit.io import OutputError, check_output_dir, read_history, read_summary, to_jsonable, write_json
from mklkit.report import PLOTS, ReportError, plot_run

PNG = b"\x89PNG\r\n\x1a\n"


def fake_run(d: Path, n_iter: int = 6, M: int = 40, history: bool = True) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    weights = [
        {"index": m, "name": f"rbf(width={m})[x{m}]", "weight": (1.0 / (m + 1) if m % 3 else 0.0), "block_norm": 0.1}
        for m in range(M)
    ]
    summary = {
        "status": "converged",
        "objective": 12.5,
        "duality_gap": 1e-5,
        "tol": 1e-4,
        "iterations": n_iter,
        "n_kernels": M,
        "n_active_kernels": sum(w["weight"] > 0 for w in weights),
        "kernel_weights": weights,
        "dataset": "sonar",
        "loss": "logistic",
        "regularizer": "elasticnet",
        "C": 0.5,
        "engine": "spicy",
    }
    write_json(d / "summary.json", summary)
    if history:
        hist = [
            {
                "iteration": i + 1,
                "objective": 20.0 / (i + 1),
                "gap": 10.0 ** -(i + 1),
                "n_active": M - 3 * i,
                "time_s": 0.1 * i,
            }
            for i in range(n_iter)
        ]
        hist.append({"iteration": n_iter + 1, "objective": 1.0, "gap": None, "n_active": 5, "time_s": 1.0})
        write_json(d / "history.json", hist)
    return d


@pytest.fixture
def mpl():
    return pytest.importorskip("matplotlib")


def test_plot_run_writes_three_pngs(tmp_path, mpl):
    d = fake_run(tmp_path / "run")
    paths = plot_run(d, top_k=5)
    assert [p.name for p in paths] == list(PLOTS)
    for p in paths:
        assert p.read_bytes()[:8] == PNG and p.stat().st_size > 1000
    assert not list(d.glob(".*tmp*"))


def test_plot_run_without_history_or_active_kernels(tmp_path, mpl):
    d = fake_run(tmp_path / "run", history=False)
    s = json.loads((d / "summary.json").read_text())
    for w in s["kernel_weights"]:
        w["weight"] = 0.0
    write_json(d / "summary.json", s)
    for p in plot_run(d):
        assert p.read_bytes()[:8] == PNG


def test_missing_summary_is_a_clear_error(tmp_path):
    with pytest.raises(OutputError, match=r"has no summary\.json; it is not a run directory"):
        plot_run(tmp_path)
    with pytest.raises(OutputError, match=r"no such run directory"):
        plot_run(tmp_path / "nope")
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(OutputError, match=r"summary\.json is not valid JSON \(line 1"):
        read_summary(tmp_path)


def test_missing_matplotlib(tmp_path, monkeypatch):
    d = fake_run(tmp_path / "run")
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ReportError, match=r"matplotlib: is not installed.*pip install 'mklkit\[plot\]'"):
        plot_run(d)
    assert not (d / "gap.png").exists()


def test_cli_report_missing_matplotlib_is_one_line(tmp_path, monkeypatch, capsys):
    from mklkit.cli import main

    d = fake_run(tmp_path / "run")
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    assert main(["report", str(d)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "mklkit[plot]" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "top, needle", [("0", "--top: must be an integer >= 1; got 0"), ("x", "invalid int value: 'x'")]
)
def test_cli_report_bad_top_is_one_line(tmp_path, capsys, top, needle):
    from mklkit.cli import main

    assert main(["report", str(fake_run(tmp_path / "run")), "--top", top]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_cli_report_ok(tmp_path, mpl, capsys):
    from mklkit.cli import main

    d = fake_run(tmp_path / "run")
    assert main(["report", str(d), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "gap.png" in out and (d / "weights.png").is_file()


def test_read_history_and_json_helpers(tmp_path):
    import numpy as np

    d = fake_run(tmp_path / "run")
    hist = read_history(d)
    assert len(hist) == 7 and hist[-1]["gap"] is None
    assert to_jsonable({"a": np.float64(np.inf), "b": np.arange(2), "c": (np.int64(3), float("nan"))}) == {
        "a": None,
        "b": [0, 1],
        "c": [3, None],
    }


def test_check_output_dir(tmp_path):
    d = fake_run(tmp_path / "run")
    with pytest.raises(OutputError, match=r"already holds the results of a run \(summary\.json, history\.json\)"):
        check_output_dir(d)
    assert check_output_dir(d, force=True) == d
    assert check_output_dir(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        check_output_dir(tmp_path / "file", force=True)
