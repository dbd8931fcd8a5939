"""One loop body compiled with threads (``prange``) and without, for small reads; the loops' fast-math flags."""

from __future__ import annotations

import types
from typing import Any, Callable

from numba import njit

#: Let LLVM reassociate the inner dot products so that they vectorize (no NaN or inf assumption).
FM = {"reassoc", "contract"}


def parallel_and_serial(body: Callable[..., Any], **options: Any) -> tuple[Any, Any]:
    """``(parallel, serial)``: ``body`` jitted with and without ``parallel=True``, both cached; the serial one
    compiles a copy named ``<name>_serial`` (numba names cache files after the function, not the options)."""
    parallel = njit(cache=True, parallel=True, **options)(body)
    name = body.__name__ + "_serial"
    copy = types.FunctionType(body.__code__, body.__globals__, name, body.__defaults__, body.__closure__)
    copy.__qualname__ = body.__qualname__ + "_serial"
    copy.__module__ = body.__module__
    copy.__doc__ = f"Single-threaded :func:`{body.__name__}` (small reads: no thread start-up)."
    serial = njit(cache=True, **options)(copy)
    return parallel, serial
