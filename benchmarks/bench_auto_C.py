"""``C="auto"`` below 2,500 rows (3-fold cross-validation of the ``"scale"`` rule's C and 0.316 and 0.1 times
it) against the rule alone, side by side on the same splits.

* classifiers: ``MKLClassifier(C="scale")`` and ``MKLClassifier()`` (``C="auto"``) with the default bank on the
  bundled UCI sets (``--data``), scored by test accuracy;
* regressors: ``MKLRegressor(C="scale", loss=...)`` (what ``C="auto"`` is for a regressor below 2,500 rows) and
  ``MKLRegressor(C="path", loss=...)`` (the same cross-validation) on scikit-learn's diabetes data with its raw
  targets (``--losses``), scored by test :math:`R^2`.

Splits: ``--splits`` random 70/30 splits (stratified for the classifiers; seeds 0, 1, ...).  Printed per set
and method: the mean test score and its standard error over the splits, the mean paired difference from the
rule and its standard error, the median fit seconds, and how often each multiple of the rule was chosen.
Nothing is written.

    python benchmarks/bench_auto_C.py
    python benchmarks/bench_auto_C.py --data sonar pima --splits 5 --losses squared
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

from mklkit import MKLClassifier, MKLRegressor
from mklkit.data import load_builtin

UCI = ["sonar", "ionosphere", "liver", "pima", "wpbc", "wdbc", "wbc", "australian"]


def _fit(make, X_tr, y_tr, X_te, y_te) -> tuple[float, float, float | None]:
    """Test score, fit seconds and the chosen multiple of the rule (``None`` without a choice)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make().fit(X_tr, y_tr)
    secs = time.perf_counter() - t0
    sel = getattr(est, "C_selection_", None)
    ratio = None if sel is None else float(sel.ratios[sel.chosen])
    return float(est.score(X_te, y_te)), secs, ratio


def _report(name: str, rows: dict[str, list[tuple[float, float, float | None]]]) -> None:
    base = np.array([r[0] for r in rows["scale"]])
    for method, res in rows.items():
        score = np.array([r[0] for r in res])
        se = score.std(ddof=1) / np.sqrt(score.size) if score.size > 1 else 0.0
        diff = score - base
        dse = diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else 0.0
        chosen = collections.Counter(f"{r[2]:.3g}" for r in res if r[2] is not None)
        picks = ", ".join(f"{k} x {v}" for k, v in sorted(chosen.items(), key=lambda kv: -float(kv[0])))
        print(
            f"{name:<28}{method:<8}{score.mean():>9.4f} +-{se:.4f}{diff.mean():>+10.4f} +-{dse:.4f}"
            f"{statistics.median(r[1] for r in res):>9.3f}  {picks}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="*", default=UCI, help="bundled classification sets")
    ap.add_argument("--losses", nargs="*", default=["eps_insensitive", "squared"], help="regression losses")
    ap.add_argument("--splits", type=int, default=20)
    args = ap.parse_args(argv)
    if args.splits < 2:
        ap.error("--splits must be at least 2 (standard errors)")
    print(
        f"{args.splits} random 70/30 splits; score mean +- standard error, its paired difference from the rule, "
        "median fit s, the multiples of the rule chosen"
    )
    print(f"{'set':<28}{'C':<8}{'score':>9}{'':>8}{'vs scale':>10}{'':>8}{'fit s':>9}  chosen")
    for name in args.data:
        ds = load_builtin(name)
        X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
        rows: dict[str, list] = {"scale": [], "auto": []}
        for split in range(args.splits):
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, stratify=y, random_state=split)
            rows["scale"].append(_fit(lambda: MKLClassifier(C="scale"), X_tr, y_tr, X_te, y_te))
            rows["auto"].append(_fit(lambda: MKLClassifier(), X_tr, y_tr, X_te, y_te))
        _report(name, rows)
    X, y = load_diabetes(return_X_y=True)
    for loss in args.losses:
        rows = {"scale": [], "path": []}
        for split in range(args.splits):
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=split)
            for C in rows:
                rows[C].append(_fit(lambda: MKLRegressor(loss=loss, C=C), X_tr, y_tr, X_te, y_te))
        _report(f"diabetes ({loss})", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
