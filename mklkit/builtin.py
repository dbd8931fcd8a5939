"""The built-in components, registered through the public plugin hook.

This module is named by the ``mklkit`` entry point of mklkit's own distribution and
loaded by :meth:`mklkit.plugins.Registry.load` like any plugin.  Nothing here is
guarded: a built-in that fails to import must be loud.
"""

from __future__ import annotations

from .components.elasticnet import L1, ElasticNet, Uniform
from .components.kl import KL
from .components.losses import BUILTIN_LOSSES
from .components.multiclass import BUILTIN_MULTICLASS_LOSSES
from .components.lq import Lq
from .engines.apg import APG
from .engines.bcd import BCD
from .engines.dual_cd import DualCD
from .engines.proximal import Proximal
from .engines.spicy import Spicy
from .hookspecs import RegisterFn, hookimpl
from .kernels.boolean import BOOLEAN_KERNEL_FUNCTIONS
from .kernels.functions import BUILTIN_KERNEL_FUNCTIONS
from .kernels.strings import STRING_KERNEL_FUNCTIONS
from .pipeline.choose import Auto
from .weighting.methods import BUILTIN_WEIGHTINGS

BUILTIN_REGULARIZERS = (L1, ElasticNet, Lq, Uniform, KL)


@hookimpl
def mklkit_register_components(register: RegisterFn) -> None:
    """Register the built-in losses, regularizers, kernel functions, engines (``auto``
    is the pipeline's: :mod:`mklkit.pipeline.choose`), weightings and the multiclass losses of the joint problem."""
    kernel_functions = (*BUILTIN_KERNEL_FUNCTIONS, *BOOLEAN_KERNEL_FUNCTIONS, *STRING_KERNEL_FUNCTIONS)
    for cls in (*BUILTIN_LOSSES, *BUILTIN_REGULARIZERS, *kernel_functions, Spicy, Proximal, Auto, BCD, DualCD, APG):
        register(cls)
    for cls in (*BUILTIN_WEIGHTINGS, *BUILTIN_MULTICLASS_LOSSES):
        register(cls)
