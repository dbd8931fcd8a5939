"""specs/smomkl_uci.yaml runs through the public pipeline (``mklkit run``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mklkit.api import load_spec, run

SPEC = Path(__file__).resolve().parents[3] / "specs" / "smomkl_uci.yaml"
pytestmark = pytest.mark.skipif(not SPEC.is_file(), reason="needs the mklkit source tree")


def test_spec_selects_the_plugin_components() -> None:
    spec = load_spec(SPEC)
    assert spec.engine.name == "smo_mkl"
    assert spec.problem.regularizer.name == "pnorm_squared"
    assert spec.problem.regularizer.get_params() == {"p": 1.33, "lam": 1.0}
    assert spec.problem.C == 0.01 and spec.problem.loss.name == "hinge"


def test_spec_runs_on_a_small_set() -> None:
    # liver: 13 x 7 = 91 kernels on 276 training points, p = 2
    spec = load_spec(SPEC, overrides=["data.builtin=liver", "problem.regularizer.p=2"])
    res = run(spec)
    summary = res.summary()
    assert summary["status"] == "converged" and summary["engine"] == "smo_mkl"
    assert summary["n_kernels"] == 91
    assert 0 <= summary["duality_gap"] <= spec.engine.engine.get_params()["tol"]
    assert summary["objective"] >= summary["dual_objective"]
    assert 0.5 < summary["test_accuracy"] <= 1.0
    last = res.result.history[-1]
    # the paper-scale values are the reported ones times C_paper = 1/C
    assert last["objective_smo"] == pytest.approx(summary["objective"] / 0.01, rel=1e-12)


@pytest.mark.slow
def test_cli_runs_the_spec_as_written(tmp_path: Path) -> None:
    code = "import sys; from mklkit.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", str(SPEC), "--out", str(tmp_path), "--force", "--quiet"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "converged" and summary["n_kernels"] == 195
    assert summary["regularizer"] == "pnorm_squared"
