"""The ``bcd`` engine against skglm's group-lasso solvers on the same objective.

Block-ℓ1 MKL with linear kernels on feature groups is the group lasso:
with :math:`K_g = X_gX_g^\\top` the factor is :math:`L_g = X_g`, so
:math:`\\beta_g = w_g` and :math:`\\|\\alpha_g\\|_{K_g} = \\|w_g\\|`.  The two
objectives differ by a constant factor only:

* logistic: mklkit :math:`\\sum_i\\log(1 + e^{-y_iz_i}) + C\\sum_g\\|w_g\\|`,
  skglm ``LogisticGroup`` + ``WeightedGroupL2`` :math:`\\frac1n\\sum_i\\log(1 + e^{-y_iz_i})
  + \\alpha\\sum_g\\|w_g\\|`: :math:`\\alpha = C/n`, objective times ``n``;
* squared: mklkit :math:`\\sum_i(y_i - z_i)^2 + C\\sum_g\\|w_g\\|`, skglm
  ``QuadraticGroup`` :math:`\\frac1{2n}\\|y - z\\|^2 + \\alpha\\sum_g\\|w_g\\|`:
  :math:`\\alpha = C/(2n)`, objective times ``2n``;

both with an unpenalized intercept (``bias`` / ``fit_intercept``), unit
group weights, and each solver's default iteration limits.  The skglm solver is the one that applies: ``GroupProxNewton``
for the logistic loss (it takes dense data only, so a sparse row runs it on
the dense copy), ``GroupBCD`` for the squared loss (dense or sparse).
(skglm 0.5's ``GroupBCD`` with ``LogisticGroup`` takes per-feature instead
of per-group step sizes and is not used.)

Data (bundled, ``mklkit/data``): a9a, its 123 one-hot features grouped by
the 14 attributes of Platt's coding of UCI Adult (age 5, workclass 8, fnlwgt
5, education 16, education-num 5, marital-status 7, occupation 14,
relationship 6, race 5, sex 2, capital-gain 2, capital-loss 2,
hours-per-week 5, native-country 41; the script checks that no row has two
features of one group); w8a, its 300 binary features in groups of
``--w8a-group`` consecutive features.  Random subsets of N rows (seed 0),
both as a dense and as a sparse (CSR) factor bank.  C is a fraction of
:math:`C_{max}` (above which w = 0).

Both solvers run to the same ``--tol``: mklkit's relative duality gap, and
skglm's optimality criterion (largest distance of a group's negative
gradient to the subdifferential, on its 1/n scale).  Every solution is then
certified by the same code (``mklkit.engines.common``: the dual point
:math:`-\\ell'(z)` projected onto the feasible set), which gives the gap
columns.  Times are the best of ``--repeat`` runs after a warm-up solve on
a small problem (numba compilation excluded); mklkit's include the set-up
of the factor bank (spectral norms, sample supports).

    python benchmarks/bench_group_lasso.py                        # the full table
    python benchmarks/bench_group_lasso.py --sets a9a --sizes 1000 4000 --losses logistic

Needs skglm (``pip install -e ".[benchmark]"``); without it the script says
so and exits with status 2.  Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from mklkit.components.losses import Logistic, Squared
from mklkit.components.elasticnet import L1
from mklkit.data import load_builtin
from mklkit.engines import common
from mklkit.engines.bcd import BCD
from mklkit.kernels.factor import FactorBank
from mklkit.problem import Problem

#: Platt's coding of UCI Adult: one-hot features per attribute, in file order.
A9A_GROUPS = (5, 8, 5, 16, 5, 7, 14, 6, 5, 2, 2, 2, 5, 41)
SIZES = {"a9a": (1000, 4000, 16000, 32561), "w8a": (1000, 4000, 16000, 49749)}
LOSSES = {"logistic": Logistic, "squared": Squared}
#: skglm's objective times this is mklkit's; skglm's alpha is C / (this)
SCALE = {"logistic": 1.0, "squared": 2.0}


def load(name: str, w8a_group: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Features (CSR), labels and group offsets."""
    ds = load_builtin(name)
    X = sp.csr_matrix(ds.X, dtype=np.float64)
    if name == "a9a":
        starts = np.concatenate([[0], np.cumsum(A9A_GROUPS)])
        for g in range(len(A9A_GROUPS)):
            per_row = np.diff(X[:, starts[g] : starts[g + 1]].tocsr().indptr)
            if per_row.max() > 1:
                raise SystemExit(f"a9a: group {g} is not one-hot ({per_row.max()} features in one row)")
    else:
        starts = np.unique(np.concatenate([np.arange(0, X.shape[1], w8a_group), [X.shape[1]]]))
    return X, np.asarray(ds.y, dtype=np.float64), starts.astype(np.int64)


def certify(problem: Problem, X: sp.csr_matrix, starts: np.ndarray, w: np.ndarray, b: float) -> tuple[float, float]:
    """Primal value and relative duality gap of ``(w, b)``: the dual point :math:`-\\ell'(z)`
    projected onto the feasible set, as every mklkit engine does."""
    loss, y = problem.loss, problem.y
    z = np.asarray(X @ w).ravel() + b
    rho = -np.asarray(loss.jit.deriv(y, common.as_vector(z), loss.param_vector))
    lo, hi = common.dual_box(problem)
    rho = common.project_sum_box(rho, lo, hi)
    t = np.asarray(X.T @ rho).ravel()
    dn = np.sqrt(np.add.reduceat(t * t, starts[:-1]))
    D, _, _ = common.projected_dual_objective(problem, rho, norms=dn)
    norms = np.sqrt(np.add.reduceat(w * w, starts[:-1]))
    P = common.loss_value(loss, y, z) + common.regularizer_value(problem.regularizer, norms, problem.C)
    return P, common.relative_gap(P, D)


def run_mklkit(LT, starts, y, loss, C, tol) -> tuple[float, np.ndarray, float]:
    """Seconds, w and intercept (a new bank object: its set-up is timed too)."""
    pb = Problem(K=FactorBank(LT, starts), y=y, loss=LOSSES[loss](), regularizer=L1(), C=C)
    t = time.perf_counter()
    res = BCD(tol=tol).solve(pb)
    sec = time.perf_counter() - t
    if not res.converged:
        print(f"  mklkit: {res.message}", file=sys.stderr)
    return sec, pb.bank.coefficients(res.alpha), res.bias


def run_skglm(X, y, starts, loss, C, tol) -> tuple[float, np.ndarray, float, str]:
    """Seconds, w, intercept and the solver's name."""
    from skglm.datafits import LogisticGroup, QuadraticGroup
    from skglm.penalties import WeightedGroupL2
    from skglm.solvers import GroupBCD, GroupProxNewton

    n = X.shape[0]
    grp_ptr = starts.astype(np.int32)
    grp_idx = np.arange(starts[-1], dtype=np.int32)
    G = starts.size - 1
    alpha = C / (SCALE[loss] * n)
    pen = WeightedGroupL2(alpha, np.ones(G), grp_ptr, grp_idx)
    if loss == "logistic":
        df = LogisticGroup(grp_ptr, grp_idx)
        solver = GroupProxNewton(tol=tol, fit_intercept=True)
        Xs = np.asfortranarray(X.toarray()) if sp.issparse(X) else X
    else:
        df = QuadraticGroup(grp_ptr, grp_idx)
        solver = GroupBCD(tol=tol, fit_intercept=True)
        Xs = X
    t = time.perf_counter()
    w = solver.solve(Xs, y, df, pen)[0]
    sec = time.perf_counter() - t
    return sec, w[:-1], float(w[-1]), type(solver).__name__


def best_of(repeat: int, fn, *args):
    out = None
    best = math.inf
    for _ in range(repeat):
        r = fn(*args)
        if r[0] < best:
            best, out = r[0], r
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["a9a", "w8a"], choices=list(SIZES))
    ap.add_argument(
        "--sizes", nargs="+", type=int, default=None, help="numbers of rows (default: 1000, 4000, 16000 and all)"
    )
    ap.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    ap.add_argument("--storage", nargs="+", default=["dense", "sparse"], choices=["dense", "sparse"])
    ap.add_argument("--fracs", nargs="+", type=float, default=[0.5, 0.1, 0.01], help="C as fractions of C_max")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--w8a-group", type=int, default=10)
    args = ap.parse_args()
    try:
        import skglm
    except ImportError:
        print(
            'bench_group_lasso: skglm is not installed; install it with pip install -e ".[benchmark]"', file=sys.stderr
        )
        return 2
    warnings.simplefilter("ignore")

    # warm-up: compile both solvers' loops on a small problem
    Xw, yw, sw = load("a9a", args.w8a_group)
    Xw, yw = Xw[:300], yw[:300]
    for loss in args.losses:
        for storage in args.storage:
            LT = Xw.T.tocsr() if storage == "sparse" else np.ascontiguousarray(Xw.T.toarray())
            Cw = (
                0.1
                * common.zero_solution(
                    Problem(K=FactorBank(LT, sw), y=yw, loss=LOSSES[loss](), regularizer=L1(), C=1.0)
                ).C_max
            )
            run_mklkit(LT, sw, yw, loss, Cw, 1e-4)
            run_skglm(Xw.tocsc() if storage == "sparse" else np.asfortranarray(Xw.toarray()), yw, sw, loss, Cw, 1e-4)

    print(
        f"skglm {skglm.__version__}; tol {args.tol:g}; times in seconds, best of "
        f"{args.repeat}; speed-up = skglm time / mklkit time; gaps certified by the same "
        "code"
    )
    head = (
        f"{'set':4} {'storage':7} {'loss':8} {'N':>6} {'groups':>6} {'C/Cmax':>6} "
        f"{'mklkit s':>9} {'skglm s':>9} {'speed-up':>8} {'P mklkit':>18} "
        f"{'P skglm':>18} {'rel diff':>9} {'gap mklkit':>10} {'gap skglm':>10}  solver"
    )
    print(head)
    print("-" * len(head))
    rng = np.random.default_rng(0)
    for name in args.sets:
        X, y, starts = load(name, args.w8a_group)
        order = rng.permutation(X.shape[0])
        for n in args.sizes or SIZES[name]:
            n = min(n, X.shape[0])
            rows = np.sort(order[:n])
            Xn, yn = X[rows], y[rows]
            for storage in args.storage:
                LT = Xn.T.tocsr() if storage == "sparse" else np.ascontiguousarray(Xn.T.toarray())
                # skglm reads sparse data by columns (CSC), dense data by columns too
                Xs = Xn.tocsc() if storage == "sparse" else np.asfortranarray(Xn.toarray())
                for loss in args.losses:
                    pb = Problem(K=FactorBank(LT, starts), y=yn, loss=LOSSES[loss](), regularizer=L1(), C=1.0)
                    C_max = common.zero_solution(pb).C_max
                    for frac in args.fracs:
                        pb.C = frac * C_max
                        tm, wm, bm = best_of(args.repeat, run_mklkit, LT, starts, yn, loss, pb.C, args.tol)
                        Pm, gm = certify(pb, Xn, starts, wm, bm)
                        try:
                            ts, ws, bs, solver = best_of(args.repeat, run_skglm, Xs, yn, starts, loss, pb.C, args.tol)
                        except Exception as exc:  # noqa: BLE001 - a row, not the end
                            print(
                                f"{name:4} {storage:7} {loss:8} {n:6d} {starts.size - 1:6d} "
                                f"{frac:6g} {tm:9.3f} {'failed':>9} {'':8} {Pm:18.10f} "
                                f"{'':18} {'':9} {gm:10.1e} {'':10}  skglm raised "
                                f"{type(exc).__name__}: {exc}",
                                flush=True,
                            )
                            continue
                        Ps, gs = certify(pb, Xn, starts, ws, bs)
                        rel = (Pm - Ps) / abs(Ps)
                        print(
                            f"{name:4} {storage:7} {loss:8} {n:6d} {starts.size - 1:6d} "
                            f"{frac:6g} {tm:9.3f} {ts:9.3f} {ts / tm:8.2f} {Pm:18.10f} "
                            f"{Ps:18.10f} {rel:9.1e} {gm:10.1e} {gs:10.1e}  {solver}",
                            flush=True,
                        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
