"""MKLClassifier at its defaults against scikit-learn's SVC, called the way a user calls it.

Methods, side by side on the same splits:

* ``svc``: ``SVC()`` on the data as loaded (no scaling; sparse CSR for the LIBSVM sets);
* ``svc_grid``: ``GridSearchCV(SVC(), {"gamma": [0.1, 0.3, 1, 3] x g, "C": [0.1, 1, 10, 100]},
  cv=3)`` on the same data, ``g`` = SVC's own ``gamma="scale"`` (1 / (d Var X)); its time
  includes the search and the refit;
* ``mkl``: ``MKLClassifier()`` with every parameter at its default;
* ``mkl_path``: ``MKLClassifier(C="path")``: C chosen on held-out rows along a
  warm-started path inside ``fit`` (:mod:`mklkit.pipeline.heldout`);
* ``uniform``: ``MKLClassifier(regularizer="uniform")``: the same default bank
  with equal weights (the baseline a learned weighting must beat);
* ``mkl_l1``, ``mkl_l1_path`` (only when asked for): the block-l1 regularizer
  (the sparsest weights) at ``C="auto"`` and ``C="path"``;
* ``mkl_3d`` (only when asked for): ``MKLClassifier(kernels=default_kernels(d))``, the
  default bank without the features' kinds (three Gaussians on every feature, indicators
  and constants too: 7 + 3d kernels);
* ``mkl_all`` (only when asked for): the default bank's kernels on all features only
  (its Gaussians and polynomials, without the kernels of single features): what the
  single-feature kernels add or cost on each set.

Splits (``--splits`` of them): stratified shuffles (seed 0), 70 % training / 30 % test,
for the UCI and IDA sets and ``digits`` (scikit-learn's 8 x 8 digits, 10 classes); a9a's own test file; w8a 80/20 (``train_test_split``, seeds 0..); ``classif20k``
(scikit-learn's ``make_classification``: 20,000 points, 30 features of which 10
informative and 10 redundant, 3 clusters per class; 15,000 / 5,000). ``--max-train n``
subsamples the training part (the first n rows of the shuffle).

Printed per set: accuracy (mean over the splits, and the binomial standard
error of the mean test accuracy), median fit seconds, each method's time
as a ratio to ``svc_grid`` and to ``svc``, and the peak resident memory of
this process during the fit (the largest over the splits; Linux's ``VmHWM``,
reset before each fit: the data as loaded are in it, nothing else is held
between fits).  Nothing is written.

    python benchmarks/bench_vs_svc.py
    python benchmarks/bench_vs_svc.py --data sonar liver --splits 5
    python benchmarks/bench_vs_svc.py --data twonorm --methods svc mkl mkl_path --max-train 3000
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit, train_test_split
from sklearn.svm import SVC

from mklkit import MKLClassifier
from mklkit.data import load_builtin
from mklkit.estimators import default_kernels

UCI = ["sonar", "ionosphere", "liver", "pima", "wpbc", "wdbc", "wbc", "australian"]
IDA = ["twonorm", "ringnorm", "waveform", "splice"]
DATASETS = UCI + IDA
METHODS = ["svc", "svc_grid", "mkl", "mkl_path", "uniform"]
#: also available: the block-l1 regularizer at C="auto" and C="path" (how sparse the defaults could be),
#: the default bank without the features' kinds, and its kernels on all features alone
EXTRA_METHODS = ["mkl_l1", "mkl_l1_path", "mkl_3d", "mkl_all"]


def fit_method(method: str, X: Any, y: np.ndarray) -> Any:
    if method == "svc":
        return SVC().fit(X, y)
    if method == "svc_grid":
        Xd = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        scale = 1.0 / (X.shape[1] * float(Xd.var()))
        grid = GridSearchCV(
            SVC(), {"gamma": [scale * f for f in (0.1, 0.3, 1.0, 3.0)], "C": [0.1, 1.0, 10.0, 100.0]}, cv=3
        )
        return grid.fit(X, y)
    if method == "mkl":
        return MKLClassifier().fit(X, y)
    if method == "mkl_path":
        return MKLClassifier(C="path").fit(X, y)
    if method == "uniform":
        return MKLClassifier(regularizer="uniform").fit(X, y)
    if method == "mkl_l1":  # the sparsest regularizer, beside the default elastic net
        return MKLClassifier(regularizer="l1").fit(X, y)
    if method == "mkl_l1_path":
        return MKLClassifier(regularizer="l1", C="path").fit(X, y)
    if method == "mkl_3d":
        return MKLClassifier(kernels=default_kernels(X.shape[1])).fit(X, y)
    if method == "mkl_all":
        entries = [e for e in default_kernels(X.shape[1], X) if e["features"] == "all"]
        return MKLClassifier(kernels=entries).fit(X, y)
    raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS + EXTRA_METHODS)}")


def _reset_peak() -> bool:
    """Start a new peak of this process's resident memory (Linux ``clear_refs``); False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_bytes() -> float:
    """This process's peak resident memory since the last reset (``VmHWM``), or NaN."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return math.nan


def splits(name: str, n_splits: int, max_train: int | None) -> list[tuple[Any, np.ndarray, Any, np.ndarray]]:
    if name == "a9a":
        tr, te = load_builtin("a9a"), load_builtin("a9a_test")
        out = [(tr.X, np.asarray(tr.y), te.X, np.asarray(te.y))]
    elif name in ("w8a", "classif20k"):  # train_test_split with seed s: bench_large_n's w8a split at s = 0
        if name == "classif20k":  # scikit-learn's generator: 30 features, 10 informative, 10 redundant
            from sklearn.datasets import make_classification

            X, y = make_classification(
                n_samples=20000, n_features=30, n_informative=10, n_redundant=10, n_clusters_per_class=3, random_state=0
            )
            test_size: float = 5000
        else:
            ds = load_builtin(name)
            X, y, test_size = ds.X, np.asarray(ds.y), 0.2
        out = []
        for s in range(n_splits):
            a, b, ya, yb = train_test_split(X, y, test_size=test_size, stratify=y, random_state=s)
            out.append((a, ya, b, yb))
    else:
        if name == "digits":  # scikit-learn's bundled 8 x 8 digits: 10 classes (one-vs-rest in MKLClassifier)
            from sklearn.datasets import load_digits

            X, y = load_digits(return_X_y=True)
            X = X.astype(np.float64)
        else:
            ds = load_builtin(name)
            X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
        sss = StratifiedShuffleSplit(n_splits, test_size=0.3, random_state=0)
        out = [(X[tr], y[tr], X[te], y[te]) for tr, te in sss.split(X, y)]
    if max_train:
        out = [(a[:max_train], ya[:max_train], b, yb) for a, ya, b, yb in out]
    return out


def run(
    name: str, methods: list[str], n_splits: int, max_train: int | None, say: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    acc: dict[str, list[float]] = {m: [] for m in methods}
    secs: dict[str, list[float]] = {m: [] for m in methods}
    peak: dict[str, list[float]] = {m: [] for m in methods}
    extra: dict[str, list[str]] = {m: [] for m in methods}
    n_test = n_train = 0
    for i, (Xa, ya, Xb, yb) in enumerate(splits(name, n_splits, max_train)):
        n_train, n_test = Xa.shape[0], Xb.shape[0]
        for m in methods:
            gc.collect()
            measured = _reset_peak()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = fit_method(m, Xa, ya)
            secs[m].append(time.perf_counter() - t0)
            peak[m].append(_peak_bytes() if measured else math.nan)
            acc[m].append(float(est.score(Xb, yb)))
            if m.startswith("mkl"):
                ratio = float(np.median(np.asarray(est.C_) / np.asarray(est.C_max_)))  # per binary problem
                extra[m].append(f"C/Cmax {ratio:.1e}, {len(est.active_kernels_)} of {len(est.kernel_names_)} kernels")
            elif m == "svc_grid":
                extra[m].append(f"gamma {est.best_params_['gamma']:.3g} C {est.best_params_['C']:g}")
            say(
                f"  {name} split {i}: {m:9s} acc {acc[m][-1]:.4f} in {secs[m][-1]:7.2f} s, "
                f"peak {peak[m][-1] / 2**30:.2f} GiB {extra[m][-1] if extra[m] else ''}"
            )
            del est
    out = {}
    for m in methods:
        a = statistics.fmean(acc[m])
        se = math.sqrt(max(a * (1 - a), 1e-12) / (n_test * len(acc[m])))
        out[m] = {
            "acc": a,
            "se": se,
            "time": statistics.median(secs[m]),
            "peak": max(peak[m]),
            "n_train": n_train,
            "n_test": n_test,
            "splits": len(acc[m]),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data",
        nargs="+",
        default=DATASETS,
        help=f"data sets (default: {' '.join(DATASETS)}; also a9a, w8a, classif20k, digits)",
    )
    p.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS + EXTRA_METHODS)
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--max-train", type=int, default=None)
    p.add_argument("--quiet", action="store_true", help="only the table")
    args = p.parse_args(argv)

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    rows = {name: run(name, args.methods, args.splits, args.max_train, say) for name in args.data}
    head = "| data (train/test, splits) | " + " | ".join(args.methods) + " |"
    print(head)
    print("|---|" + "---|" * len(args.methods))
    for name, res in rows.items():
        r0 = next(iter(res.values()))
        cells = []
        for m in args.methods:
            r = res[m]
            ratio = ""
            if "svc_grid" in res and m != "svc_grid":
                ratio = f", {r['time'] / res['svc_grid']['time']:.2f}x grid"
            if "svc" in res and m not in ("svc", "svc_grid"):
                ratio += f", {r['time'] / res['svc']['time']:.2f}x svc"
            cells.append(f"{r['acc']:.4f} ± {r['se']:.4f} ({r['time']:.2f} s{ratio}; {r['peak'] / 2**30:.2f} GiB)")
        print(f"| {name} ({r0['n_train']}/{r0['n_test']}, {r0['splits']}) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
