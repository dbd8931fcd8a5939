r"""Component contracts: losses and regularizers.

Every engine of mklkit is generic over these two contracts; a third-party
plugin implements them exactly as the built-ins do.  The mathematics is in
``docs/contracts.md``; equation numbers refer to Suzuki & Tomioka (2011),
"SpicyMKL: a fast algorithm for Multiple Kernel Learning with thousands of
kernels" (``shared/papers/suzuki2011_spicymkl.txt``).

This module gathers the contracts under one import path; the code is in
``component.py`` (:class:`Component`, :func:`kernel`), ``loss.py`` (:class:`Loss`)
and ``regularizer.py`` (:class:`Regularizer`, :class:`WeightNorm`).

Design (see ``shared/STYLE.md``):

* A component is a plain, picklable Python class.  ``__init__`` validates the
  parameters declared in ``params`` and stores them; nothing else.
* Its numerics are ``@kernel`` methods (:func:`kernel`: a static method
  compiled with ``njit(cache=True)``) of float64 arrays plus a float64
  parameter vector (``param_vector``).  Engines call them from Python on
  whole vectors (``type(c).deriv(y, z, c.param_vector)``) or pass them to
  jitted loops; the read-only attributes ``jit``, ``constrained`` and
  ``bregman`` group them as a :class:`LossJit`, :class:`ConstrainedConjugate`,
  :class:`RegularizerJit` or :class:`BregmanJit`.  No jitclass is involved, so
  the compiled code is cached on disk.

Sign convention for losses.  ``conj`` is the ordinary convex conjugate in the
second argument, :math:`\ell^*(y, u) = \sup_z (uz - \ell(y, z))`.  The paper
writes the dual of (7) with :math:`\ell^*(y_i, -\rho_i)` (eq. 15): engines
evaluate the conjugate at :math:`u = -\rho`.
"""

from __future__ import annotations

from .component import CLASSIFICATION, REGRESSION, Component, LabelError, as_array, kernel
from .component import _rebuild  # noqa: F401  (pickles of components name it by this path)
from .loss import ConstrainedConjugate, Loss, LossJit
from .params import Param, ParamError
from .regularizer import BregmanJit, Regularizer, RegularizerJit, WeightNorm

__all__ = [
    "kernel",
    "Component",
    "Loss",
    "LossJit",
    "ConstrainedConjugate",
    "Regularizer",
    "RegularizerJit",
    "BregmanJit",
    "WeightNorm",
    "LabelError",
    "CLASSIFICATION",
    "REGRESSION",
]
__all__ += ["Param", "ParamError", "as_array"]

# Their public names: messages and ``repr`` name them by this import path.
for _cls in (
    Component,
    LabelError,
    Loss,
    LossJit,
    ConstrainedConjugate,
    Regularizer,
    RegularizerJit,
    BregmanJit,
    WeightNorm,
):
    _cls.__module__ = __name__
del _cls
