"""Entry point of the ``mklkit-smo`` distribution (``mklkit`` group)."""
from __future__ import annotations

from mklkit.plugins import hookimpl


@hookimpl
def mklkit_register_components(register):
    """Contribute the ``pnorm_squared`` regularizer and the ``smo_mkl`` engine."""
    from .engine import SmoMKL
    from .regularizer import PnormSquared

    register(PnormSquared)
    register(SmoMKL)
