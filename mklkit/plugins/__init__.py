"""The component registry: every loss, regularizer, engine and kernel function, built-ins included,
reaches mklkit through a plugin of the ``mklkit`` entry-point group (docs/plugins.md).

:func:`get_registry` builds the process-wide :class:`Registry` on first use: :mod:`mklkit.builtin`
first, then every other entry point on its own; one that fails becomes a :class:`BrokenPlugin` with a
:class:`PluginWarning`, and ``MKLKIT_DISABLE_PLUGINS`` skips some.  Importing this package imports
:mod:`pluggy` only.
"""

from __future__ import annotations

import threading

from ..declaration import KINDS  # stdlib only at import
from ..hookspecs import hookimpl
from .registry import BUILTIN_MODULE as BUILTIN_MODULE  # names the core's plugin (mklkit.builtin)
from .registry import CORE_DIST as CORE_DIST
from .registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from .registry import DISABLE_ENV, BrokenPlugin, ComponentValidationError, DuplicateComponentError, PluginWarning
from .registry import Registration, Registry, UnknownComponentError

__all__ = ["KINDS", "DISABLE_ENV", "hookimpl", "Registry", "Registration", "BrokenPlugin", "PluginWarning"]
__all__ += ["UnknownComponentError", "DuplicateComponentError", "ComponentValidationError", "get_registry"]
__all__ += ["reset_registry", "format_listing"]

# the public classes are named where they are imported from (tracebacks, reprs, pickles)
for _name in __all__:
    if isinstance(globals().get(_name), type):
        globals()[_name].__module__ = __name__
del _name


_registry: Registry | None = None
_lock = threading.RLock()
_building = False


def get_registry() -> Registry:
    """The process-wide registry, built from the installed plugins on first use.

    Raises
    ------
    RuntimeError
        When called while the registry is being built (from a plugin's import or hook).
    """
    global _registry, _building
    reg = _registry
    if reg is not None:
        return reg
    with _lock:
        if _registry is None:
            if _building:
                raise RuntimeError(
                    "get_registry() was called while the mklkit registry is being built; "
                    "a plugin must not look components up at import or registration time"
                )
            _building = True
            try:
                _registry = Registry.load()
            finally:
                _building = False
        return _registry


def reset_registry() -> None:
    """Forget the process-wide registry; the next :func:`get_registry` rebuilds it."""
    global _registry
    with _lock:
        _registry = None


def format_listing(reg: Registry | None = None) -> str:
    """The table of ``mklkit plugins``: a row per component (kind, name, distribution, description)
    and a line per parameter, then the broken and disabled plugins."""
    reg = get_registry() if reg is None else reg
    records = reg.registrations()
    header = ("KIND", "NAME", "DISTRIBUTION", "DESCRIPTION")
    rows = [(r.kind, r.name, r.provider, r.description) for r in records]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    indent = " " * (sum(widths) + 2 * 3)

    def line(row: tuple[str, str, str, str]) -> str:
        cells = [c.ljust(w) for c, w in zip(row[:3], widths)]
        return "  ".join([*cells, row[3]]).rstrip()

    lines = [line(header)] if rows else ["no components registered"]
    for record, row in zip(records, rows):
        lines.append(line(row))
        for p in getattr(record.cls, "params", ()):
            lines.append(f"{indent}{p.describe()}".rstrip())
    if reg.broken:
        lines += ["", f"broken plugins (skipped; set {DISABLE_ENV}=NAME to silence):"]
        for b in reg.broken:
            lines.append(f"  {b.name} ({b.dist} {b.version}): {b.message}".replace(" )", ")"))
    if reg.disabled:
        lines += ["", f"disabled plugins ({DISABLE_ENV}): " + ", ".join(reg.disabled)]
    return "\n".join(lines)
