"""Kernel functions and kernel banks.

* :mod:`mklkit.kernels.functions` — the ``kernel`` component kind
  (:class:`KernelFunction`) and the built-ins ``rbf``, ``poly``, ``linear``.
* :mod:`mklkit.kernels.description` — bank descriptions: entries (or a
  preset) expanded to :class:`BankKernel` objects, and their validation.
* :mod:`mklkit.kernels.build` — :class:`KernelBank`, one contiguous
  (M, N, N) float64 array of normalised Gram matrices, cross kernels, and
  the memory estimate (:mod:`mklkit.kernels.memory`).
* :mod:`mklkit.kernels.precomputed` — banks from given Gram matrices or an
  ``.npz`` file.
* :mod:`mklkit.kernels.presets` — the ``simplemkl`` and ``smomkl`` banks.
* :mod:`mklkit.kernels.factor` — :class:`FactorBank`, kernels held as factors
  :math:`K_m = L_mL_m^\top` (and :class:`FactorPredictor`, what predictions of
  its solutions need); :mod:`mklkit.kernels.factorize` builds them
  (:func:`build_factor_bank`).
* :mod:`mklkit.kernels.precomputed_factors` — factor banks from factors given
  by the caller (``FactorBank.from_factors``) or an ``.npz`` file
  (:func:`load_precomputed_factors`).
"""

from __future__ import annotations

from .build import KernelBank, MemoryBudgetError, estimate_bytes, estimate_peak_bytes, format_bytes
from .description import (
    CHI2_DF,
    DEFAULT_MEMORY_BUDGET,
    NORMALIZATIONS,
    BankError,
    BankKernel,
    builtin_resolver,
    count_kernels,
    expand_bank,
    make_resolver,
    validate_bank,
)
from .precomputed import PrecomputedKernels
from .functions import BUILTIN_KERNEL_FUNCTIONS, RBF, KernelFunction, Linear, Poly, inner_products, squared_distances
from .factor import FactorBank, FactorPredictor
from .factorize import FactorError, FactorMap, RankCapWarning, build_factor_bank
from .precomputed_factors import GivenFactorMap, PrecomputedFactors, load_precomputed_factors
from .presets import PRESETS, available_presets, preset_entries

__all__ = [
    "BUILTIN_KERNEL_FUNCTIONS",
    "BankError",
    "BankKernel",
    "CHI2_DF",
    "DEFAULT_MEMORY_BUDGET",
    "FactorBank",
    "FactorError",
    "FactorMap",
    "FactorPredictor",
    "GivenFactorMap",
    "KernelBank",
    "KernelFunction",
    "MemoryBudgetError",
    "RankCapWarning",
    "Linear",
    "NORMALIZATIONS",
    "PRESETS",
    "Poly",
    "PrecomputedFactors",
    "PrecomputedKernels",
    "RBF",
    "available_presets",
    "build_factor_bank",
    "builtin_resolver",
    "count_kernels",
    "estimate_bytes",
    "estimate_peak_bytes",
    "expand_bank",
    "format_bytes",
    "inner_products",
    "load_precomputed_factors",
    "make_resolver",
    "preset_entries",
    "squared_distances",
    "validate_bank",
]
