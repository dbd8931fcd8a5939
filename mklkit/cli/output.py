"""What the command line writes: its lines on stdout and stderr, progress lines and bars, library log records."""

from __future__ import annotations

import logging
import math
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..progress import AFTER_S, EVERY_S, Progress
from .errors import lost_interrupt

#: Library loggers whose INFO records ``run`` and ``sweep`` show on stderr
#: (not with ``--quiet``): the note that numba is compiling (mklkit.compilation).
SHOWN_LOGGERS = ("mklkit.compilation", "mklkit.pipeline")

#: Progress lines and bars start once the work has run this long (seconds), and throttled lines are
#: printed at most this often (:mod:`mklkit.progress`, which draws them).
PROGRESS_AFTER_S = AFTER_S
PROGRESS_EVERY_S = EVERY_S


def one_line(text: object) -> str:
    """One line of text: the spec's formatter (:func:`mklkit.spec.errors.one_line`) writes every error line."""
    from ..spec.errors import one_line

    return one_line(text)


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text: object) -> None:
    sys.stderr.write(one_line(text) + "\n")
    sys.stderr.flush()


def progress_lines(enabled: bool) -> Progress:
    return Progress(enabled, after_s=PROGRESS_AFTER_S, every_s=PROGRESS_EVERY_S)


class IterationLines:
    """Engine callback printing one progress line per second on stderr after the first second."""

    def __init__(self, n_kernels: int, enabled: bool):
        self.n_kernels = n_kernels
        self.progress = progress_lines(enabled)

    def __call__(self, state: dict[str, Any]) -> None:
        lost_interrupt()
        now = self.progress.due()
        if now is None:
            return None
        if state.get("stage") == "C path":  # problem.C: path, one record per value of C on held-out rows
            line = (
                f"mklkit: C path: C {num(state.get('C'), '.4g')}, held-out loss "
                f"{num(state.get('loss'), '.5g')} (metric {num(state.get('metric'), '.4f')}), "
                f"active {state.get('n_active', '?')}/{self.n_kernels} kernels"
            )
        elif state.get("stage") == "refine":  # kernels.factor.refine, one record per round
            line = (
                f"mklkit: factors refined: {len(state.get('kernels', []))} kernels in use, total rank "
                f"{state.get('total_rank', '?')}, gap {num(max(state.get('gap') or [math.nan]), '.2e')}"
            )
        else:
            if _finite(state.get("gap")) or not _finite(state.get("dual_objective")):
                where = f"objective {num(state.get('objective'), '.6g')}, gap {num(state.get('gap'), '.2e')}"
            else:  # a record between certificates (smo_mkl): only the dual objective is known
                where = f"dual objective {num(state.get('dual_objective'), '.6g')} (gap not computed here)"
            line = (
                f"mklkit: iteration {state.get('iteration', '?')}: {where}, "
                f"active {state.get('n_active', '?')}/{self.n_kernels} kernels"
            )
        self.progress.line(one_line(f"{line}, {now:.1f} s"))
        return None


class BuildBar:
    """The kernel-bank build's bar on stderr, on a terminal, for builds longer than :data:`PROGRESS_AFTER_S`.

    The library reports ``{"what", "done", "total", "elapsed_s"}`` events
    (:class:`mklkit.kernels.KernelBank` ``progress``); the command line draws them.
    """

    def __init__(self, enabled: bool):
        self.progress = progress_lines(enabled)

    def __call__(self, ev: dict[str, Any]) -> None:
        lost_interrupt()
        self.progress.bar(ev["what"], int(ev["done"]), int(ev["total"]), ev["elapsed_s"], unit="kernel")


class _StderrLines(logging.Handler):
    """Shows a library log record as one ``mklkit: <message>`` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err(f"mklkit: {record.getMessage()}")


@contextmanager
def show_logs(enabled: bool) -> Iterator[None]:
    """While the block runs, show the INFO records of :data:`SHOWN_LOGGERS` on stderr."""
    if not enabled:
        yield
        return
    handler = _StderrLines(logging.INFO)
    saved = []
    for name in SHOWN_LOGGERS:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level, lg.propagate))
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False  # shown here once, not again by a handler of the root logger
    try:
        yield
    finally:
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def num(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "?"


def warning_lines(caught: Sequence[Any], hidden: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """One ``warning: <text>`` line per distinct warning, leaving out the categories in ``hidden``."""
    seen: list[str] = []
    for w in caught:
        cat = getattr(w.category, "__name__", "Warning")
        text = one_line(w.message)
        if cat == "NumbaExperimentalFeatureWarning" or cat in hidden:
            continue
        line = f"warning: {text}"
        if line not in seen:
            seen.append(line)
    return seen
