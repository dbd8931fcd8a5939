"""Say when numba compiles, so that a first solve is not a silent wait.

The first solve of each loss x regularizer x engine compiles the jitted
functions it calls (tens of seconds); later ones load them from numba's
on-disk cache (``cache=True``) in well under a second.  :func:`announce_compilation`
logs one INFO record on the logger ``mklkit.compilation`` when compilation
starts inside its block; the command line shows it on stderr.  With
``warn=True`` (the estimators' ``fit`` and ``fit_path``, :func:`mklkit.api.run`), the first
compilation of the process also emits one :class:`CompilationWarning`,
which Python shows by default: a first fit is then not a silent wait.

How compilation is told from a cache load: numba broadcasts a
``"numba:compile"`` event (:mod:`numba.core.event`) only when a dispatcher
compiles.  In numba 0.68, ``Dispatcher.compile`` first calls
``self._cache.load_overload``; on a hit it returns without any event, and
only on a miss does it wrap ``self._compiler.compile`` in
``trigger_event("numba:compile")``.  So a listener on that event hears real
compilation only, at no cost otherwise: nothing is broadcast when every
function is compiled or cached, and the listener is installed only while
someone listens to the logger.
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

__all__ = ["CompilationWarning", "announce_compilation"]

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
        self.what = what
        self.warn = warn
        self.heard = False

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


@contextmanager
def announce_compilation(what: str, warn: bool = False) -> Iterator[None]:
    """Log once when numba compiles (not when it loads a cached function) inside the block.

    Parameters
    ----------
    what : str
        What is being compiled, for the message: ``"loss 'logistic',
        regularizer 'elasticnet' and engine 'spicy'"``.
    warn : bool
        Also emit a :class:`CompilationWarning` at the first compilation of
        the process (once per process, whatever the block).

    Notes
    -----
    The record is ``compiling numba code for <what> (first use, cached
    afterwards)`` at level INFO on the logger ``mklkit.compilation``.  When
    that logger does not pass INFO records (and no warning is due), no
    listener is installed.
    """
    warn = warn and not _warned.is_set()
    if not (warn or logger.isEnabledFor(logging.INFO)):
        yield
        return
    with event.install_listener("numba:compile", _FirstCompile(what, warn)):
        yield
