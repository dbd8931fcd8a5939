"""The conformance kits (docs/plugins.md §7, §9): :mod:`~mklkit.testing.components` checks a loss or
regularizer against its contract, :mod:`~mklkit.testing.engines` an engine's results against what it
claims, :func:`registered` registers components for a block; :mod:`~mklkit.testing.conic` (cvxpy) is
imported only when used.  Every public name of the kits is importable from here.
"""

from __future__ import annotations

from . import components, engines
from .components import *  # noqa: F403 - the public names of the component kit
from .engines import *  # noqa: F403 - the public names of the engine kit
from .registry import registered

__all__ = [*components.__all__, *engines.__all__, "registered"]
