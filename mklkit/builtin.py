"""The built-in components, registered through the public plugin hook.

mklkit is its own first plugin: this module is named by the ``mklkit`` entry
point of mklkit's own distribution and is registered by
:meth:`mklkit.plugins.Registry.load` exactly as a third-party plugin is:
loaded by that name (:data:`mklkit.plugins.BUILTIN_MODULE`), so the
registry's own code imports no plugin, the core's included.
Nothing here is guarded: a built-in that fails to import is an error of
mklkit itself and must be loud.
"""

from __future__ import annotations

from .components.losses import BUILTIN_LOSSES
from .components.regularizers import BUILTIN_REGULARIZERS
from .engines import spicy
from .engines.bcd import BCD_ENGINES
from .engines.dual_cd import DUAL_CD_ENGINES
from .engines.proximal import PROXIMAL_ENGINES
from .hookspecs import RegisterFn, hookimpl
from .kernels.functions import BUILTIN_KERNEL_FUNCTIONS
from .pipeline.choose import AUTO_ENGINES

__all__ = ["mklkit_register_components"]


@hookimpl
def mklkit_register_components(register: RegisterFn) -> None:
    """Register the built-in losses, regularizers, kernel functions and engines (``auto``,
    the choice among the installed engines, is the pipeline's: :mod:`mklkit.pipeline.choose`)."""
    engines = getattr(spicy, "BUILTIN_ENGINES", (spicy.Spicy,))
    for cls in (
        *BUILTIN_LOSSES,
        *BUILTIN_REGULARIZERS,
        *BUILTIN_KERNEL_FUNCTIONS,
        *engines,
        *PROXIMAL_ENGINES,
        *AUTO_ENGINES,
        *BCD_ENGINES,
        *DUAL_CD_ENGINES,
    ):
        register(cls)
