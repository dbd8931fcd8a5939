"""Precomputed factors: a :class:`~mklkit.kernels.factor.FactorBank` from an ``.npz`` file of factors.

:func:`load_precomputed_factors` checks the array headers (dtype, shape, memory) before it loads any
array, and the arrays as :func:`~mklkit.kernels.given_factors.bank_from_factors` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .description import DEFAULT_MEMORY_BUDGET, BankError, _check_normalize
from .factor import FactorBank
from .given_factors import _factor_matrix, _layout, _normalization, _one_layout
from .memory import format_bytes
from .precomputed import _check_arrays, _labels, _names, _npz_headers

#: The arrays a precomputed-factor ``.npz`` may hold, and (array, the one it needs).
FACTOR_ARRAYS: tuple[str, ...] = ("L_train", "starts", "ranks", "y_train", "L_test", "y_test", "names")
FACTOR_PAIRS = (
    ("L_test", "y_test", "; give both, or neither (then the rows of L_train are split)"),
    ("y_test", "L_test", ""),
)


@dataclass
class PrecomputedFactors:
    """The checked, raw contents of a precomputed-factor file: ``L_train`` (N, R), ``starts`` (M + 1,),
    ``names``, ``y_train``, ``L_test`` and ``y_test`` (or ``None``) and the file path ``source``."""

    L_train: np.ndarray
    starts: np.ndarray
    names: list[str]
    y_train: np.ndarray
    L_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    source: str = ""

    def bank(self, normalize: str = "none") -> FactorBank:
        """The training factors as a :class:`FactorBank` (``FactorBank.from_factors``)."""
        return FactorBank.from_factors(
            self.L_train, self.starts, names=self.names, normalize=normalize, source=f"{self.source}: L_train"
        )


def load_precomputed_factors(
    path: str | os.PathLike[str], memory_budget: float | None = None, normalize: str | None = None
) -> PrecomputedFactors:
    """Read and check a precomputed-factor ``.npz`` (raw: normalise with :meth:`PrecomputedFactors.bank`).

    Arrays: ``L_train`` (N, R), ``y_train`` (N,), exactly one of ``starts`` (M + 1,) or ``ranks`` (M,);
    optional ``L_test`` with ``y_test``, and ``names`` (M,).  The headers are checked first: every array
    numeric, and the factors as float64 (with the bank's copy) within ``memory_budget`` bytes (default
    4 GiB).  ``normalize``: also check that ``L_train`` can be normalised so.  A :class:`BankError` names
    the file and the array (key ``memory_budget`` when the factors do not fit).
    """
    p = os.fspath(path)
    heads = _npz_headers(p, "factor", "np.savez(path, L_train=..., starts=..., y_train=...)")
    keys = list(heads)
    if {"indptr", "indices", "data", "format", "shape"} <= set(keys):
        raise BankError(
            f"{p}: the file is a scipy.sparse.save_npz file (one sparse matrix), not an .npz of named "
            "arrays; L_train must be a dense array: save np.savez(path, L_train=L.toarray(), "
            "starts=..., y_train=...)"
        )
    _check_arrays(p, heads, ("L_train", "y_train"), FACTOR_ARRAYS, FACTOR_PAIRS)
    _one_layout("starts" in keys, "ranks" in keys, p)
    _check_memory(p, heads, memory_budget)
    with np.load(p, allow_pickle=False) as z:
        L = _factor_matrix(z["L_train"], f"{p}: L_train")
        N, R = L.shape
        starts = _layout(z["starts"] if "starts" in keys else None, z["ranks"] if "ranks" in keys else None, R, p)
        names = _names(z["names"] if "names" in keys else None, starts.size - 1, p)
        if normalize is not None:
            _normalization(L, starts, names, _check_normalize(normalize), f"{p}: L_train")
        y = _labels(z["y_train"], f"{p}: y_train", N)
        L_test = y_test = None
        if "L_test" in keys:
            L_test = _factor_matrix(z["L_test"], f"{p}: L_test", R)
            y_test = _labels(z["y_test"], f"{p}: y_test", L_test.shape[0])
    return PrecomputedFactors(L_train=L, starts=starts, names=names, y_train=y, L_test=L_test, y_test=y_test, source=p)


def _check_memory(p: str, heads: dict[str, tuple[tuple[int, ...], np.dtype]], memory_budget: float | None) -> None:
    """The factors as float64 (and the bank's copy of ``L_train``) against the budget."""

    def cells(name: str) -> int:
        shape = heads[name][0] if name in heads else (0,)
        return int(np.prod(shape, dtype=np.int64))

    need = 8 * (2 * cells("L_train") + cells("L_test"))
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else float(memory_budget)
    if need > budget:
        test = f" and L_test {heads['L_test'][0]}" if "L_test" in heads else ""
        problem = (
            f"the factors (L_train {heads['L_train'][0]}{test}) need about {format_bytes(need)} "
            f"as float64 (with the bank's copy of the training factors), more than the memory budget of "
            f"{format_bytes(budget)}"
        )
        raise BankError(
            f"{p}: {problem}",
            key="memory_budget",
            problem=problem,
            allowed="a larger memory budget, or fewer factor columns or rows",
        )
