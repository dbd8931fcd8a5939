"""Hinge-type losses at scale: ``dualcd`` against ``bcd`` on the default bank, beside ``SVC()``.

``MKLClassifier(loss="hinge", regularizer=R, C=f * C_max, engine=E, tol=--tol)``
with every other setting at its default (the bank from the features'
kinds, factored to rank <= 256 per kernel) on a9a (its own test file) and
w8a (80/20, ``train_test_split`` seed 0), for each fraction ``f`` of
``C_max`` (``--fracs``), each regularizer (``--regs``) and each engine
(``--engines``; ``auto`` picks ``dualcd`` for these losses on a factor
bank).  ``C_max`` comes from a fit at a C above it (alpha = 0 certified).
``SVC()`` on the data as loaded (sparse CSR) once per set: its fit time and
accuracy are the reference of the target "hinge + l1 on all of a9a and
w8a in at most one SVC fit, gap <= 1e-3 certified".

Printed per row: the set, the regularizer, f, the engine, the fit's seconds
(bank included), the solve's seconds, status, relative gap, objective,
kernels active / all, test accuracy, and the solve's time over ``SVC()``'s
fit.  Numba compiles before the timings (one small fit per engine).

    python benchmarks/bench_dual_cd.py
    python benchmarks/bench_dual_cd.py --data a9a --fracs 0.01 --engines dualcd

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from mklkit import MKLClassifier
from mklkit.data import load_builtin
from mklkit.result import ConvergenceWarning


def split(name: str):
    if name == "a9a":
        tr, te = load_builtin("a9a"), load_builtin("a9a_test")
        return tr.X, np.asarray(tr.y), te.X, np.asarray(te.y)
    ds = load_builtin(name)
    y = np.asarray(ds.y)
    a, b, ya, yb = train_test_split(ds.X, y, test_size=0.2, stratify=y, random_state=0)
    return a, ya, b, yb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["a9a", "w8a"], choices=["a9a", "w8a"])
    ap.add_argument("--regs", nargs="+", default=["l1", "elasticnet"])
    ap.add_argument("--fracs", type=float, nargs="+", default=[0.1, 0.01, 0.001])
    ap.add_argument("--engines", nargs="+", default=["dualcd", "bcd"])
    ap.add_argument("--loss", default="hinge")
    ap.add_argument("--tol", type=float, default=1e-3, help="relative duality gap")
    ap.add_argument("--no-svc", action="store_true", help="leave SVC() out")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)

    small = load_builtin("ionosphere")
    for e in args.engines:  # compile before the timings
        MKLClassifier(loss=args.loss, engine=e, factor=True).fit(small.X, small.y)

    print(f"loss {args.loss}, tol {args.tol:g}; default bank, factors rank <= 256 per kernel")
    print(
        f"{'data':>5} {'reg':>10} {'C/Cmax':>7} {'engine':>7} {'fit s':>7} {'solve s':>8} "
        f"{'status':>10} {'gap':>8} {'objective':>14} {'active':>8} {'accuracy':>8} "
        f"{'/ SVC':>6}"
    )
    for name in args.data:
        Xa, ya, Xb, yb = split(name)
        svc_s = float("nan")
        if not args.no_svc:
            t0 = time.perf_counter()
            svc = SVC().fit(Xa, ya)
            svc_s = time.perf_counter() - t0
            print(
                f"{name:>5} {'SVC()':>10} {'':>7} {'':>7} {svc_s:7.1f} {'':>8} {'':>10} "
                f"{'':>8} {'':>14} {'':>8} {svc.score(Xb, yb):8.4f}",
                flush=True,
            )
        for reg in args.regs:
            c_max = MKLClassifier(loss=args.loss, regularizer=reg, C=1e12).fit(Xa, ya).C_max_
            for f in args.fracs:
                for e in args.engines:
                    clf = MKLClassifier(loss=args.loss, regularizer=reg, C=f * c_max, engine=e, tol=args.tol)
                    t0 = time.perf_counter()
                    clf.fit(Xa, ya)
                    fit_s = time.perf_counter() - t0
                    r = clf.result_
                    act = f"{len(clf.active_kernels_)}/{len(clf.kernel_names_)}"
                    print(
                        f"{name:>5} {reg:>10} {f:7.0e} {e:>7} {fit_s:7.1f} {r.time_s:8.1f} "
                        f"{r.status.value:>10} {r.gap:8.1e} {r.objective:14.6f} {act:>8} "
                        f"{clf.score(Xb, yb):8.4f} {r.time_s / svc_s:6.2f}",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
