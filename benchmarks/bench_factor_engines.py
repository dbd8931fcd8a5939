"""SpicyMKL on factor banks against the dense bank: a9a, three Gaussian kernels.

Nested random subsets (seed 0) of the a9a training file of n = 2,000 /
8,000 / 32,561 (all) points; three Gaussian kernels on all 123 binary
features (widths ``--widths``, default 10 20 40), each factored by pivoted
Cholesky (:func:`mklkit.kernels.factorize.build_factor_bank`, relative
residual trace ``--tol``, at most ``--rank`` columns per kernel, trace
normalized).  For the logistic and the hinge loss with the block 1-norm at
C = 0.1 C_max, ``spicy`` (iterative method, ``tol`` ``--gap``) solves the
problem on the factor bank and, where it fits (n <= ``--dense-max``), on
the dense bank of the same kernels (:meth:`FactorBank.to_array`, so both
solve the same problem).

Printed per (n, loss): the factorization time and the total rank R, then
for each bank the solve time, the outer iterations, the Newton steps, the
relative duality gap and the status, the relative difference of the two
objectives, and on the factor bank the rank R' of the last Newton system
and its solver (``factor_newton.choose_solver``: Woodbury or CG).

    python benchmarks/bench_factor_engines.py
    python benchmarks/bench_factor_engines.py --sizes 2000 --dense-max 2000

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from mklkit.components.losses import Hinge, Logistic
from mklkit.components.elasticnet import L1
from mklkit.data import load_builtin
from mklkit.engines.spicy import Spicy
from mklkit.engines.spicy import factor_newton
from mklkit.kernels.factorize import build_factor_bank
from mklkit.problem import Problem

SIZES = [2000, 8000, 32561]
LOSSES = {"logistic": Logistic, "hinge": Hinge}


class _Recorder:
    """Wraps :class:`factor_newton.LowRankHessian` to record the rank and solver of each system."""

    def __init__(self) -> None:
        self.last: tuple[int, str] | None = None
        self.orig = factor_newton.LowRankHessian.__init__

    def __enter__(self) -> "_Recorder":
        rec = self

        def init(obj: Any, *args: Any, **kwargs: Any) -> None:
            rec.orig(obj, *args, **kwargs)
            rec.last = (obj.rank, obj.solver)

        factor_newton.LowRankHessian.__init__ = init
        return self

    def __exit__(self, *exc: Any) -> None:
        factor_newton.LowRankHessian.__init__ = self.orig


def solve(K: Any, y: np.ndarray, loss: str, C: float, gap: float) -> tuple[Any, float]:
    engine = Spicy(tol=gap, method="iterative", max_iter=200)
    t0 = time.perf_counter()
    res = engine.solve(Problem(K=K, y=y, loss=LOSSES[loss](), regularizer=L1(), C=C))
    return res, time.perf_counter() - t0


def newton_steps(res: Any) -> int:
    return int(sum(h.get("newton_steps", 0) for h in res.history))


def fmt(res: Any, t: float) -> str:
    return f"{t:8.1f} {res.iterations:4d} {newton_steps(res):5d} {res.gap:9.2e} {res.status.value:>9s}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--widths", type=float, nargs="+", default=[10.0, 20.0, 40.0])
    ap.add_argument("--tol", type=float, default=1e-3, help="relative residual trace per kernel")
    ap.add_argument("--rank", type=int, default=1024, help="largest rank per kernel")
    ap.add_argument("--gap", type=float, default=1e-6, help="relative duality gap of the solves")
    ap.add_argument("--dense-max", type=int, default=8000, help="largest n solved on the dense bank too")
    ap.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    args = ap.parse_args(argv)

    ds = load_builtin("a9a")
    order = np.random.default_rng(0).permutation(ds.n_samples)
    bank = [{"function": "rbf", "width": list(args.widths)}]
    print(
        f"a9a, Gaussian widths {args.widths}, pivoted Cholesky tol {args.tol:g} rank <= "
        f"{args.rank}; spicy iterative, block 1-norm, C = 0.1 C_max, gap {args.gap:g}"
    )
    head = "  time s   it  newton       gap    status"
    print(
        f"{'n':>6} {'loss':>8} | {'fact s':>6} {'R':>5} | factor:{head} {'R_act':>5} "
        f"{'solver':>8} | dense:{head} | rel obj diff"
    )
    sys.stdout.flush()
    for n in args.sizes:
        rows = np.sort(order[:n])
        X, y = ds.X[rows], ds.y[rows].astype(np.float64)
        t0 = time.perf_counter()
        fb = build_factor_bank(bank, X, tol=args.tol, rank=args.rank, method="pivoted_cholesky")
        t_fact = time.perf_counter() - t0
        K = fb.to_array() if n <= args.dense_max else None
        for loss in args.losses:
            C_max = Spicy().solve(Problem(K=fb, y=y, loss=LOSSES[loss](), regularizer=L1(), C=1e12)).C_max
            C = 0.1 * C_max
            with _Recorder() as rec:
                res_f, t_f = solve(fb, y, loss, C, args.gap)
            r_act, solver = rec.last if rec.last else (0, "-")
            line = (
                f"{n:6d} {loss:>8} | {t_fact:6.1f} {fb.total_rank:5d} | factor:"
                f"{fmt(res_f, t_f)} {r_act:5d} {solver:>8} | "
            )
            if K is not None:
                res_d, t_d = solve(K, y, loss, C, args.gap)
                diff = abs(res_f.objective - res_d.objective) / abs(res_d.objective)
                line += f"dense:{fmt(res_d, t_d)} | {diff:.1e}"
            else:
                line += f"dense: {'(does not fit: ' + str(3 * 8 * n * n >> 30) + ' GiB)':>41} |"
            print(line)
            sys.stdout.flush()
        del K
    return 0


if __name__ == "__main__":
    sys.exit(main())
