"""Kernel-sharded SpicyMKL solves on a local Dask cluster (``mklkit.kernels.sharded``).

Data: Ringnorm (bundled), a random training set, standardized; Gaussian
kernels with widths 5χ²+0.1 on random subsets of 10/25/50/75 % of the
features, unit trace (the kernels of ``bench_spicy_scaling.py``); C = 0.05,
tol 1e-2 unless ``--tol``.

1. **Communication and time** (``--n``, ``--m``): each problem is solved on
   the in-memory bank and on a ShardedBank over ``--workers`` worker
   processes (one thread each).  The table gives the solver time of both,
   the bytes of arrays sent to and received from the workers per outer
   iteration and per Newton step (the bank's own count of the payloads it
   ships: N-vectors, per-kernel scalars and rows, N x N Hessian pieces;
   framing is not counted), the number of shard calls, and the largest
   difference of α against the in-memory solution.
2. **A bank larger than one worker** (``--big-n``, ``--factors``): ``--big-workers``
   workers with ``memory_limit = --worker-memory``; for each factor f a bank of about
   f x one worker's limit (M = f·limit / 8N²) is built on the workers and
   solved.  A single worker is first asked to hold the bank (refused before
   anything is built when it exceeds its budget).  The largest M·N² that was
   built and solved is printed.

    python benchmarks/bench_sharded.py                       # both parts
    python benchmarks/bench_sharded.py --skip-big --m 200
    python benchmarks/bench_sharded.py --skip-comm --big-workers 6 --worker-memory 1GiB --factors 2 2.5

Prints tables; writes nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from mklkit.data import Standardizer, load_builtin
from mklkit.engines.spicy import Spicy
from mklkit.kernels import BankError, KernelBank, format_bytes
from mklkit.kernels.sharded import ShardedBank, ShardLostError
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_spicy_scaling import C, FRACTIONS, PROBLEMS  # noqa: E402


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    ds = load_builtin("ringnorm")
    rng = np.random.default_rng(seed)
    rows = rng.permutation(ds.n_samples)[:n]
    X = np.asarray(ds.X, dtype=np.float64)[rows]
    X = Standardizer().fit(X).transform(X)
    return X, np.asarray(ds.y, dtype=np.float64)[rows]


def entries(m: int, seed: int = 0) -> list[dict]:
    sizes = [m // 4 + (1 if i < m % 4 else 0) for i in range(4)]
    return [
        {
            "function": "rbf",
            "width": "chi2",
            "seed": 1000 * seed + i,
            "features": {"random_subsets": k, "size": f, "seed": 1000 * seed + i},
        }
        for i, (k, f) in enumerate(zip(sizes, FRACTIONS))
        if k > 0
    ]


def parse_bytes(text: str) -> int:
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    t = text.strip().lower()
    for u, f in units.items():
        if t.endswith(u):
            return int(float(t[: -len(u)]) * f)
    return int(float(t))


def solve(K, y, pname: str, tol: float):
    loss_cls, reg = PROBLEMS[pname]
    pb = Problem(K=K, y=y, loss=loss_cls(), regularizer=reg(), C=C)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        res = Spicy(tol=tol).solve(pb)
    return time.perf_counter() - t0, res


def newton_steps(res) -> int:
    steps = [h.get("newton_steps") for h in res.history]
    if steps and all(s is not None for s in steps):
        return int(sum(steps))
    return res.iterations  # one-step method: an iteration is a Newton step


def cluster(workers: int, memory_limit):
    from distributed import Client, LocalCluster

    cl = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit, dashboard_address=None
    )
    return cl, Client(cl)


def comm_part(args) -> None:
    X, y = data(args.n)
    ent = entries(args.m)
    local = KernelBank.build(X, ent, progress=False).K
    cl, client = cluster(args.workers, "auto")
    try:
        bank = ShardedBank.build(client, X, ent)
        M, N = bank.shape[0], bank.shape[1]
        print(
            f"ringnorm N = {N}, M = {M}, bank {format_bytes(8 * M * N * N)} over "
            f"{len(bank.workers)} workers; C = {C}, tol {args.tol:g}"
        )
        print(
            f"{'problem':>9} {'it':>3} {'newton':>6} {'local s':>8} {'shard s':>8} "
            f"{'sent/it':>10} {'recv/it':>10} {'sent/nt':>10} {'recv/nt':>10} "
            f"{'calls/it':>8} {'max|da|':>9}"
        )
        for pname in args.problems:
            t_loc, r_loc = solve(local, y, pname, args.tol)
            c0 = bank.comm.copy()
            t_sh, r_sh = solve(bank, y, pname, args.tol)
            c = bank.comm - c0
            it = max(r_sh.iterations, 1)
            nt = max(newton_steps(r_sh), 1)
            diff = float(np.max(np.abs(r_sh.alpha - r_loc.alpha)))
            same = "" if r_sh.iterations == r_loc.iterations else f" (local {r_loc.iterations} it)"
            print(
                f"{pname:>9} {r_sh.iterations:>3} {nt:>6} {t_loc:>8.3f} {t_sh:>8.3f} "
                f"{format_bytes(c.sent / it):>10} {format_bytes(c.received / it):>10} "
                f"{format_bytes(c.sent / nt):>10} {format_bytes(c.received / nt):>10} "
                f"{c.calls / it:>8.1f} {diff:>9.1e}{same}"
            )
        print(
            f"(for scale: one pass of M x N products {format_bytes(8 * M * N)}, "
            f"one N x N piece {format_bytes(8 * N * N)}, the bank {format_bytes(8 * M * N * N)})"
        )
        bank.close()
    finally:
        client.close()
        cl.close()


def big_part(args) -> None:
    limit = parse_bytes(args.worker_memory)
    N = args.big_n
    X, y = data(N, seed=1)
    cl, client = cluster(args.big_workers, limit)
    largest = None
    try:
        print(
            f"\nworkers: {args.big_workers} x memory_limit {format_bytes(limit)}; N = {N}, "
            f"{args.big_problem}, tol {args.tol:g}"
        )
        print(
            f"{'M':>6} {'M*N^2':>14} {'bank':>10} {'x limit':>7} {'per shard':>10} "
            f"{'build s':>8} {'solve s':>8} {'it':>4}  status"
        )
        for f in args.factors:
            M = max(1, int(f * limit / (8.0 * N * N)))
            ent = entries(M, seed=1)
            size = 8 * M * N * N
            client.restart()  # every size on fresh workers
            one = sorted(client.scheduler_info()["workers"])[:1]
            single = f"the bank is below one worker's memory_limit ({format_bytes(limit)})"
            if size > limit:
                try:
                    ShardedBank.build(client, X, ent, workers=one).close()
                    single = "one worker took it"
                except BankError as exc:  # refused before anything is built
                    single = "one worker refuses it: " + str(exc).split(";")[0]
            t0 = time.perf_counter()
            try:
                bank = ShardedBank.build(client, X, ent)
            except (BankError, ShardLostError, Exception) as exc:  # noqa: BLE001 - reported
                print(
                    f"{M:>6} {M * N * N:>14,d} {format_bytes(size):>10} {size / limit:>7.2f} "
                    f"{'':>10} {'':>8} {'':>8} {'':>4}  build failed: {type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:160]}"
                )
                break
            t_build = time.perf_counter() - t0
            shard = max(i["nbytes"] for i in bank.shard_info())
            try:
                t_solve, res = solve(bank, y, args.big_problem, args.tol)
                status = res.status.value if hasattr(res.status, "value") else str(res.status)
                ok = math.isfinite(res.objective)
                print(
                    f"{M:>6} {M * N * N:>14,d} {format_bytes(size):>10} {size / limit:>7.2f} "
                    f"{format_bytes(shard):>10} {t_build:>8.1f} {t_solve:>8.1f} "
                    f"{res.iterations:>4}  {status}, gap {res.gap:.1e}"
                )
                print(f"{'':>6} {single}")
                if ok:
                    largest = (M, size)
            except ShardLostError as exc:
                print(
                    f"{M:>6} {M * N * N:>14,d} {format_bytes(size):>10} {size / limit:>7.2f} "
                    f"{format_bytes(shard):>10} {t_build:>8.1f} {'':>8} {'':>4}  lost: "
                    f"{' '.join(str(exc).split())[:160]}"
                )
                break
            finally:
                bank.close()
        if largest is not None:
            M, size = largest
            print(
                f"largest M*N^2 handled: {M * N * N:,d} (M = {M}, N = {N}; {format_bytes(size)}, "
                f"{size / limit:.2f} x one worker's memory_limit)"
            )
        else:
            print("no bank was built and solved")
    finally:
        client.close()
        cl.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400, help="training points (part 1)")
    ap.add_argument("--m", type=int, default=100, help="kernels (part 1)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--worker-memory", default="1GiB", help="memory_limit of each worker (part 2)")
    ap.add_argument("--big-n", type=int, default=1500, help="training points (part 2)")
    ap.add_argument("--big-workers", type=int, default=4, help="workers (part 2)")
    ap.add_argument("--big-problem", default="l1-logit", choices=list(PROBLEMS))
    ap.add_argument(
        "--factors",
        type=float,
        nargs="+",
        default=[0.5, 1.25, 1.5, 2.0],
        help="bank size in units of one worker's memory_limit (part 2)",
    )
    ap.add_argument("--skip-comm", action="store_true")
    ap.add_argument("--skip-big", action="store_true")
    args = ap.parse_args()
    if not args.skip_comm:
        comm_part(args)
    if not args.skip_big:
        big_part(args)


if __name__ == "__main__":
    main()
