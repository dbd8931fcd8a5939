"""The points of a factorization: checked, and one feature group at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...data import Dataset
from ..description import BankError
from ..fill import _as_points, _columns
from ..functions import BaseRows


def _new_points(X_new: Any, n_features: int) -> Any:
    """New points (an array, a CSR matrix or a Dataset) checked against the training data's width."""
    if isinstance(X_new, Dataset):
        X_new = X_new.X
    X = _as_points(X_new, "X_new")
    if X.shape[1] != n_features:
        raise BankError(f"X_new must have shape (n, {n_features}) like the training data; got {X.shape}")
    return X


def _distinct_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(A, axis=0, return_inverse=True, return_counts=True)`` (rows in order of first occurrence,
    counts as float), by a 64-bit hash of the rows; ``np.unique`` only if two different rows share a hash."""
    N = A.shape[0]
    bits = np.ascontiguousarray(A, dtype=np.float64).view(np.uint64)
    h = np.zeros(N, dtype=np.uint64)
    mult = np.uint64(0x100000001B3)
    for k in range(bits.shape[1]):  # FNV-style: exact and the same for equal rows, wherever they lie
        h *= mult
        h ^= bits[:, k]
        h ^= h >> np.uint64(29)
    order = np.argsort(h, kind="stable")
    hs = h[order]
    start = np.empty(N, dtype=bool)
    start[0] = True
    np.not_equal(hs[1:], hs[:-1], out=start[1:])
    group = np.cumsum(start) - 1  # group of each sorted row
    lead = order[np.flatnonzero(start)]  # first row of each group (in sorted order)
    if not np.array_equal(A[order], A[lead[group]]):
        U, inverse, counts = np.unique(A, axis=0, return_inverse=True, return_counts=True)
        return np.ascontiguousarray(U), np.ascontiguousarray(inverse.ravel()), counts.astype(np.float64)
    inverse = np.empty(N, dtype=np.intp)
    inverse[order] = group
    counts = np.bincount(group).astype(np.float64)
    return np.ascontiguousarray(A[lead]), inverse, counts


class _Groups:
    """The columns of one feature group at a time (the last one kept), dense or sparse."""

    def __init__(self, X: Any) -> None:
        self.X = X
        self.sparse = sp.issparse(X)
        self._key: tuple[int, ...] | None = None
        self._dense: np.ndarray | None = None
        self._base: BaseRows | None = None
        self._unique: tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def dense(self, features: tuple[int, ...]) -> np.ndarray:
        if features != self._key or self._dense is None:
            self._dense = self._base = None
            cols = np.asarray(features, dtype=np.intp)
            if self.sparse:
                self._dense = np.ascontiguousarray(self.X[:, cols].toarray())
            else:
                self._dense = _columns(self.X, cols)
            self._key = features
        return self._dense

    def unique(self, features: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct points of the group, the index of each point among them and their counts."""
        A = self.dense(features)
        if self._unique is None or self._unique[0] is not A:
            self._unique = (A, _distinct_rows(A))
        return self._unique[1]

    def base_rows(self, features: tuple[int, ...], kind: str, distinct: bool = False) -> BaseRows:
        """Base-matrix rows of the group's (distinct) points, shared by consecutive kernels on it."""
        A = self.unique(features)[0] if distinct else self.dense(features)
        if self._base is None or self._base.kind != kind or self._base.X is not A:
            self._base = None
            self._base = BaseRows(kind, A)
        return self._base

    def sparse_columns(self, features: tuple[int, ...]) -> sp.csr_matrix:
        return sp.csr_matrix(self.X[:, np.asarray(features, dtype=np.intp)])
