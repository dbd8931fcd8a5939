"""Say when numba compiles, so that a first solve is not a silent wait.

The first solve of each loss x regularizer x engine compiles its jitted functions (tens of
seconds); later ones load them from numba's disk cache.  :func:`announce_compilation` logs
one INFO record on ``mklkit.compilation`` when compilation starts inside its block and, with
``warn=True``, the first compilation of the process emits one :class:`CompilationWarning`.
Numba broadcasts ``"numba:compile"`` only on a cache miss (``Dispatcher.compile``, numba
0.68), so the listener hears real compilation only, and it is installed only when needed.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

import numba
from numba.core import event

logger = logging.getLogger(__name__)

#: How much longer a first fit takes while numba compiles, for the message (27 s for
#: logistic + elasticnet + auto with an empty cache; docs/api.md, the CompilationWarning paragraph).
FIRST_COMPILE_S = "20-60 s"


class CompilationWarning(UserWarning):
    """Once per process: numba compiles mklkit's code on first use (a one-off wait, cached on disk)."""


_warned = threading.Event()  # set once the process has shown its CompilationWarning

#: mklkit, numba and the standard library (context managers, threads): not the user's code.
_OWN_DIRS = tuple(
    os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (sys.modules[__name__.rpartition(".")[0]], numba, os)
)


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the innermost frame outside mklkit, numba and the standard library."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_code.co_filename
        if "importlib" in name and "_bootstrap" in name:  # not counted by warnings.warn
            frame = frame.f_back
            continue
        if not name.startswith(_OWN_DIRS):
            return level
        frame, level = frame.f_back, level + 1
    return 1


class _FirstCompile(event.Listener):
    """Logs (and, with ``warn``, warns once per process) at the first compilation it hears."""

    def __init__(self, what: str, warn: bool = False) -> None:
        self.what, self.warn, self.heard = what, warn, False

    def on_start(self, ev: event.Event) -> None:
        if not self.heard:
            self.heard = True
            logger.info("compiling numba code for %s (first use, cached afterwards)", self.what)
            if self.warn and not _warned.is_set():
                _warned.set()
                warnings.warn(
                    f"mklkit: compiling numba code for {self.what} on first use: this fit takes "
                    f"{FIRST_COMPILE_S} longer, once; the code is cached on disk, so later fits (in this "
                    "and later processes) start at once",
                    CompilationWarning,
                    stacklevel=_user_stacklevel(),
                )

    def on_end(self, ev: event.Event) -> None:
        pass


def components(loss: str | None, regularizer: str | None, engine: str | None) -> str:
    """The ``what`` of :func:`announce_compilation` for one loss, regularizer and engine (by name)."""
    return f"loss {loss!r}, regularizer {regularizer!r} and engine {engine!r}"


@contextmanager
def announce_compilation(what: str, warn: bool = False) -> Iterator[None]:
    """Log once (INFO, logger ``mklkit.compilation``) when numba compiles inside the block.

    Parameters
    ----------
    what : str
        What is compiled, for the message: ``"loss 'logistic', regularizer 'elasticnet' and
        engine 'spicy'"``.
    warn : bool
        Also emit a :class:`CompilationWarning` at the first compilation of the process.
    """
    warn = warn and not _warned.is_set()
    if not (warn or logger.isEnabledFor(logging.INFO)):
        yield
        return
    with event.install_listener("numba:compile", _FirstCompile(what, warn)):
        yield
