"""Kernel banks: the names of :mod:`mklkit.kernels.description`, :mod:`mklkit.kernels.build` and :mod:`mklkit.kernels.precomputed` in one place.

* :mod:`~mklkit.kernels.description` — bank entries (or a preset) expanded to
  the list of :class:`BankKernel` they describe, and their validation.
* :mod:`~mklkit.kernels.build` — :class:`KernelBank` (the dense, normalised
  Gram matrices and cross kernels) and the memory estimate.
* :mod:`~mklkit.kernels.precomputed` — :meth:`KernelBank.from_precomputed`
  and :meth:`KernelBank.from_npz`.

``from mklkit.kernels.bank import ...`` keeps working for every name below;
:class:`KernelSpec` is the former name of :class:`BankKernel`.
"""
from __future__ import annotations

from .build import KernelBank, MemoryBudgetError, estimate_bytes, estimate_peak_bytes, format_bytes
from .description import (
    CHI2_DF,
    DEFAULT_MEMORY_BUDGET,
    NORMALIZATIONS,
    BankError,
    BankKernel,
    KernelSpec,
    Resolver,
    UnknownName,
    builtin_resolver,
    count_kernels,
    expand_bank,
    make_resolver,
    validate_bank,
)
from .precomputed import PrecomputedKernels

__all__ = [
    "BankError",
    "BankKernel",
    "KernelSpec",
    "KernelBank",
    "PrecomputedKernels",
    "NORMALIZATIONS",
    "DEFAULT_MEMORY_BUDGET",
    "CHI2_DF",
    "Resolver",
    "UnknownName",
    "builtin_resolver",
    "make_resolver",
    "expand_bank",
    "validate_bank",
    "count_kernels",
    "estimate_bytes",
    "estimate_peak_bytes",
    "MemoryBudgetError",
    "format_bytes",
]
