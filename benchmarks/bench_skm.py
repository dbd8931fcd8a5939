"""Support kernel machine (``skm_smo``) running times, Bach, Lanckriet & Jordan (2004), Fig. 2.

Setup of §5: Gaussian kernels on random subsets of the features with varying
widths, unit diagonal; hinge loss with the squared block 1-norm
(``l1_squared``), C_paper = 1 (mklkit ``C = 1``), the paper's tolerances
(eps1/n = 5e-4, eps2 = 1e-4, mu = 0.5) and a relative duality gap <= 1e-3.

* Ionosphere (n = 351) and breast cancer (wbc, n = 683) with m growing;
* Adult: nested random subsets of a9a with m = 4 and n from 450 to 6212, for
  three random orders of the points (``--adult-seeds``; Clarabel on the first).

Kernel j uses a random subset of 3 features (Adult: 10 % of the 123 binary
features) and width ``w_j = s * 2**(j mod 4 - 1)`` with ``s`` the median
pairwise distance of the standardised data (seed 0).  Next to the SMO time
the general-purpose interior-point solver cvxpy + Clarabel (the stand-in for
Mosek) solves the conic dual (D_K) on the smaller sizes (``--conic-max``
kernel-matrix entries m n^2).  Printed: seconds, SMO steps, stages, active
kernels, the (OPT3) reached and the weights that certify it (``eta~``:
the Moreau-Yosida weights of Appendix B, ``LP``: the LP of (OPT3) for the
final alpha), the relative difference of the objectives, and least-squares
exponents of time against m and n.  ``distinct``: the points the SMO loop works
on (identical points -- same label, same row in every kernel -- are merged, see
``SkmSMO``'s ``merge_identical``; ``--no-merge`` turns that off).  Times are the
fastest of ``--repeat`` solves, after a warm-up that compiles everything and
starts numba's threads.

Run (the numbers depend on the machine; use ``nice`` on a shared one)::

    python benchmarks/bench_skm.py --quick     # small sizes, a few minutes
    python benchmarks/bench_skm.py             # the paper's sizes
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from mklkit.data import load_builtin
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning
from mklkit_smo import L1Squared, SkmSMO


def standardize(X: np.ndarray) -> np.ndarray:
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def gaussian_bank(X: np.ndarray, m: int, subset: int, seed: int = 0) -> np.ndarray:
    """m Gaussian kernels on random feature subsets with widths s * 2^(j mod 4 - 1) (unit diagonal)."""
    rng = np.random.default_rng(seed)
    n, p = X.shape
    sample = X[rng.choice(n, min(n, 300), replace=False)]
    d2 = np.sum((sample[:, None, :] - sample[None, :, :]) ** 2, axis=-1)
    K = np.empty((m, n, n))
    for j in range(m):
        cols = np.sort(rng.choice(p, min(subset, p), replace=False))
        Z = X[:, cols]
        sq = np.sum(Z * Z, axis=1)
        D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * Z @ Z.T, 0.0)
        s = float(np.sqrt(np.median(d2 * (len(cols) / p)))) or 1.0
        width = s * 2.0 ** (j % 4 - 1)
        np.exp(-D / (2.0 * width * width), out=K[j])
    return K


def conic_time(K: np.ndarray, y: np.ndarray, C_paper: float) -> tuple[float, float]:
    """Seconds and optimal value of (D_K) by cvxpy + Clarabel (SOC constraints)."""
    import cvxpy as cp

    t0 = time.perf_counter()
    N = K.shape[1]
    a = cp.Variable(N)
    g = cp.Variable()
    cons = [a >= 0, a <= C_paper, y @ a == 0]
    for Km in K:
        w, V = np.linalg.eigh(Km)
        keep = w > 1e-10 * w.max()
        L = V[:, keep] * np.sqrt(w[keep])
        cons.append(cp.norm(L.T @ cp.multiply(y, a)) <= g)
    prob = cp.Problem(cp.Minimize(0.5 * cp.square(g) - cp.sum(a)), cons)
    prob.solve(solver=cp.CLARABEL)
    return time.perf_counter() - t0, float(prob.value)


def run_case(K: np.ndarray, y: np.ndarray, conic: bool, repeat: int = 1, **options) -> dict:
    """One solve, timed ``repeat`` times; the fastest is reported (the solver is deterministic,
    so the spread is the machine's: other work only ever adds time)."""
    hinge = get_registry().create("loss", "hinge")
    pb = Problem(K=K, y=y, loss=hinge, regularizer=L1Squared(), C=1.0)
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = SkmSMO(**options).solve(pb)
        times.append(time.perf_counter() - t0)
    row = {
        "time": float(np.min(times)),
        "status": str(res.status),
        "steps": res.iterations,
        "stages": len(res.history),
        "distinct": int(res.history[0]["n_points_in_loop"]),
        "active": int(np.sum(res.kernel_weights > 0)),
        "gap": res.gap,
        "eps1n": res.history[-1]["eps1_per_n"],
        "eps2": res.history[-1]["eps2"],
        "conic": float("nan"),
        "rel": float("nan"),
        "weights": "LP" if res.history[-1].get("weights_from") == "lp" else "eta~",
    }
    if conic:
        tc, val = conic_time(K, y, 1.0)
        row["conic"] = tc
        row["rel"] = (res.objective - (-val)) / abs(val)
    return row


def slope(xs: list[float], ts: list[float]) -> float:
    x, t = np.log(np.asarray(xs, float)), np.log(np.maximum(np.asarray(ts, float), 1e-3))
    return float(np.polyfit(x, t, 1)[0]) if len(xs) >= 2 else float("nan")


def table(title: str, key: str, rows: list[tuple[int, dict]]) -> None:
    print(f"\n{title}")
    print(
        f"{key:>6} {'distinct':>8} {'SMO s':>8} {'steps':>9} {'stages':>6} {'active':>6} "
        f"{'gap':>9} "
        f"{'eps1/n':>9} {'eps2':>9} {'eta':>4} {'Clarabel s':>10} {'rel diff':>9} status"
    )
    for x, r in rows:
        print(
            f"{x:>6d} {r['distinct']:>8d} {r['time']:>8.3f} {r['steps']:>9d} {r['stages']:>6d} "
            f"{r['active']:>6d} "
            f"{r['gap']:>9.2e} {r['eps1n']:>9.2e} {r['eps2']:>9.2e} {r['weights']:>4} "
            f"{r['conic']:>10.2f} {r['rel']:>9.1e} {r['status']}"
        )
    xs = [x for x, _ in rows]
    print(f"fitted exponent ({key}): SMO {slope(xs, [r['time'] for _, r in rows]):.2f}", end="")
    cx = [(x, r["conic"]) for x, r in rows if np.isfinite(r["conic"])]
    if len(cx) >= 2:
        print(f", Clarabel {slope([a for a, _ in cx], [b for _, b in cx]):.2f}", end="")
    print(flush=True)


def a9a(n_max: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The first n_max points of a random order of a9a (nested subsets for every n <= n_max)."""
    ds = load_builtin("a9a")
    idx = np.random.default_rng(seed).permutation(ds.n_samples)[:n_max]
    return np.asarray(ds.X[idx].todense(), dtype=np.float64), np.asarray(ds.y[idx], float)


def warm_up() -> None:
    """Compile (cached on disk after the first run), start numba's threads: outside the timings."""
    from mklkit_smo import _smo

    Xw = standardize(load_builtin("wbc").X[:60])
    run_case(gaussian_bank(Xw, 2, 3), load_builtin("wbc").y[:60].astype(float), False)
    Xa, ya = a9a(300)  # identical points: the merged path
    run_case(gaussian_bank(Xa, 2, 12), ya, False)
    pts = np.arange(4, dtype=np.int64)
    _smo.sync_precomputed_parallel(np.ones((2, 4, 4)), pts, np.ones(4), pts, 4, False, np.zeros((2, 4)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument(
        "--conic-max",
        type=float,
        default=None,
        help="largest m n^2 solved by cvxpy + Clarabel (default 2e6, quick 1e6)",
    )
    ap.add_argument("--sets", nargs="+", default=["ionosphere", "wbc", "adult"])
    ap.add_argument("--repeat", type=int, default=5, help="timed solves per case (the fastest)")
    ap.add_argument(
        "--adult-seeds",
        type=int,
        nargs="+",
        default=[0, 1, 2],
        help="random orders of a9a whose nested subsets are timed (the step counts, "
        "and so the fitted exponent, vary with the data)",
    )
    ap.add_argument(
        "--no-merge", action="store_true", help="solve on all points (merge_identical=False), for comparison"
    )
    args = ap.parse_args()
    conic_max = args.conic_max if args.conic_max is not None else (1e6 if args.quick else 2e6)
    opts = {"merge_identical": False} if args.no_merge else {}
    warm_up()
    for name, ms in (("ionosphere", [6, 12, 24, 48, 96, 192]), ("wbc", [3, 6, 12, 24, 48, 96])):
        if name not in args.sets:
            continue
        ds = load_builtin(name)
        X = ds.X[:, np.std(ds.X, axis=0) > 0]
        X = standardize(X)
        y = ds.y.astype(float)
        ms = ms[:3] if args.quick else ms
        rows = []
        for m in ms:
            K = gaussian_bank(X, m, 3)
            rows.append((m, run_case(K, y, m * len(y) ** 2 <= conic_max, args.repeat, **opts)))
        table(f"{name}, n = {len(y)}: time against m", "m", rows)
    if "adult" in args.sets:
        ns = [450, 750, 1100, 1605, 2265, 3185, 4781, 6212]
        ns = ns[:4] if args.quick else ns
        slopes = []
        for seed in args.adult_seeds:
            Xa, ya = a9a(max(ns), seed)
            rows = []
            for n in ns:
                K = gaussian_bank(Xa[:n], 4, 12)
                conic = seed == args.adult_seeds[0] and 4 * n * n <= conic_max
                rows.append((n, run_case(K, ya[:n], conic, args.repeat, **opts)))
                del K
            table(f"adult (a9a nested subsets, order seed {seed}), m = 4: time against n", "n", rows)
            slopes.append(slope([x for x, _ in rows], [r["time"] for _, r in rows]))
        if len(slopes) > 1:
            print(
                f"\nadult: fitted exponents (n) over {len(slopes)} orders of the points: "
                + ", ".join(f"{s:.2f}" for s in slopes)
                + f"; mean {np.mean(slopes):.2f}, median {np.median(slopes):.2f}"
            )


if __name__ == "__main__":
    main()
