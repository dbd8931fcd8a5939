"""Running a sweep: the output directory, resuming, the tasks on a backend, ``results.csv``, the best refit."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..io import OutputError, check_output_dir, make_dir, write_json, write_synced, write_text
from ..solving import created_now, solve_prepared
from ..spec import SpecError, validate_spec
from .backends import check_backend, connect_backend, default_threads
from .grid import Sweep, Task, solve_task
from .results import BEST_DIR, COLUMNS, KEY_COLUMNS, RESULTS, SWEEP_JSON, Best, SweepResult
from .results import csv_cell, csv_text, read_results, row_key, score_column, select_best

logger = logging.getLogger("mklkit.sweep")

#: Seconds without a finished task between two ``heartbeat`` progress events.
HEARTBEAT_S = 30.0

_Progress = Optional[Callable[[dict[str, Any]], Any]]
_Rows = Mapping[int, list[dict[str, Any]]]


class SweepTaskError(RuntimeError):
    """Some tasks raised; their rows are missing from ``results.csv`` (``resume`` retries them)."""


def _check_out(sweep: Sweep, out: Path, resume: bool, force: bool, key: str) -> None:
    allowed = "--resume to finish it, --force to start over, or a new directory (--out DIR)"
    try:
        check_output_dir(out, resume or force, (RESULTS, SWEEP_JSON), "a sweep", allowed)
        if not (resume or force):
            for d in _best_dirs(sweep, out).values():
                check_output_dir(d)
    except OutputError as exc:
        raise sweep.error(key, exc.problem, exc.path, exc.allowed) from None


def _remove_earlier_outputs(sweep: Sweep, out: Path, key: str) -> None:
    """Remove an earlier sweep's ``best/`` before a forced sweep writes: renamed aside first, so that an
    interruption never leaves a partly deleted one; hidden copies left by an earlier interruption go too."""
    best = out / BEST_DIR
    if best.exists() or best.is_symlink():
        try:
            os.replace(best, out / f".{BEST_DIR}.removed-{secrets.token_hex(4)}")
        except OSError as exc:
            raise sweep.error(
                key,
                f"cannot remove the earlier sweep's {BEST_DIR}/ ({exc.strerror or exc})",
                str(best),
                "a directory whose earlier outputs --force may remove, or a new directory (--out DIR)",
            ) from None
    for old in out.glob(f".{BEST_DIR}.removed-*"):
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                old.unlink()


def _best_dirs(sweep: Sweep, out: Path) -> dict[int, Path]:
    """Where the refit of each data set goes: ``OUT/best`` (one data set) or ``OUT/best/<name>``."""
    if len(sweep.data_values) == 1:
        return {0: out / BEST_DIR}
    dirs: dict[int, Path] = {}
    used: set[str] = set()
    for i, v in enumerate(sweep.data_values):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(v)).name.split(".")[0]) or f"data{i}"
        if name in used:
            name = f"{name}-{i}"
        used.add(name)
        dirs[i] = out / BEST_DIR / name
    return dirs


def run_sweep(
    sweep: Sweep,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    workers: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: _Progress = None,
    out_key: str | None = None,
    heartbeat_s: float | None = None,
) -> SweepResult:
    """Run every task of a sweep, append its rows to ``results.csv``, refit the best (``docs/sweeps.md``).

    Parameters
    ----------
    workers, scheduler : int, str
        1: this process; N > 1: joblib's loky pool (``cpu_count // N`` threads a worker); or the address
        of a ``dask.distributed`` scheduler (each task single-threaded), not both.
    resume, force : bool
        Keep the complete tasks of an earlier run of the same grid in ``out_dir`` (default
        ``sweep.output_dir``); or start over there (its ``best/`` refits are removed first).
    progress : callable, optional
        ``progress(event)``; ``event["event"]`` is ``start`` (``n_tasks``, ``n_skipped``, ``backend``,
        ``n_rows``), ``task`` (``done``, ``total``, ``task``, ``failed``, ``error``, ``time_s``,
        ``elapsed_s``, ``eta_s``), ``heartbeat`` (``done``, ``total``, ``running``, ``elapsed_s``,
        ``longest``, ``longest_s``; from a helper thread every ``heartbeat_s`` seconds without a
        finished task) or ``refit`` (``dataset``, ``dir``).  An exception it raises stops the sweep
        after the task's rows were saved.
    out_key, heartbeat_s : str, float, optional
        How errors name the output directory (``--out`` or ``output.dir``); the heartbeat interval
        (default :data:`HEARTBEAT_S`; 0 or ``inf``: none).

    Raises
    ------
    SpecError
        Invalid grid, data, folds, or output directory (before any solve).
    SweepTaskError
        Some tasks raised; the other rows are saved, ``resume`` retries them.
    """
    t_start = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else sweep.output_dir
    key = out_key or ("--out" if out_dir is not None else "output.dir")
    check_backend(sweep, workers, scheduler)
    _check_out(sweep, out, resume, force, key)
    sweep.check()
    tasks = sweep.tasks(threads=1 if scheduler is not None else (default_threads(workers) if workers > 1 else None))
    fingerprint = sweep.fingerprint()
    done = _kept_rows(sweep, tasks, out, fingerprint) if resume and (out / RESULTS).exists() else {}
    meta = _start_output(sweep, out, key, tasks, done, fingerprint, force)
    todo = [t for t in tasks if t.index not in done]
    backend = connect_backend(sweep, min(workers, len(todo)), scheduler) if todo else None
    backend_name = backend.name if backend is not None else "none (nothing left to solve)"
    start = {"event": "start", "n_tasks": len(tasks), "n_skipped": len(done), "backend": backend_name}
    _emit(progress, {**start, "n_rows": sweep.n_rows})
    new = _run_tasks(backend, todo, out / RESULTS, progress, heartbeat_s) if backend is not None else {}
    meta.update(backend=backend_name, n_run=len(new), n_skipped=len(done))
    rows = [r for t in tasks for r in done.get(t.index) or new[t.index]]
    return _complete(sweep, out, rows, meta, progress, t_start)


def _kept_rows(
    sweep: Sweep, tasks: Sequence[Task], out: Path, fingerprint: dict[str, Any]
) -> dict[int, list[dict[str, str]]]:
    """The rows of the tasks that an earlier run of the same grid in ``out`` completed (``resume``)."""
    results_path, sweep_path = out / RESULTS, out / SWEEP_JSON
    try:
        previous = json.loads(sweep_path.read_text(encoding="utf-8")) if sweep_path.exists() else None
    except (OSError, ValueError):
        previous = None
    if previous is None or previous.get("grid") != fingerprint:
        what = (
            f"{SWEEP_JSON} is missing or unreadable" if previous is None else "the grid or the cross-validation differs"
        )
        raise sweep.error(
            "--resume",
            f"{results_path} was written by another sweep ({what})",
            str(out),
            "the same spec and --set values, --force to start over, or a new --out",
        )
    try:
        old = read_results(results_path)
    except OutputError as exc:
        raise sweep.error("--resume", f"{RESULTS}: {exc.problem}", str(results_path), exc.allowed) from None
    by_key = {tuple(r[c] for c in KEY_COLUMNS): r for r in old}
    done = {}
    for t in tasks:
        rows = [by_key.get(row_key({**t.labels, "C": C, "split": t.split})) for C in sweep.Cs]
        if None not in rows:
            done[t.index] = rows
    return done


def _start_output(
    sweep: Sweep, out: Path, key: str, tasks: Sequence[Task], done: _Rows, fingerprint: dict[str, Any], force: bool
) -> dict[str, Any]:
    """Create ``out``, write ``sweep.json`` (not complete) and ``results.csv`` holding the rows kept; the metadata."""
    from .. import __version__

    try:
        make_dir(out)
    except OutputError as exc:
        raise sweep.error(key, exc.problem, exc.path, exc.allowed) from None
    meta: dict[str, Any] = {
        "spec_file": sweep.file,
        "grid": fingerprint,
        "axes": [k for k, _ in sweep.axes],
        "n_configs": len(sweep.configs),
        "n_tasks": len(tasks),
        "n_rows": sweep.n_rows,
        "columns": list(COLUMNS),
        "mklkit_version": __version__,
        "created": created_now(),
        "complete": False,
    }
    if force:
        _remove_earlier_outputs(sweep, out, key)
    write_json(out / SWEEP_JSON, meta)
    # exactly the complete tasks kept (a cut-off line or a partial task is dropped)
    write_text(out / RESULTS, csv_text([r for t in tasks if t.index in done for r in done[t.index]], header=True))
    return meta


def _run_tasks(
    backend: Any, todo: Sequence[Task], results_path: Path, progress: _Progress, heartbeat_s: float | None
) -> dict[int, list[dict[str, Any]]]:
    """Solve the tasks left on the backend (then closed), appending each one's rows to ``results.csv``
    and reporting a ``task`` event; the rows by task index."""
    new: dict[int, list[dict[str, Any]]] = {}
    errors: list[tuple[Task, BaseException]] = []
    t_run = time.perf_counter()
    every = HEARTBEAT_S if heartbeat_s is None else float(heartbeat_s)
    beat = progress is not None and 0 < every < float("inf")
    watch = _Heartbeat(backend, len(todo), progress, every, t_run) if beat else None
    try:
        for i, (task, rows, exc) in enumerate(backend.map(solve_task, todo), start=1):
            if watch is not None:
                watch.done, watch.last = i, time.perf_counter()
            if exc is None:
                write_synced(results_path, csv_text(rows), "a")  # one task's rows in one write
                new[task.index] = rows
            else:
                errors.append((task, exc))
                logger.warning("task %d (%s) failed: %s", task.index, task.describe(), exc)
            elapsed = time.perf_counter() - t_run
            event = {"event": "task", "done": i, "total": len(todo), "task": task.describe(), "failed": exc is not None}
            event["error"] = None if exc is None else f"{type(exc).__name__}: {exc}"
            event["time_s"] = sum(float(r["time_s"]) for r in rows) if rows else None
            _emit(progress, {**event, "elapsed_s": elapsed, "eta_s": elapsed / i * (len(todo) - i)})
    finally:
        if watch is not None:
            watch.stop.set()
            watch.thread.join()
        backend.close()
    if errors:
        task, exc = errors[0]
        if isinstance(exc, (SpecError, OutputError)):
            raise exc
        raise SweepTaskError(
            f"{len(errors)} of {len(todo)} task(s) failed; their rows are missing from {results_path} "
            f"('mklkit sweep --resume' retries them); first: task {task.index} ({task.describe()}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return new


def _complete(
    sweep: Sweep,
    out: Path,
    rows: Sequence[Mapping[str, Any]],
    meta: dict[str, Any],
    progress: _Progress,
    t_start: float,
) -> SweepResult:
    """Rewrite ``results.csv`` in grid order, refit the best, mark ``sweep.json`` complete; the result."""
    rows_all = [{c: csv_cell(r.get(c)) for c in COLUMNS} for r in rows]
    write_text(out / RESULTS, csv_text(rows_all, header=True))
    best = _refit_best(sweep, out, rows_all, progress)
    meta.update(complete=True, time_s=time.perf_counter() - t_start, best=[b.to_dict() for b in best])
    write_json(out / SWEEP_JSON, meta)
    files = {"results": out / RESULTS, "sweep": out / SWEEP_JSON, **{f"best:{b.dataset}": b.dir for b in best}}
    n_run, n_skipped, backend = meta["n_run"], meta["n_skipped"], meta["backend"]
    return SweepResult(sweep, out, rows_all, n_run, n_skipped, best, backend, time.perf_counter() - t_start, files)


class _Heartbeat:
    """A helper thread calling ``progress`` with a ``heartbeat`` event every ``every`` seconds without a
    finished task (``done`` and ``last`` are set by the caller); it polls the backend's running tasks
    once a second.  Stop it with ``stop.set()`` and join ``thread``."""

    def __init__(self, backend: Any, total: int, progress: Callable[..., Any], every: float, t_run: float) -> None:
        self.backend, self.total, self.progress, self.every, self.t_run = backend, total, progress, every, t_run
        self.done, self.last = 0, t_run
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="mklkit-sweep-heartbeat", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(min(1.0, self.every)):
            try:
                running = self.backend.running()
            except Exception:  # noqa: BLE001 - a backend shutting down: no more heartbeats
                return
            now = time.perf_counter()
            if now - self.last < self.every:
                continue
            self.last = now
            oldest = min(running, key=lambda ts: ts[1]) if running else None
            event = {"event": "heartbeat", "done": self.done, "total": self.total, "running": len(running)}
            event["elapsed_s"] = now - self.t_run
            event["longest"] = None if oldest is None else oldest[0].describe()
            event["longest_s"] = None if oldest is None else now - oldest[1]
            try:
                self.progress(event)
            except BaseException as exc:  # noqa: BLE001 - the main thread reports on its own events
                logger.debug("sweep heartbeat stopped: %s", exc)
                return


def _emit(progress: _Progress, event: dict[str, Any]) -> None:
    if progress is not None:
        progress(event)


def _refit_best(sweep: Sweep, out: Path, rows: Sequence[Mapping[str, str]], progress: _Progress) -> list[Best]:
    column, _ = score_column(sweep.task_kind)
    dirs = _best_dirs(sweep, out)
    result = []
    for di, config, C, mean, std, n in select_best(sweep, rows):
        raw = {**config.raw, "problem": {**config.raw["problem"], "C": C}}
        prepared = validate_spec(raw, sweep.file, sweep.folder, sweep.overridden).prepare(progress=False)
        try:  # what mklkit.api.run does for one problem
            refit = solve_prepared(prepared, None, warn_compilation=True)
        finally:
            prepared.close()
        refit.write(dirs[di], force=True)
        b = Best(config.labels["dataset"], dict(config.labels), C, column, mean, std, n, refit, dirs[di])
        result.append(b)
        _emit(progress, {"event": "refit", "dataset": b.dataset, "dir": str(b.dir)})
    return result
