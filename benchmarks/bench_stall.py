"""The engines side by side on a problem where ``spicy`` used to stall.

Data: scikit-learn's breast cancer set (569 x 30, shipped with scikit-learn),
a stratified 70/30 split (``random_state=0``, 398 training rows),
standardized with the training statistics.  Bank: one linear (or, with
``--poly``, degree-1 polynomial) kernel per feature and Gaussians of widths
2, 5, 10 on all features, 33 kernels of unit trace.  Problem: logistic loss,
block 1-norm, C = 0.01 (``--C``), relative duality gap ``--tol`` (1e-2).

Engines: ``spicy`` (its iterative method), ``proximal``, ``bcd`` on the
exact factors of the bank (pivoted Cholesky, the factorization included in
its time), and ``auto`` (which picks ``spicy`` here, N < 2,000, and switches
engine when the gap stops shrinking).  Each row gives the best time of
``--repeat`` runs (the least disturbed by other work on shared cores), the ratio to the fastest engine, the relative duality gap
it reports, its iterations and status.  ``auto`` must stay within 2x of the
fastest engine.

    python benchmarks/bench_stall.py
    python benchmarks/bench_stall.py --poly --repeat 3

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any, Callable

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import L1
from mklkit.data import Standardizer
from mklkit.pipeline.choose import Auto
from mklkit.engines.bcd import BCD
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels import KernelBank
from mklkit.kernels.factorize.dense import exact_factors
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, SolveResult


def problem(poly: bool, C: float) -> Problem:
    X, y = load_breast_cancer(return_X_y=True)
    y = np.where(y == 1, 1.0, -1.0)
    X_tr, _, y_tr, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    X_tr = Standardizer().fit(X_tr).transform(X_tr)
    each = {"function": "poly", "degree": 1, "features": "each"} if poly else {"function": "linear", "features": "each"}
    bank = KernelBank.build(X_tr, [each, {"function": "rbf", "width": [2.0, 5.0, 10.0]}])
    return Problem(K=bank.K, y=y_tr, loss=Logistic(), regularizer=L1(), C=C)


def runners(pb: Problem, tol: float) -> dict[str, Callable[[], SolveResult]]:
    def bcd() -> SolveResult:
        fac = exact_factors(pb.K)
        fp = Problem(K=fac.bank, y=pb.y, loss=pb.loss, regularizer=pb.regularizer, C=pb.C)
        return BCD(tol=tol).solve(fp)

    return {
        "spicy": lambda: Spicy(tol=tol).solve(pb),
        "proximal": lambda: Proximal(tol=tol).solve(pb),
        "bcd (exact factors)": bcd,
        "auto": lambda: Auto(tol=tol).solve(pb),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--poly", action="store_true", help="degree-1 polynomial kernels per feature")
    ap.add_argument("--C", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    pb = problem(args.poly, args.C)
    print(
        f"breast cancer, N = {pb.n_samples}, M = {pb.n_kernels} "
        f"({'poly degree 1' if args.poly else 'linear'} per feature + 3 rbf), logistic + l1, "
        f"C = {args.C:g}, tol = {args.tol:g}"
    )
    rows: list[tuple[str, float, Any]] = []
    for name, run in runners(pb, args.tol).items():
        run()  # compiles what the engine needs
        times, res = [], None
        for _ in range(args.repeat):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                res = run()
            times.append(time.perf_counter() - t)
        rows.append((name, min(times), res))
    fastest = min(t for _, t, _ in rows)
    print(f"{'engine':<22}{'time s':>9}{'x fastest':>11}{'gap':>11}{'iters':>7}  status / route")
    for name, t, res in rows:
        route = res.message.split(":")[0] if name == "auto" else ""
        print(f"{name:<22}{t:>9.2f}{t / fastest:>11.2f}{res.gap:>11.2e}{res.iterations:>7}  {res.status} {route}")


if __name__ == "__main__":
    main()
