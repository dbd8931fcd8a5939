"""SpicyMKL §6.2 (Suzuki & Tomioka 2011): CPU time against the number of kernels and samples.

Data: the IDA sets Ringnorm, Splice, Twonorm and Waveform (bundled copies);
each repetition draws a random training set and standardizes it.  Kernels:
Gaussian kernels on random feature subsets, each with its own width
:math:`\\sigma = 5\\chi^2 + 0.1` (``width: chi2``); a quarter of the kernels each
on subsets of 10 %, 25 %, 50 % and 75 % of the features (the paper does not
give the subset sizes), unit trace.  Stopped at a relative duality gap of
1e-2, as in the paper.

* number of kernels: M in {50, 100, 200, 500, 1000, 2000, 3000, 6000} at N = 200
  (Fig. 5);
* number of samples: N in {500, 1000, 1500, 2000, 2500, 3000} at M = 20 (Fig. 6).

Problems (``--problems``): the block 1-norm with the logistic (``l1-logit``) and
hinge (``l1-hinge``) losses (iterative method), ElastMKL (elastic net,
lam = 0.5) with the logistic loss (``en-logit``, one-step method); C = 0.05.

The tables give the median solver time (``Spicy.solve`` only) over
``--repeat`` random training sets, the median outer iterations and active
kernels, and the exponent of a log-log least-squares fit of time against
M (or N).  For M = 3000, N = 200 the peak memory that Python allocates during
the solve (``tracemalloc``: numpy arrays included) is reported next to the
size of the Gram bank.

    python benchmarks/bench_spicy_scaling.py --quick           # M <= 1000, N <= 1000
    python benchmarks/bench_spicy_scaling.py --data ringnorm --repeat 5
    python benchmarks/bench_spicy_scaling.py --max-n 1500 --skip-target

Prints tables; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import threading
import time
import tracemalloc
import warnings

import numpy as np

from mklkit.components.losses import Hinge, Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import Standardizer, load_builtin
from mklkit.engines.spicy import Spicy
from mklkit.kernels import KernelBank
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

DATASETS = ("ringnorm", "splice", "twonorm", "waveform")
M_GRID = (50, 100, 200, 500, 1000, 2000, 3000, 6000)
N_GRID = (500, 1000, 1500, 2000, 2500, 3000)
FRACTIONS = (0.1, 0.25, 0.5, 0.75)
PROBLEMS = {
    "l1-logit": (Logistic, lambda: L1()),
    "l1-hinge": (Hinge, lambda: L1()),
    "en-logit": (Logistic, lambda: ElasticNet(lam=0.5)),
}
C = 0.05


def bank(name: str, n: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    ds = load_builtin(name)
    rng = np.random.default_rng(seed)
    rows = rng.permutation(ds.n_samples)[:n]
    X = np.asarray(ds.X, dtype=np.float64)[rows]
    keep = X.std(axis=0) > 0
    X = Standardizer().fit(X[:, keep]).transform(X[:, keep])
    sizes = [m // 4 + (1 if i < m % 4 else 0) for i in range(4)]
    entries = [
        {
            "function": "rbf",
            "width": "chi2",
            "seed": 1000 * seed + i,
            "features": {"random_subsets": k, "size": f, "seed": 1000 * seed + i},
        }
        for i, (k, f) in enumerate(zip(sizes, FRACTIONS))
        if k > 0
    ]
    K = KernelBank.build(X, entries, progress=False, memory_budget_bytes=8 * 2**30).K
    return K, np.asarray(ds.y, dtype=np.float64)[rows]


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc``)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples the resident set size every millisecond in a background thread."""

    def __enter__(self):
        self.start = rss_bytes()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.001)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def solve(K, y, pname: str, memory: bool = False):
    """Solve once; with ``memory``, also the peak extra memory of the solve.

    The extra memory is measured twice: the peak of the resident set size
    above its value before the solve (sampled every millisecond: numpy and
    numba allocations alike), and the peak of Python's traced allocations
    (``tracemalloc``: numpy arrays, not numba's).
    """
    loss_cls, reg = PROBLEMS[pname]
    pb = Problem(K=K, y=y, loss=loss_cls(), regularizer=reg(), C=C)
    peaks = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if memory:
            tracemalloc.start()
            tracemalloc.reset_peak()
            with PeakRSS() as mon:
                t0 = time.perf_counter()
                res = Spicy(tol=1e-2).solve(pb)
                t = time.perf_counter() - t0
            _, traced = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            peaks = (mon.peak - mon.start, traced)
        else:
            t0 = time.perf_counter()
            res = Spicy(tol=1e-2).solve(pb)
            t = time.perf_counter() - t0
    return t, res, peaks


def slope(xs, ts) -> float:
    x = np.log(np.asarray(xs, dtype=float))
    t = np.log(np.asarray(ts, dtype=float))
    return float(np.polyfit(x, t, 1)[0]) if len(xs) >= 2 else math.nan


def sweep(name, what, grid, fixed, problems, repeat):
    print(
        f"\n{name}: time against {what} ({'N' if what == 'M' else 'M'} = {fixed}), "
        f"C = {C}, tol 1e-2, median of {repeat}"
    )
    print(f"{what:>6}  " + "".join(f"{p + ' s':>12}{'it':>5}{'act':>6}" for p in problems))
    times = {p: [] for p in problems}
    for v in grid:
        runs: dict[str, list] = {p: [] for p in problems}
        for r in range(repeat):
            M, N = (v, fixed) if what == "M" else (fixed, v)
            K, y = bank(name, N, M, r)
            for p in problems:
                t, res, _ = solve(K, y, p)
                runs[p].append((t, res.iterations, res.active_set.size, res.converged))
            del K
        cols = []
        for p in problems:
            t = statistics.median(x[0] for x in runs[p])
            times[p].append(t)
            conv = "" if all(x[3] for x in runs[p]) else "!"
            cols.append(
                f"{t:>11.3f}{conv or ' '}{statistics.median(x[1] for x in runs[p]):>5g}"
                f"{statistics.median(x[2] for x in runs[p]):>6g}"
            )
        print(f"{v:>6}  " + "".join(cols), flush=True)
    print(f"{'slope':>6}  " + "".join(f"{slope(grid, times[p]):>12.2f}{'':>11}" for p in problems))
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--repeat", type=int, default=3, help="random training sets per point")
    ap.add_argument("--quick", action="store_true", help="cap M and N at 1000")
    ap.add_argument("--max-m", type=int, default=None, help="cap the sweep over M")
    ap.add_argument("--max-n", type=int, default=None, help="cap the sweep over N")
    ap.add_argument("--skip-n", action="store_true", help="only the sweep over M")
    ap.add_argument("--skip-target", action="store_true", help="skip the M = 3000, N = 200 time and memory measurement")
    args = ap.parse_args(argv)
    max_m = 1000 if args.quick else args.max_m
    max_n = 1000 if args.quick else args.max_n
    m_grid = [m for m in M_GRID if max_m is None or m <= max_m]
    n_grid = [n for n in N_GRID if max_n is None or n <= max_n]
    print("SpicyMKL §6.2 scaling; '!' marks a median over runs that did not all converge")
    K, y = bank(args.data[0], 60, 8, 99)  # load the cached jitted code once
    for p in args.problems:
        solve(K, y, p)
    for name in args.data:
        sweep(name, "M", m_grid, 200, args.problems, args.repeat)
        if not args.skip_n:
            sweep(name, "N", n_grid, 20, args.problems, args.repeat)

    if not (args.quick or args.skip_target):
        print("\nTarget case M = 3000, N = 200, l1-logit (ringnorm): time and peak memory")
        ts, peaks = [], []
        for r in range(args.repeat):
            K, y = bank("ringnorm", 200, 3000, r)
            t, res, _ = solve(K, y, "l1-logit")
            _, _, (rss, traced) = solve(K, y, "l1-logit", memory=True)
            ts.append(t)
            peaks.append(max(rss, traced))
            mib = K.nbytes / 2**20
            print(
                f"  run {r}: {t:.3f} s, {res.iterations} outer iterations, "
                f"gap {res.gap:.2e}; extra memory during the solve: resident "
                f"{rss / 2**20:.1f} MiB, traced {traced / 2**20:.1f} MiB; bank {mib:.0f} MiB; "
                f"peak {(K.nbytes + max(rss, traced)) / K.nbytes:.3f} x the bank",
                flush=True,
            )
            del K
        print(f"  median time {statistics.median(ts):.3f} s")


if __name__ == "__main__":
    main()
