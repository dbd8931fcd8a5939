"""Where a sweep's tasks run (joblib: this process, a local loky pool, or a Dask cluster); the checks of that choice."""

from __future__ import annotations

import os
import threading
import time
import traceback
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from .._interrupts import caused_by_interrupt
from .grid import Sweep, Task

_QUIET = False  # this process quietened itself as a pool worker


class _RemoteTraceback(Exception):
    """The traceback of a task that failed in another process (the ``__cause__`` of its exception)."""


def _quiet_worker() -> None:
    """Set up a local pool worker: no plugin or convergence warnings (the parent reports them once)
    and Ctrl-C ignored (the parent stops the pool); SIGINT, blocked while it started, is unblocked."""
    global _QUIET
    if _QUIET:
        return
    import signal

    from ..plugins import PluginWarning
    from ..result import ConvergenceWarning

    warnings.filterwarnings("ignore", category=PluginWarning)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _QUIET = True


def _call(
    fn: Callable[[Task], Any], task: Task, parent: int, pool: bool
) -> tuple[int, Any, BaseException | None, str | None]:
    """``(index, rows, None, None)`` or ``(index, None, error, traceback)`` of one task wherever joblib runs
    it: an exception is the task's result, except a Ctrl-C in this process (perhaps surfacing as another error)."""
    here = os.getpid() == parent
    if pool and not here:
        _quiet_worker()
    try:
        return task.index, fn(task), None, None
    except Exception as exc:  # noqa: BLE001 - reported per task
        if here and caused_by_interrupt(exc):
            raise
        return task.index, None, exc, None if here else traceback.format_exc()


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back (not lost) while worker processes start: they inherit the mask until
    :func:`_quiet_worker` makes them ignore it."""
    import signal

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Backend:
    """The tasks of a sweep on joblib: ``workers=1`` in this process, ``workers=N`` a loky pool, or a Dask client.

    :meth:`map` yields ``(task, rows, error)`` as the tasks finish; :meth:`running` the tasks being
    solved (the oldest unfinished ones, one per slot) and since when; :meth:`close` stops what is left.
    """

    def __init__(self, workers: int = 1, client: Any = None, address: str | None = None):
        self.client = client
        if client is not None:
            self.workers = len(client.scheduler_info().get("workers", {}))
            self.slots = max(1, sum(client.ncores().values()))
            self.name = f"Dask cluster at {address} ({self.workers} workers)"
        else:
            self.workers = self.slots = workers
            self.name = "serial" if workers == 1 else f"local pool of {workers} processes"
        self._gen: Any = None
        self._left: dict[int, Task] = {}
        self._since: dict[int, float] = {}
        self._lock = threading.Lock()

    def _parallel(self) -> Any:
        from joblib import Parallel, parallel_config

        if self.client is not None:
            with parallel_config(backend="dask", client=self.client):
                return Parallel(n_jobs=-1, return_as="generator_unordered", batch_size=1)
        if self.workers == 1:
            return Parallel(n_jobs=1, backend="sequential", return_as="generator_unordered")
        return Parallel(n_jobs=self.workers, backend="loky", return_as="generator_unordered", batch_size=1)

    def _started(self, now: float) -> None:
        for t in list(self._left.values())[: self.slots]:
            self._since.setdefault(t.index, now)

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from joblib import delayed

        with self._lock:
            self._left = {t.index: t for t in tasks}
            self._started(time.perf_counter())
        parent, pool = os.getpid(), self.client is None and self.workers > 1
        with _sigint_blocked():  # the first dispatch starts the worker processes
            self._gen = self._parallel()(delayed(_call)(fn, t, parent, pool) for t in tasks)
        try:
            for index, rows, exc, tb in self._gen:
                with self._lock:
                    t = self._left.pop(index)
                    self._started(time.perf_counter())
                if tb is not None:
                    exc.__cause__ = _RemoteTraceback(tb)
                yield t, rows, exc
        except Exception as exc:  # noqa: BLE001 - a lost worker or cluster: every unfinished task failed
            if caused_by_interrupt(exc):
                raise
            with self._lock:
                left, self._left = list(self._left.values()), {}
            for t in left:
                yield t, None, exc

    def running(self) -> list[tuple[Task, float]]:
        with self._lock:
            running = [(t, self._since[t.index]) for t in list(self._left.values())[: self.slots]]
        return sorted(running, key=lambda ts: ts[1])

    def close(self) -> None:
        """Stop the tasks left: joblib stops the pool's workers or cancels the Dask tasks."""
        try:
            if self._gen is not None:
                with warnings.catch_warnings():  # joblib's note that unfinished tasks were cancelled
                    warnings.simplefilter("ignore")
                    self._gen.close()
        finally:
            self._gen = None
            if self.client is not None:
                self.client.close()


def connect_backend(sweep: Sweep, workers: int, scheduler: str | None) -> Backend:
    if scheduler is None:
        return Backend(workers)
    from .._dask import connect

    return Backend(client=connect(scheduler, sweep.error), address=scheduler)


def default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def check_backend(sweep: Sweep, workers: int, scheduler: str | None) -> None:
    """Reject a bad ``--workers``, or ``--workers`` beside ``--scheduler`` (:class:`SpecError`)."""
    if scheduler is not None and workers != 1:
        raise sweep.error(
            "--workers",
            "a Dask scheduler runs the tasks on its own workers",
            workers,
            "--scheduler ADDRESS or --workers N, not both",
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise sweep.error("--workers", "invalid value", workers, "an integer >= 1")
