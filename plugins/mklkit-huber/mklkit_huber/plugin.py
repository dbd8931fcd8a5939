"""Entry point of the ``mklkit-huber`` distribution (``mklkit`` group)."""

from __future__ import annotations

from mklkit.plugins import hookimpl


@hookimpl
def mklkit_register_components(register):
    """Contribute the Huber and squared-hinge losses."""
    from .losses import Huber, SquaredHinge

    register(Huber)
    register(SquaredHinge)
