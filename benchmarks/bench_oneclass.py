"""One-class MKL against scikit-learn's ``OneClassSVM`` with each single Gaussian width, on novelty detection.

Protocol, per data set and random split (``--seeds``):

* ``wdbc`` (breast cancer): the inliers are the benign tumours, the outliers the malignant ones;
  ``ionosphere`` (its first two columns, constant or binary, left out): the inliers are the "good"
  returns (label +1), the outliers the "bad" ones.
* Training: a random 70 % of the inliers (no outlier is seen).  Test: the other 30 % of the inliers and
  half of the outliers (drawn at random).  Validation, for the rows that choose a parameter on labelled
  outliers: ``--folds`` (default 3) folds of the training inliers, each in turn with the other half of the
  outliers, fitted on the other folds; a candidate's score is its mean validation ROC AUC over the folds
  (``--folds 1``: the training inliers split once 70/30, fitted on the 70 %).
* Every method uses the same ``nu`` (``--nu``, default 0.1) and the same Gaussian widths
  :math:`\\sigma = s\\sqrt d`, :math:`s \\in \\{0.125, 0.25, 0.5, 1, 2\\}` on all (standardised) features,
  the widths of ``kernels="auto"`` (:func:`one_class_kernels`):

  - ``mkl default``: ``MKLOneClassSVM(nu=nu)``, its defaults (``kernels="auto"``: those 5 kernels;
    ``regularizer="auto"``: lq with q = 1.75);
  - ``mkl widths l1`` / ``lq1.25`` / ``lq1.5`` / ``unif``: ``MKLOneClassSVM`` on those 5 kernels with the
    ``l1`` regularizer (the sparse one-class MKL), lq with q = 1.25 and 1.5, the uniform combination;
  - ``mkl clfbank l1`` / ``lq``: on the classifiers' default bank (:func:`default_kernels`: 5 Gaussian widths
    with s = 0.25 … 4, 2 polynomial kernels, 3 Gaussian kernels on each feature) with ``l1`` and with the
    default lq;
  - ``ocsvm val``: ``OneClassSVM`` with the width of best validation ROC AUC (mean over the folds),
    refitted on all training inliers;
  - ``ocsvm oracle``: ``OneClassSVM`` with the width of best **test** ROC AUC (an optimistic bound).

  Each side choosing its own parameter the same way:

  - with labelled outliers (the validation folds above, the candidate of best mean validation ROC AUC
    refitted on all training inliers): ``ocsvm val`` (the 5 widths) against ``mkl val reg`` (the regularizer
    on the 5 Gaussian kernels: ``l1``, lq with q = 1.25, 1.75 (the default) and 4, ``uniform``) and
    ``mkl val widths`` (the widest width of the bank, 4 candidates: the widths up to s = 0.25, 0.5, 1 or 2,
    2 to 5 kernels, with the default regularizer; a bank of one width would be ``OneClassSVM``'s problem);
  - without outliers (inliers only, what a user without labels has): ``mkl default`` against
    ``ocsvm scale`` (scikit-learn's default ``gamma="scale"``, gamma = 1/(d Var(X)): sigma = sqrt(d/2) on
    standardised features, s = 0.71), ``ocsvm median`` (the median heuristic: sigma the median distance
    between the training inliers) and ``ocsvm kvar`` (of the 5 widths, the one maximising s2/(kbar + 1e-12),
    kbar and s2 the mean and variance of the off-diagonal kernel entries on the training inliers:
    Evangelista, Embrechts & Szymanski 2007, a kernel neither near the identity nor near all ones).

Reported: test ROC AUC (decision values against inlier/outlier) mean ± standard error over the splits, its
difference to ``ocsvm val`` on the same split (mean ± standard error: the paired comparison), the fraction
of test inliers predicted as outliers, the fit seconds (the validation fits included for ``ocsvm val`` and
``mkl val ...``; for ``ocsvm oracle`` the fits of every width), and for the rows that choose, how many splits
chose each candidate (the widths as s = sigma/sqrt(d)).

``--banks`` compares instead the default regularizer on several banks of Gaussian widths (paired test ROC AUC
differences to the classifiers' widths s = 0.25 ... 4; the widths one octave narrower, ``kernels="auto"``;
s = 0.25 ... 2; seven widths from 0.25 by sqrt(2); s = 0.177 ... 2.83; five geometric widths from the median
nearest-neighbour distance to the median distance between training inliers, and from half the one to twice the
other), with ``--sets wdbc ionosphere sonar pima`` (sonar and pima: the majority class as the inliers).

    python benchmarks/bench_oneclass.py                 # 20 splits, 3 validation folds, both sets
    python benchmarks/bench_oneclass.py --seeds 10 --folds 1   # one validation split per split
    python benchmarks/bench_oneclass.py --seeds 3 --nu 0.05
    python benchmarks/bench_oneclass.py --methods "mkl default" "mkl widths l1"
    python benchmarks/bench_oneclass.py --banks --sets wdbc ionosphere sonar pima

Needs only the runtime dependencies.  Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import Counter
from typing import Any

import numpy as np
from scipy.spatial.distance import pdist, squareform
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler
from sklearn.svm import OneClassSVM

from mklkit import MKLOneClassSVM
from mklkit.data import load_builtin
from mklkit.estimators import DEFAULT_ALL_WIDTH_FACTORS, default_kernels, one_class_kernels


#: Further sets for ``--banks`` (the majority class as the inliers: sonar's mines, pima's non-diabetic).
CHECK_SETS = ("sonar", "pima")


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and ``True`` for inliers."""
    ds = load_builtin(name)
    X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)
    if name == "wdbc":
        return X, y == -1  # benign
    if name == "ionosphere":
        return X[:, 2:], y == 1  # good returns
    if name in CHECK_SETS:  # the majority class as the inliers
        labels, counts = np.unique(y, return_counts=True)
        return X[:, X.std(axis=0) > 0], y == labels[np.argmax(counts)]
    raise ValueError(f"set must be one of wdbc, ionosphere, {', '.join(CHECK_SETS)}; got {name!r}")


def split(inlier: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training rows (inliers, in random order), test rows and the validation outliers (see the module's text)."""
    rng = np.random.default_rng(seed)
    ins, outs = rng.permutation(np.flatnonzero(inlier)), rng.permutation(np.flatnonzero(~inlier))
    n_tr, half = int(round(0.7 * ins.size)), outs.size // 2
    return ins[:n_tr], np.concatenate([ins[n_tr:], outs[:half]]), outs[half:]


def validation_folds(train: np.ndarray, outliers: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(fit rows, validation rows)`` of each fold: ``folds`` = 1, the training inliers split 70/30; more, each
    of ``folds`` parts of them in turn, fitted on the others; the validation rows hold ``outliers`` too."""
    if folds == 1:
        n_fit = int(round(0.7 * train.size))
        return [(train[:n_fit], np.concatenate([train[n_fit:], outliers]))]
    parts = np.array_split(train, folds)
    return [
        (np.concatenate([q for j, q in enumerate(parts) if j != i]), np.concatenate([p, outliers]))
        for i, p in enumerate(parts)
    ]


def widths(d: int) -> list[float]:
    """The Gaussian widths of ``kernels="auto"`` (:func:`one_class_kernels`) for ``d`` features."""
    return [float(w) for w in one_class_kernels(d)[0]["width"]]


def ocsvm(X_fit: np.ndarray, width: float | str, nu: float) -> OneClassSVM:
    """``OneClassSVM`` on the standardised ``X_fit`` with Gaussian width ``width`` (or a ``gamma`` string)."""
    scaler = StandardScaler().fit(X_fit)
    gamma = width if isinstance(width, str) else 1.0 / (2.0 * width**2)
    model = OneClassSVM(kernel="rbf", gamma=gamma, nu=nu).fit(scaler.transform(X_fit))
    model.scaler_ = scaler
    return model


def ocsvm_scores(model: OneClassSVM, X: np.ndarray) -> np.ndarray:
    return model.decision_function(model.scaler_.transform(X))


def mkl_methods(ws: list[float], X_train: np.ndarray | None = None) -> dict[str, tuple[Any, Any]]:
    """``{row: (kernels, regularizer)}`` of the one-class MKL rows (``X_train``: for the classifiers' bank)."""
    bank = [{"function": "rbf", "width": ws}]
    clf_bank = None if X_train is None else default_kernels(X_train.shape[1], X_train)
    return {
        "mkl default": ("auto", "auto"),
        "mkl widths l1": (bank, "l1"),
        "mkl widths lq1.25": (bank, {"name": "lq", "q": 1.25}),
        "mkl widths lq1.5": (bank, {"name": "lq", "q": 1.5}),
        "mkl widths unif": (bank, "uniform"),
        "mkl clfbank l1": (clf_bank, "l1"),
        "mkl clfbank lq": (clf_bank, "auto"),
    }


#: The regularizers of ``mkl val reg`` on the 5 Gaussian kernels.
VAL_REGULARIZERS: dict[str, Any] = {
    "l1": "l1",
    "lq1.25": {"name": "lq", "q": 1.25},
    "lq1.75": {"name": "lq", "q": 1.75},
    "lq4": {"name": "lq", "q": 4.0},
    "uniform": "uniform",
}


def mkl_val_candidates(ws: list[float], d: int) -> dict[str, dict[str, tuple[Any, Any]]]:
    """``{row: {candidate: (kernels, regularizer)}}`` of the rows that choose on the validation outliers:
    ``mkl val reg`` the regularizer on the 5 Gaussian kernels (5 candidates, as the 5 widths of ``ocsvm val``);
    ``mkl val widths`` the widest width of the bank (the widths up to it, at least 2, default regularizer: 4
    candidates)."""
    bank = [{"function": "rbf", "width": ws}]
    return {
        "mkl val reg": {k: (bank, r) for k, r in VAL_REGULARIZERS.items()},
        "mkl val widths": {
            f"s<={w / np.sqrt(d):.3g}": ([{"function": "rbf", "width": ws[: i + 1]}], "auto")
            for i, w in enumerate(ws)
            if i > 0
        },
    }


MKL_ROWS = (*mkl_methods([1.0]), *mkl_val_candidates([1.0], 1))


def median_width(X_fit: np.ndarray) -> float:
    """The median heuristic: the median distance between the standardised rows of ``X_fit``."""
    return float(np.median(pdist(StandardScaler().fit_transform(X_fit))))


def kernel_variance_width(X_fit: np.ndarray, ws: list[float]) -> float:
    r"""The width of ``ws`` maximising :math:`s^2/(\bar k + 10^{-12})` over the off-diagonal entries of the
    Gaussian kernel on the standardised rows of ``X_fit`` (Evangelista, Embrechts & Szymanski 2007): a kernel
    neither near the identity (narrow) nor near all ones (wide)."""
    sq = pdist(StandardScaler().fit_transform(X_fit), "sqeuclidean")
    crit = [np.var(k) / (np.mean(k) + 1e-12) for k in (np.exp(-sq / (2.0 * w**2)) for w in ws)]
    return ws[int(np.argmax(crit))]


def choose(candidates: list[Any], val_auc: Any) -> Any:
    """The candidate of best validation ROC AUC (the first of equals), ``val_auc(candidate)`` each."""
    aucs = [val_auc(c) for c in candidates]
    return candidates[int(np.argmax(aucs))]


def cv_auc(inlier: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]], scores: Any) -> float:
    """The mean over ``folds`` of the validation ROC AUC of ``scores(fit rows, validation rows)``."""
    return float(np.mean([roc_auc_score(inlier[v], scores(f, v)) for f, v in folds]))


def run_split(
    X: np.ndarray, inlier: np.ndarray, seed: int, nu: float, methods: tuple[str, ...] = MKL_ROWS, n_folds: int = 3
) -> dict[str, tuple[float, float, float, Any]]:
    """``{method: (test AUC, fraction of test inliers flagged, fit seconds, the parameter chosen or None)}``."""
    train, test, outliers = split(inlier, seed)
    folds = validation_folds(train, outliers, n_folds)
    y_test = inlier[test]
    ws = widths(X.shape[1])
    out: dict[str, tuple[float, float, float, Any]] = {}

    def record(name: str, scores: np.ndarray, seconds: float, choice: Any = None) -> None:
        flagged = float(np.mean(scores[y_test] < 0.0))
        out[name] = (float(roc_auc_score(y_test, scores)), flagged, seconds, choice)

    for name, (kernels, regularizer) in mkl_methods(ws, X[train]).items():
        if name not in methods:
            continue
        t0 = time.perf_counter()
        m = MKLOneClassSVM(kernels, nu=nu, regularizer=regularizer).fit(X[train])
        record(name, m.decision_function(X[test]), time.perf_counter() - t0)

    for name, candidates in mkl_val_candidates(ws, X.shape[1]).items():
        if name not in methods:
            continue

        def fit(rows: np.ndarray, key: str) -> MKLOneClassSVM:
            kernels, regularizer = candidates[key]
            return MKLOneClassSVM(kernels, nu=nu, regularizer=regularizer).fit(X[rows])

        t0 = time.perf_counter()
        key = choose(list(candidates), lambda k: cv_auc(inlier, folds, lambda f, v: fit(f, k).decision_function(X[v])))
        record(name, fit(train, key).decision_function(X[test]), time.perf_counter() - t0, key)

    t0 = time.perf_counter()
    best = choose(ws, lambda w: cv_auc(inlier, folds, lambda f, v: ocsvm_scores(ocsvm(X[f], w, nu), X[v])))
    s_of = lambda w: f"s={w / np.sqrt(X.shape[1]):.3g}"  # noqa: E731
    record("ocsvm val", ocsvm_scores(ocsvm(X[train], best, nu), X[test]), time.perf_counter() - t0, s_of(best))

    for name, pick in (
        ("ocsvm scale", lambda: "scale"),
        ("ocsvm median", lambda: median_width(X[train])),
        ("ocsvm kvar", lambda: kernel_variance_width(X[train], ws)),
    ):
        t0 = time.perf_counter()
        w = pick()
        model = ocsvm(X[train], w, nu)
        if isinstance(w, str):  # gamma="scale": 1/(d Var(X)) on the standardised rows, sigma = sqrt(1/(2 gamma))
            w = float(np.sqrt(0.5 * X.shape[1] * model.scaler_.transform(X[train]).var()))
        label = s_of(w) if name != "ocsvm median" else f"s={w / np.sqrt(X.shape[1]):.1f}"  # a width off the grid
        record(name, ocsvm_scores(model, X[test]), time.perf_counter() - t0, label)

    t0 = time.perf_counter()
    per_width = [ocsvm_scores(ocsvm(X[train], w, nu), X[test]) for w in ws]
    seconds = time.perf_counter() - t0
    aucs = [roc_auc_score(y_test, s) for s in per_width]
    record("ocsvm oracle", per_width[int(np.argmax(aucs))], seconds)
    return out


def distance_widths(X_fit: np.ndarray, lo: float, hi: float, n: int = 5) -> list[float]:
    """``n`` geometric Gaussian widths from ``lo`` times the median nearest-neighbour distance to ``hi`` times the
    median distance between the standardised rows of ``X_fit``."""
    Z = StandardScaler().fit_transform(X_fit)
    D = squareform(pdist(Z))
    np.fill_diagonal(D, np.inf)
    return [float(w) for w in np.geomspace(lo * np.median(D.min(axis=1)), hi * np.median(pdist(Z)), n)]


def bank_variants(X_fit: np.ndarray) -> dict[str, list[float]]:
    """``{name: widths}`` of the one-class banks compared by ``--banks`` (the first: the classifiers' widths)."""
    d = X_fit.shape[1]
    fixed = {
        "s=0.25..4 (clf)": DEFAULT_ALL_WIDTH_FACTORS,
        "s=0.125..2 (auto)": (0.125, 0.25, 0.5, 1.0, 2.0),
        "s=0.25..2": (0.25, 0.5, 1.0, 2.0),
        "s=0.25..2 by r2": tuple(0.25 * np.sqrt(2.0) ** k for k in range(7)),
        "s=0.177..2.83": tuple(0.125 * np.sqrt(2.0) * 2.0**k for k in range(5)),
    }
    out = {k: [float(f * np.sqrt(d)) for f in v] for k, v in fixed.items()}
    out["1nn..median"] = distance_widths(X_fit, 1.0, 1.0)
    out["1nn/2..2 median"] = distance_widths(X_fit, 0.5, 2.0)
    return out


def compare_banks(sets: list[str], seeds: int, nu: float) -> None:
    """Test ROC AUC of the default regularizer on each bank of :func:`bank_variants`, and its paired difference to
    the classifiers' widths."""
    print(f"nu = {nu}, {seeds} splits, lq q = 1.75; test ROC AUC mean ± s.e., paired difference to s=0.25..4")
    for name in sets:
        X, inlier = load(name)
        aucs: dict[str, list[float]] = {}
        for seed in range(seeds):
            train, test, _ = split(inlier, seed)
            for bank, ws in bank_variants(X[train]).items():
                m = MKLOneClassSVM([{"function": "rbf", "width": ws}], nu=nu).fit(X[train])
                aucs.setdefault(bank, []).append(roc_auc_score(inlier[test], m.decision_function(X[test])))
        ref = np.array(aucs["s=0.25..4 (clf)"])
        for bank, a in aucs.items():
            a = np.array(a)
            print(f"{name:<11}{bank:<19}{mean_se(a)[1:]:>17}{mean_se(a - ref):>19}")


def mean_se(a: np.ndarray) -> str:
    """``mean ± standard error`` (signed)."""
    se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
    return f"{a.mean():>+.4f} ± {se:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["wdbc", "ionosphere"])
    parser.add_argument("--seeds", type=int, default=20, help="number of random splits")
    parser.add_argument(
        "--folds", type=int, default=3, help="validation folds of the training inliers (1: one 70/30 split)"
    )
    parser.add_argument("--nu", type=float, default=0.1)
    parser.add_argument("--methods", nargs="+", default=list(MKL_ROWS), help="one-class MKL rows to run")
    parser.add_argument("--banks", action="store_true", help="compare the one-class banks instead (docs/one_class.md)")
    args = parser.parse_args()
    if args.folds < 1:
        parser.error(f"--folds must be an integer >= 1; got {args.folds}")
    warnings.simplefilter("ignore", UserWarning)
    if args.banks:
        compare_banks(args.sets, args.seeds, args.nu)
        return
    print(
        f"nu = {args.nu}, {args.seeds} splits, {args.folds} validation folds; test ROC AUC mean ± s.e., its paired difference to ocsvm val "
        "mean ± s.e., test inliers flagged, fit seconds"
    )
    print(f"{'set':<11}{'method':<19}{'ROC AUC':>17}{'- ocsvm val':>19}{'flagged':>9}{'fit s':>7}  chosen (splits)")

    for name in args.sets:
        X, inlier = load(name)
        rows = [run_split(X, inlier, seed, args.nu, tuple(args.methods), args.folds) for seed in range(args.seeds)]
        ref = np.array([r["ocsvm val"][0] for r in rows])
        for method in rows[0]:
            auc, flagged, sec = (np.array([r[method][k] for r in rows]) for k in range(3))
            chosen = Counter(r[method][3] for r in rows if r[method][3] is not None)
            picks = ", ".join(f"{c} {k}" for k, c in sorted(chosen.items(), key=lambda kc: -kc[1]))
            print(
                f"{name:<11}{method:<19}{mean_se(auc)[1:]:>17}{mean_se(auc - ref):>19}{flagged.mean():>9.3f}"
                f"{sec.mean():>7.2f}  {picks}"
            )


if __name__ == "__main__":
    main()
