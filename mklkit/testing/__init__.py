"""The conformance kits (docs/plugins.md §7, §9): :mod:`~mklkit.testing.components` checks a loss or
regularizer against its contract, :mod:`~mklkit.testing.engines` an engine's results against what it
claims, :func:`registered` registers components for a block; :mod:`~mklkit.testing.conic` (cvxpy) is
imported only when used.  Every public name of the kits is importable from here.
"""

from __future__ import annotations

import contextlib
import types
from typing import Iterator

from ..plugins import get_registry, hookimpl
from . import components, engines
from .components import *  # noqa: F403 - the public names of the component kit
from .engines import *  # noqa: F403 - the public names of the engine kit

__all__ = [*components.__all__, *engines.__all__, "registered"]


@contextlib.contextmanager
def registered(*classes: type, dist: str | None = None) -> Iterator[str]:
    """Register ``classes`` in the process-wide registry for the block, through a plugin of their own
    and the same hook as an installed one; yields the first component's name.

    >>> from mklkit.testing import registered
    >>> with registered(MyEngine):                       # doctest: +SKIP
    ...     MKLClassifier(engine="my_engine").fit(X, y)
    """
    first = classes[0].name
    mod = types.ModuleType(f"{first}_plugin")

    @hookimpl
    def mklkit_register_components(register):  # type: ignore[no-untyped-def]
        for cls in classes:
            register(cls)

    mod.mklkit_register_components = mklkit_register_components  # type: ignore[attr-defined]
    reg = get_registry()
    name = reg.register_plugin(mod, dist or f"{first}-dist", "0", name=mod.__name__)
    try:
        yield first
    finally:
        reg.unregister_plugin(name)
