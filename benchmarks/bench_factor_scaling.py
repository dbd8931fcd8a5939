"""The factored route at scale: time against N (1,000 ... 49,749) and M, with fitted exponents.

What ``MKLClassifier`` does by default above a few thousand points, step by
step: the kernels are factored (:func:`mklkit.kernels.factorize.build_factor_bank`,
pivoted Cholesky, relative residual trace 1e-3, at most ``--rank`` columns
per kernel or, as ``factor="auto"``, what half of the default 4 GiB memory
budget holds; unit trace, the raw sparse binary features), then the logistic
loss with the elastic net (lam 0.5) at ``C = 1/sqrt(N)`` (the estimators'
``C="auto"``) is solved by the ``auto`` engine (``bcd`` on a factor bank) to
the relative duality gap ``--tol`` (default 1e-3).

Kernels: the first ``M`` of the 50 Gaussian kernels of ``bench_smo_points.py``
(10 on all features, widths 1 2 3 4 5 6 8 10 15 20, then 40 on random
subsets of 10 % of the features); ``M`` in ``--kernels`` (default 10 25 50)
at N = ``--m-n``, and ``M = 50`` for the N rows.

Data: nested random subsets (seed 0) of the a9a training file (up to all
32,561 points) and of w8a (up to all 49,749).

Printed per row: N, M, the total rank R, the factorization and solve
seconds, the gap and status, and the solve time per unit of N·R; below each
table, the exponents of least-squares fits of log(time) against log(N) and
against log(N·R) (total, factorization and solve).

    python benchmarks/bench_factor_scaling.py
    python benchmarks/bench_factor_scaling.py --data a9a --sizes 1000 4000 16000

Prints tables; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import ElasticNet
from mklkit.data import load_builtin
from mklkit.pipeline.choose import Auto
from mklkit.kernels.description import DEFAULT_MEMORY_BUDGET, expand_bank
from mklkit.kernels.factorize import build_factor_bank, rank_that_fits
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

WIDE = {"function": "rbf", "width": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0], "features": "all"}
SIZES = {"a9a": [1000, 2000, 4000, 8000, 16000, 32561], "w8a": [1000, 4000, 16000, 49749]}


def bank(M: int) -> list[dict[str, Any]]:
    """The first M kernels of the 50-kernel bank."""
    wide = dict(WIDE, width=WIDE["width"][: min(M, 10)])
    if M <= 10:
        return [wide]
    return [
        wide,
        {"function": "rbf", "width": "chi2", "seed": 1, "features": {"random_subsets": M - 10, "size": 0.1, "seed": 0}},
    ]


def one(X: Any, y: np.ndarray, M: int, rank: int, tol: float) -> dict[str, Any]:
    specs = expand_bank(bank(M), X.shape[1])
    # as the estimators' factor="auto": at most what half the default memory budget holds
    rank = max(1, min(rank, rank_that_fits(specs, X.shape[0], DEFAULT_MEMORY_BUDGET / 2)))
    t0 = time.perf_counter()
    fb = build_factor_bank(specs, X, rank=rank, tol=1e-3, normalize="trace")
    t_fac = time.perf_counter() - t0
    N = X.shape[0]
    pb = Problem(K=fb, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=1.0 / np.sqrt(N))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = Auto(tol=tol).solve(pb)
    t_solve = time.perf_counter() - t0
    return {
        "N": N,
        "M": fb.n_kernels,
        "R": fb.total_rank,
        "cap": rank,
        "fac": t_fac,
        "solve": t_solve,
        "gap": res.gap,
        "status": str(res.status),
        "engine": res.engine,
    }


def exponent(x: list[float], t: list[float]) -> float:
    if len(x) < 2:
        return float("nan")
    return float(np.polyfit(np.log(x), np.log(t), 1)[0])


def table(rows: list[dict[str, Any]], title: str, along: str) -> None:
    print(title)
    head = (
        f"{'N':>6} {'M':>3} {'cap':>4} {'R':>6} | {'factor s':>8} {'solve s':>8} {'total s':>8} | {'gap':>8} "
        f"{'status':>10} {'engine':>6} | {'solve ns/(N R)':>14}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        tot = r["fac"] + r["solve"]
        print(
            f"{r['N']:6d} {r['M']:3d} {r['cap']:4d} {r['R']:6d} | {r['fac']:8.2f} {r['solve']:8.2f} {tot:8.2f} | "
            f"{r['gap']:8.1e} {r['status']:>10} {r['engine']:>6} | {1e9 * r['solve'] / (r['N'] * r['R']):14.2f}"
        )
    x = [float(r[along]) for r in rows]
    nr = [float(r["N"] * r["R"]) for r in rows]
    parts = {k: [r["fac"] + r["solve"] if k == "total" else r[k] for r in rows] for k in ("total", "fac", "solve")}
    print(
        f"exponents vs {along}: "
        + ", ".join(f"{k} {exponent(x, t):.2f}" for k, t in parts.items())
        + "; vs N·R: "
        + ", ".join(f"{k} {exponent(nr, t):.2f}" for k, t in parts.items())
    )
    print()
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["a9a", "w8a"], choices=["a9a", "w8a"])
    ap.add_argument("--sizes", nargs="+", type=int, help="N values (default: per data set)")
    ap.add_argument("--kernels", nargs="+", type=int, default=[10, 25, 50], help="M values at N = --m-n")
    ap.add_argument("--m-n", type=int, default=16000)
    ap.add_argument("--rank", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args(argv)
    # compile the jitted code outside the timings
    small = load_builtin("a9a")
    one(sp.csr_matrix(small.X[:300]), small.y[:300], 12, 16, args.tol)
    print(
        f"Factored route: pivoted Cholesky (tol 1e-3, rank <= {args.rank} per kernel), logistic + "
        f"elastic net (0.5), C = 1/sqrt(N), engine auto, gap {args.tol:g}\n"
    )
    for name in args.data:
        ds = load_builtin(name)
        order = np.random.default_rng(0).permutation(ds.n_samples)
        rows = []
        for n in args.sizes or SIZES[name]:
            n = min(n, ds.n_samples)
            idx = np.sort(order[:n])
            rows.append(one(sp.csr_matrix(ds.X[idx]), ds.y[idx], 50, args.rank, args.tol))
        table(rows, f"{name}: time against N (M = 50)", "N")
        if name == args.data[0] and args.kernels:
            n = min(args.m_n, ds.n_samples)
            idx = np.sort(order[:n])
            rows = [one(sp.csr_matrix(ds.X[idx]), ds.y[idx], M, args.rank, args.tol) for M in args.kernels]
            table(rows, f"{name}: time against M (N = {n})", "M")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
