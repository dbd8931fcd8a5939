"""Hook specifications of the ``mklkit`` plugin system (``docs/plugins.md``).

A plugin is a module named by an entry point of the ``mklkit`` group whose functions,
decorated with :data:`hookimpl`, are named after a spec below; the built-ins are the
first plugin (:mod:`mklkit.builtin`).  Only :mod:`pluggy` is imported, so that the
command line stays quick to start.
"""

from __future__ import annotations

from typing import Callable

import pluggy

#: Project name shared by the markers and the plugin manager.
PROJECT = "mklkit"

hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a plugin function as the implementation of a hook (re-exported by :mod:`mklkit.plugins`).
hookimpl = pluggy.HookimplMarker(PROJECT)

#: ``register(cls) -> cls``: the callable handed to :func:`mklkit_register_components`.
RegisterFn = Callable[[type], type]


@hookspec
def mklkit_register_components(register: RegisterFn) -> None:
    """Contribute component classes: call ``register(cls)`` once for each.

    ``register`` dispatches on ``cls.kind`` (``"loss"``, ``"regularizer"``, ``"engine"``,
    ``"kernel"``, ``"weighting"``: subclasses of :class:`mklkit.components.base.Loss`,
    :class:`mklkit.components.base.Regularizer`, :class:`mklkit.engines.base.Engine`,
    :class:`mklkit.kernels.functions.KernelFunction`, :class:`mklkit.weighting.base.Weighting`), validates the class on the spot
    (an error names the plugin and what is missing) and returns it, so it may decorate.
    Each class sets a ``name`` unique within its kind and a ``description``.  The hook is
    called once per plugin when the registry is first needed
    (:func:`mklkit.plugins.get_registry`).

    Parameters
    ----------
    register : callable
        ``register(cls) -> cls``.
    """
