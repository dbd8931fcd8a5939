"""Where a sweep's tasks run: this process, a local process pool, or a Dask cluster; and the checks of that choice."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .._interrupts import caused_by_interrupt
from ..spec import SpecError
from .grid import Sweep, Task

__all__ = ["check_backend"]


class _Serial:
    name = "serial"

    def __init__(self) -> None:
        self._current: tuple[Task, float] | None = None

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        for t in tasks:
            self._current = (t, time.perf_counter())
            try:
                out = fn(t)
            except Exception as exc:  # noqa: BLE001 - reported per task
                if caused_by_interrupt(exc):  # Ctrl-C inside C code (numba) surfaces as another error
                    raise
                self._current = None
                yield t, None, exc
            else:
                self._current = None
                yield t, out, None

    def running(self) -> list[tuple[Task, float]]:
        """The task being solved and since when (``time.perf_counter()``); read by the sweep's heartbeat."""
        current = self._current
        return [] if current is None else [current]

    def close(self, cancel: bool = False) -> None:
        pass


def _pool_worker_init() -> None:
    """Set up a local pool worker: the warnings its parent reports itself are not repeated, Ctrl-C is the parent's.

    The parent loaded the same plugin entry points (to read the sweep) and shows a
    broken plugin once; a solve that does not converge is reported by the status
    of its row and the sweep's summary.  A spawned worker would print each on the
    terminal again, once per worker, whatever the command line's ``--quiet``.
    """
    import signal
    import warnings

    from ..plugins import PluginWarning
    from ..result import ConvergenceWarning

    warnings.filterwarnings("ignore", category=PluginWarning)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    # Ctrl-C reaches every process of the terminal's group: the parent stops the
    # pool (:meth:`_Pool.close`), a worker does not print a traceback of its own;
    # it started with SIGINT blocked (:func:`_sigint_blocked`) and unblocks it now
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back (not lost) in this thread while it starts worker processes.

    A spawned process inherits the mask, so a Ctrl-C while it imports mklkit
    does not kill it with a traceback before :func:`_pool_worker_init` makes
    it ignore SIGINT.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Pool:
    """A local process pool (``concurrent.futures``, spawned processes)."""

    def __init__(self, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.name = f"local pool of {workers} processes"
        self.workers = workers
        self.ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_pool_worker_init)
        self._futures: dict[Any, Task] = {}
        self._since: dict[Any, float] = {}
        self._seen_processes: dict[int, Any] = {}

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from concurrent.futures import as_completed

        with _sigint_blocked():  # submit starts the worker processes
            futures = {self.ex.submit(fn, t): t for t in tasks}
        self._worker_processes()
        self._futures = futures
        for f in as_completed(futures):
            t = futures[f]
            try:
                yield t, f.result(), None
            except Exception as exc:  # noqa: BLE001 - reported per task (BrokenProcessPool too)
                yield t, None, exc

    def running(self) -> list[tuple[Task, float]]:
        """The tasks handed to a worker process and since when they were first seen so, oldest first.

        A task counts from the first call that sees its future running (the
        sweep's heartbeat calls this every second); the pool hands out one
        task more than it has processes, so at most ``workers`` are listed.
        """
        now = time.perf_counter()
        self._worker_processes()
        seen = []
        for f, t in list(self._futures.items()):
            if f.running():
                seen.append((t, self._since.setdefault(f, now)))
        return sorted(seen, key=lambda ts: ts[1])[: self.workers]

    def _worker_processes(self) -> list[Any]:
        """The pool's worker processes: those it holds now and every one seen before (the
        executor's own table may already have dropped a worker it still has to stop)."""
        for proc in list((getattr(self.ex, "_processes", None) or {}).values()):
            self._seen_processes.setdefault(proc.pid, proc)
        return list(self._seen_processes.values())

    def close(self, cancel: bool = False) -> None:
        """Shut the pool down; with ``cancel`` (an interrupted or failed sweep) stop the running tasks too."""
        processes = self._worker_processes() if cancel else []
        self.ex.shutdown(wait=not cancel, cancel_futures=True)
        for proc in processes:  # their tasks' rows would be dropped anyway: do not wait for them
            if proc.is_alive():
                proc.terminate()
        for proc in processes:
            proc.join(timeout=5)


class _Dask:
    """A ``dask.distributed`` cluster reached through its scheduler address."""

    def __init__(self, sweep: Sweep, address: str):
        from .._dask import connect

        self.client = connect(address, sweep.error)
        self.workers = len(self.client.scheduler_info().get('workers', {}))
        self.name = f"Dask cluster at {address} ({self.workers} workers)"
        self.futures: list[Any] = []
        self._submitted: list[tuple[Any, Task, float]] = []

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from distributed import as_completed

        token = f"{os.getpid()}-{time.time_ns()}"
        by_key = {}
        for t in tasks:
            f = self.client.submit(fn, t, key=f"mklkit-sweep-{token}-{t.index}", pure=False)
            by_key[f.key] = t
            self.futures.append(f)
            self._submitted.append((f, t, time.perf_counter()))
        with self.client.as_current():
            for f in as_completed(self.futures):
                t = by_key[f.key]
                try:
                    yield t, f.result(), None
                except Exception as exc:  # noqa: BLE001 - reported per task (KilledWorker too)
                    yield t, None, exc

    def running(self) -> list[tuple[Task, float]]:
        """The unfinished tasks (running or queued on the cluster) and when they were submitted, at most one per worker."""
        left = [(t, since) for f, t, since in list(self._submitted) if not f.done()]
        return left[: max(1, self.workers)]

    def close(self, cancel: bool = False) -> None:
        try:
            if cancel and self.futures:
                self.client.cancel(self.futures)
        finally:
            self.client.close()


def _default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _is_main_guard(test: Any) -> bool:
    """``__name__ == "__main__"`` (either operand order), alone or in an ``and``."""
    import ast

    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _unguarded_main_line() -> tuple[str, int] | None:
    """The main script and line that is running this call at import time, outside a main guard.

    A local pool spawns its worker processes, which import the main module
    again (as ``__mp_main__``): a statement at its top level that is not under
    ``if __name__ == "__main__":`` runs again in every worker, and a sweep started
    there kills the worker before it takes a task.  ``None`` when the call does
    not come from the main module's top level, when that line is guarded, or
    when there is no main file (an interactive session, ``python -c``).
    """
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None
    line = None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
            if node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
                return None
    return str(path), int(line)


def check_backend(sweep: Sweep, workers: int, scheduler: str | None) -> None:
    """Reject a bad ``--workers``, or ``--workers`` beside ``--scheduler`` (:class:`SpecError`)."""
    if scheduler is not None and workers != 1:
        raise sweep.error("--workers", "a Dask scheduler runs the tasks on its own workers", workers,
                          "--scheduler ADDRESS or --workers N, not both")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise sweep.error("--workers", "invalid value", workers, "an integer >= 1")
    where = _unguarded_main_line() if workers > 1 else None
    if where is not None:
        raise SpecError(
            where[0], "workers",
            f"line {where[1]} starts the sweep whenever the script is imported, and the local pool's "
            "spawned worker processes import it again (each would die before solving: BrokenProcessPool)",
            workers, 'the call under \'if __name__ == "__main__":\' (docs/sweeps.md), or workers=1',
        )
