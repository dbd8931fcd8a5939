"""Regularization path over C: warm-started ``fit_path`` against independent solves.

For each data set and regularizer, ``MKLClassifier.fit_path`` solves a grid of
C values from the largest to the smallest, passing each solution to the next
solve as ``warm_start``; the baseline solves every C on its own
(``fit_path`` with a single C, i.e. the engine's usual cold start).  Both
times exclude the kernel-bank build, which is shared by the path; the
end-to-end column adds one bank build to the path and one per C to the cold
fits (what calling ``fit`` once per C costs).  Reported: medians over
``--repeats`` runs, total Newton/outer iterations, and the largest difference
between the warm and cold objectives relative to the objective (both solves
stop at the same relative duality gap ``tol``).

Run::

    python benchmarks/bench_path.py                  # sonar, ionosphere; elasticnet and l1
    python benchmarks/bench_path.py --data liver --regularizers elasticnet --repeats 5

If the engine does not support warm starts (``engine.supports_warm_start`` is
False), the script says so and still runs (the two columns then measure the
same thing).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from mklkit import ConvergenceWarning, MKLClassifier
from mklkit.data import load_builtin
from mklkit.plugins import get_registry


def _median(values):
    return statistics.median(values)


def bench(name: str, regularizer: str, Cs: np.ndarray, tol: float, repeats: int, engine: str):
    ds = load_builtin(name)
    X, y = np.asarray(ds.X), ds.y
    est = MKLClassifier(regularizer=regularizer, tol=tol, engine=engine)
    warm_t, cold_t, bank_t = [], [], []
    path = cold = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        path = est.fit_path(X, y, Cs)
        total = time.perf_counter() - t0
        warm_t.append(path.time_s)
        bank_t.append(total - path.time_s)
        cold = [
            MKLClassifier(regularizer=regularizer, tol=tol, engine=engine, C=float(C)).fit_path(X, y, [C])
            for C in path.Cs
        ]
        cold_t.append(sum(p.time_s for p in cold))
    assert path is not None and cold is not None
    w_obj = np.array([r[0].objective for r in path.results])
    c_obj = np.array([p.results[0][0].objective for p in cold])
    rel = float(np.max(np.abs(w_obj - c_obj) / np.abs(c_obj)))
    bank = _median(bank_t)
    return {
        "data": name,
        "N": X.shape[0],
        "M": len(path.kernel_names),
        "reg": regularizer,
        "n_C": len(path),
        "warm_s": _median(warm_t),
        "cold_s": _median(cold_t),
        "warm_e2e": _median(warm_t) + bank,
        "cold_e2e": _median(cold_t) + bank * len(path),
        "warm_it": int(np.sum(path.n_iter)),
        "cold_it": int(sum(int(p.n_iter[0]) for p in cold)),
        "active": f"{path.n_active[0]}..{path.n_active[-1]}",
        "obj_diff": rel,
        "unconverged": sum(not r[0].converged for r in path.results) + sum(not p.results[0][0].converged for p in cold),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", default=["sonar", "ionosphere"])
    ap.add_argument("--regularizers", nargs="+", default=["elasticnet", "l1"])
    ap.add_argument("--n-C", type=int, default=10)
    ap.add_argument("--C-max", type=float, default=1.0)
    ap.add_argument("--C-min", type=float, default=3e-3)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engine", default="spicy")
    args = ap.parse_args()

    engine = get_registry().create("engine", args.engine)
    if not engine.supports_warm_start:
        print(
            f"NOTE: engine {args.engine!r} does not support warm starts "
            "(supports_warm_start is False): fit_path solves every C from a cold start, "
            "so both columns measure the same thing."
        )
    Cs = np.geomspace(args.C_max, args.C_min, args.n_C)
    print(
        f"C grid: {args.n_C} values from {args.C_max:g} to {args.C_min:g} (log-spaced), "
        f"tol={args.tol:g}, engine={args.engine}, median of {args.repeats} runs; "
        "default kernel bank ('auto'), standardized features"
    )
    head = (
        f"{'data':<11}{'N':>5}{'M':>5}  {'regularizer':<11}{'warm_s':>8}{'cold_s':>8}"
        f"{'speedup':>8}{'warm_e2e':>9}{'cold_e2e':>9}{'warm_it':>8}{'cold_it':>8}"
        f"{'active':>9}{'obj_diff':>10}{'unconv':>7}"
    )
    print(head)
    print("-" * len(head))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name in args.data:
            for reg in args.regularizers:
                try:
                    r = bench(name, reg, Cs, args.tol, args.repeats, args.engine)
                except ValueError as exc:
                    print(f"{name:<11}{'':>10}  {reg:<11}skipped: {exc}")
                    continue
                print(
                    f"{r['data']:<11}{r['N']:>5}{r['M']:>5}  {r['reg']:<11}{r['warm_s']:>8.2f}"
                    f"{r['cold_s']:>8.2f}{r['cold_s'] / r['warm_s']:>7.2f}x"
                    f"{r['warm_e2e']:>9.2f}{r['cold_e2e']:>9.2f}{r['warm_it']:>8d}"
                    f"{r['cold_it']:>8d}{r['active']:>9}{r['obj_diff']:>10.1e}"
                    f"{r['unconverged']:>7d}",
                    flush=True,
                )
    print(
        "warm_s/cold_s: solve time of the whole path (bank excluded); *_e2e: including the "
        "bank build(s); *_it: outer iterations summed over the path; active: kernels at the "
        "largest..smallest C; obj_diff: max relative objective difference warm vs cold; "
        "unconv: solves that ended unconverged (warm + cold)."
    )


if __name__ == "__main__":
    main()
