"""What each part of the ``apg`` engine saves: passes over the bank and time per solve, on the CPU.

Data: 1,500 random training points of a9a and of w8a (seed 0), the 50-kernel bank of ``bench_large_n.py``
by Nyström at 50 landmarks shared by all kernels (``nystroem_on_device`` on numpy, trace normalised), the
logistic loss with ``l1`` at ``--ratios`` times ``C_max``, each solved cold to the relative duality gap
``--tol`` by ``apg`` in the settings below, and by ``bcd`` for reference:

* ``accelerated``: the accelerated steps alone (``newton: false, ws_start: 0``);
* ``newton-cg-20``: with Newton steps on the support by at most 20 conjugate-gradient products
  preconditioned by the diagonal (``max_hessian_flops: 0, max_cg: 20, cg_sketch: 0, ws_start: 0``);
* ``newton-direct``: the Newton systems formed and solved directly (``ws_start: 0``);
* ``default``: ``apg`` at its defaults (working sets, direct Newton systems where they cost at most
  ``max_hessian_flops``);
* ``ws-cg-diagonal``, ``ws-cg-sketch``: the defaults with every Newton system by conjugate gradients
  (``max_hessian_flops: 0``, what a GPU's banks at full size get), preconditioned by the diagonal
  (``cg_sketch: 0``) or by the Nyström sketch of rank 100 and the diagonal it leaves (the default).

Printed: per problem and setting the steps, the passes over the bank (``n_passes`` of the history:
a pass over the rows of a working set or of the non-zero kernels counts as their share of the bank),
the Newton systems formed, the time, the certified gap and the status; then the passes of each setting
over all the problems.

    python benchmarks/bench_apg_steps.py
    python benchmarks/bench_apg_steps.py --ratios 0.01 --data w8a
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from mklkit.components.elasticnet import L1
from mklkit.components.losses import Logistic
from mklkit.engines.apg import APG
from mklkit.engines.bcd import BCD
from mklkit.engines.common import zero_solution
from mklkit.kernels.device import array_library
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factorize.on_device import nystroem_on_device
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_large_n import BANK, load  # noqa: E402 - the bank and the data of the large-N benchmark

SETTINGS = {
    "accelerated": {"newton": False, "ws_start": 0},
    "newton-cg-20": {"max_hessian_flops": 0.0, "max_cg": 20, "cg_sketch": 0, "ws_start": 0},
    "newton-direct": {"ws_start": 0},
    "default": {},
    "ws-cg-diagonal": {"max_hessian_flops": 0.0, "cg_sketch": 0},
    "ws-cg-sketch": {"max_hessian_flops": 0.0},
}


def bank_of(name: str, points: int, landmarks: int) -> tuple[FactorBank, np.ndarray]:
    Xtr, ytr, _, _ = load(name)
    rows = np.random.default_rng(0).choice(Xtr.shape[0], points, replace=False)
    dev = nystroem_on_device(BANK, Xtr[rows], array_library("cpu", "numpy"), landmarks=landmarks)
    return FactorBank(dev.LT, dev.starts), ytr[rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", default=["a9a", "w8a"], choices=("a9a", "w8a"))
    ap.add_argument("--ratios", nargs="+", type=float, default=[0.1, 0.01])
    ap.add_argument("--points", type=int, default=1500)
    ap.add_argument("--landmarks", type=int, default=50)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--max-iter", type=int, default=60000)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    args = ap.parse_args(argv)
    print("| data | C/C_max | setting | steps | passes | Newton systems | time s | gap | status |")
    print("|---|---|---|---|---|---|---|---|---|")
    totals = dict.fromkeys(args.settings, 0.0)
    for name in args.data:
        bank, y = bank_of(name, args.points, args.landmarks)
        C_max = zero_solution(Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=1.0)).C_max
        for ratio in args.ratios:
            problem = Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=ratio * C_max)
            runs = [(s, APG(tol=args.tol, max_iter=args.max_iter, **SETTINGS[s])) for s in args.settings]
            for label, engine in runs + [("bcd", BCD(tol=args.tol))]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    t0 = time.perf_counter()
                    res = engine.solve(problem)
                    t = time.perf_counter() - t0
                passes = sum(float(h.get("n_passes", 0.0)) for h in res.history)
                systems = sum(int(h.get("n_hessians", 0)) for h in res.history)
                if label in totals:
                    totals[label] += passes
                shown = "-" if label == "bcd" else f"{passes:.0f}"
                print(
                    f"| {name} | {ratio:g} | {label} | {res.iterations} | {shown} | {systems} | {t:.2f} | "
                    f"{res.gap:.1e} | {res.status.value} |"
                )
    print()
    for label, passes in totals.items():
        print(f"{label}: {passes:,.0f} passes over all the problems")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
