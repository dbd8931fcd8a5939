"""SMO-MKL scaling in the number of points: Adult (a9a) and Web (w8a), 50 kernels on the fly.

Vishwanathan et al. (2010), Fig. 1c-d: "We used 50 kernels computed on the
fly", n from about a thousand points up to the full sets (Adult: 32,561,
Web: 49,749), p in {1.33, 2}.  The paper does not list its 50 kernels; here:
10 Gaussian kernels on all features (widths 1 2 3 4 5 6 8 10 15 20) and 40
Gaussian kernels on random subsets of 10 % of the features (seed 0) with
widths drawn as 5 chi^2_1 + 0.1 (seed 1), unit diagonal (``normalize="none"``,
so that the problem keeps its meaning as n grows); hinge loss, C_paper = 1
(mklkit C = 1), lambda = 1, relative duality gap 1e-3.  Kernel rows are
computed by ``mklkit_smo.FeatureKernels`` from the sparse features, with an
LRU cache of ``--cache-mb`` MiB.

For each n a random subset of the training file (seed 0, nested: the n
points of a run contain those of the smaller runs) is trained on; accuracy
is measured on 4,000 points of a9a's test file (Adult) or on 4,000 held-out
points of w8a while n < 45,749 (Web).  Printed: wall and CPU seconds of the
solve, SMO steps, rows computed, support vectors, and the exponent of a
least-squares fit of log(time) against log(n).

Run::

    python benchmarks/bench_smo_points.py --quick                  # n <= 4000 on both sets
    python benchmarks/bench_smo_points.py --sets w8a --max-n 49749  # the full Web set
    python benchmarks/bench_smo_points.py --sets a9a --p 1.33 2
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from mklkit.data import load_builtin
from mklkit.plugins import get_registry
from mklkit.result import ConvergenceWarning
from mklkit_smo import FeatureKernels

C_PAPER = 1.0
LAM = 1.0
SIZES = {"a9a": [1000, 2000, 4000, 8000, 16000, 32561], "w8a": [1000, 2000, 4000, 8000, 16000, 32000, 49749]}
N_TEST = 4000
BANK = [
    {"function": "rbf", "width": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0], "features": "all"},
    {"function": "rbf", "width": "chi2", "features": {"random_subsets": 40, "size": 0.1, "seed": 0}, "seed": 1},
]


def fit_exponent(ns: list[int], ts: list[float]) -> float:
    if len(ns) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["a9a", "w8a"], choices=list(SIZES))
    ap.add_argument("--p", nargs="+", type=float, default=[1.33])
    ap.add_argument("--max-n", type=int, default=None, help="largest n to run")
    ap.add_argument("--sizes", nargs="+", type=int, default=None, help="explicit list of n")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--cache-mb", type=float, default=2048.0)
    ap.add_argument("--quick", action="store_true", help="n <= 4000")
    args = ap.parse_args(argv)
    reg = get_registry()
    hinge = reg.create("loss", "hinge")
    engine = reg.create("engine", {"name": "smo_mkl", "tol": args.tol, "cache_mb": args.cache_mb})
    print(
        f"50 Gaussian kernels on the fly (10 on all features, 40 on random 10 % subsets), unit "
        f"diagonal; hinge, C_paper = {C_PAPER:g}, lambda = {LAM:g}, tol = {args.tol:g}, "
        f"cache {args.cache_mb:g} MiB"
    )
    for name in args.sets:
        ds = load_builtin(name)
        rng = np.random.default_rng(0)
        order = rng.permutation(ds.n_samples)
        if name == "a9a":
            test = load_builtin("a9a_test")
            Xte, yte = test.X[:N_TEST], test.y[:N_TEST]
        else:
            held = order[-N_TEST:]
            Xte, yte = ds.X[held], ds.y[held]
        sizes = args.sizes or SIZES[name]
        if args.quick:
            sizes = [n for n in sizes if n <= 4000]
        if args.max_n is not None:
            sizes = [n for n in sizes if n <= args.max_n]
        print()
        head = (
            f"{name:>4} {'n':>6} {'p':>5} | {'time (s)':>9} {'cpu (s)':>9} {'steps':>7} "
            f"{'rows':>7} {'SVs':>6} {'gap':>8} {'status':>9} | {'test acc':>8}"
        )
        print(head)
        print("-" * len(head))
        runs: dict[float, list[tuple[int, float]]] = {p: [] for p in args.p}
        for n in sizes:
            idx = np.sort(order[:n]) if n < ds.n_samples else np.arange(ds.n_samples)
            X, y = ds.X[idx], ds.y[idx]
            src = FeatureKernels(X, BANK, normalize="none")
            overlap = name == "w8a" and n > ds.n_samples - N_TEST
            for p in args.p:
                regp = reg.create("regularizer", {"name": "pnorm_squared", "p": p, "lam": LAM})
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    t0, c0 = time.perf_counter(), time.process_time()
                    r = engine.solve(src.problem(y, hinge, regp, 1.0 / C_PAPER))
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                runs[p].append((n, wall))
                acc = (
                    "-"
                    if overlap
                    else f"{100 * np.mean(np.where(src.decision_function(r, Xte) >= 0, 1, -1) == yte):.2f}"
                )
                last = r.history[-1]
                print(
                    f"{name:>4} {n:6d} {p:5.2f} | {wall:9.1f} {cpu:9.1f} {r.iterations:7d} "
                    f"{last['cache_misses']:7d} {last['n_sv']:6d} {r.gap:8.1e} {str(r.status):>9} | "
                    f"{acc:>8}"
                )
                sys.stdout.flush()
        for p in args.p:
            if len(runs[p]) >= 2:
                ns, ts = zip(*runs[p])
                print(
                    f"  {name}, p = {p:g}: time ~ n^{fit_exponent(list(ns), list(ts)):.2f} "
                    f"(fit over n = {ns[0]}..{ns[-1]})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
