"""SpicyMKL against a general conic solver (cvxpy + Clarabel) on the same objective.

Data: Ringnorm (IDA, as in SpicyMKL §6.2), N = 200 random training points,
standardized; Gaussian kernels with chi-square widths on random feature
subsets (as in ``bench_spicy_scaling.py``), unit trace; M in {50, 200, 500}.
Problem: block 1-norm with the logistic loss (``--loss hinge`` for the
hinge loss), C = 0.05, with a bias.

The conic reference is ``tests/conic_reference.py``: every Gram matrix is
factored, :math:`K_m = L_mL_m^\\top` (eigendecomposition, eigenvalues below
1e-9 of the largest dropped), and the primal in :math:`\\beta_m = L_m^\\top\\alpha_m`
goes to Clarabel with gap and feasibility tolerances 1e-8 (second-order
cones for the block norms, exponential cones for the logistic loss).  The
times reported for it are the factorization, cvxpy's compilation and
Clarabel's own solve time.  SpicyMKL is timed to a relative duality gap of
1e-2 (the paper's criterion) and 1e-6; the ratio is conic total / SpicyMKL.
The objectives are compared at the end.

    python benchmarks/bench_spicy_vs_conic.py                 # M = 50, 200, 500
    python benchmarks/bench_spicy_vs_conic.py --max-m 200     # skip M = 500 (minutes, GBs)

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spicy_scaling import bank  # noqa: E402
from tests.conic_reference import factor_bank  # noqa: E402

from mklkit.components.losses import Hinge, Logistic  # noqa: E402
from mklkit.components.elasticnet import L1  # noqa: E402
from mklkit.engines.spicy import Spicy  # noqa: E402
from mklkit.problem import Problem  # noqa: E402
from mklkit.result import ConvergenceWarning  # noqa: E402

C = 0.05


def conic(K: np.ndarray, y: np.ndarray, loss: str):
    """Factorization, compilation and Clarabel times, objective, status, mean factor rank."""
    t0 = time.perf_counter()
    with threadpool_limits(1, user_api="blas"):  # many small eigendecompositions
        factors = factor_bank(K, 1e-9)
    t_fac = time.perf_counter() - t0
    betas = [cp.Variable(L.shape[1]) for L, _ in factors]
    b = cp.Variable()
    z = sum(L @ beta for (L, _), beta in zip(factors, betas)) + b
    if loss == "logistic":
        data = cp.sum(cp.logistic(-cp.multiply(y, z)))
    else:
        data = cp.sum(cp.pos(1 - cp.multiply(y, z)))
    obj = data + C * cp.sum(cp.hstack([cp.norm(beta, 2) for beta in betas]))
    prob = cp.Problem(cp.Minimize(obj))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-8, tol_gap_rel=1e-8, tol_feas=1e-8, max_iter=500)
    t_total = time.perf_counter() - t0
    t_solve = float(prob.solver_stats.solve_time or 0.0)
    rank = float(np.mean([L.shape[1] for L, _ in factors]))
    return t_fac, t_total - t_solve, t_solve, float(prob.value), str(prob.status), rank


def spicy(K, y, loss: str, tol: float) -> tuple[float, float, int]:
    pb = Problem(K=K, y=y, loss=Logistic() if loss == "logistic" else Hinge(), regularizer=L1(), C=C)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = Spicy(tol=tol).solve(pb)
    return time.perf_counter() - t0, res.objective, res.iterations


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", nargs="+", type=int, default=[50, 200, 500])
    ap.add_argument("--max-m", type=int, default=None, help="skip M above this")
    ap.add_argument("--loss", choices=("logistic", "hinge"), default="logistic")
    ap.add_argument("--repeat", type=int, default=3, help="SpicyMKL repetitions (median)")
    args = ap.parse_args(argv)
    ms = [m for m in args.ms if args.max_m is None or m <= args.max_m]
    print(f"ringnorm, N = 200, block 1-norm, {args.loss} loss, C = {C}")
    print(
        f"{'M':>5}{'rank':>7}{'factor s':>10}{'cvxpy s':>9}{'Clarabel s':>11}"
        f"{'spicy@1e-2':>12}{'spicy@1e-6':>12}{'ratio@1e-2':>12}{'ratio@1e-6':>12}"
        f"{'rel. obj diff':>15}  status"
    )
    for M in ms:
        K, y = bank("ringnorm", 200, M, 0)
        spicy(K, y, args.loss, 1e-2)  # compile / warm the caches
        s2 = [spicy(K, y, args.loss, 1e-2) for _ in range(args.repeat)]
        s6 = [spicy(K, y, args.loss, 1e-6) for _ in range(args.repeat)]
        t2 = statistics.median(x[0] for x in s2)
        t6 = statistics.median(x[0] for x in s6)
        t_fac, t_cvx, t_cl, obj, status, rank = conic(K, y, args.loss)
        total = t_fac + t_cvx + t_cl
        diff = (s6[0][1] - obj) / abs(obj)
        print(
            f"{M:>5}{rank:>7.0f}{t_fac:>10.2f}{t_cvx:>9.2f}{t_cl:>11.2f}{t2:>12.3f}{t6:>12.3f}"
            f"{total / t2:>12.0f}{total / t6:>12.0f}{diff:>15.2e}  {status}",
            flush=True,
        )
        del K


if __name__ == "__main__":
    main()
