"""The smoke tests of ``benchmarks/bench_gpu.py`` (its CPU run, ``--device cpu --small``, builds the factors
through the device code path, times the passes and solves the C path, every value certified) and of
``benchmarks/bench_apg_steps.py`` (every setting of the apg engine certified, the defaults reading the bank
fewer times than the accelerated steps alone)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def test_the_gpu_benchmark_runs_on_the_cpu(capsys, one_thread):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_gpu
    finally:
        sys.path.remove(str(BENCH))
    assert bench_gpu.main(["--device", "cpu", "--small", "--data", "a9a"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("  | apg")]
    assert len(rows) == 3  # the path of --small
    for route, ratio, time_s, steps, passes, gap, status, active, acc in rows:
        assert status.strip() == "converged" and float(gap) <= 1e-3
        assert float(passes) > 0 and int(steps) > 0 and float(time_s) > 0
        assert 0.7 <= float(acc) <= 1.0 and int(active) > 0
    assert "GB/s" in out and "factorization" in out


def test_the_apg_steps_benchmark_runs_and_its_parts_save_passes(capsys, one_thread):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_apg_steps
    finally:
        sys.path.remove(str(BENCH))
    argv = ["--data", "a9a", "--ratios", "0.05", "--points", "400", "--landmarks", "20", "--tol", "1e-4"]
    assert bench_apg_steps.main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| a9a")]
    assert len(rows) == len(bench_apg_steps.SETTINGS) + 1  # and bcd
    passes = {}
    for data, ratio, setting, steps, npass, systems, time_s, gap, status in rows:
        assert status.strip() == "converged" and float(gap) <= 1e-4
        if setting.strip() != "bcd":
            passes[setting.strip()] = float(npass)
    assert passes["default"] < passes["accelerated"]
