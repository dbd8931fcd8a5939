"""SMO-MKL for mklkit: p-norm and Bregman-regularized MKL by sequential minimal optimization.

Contributed through the ``mklkit`` entry-point group (``smo = "mklkit_smo.plugin"``):

* the engine ``smo_mkl`` (:class:`SmoMKL`), Vishwanathan, Sun, Theera-Ampornpunt
  & Varma (2010), "Multiple Kernel Learning and the SMO Algorithm";
* the regularizer ``pnorm_squared`` (:class:`PnormSquared`), the squared
  p-norm of the kernel weights of that paper's eq. (1);
* the engine ``skm_smo`` (:class:`SkmSMO`), the support kernel machine of
  Bach, Lanckriet & Jordan (2004), "Multiple kernel learning, conic duality,
  and the SMO algorithm", by Moreau-Yosida regularized SMO;
* the regularizer ``l1_squared`` (:class:`L1Squared`), the squared block
  1-norm of that paper's problem (P).

:class:`FeatureKernels` computes kernel rows on the fly for banks that do not
fit in memory.
"""

from __future__ import annotations

from .engine import SmoMKL, kl_from_paper
from .lanckriet import lanckriet_problem, lanckriet_weights
from .regularizer import L1Squared, PnormSquared
from .skm import SkmSMO
from .source import FeatureKernels, KernelSource

__all__ = [
    "SmoMKL",
    "PnormSquared",
    "SkmSMO",
    "L1Squared",
    "FeatureKernels",
    "KernelSource",
    "kl_from_paper",
    "lanckriet_problem",
    "lanckriet_weights",
]
__version__ = "0.1.0"
