"""The conformance kits: components and engines.

* :mod:`mklkit.testing.components`: check a loss or regularizer against its
  mathematical contract (:func:`check_component`, :func:`assert_conforms`,
  :func:`check_parameter_points`; the identities are computed in
  :mod:`mklkit.testing.losses` and :mod:`mklkit.testing.regularizers`);
* :mod:`mklkit.testing.engines`: check that an engine's results are what it
  claims on small real problems (:func:`check_engine`,
  :func:`assert_engine_conforms`);
* :mod:`mklkit.testing.registry`: :func:`registered`, components registered
  for a block as a plugin of their own would register them;
* :mod:`mklkit.testing.conic`: the cvxpy + Clarabel reference the engine kit
  uses when cvxpy is installed (imported only then).

Both kits return a :class:`ConformanceReport` of :class:`CheckResult`; every
public name of the two kits is importable from here.
"""

from __future__ import annotations

from . import components, engines
from .components import *  # noqa: F403 - the public names of the component kit
from .engines import *  # noqa: F403 - the public names of the engine kit
from .registry import registered

__all__ = [*components.__all__, *engines.__all__, "registered"]
