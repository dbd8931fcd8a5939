"""splice (DNA, 60 positions coded A=1, C=2, G=3, T=4): string kernel banks against numeric-feature models.

Per split (stratified, ``--train`` training points, the rest tested; ``--splits`` random splits), side by
side on the same splits:

* ``spectrum k=1..6``: ``MKLClassifier`` with spectrum kernels of k = 1..6 on the whole sequence (6 kernels;
  the codes read as given: standardisation is off for string kernels);
* ``spectrum k=1..6 x windows``: the same kernels on the whole sequence and on each of 6 windows of
  10 positions (42 kernels: which region and which k-mer length matter is what MKL learns);
* ``subsequences p=1..3 x windows`` (unless ``--no-subsequences``): fixed-length subsequence kernels of
  p = 1..3 on the 6 windows (18 kernels);
* ``weighted_degree d=3``, ``weighted_degree d=10``: one weighted degree kernel (positional k-mers of
  lengths 1..d) on the whole sequence; ``weighted_degree d=1..10``: one per degree (10 kernels: MKL
  chooses the k-mer lengths); ``weighted_degree d=3,10 x windows``: degrees 3 and 10 on the whole sequence and on each of the 6 windows
  (14 kernels); ``weighted_degree_shift d=10 S=2``: one kernel with shifts up to 2 positions;
* ``default numeric bank``: ``MKLClassifier()`` at its defaults on the codes as numbers;
* ``SVC() raw`` and ``SVC() one-hot``: scikit-learn's ``SVC`` at its defaults on the codes as numbers
  (standardised) and on their one-hot encoding (240 columns).

Prints accuracy (mean ± standard error over the splits), fit seconds (mean) and the mean kernel weights
of the string kernel banks.

    python benchmarks/bench_splice_spectrum.py --splits 5
    python benchmarks/bench_splice_spectrum.py --quick        # smoke test: 1 split, 200 training points

Needs only the runtime dependencies.  Writes nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from mklkit import MKLClassifier
from mklkit.data import load_builtin

KS = [1, 2, 3, 4, 5, 6]
WINDOWS = [list(range(s, s + 10)) for s in range(0, 60, 10)]


def banks(subsequences: bool) -> dict[str, list[dict]]:
    out = {
        "spectrum k=1..6": [{"function": "spectrum", "k": KS}],
        "spectrum k=1..6 x windows": [
            {"function": "spectrum", "k": KS},
            {"function": "spectrum", "k": KS, "features": WINDOWS},
        ],
        "weighted_degree d=3": [{"function": "weighted_degree", "degree": 3}],
        "weighted_degree d=10": [{"function": "weighted_degree", "degree": 10}],
        "weighted_degree d=1..10": [{"function": "weighted_degree", "degree": list(range(1, 11))}],
        "weighted_degree d=3,10 x windows": [
            {"function": "weighted_degree", "degree": [3, 10]},
            {"function": "weighted_degree", "degree": [3, 10], "features": WINDOWS},
        ],
        "weighted_degree_shift d=10 S=2": [{"function": "weighted_degree_shift", "degree": 10, "shift": 2}],
    }
    if subsequences:
        out["subsequences p=1..3 x windows"] = [{"function": "subsequences", "p": [1, 2, 3], "features": WINDOWS}]
    return out


def splits(y: np.ndarray, n_train: int, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedShuffleSplit

    sss = StratifiedShuffleSplit(n_splits=n_splits, train_size=n_train, random_state=0)
    return list(sss.split(np.zeros(len(y)), y))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="1 split of 200 training points")
    ap.add_argument("--no-subsequences", action="store_true", help="leave out the subsequence bank")
    args = ap.parse_args(argv)
    if args.quick:
        args.splits, args.train = 1, 200
    warnings.simplefilter("ignore")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from sklearn.svm import SVC

    ds = load_builtin("splice")
    X, y = ds.X, ds.y
    print(
        f"splice: {X.shape[0]} sequences of {X.shape[1]} positions; {args.splits} stratified splits, "
        f"{args.train} training points, {X.shape[0] - args.train} tested"
    )
    models = {name: (lambda b=b: MKLClassifier(kernels=b)) for name, b in banks(not args.no_subsequences).items()}
    models["default numeric bank"] = lambda: MKLClassifier()
    models["SVC() raw"] = lambda: make_pipeline(StandardScaler(), SVC())
    models["SVC() one-hot"] = lambda: make_pipeline(OneHotEncoder(handle_unknown="ignore"), SVC())
    acc = {k: [] for k in models}
    secs = {k: [] for k in models}
    weights: dict[str, list[np.ndarray]] = {}
    labels: dict[str, list[str]] = {}
    for s, (tr, te) in enumerate(splits(y, args.train, args.splits)):
        for name, make in models.items():
            model = make()
            t0 = time.perf_counter()
            model.fit(X[tr], y[tr])
            secs[name].append(time.perf_counter() - t0)
            acc[name].append(float(model.score(X[te], y[te])))
            if name.startswith(("spectrum", "weighted_degree")):
                weights.setdefault(name, []).append(np.asarray(model.kernel_weights_).ravel())
                labels[name] = list(model.kernel_names_) if hasattr(model, "kernel_names_") else []
            print(f"  split {s}: {name:32s} {100 * acc[name][-1]:6.2f} %  {secs[name][-1]:7.2f} s", flush=True)
    print()
    print(f"| model | accuracy % (mean ± s.e., {args.splits} splits) | fit s |")
    print("| --- | --- | --- |")
    for name in models:
        a = 100 * np.asarray(acc[name])
        se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
        print(f"| {name} | {a.mean():.2f} ± {se:.2f} | {np.mean(secs[name]):.2f} |")
    for name, ws in weights.items():
        w = np.mean(ws, axis=0)
        names = labels.get(name) or [f"kernel {m}" for m in range(w.size)]
        top = np.argsort(-w)[:8]
        shown = ", ".join(f"{names[m]} {w[m]:.3f}" for m in top)
        print(f"\nmean kernel weights, {name} ({w.size} kernels; largest {len(top)}): {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
