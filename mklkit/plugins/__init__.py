"""The component registry: every loss, regularizer, engine and kernel function.

Components reach mklkit only through plugins, the built-ins included: the
core registers them from :mod:`mklkit.builtin` through the same hook
(:func:`mklkit.hookspecs.mklkit_register_components`) that third-party
distributions implement and declare under the ``mklkit`` entry-point group::

    [project.entry-points.mklkit]
    huber = "mklkit_huber.plugin"

:func:`get_registry` builds the process-wide :class:`Registry` on first use:
it registers :mod:`mklkit.builtin`, then loads every other entry point, each
on its own.  A plugin that fails to import or to register becomes a
:class:`BrokenPlugin` with one :class:`PluginWarning`; the others still
load.  ``MKLKIT_DISABLE_PLUGINS=name1,name2`` skips entry points by name (or
by distribution name) without importing them.

:mod:`mklkit.plugins.records` holds the records and the errors,
:mod:`mklkit.plugins.registry` the :class:`Registry`; both are re-exported
here.  Importing this package is cheap (it imports :mod:`pluggy` only); plugins,
numba and numpy are imported when the registry is first built.
"""

from __future__ import annotations

import threading

from ..declaration import KINDS  # stdlib only at import
from ..hookspecs import hookimpl
from .records import (
    DISABLE_ENV,
    BrokenPlugin,
    ComponentValidationError,
    DuplicateComponentError,
    PluginWarning,
    Registration,
    UnknownComponentError,
)
from .registry import BUILTIN_MODULE as BUILTIN_MODULE  # names the core's plugin (mklkit.builtin)
from .registry import CORE_DIST as CORE_DIST
from .registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from .registry import Registry

__all__ = [
    "KINDS",
    "DISABLE_ENV",
    "hookimpl",
    "Registry",
    "Registration",
    "BrokenPlugin",
    "PluginWarning",
    "UnknownComponentError",
    "DuplicateComponentError",
    "ComponentValidationError",
    "get_registry",
    "reset_registry",
    "format_listing",
]

# the public classes are named where they are imported from (tracebacks, reprs, pickles)
for _cls in (
    Registry,
    Registration,
    BrokenPlugin,
    PluginWarning,
    UnknownComponentError,
    DuplicateComponentError,
    ComponentValidationError,
):
    _cls.__module__ = __name__
del _cls


# ---------------------------------------------------------------------------
# Process-wide registry
# ---------------------------------------------------------------------------
_registry: Registry | None = None
_lock = threading.RLock()
_building = False


def get_registry() -> Registry:
    """The process-wide registry, built from the installed plugins on first use.

    Raises
    ------
    RuntimeError
        When called while the registry is being built (from a plugin's import
        or hook); look components up lazily instead.
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


# ---------------------------------------------------------------------------
# Listing
# ---------------------------------------------------------------------------
def format_listing(reg: Registry | None = None) -> str:
    """A table of registered components, then broken and disabled plugins.

    One row per component -- kind, name, ``distribution version``, one-line
    description -- followed by one indented line per parameter
    (``name=default (allowed): doc``).  Used by ``mklkit plugins``.
    """
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
