"""Components registered for the length of a block, as a plugin of their own would register them."""

from __future__ import annotations

import contextlib
import types
from typing import Iterator

from ..plugins import get_registry, hookimpl

__all__ = ["registered"]


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
