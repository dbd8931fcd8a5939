"""MKL on a device: the factors built there, the passes over them at memory bandwidth, and a certified C path.

Data: a9a (its 32,561 training points, tested on the 16,281 of ``a9a_test``) and w8a (the stratified 80/20
split of ``bench_large_n.py``, 39,799 / 9,950), features as loaded (sparse, densified on the device); the
50-kernel bank of ``bench_large_n.py`` (10 Gaussian kernels on all features, 40 on random 10 % subsets),
each factored by Nyström at ``--landmarks`` points shared by all kernels
(:func:`mklkit.kernels.factorize.on_device.nystroem_on_device`, trace normalised; rank up to the number of
landmarks per kernel, eigenvalues below 1e-8 of the largest cut), or with ``--factor pivoted_cholesky`` by
greedy pivoted Cholesky to rank ``--landmarks`` per kernel
(:func:`~mklkit.kernels.factorize.on_device.pivoted_cholesky_on_device`, trace normalised).

Measured on the device, in this order, in one run:

* a **check** against numpy on 1,000 points (any library but numpy): the Nyström kernels, both passes
  on the same factors with fresh random vectors, and one certified solve, as relative differences;
* the **copy bandwidth** of the device (a device-to-device copy of ``--copy-gib`` GiB, bytes read plus
  written, median of 10), the ceiling every pass is measured against;
* the **factorization** (train and the test map) and the bank's size;
* one **pass** over the bank, :math:`L^\\top v` and :math:`L\\beta` (median of 20): its time and the bandwidth
  it achieves (the bank's bytes over the time), as a fraction of the copy bandwidth;
* the **C path**: ``--n-C`` values from ``C_max`` down to ``--lowest`` times it (geometric), each solved by
  ``apg`` (logistic loss, ``--regularizer``), warm-started from the one before, to the relative duality gap
  ``--tol``: time, steps, passes (in units of the whole bank: a pass over the rows of a working set or
  of the non-zero kernels counts as their share), the certified gap, active kernels and test accuracy per C.

``--cpu`` adds, on this machine's CPU and the same factors (copied to the host): ``apg`` on numpy (the same
code path) and ``bcd`` (the CPU engine of factor banks), each along the same path; ``--svc`` adds scikit-learn's
``SVC()``, ``SVC(gamma=0.05)`` and ``GridSearchCV(SVC)`` (the grid of ``bench_vs_svc.py``) fitted on the same
points as loaded, timed on the same CPU.

    python benchmarks/bench_gpu.py --device cuda                 # a9a and w8a on the GPU
    python benchmarks/bench_gpu.py --device cuda --cpu --data a9a
    python benchmarks/bench_gpu.py --device cpu --small          # the smoke test of the suite

``--max-hessian-flops``: apg's option (0: every Newton system by conjugate gradients, what the banks of all
the points get on a GPU by default; a larger value forms and solves larger systems, as a GPU does quickly);
``--cg-sketch``: the rank of their preconditioner's sketch (a larger one costs matrix products, cheap on a GPU,
and saves passes).
``--small``: 1,500 training and 500 test points, 50 landmarks, a C path of 3 values (seconds on a CPU);
``--points n``: a random subset of n training points and n/3 test points.
Prints a table; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mklkit.components.elasticnet import L1, ElasticNet
from mklkit.components.losses import Logistic
from mklkit.engines.apg import APG
from mklkit.engines.bcd import BCD
from mklkit.engines.common import zero_solution
from mklkit.kernels.device import array_library
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.factorize.on_device import nystroem_on_device, pivoted_cholesky_on_device
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_large_n import BANK, load  # noqa: E402 - the bank and the splits of the large-N benchmark

#: Test accuracy of SVC (one tuned Gaussian kernel, C = 1) on the same splits, from bench_large_n.py.
SVC_ACCURACY = {"a9a": 0.8509, "w8a": 0.9867}
REGULARIZERS: dict[str, Callable[[], Any]] = {"l1": L1, "elasticnet": lambda: ElasticNet(lam=0.5)}


def timed(lib: Any, fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Median seconds of ``fn`` over ``repeat`` calls (the device synchronized around each) and its value."""
    times, out = [], None
    for _ in range(repeat):
        lib.synchronize()
        t0 = time.perf_counter()
        out = fn()
        lib.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def copy_bandwidth(lib: Any, gib: float) -> float:
    """Bytes per second of a device-to-device copy of ``gib`` GiB (read plus written), median of 10."""
    xp = lib.xp
    n = max(1, int(gib * 2**30) // 8)
    x = lib.asarray(np.random.default_rng(0).standard_normal(min(n, 1 << 20)))
    x = xp.concat([x] * max(1, n // x.shape[0]))
    timed(lib, lambda: xp.asarray(x, copy=True))  # warm-up
    t, _ = timed(lib, lambda: xp.asarray(x, copy=True), 10)
    return 2 * x.shape[0] * 8 / t


def pass_times(bank: Any) -> tuple[float, float]:
    """Median seconds of one :math:`L^\\top v` and one :math:`L\\beta` on the device (20 each, random inputs)."""
    rng = np.random.default_rng(1)
    v, beta = bank.to_x(rng.standard_normal(bank.shape[1])), bank.to_x(rng.standard_normal(bank.total_rank))
    timed(bank.lib, lambda: bank.project_x(v))
    t_proj, _ = timed(bank.lib, lambda: bank.project_x(v), 20)
    timed(bank.lib, lambda: bank.expand_x(beta))
    t_exp, _ = timed(bank.lib, lambda: bank.expand_x(beta), 20)
    return t_proj, t_exp


def path(bank: Any, y: np.ndarray, Xte: Any, yte: np.ndarray | None, engine: Any, args: argparse.Namespace):
    """The warm-started C path; one row per C (time, steps, passes, gap, status, active, accuracy)."""
    reg = REGULARIZERS[args.regularizer]
    zero = zero_solution(Problem(K=bank, y=y, loss=Logistic(), regularizer=reg(), C=1.0))
    Cs = zero.C_max * np.geomspace(1.0, args.lowest, args.n_C + 1)[1:]
    rows, prev = [], None
    for C in Cs:
        problem = Problem(K=bank, y=y, loss=Logistic(), regularizer=reg(), C=float(C))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            t0 = time.perf_counter()
            res = engine.solve(problem, warm_start=prev)
            t = time.perf_counter() - t0
        acc = math.nan
        if Xte is not None:
            beta = bank.coefficients(res.alpha)
            z = predict(bank, beta, res.bias, Xte)
            acc = float(np.mean(np.where(z >= 0, 1.0, -1.0) == yte))
        passes = sum(float(h.get("n_passes", 0.0)) for h in res.history)
        rows.append(
            (
                C / zero.C_max,
                t,
                res.iterations,
                passes,
                res.gap,
                res.status.value,
                int(np.sum(res.kernel_weights > 0)),
                acc,
            )
        )
        prev = res
    return rows


def predict(bank: Any, beta: np.ndarray, bias: float, Xte: Any) -> np.ndarray:
    """Decision values of the test points through the device map of the factors (no test factor rows)."""
    fmap = bank.factor_map
    return fmap.lib.host(fmap.decision_x(fmap.lib.asarray(beta), bias, Xte))


def svc_rows(Xtr: Any, ytr: np.ndarray, Xte: Any, yte: np.ndarray) -> list[str]:
    """scikit-learn's ``SVC`` on the same points as loaded (sparse CSR), on this CPU: at its defaults, with the
    Gaussian width of ``bench_large_n.py`` (gamma 0.05, C 1), and tuned by ``GridSearchCV`` over gamma and C
    (the grid of ``bench_vs_svc.py``, 3-fold)."""
    from sklearn.svm import SVC

    from bench_vs_svc import fit_method  # the grid of the SVC benchmark

    fits = (
        ("SVC() (this CPU)", lambda: SVC().fit(Xtr, ytr)),
        ("SVC(gamma=0.05) (this CPU)", lambda: SVC(gamma=0.05).fit(Xtr, ytr)),
        ("GridSearchCV(SVC) (this CPU)", lambda: fit_method("svc_grid", Xtr, ytr)),
    )
    rows = []
    for label, fit in fits:
        t0 = time.perf_counter()
        svc = fit()
        t = time.perf_counter() - t0
        rows.append(f"  | {label} | - | {t:.3f} | - | - | - | - | - | {svc.score(Xte, yte):.4f} |")
    return rows


def run_set(name: str, args: argparse.Namespace, lib: Any, copy_bw: float) -> list[str]:
    options = {
        k: v for k, v in (("max_hessian_flops", args.max_hessian_flops), ("cg_sketch", args.cg_sketch)) if v is not None
    }
    Xtr, ytr, Xte, yte = load(name)
    if args.points:
        rng = np.random.default_rng(0)
        tr = rng.choice(Xtr.shape[0], min(args.points, Xtr.shape[0]), replace=False)
        te = rng.choice(Xte.shape[0], min(max(args.points // 3, 1), Xte.shape[0]), replace=False)
        Xtr, ytr, Xte, yte = Xtr[tr], ytr[tr], Xte[te], yte[te]
    if args.factor == "pivoted_cholesky":
        factor = f"pivoted Cholesky to rank {args.landmarks} per kernel"

        def build() -> Any:
            return pivoted_cholesky_on_device(BANK, Xtr, lib, rank=args.landmarks, precision=args.precision)
    else:
        factor = f"{args.landmarks} landmarks"

        def build() -> Any:
            return nystroem_on_device(BANK, Xtr, lib, landmarks=args.landmarks, precision=args.precision)

    t_fac, bank = timed(lib, build)
    t_proj, t_exp = pass_times(bank)
    gib = bank.nbytes / 2**30
    out = [
        f"\n{name}: {Xtr.shape[0]} training / {Xte.shape[0]} test points, {bank.shape[0]} kernels, "
        f"{factor}, total rank {bank.total_rank} "
        f"(per kernel {int(bank.ranks.min())}-{int(bank.ranks.max())}), bank {gib:.2f} GiB {args.precision}, "
        f"relative trace left out {float(np.sum(bank.trace_error)) / bank.shape[0]:.2e}",
        f"  factorization (train + test map): {t_fac:.3f} s",
        f"  pass L^T v: {t_proj * 1e3:.2f} ms = {bank.nbytes / t_proj / 1e9:.1f} GB/s "
        f"({bank.nbytes / t_proj / copy_bw:.0%} of the copy bandwidth); "
        f"L beta: {t_exp * 1e3:.2f} ms = {bank.nbytes / t_exp / 1e9:.1f} GB/s ({bank.nbytes / t_exp / copy_bw:.0%})",
    ]
    routes = [
        (
            f"apg on {lib.library} ({lib.name})",
            bank,
            APG(tol=args.tol, device=args.device, array_library=args.library, precision=args.precision, **options),
        )
    ]
    if args.cpu:
        host = FactorBank(bank.lib.host(bank.LT), bank.starts, factor_map=bank.factor_map)
        routes += [
            ("apg on numpy (this CPU)", host, APG(tol=args.tol, **options)),
            ("bcd (this CPU)", host, BCD(tol=args.tol)),
        ]
    header = "  | route | C/C_max | time s | steps | passes | gap | status | active | test acc |"
    out += ["", header, "  |" + "---|" * 9]
    totals = []
    for label, b, engine in routes:
        rows = path(b, ytr, Xte, yte, engine, args)
        total = sum(r[1] for r in rows)
        totals.append((label, total, max(r[4] for r in rows), max(r[7] for r in rows)))
        for ratio, t, it, npass, gap, status, act, acc in rows:
            out.append(
                f"  | {label} | {ratio:.3g} | {t:.3f} | {it} | {npass:.1f} | {gap:.1e} | {status} | {act} | {acc:.4f} |"
            )
    if args.svc:
        out += svc_rows(Xtr, ytr, Xte, yte)
    out.append("")
    base = totals[0][1]
    for label, total, gap, acc in totals:
        out.append(
            f"  {label}: path of {args.n_C} C in {total:.2f} s ({total / base:.2f}x the first route), "
            f"largest gap {gap:.1e}, best test accuracy {acc:.4f} (SVC {SVC_ACCURACY[name]:.4f} on all the points, bench_large_n.py)"
        )
    return out


def check_against_numpy(lib: Any, precision: str) -> list[str]:
    """Before any timing, on 1,000 a9a points: the device's Nyström kernels :math:`L_m^\top L_m` against
    numpy's (the factors themselves are defined up to a rotation), its two passes against numpy's on the
    same factors (fresh random vectors) and one certified solve's objective, as relative differences."""
    Xtr, ytr, _, _ = load("a9a")
    rows = np.random.default_rng(5).choice(Xtr.shape[0], 1000, replace=False)
    X, y = Xtr[rows], ytr[rows]
    dev = nystroem_on_device(BANK[:1], X, lib, landmarks=100, precision=precision)
    ref = nystroem_on_device(BANK[:1], X, array_library("cpu", "numpy"), landmarks=100)
    same = FactorBank(dev.lib.host(dev.LT), dev.starts)  # the device's factors on the host
    rng = np.random.default_rng(int(time.time()))
    v, beta = rng.standard_normal(X.shape[0]), rng.standard_normal(dev.total_rank)

    def rel(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    def kernels(bank: Any) -> np.ndarray:
        LT = bank.lib.host(bank.LT) if hasattr(bank, "lib") else bank.LT
        return np.stack([LT[s:e, :300].T @ LT[s:e, :300] for s, e in zip(bank.starts[:-1], bank.starts[1:])])

    errors = {
        "kernels": rel(kernels(dev), kernels(ref)),
        "L^T v": rel(dev.project(v), same.project(v)),
        "L beta": rel(dev.expand(beta), same.expand(beta)),
    }
    solved = []
    for bank, library, prec in ((dev, lib.library, precision), (ref, "numpy", "float64")):
        zero = zero_solution(Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=1.0))
        problem = Problem(K=bank, y=y, loss=Logistic(), regularizer=L1(), C=0.05 * zero.C_max)
        tol = 1e-4 if prec == "float32" else 1e-8
        device = lib.name if bank is dev else "cpu"
        solved.append(APG(tol=tol, device=device, array_library=library, precision=prec).solve(problem))
    errors["objective"] = abs(solved[0].objective - solved[1].objective) / abs(solved[1].objective)
    ok = all(math.isfinite(e) for e in errors.values()) and solved[0].converged
    return [
        "check against numpy (a9a, 1,000 points, 10 kernels, 100 landmarks): "
        + ", ".join(f"{k} {e:.1e}" for k, e in errors.items())
        + f"; the device's solve {solved[0].status.value} at gap {solved[0].gap:.1e}"
        + ("" if ok else "  <-- NOT OK")
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--library", default="auto", help="array library: auto, numpy, torch, cupy, array_api_strict")
    ap.add_argument("--precision", default="float64", choices=("float64", "float32"))
    ap.add_argument("--data", nargs="+", default=["a9a", "w8a"], choices=("a9a", "w8a"))
    ap.add_argument("--factor", default="nystroem", choices=("nystroem", "pivoted_cholesky"))
    ap.add_argument("--landmarks", type=int, default=1000, help="Nyström's landmarks, or pivoted Cholesky's rank")
    ap.add_argument("--n-C", type=int, default=10)
    ap.add_argument("--lowest", type=float, default=0.01, help="the last C over C_max")
    ap.add_argument("--regularizer", default="l1", choices=tuple(REGULARIZERS))
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument(
        "--max-hessian-flops",
        type=float,
        default=None,
        help="apg's max_hessian_flops (0: every Newton system by conjugate gradients; default: the engine's)",
    )
    ap.add_argument(
        "--cg-sketch", type=int, default=None, help="apg's cg_sketch (the preconditioner's rank; default: the engine's)"
    )
    ap.add_argument("--copy-gib", type=float, default=2.0)
    ap.add_argument("--cpu", action="store_true", help="also the same path on this CPU: apg on numpy, and bcd")
    ap.add_argument("--svc", action="store_true", help="also scikit-learn's SVC on the same points, on this CPU")
    ap.add_argument(
        "--points",
        type=int,
        default=0,
        help="a random subset of this many training points (a third as many test points)",
    )
    ap.add_argument("--small", action="store_true", help="1,500 training points, 50 landmarks, 3 values of C")
    args = ap.parse_args(argv)
    if args.small:
        args.points = args.points or 1500
        args.landmarks, args.n_C, args.copy_gib = min(args.landmarks, 50), min(args.n_C, 3), min(args.copy_gib, 0.0625)
    lib = array_library(args.device, args.library)
    if lib.library != "numpy":
        print("\n".join(check_against_numpy(lib, args.precision)), flush=True)
    copy_bw = copy_bandwidth(lib, args.copy_gib)
    print(f"device {lib.name} through {lib.library}: copy bandwidth {copy_bw / 1e9:.1f} GB/s ({args.copy_gib:g} GiB)")
    for name in args.data:
        print("\n".join(run_set(name, args, lib, copy_bw)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
