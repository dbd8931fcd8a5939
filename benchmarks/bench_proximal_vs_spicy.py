"""Proximal gradient (FISTA) against SpicyMKL on the SpicyMKL §6.1 problems.

Data: the UCI sets of SpicyMKL §6.1 (Liver, Pima, Ionosphere, Wpbc, Sonar),
an 80/20 split (training part only), standardized features, the
``simplemkl`` bank (27 x (d + 1) kernels, unit trace).  Problems: the losses
with a differentiable primal that both engines accept: logistic with
elastic net (lam = 0.5), and the block 1-norm when ``spicy`` supports it;
C in {0.005, 0.05, 0.5}.

Each engine is run once to ``--tol`` (default 1e-6) per repetition; the
iterations and the time at which the relative duality gap first reaches
1e-2, 1e-4 and 1e-6 are read from its history (``time_s`` includes the
engine's set-up, e.g. the power iteration of ``proximal``; ``proximal``
evaluates the gap every ``gap_every`` iterations, so its counts are
rounded up to that grid).  Times are medians over ``--repeat`` runs.
Iterations are not comparable across engines: a ``spicy`` iteration is a
Newton step (one-step method) or an outer augmented-Lagrangian iteration,
a ``proximal`` iteration is one proximal-gradient step.

    python benchmarks/bench_proximal_vs_spicy.py                 # all five sets
    python benchmarks/bench_proximal_vs_spicy.py --data sonar --repeat 3

``--ringnorm 1000 2000`` adds the regime where proximal gradient wins:
ringnorm (7400 x 20) subsets of N rows with 8 kernels on all features
(Gaussian widths 0.25..4 times sqrt(d), polynomial degrees 1..3).

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import time
import warnings

import numpy as np

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import Standardizer, load_builtin, train_test_split
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels import KernelBank
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

DATASETS = ("liver", "pima", "ionosphere", "wpbc", "sonar")
CS = (0.005, 0.05, 0.5)
LEVELS = (1e-2, 1e-4, 1e-6)


def training_bank(name: str, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    ds = load_builtin(name)
    train, _ = train_test_split(ds, test_size=0.2, seed=seed)
    X = np.asarray(train.X, dtype=np.float64)
    keep = X.std(axis=0) > 0  # a constant column gives a zero-trace linear kernel
    X = Standardizer().fit(X[:, keep]).transform(X[:, keep])
    t = time.perf_counter()
    K = KernelBank.build(X, "simplemkl").K
    return K, np.asarray(train.y, dtype=np.float64), time.perf_counter() - t


def ringnorm_bank(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    ds = load_builtin("ringnorm")
    rows = np.random.default_rng(seed).permutation(ds.n_samples)[:n]
    X = Standardizer().fit(ds.X[rows]).transform(ds.X[rows])
    d = X.shape[1]
    entries = [
        {"function": "rbf", "width": [w * math.sqrt(d) for w in (0.25, 0.5, 1, 2, 4)], "features": "all"},
        {"function": "poly", "degree": [1, 2, 3], "features": "all"},
    ]
    t = time.perf_counter()
    K = KernelBank.build(X, entries).K
    return K, np.asarray(ds.y[rows], dtype=np.float64), time.perf_counter() - t


def reached(history: list[dict], level: float) -> tuple[int | None, float | None]:
    for h in history:
        g = h.get("gap")
        if g is not None and math.isfinite(g) and g <= level:
            return int(h["iteration"]), float(h["time_s"])
    return None, None


def run_engine(engine, problem: Problem, repeat: int, time_limit: float) -> dict:
    runs = []
    for _ in range(repeat):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t = time.perf_counter()
            res = engine.solve(problem, callback=lambda rec: time.perf_counter() - t > time_limit)
            wall = time.perf_counter() - t
        runs.append((res, wall))
    out = {
        "status": str(runs[0][0].status),
        "objective": runs[0][0].objective,
        "n_active": int(runs[0][0].active_set.size),
        "wall": statistics.median(w for _, w in runs),
    }
    for level in LEVELS:
        its, times = [], []
        for res, _ in runs:
            i, t = reached(res.history, level)
            its.append(i)
            times.append(t)
        if any(i is None for i in its):
            out[level] = (None, None)
        else:
            out[level] = (its[0], statistics.median(times))
    return out


def fmt(cell: tuple[int | None, float | None]) -> str:
    i, t = cell
    if i is None:
        return "       -      "
    return f"{i:>6d} {t:>7.3f}s"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--C", nargs="+", type=float, default=list(CS))
    ap.add_argument("--splits", type=int, default=1, help="number of 80/20 splits (seeds 0..)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per engine (median time)")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument(
        "--time-limit", type=float, default=120.0, help="seconds after which a run is stopped (status 'stopped')"
    )
    ap.add_argument("--prox-max-iter", type=int, default=20000)
    ap.add_argument(
        "--ringnorm", nargs="*", type=int, default=[], help="also ringnorm subsets of these sizes with 8 kernels"
    )
    ap.add_argument("--regs", nargs="+", default=["elasticnet", "l1"], choices=["elasticnet", "l1"])
    args = ap.parse_args(argv)

    regs = {"elasticnet": ElasticNet(lam=0.5), "l1": L1()}
    engines = {
        "spicy": Spicy(tol=args.tol, max_iter=500),
        "proximal": Proximal(tol=args.tol, max_iter=args.prox_max_iter),
    }
    head = (
        f"{'data':<10} {'N':>5} {'M':>5} {'reg':<10} {'C':>6} {'engine':<8} "
        + " ".join(f"{'gap<=' + format(lv, 'g'):>14}" for lv in LEVELS)
        + f" {'status':<10} {'active':>6} {'objective':>14} {'wall':>8}"
    )
    print(
        "iterations and seconds to reach each relative duality gap "
        f"(median of {args.repeat}); tol = {args.tol:g}, time limit {args.time_limit:g} s",
        flush=True,
    )
    print(head)
    print("-" * len(head), flush=True)
    # compile both engines once on a small problem so that no timing includes it
    rng = np.random.default_rng(0)
    Xc = rng.standard_normal((40, 3))
    yc = np.where(Xc[:, 0] + 0.3 * rng.standard_normal(40) > 0, 1.0, -1.0)
    Kc = KernelBank.build(Xc, "simplemkl").K
    for rname in args.regs:
        warm = Problem(K=Kc, y=yc, loss=Logistic(), regularizer=regs[rname], C=0.05)
        for e in engines.values():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if e.supports(warm) is None:
                    e.solve(warm)
    sets = [
        (name, seed, functools.partial(training_bank, name, seed)) for name in args.data for seed in range(args.splits)
    ]
    sets += [
        ("ringnorm", seed, functools.partial(ringnorm_bank, n, seed))
        for n in args.ringnorm
        for seed in range(args.splits)
    ]
    for name, seed, build in sets:
        K, y, t_bank = build()
        M, N = K.shape[0], K.shape[1]
        for rname in args.regs:
            for C in args.C:
                pb = Problem(K=K, y=y, loss=Logistic(), regularizer=regs[rname], C=C)
                for ename, eng in engines.items():
                    reason = eng.supports(pb)
                    if reason is not None:
                        print(f"{name:<10} {N:>5} {M:>5} {rname:<10} {C:>6g} {ename:<8} unsupported: {reason[:60]}")
                        continue
                    r = run_engine(eng, pb, args.repeat, args.time_limit)
                    print(
                        f"{name:<10} {N:>5} {M:>5} {rname:<10} {C:>6g} {ename:<8} "
                        + " ".join(fmt(r[lv]) for lv in LEVELS)
                        + f" {r['status']:<10} {r['n_active']:>6d} {r['objective']:>14.8g}"
                        + f" {r['wall']:>7.2f}s",
                        flush=True,
                    )
        del K


if __name__ == "__main__":
    main()
