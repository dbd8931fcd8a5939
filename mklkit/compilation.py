"""Say when numba compiles, so that a first solve is not a silent wait.

The first solve of each loss x regularizer x engine compiles the jitted
functions it calls (tens of seconds); later ones load them from numba's
on-disk cache (``cache=True``) in well under a second.  :func:`announce_compilation`
logs one INFO record on the logger ``mklkit.compilation`` when compilation
starts inside its block; the command line shows it on stderr.

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
from contextlib import contextmanager
from typing import Iterator

from numba.core import event

__all__ = ["announce_compilation"]

logger = logging.getLogger(__name__)


class _FirstCompile(event.Listener):
    """Logs at the first compilation it hears."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.heard = False

    def on_start(self, ev: event.Event) -> None:
        if not self.heard:
            self.heard = True
            logger.info("compiling numba code for %s (first use, cached afterwards)", self.what)

    def on_end(self, ev: event.Event) -> None:
        pass


@contextmanager
def announce_compilation(what: str) -> Iterator[None]:
    """Log once when numba compiles (not when it loads a cached function) inside the block.

    Parameters
    ----------
    what : str
        What is being compiled, for the message: ``"loss 'logistic',
        regularizer 'elasticnet' and engine 'spicy'"``.

    Notes
    -----
    The record is ``compiling numba code for <what> (first use, cached
    afterwards)`` at level INFO on the logger ``mklkit.compilation``.  When
    that logger does not pass INFO records, no listener is installed.
    """
    if not logger.isEnabledFor(logging.INFO):
        yield
        return
    with event.install_listener("numba:compile", _FirstCompile(what)):
        yield
