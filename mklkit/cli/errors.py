"""The command line's exit codes, its one-line user errors and its handling of Ctrl-C."""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager, suppress
from typing import Any, Iterator

from .._interrupts import caused_by_interrupt

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_CONVERGED = 3
EXIT_INTERRUPTED = 130

#: The exceptions that are user errors: one line, exit code 2 (looked up in the modules loaded).
USER_ERRORS = (
    ("mklkit.pipeline", "PipelineError"),  # and its SpecError
    ("mklkit.io", "OutputError"),
    ("mklkit.data", "DataError"),
    ("mklkit.kernels", "BankError"),
    ("mklkit.plugins", "UnknownComponentError"),
    ("mklkit.components.params", "ParamError"),
    ("mklkit.components.base", "LabelError"),
)


class UsageError(Exception):
    """A command-line problem, reported as one line with exit code 2."""


#: Whether this process received SIGINT during :func:`main`; while deferred (:func:`finish_before_interrupt`),
#: a SIGINT is only recorded as pending.
_sigint_received = _sigint_deferred = _sigint_pending = False


def _on_sigint(signum: int, frame: Any) -> None:
    """Python's SIGINT behaviour, recorded first: a KeyboardInterrupt raised inside C code (numba, BLAS, an
    unpickler) may come back as another exception, which :func:`is_interrupt` then recognises."""
    global _sigint_received, _sigint_pending
    _sigint_received = True
    if _sigint_deferred:
        _sigint_pending = True
        return
    raise KeyboardInterrupt


def lost_interrupt() -> None:
    """Raise the KeyboardInterrupt of a SIGINT received that did not stop the command (turned into an error that
    C code handled); the progress callbacks call it, so the command stops at the next progress event."""
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
    try:
        current = signal.getsignal(signal.SIGINT)
        if current is not signal.default_int_handler:  # ignored (a background job) or someone else's
            return None
        signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):  # not the main thread, or no signals here
        return None
    return current


def forget_sigint() -> None:
    """Clear the record of a SIGINT once :func:`mklkit.cli.main` returns: code running after it must not take an
    old interrupt for its own."""
    global _sigint_received, _sigint_pending
    _sigint_received = _sigint_pending = False


def set_sigint(previous: Any, handler: Any) -> None:
    """Set the SIGINT handler where :func:`catch_sigint` installed its own (``previous`` not None)."""
    if previous is not None:
        with suppress(ValueError, OSError):  # pragma: no cover
            signal.signal(signal.SIGINT, handler)


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` ends an interrupted command: a KeyboardInterrupt in its cause/context chain, or any
    exception once this process received SIGINT."""
    return caused_by_interrupt(exc) or _sigint_received


def is_user_error(exc: BaseException) -> bool:
    if isinstance(exc, UsageError):
        return True
    return any(isinstance(exc, getattr(sys.modules.get(module), name, ())) for module, name in USER_ERRORS)


def sigint_received() -> bool:
    """Whether this process received SIGINT during :func:`mklkit.cli.main`."""
    return _sigint_received
