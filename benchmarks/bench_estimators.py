"""MKLClassifier against a uniform-kernel SVM and MKLpy on the bundled UCI sets.

Protocol: stratified 5-fold cross-validation (shuffled, seed 0); per fold the
features are standardized with training statistics and the default kernel
bank (``mklkit.estimators.default_kernels``, 7 + 3d kernels, unit trace) is
built once on the training part.  Methods:

* ``mklkit``: ``MKLClassifier()`` with all defaults (logistic loss, elastic
  net, C = 0.05), fitted end to end on the raw features (it builds the same
  bank itself);
* ``svc_avg``: scikit-learn ``SVC(kernel="precomputed", C=1)`` on the uniform
  average of the same kernels, rescaled to unit mean diagonal (``N * mean_m
  K_m``), so that C = 1 has its usual meaning;
* ``svc_avg_cv``: the same with C chosen from {0.1, 1, 10, 100} by an inner
  3-fold ``GridSearchCV`` (its time includes the search);
* ``easymkl`` and ``gram`` (if MKLpy is importable): MKLpy's
  ``EasyMKL(lam=0.1)`` (its default KOMD learner) and ``GRAM(max_iter=...)``
  on the same kernels, rescaled like for the SVC.

Time: median seconds per fold of one fit, *including* one bank build for
every method (``mklkit`` builds its own; the others get the build time of the
shared bank added).  Accuracy: mean and standard deviation over the folds.

Run::

    python benchmarks/bench_estimators.py
    python benchmarks/bench_estimators.py --data sonar liver --methods mklkit svc_avg

MKLpy needs PyTorch; install it into a separate environment (for example a
venv with CPU-only torch, ``cvxopt`` and ``MKLpy``) and run this script with
that interpreter.  Without MKLpy, its columns are skipped with a note.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from mklkit import ConvergenceWarning, MKLClassifier
from mklkit.data import Standardizer, load_builtin
from mklkit.estimators import default_kernels
from mklkit.kernels import KernelBank

DATASETS = ["sonar", "ionosphere", "liver", "pima", "wdbc", "australian"]
METHODS = ["mklkit", "svc_avg", "svc_avg_cv", "easymkl", "gram"]


def _mklpy():
    try:
        import torch  # noqa: F401
        from MKLpy.algorithms import GRAM, EasyMKL
    except ImportError as exc:
        return None, str(exc)
    return (EasyMKL, GRAM), ""


def run_dataset(name: str, methods: list[str], folds: int, gram_iter: int):
    ds = load_builtin(name)
    X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
    mklpy, _ = _mklpy()
    acc: dict[str, list[float]] = {m: [] for m in methods}
    secs: dict[str, list[float]] = {m: [] for m in methods}
    failures: dict[str, list[str]] = {m: [] for m in methods}
    n_kernels = n_active = None
    active = []
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    for tr, te in cv.split(X, y):
        sc = Standardizer().fit(X[tr])
        A, B = sc.transform(X[tr]), sc.transform(X[te])
        t0 = time.perf_counter()
        bank = KernelBank.build(A, default_kernels(X.shape[1]), normalize="trace")
        Kte = bank.cross(B)
        bank_s = time.perf_counter() - t0
        N = len(tr)
        n_kernels = bank.n_kernels
        Kavg_tr = N * bank.K.mean(axis=0)
        Kavg_te = N * Kte.mean(axis=0)
        for m in methods:
            if m == "mklkit":
                t0 = time.perf_counter()
                clf = MKLClassifier().fit(X[tr], y[tr])
                secs[m].append(time.perf_counter() - t0)
                acc[m].append(clf.score(X[te], y[te]))
                active.append(clf.active_kernels_.size)
            elif m == "svc_avg":
                t0 = time.perf_counter()
                svc = SVC(kernel="precomputed", C=1.0).fit(Kavg_tr, y[tr])
                secs[m].append(time.perf_counter() - t0 + bank_s)
                acc[m].append(float(np.mean(svc.predict(Kavg_te) == y[te])))
            elif m == "svc_avg_cv":
                t0 = time.perf_counter()
                gs = GridSearchCV(SVC(kernel="precomputed"), {"C": [0.1, 1, 10, 100]}, cv=3)
                gs.fit(Kavg_tr, y[tr])
                secs[m].append(time.perf_counter() - t0 + bank_s)
                acc[m].append(float(np.mean(gs.predict(Kavg_te) == y[te])))
            elif m in ("easymkl", "gram") and mklpy is not None:
                import torch

                EasyMKL, GRAM = mklpy
                KL = [torch.from_numpy(N * bank.K[k]) for k in range(bank.n_kernels)]
                KLte = [torch.from_numpy(N * Kte[k]) for k in range(bank.n_kernels)]
                est = EasyMKL(lam=0.1) if m == "easymkl" else GRAM(max_iter=gram_iter)
                t0 = time.perf_counter()
                try:
                    est.fit(KL, torch.from_numpy(y[tr]))
                    pred = np.asarray(est.predict(KLte), dtype=np.float64)
                except Exception as exc:  # noqa: BLE001 - a failing baseline is reported, not fatal
                    failures[m].append(f"{type(exc).__name__}: {exc}")
                    continue
                secs[m].append(time.perf_counter() - t0 + bank_s)
                acc[m].append(float(np.mean(pred == y[te])))
        del bank, Kte
    n_active = int(round(statistics.median(active))) if active else None
    return X.shape, n_kernels, n_active, acc, secs, failures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", default=DATASETS)
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument(
        "--gram-iter", type=int, default=100, help="GRAM's max_iter (MKLpy's default 1000 takes minutes per fold)"
    )
    args = ap.parse_args()
    methods = list(args.methods)
    mklpy, why = _mklpy()
    if mklpy is None:
        dropped = [m for m in methods if m in ("easymkl", "gram")]
        if dropped:
            print(f"NOTE: MKLpy is not importable ({why}); skipped: {', '.join(dropped)}")
        methods = [m for m in methods if m not in ("easymkl", "gram")]
    print(
        f"{args.folds}-fold stratified CV (seed 0); accuracy mean (std) in %; time: median "
        "seconds per fit, one bank build included"
    )
    head = f"{'data':<11}{'N':>5}{'d':>4}{'M':>6}{'act':>6}" + "".join(f"{m + ' acc':>17}{'s':>7}" for m in methods)
    print(head)
    print("-" * len(head))
    means = {m: [] for m in methods}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", module="MKLpy")  # torch copy-construct notices
        for name in args.data:
            (n, d), M, act, acc, secs, failures = run_dataset(name, methods, args.folds, args.gram_iter)
            row = f"{name:<11}{n:>5}{d:>4}{M:>6}{act if act is not None else '-':>6}"
            notes = []
            for m in methods:
                if not acc[m]:
                    row += f"{'failed':>17}{'-':>7}"
                    means[m].append(np.nan)
                else:
                    a = 100 * np.asarray(acc[m])
                    means[m].append(a.mean() if not failures[m] else np.nan)
                    mark = "*" if failures[m] else " "
                    row += f"{a.mean():>10.1f}{mark}({a.std():4.1f}){statistics.median(secs[m]):>7.2f}"
                if failures[m]:
                    notes.append(
                        f"  * {m}: failed on {len(failures[m])} of {args.folds} folds "
                        f"({failures[m][0][:80]}); accuracy over the others"
                    )
            print(row, flush=True)
            for note in notes:
                print(note, flush=True)
    row = f"{'mean':<11}{'':>21}"
    for m in methods:
        mean = np.mean(means[m])
        row += f"{mean:>17.1f}{'':>7}" if np.isfinite(mean) else f"{'-':>17}{'':>7}"
    print(row)
    print("mean: over the data sets, where a method ran on every fold of every set.")
    print("act: median number of kernels the mklkit model uses (non-zero blocks).")


if __name__ == "__main__":
    main()
