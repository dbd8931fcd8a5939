"""Whether an exception stands for a Ctrl-C (used by the command line and the sweep back ends)."""

from __future__ import annotations

import builtins
import contextlib
from typing import Any, Iterator

__all__ = ["caused_by_interrupt", "interrupt_guard"]

_EXCEPTION_GROUPS: Any = getattr(builtins, "BaseExceptionGroup", ())


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a :class:`KeyboardInterrupt` is ``exc`` or in its ``__cause__`` / ``__context__`` chain.

    A KeyboardInterrupt raised inside C code (numba loading a cached
    function, a BLAS call, an unpickler) may come back as the exception it
    caused, e.g. ``SystemError: ... returned a result with an exception set``.
    Exception groups are searched too.
    """
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
    """Raise an exception that a Ctrl-C caused (:func:`caused_by_interrupt`) again as the
    :class:`KeyboardInterrupt` it stands for (chained to it), so that Python callers of the public entry
    points (``mklkit.run``, ``mklkit.sweep``, ``Engine.solve``, the estimators' ``fit``) see a Ctrl-C as a
    Ctrl-C.  A context manager, not a wrapper: the frames (and the ``stacklevel`` of warnings) stay as
    they are."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if caused_by_interrupt(exc):
            raise KeyboardInterrupt(f"interrupted (as {type(exc).__name__}: {exc})") from exc
        raise
