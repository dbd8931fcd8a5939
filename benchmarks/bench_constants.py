"""The engines' tuned constants, each at its value and at the values it was chosen over.

A tuned constant is a module-level number an engine's heuristics read (when to switch
proximal Newton to coordinate descent, when to polish the support, how many BLAS threads
a small solve uses, ...).  ``docs/tuned_constants.md`` lists them with the rows of this
script that justify their values; the code cites that page.

Each case solves one problem with the constant set to each of its candidate values (the
first is the shipped one), in this process, with everything else at its default, after one
untimed solve at the shipped value (compilation and first-call costs).  Printed
per row: the constant, its value, the solve time (best of ``--repeat``; the factorization
is not included), its ratio to the shipped value's, the iterations, the certified
relative duality gap and the status.

Problems (data bundled in ``shared/data``):

* ``NEW_SET_NEWTON`` (bcd, ``method: newton``): w8a, the first ``--n`` points (8,000) of
  a stratified shuffle (seed 0), the 50-kernel bank of ``bench_large_n.py`` as factors,
  logistic loss + elastic net, C = 1e-4, ``tol`` 1e-3.  Candidates: 1 Newton step on a new
  working set, or ``max_newton`` (``None``).
* ``STALL_SLOW`` (bcd): the same data and bank, a warm-started path C = 1e-4 .. 1e-5
  (5 values), elastic net, ``tol`` 1e-3.  Candidates 2 (an iteration that leaves the gap
  above ``STALL_RATIO`` of the last one must repeat before coordinate descent takes over)
  and 1.  The time is the whole path's.
* ``SMOOTH_POLISH_GAP`` (bcd): w8a, 1,000 points, the same bank, logistic + l1,
  C = 1e-3, ``tol`` 1e-3.  Candidates 1e-2 and ``inf`` (polish at any gap).
* ``GAMMA0_SCALE`` (spicy, iterative method): the breast-cancer set, 398 points, the same
  bank, logistic + l1, C = 0.01.  Candidates 10 and 1 (the first proximity parameter
  10/C or 1/C).
* ``GRAM_MAX_RANK`` (bcd): scikit-learn's ``make_classification`` (15,000 points, 20
  features, seed 0), 4 Gaussian kernels of rank at most 1,200, logistic + l1, C = 1e-3.
  Candidates 2,048 (every block's spectral norm from its Gram matrix) and 512 (the larger
  blocks' from sparse iterative solvers).
* ``MIN_GROWTH`` (the factor refinement of ``factor: auto``): w8a, 10,000 points, the
  50-kernel bank, logistic + elastic net, C = 1e-4, the whole fit timed.  Candidates 1.25
  and 1.0 (every refinement round that grows the rank at all).
* ``BLAS_THREADS`` (bcd and spicy): scikit-learn's breast-cancer set, 80 points, the
  33-kernel bank of ``bench_stall.py``, hinge + l1, C = 0.01, ``tol`` 1e-3.  Candidates 1
  and ``None`` (the BLAS default, every core).

    python benchmarks/bench_constants.py
    python benchmarks/bench_constants.py NEW_SET_NEWTON --n 39799 --repeat 1

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: 10 Gaussian kernels on all features and 40 on random 10 % subsets (bench_large_n.py's bank).
BANK: list[dict[str, Any]] = [
    {"function": "rbf", "width": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0], "features": "all"},
    {"function": "rbf", "width": "chi2", "features": {"random_subsets": 40, "size": 0.1, "seed": 0}, "seed": 1},
]


def set_constant(name: str, value: Any) -> list[tuple[Any, Any]]:
    """Set ``name`` in every loaded mklkit module that binds it; returns what to restore."""
    old = []
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("mklkit") and mod is not None and name in vars(mod):
            old.append((mod, vars(mod)[name]))
            setattr(mod, name, value)
    if not old:
        raise SystemExit(f"bench_constants: no mklkit module binds {name}")
    return old


def w8a(n: int) -> tuple[Any, np.ndarray]:
    from sklearn.model_selection import train_test_split

    from mklkit.data import load_builtin

    d = load_builtin("w8a")
    if n >= d.y.size:
        return d.X, d.y
    X, _, y, _ = train_test_split(d.X, d.y, train_size=n, stratify=d.y, random_state=0)
    return X, y


def classification(n: int) -> tuple[Any, np.ndarray]:
    from sklearn.datasets import make_classification

    return make_classification(n_samples=n, n_features=20, n_informative=10, random_state=0)


def cancer(n: int) -> tuple[Any, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(y.size)[:n]
    X = X[idx]
    return (X - X.mean(0)) / X.std(0), y[idx]


CANCER_BANK: list[dict[str, Any]] = [
    {"function": "linear", "features": "each"},
    {"function": "rbf", "width": [2.0, 5.0, 10.0]},
]


@dataclass
class Case:
    name: str
    values: list[Any]
    data: Callable[[argparse.Namespace], tuple[Any, np.ndarray]]
    params: dict[str, Any]
    path: list[float] = field(default_factory=list)
    kernels: list[dict[str, Any]] = field(default_factory=lambda: BANK)
    #: time the whole fit (bank, factorization, refinement and solve), not the solve alone
    whole_fit: bool = False


CASES = [
    Case(
        "NEW_SET_NEWTON",
        [1, None],
        lambda a: w8a(a.n),
        dict(loss="logistic", regularizer="elasticnet", C=1e-4, engine={"name": "bcd", "method": "newton"}),
    ),
    Case(
        "STALL_SLOW",
        [2, 1],
        lambda a: w8a(a.n),
        dict(loss="logistic", regularizer="elasticnet", engine={"name": "bcd"}),
        path=list(np.geomspace(1e-4, 1e-5, 5)),
    ),
    Case(
        "SMOOTH_POLISH_GAP",
        [1e-2, math.inf],
        lambda a: w8a(1000),
        dict(loss="logistic", regularizer="l1", C=1e-3, engine={"name": "bcd"}),
    ),
    Case(
        "BLAS_THREADS",
        [1, None],
        lambda a: cancer(80),
        dict(loss="hinge", regularizer="l1", C=0.01, engine={"name": "bcd"}),
        kernels=CANCER_BANK,
    ),
    Case(
        "BLAS_THREADS",
        [1, None],
        lambda a: cancer(80),
        dict(loss="hinge", regularizer="l1", C=0.01, engine={"name": "spicy"}, factor=False),
        kernels=CANCER_BANK,
    ),
    Case(
        "GAMMA0_SCALE",
        [10.0, 1.0],
        lambda a: cancer(398),
        dict(loss="logistic", regularizer="l1", C=0.01, engine={"name": "spicy", "method": "iterative"}, factor=False),
        kernels=CANCER_BANK,
    ),
    Case(
        "GRAM_MAX_RANK",
        [2048, 512],
        lambda a: classification(15000),
        dict(loss="logistic", regularizer="l1", C=1e-3, engine={"name": "bcd"}, factor={"rank": 1200}),
        kernels=[{"function": "rbf", "width": [1.0, 2.0, 4.0, 8.0]}],
    ),
    Case(
        "MIN_GROWTH",
        [1.25, 1.0],
        lambda a: w8a(10000),
        dict(loss="logistic", regularizer="elasticnet", C=1e-4, engine={"name": "auto"}, factor="auto"),
        whole_fit=True,
    ),
]


def solve(case: Case, X: Any, y: np.ndarray, tol: float) -> tuple[float, int, float, str]:
    """One fit; returns (solve seconds, iterations, gap, status) of its solve(s)."""
    from mklkit import MKLClassifier

    params = dict(case.params)
    params["engine"] = dict(params["engine"], tol=tol)
    params.setdefault("factor", True)
    clf = MKLClassifier(kernels=case.kernels, **params)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case.path:
            path = clf.fit_path(X, y, Cs=case.path)
            results = [res[0] for res in path.results]
        else:
            results = [clf.fit(X, y).result_]
    t = time.perf_counter() - t0 if case.whole_fit else sum(float(r.time_s) for r in results)
    return t, sum(int(r.iterations) for r in results), max(float(r.gap) for r in results), results[-1].status.value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = sorted({c.name for c in CASES})
    ap.add_argument("constants", nargs="*", metavar="CONSTANT", help=f"any of {', '.join(names)} (default: all)")
    ap.add_argument("--n", type=int, default=8000, help="w8a points of the NEW_SET_NEWTON and STALL_SLOW cases")
    ap.add_argument("--repeat", type=int, default=3, help="runs per value; the best time is printed")
    ap.add_argument("--tol", type=float, default=1e-3, help="relative duality gap of every solve")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.constants) - set(names))
    if unknown:
        ap.error(f"unknown constant {', '.join(unknown)}; measured are {', '.join(names)}")

    cases = [c for c in CASES if not args.constants or c.name in args.constants]
    print("| constant | engine | value | time (s) | ratio | iterations | gap | status |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for case in cases:
        X, y = case.data(args)
        solve(case, X, y, args.tol)  # untimed: compilation and first-call costs
        base = None
        for value in case.values:
            old = set_constant(case.name, value)
            try:
                runs = [solve(case, X, y, args.tol) for _ in range(args.repeat)]
            finally:
                for mod, v in old:
                    setattr(mod, case.name, v)
            t, it, gap, status = min(runs)
            base = t if base is None else base
            print(
                f"| {case.name} | {case.params['engine']['name']} | {value} | {t:.2f} | {t / base:.2f} | {it} "
                f"| {gap:.2e} | {status} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
