"""Kernel functions and kernel banks: dense (:class:`KernelBank`), precomputed, sharded and factor banks."""

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
    raw_input_kernels,
    validate_bank,
)
from .precomputed import PrecomputedKernels
from .functions import BUILTIN_KERNEL_FUNCTIONS, RBF, KernelFunction, Linear, Poly, inner_products, squared_distances
from .factor import FactorBank, FactorPredictor
from .factorize import FactorError, FactorMap, RankCapWarning, build_factor_bank
from .given_factors import GivenFactorMap
from .precomputed_factors import PrecomputedFactors, load_precomputed_factors
from .presets import PRESETS, available_presets, preset_entries
from .boolean import BOOLEAN_KERNEL_FUNCTIONS, DNF, Conjunctive, Disjunctive, Tanimoto
from .strings import (
    STRING_KERNEL_FUNCTIONS,
    AllSubsequences,
    Spectrum,
    Subsequences,
    WeightedDegree,
    WeightedDegreeShift,
    encode_sequences,
)

__all__ = [
    "AllSubsequences",
    "BOOLEAN_KERNEL_FUNCTIONS",
    "Conjunctive",
    "DNF",
    "Disjunctive",
    "STRING_KERNEL_FUNCTIONS",
    "Spectrum",
    "Subsequences",
    "Tanimoto",
    "WeightedDegree",
    "WeightedDegreeShift",
    "encode_sequences",
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
    "raw_input_kernels",
    "squared_distances",
    "validate_bank",
]
