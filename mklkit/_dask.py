"""``dask.distributed``, the optional ``mklkit[dask]`` extra, imported only when a scheduler is used."""

from __future__ import annotations

from typing import Any, Callable

#: Seconds to wait for the scheduler before giving up.
CONNECT_TIMEOUT = 20


def connect(address: str, error: Callable[..., Exception]) -> Any:
    """A ``distributed.Client`` connected to ``address``; ``error(key, problem, value, allowed)`` makes the
    exception raised when dask.distributed is missing or the scheduler cannot be reached."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise error(
            "--scheduler",
            f"a Dask scheduler needs dask.distributed, which is not installed ({exc})",
            address,
            "pip install 'mklkit[dask]', or run without --scheduler (a local process pool: --workers N)",
        ) from None
    try:
        return Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise error(
            "--scheduler",
            f"cannot connect to a Dask scheduler ({type(exc).__name__}: {' '.join(str(exc).split())})",
            address,
            "the address of a running scheduler, e.g. tcp://127.0.0.1:8786 ('dask scheduler' prints it)",
        ) from None
