"""MKLClassifier on precomputed kernels against MKLpy's EasyMKL: the mid-size a9a problem.

Problem: ``--kernels M`` Gaussian kernels (default 20, widths spaced
geometrically from 2 to 40, as in ``bench_auto_dense.py``) on all 123 a9a
features, N training points (``--sizes``, default 2,000 and 4,000: a random
subset of the a9a training file, seed = split), tested on a fixed random
subset of the a9a test file (``--test`` points, default 5,000, seed 12345).
Per split the kernels are computed once (unit diagonal, ``normalize="none"``),
as one (M, N, N) training stack and one (M, N_test, N) test stack, and every
method gets those same arrays:

* ``mklkit <engine>``: ``MKLClassifier("precomputed", normalize="trace",
  engine=<engine>)`` (unit-trace kernels, as ``bench_auto_dense.py``; every
  other parameter at its default: logistic loss, elastic net, ``C="auto"``,
  i.e. ``"scale"`` below 2,500 rows and a held-out path from there), fitted
  on ``np.moveaxis(K, 0, -1)`` (a view, shape (N, N, M)), scored on the test
  stack the same way; engines ``auto``, ``spicy`` and ``proximal``;
* ``easymkl lam=<l>`` (if MKLpy is importable): ``EasyMKL(lam=l)`` (its
  default KOMD learner; MKLpy 0.6's default lam is 0.1) on lists of torch
  views of the same matrices (``torch.from_numpy(K[m])``, no copies).

Time: seconds of ``fit`` only (the kernel computation and the prediction are
left out for every method), median over the splits; ``engine s`` is the
time mklkit's engine reports (``result_.time_s``, plus the held-out path's
solves), the rest of mklkit's fit is input checks (the PSD check of every
given kernel) and C's choice.  ``ratio``: fit seconds over EasyMKL's (lam 0.1).
Accuracy on the test subset, mean over the splits.  ``picked``: the engine
``auto`` delegated to (``solved_by_``); ``status``: the mklkit solves' status
and whether a ``ConvergenceWarning`` was emitted.  Numba compiles before the
timings (one small fit per engine), and on each split one untimed fit of the
first engine comes before the timed ones: the first fit after the kernels
are built pays for touching fresh memory (at N = 2,000, 2.97 s for whichever
engine came first against 1.55 s after it).

Run::

    python benchmarks/bench_vs_easymkl.py
    python benchmarks/bench_vs_easymkl.py --sizes 2000 --splits 3 --test 2000
    python benchmarks/bench_vs_easymkl.py --threads 1     # on a shared, busy machine

MKLpy needs PyTorch: run this script with an interpreter that has CPU-only
torch, ``cvxopt`` and ``MKLpy`` next to mklkit.  Without MKLpy, its rows are
skipped with a note.  Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings

import numpy as np

from mklkit import ConvergenceWarning, MKLClassifier
from mklkit.data import load_builtin
from mklkit.kernels import KernelBank

ENGINES = ["auto", "spicy", "proximal"]


def _easymkl():
    """MKLpy's EasyMKL class, or None and why not."""
    try:
        import torch  # noqa: F401
        from MKLpy.algorithms import EasyMKL
    except ImportError as exc:
        return None, str(exc)
    return EasyMKL, ""


def fit_mklkit(engine: str, K: np.ndarray, y: np.ndarray, Kte: np.ndarray, yte: np.ndarray) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        clf = MKLClassifier("precomputed", normalize="trace", engine=engine).fit(np.moveaxis(K, 0, -1), y)
        secs = time.perf_counter() - t0
    acc = clf.score(np.moveaxis(Kte, 0, -1), yte)
    sel = getattr(clf, "C_selection_", None)
    engine_s = clf.result_.time_s + (float(np.sum(sel.times)) if sel is not None else 0.0)
    warned = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return {
        "s": secs,
        "acc": acc,
        "engine_s": engine_s,
        "picked": clf.solved_by_,
        "status": str(clf.result_.status.value) + (f" ({warned} ConvergenceWarning)" if warned else ""),
        "C": float(clf.C_),
        "active": int(clf.active_kernels_.size),
    }


def fit_easymkl(EasyMKL, lam: float, K: np.ndarray, y: np.ndarray, Kte: np.ndarray, yte: np.ndarray) -> dict:
    import torch

    KL = [torch.from_numpy(K[m]) for m in range(K.shape[0])]
    KLte = [torch.from_numpy(Kte[m]) for m in range(Kte.shape[0])]
    est = EasyMKL(lam=lam)
    t0 = time.perf_counter()
    est.fit(KL, torch.from_numpy(y))
    secs = time.perf_counter() - t0
    pred = np.asarray(est.predict(KLte), dtype=np.float64)
    w = np.asarray(est.solution.weights, dtype=np.float64)
    return {
        "s": secs,
        "acc": float(np.mean(pred == yte)),
        "engine_s": float("nan"),
        "picked": "",
        "status": "",
        "C": float("nan"),
        "active": int(np.sum(w > 1e-8 * w.max())),
    }


def warm_up(EasyMKL, X, y, widths: list[float]) -> None:
    """Compile mklkit's numba code for every engine (and touch EasyMKL) on 300 points."""
    bank = KernelBank.build(X[:300], [{"function": "rbf", "width": widths}], normalize="none")
    K = bank.K
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for engine in ENGINES:
            fit_mklkit(engine, K, y[:300], K, y[:300])
        if EasyMKL is not None:
            fit_easymkl(EasyMKL, 0.1, K, y[:300], K, y[:300])


def limit_threads(n: int, torch_too: bool) -> None:
    """At most n threads for BLAS and OpenMP pools (threadpoolctl), numba and torch."""
    import numba
    import scipy.linalg  # noqa: F401 - load scipy's own BLAS before limiting it
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if torch_too:
        import torch

        torch.set_num_threads(n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000])
    ap.add_argument("--kernels", type=int, default=20, help="Gaussian kernels, widths 2 .. 40")
    ap.add_argument("--splits", type=int, default=1, help="training subsets (seeds 0, 1, ...)")
    ap.add_argument("--test", type=int, default=5000, help="points of the a9a test file")
    ap.add_argument("--engines", nargs="+", default=ENGINES)
    ap.add_argument(
        "--threads", type=int, default=None, help="limit BLAS, OpenMP (torch), numba and torch to this many threads"
    )
    ap.add_argument(
        "--easymkl-lams",
        type=float,
        nargs="+",
        default=[0.1],
        help="EasyMKL's lam values (0.1 is MKLpy 0.6's default; the ratio uses the first)",
    )
    args = ap.parse_args(argv)

    EasyMKL, why = _easymkl()
    if args.threads is not None:
        limit_threads(args.threads, EasyMKL is not None)
    if EasyMKL is None:
        print(f"NOTE: MKLpy is not importable ({why}); EasyMKL rows skipped")
    tr, te = load_builtin("a9a"), load_builtin("a9a_test")
    ytr, yte_all = np.asarray(tr.y, dtype=np.float64), np.asarray(te.y, dtype=np.float64)
    test_rows = np.sort(np.random.default_rng(12345).choice(te.n_samples, args.test, replace=False))
    Xte, yte = te.X[test_rows], yte_all[test_rows]
    widths = np.geomspace(2.0, 40.0, args.kernels).tolist()
    warm_up(EasyMKL, tr.X, ytr, widths)

    methods = [f"mklkit {e}" for e in args.engines]
    if EasyMKL is not None:
        methods += [f"easymkl lam={lam:g}" for lam in args.easymkl_lams]
    print(
        f"a9a, {args.kernels} Gaussian kernels (widths 2..40), test: {args.test} points of "
        f"a9a.t; {args.splits} split(s); threads: {args.threads or 'default'}; "
        "fit seconds median over splits, accuracy mean"
    )
    head = (
        f"{'N':>6} {'method':<20}{'fit s':>9}{'engine s':>10}{'ratio':>8}{'test acc':>10}"
        f"{'active':>8}{'C':>10}  {'picked':<10}status"
    )
    print(head)
    print("-" * len(head))
    for n in args.sizes:
        runs: dict[str, list[dict]] = {m: [] for m in methods}
        build = []
        for split in range(args.splits):
            rows = np.sort(np.random.default_rng(split).choice(tr.n_samples, n, replace=False))
            t0 = time.perf_counter()
            bank = KernelBank.build(tr.X[rows], [{"function": "rbf", "width": widths}], normalize="none")
            K, Kte = bank.K, bank.cross(Xte)  # (M, N, N) and (M, N_test, N), unit diagonal
            build.append(time.perf_counter() - t0)
            y = ytr[rows]
            # one untimed fit first: the first fit after the kernels are built pays for touching
            # fresh memory (1.4 s at N = 2,000 here, whichever engine comes first)
            fit_mklkit(args.engines[0], K, y, Kte, yte)
            for e in args.engines:
                runs[f"mklkit {e}"].append(fit_mklkit(e, K, y, Kte, yte))
            if EasyMKL is not None:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", module="MKLpy")
                    for lam in args.easymkl_lams:
                        runs[f"easymkl lam={lam:g}"].append(fit_easymkl(EasyMKL, lam, K, y, Kte, yte))
            del bank, K, Kte
        secs = {m: statistics.median(r["s"] for r in runs[m]) for m in methods}
        acc = {m: float(np.mean([r["acc"] for r in runs[m]])) for m in methods}
        base = secs[methods[len(args.engines)]] if EasyMKL is not None else float("nan")
        for m in methods:
            last = runs[m][-1]
            engine_s = statistics.median(r["engine_s"] for r in runs[m])
            C = "" if np.isnan(last["C"]) else f"{last['C']:.4g}"
            status = "; ".join(sorted({r["status"] for r in runs[m]})) if last["status"] else ""
            print(
                f"{n:>6} {m:<20}{secs[m]:>9.2f}{engine_s:>10.2f}{secs[m] / base:>8.2f}"
                f"{100 * acc[m]:>9.2f}%{last['active']:>8}{C:>10}  {last['picked']:<10}{status}"
            )
        print(f"{'':>6} kernels computed in {statistics.median(build):.1f} s (not in any time)")
        if "mklkit auto" in secs:
            fixed = [m for m in methods if m.startswith("mklkit") and m != "mklkit auto"]
            if fixed:
                best = min(fixed, key=secs.get)
                print(
                    f"{'':>6} auto / fastest engine ({best.split()[1]}): "
                    f"{secs['mklkit auto'] / secs[best]:.2f} (target <= 1.2)"
                )
            if EasyMKL is not None:
                ez = methods[len(args.engines)]
                print(
                    f"{'':>6} auto / {ez}: {secs['mklkit auto'] / base:.2f} (target <= 0.5), "
                    f"accuracy {100 * (acc['mklkit auto'] - acc[ez]):+.2f} points"
                )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
