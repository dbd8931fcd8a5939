"""One loop body compiled twice: with threads and without.

A pass over the bank is written once, with ``numba.prange`` for its outer
loop, and compiled with ``parallel=True`` (the loop runs on threads) and
without (``prange`` is ``range``).  The engines call the single-threaded one
for small reads, where starting and synchronising a parallel region costs
more than the work (and much more on a loaded machine).
"""

from __future__ import annotations

import types
from typing import Any, Callable

from numba import njit

__all__ = ["parallel_and_serial"]


def parallel_and_serial(body: Callable[..., Any], **options: Any) -> tuple[Any, Any]:
    """``(parallel, serial)``: ``body`` jitted with and without ``parallel=True``, both cached.

    The serial dispatcher compiles a copy of ``body`` named ``<name>_serial``:
    numba names its cache files after the function and its first line, not
    after the compile options, so two dispatchers of one function would
    load each other's machine code.  ``options`` go to both (``fastmath``).
    """
    parallel = njit(cache=True, parallel=True, **options)(body)
    name = body.__name__ + "_serial"
    copy = types.FunctionType(body.__code__, body.__globals__, name, body.__defaults__, body.__closure__)
    copy.__qualname__ = body.__qualname__ + "_serial"
    copy.__module__ = body.__module__
    copy.__doc__ = f"Single-threaded :func:`{body.__name__}` (small reads: no thread start-up)."
    serial = njit(cache=True, **options)(copy)
    return parallel, serial
