"""Running a sweep: the output directory, resuming, the tasks on a backend, ``results.csv``, the best refit."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..io import OutputError, check_output_dir, write_json, write_text
from ..solving import solve_prepared
from ..spec import SpecError, validate_spec
from .backends import check_backend, connect_backend, default_threads
from .grid import Sweep, Task
from .results import (
    BEST_DIR,
    COLUMNS,
    KEY_COLUMNS,
    RESULTS,
    SWEEP_JSON,
    Best,
    SweepResult,
    append_rows,
    csv_cell,
    csv_text,
    read_results,
    row_key,
    score_column,
    select_best,
)
from .task import solve_task

__all__ = ["SweepTaskError", "run_sweep"]

logger = logging.getLogger("mklkit.sweep")

#: Seconds without a finished task after which a sweep reports a ``heartbeat``
#: progress event (tasks finished and running, the longest running task), and
#: again after as many more (``run_sweep(heartbeat_s=...)`` overrides it).
HEARTBEAT_S = 30.0


class SweepTaskError(RuntimeError):
    """Some tasks raised; their rows are missing from ``results.csv`` (``resume`` retries them)."""


def _check_out(sweep: Sweep, out: Path, resume: bool, force: bool, key: str) -> None:

    if out.exists() and not out.is_dir():
        raise sweep.error(key, "exists and is not a directory", str(out), "a new or existing directory")
    if resume or force:
        return
    held = [n for n in (RESULTS, SWEEP_JSON) if (out / n).exists()]
    if held:
        raise sweep.error(
            key,
            f"already holds a sweep ({', '.join(held)}); nothing was overwritten",
            str(out),
            "--resume to finish it, --force to start over, or a new directory (--out DIR)",
        )
    for d in _best_dirs(sweep, out).values():
        try:
            check_output_dir(d, force=False)
        except OutputError as exc:
            raise sweep.error(key, exc.problem, str(d), exc.allowed) from None


def _remove_earlier_outputs(sweep: Sweep, out: Path, key: str) -> None:
    """Remove what an earlier sweep in ``out`` derived from its rows (``best/``) before a forced sweep writes.

    ``best/`` is first renamed to a hidden name and then deleted, so an
    interruption never leaves a partly deleted or a stale ``best/`` beside the
    new sweep's ``results.csv``; a hidden copy left by an earlier interruption
    is deleted too.
    """
    import secrets
    import shutil

    best = out / BEST_DIR
    if best.exists() or best.is_symlink():
        aside = out / f".{BEST_DIR}.removed-{secrets.token_hex(4)}"
        try:
            os.replace(best, aside)
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
            try:
                old.unlink()
            except OSError:
                pass


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
    progress: Callable[[dict[str, Any]], Any] | None = None,
    out_key: str | None = None,
    heartbeat_s: float | None = None,
) -> SweepResult:
    """Run every task of a sweep, append its rows to ``results.csv``, refit the best.

    Parameters
    ----------
    sweep : Sweep
        From :func:`load_sweep`.
    out_dir : path-like, optional
        Default ``sweep.output_dir``.
    workers : int
        1: solve in this process; N > 1: joblib's loky pool of N processes
        (each limited to ``cpu_count // N`` numba/BLAS threads).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address (``tcp://host:8786``); each
        task is one Dask task running single-threaded (start workers with
        ``--nthreads 1`` and as many processes as cores).  Exclusive with
        ``workers > 1``.
    resume : bool
        Keep the complete tasks of an earlier run in ``out_dir`` (same grid)
        and solve the others.
    force : bool
        Start over in a directory holding an earlier sweep; its ``best/``
        refits are removed before anything is written.
    progress : callable, optional
        ``progress(event)`` with ``event["event"]`` one of ``start``
        (``n_tasks``, ``n_skipped``, ``backend``), ``task`` (``done``,
        ``total``, ``task``, ``failed``, ``error``, ``time_s``,
        ``elapsed_s``, ``eta_s``), ``heartbeat`` (``done``, ``total``,
        ``running``, ``elapsed_s``, ``longest``: the label of the longest
        running task or None, ``longest_s``) and ``refit`` (``dataset``,
        ``dir``).  An exception it raises stops the sweep after the task's
        rows were saved.  ``heartbeat`` events come from a helper thread
        (joined before ``run_sweep`` returns) every ``heartbeat_s`` seconds
        without a finished task; an exception raised there only stops them.
    out_key : str, optional
        How errors name the output directory (``--out`` or ``output.dir``).
    heartbeat_s : float, optional
        Seconds between ``heartbeat`` events (default :data:`HEARTBEAT_S`);
        0 or ``inf``: none.

    Returns
    -------
    SweepResult

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
    tasks = _checked_tasks(sweep, out, key, workers, scheduler, resume, force)
    fingerprint = sweep.fingerprint()
    done = _kept_rows(sweep, tasks, out, fingerprint) if resume and (out / RESULTS).exists() else {}
    meta = _start_output(sweep, out, key, tasks, done, fingerprint, force)
    todo = [t for t in tasks if t.index not in done]
    backend = connect_backend(sweep, min(workers, len(todo)), scheduler) if todo else None
    backend_name = backend.name if backend is not None else "none (nothing left to solve)"
    _emit(
        progress,
        {
            "event": "start",
            "n_tasks": len(tasks),
            "n_skipped": len(done),
            "backend": backend_name,
            "n_rows": sweep.n_rows,
        },
    )
    new = _run_tasks(backend, todo, out / RESULTS, progress, heartbeat_s)
    return _complete(sweep, out, tasks, done, new, meta, backend_name, progress, t_start)


def _checked_tasks(
    sweep: Sweep, out: Path, key: str, workers: int, scheduler: str | None, resume: bool, force: bool
) -> list[Task]:
    """Check the backend, the output directory and every grid point and fold; the sweep's tasks."""
    check_backend(sweep, workers, scheduler)
    _check_out(sweep, out, resume, force, key)
    sweep.check()
    threads = 1 if scheduler is not None else (default_threads(workers) if workers > 1 else None)
    return sweep.tasks(threads=threads)


def _kept_rows(
    sweep: Sweep, tasks: Sequence[Task], out: Path, fingerprint: dict[str, Any]
) -> dict[int, list[dict[str, str]]]:
    """The rows of the tasks that an earlier run of the same grid in ``out`` completed (``resume``)."""

    results_path = out / RESULTS
    sweep_path = out / SWEEP_JSON
    try:
        previous = json.loads(sweep_path.read_text(encoding="utf-8")) if sweep_path.exists() else None
    except (OSError, ValueError):
        previous = None
    if previous is None or previous.get("grid") != fingerprint:
        what = (
            "the grid or the cross-validation differs"
            if previous is not None
            else f"{SWEEP_JSON} is missing or unreadable"
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
    done: dict[int, list[dict[str, str]]] = {}
    by_key: dict[tuple, dict[str, str]] = {tuple(r[c] for c in KEY_COLUMNS): r for r in old}
    for t in tasks:
        rows = [by_key.get(row_key({**t.labels, "C": C, "split": t.split})) for C in sweep.Cs]
        if all(r is not None for r in rows):
            done[t.index] = rows  # type: ignore[assignment]
    return done


def _start_output(
    sweep: Sweep,
    out: Path,
    key: str,
    tasks: Sequence[Task],
    done: Mapping[int, list[dict[str, str]]],
    fingerprint: dict[str, Any],
    force: bool,
) -> dict[str, Any]:
    """Create ``out``, write ``sweep.json`` (not complete) and ``results.csv`` holding the rows kept; the metadata."""
    from .. import __version__

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise sweep.error(
            key, f"cannot create the directory ({exc.strerror or exc})", str(out), "a writable path"
        ) from None
    meta: dict[str, Any] = {
        "spec_file": sweep.file,
        "grid": fingerprint,
        "axes": [k for k, _ in sweep.axes],
        "n_configs": len(sweep.configs),
        "n_tasks": len(tasks),
        "n_rows": sweep.n_rows,
        "columns": list(COLUMNS),
        "mklkit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "complete": False,
    }
    if force:
        _remove_earlier_outputs(sweep, out, key)
    write_json(out / SWEEP_JSON, meta)
    # the file holds exactly the complete tasks kept (a cut-off line or a partial task is dropped)
    write_text(out / RESULTS, csv_text([r for t in tasks if t.index in done for r in done[t.index]], header=True))
    return meta


def _run_tasks(
    backend: Any,
    todo: Sequence[Task],
    results_path: Path,
    progress: Callable[[dict[str, Any]], Any] | None,
    heartbeat_s: float | None,
) -> dict[int, list[dict[str, Any]]]:
    """Solve the tasks left on the backend (then closed), appending each one's rows to ``results.csv``.

    Reports a ``task`` event per finished task (and ``heartbeat`` events
    between them); the rows of the tasks solved, by task index.
    """
    new: dict[int, list[dict[str, Any]]] = {}
    errors: list[tuple[Task, BaseException]] = []
    t_run = time.perf_counter()
    every = HEARTBEAT_S if heartbeat_s is None else float(heartbeat_s)
    watch = (
        _Heartbeat(backend, len(todo), progress, every, t_run)
        if backend is not None and todo and progress is not None and 0 < every < float("inf")
        else None
    )
    try:
        if backend is not None and todo:
            for i, (task, rows, exc) in enumerate(backend.map(solve_task, todo), start=1):
                if watch is not None:
                    watch.finished(i)
                if exc is None:
                    append_rows(results_path, rows)
                    new[task.index] = rows
                else:
                    errors.append((task, exc))
                    logger.warning("task %d (%s) failed: %s", task.index, task.describe(), exc)
                _emit(progress, _task_event(i, len(todo), task, rows, exc, t_run))
    finally:
        if watch is not None:
            watch.close()
        if backend is not None:
            backend.close()
    if errors:
        _raise_task_error(errors, len(todo), results_path)
    return new


def _task_event(
    i: int, total: int, task: Task, rows: Sequence[Mapping[str, Any]] | None, exc: BaseException | None, t_run: float
) -> dict[str, Any]:
    """The ``task`` progress event of the ``i``-th of ``total`` tasks to finish."""
    elapsed = time.perf_counter() - t_run
    return {
        "event": "task",
        "done": i,
        "total": total,
        "task": task.describe(),
        "failed": exc is not None,
        "error": None if exc is None else f"{type(exc).__name__}: {exc}",
        "time_s": sum(float(r["time_s"]) for r in rows) if rows else None,
        "elapsed_s": elapsed,
        "eta_s": elapsed / i * (total - i),
    }


def _raise_task_error(errors: Sequence[tuple[Task, BaseException]], total: int, results_path: Path) -> None:
    """Raise the first task's error when it is a user error, else :class:`SweepTaskError` naming it."""

    task, exc = errors[0]
    if isinstance(exc, (SpecError, OutputError)):
        raise exc
    raise SweepTaskError(
        f"{len(errors)} of {total} task(s) failed; their rows are missing from {results_path} "
        f"('mklkit sweep --resume' retries them); first: task {task.index} ({task.describe()}): "
        f"{type(exc).__name__}: {exc}"
    ) from exc


def _complete(
    sweep: Sweep,
    out: Path,
    tasks: Sequence[Task],
    done: Mapping[int, list[dict[str, str]]],
    new: Mapping[int, list[dict[str, Any]]],
    meta: dict[str, Any],
    backend_name: str,
    progress: Callable[[dict[str, Any]], Any] | None,
    t_start: float,
) -> SweepResult:
    """Rewrite ``results.csv`` in grid order, refit the best, mark ``sweep.json`` complete; the result."""

    results_path = out / RESULTS
    sweep_path = out / SWEEP_JSON
    rows_all: list[dict[str, str]] = []
    for t in tasks:
        part = done.get(t.index) or new[t.index]
        rows_all.extend({c: (r[c] if isinstance(r.get(c), str) else csv_cell(r.get(c))) for c in COLUMNS} for r in part)
    write_text(results_path, csv_text(rows_all, header=True))
    best = _refit_best(sweep, out, rows_all, progress)
    files = {"results": results_path, "sweep": sweep_path}
    files.update({f"best:{b.dataset}": b.dir for b in best})
    meta.update(
        {
            "complete": True,
            "backend": backend_name,
            "n_run": len(new),
            "n_skipped": len(done),
            "time_s": time.perf_counter() - t_start,
            "best": [b.to_dict() for b in best],
        }
    )
    write_json(sweep_path, meta)
    return SweepResult(
        sweep=sweep,
        out_dir=out,
        rows=rows_all,
        n_run=len(new),
        n_skipped=len(done),
        best=best,
        backend=backend_name,
        time_s=time.perf_counter() - t_start,
        files=files,
    )


class _Heartbeat:
    """A helper thread reporting ``heartbeat`` events while tasks run for long without finishing.

    Every ``every`` seconds without a finished task it calls ``progress`` with
    the number of tasks finished and running and the longest running task (as
    the backend knows them: :meth:`running`).  It polls the backend once a
    second so that a pool's task start times are known to within a second.
    :meth:`close` stops and joins it.
    """

    def __init__(
        self, backend: Any, total: int, progress: Callable[[dict[str, Any]], Any], every: float, t_run: float
    ) -> None:
        self.backend = backend
        self.total = total
        self.progress = progress
        self.every = every
        self.t_run = t_run
        self.done = 0
        self.last = t_run
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="mklkit-sweep-heartbeat", daemon=True)
        self.thread.start()

    def finished(self, done: int) -> None:
        """``done`` tasks have finished; the next heartbeat is ``every`` seconds from now."""
        self.done = done
        self.last = time.perf_counter()

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
            try:
                self.progress(
                    {
                        "event": "heartbeat",
                        "done": self.done,
                        "total": self.total,
                        "running": len(running),
                        "elapsed_s": now - self.t_run,
                        "longest": None if oldest is None else oldest[0].describe(),
                        "longest_s": None if oldest is None else now - oldest[1],
                    }
                )
            except BaseException as exc:  # noqa: BLE001 - the main thread reports on its own events
                logger.debug("sweep heartbeat stopped: %s", exc)
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _emit(progress: Callable[[dict[str, Any]], Any] | None, event: dict[str, Any]) -> None:
    if progress is not None:
        progress(event)


def _refit_best(
    sweep: Sweep, out: Path, rows: Sequence[Mapping[str, str]], progress: Callable[[dict[str, Any]], Any] | None
) -> list[Best]:
    column, _ = score_column(sweep.task_kind)
    dirs = _best_dirs(sweep, out)
    result = []
    for di, config, C, mean, std, n in select_best(sweep, rows):
        spec = validate_spec(
            {**config.raw, "problem": {**config.raw["problem"], "C": C}}, sweep.file, sweep.folder, sweep.overridden
        )
        prepared = spec.prepare(progress=False)  # what mklkit.api.run does for one problem
        try:
            refit = solve_prepared(prepared, None, warn_compilation=True)
        finally:
            prepared.close()
        refit.write(dirs[di], force=True)
        labels = {k: v for k, v in config.labels.items()}
        b = Best(
            dataset=config.labels["dataset"],
            labels=labels,
            C=C,
            score=column,
            mean=mean,
            std=std,
            n_splits=n,
            run=refit,
            dir=dirs[di],
        )
        result.append(b)
        _emit(progress, {"event": "refit", "dataset": b.dataset, "dir": str(b.dir)})
    return result
