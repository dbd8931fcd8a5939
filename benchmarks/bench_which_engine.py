"""Which engine for which problem: every engine that supports a problem, on the same problem, side by side.

For each problem (a bundled data set, 70/30 stratified split with seed 0, features standardized by the
estimator; the default kernel bank, :func:`mklkit.estimators.default_kernels`, unit trace; one fixed C)
``MKLClassifier(loss=..., regularizer=..., C=..., engine=E, factor=...)`` is fitted with each engine ``E`` at
its default tolerance, on the representation the engine takes: Gram matrices for ``spicy`` and
``proximal``, the same kernels as pivoted Cholesky factors (``factor``: to 1e-9 of each kernel's trace on
the small sets, so that every engine solves the same problem; rank 100 on a9a, whose Gram matrices do not
fit) for ``bcd``, ``dualcd`` and ``apg`` (``device="cpu"``), and whatever ``auto`` chooses. An engine that does not support the problem is
``--``. Printed per problem and engine: the fit time (the bank build included), the relative duality gap the
engine reports, its status and the test accuracy. Every engine first fits a small problem once, untimed, so
that no row carries the loading of compiled code.

    python benchmarks/bench_which_engine.py
    python benchmarks/bench_which_engine.py --problems ionosphere-logistic

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from mklkit import MKLClassifier
from mklkit.data import load_builtin

#: Factors of the same kernels to 1e-9 of their trace: the factored problem is the Gram matrices' problem.
EXACT = {"tol": 1e-9}
#: name -> (data set, rows used (None: all), loss, regularizer, C, factor settings of the factored engines)
PROBLEMS: dict[str, tuple[str, int | None, str, str, float, Any]] = {
    "ionosphere-logistic": ("ionosphere", None, "logistic", "elasticnet", 0.05, EXACT),
    "ionosphere-hinge": ("ionosphere", None, "hinge", "l1", 0.05, EXACT),
    "pima-hinge": ("pima", None, "hinge", "l1", 0.02, EXACT),
    "a9a-logistic": ("a9a", 4000, "logistic", "elasticnet", 0.05, {"rank": 100}),
}
ENGINES = ["spicy", "proximal", "bcd", "dualcd", "apg", "auto"]
FACTORED = {"bcd", "dualcd", "apg"}


def fit(engine: str, loss: str, reg: str, C: float, factor: Any, X: Any, y: np.ndarray) -> tuple[Any, float]:
    kw: dict[str, Any] = {"loss": loss, "regularizer": reg, "C": C}
    if engine == "apg":
        kw.update(device="cpu", factor=factor)
    elif engine in FACTORED:
        kw.update(engine=engine, factor=factor)
    elif engine != "auto":
        kw.update(engine=engine, factor=None)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = MKLClassifier(**kw).fit(X, y)
    return est, time.perf_counter() - t0


def warm_up(engines: list[str]) -> None:
    """Each engine once, untimed, on 100 ionosphere rows with both losses: the first fit of a process loads
    compiled code (a few tenths of a second), which would otherwise land in whichever row comes first."""
    ds = load_builtin("ionosphere")
    X, y = ds.X[:100], np.asarray(ds.y)[:100]
    for engine in engines:
        for loss, reg in (("logistic", "elasticnet"), ("hinge", "l1")):
            try:
                fit(engine, loss, reg, 0.05, EXACT, X, y)
            except ValueError:
                pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES)
    args = ap.parse_args()
    warm_up(args.engines)
    print("| problem | N train | engine | time (s) | rel. gap | status | test acc |")
    print("|---|---:|---|---:|---:|---|---:|")
    for name in args.problems:
        data, rows, loss, reg, C, factor = PROBLEMS[name]
        ds = load_builtin(data)
        X, y = ds.X, np.asarray(ds.y)
        if rows is not None:
            keep = np.random.default_rng(0).permutation(X.shape[0])[: int(rows / 0.7)]
            X, y = X[keep], y[keep]
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
        label = f"{data} {loss}+{reg}, C={C:g}"
        for engine in args.engines:
            try:
                est, secs = fit(engine, loss, reg, C, factor, X_tr, y_tr)
            except ValueError as exc:  # the engine does not support the problem, or its bank does not fit
                why = "Gram matrices do not fit" if "memory_budget" in str(exc) else "not supported"
                print(f"| {label} | {X_tr.shape[0]} | {engine} | -- | -- | {why} | -- |")
                continue
            chosen = engine
            if engine == "auto":
                chosen = f"auto ({est.result_.solved_by})"
            acc = est.score(X_te, y_te)
            print(
                f"| {label} | {X_tr.shape[0]} | {chosen} | {secs:.2f} | {float(est.dual_gap_):.1e} | "
                f"{est.result_.status.value} | {acc:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
