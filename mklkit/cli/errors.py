"""The command line's exit codes, its one-line user errors and its handling of Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from .._interrupts import caused_by_interrupt

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_CONVERGED = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A command-line problem, reported as one line with exit code 2."""


#: The exceptions that are user errors: one line, exit code 2 (looked up in the modules loaded).
USER_ERRORS = (
    ("mklkit.spec", "SpecError"),
    ("mklkit.pipeline", "PipelineError"),
    ("mklkit.io", "OutputError"),
    ("mklkit.data", "DataError"),
    ("mklkit.kernels", "BankError"),
    ("mklkit.plugins", "UnknownComponentError"),
    ("mklkit.components.params", "ParamError"),
    ("mklkit.components.base", "LabelError"),
)


class Interrupted(KeyboardInterrupt):
    """An interrupt a command reports in its own words (``line``) instead of ``mklkit: interrupted``."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


#: Set by :func:`_on_sigint` when this process received SIGINT during :func:`main`.
_sigint_received = False
#: While True (:func:`finish_before_interrupt`), SIGINT is held back ...
_sigint_deferred = False
#: ... and recorded here.
_sigint_pending = False


def _on_sigint(signum: int, frame: Any) -> None:
    """Python's own SIGINT behaviour (raise :class:`KeyboardInterrupt`), recorded first.

    A KeyboardInterrupt raised inside C code (numba loading a cached function,
    a BLAS call, an unpickler) may come back as another exception, e.g.
    ``SystemError: ... returned a result with an exception set``; the record
    lets :func:`is_interrupt` recognise it whatever it became.
    """
    global _sigint_received, _sigint_pending
    _sigint_received = True
    if _sigint_deferred:
        _sigint_pending = True
        return
    raise KeyboardInterrupt


def lost_interrupt() -> None:
    """Raise the :class:`KeyboardInterrupt` of a SIGINT this process received but that did not
    stop it: raised inside C code (numba loading or compiling a function), it can come back as
    an error that code handles.  Called by the progress callbacks, so the command stops at the
    next progress event instead of running to its end."""
    if _sigint_received and not _sigint_deferred:
        raise KeyboardInterrupt


@contextmanager
def finish_before_interrupt() -> Iterator[None]:
    """Finish the block (writing results) before a SIGINT received meanwhile stops the command."""
    global _sigint_deferred, _sigint_pending
    _sigint_deferred = True
    try:
        yield
    finally:
        _sigint_deferred = False
    if _sigint_pending:
        _sigint_pending = False
        raise KeyboardInterrupt


def catch_sigint() -> Any:
    """Install :func:`_on_sigint` where SIGINT has Python's default handler; returns what to restore."""
    forget_sigint()
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        current = signal.getsignal(signal.SIGINT)
        if current is not signal.default_int_handler:  # ignored (a background job) or someone else's
            return None
        signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        return None
    return current


def forget_sigint() -> None:
    """Clear the record of a SIGINT once :func:`mklkit.cli.main` has returned: the flags
    speak of one command, and code running after it (progress callbacks called from a
    script, another ``main``) must not take an old interrupt for its own."""
    global _sigint_received, _sigint_pending
    _sigint_received = _sigint_pending = False


def set_sigint(previous: Any, handler: Any) -> None:
    """Set the SIGINT handler where :func:`catch_sigint` installed its own (``previous`` not None)."""
    if previous is None:
        return
    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):  # pragma: no cover
        pass


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` ends an interrupted command.

    True for a :class:`KeyboardInterrupt` anywhere in its ``__cause__`` /
    ``__context__`` chain (one raised inside C code may surface as the
    ``SystemError`` it caused) and for any exception once this process has
    received SIGINT during :func:`main`.
    """
    return caused_by_interrupt(exc) or _sigint_received


def is_user_error(exc: BaseException) -> bool:
    if isinstance(exc, UsageError):
        return True
    for module, name in USER_ERRORS:
        mod = sys.modules.get(module)
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and isinstance(exc, cls):
            return True
    return False


def sigint_received() -> bool:
    """Whether this process received SIGINT during :func:`mklkit.cli.main`."""
    return _sigint_received
