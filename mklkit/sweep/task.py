"""One task of a sweep: a grid point without C on one fold, solved in whichever process runs it."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..pipeline import Data, fold
from ..solving import RunResult, solve_prepared
from ..spec import validate_spec
from .grid import Task, raw_data

_DATA_CACHE: dict[str, Data] = {}


def _limit_threads(n: int | None) -> None:
    if n is None:
        return
    try:
        import numba

        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    except Exception:  # noqa: BLE001 - a thread limit is an optimisation only  # pragma: no cover
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(n))
    except Exception:  # noqa: BLE001  # pragma: no cover
        pass


def solve_task(task: Task) -> list[dict[str, Any]]:
    """One row (a mapping of :data:`COLUMNS`) per C: the fold's bank built once, every C solved in
    descending order, warm-started; the same rows in any process."""
    _limit_threads(task.threads)
    spec = validate_spec(task.raw, task.file, Path(task.folder), task.overridden)
    key = json.dumps([task.file, task.raw.get("data"), spec.problem.loss.task], sort_keys=True, default=str)
    data = _DATA_CACHE.get(key)
    if data is None:
        data = raw_data(spec)
        _DATA_CACHE.clear()
        _DATA_CACHE[key] = data
    part = fold(data, task.train, task.val, standardized=spec.data.standardize)
    t0 = time.perf_counter()
    prepared = spec.prepare(progress=False, data=part)
    bank_s = time.perf_counter() - t0
    assert prepared.problem is not None
    warm = bool(getattr(spec.engine.engine, "supports_warm_start", False))
    rows, previous = [], None
    for C in task.Cs:
        spec_c = spec.model_copy(update={"problem": spec.problem.model_copy(update={"C": C})})
        prep_c = replace(prepared.with_C(C), spec=spec_c)
        run = solve_prepared(prep_c, None, warm_start=previous if warm else None, warn_trivial=False)
        rows.append(_row(task, C, run, bank_s, warm and previous is not None))
        previous = run.result
    return rows


def _row(task: Task, C: float, run: RunResult, bank_s: float, warm: bool) -> dict[str, Any]:
    r = run.result
    m = run.metrics
    return {
        **task.labels,
        "C": C,
        "split": task.split,
        "status": str(r.status),
        "converged": bool(r.converged),
        "objective": float(r.objective),
        "dual_objective": float(r.dual_objective),
        "gap": float(r.gap),
        "iterations": int(r.iterations),
        "n_active": run.n_active,
        "n_kernels": run.n_kernels,
        "n_train": run.n_train,
        "n_val": run.n_test,
        "train_accuracy": m.get("train_accuracy"),
        "val_accuracy": m.get("test_accuracy"),
        "train_rmse": m.get("train_rmse"),
        "val_rmse": m.get("test_rmse"),
        "time_s": float(run.timings.get("solve_s", r.time_s)),
        "bank_s": float(bank_s),
        "warm_start": warm,
    }
