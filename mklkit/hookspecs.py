"""Hook specifications of the ``mklkit`` plugin system.

Every component of mklkit -- loss, regularizer, engine, kernel function --
is contributed through the hooks declared here, the built-ins included
(:mod:`mklkit.builtin` is the first plugin).  A plugin is a module named by
an entry point of the ``mklkit`` group::

    [project.entry-points.mklkit]
    huber = "mklkit_huber.plugin"

whose functions are decorated with :data:`hookimpl` and named after a spec
below::

    from mklkit.plugins import hookimpl

    @hookimpl
    def mklkit_register_components(register):
        register(Huber)

This module imports nothing but :mod:`pluggy`, so that it stays cheap to
import from the command line.
"""

from __future__ import annotations

from typing import Callable

import pluggy

__all__ = ["PROJECT", "hookspec", "hookimpl", "RegisterFn", "mklkit_register_components"]

#: Project name shared by the markers and the plugin manager.
PROJECT = "mklkit"

#: Marks a function of this module as a hook specification.
hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a plugin function as the implementation of a hook (re-exported by
#: :mod:`mklkit.plugins`).
hookimpl = pluggy.HookimplMarker(PROJECT)

#: ``register(cls) -> cls``: the callable handed to
#: :func:`mklkit_register_components`.
RegisterFn = Callable[[type], type]


@hookspec
def mklkit_register_components(register: RegisterFn) -> None:
    """Contribute component classes.

    Call ``register(cls)`` once for every component class the plugin
    provides.  ``register`` dispatches on the class attribute ``cls.kind``:

    ``"loss"``
        a subclass of :class:`mklkit.components.base.Loss`
    ``"regularizer"``
        a subclass of :class:`mklkit.components.base.Regularizer`
    ``"engine"``
        a subclass of :class:`mklkit.engines.base.Engine`
    ``"kernel"``
        a subclass of :class:`mklkit.kernels.functions.KernelFunction`

    Each class must set a non-empty ``name`` (unique within its kind across
    all installed plugins) and ``description``; losses and regularizers
    also their jitted ``kernels`` named tuple.  ``register`` validates the
    class on the spot and raises an error naming the plugin and what is
    missing; it returns the class unchanged, so it may also be used as a
    decorator.

    Parameters
    ----------
    register : callable
        ``register(cls) -> cls``.

    Notes
    -----
    The hook is called once per plugin, right after the plugin is loaded,
    when the process-wide registry is first needed
    (:func:`mklkit.plugins.get_registry`); importing mklkit alone loads no
    plugin.
    """
