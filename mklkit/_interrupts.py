"""Whether an exception stands for a Ctrl-C (used by the command line and the sweep back ends)."""

from __future__ import annotations

import builtins
import contextlib
from typing import Any, Iterator

_EXCEPTION_GROUPS: Any = getattr(builtins, "BaseExceptionGroup", ())


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a :class:`KeyboardInterrupt` is ``exc`` or in its ``__cause__`` / ``__context__`` chain or
    exception groups (one raised inside C code, e.g. numba or BLAS, may come back as a ``SystemError``)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        todo.extend((e.__cause__, e.__context__))
        if isinstance(e, _EXCEPTION_GROUPS):
            todo.extend(e.exceptions)
    return False


@contextlib.contextmanager
def interrupt_guard() -> Iterator[None]:
    """Raise an exception that a Ctrl-C caused again as the :class:`KeyboardInterrupt` it stands for, for
    the callers of the public entry points (a context manager: the ``stacklevel`` of warnings is kept)."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if caused_by_interrupt(exc):
            raise KeyboardInterrupt(f"interrupted (as {type(exc).__name__}: {exc})") from exc
        raise
