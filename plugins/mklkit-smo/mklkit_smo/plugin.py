"""Entry point of the ``mklkit-smo`` distribution (``mklkit`` group)."""

from __future__ import annotations

from mklkit.plugins import hookimpl


@hookimpl
def mklkit_register_components(register):
    """Contribute the ``pnorm_squared`` and ``l1_squared`` regularizers and the ``smo_mkl``
    and ``skm_smo`` engines."""
    from .engine import SmoMKL
    from .regularizer import L1Squared, PnormSquared
    from .skm import SkmSMO

    register(PnormSquared)
    register(L1Squared)
    register(SmoMKL)
    register(SkmSMO)
