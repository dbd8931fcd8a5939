"""Joint multiclass MKL against one-vs-rest and one-vs-one, side by side in one run.

``MKLClassifier`` with its defaults (``kernels="auto"``, logistic/multinomial loss, elastic net,
``C="auto"``) and ``multiclass`` = ``joint``, ``ovr`` and ``ovo``, on the same stratified splits
(``--splits``, test part ``--test-size``) of:

* ``digits`` (``sklearn.datasets.load_digits``: 1797 images, 64 features, 10 classes);
* ``wine`` (``sklearn.datasets.load_wine``: 178 wines, 13 features, 3 classes);
* ``waveform`` (UCI "Waveform Database Generator (Version 1)", 5000 points, 21 features, 3 classes):
  the three-class file, ``--waveform PATH`` (22 numbers per point, the class last, whitespace
  separated; the bundled ``waveform.csv.gz`` holds the same points binarised, class 0 against the
  rest).  Without the file the set is left out.

Per set and mode (after one fit per mode on wine, so that numba has compiled before any timing): accuracy
(mean ± standard error over the splits), fit seconds (mean over the splits; a fit under
:data:`SHORT` seconds is repeated, :data:`REPEATS` times at most, and timed by its fastest repeat, as
``timeit`` does: on a shared machine one 20 ms fit is mostly the noise of other processes), the number of
kernel weightings and, for joint, the kernels in use.

    python benchmarks/bench_joint_multiclass.py --waveform /path/to/waveform.data
    python benchmarks/bench_joint_multiclass.py --sets wine digits --modes joint ovr --splits 2
    python benchmarks/bench_joint_multiclass.py --modes joint joint:crammer_singer joint:weston_watkins ovr

A mode ``joint:LOSS`` is the joint mode with the multiclass loss ``LOSS`` (``crammer_singer``,
``weston_watkins``, a plugin's); ``joint`` alone takes the default (multinomial) loss.

Needs only the runtime dependencies (scikit-learn).  Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, load_wine
from sklearn.model_selection import StratifiedShuffleSplit

from mklkit import MKLClassifier


#: Fits shorter than this (seconds) are repeated and timed by their fastest repeat.
SHORT = 0.2
#: The most repeats of a short fit.
REPEATS = 20


def estimator(mode: str) -> MKLClassifier:
    """``MKLClassifier(multiclass=mode)``; ``joint:LOSS`` is the joint mode with the multiclass loss ``LOSS``."""
    mode, _, loss = mode.partition(":")
    return MKLClassifier(multiclass=mode, **({"loss": loss} if loss else {}))


def timed_fit(mode: str, X: np.ndarray, y: np.ndarray) -> tuple[MKLClassifier, float]:
    """A fitted ``MKLClassifier(multiclass=mode)`` and its fit seconds (the fastest of the repeats of a short
    fit, :data:`SHORT`)."""
    times: list[float] = []
    while True:
        est = estimator(mode)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        times.append(time.perf_counter() - t0)
        if times[0] >= SHORT or len(times) >= REPEATS or sum(times) >= 10 * SHORT:
            return est, min(times)


def load(name: str, waveform: str | None) -> tuple[np.ndarray, np.ndarray] | None:
    if name == "digits":
        return load_digits(return_X_y=True)
    if name == "wine":
        return load_wine(return_X_y=True)
    if waveform is None or not Path(waveform).is_file():
        return None
    a = np.loadtxt(waveform).reshape(-1, 22)
    return a[:, :21], a[:, 21].astype(int)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["wine", "digits", "waveform"])
    ap.add_argument("--modes", nargs="+", default=["joint", "ovr", "ovo"])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--test-size", type=float, default=0.3)
    ap.add_argument("--waveform", default=None, help="the three-class waveform file")
    args = ap.parse_args()
    rows = []
    Xw, yw = load_wine(return_X_y=True)
    for mode in args.modes:  # compile the jitted code before any timing
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator(mode).fit(Xw, yw)
    for name in args.sets:
        data = load(name, args.waveform)
        if data is None:
            print(f"{name}: no file (--waveform), left out", flush=True)
            continue
        X, y = data
        split = StratifiedShuffleSplit(n_splits=args.splits, test_size=args.test_size, random_state=0)
        acc = {m: [] for m in args.modes}
        secs = {m: [] for m in args.modes}
        active = {m: [] for m in args.modes}
        n_kernels = {m: [] for m in args.modes}
        weightings = {}
        failed: dict[str, str] = {}
        for s, (tr, te) in enumerate(split.split(X, y)):
            for mode in args.modes:
                try:
                    est, fit_s = timed_fit(mode, X[tr], y[tr])
                except ValueError as exc:  # e.g. one-vs-one needs Gram matrices within the memory budget
                    failed[mode] = str(exc).split(";")[0]
                    print(f"{name} split {s} {mode}: {failed[mode]}", flush=True)
                    continue
                secs[mode].append(fit_s)
                acc[mode].append(float(est.score(X[te], y[te])))
                kw = np.atleast_2d(est.kernel_weights_)
                weightings[mode] = kw.shape[0]
                if mode.startswith("joint"):  # the bank of "auto" kernels depends on the split (constant features)
                    active[mode].append(int(np.sum(kw[0] > 0)))
                    n_kernels[mode].append(len(est.kernel_names_))
                print(
                    f"{name} split {s} {mode}: accuracy {acc[mode][-1]:.4f}, {secs[mode][-1]:.3g} s, "
                    f"C_ {np.mean(est.C_):.3g}, gap {np.max(est.dual_gap_):.2g}",
                    flush=True,
                )
        for mode in args.modes:
            if not acc[mode]:
                rows.append((name, mode, float("nan"), float("nan"), float("nan"), 0, failed.get(mode, "")))
                continue
            a = np.array(acc[mode])
            se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
            extra = f"{np.mean(active[mode]):.0f} of {np.mean(n_kernels[mode]):.0f}" if mode.startswith("joint") else ""
            rows.append((name, mode, 100 * a.mean(), 100 * se, float(np.mean(secs[mode])), weightings[mode], extra))
    print()
    print(f"| set | mode | accuracy % (mean ± se, {args.splits} splits) | fit s | weightings | joint: kernels in use |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, mode, mean, se, t, nw, extra in rows:
        print(f"| {name} | {mode} | {mean:.2f} ± {se:.2f} | {t:.3g} | {nw} | {extra} |")


if __name__ == "__main__":
    main()
