"""Which engine on a factor bank: bcd, spicy and proximal side by side (what ``auto`` picks).

Nested random subsets (seed 0) of the a9a training file of n points
(``--sizes``, default 2,000 and 8,000); three Gaussian kernels on all 123
binary features, widths 10 20 40, each factored by pivoted Cholesky
(:func:`mklkit.kernels.factorize.build_factor_bank`, relative residual
trace 1e-3, at most 512 columns per kernel, trace normalized).  For the
logistic and the hinge loss with the block 1-norm and the elastic net
(lam 0.5), at C = 0.1 C_max, every engine that supports the problem solves
it to the relative duality gap ``--tol``; spicy on the hinge loss is left
out above ``--spicy-hinge-max`` points (it takes minutes there).

Printed per (n, loss, regularizer): C, the total rank R, then per engine the
seconds, the status, the objective and the gap it reports, and the engine
``auto`` chooses.  Numba compilation is done before the timings (one small
solve per engine).

    python benchmarks/bench_auto_factor.py
    python benchmarks/bench_auto_factor.py --sizes 2000 --tol 1e-6

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from mklkit.components.losses import Hinge, Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import load_builtin
from mklkit.pipeline.choose import Auto
from mklkit.engines.bcd import BCD
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels.factorize import build_factor_bank
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

LOSSES = {"logistic": Logistic, "hinge": Hinge}
REGULARIZERS = {"l1": L1, "elasticnet": lambda: ElasticNet(lam=0.5)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000])
    ap.add_argument("--tol", type=float, default=1e-4, help="relative duality gap")
    ap.add_argument("--spicy-hinge-max", type=int, default=2000, help="largest n at which spicy runs on the hinge loss")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)

    ds = load_builtin("a9a")
    order = np.random.default_rng(0).permutation(ds.n_samples)
    bank = [{"function": "rbf", "width": [10.0, 20.0, 40.0]}]
    engines = {"bcd": BCD, "spicy": Spicy, "proximal": Proximal}

    # compile once on a small problem so that the timings below are solves
    rows = np.sort(order[:200])
    fb = build_factor_bank(bank, ds.X[rows], tol=1e-3, rank=512, method="pivoted_cholesky")
    for loss in LOSSES.values():
        for reg in REGULARIZERS.values():
            p = Problem(K=fb, y=ds.y[rows].astype(np.float64), loss=loss(), regularizer=reg(), C=1.0)
            for E in engines.values():
                e = E(tol=1e-2)
                if e.supports(p) is None:
                    e.solve(p)

    print(f"a9a, Gaussian widths 10 20 40, pivoted Cholesky tol 1e-3; C = 0.1 C_max, gap {args.tol:g}")
    print(
        f"{'n':>6} {'loss':>8} {'reg':>10} {'C':>7} {'R':>5} | "
        + " | ".join(f"{name}: s, status, objective, gap" for name in engines)
        + " | auto picks"
    )
    sys.stdout.flush()
    for n in args.sizes:
        rows = np.sort(order[:n])
        X, y = ds.X[rows], ds.y[rows].astype(np.float64)
        fb = build_factor_bank(bank, X, tol=1e-3, rank=512, method="pivoted_cholesky")
        for lname, loss in LOSSES.items():
            for rname, reg in REGULARIZERS.items():
                c_max = BCD().solve(Problem(K=fb, y=y, loss=loss(), regularizer=reg(), C=1e12)).C_max
                C = 0.1 * c_max if np.isfinite(c_max) else 1.0
                p = Problem(K=fb, y=y, loss=loss(), regularizer=reg(), C=C)
                cells = []
                for name, E in engines.items():
                    e = E(tol=args.tol)
                    if e.supports(p) is not None:
                        cells.append(f"{name}: n/a")
                        continue
                    if name == "spicy" and lname == "hinge" and n > args.spicy_hinge_max:
                        cells.append(f"{name}: not run")
                        continue
                    t0 = time.perf_counter()
                    r = e.solve(p)
                    dt = time.perf_counter() - t0
                    cells.append(f"{dt:7.2f} {r.status.value:>9} {r.objective:.8g} {r.gap:.1e}")
                picked = Auto(tol=args.tol).choose(p)[0]
                print(
                    f"{n:>6} {lname:>8} {rname:>10} {C:>7.3g} {fb.LT.shape[0]:>5} | "
                    + " | ".join(cells)
                    + f" | {picked.name if picked else '-'}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
