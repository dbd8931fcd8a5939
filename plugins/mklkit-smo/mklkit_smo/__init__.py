"""SMO-MKL for mklkit: p-norm and Bregman-regularized MKL by sequential minimal optimization.

Contributed through the ``mklkit`` entry-point group (``smo = "mklkit_smo.plugin"``):

* the engine ``smo_mkl`` (:class:`SmoMKL`), Vishwanathan, Sun, Theera-Ampornpunt
  & Varma (2010), "Multiple Kernel Learning and the SMO Algorithm";
* the regularizer ``pnorm_squared`` (:class:`PnormSquared`), the squared
  p-norm of the kernel weights of that paper's eq. (1).

:class:`FeatureKernels` computes kernel rows on the fly for banks that do not
fit in memory.
"""
from __future__ import annotations

from .engine import SmoMKL, kl_from_paper
from .regularizer import PnormSquared
from .source import FeatureKernels, KernelSource

__all__ = ["SmoMKL", "PnormSquared", "FeatureKernels", "KernelSource", "kl_from_paper"]
__version__ = "0.1.0"
