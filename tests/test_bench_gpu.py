"""The smoke test of ``benchmarks/bench_gpu.py``: its CPU run (``--device cpu --small``) builds the factors
through the device code path, times the passes and solves the C path, every value certified."""

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
