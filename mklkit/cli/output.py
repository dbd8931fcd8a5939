"""What the command line writes: its lines on stdout and stderr, the progress lines and bars of run and sweep,
library log records."""

from __future__ import annotations

import logging
import math
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..progress import Progress
from .errors import lost_interrupt, sigint_received

#: Library loggers whose INFO records ``run`` and ``sweep`` show on stderr (not with ``--quiet``).
SHOWN_LOGGERS = ("mklkit.compilation", "mklkit.pipeline")


def one_line(text: object) -> str:
    """``text`` on one line, as :func:`mklkit.pipeline.errors.one_line` writes it.

    Written here, not imported: the line of a Ctrl-C that lands inside a first import must not import again
    (a C extension whose initialisation was cut short, such as ``_decimal``, prints a warning when imported twice).
    """
    return " ".join(str(text).split())


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text: object) -> None:
    sys.stderr.write(one_line(text) + "\n")
    sys.stderr.flush()


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def num(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "?"


class IterationLines:
    """Engine callback printing one progress line per second on stderr after the first second."""

    def __init__(self, n_kernels: int, enabled: bool):
        self.n_kernels = n_kernels
        self.progress = Progress(enabled)

    def __call__(self, state: dict[str, Any]) -> None:
        lost_interrupt()
        now = self.progress.due()
        if now is None:
            return
        get = state.get
        active = f"active {get('n_active', '?')}/{self.n_kernels} kernels"
        if get("stage") == "C path":  # problem.C: path, one record per value of C on held-out rows
            line = (
                f"mklkit: C path: C {num(get('C'), '.4g')}, held-out loss {num(get('loss'), '.5g')} "
                f"(metric {num(get('metric'), '.4f')}), {active}"
            )
        elif get("stage") == "refine":  # kernels.factor.refine, one record per round
            line = (
                f"mklkit: factors refined: {len(get('kernels', []))} kernels in use, total rank "
                f"{get('total_rank', '?')}, gap {num(max(get('gap') or [math.nan]), '.2e')}"
            )
        else:
            if _finite(get("gap")) or not _finite(get("dual_objective")):
                where = f"objective {num(get('objective'), '.6g')}, gap {num(get('gap'), '.2e')}"
            else:  # a record between certificates (smo_mkl): only the dual objective is known
                where = f"dual objective {num(get('dual_objective'), '.6g')} (gap not computed here)"
            line = f"mklkit: iteration {get('iteration', '?')}: {where}, {active}"
        self.progress.line(one_line(f"{line}, {now:.1f} s"))


class BuildBar:
    """The kernel-bank build's bar on stderr (:class:`mklkit.kernels.KernelBank`'s ``progress`` events), on a
    terminal, for builds longer than :data:`mklkit.progress.AFTER_S`."""

    def __init__(self, enabled: bool):
        self.progress = Progress(enabled)

    def __call__(self, ev: dict[str, Any]) -> None:
        lost_interrupt()
        self.progress.bar(ev["what"], int(ev["done"]), int(ev["total"]), ev["elapsed_s"], unit="kernel")


def sweep_lines(enabled: bool) -> Callable[[dict[str, Any]], None]:
    """The sweep's callback: a line per task, its start and its refits, and a heartbeat while tasks run."""
    shown = Progress(enabled)

    def progress(ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if sigint_received():
            if kind == "heartbeat":  # from the sweep's helper thread: it only writes its line
                return
            raise KeyboardInterrupt  # a Ctrl-C that a task's C code turned into another error stops the sweep here
        if kind == "heartbeat":
            longest = ""
            if ev.get("longest") is not None:
                longest = f"; the longest running: {ev['longest']} for {ev['longest_s']:.0f} s"
            line = (
                f"{ev['done']} of {plural(ev['total'], 'task')} finished, {ev['running']} running, "
                f"{ev['elapsed_s']:.0f} s elapsed{longest}"
            )
        elif kind == "start":
            skipped = f", {ev['n_skipped']} finished earlier" if ev.get("n_skipped") else ""
            line = f"{plural(ev['n_tasks'], 'task')} ({ev['n_rows']} rows){skipped}; running on {ev['backend']}"
        elif kind == "task" and ev.get("failed"):
            line = f"{ev['done']}/{ev['total']} FAILED {ev['task']}: {ev['error']}"
        elif kind == "task":
            eta = f", about {ev['eta_s']:.0f} s left" if ev["done"] < ev["total"] else ""
            line = (
                f"{ev['done']}/{ev['total']} {ev['task']}: {num(ev.get('time_s'), '.2f')} s solve; "
                f"{ev['elapsed_s']:.0f} s elapsed{eta}"
            )
        elif kind == "refit":
            line = f"refitted the best configuration of {ev['dataset']} on all training data -> {ev['dir']}"
        else:
            return
        shown.line(one_line(f"mklkit sweep: {line}"))

    return progress


class _StderrLines(logging.Handler):
    """Shows a library log record as one ``mklkit: <message>`` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err(f"mklkit: {record.getMessage()}")


@contextmanager
def show_logs(enabled: bool) -> Iterator[None]:
    """While the block runs, show the INFO records of :data:`SHOWN_LOGGERS` on stderr (once: not propagated)."""
    if not enabled:
        yield
        return
    handler = _StderrLines(logging.INFO)
    saved = [(lg, lg.level, lg.propagate) for lg in map(logging.getLogger, SHOWN_LOGGERS)]
    for lg, _, _ in saved:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    try:
        yield
    finally:
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False
