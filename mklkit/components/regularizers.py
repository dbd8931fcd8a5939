r"""Built-in block-norm regularizers: l1, elasticnet, lq, uniform, kl.

All are of the form :math:`C\sum_m g(\|\alpha_m\|_{K_m}^2)` (SpicyMKL eq. 42)
with :math:`\tilde g_C(x) = C g(x^2)`; Table 3 gives the kernel-weight
penalties.  See ``docs/contracts.md`` and ``docs/kl_regularizer.md``.
Kernel signatures: ``f(x, C, params)`` for everything that scales with C,
``f(x, params)`` for the kernel-weight map and the Tikhonov penalty ``h``
(which are per unit C).
"""

from __future__ import annotations

from .elasticnet import ElasticNet, L1, Uniform
from .kl import KL
from .lq import Lq
from .roots import INF, lambertw0, solve_power_eq  # noqa: F401  (importable from here)

__all__ = ["L1", "ElasticNet", "Lq", "Uniform", "KL", "BUILTIN_REGULARIZERS"]

BUILTIN_REGULARIZERS = (L1, ElasticNet, Lq, Uniform, KL)

# Their public names: messages and ``repr`` name them by this import path.
for _cls in BUILTIN_REGULARIZERS:
    _cls.__module__ = __name__
del _cls
