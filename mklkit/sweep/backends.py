"""Where a sweep's tasks run: this process, a local process pool, or a Dask cluster; and the checks of that choice."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ..spec import SpecError
from .grid import Sweep, Task

__all__ = ["check_backend"]

class _Serial:
    name = "serial"

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        for t in tasks:
            try:
                out = fn(t)
            except Exception as exc:  # noqa: BLE001 - reported per task
                yield t, None, exc
            else:
                yield t, out, None

    def close(self, cancel: bool = False) -> None:
        pass


def _pool_worker_init() -> None:
    """Set up a local pool worker: the warnings its parent reports itself are not repeated.

    The parent loaded the same plugin entry points (to read the sweep) and shows a
    broken plugin once; a solve that does not converge is reported by the status
    of its row and the sweep's summary.  A spawned worker would print each on the
    terminal again, once per worker, whatever the command line's ``--quiet``.
    """
    import warnings

    from ..plugins import PluginWarning
    from ..result import ConvergenceWarning

    warnings.filterwarnings("ignore", category=PluginWarning)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)


class _Pool:
    """A local process pool (``concurrent.futures``, spawned processes)."""

    def __init__(self, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.name = f"local pool of {workers} processes"
        self.ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_pool_worker_init)

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from concurrent.futures import as_completed

        futures = {self.ex.submit(fn, t): t for t in tasks}
        for f in as_completed(futures):
            t = futures[f]
            try:
                yield t, f.result(), None
            except Exception as exc:  # noqa: BLE001 - reported per task (BrokenProcessPool too)
                yield t, None, exc

    def close(self, cancel: bool = False) -> None:
        self.ex.shutdown(wait=not cancel, cancel_futures=True)


class _Dask:
    """A ``dask.distributed`` cluster reached through its scheduler address."""

    def __init__(self, sweep: Sweep, address: str):
        from .._dask import connect

        self.client = connect(address, sweep.error)
        self.name = f"Dask cluster at {address} ({len(self.client.scheduler_info().get('workers', {}))} workers)"
        self.futures: list[Any] = []

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from distributed import as_completed

        token = f"{os.getpid()}-{time.time_ns()}"
        by_key = {}
        for t in tasks:
            f = self.client.submit(fn, t, key=f"mklkit-sweep-{token}-{t.index}", pure=False)
            by_key[f.key] = t
            self.futures.append(f)
        with self.client.as_current():
            for f in as_completed(self.futures):
                t = by_key[f.key]
                try:
                    yield t, f.result(), None
                except Exception as exc:  # noqa: BLE001 - reported per task (KilledWorker too)
                    yield t, None, exc

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
