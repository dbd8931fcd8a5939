"""``mklkit sweep`` serially and on a local Dask cluster: times, speed-up, same numbers.

The grid is ``specs/sweep_uci.yaml``: SpicyMKL §6.1 (Suzuki & Tomioka 2011),
5 UCI data sets x 2 losses (hinge, logistic) x C in {0.005, 0.05, 0.5},
block 1-norm, SimpleMKL kernel grid, 80/20 x 10 random splits (100 tasks,
300 rows).  It runs the sweep twice, into temporary folders:

1. serially, in this process (``mklkit sweep SPEC``);
2. on a ``dask.distributed.LocalCluster`` of ``--workers`` processes with one
   thread each (``mklkit sweep SPEC --scheduler ADDRESS``);

and prints the wall times (cluster start-up apart), the speed-up, and
whether the two ``results.csv`` agree: the same rows with the same status,
iterations, active kernels and accuracies, objectives to 1e-6 relative.

    python benchmarks/bench_sweep.py                          # the whole grid
    python benchmarks/bench_sweep.py --splits 2 --data liver sonar
    python benchmarks/bench_sweep.py --workers 4

Needs the ``dask`` extra (``pip install 'mklkit[dask]'``).  Writes nothing
outside a temporary folder.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import warnings
from pathlib import Path

from mklkit.sweep import COLUMNS, KEY_COLUMNS, TIMING_COLUMNS, load_sweep, run_sweep

SPEC = Path(__file__).resolve().parent.parent / "specs" / "sweep_uci.yaml"


def compare(a: list[dict[str, str]], b: list[dict[str, str]], rtol: float = 1e-6) -> tuple[bool, float, list[str]]:
    """(same?, largest relative objective difference, first differences)."""
    diffs: list[str] = []
    worst = 0.0
    if len(a) != len(b):
        return False, math.inf, [f"{len(a)} rows vs {len(b)} rows"]
    for ra, rb in zip(a, b):
        key = ", ".join(ra[c] for c in KEY_COLUMNS)
        if [ra[c] for c in KEY_COLUMNS] != [rb[c] for c in KEY_COLUMNS]:
            diffs.append(f"row order differs at {key}")
            continue
        for c in COLUMNS:
            if c in TIMING_COLUMNS or c in KEY_COLUMNS:
                continue
            x, y = ra[c], rb[c]
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                if x != y:
                    diffs.append(f"{key}: {c} {x} vs {y}")
                continue
            rel = abs(fx - fy) / max(abs(fx), abs(fy), 1e-300) if fx != fy else 0.0
            if c in ("objective", "dual_objective"):
                worst = max(worst, rel)
            if rel > rtol:
                diffs.append(f"{key}: {c} {x} vs {y}")
    return not diffs, worst, diffs[:5]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default=str(SPEC), help="sweep spec (default: specs/sweep_uci.yaml)")
    ap.add_argument("--splits", type=int, help="override cv.splits (the spec: 10)")
    ap.add_argument("--data", nargs="+", help="override data.builtin (the spec: liver pima ionosphere wpbc sonar)")
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (default 2)")
    args = ap.parse_args(argv)

    overrides = []
    if args.splits is not None:
        overrides.append(f"cv.splits={args.splits}")
    if args.data:
        overrides.append("data.builtin=[" + ", ".join(args.data) + "]")
    sweep = load_sweep(args.spec, overrides)
    print(sweep.summary())
    warnings.simplefilter("ignore")

    from distributed import LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        serial = run_sweep(sweep, Path(tmp) / "serial")
        t_serial = time.perf_counter() - t0
        print(f"serial:       {t_serial:8.1f} s  ({len(serial.rows)} rows, {serial.backend})")

        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        t_start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            dask = run_sweep(load_sweep(args.spec, overrides), Path(tmp) / "dask", scheduler=cluster.scheduler_address)
            t_dask = time.perf_counter() - t0
        finally:
            cluster.close()
        print(
            f"dask:         {t_dask:8.1f} s  ({len(dask.rows)} rows, {dask.backend}; "
            f"cluster start-up {t_start:.1f} s not included)"
        )
        print(f"speed-up:     {t_serial / t_dask:8.2f} x  with {args.workers} worker processes")
        same, worst, diffs = compare(serial.rows, dask.rows)
        print(f"same numbers: {'yes' if same else 'NO'} (largest relative objective difference {worst:.1e})")
        for d in diffs:
            print("  " + d)
        for s, d in zip(serial.best, dask.best):
            agree = "same" if (s.labels, s.C) == (d.labels, d.C) else f"DASK: {d.labels['loss']} C={d.C:g}"
            print(
                f"best {s.dataset:12s} loss {s.labels['loss']:9s} C={s.C:<6g} validation accuracy "
                f"{s.mean:.4f} +- {s.std:.4f} ({agree})"
            )


if __name__ == "__main__":
    main()
