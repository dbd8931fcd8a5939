"""SMO-MKL scaling in the number of kernels on Sonar (Vishwanathan et al. 2010, Fig. 1a-b).

All 208 Sonar points (standardized), hinge loss, C_paper = 100 (mklkit C =
1/100), lambda = 1, p in {1.33, 2}, relative duality gap 1e-3.  Kernels:
Gaussian kernels on random feature subsets with random widths -- M/10
random subsets of 5 of the 60 features (seed 0), each with the same 10
widths drawn once as 5 chi^2_1 + 0.1 (seed 1; the 'chi2' draw of
``mklkit.kernels``), unit trace.  The paper's kernels "do not form any special
hierarchy"; neither do these.

* precomputed: the bank is built once (``KernelBank.build``; its time is shown
  but not included), then solved;
* on the fly: ``mklkit_smo.FeatureKernels`` computes kernel rows when SMO
  needs them, with an LRU cache of ``--cache-mb`` MiB.

Printed: solve time (wall and CPU; the machine may be shared), SMO steps,
cache misses (rows computed), and the exponent of a least-squares fit of
log(time) against log(M).  With ``--spicy``, the precomputed banks are also
solved by the ``spicy`` engine on the same problem for p = 2 (the squared
2-norm of the weights is the block l_{4/3} norm: ``lq(q=4/3)`` at
``C (2 lambda)^(1/3)``), with the objectives compared.

Run::

    python benchmarks/bench_smo_kernels.py                 # precomputed up to 1e4, on the fly up to 1e5
    python benchmarks/bench_smo_kernels.py --quick         # up to 1e3 / 1e4
    python benchmarks/bench_smo_kernels.py --precomputed 1000 10000 --on-the-fly --p 1.33
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from mklkit.data import load_builtin
from mklkit.kernels import CHI2_DF, KernelBank, format_bytes
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning
from mklkit_smo import FeatureKernels

C_PAPER = 100.0
LAM = 1.0
SUBSET = 5
WIDTHS_PER_SUBSET = 10


def bank_entries(M: int) -> list[dict]:
    """M Gaussian kernels: M/10 random 5-feature subsets x 10 random widths."""
    rng = np.random.default_rng(1)
    widths = (5.0 * rng.chisquare(CHI2_DF, size=WIDTHS_PER_SUBSET) + 0.1).tolist()
    n_sub = max(1, M // WIDTHS_PER_SUBSET)
    subsets = {"random_subsets": n_sub, "size": SUBSET, "seed": 0}
    return [{"function": "rbf", "width": w, "features": subsets} for w in widths]


def fit_exponent(xs: list[float], ts: list[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs), np.log(ts), 1)[0])


def solve(engine, problem):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0, c0 = time.perf_counter(), time.process_time()
        r = engine.solve(problem)
        return r, time.perf_counter() - t0, time.process_time() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precomputed", nargs="*", type=int, default=[100, 1000, 3000, 10000])
    ap.add_argument("--on-the-fly", nargs="*", type=int, default=[1000, 10000, 100000], dest="fly")
    ap.add_argument("--p", nargs="+", type=float, default=[1.33, 2.0])
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--cache-mb", type=float, default=512.0)
    ap.add_argument("--memory-gb", type=float, default=12.0, help="budget for precomputed banks")
    ap.add_argument("--spicy", action="store_true", help="also run spicy on the p = 2 problems")
    ap.add_argument("--quick", action="store_true", help="precomputed up to 1e3, on the fly up to 1e4")
    args = ap.parse_args(argv)
    if args.quick:
        args.precomputed = [m for m in args.precomputed if m <= 1000]
        args.fly = [m for m in args.fly if m <= 10000]
    ds = load_builtin("sonar")
    X = (ds.X - ds.X.mean(axis=0)) / ds.X.std(axis=0)
    y = ds.y
    reg = get_registry()
    hinge = reg.create("loss", "hinge")
    C = 1.0 / C_PAPER
    engine = reg.create("engine", {"name": "smo_mkl", "tol": args.tol, "cache_mb": args.cache_mb})
    print(
        f"Sonar N = {X.shape[0]}, D = {X.shape[1]}; Gaussian kernels on random {SUBSET}-feature "
        f"subsets x {WIDTHS_PER_SUBSET} random widths, unit trace; hinge, C_paper = {C_PAPER:g}, "
        f"lambda = {LAM:g}, tol = {args.tol:g}"
    )
    header = (
        f"{'kernels':>8} {'M':>7} {'p':>5} | {'time (s)':>9} {'cpu (s)':>8} {'steps':>6} "
        f"{'rows':>6} {'gap':>8} {'status':>9} | {'build (s)':>9} {'memory':>9}"
    )
    for mode, Ms in (("precomputed", args.precomputed), ("on the fly", args.fly)):
        if not Ms:
            continue
        print()
        print(header)
        print("-" * len(header))
        times: dict[float, list[tuple[int, float]]] = {p: [] for p in args.p}
        for M in Ms:
            entries = bank_entries(M)
            t0 = time.perf_counter()
            if mode == "precomputed":
                need = 8 * M * X.shape[0] ** 2
                if need > args.memory_gb * 2**30:
                    print(
                        f"{mode:>8} {M:>7}: skipped, the bank needs {format_bytes(need)} "
                        f"(> --memory-gb {args.memory_gb:g})"
                    )
                    continue
                bank = KernelBank.build(X, entries, normalize="trace", memory_budget_bytes=int(args.memory_gb * 2**30))
                build = time.perf_counter() - t0
                memory = format_bytes(bank.nbytes)
                make = lambda regp: Problem(K=bank.K, y=y, loss=hinge, regularizer=regp, C=C)  # noqa: E731
            else:
                src = FeatureKernels(X, entries, normalize="trace")
                build = time.perf_counter() - t0
                memory = format_bytes(src.row_bytes) + "/row"
                make = lambda regp: src.problem(y, hinge, regp, C)  # noqa: E731
            Mreal = len(entries) * max(1, M // WIDTHS_PER_SUBSET)
            for p in args.p:
                regp = reg.create("regularizer", {"name": "pnorm_squared", "p": p, "lam": LAM})
                r, wall, cpu = solve(engine, make(regp))
                times[p].append((Mreal, wall))
                rows = r.history[-1]["cache_misses"] if mode != "precomputed" else 0
                print(
                    f"{mode[:8]:>8} {Mreal:>7} {p:5.2f} | {wall:9.2f} {cpu:8.2f} {r.iterations:6d} "
                    f"{rows:6d} {r.gap:8.1e} {str(r.status):>9} | {build:9.2f} {memory:>9}"
                )
                sys.stdout.flush()
                if args.spicy and mode == "precomputed" and p == 2.0:
                    spicy = reg.create("engine", {"name": "spicy", "tol": args.tol})
                    lq = reg.create("regularizer", {"name": "lq", "q": 4.0 / 3.0})
                    prob = Problem(K=bank.K, y=y, loss=hinge, regularizer=lq, C=C * (2.0 * LAM) ** (1.0 / 3.0))
                    why = spicy.supports(prob)
                    if why is not None:
                        print(f"{'spicy':>8} {Mreal:>7} {p:5.2f} | not supported: {why}")
                    else:
                        r2, wall2, cpu2 = solve(spicy, prob)
                        diff = abs(r2.objective - r.objective) / abs(r.objective)
                        print(
                            f"{'spicy':>8} {Mreal:>7} {p:5.2f} | {wall2:9.2f} {cpu2:8.2f} "
                            f"{r2.iterations:6d} {'':>6} {r2.gap:8.1e} {str(r2.status):>9} | "
                            f"objective differs by {diff:.1e} (relative)"
                        )
                    sys.stdout.flush()
            if mode == "precomputed":
                del bank
        for p in args.p:
            pts = times[p]
            if len(pts) >= 2:
                print(f"  {mode}, p = {p:g}: time ~ M^{fit_exponent(*zip(*pts)):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
