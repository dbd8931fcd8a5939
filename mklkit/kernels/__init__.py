"""Kernel functions and kernel banks.

* :mod:`mklkit.kernels.functions` — the ``kernel`` component kind
  (:class:`KernelFunction`) and the built-ins ``rbf``, ``poly``, ``linear``.
* :mod:`mklkit.kernels.bank` — bank descriptions and :class:`KernelBank`,
  one contiguous (M, N, N) float64 array of normalised Gram matrices.
* :mod:`mklkit.kernels.presets` — the ``simplemkl`` and ``smomkl`` banks.
* :mod:`mklkit.kernels.factor` — :class:`FactorBank`, kernels held as factors
  :math:`K_m = L_mL_m^\top`; :mod:`mklkit.kernels.factorize` builds them
  (:func:`build_factor_bank`).
"""
from __future__ import annotations

from .bank import (
    CHI2_DF,
    DEFAULT_MEMORY_BUDGET,
    NORMALIZATIONS,
    BankError,
    KernelBank,
    KernelSpec,
    MemoryBudgetError,
    PrecomputedKernels,
    builtin_resolver,
    count_kernels,
    estimate_bytes,
    estimate_peak_bytes,
    expand_bank,
    format_bytes,
    make_resolver,
    validate_bank,
)
from .functions import (
    BUILTIN_KERNEL_FUNCTIONS,
    RBF,
    KernelFunction,
    Linear,
    Poly,
    inner_products,
    squared_distances,
)
from .factor import FactorBank
from .factorize import FactorError, FactorMap, build_factor_bank
from .presets import PRESETS, available_presets, preset_entries

__all__ = [
    "BUILTIN_KERNEL_FUNCTIONS",
    "BankError",
    "CHI2_DF",
    "DEFAULT_MEMORY_BUDGET",
    "FactorBank",
    "FactorError",
    "FactorMap",
    "KernelBank",
    "KernelFunction",
    "KernelSpec",
    "MemoryBudgetError",
    "Linear",
    "NORMALIZATIONS",
    "PRESETS",
    "Poly",
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
    "make_resolver",
    "preset_entries",
    "squared_distances",
    "validate_bank",
]
