"""MKL on tens of thousands of samples: ``MKLClassifier`` with its defaults against one ``SVC``.

Data: a9a (all 32,561 training points, tested on the 16,281 of ``a9a_test``)
and w8a (49,749 points, no test file is bundled: a stratified 80/20 split,
seed 0, 39,799 training / 9,950 test points), sparse binary features as
loaded by :func:`mklkit.data.load_builtin`.

Methods, each fitted in its own child process (so that its peak memory is
its own, ``ru_maxrss``):

* ``svc``: scikit-learn ``SVC(kernel="rbf", gamma=G, C=1)`` with one tuned
  Gaussian kernel (a9a: gamma 0.05; w8a: ``--w8a-gamma``), called as a user
  calls it: on the sparse CSR matrix that ``load_builtin`` returns, at its
  default ``cache_size`` (200 MB).  Every ratio in the table is to this fit;
* ``svc-dense``: the same ``SVC`` on the features densified, with
  ``cache_size=--svc-cache-mb`` (2,000 MB): SVC at its fastest here, and as
  much memory as mklkit's fit;
* ``mklkit``: ``MKLClassifier(kernels=BANK)`` with every other parameter at
  its default (logistic loss, elastic net, ``C="auto"``, ``engine="auto"``,
  ``factor="auto"``, ``standardize="auto"``) except ``tol`` (the relative
  duality gap, ``--tol``, default 1e-3), where ``BANK`` is the
  50-kernel bank of ``bench_smo_points.py`` (10 Gaussian kernels on all
  features, widths 1 2 3 4 5 6 8 10 15 20; 40 on random subsets of 10 % of
  the features with widths 5 chi^2_1 + 0.1).  At this size the bank is held
  as approximate factors (chosen and said on stderr by the estimator).

Printed per data set and method: the fit time (bank, factorization and
solve for mklkit), its ratio to the SVC fit of the same run, the test
accuracy, the peak resident memory of the child process, and for mklkit the
C that ``"auto"`` chose, the engine, the certified relative duality gap of
the factored problem, the active kernels, the total rank, the relative
trace the factors leave out, and the size of the fitted model pickled
beside that of the training features.

``--exact-n n`` (default 2,000) adds a9a rows on a random subset of n
training points where the exact 50-kernel Gram bank fits: the factored
solution of the default fit is evaluated on the **exact** problem (the
primal objective with the dense kernels, normalized like the factors) and
compared with the exact optimum (``spicy`` on the dense bank, gap 1e-6).

    python benchmarks/bench_large_n.py                         # a9a and w8a
    python benchmarks/bench_large_n.py --data a9a --exact-n 0
    python benchmarks/bench_large_n.py --methods mklkit
    python benchmarks/bench_large_n.py --data w8a --class-weight balanced --exact-n 0

``--class-weight balanced`` fits every method with ``class_weight="balanced"``
(SVC's and MKLClassifier's, the same rule) and adds the balanced accuracy
(the mean recall of the two classes) to the detail: w8a has 3 % positives.

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import balanced_accuracy_score

BANK: list[dict[str, Any]] = [
    {"function": "rbf", "width": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0], "features": "all"},
    {"function": "rbf", "width": "chi2", "features": {"random_subsets": 40, "size": 0.1, "seed": 0}, "seed": 1},
]
SVC_GAMMA = {"a9a": 0.05}


def load(name: str, seed: int = 0) -> tuple[Any, np.ndarray, Any, np.ndarray]:
    """Training and test parts of a data set (sparse CSR features, labels +-1): a9a and its
    test file; w8a split 80/20, stratified, with ``seed``."""
    from sklearn.model_selection import train_test_split

    from mklkit.data import load_builtin

    if name == "a9a":
        tr, te = load_builtin("a9a"), load_builtin("a9a_test")
        return tr.X, tr.y, te.X, te.y
    ds = load_builtin(name)
    X_tr, X_te, y_tr, y_te = train_test_split(ds.X, ds.y, test_size=0.2, stratify=ds.y, random_state=seed)
    return X_tr, y_tr, X_te, y_te


def data_mib(X: Any) -> float:
    """Memory of the training features as loaded (a CSR matrix's three arrays, or an array)."""
    if hasattr(X, "indptr"):
        return (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    return np.asarray(X).nbytes / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(method: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One fit in this process; returns what the table prints."""
    X_tr, y_tr, X_te, y_te = load(name)
    out: dict[str, Any] = {"n_train": int(X_tr.shape[0]), "n_test": int(X_te.shape[0])}
    if method in ("svc", "svc-dense"):
        from sklearn.svm import SVC

        gamma = SVC_GAMMA.get(name, args.w8a_gamma)
        dense = method == "svc-dense"
        A_tr = X_tr.toarray() if dense else X_tr
        A_te = X_te.toarray() if dense else X_te
        kw = {"cache_size": args.svc_cache_mb} if dense else {}
        t0 = time.perf_counter()
        svc = SVC(kernel="rbf", gamma=gamma, C=1.0, class_weight=args.class_weight, **kw).fit(A_tr, y_tr)
        out["fit_s"] = time.perf_counter() - t0
        out["acc"] = float(svc.score(A_te, y_te))
        out["detail"] = f"gamma {gamma:g}, C 1, {svc.support_.size} support vectors"
        if args.class_weight:
            out["detail"] += f", balanced acc {balanced_accuracy_score(y_te, svc.predict(A_te)):.4f}"
    else:
        from mklkit import MKLClassifier

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            clf = MKLClassifier(kernels=BANK, tol=args.tol, class_weight=args.class_weight).fit(X_tr, y_tr)
        out["fit_s"] = time.perf_counter() - t0
        out["acc"] = float(clf.score(X_te, y_te))
        pickled = pickle.dumps(clf, protocol=pickle.HIGHEST_PROTOCOL)
        out["pickle_mib"] = len(pickled) / 2**20
        fa = clf.factor_approximation_ or {}
        out["detail"] = (
            f"C {clf.C_:.3g}, {clf.engine_.name if hasattr(clf.engine_, 'name') else clf.engine_}, "
            f"{clf.result_.status}, gap {clf.dual_gap_:.1e}, {len(clf.active_kernels_)} active, "
            f"rank {fa.get('total_rank', '-')}, trace left {fa.get('relative_trace_error', float('nan')):.3f}, "
            f"pickled {out['pickle_mib']:.1f} MiB (training data {data_mib(X_tr):.1f} MiB)"
        )
        if args.class_weight:
            out["detail"] += (
                f", solved by {clf.solved_by_}, balanced acc {balanced_accuracy_score(y_te, clf.predict(X_te)):.4f}"
            )
    out["peak_mib"] = peak_mib()
    return out


def exact_rows(n: int) -> list[str]:
    """The default fit on n a9a points, its factored solution evaluated on the exact problem."""
    import scipy.sparse as sp

    from mklkit import MKLClassifier
    from mklkit.data import load_builtin
    from mklkit.engines.objectives import primal_objective
    from mklkit.engines.spicy import Spicy
    from mklkit.kernels import KernelBank
    from mklkit.problem import Problem

    ds = load_builtin("a9a")
    idx = np.sort(np.random.default_rng(0).permutation(ds.n_samples)[:n])
    X, y = sp.csr_matrix(ds.X[idx]), ds.y[idx]
    lines = []
    for rank in (64, 256):
        t0 = time.perf_counter()
        clf = MKLClassifier(kernels=BANK, factor={"rank": rank}, tol=1e-3).fit(X, y)
        t_fac = time.perf_counter() - t0
        Z = clf.scaler_.transform(X) if clf.scaler_ is not None else X
        kb = KernelBank.build(Z, BANK, normalize="trace", memory_budget_bytes=8 * 50 * n * n * 2)
        pb = Problem(
            K=kb.K,
            y=np.where(y == clf.classes_[1], 1.0, -1.0),
            loss=clf.loss_,
            regularizer=clf.regularizer_,
            C=clf.C_,
            bias=True,
        )
        p_fac = primal_objective(pb, clf.result_.alpha, clf.result_.bias)
        t0 = time.perf_counter()
        ex = Spicy(tol=1e-6).solve(pb)
        t_ex = time.perf_counter() - t0
        fa = clf.factor_approximation_
        lines.append(
            f"{n:6d} {rank:5d} {fa['total_rank']:6d} {fa['relative_trace_error']:9.3f} "
            f"{clf.result_.objective:14.6f} {p_fac:14.6f} {ex.objective:14.6f} "
            f"{(p_fac - ex.objective) / abs(ex.objective):10.2e} {t_fac:7.1f} {t_ex:7.1f}"
        )
        del kb, pb
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["a9a", "w8a"], choices=["a9a", "w8a"])
    ap.add_argument(
        "--methods", nargs="+", default=["svc", "svc-dense", "mklkit"], choices=["svc", "svc-dense", "mklkit"]
    )
    ap.add_argument("--svc-cache-mb", type=float, default=2000.0, help="cache_size of svc-dense")
    ap.add_argument("--w8a-gamma", type=float, default=0.05)
    ap.add_argument("--tol", type=float, default=1e-3, help="relative duality gap of the mklkit solve")
    ap.add_argument("--exact-n", type=int, default=2000, help="a9a subset with the exact bank (0: none)")
    ap.add_argument(
        "--class-weight", choices=["balanced"], default=None, help="fit every method with class_weight='balanced'"
    )
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "DATA"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args)))
        return 0
    here = Path(__file__).resolve()
    passthrough = ["--svc-cache-mb", str(args.svc_cache_mb), "--w8a-gamma", str(args.w8a_gamma), "--tol", str(args.tol)]
    if args.class_weight:
        passthrough += ["--class-weight", args.class_weight]
    print(
        "MKLClassifier(kernels=<50 Gaussian kernels>) with its defaults against SVC(rbf, C=1): "
        "svc on the CSR input at its defaults, svc-dense on dense input with cache_size "
        f"{args.svc_cache_mb:g} MB; ratios to svc; each fit in its own process"
    )
    head = (
        f"{'data':>4} {'method':>9} {'N train':>8} | {'fit s':>7} {'/ SVC':>6} | {'test acc':>8} | "
        f"{'peak MiB':>8} | detail"
    )
    print(head)
    print("-" * (len(head) + 60))
    for name in args.data:
        svc_s = None
        for method in args.methods:
            proc = subprocess.run(
                [sys.executable, str(here), "--child", method, name, *passthrough], capture_output=True, text=True
            )
            if proc.returncode != 0:
                print(f"{name:>4} {method:>9} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            note = [ln for ln in proc.stderr.splitlines() if "approximate factors" in ln]
            if method == "svc":
                svc_s = r["fit_s"]
            ratio = f"{r['fit_s'] / svc_s:6.2f}" if svc_s else f"{'-':>6}"
            print(
                f"{name:>4} {method:>9} {r['n_train']:8d} | {r['fit_s']:7.1f} {ratio} | {r['acc']:8.4f} | "
                f"{r['peak_mib']:8.0f} | {r['detail']}"
            )
            if note:
                print(f"{'':>15}stderr: {note[0][:160]}...")
            sys.stdout.flush()
    if args.exact_n:
        print(
            f"\nThe factored solution on the exact problem (a9a, {args.exact_n} points, the same 50 kernels, "
            "unit trace): objective of the factored problem, of the exact problem at the factored "
            "solution, and the exact optimum (spicy, gap 1e-6)"
        )
        print(
            f"{'n':>6} {'rank':>5} {'R':>6} {'trace left':>9} {'P factored':>14} {'P exact(fac)':>14} "
            f"{'P exact opt':>14} {'excess':>10} {'fit s':>7} {'exact s':>7}"
        )
        for line in exact_rows(args.exact_n):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
