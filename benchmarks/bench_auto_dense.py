"""Which engine on a dense bank: spicy, proximal, bcd on exact factors and the installed engines.

Rows (``--rows``):

``a9a``
    Random subsets (seed 0) of the a9a training file of n points
    (``--sizes``, default 3,000); three Gaussian kernels on all 123 features,
    widths 5 10 20 (``--kernels M``: M widths spaced geometrically from 2 to
    40), unit trace, held as one dense (M, n, n) array.  hinge and
    logistic with the block 1-norm and the elastic net (lam 0.5) at
    C = 0.1 C_max and at C = 1 where 1 < C_max; hinge with the plugin's
    ``pnorm_squared`` and the core ``kl`` (engines of ``mklkit-smo`` where
    installed).
``uci``
    sonar, ionosphere and australian (all points, standardized) with the
    estimators' default bank (``default_kernels``: 7 + 3d kernels), logistic
    and hinge with the block 1-norm at C = 0.1 C_max.

Every engine that supports the problem solves it to the engine default ``tol``
(``--tol``): ``spicy``, ``proximal``, the installed plugin engines, and
``auto`` forced onto exact factors where that route applies (``bcd*``:
``Auto(dense_factor_min_samples=1)`` with proximal's rule off, i.e. pivoted Cholesky of every Gram matrix + ``bcd`` + the dense certificate;
its time includes the factorization).  Then ``auto`` as it is, and what it
picked.  Clarabel (``--clarabel-max``: rows with n x M at most this) gives the
reference optimum.  ``spicy`` on the hinge loss is left out above
``--spicy-hinge-max`` points.

Printed per row: C, then per engine seconds, status, objective and the gap it
reports (``auto``'s gap is the dense problem's).  Numba compilation happens
before the timings (one small solve per engine).

    python benchmarks/bench_auto_dense.py
    python benchmarks/bench_auto_dense.py --rows a9a --sizes 500 1000 2000

Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Any

import numpy as np

from mklkit.data import load_builtin
from mklkit.engines import common
from mklkit.pipeline.choose import Auto
from mklkit.estimators._defaults import default_kernels
from mklkit.kernels.build import KernelBank
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning
from mklkit.testing.engines import sample_points

A9A_PAIRS = [
    ("hinge", "l1"),
    ("logistic", "l1"),
    ("hinge", "elasticnet"),
    ("logistic", "elasticnet"),
    ("hinge", "pnorm_squared"),
    ("hinge", "kl"),
]
UCI_PAIRS = [("logistic", "l1"), ("hinge", "l1")]
PARAMS = {"elasticnet": {"lam": 0.5}}


def component(kind: str, name: str) -> Any:
    return get_registry().create(kind, {"name": name, **PARAMS.get(name, {})})


def engines_for(problem: Problem, tol: float | None) -> dict[str, Any]:
    """Every installed engine that supports ``problem`` (auto and bcd aside), and bcd*."""
    out = {}
    kw = {} if tol is None else {"tol": tol}
    for reg in get_registry().registrations("engine"):
        if reg.name in ("auto", "bcd"):
            continue
        e = reg.cls(**kw)
        if e.supports(problem) is None:
            out[reg.name] = e
    # the exact-factor route wherever it applies (proximal's rule, which comes first, is off)
    forced = Auto(dense_factor_min_samples=1, proximal_min_samples=10**9, fallback=False, **kw)
    engine, _ = forced.choose(problem)
    if engine is not None and engine.name == "bcd":
        out["bcd*"] = forced
    return out


def reference(K: np.ndarray, y: np.ndarray, loss: str, reg: str, C: float) -> float:
    from mklkit.testing.conic import REGULARIZERS, ReferenceError, solve_reference

    if reg not in REGULARIZERS:
        return float("nan")
    try:
        return solve_reference(K, y, loss, reg, C, **PARAMS.get(reg, {})).objective
    except ReferenceError:  # Clarabel not optimal (e.g. "optimal_inaccurate")
        return float("nan")


def cell(name: str, engine: Any, problem: Problem) -> str:
    """``name: seconds status objective gap`` of one solve (auto: and its route)."""
    t0 = time.perf_counter()
    r = engine.solve(problem)
    text = f"{name}: {time.perf_counter() - t0:.2f} {r.status.value} {r.objective:.8g} {r.gap:.1e}"
    if name == "auto":
        text += f" [{r.message.split(':')[0].split('(')[0].replace('auto -> ', '').strip()}]"
    return text


def run_row(label: str, K: np.ndarray, y: np.ndarray, loss: str, reg: str, C: float, args: argparse.Namespace) -> None:
    p = Problem(K=K, y=y, loss=component("loss", loss), regularizer=component("regularizer", reg), C=C)
    n = K.shape[1]
    engines = engines_for(p, args.tol)
    engines["auto"] = Auto(**({} if args.tol is None else {"tol": args.tol}))
    cells = [
        f"{name}: not run" if name == "spicy" and loss == "hinge" and n > args.spicy_hinge_max else cell(name, e, p)
        for name, e in engines.items()
    ]
    if n * K.shape[0] <= args.clarabel_max:
        cells.append(f"clarabel: {reference(K, y, loss, reg, C):.8g}")
    print(f"{label:>16} {loss:>8} {reg:>13} {C:>8.4g} | " + " | ".join(cells), flush=True)


def c_values(K: np.ndarray, y: np.ndarray, loss: str, reg: str, with_one: bool) -> list[float]:
    p = Problem(K=K, y=y, loss=component("loss", loss), regularizer=component("regularizer", reg), C=1.0)
    c_max = common.zero_solution(p).C_max
    if not np.isfinite(c_max):
        return [1.0]
    return [0.1 * c_max] + ([1.0] if with_one and 1.0 < c_max else [])


def warm_up() -> None:
    ds = load_builtin("a9a")
    X, y = ds.X[:120], ds.y[:120].astype(np.float64)
    K = KernelBank.build(X, [{"function": "rbf", "width": [5.0, 10.0]}]).K
    for loss, reg in A9A_PAIRS:
        p = Problem(K=K, y=y, loss=component("loss", loss), regularizer=component("regularizer", reg), C=0.5)
        for e in engines_for(p, 1e-2).values():
            e.solve(p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=["a9a", "uci"], choices=["a9a", "uci"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3000])
    ap.add_argument("--pairs", nargs="+", default=None, help="loss:regularizer pairs of the a9a rows (default: all)")
    ap.add_argument("--tol", type=float, default=None, help="relative duality gap (default: each engine's own)")
    ap.add_argument("--kernels", type=int, default=3, help="Gaussian kernels of the a9a rows (3: widths 5 10 20)")
    ap.add_argument("--spicy-hinge-max", type=int, default=3000)
    ap.add_argument("--clarabel-max", type=int, default=1500)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    warm_up()
    print(
        f"tol {args.tol if args.tol is not None else 'engine default'}; cells: engine: "
        "seconds status objective gap; bcd* = auto forced onto exact factors"
    )
    if "a9a" in args.rows:
        ds = load_builtin("a9a")
        order = np.random.default_rng(0).permutation(ds.n_samples)
        pairs = A9A_PAIRS if args.pairs is None else [tuple(s.split(":")) for s in args.pairs]
        for n in args.sizes:
            rows = np.sort(order[:n])
            X, y = ds.X[rows], ds.y[rows].astype(np.float64)
            widths = [5.0, 10.0, 20.0] if args.kernels == 3 else np.geomspace(2.0, 40.0, args.kernels).tolist()
            K = KernelBank.build(X, [{"function": "rbf", "width": widths}]).K
            for loss, reg in pairs:
                for C in c_values(K, y, loss, reg, with_one=True):
                    run_row(f"a9a {n} x {args.kernels}", K, y, loss, reg, C, args)
    if "uci" in args.rows:
        for name in ("sonar", "ionosphere", "australian"):
            ds = load_builtin(name)
            X, y = sample_points(name, ds.n_samples, 0)
            K = KernelBank.build(X, default_kernels(X.shape[1])).K
            for loss, reg in UCI_PAIRS:
                for C in c_values(K, y, loss, reg, with_one=False):
                    run_row(f"{name} {K.shape[1]} x {K.shape[0]}", K, y, loss, reg, C, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
