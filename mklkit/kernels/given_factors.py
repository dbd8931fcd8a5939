r"""Given factors: a :class:`~mklkit.kernels.factor.FactorBank` from factors :math:`L_m` the caller holds.

The factors come side by side as one (N, R) array with the column layout ``starts`` (M + 1,) or
``ranks`` (M,).  Normalisation: ``"trace"`` divides :math:`L_m` by :math:`\|L_m\|_F`, ``"diagonal"``
each row of a block by its norm, ``"none"`` (the default) keeps them; the bank's ``factor_map``
(:class:`GivenFactorMap`) normalises raw rows of new points the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .._jit.gram import all_finite
from .description import BankError, _check_normalize
from .precomputed import _dense_array, _names

if TYPE_CHECKING:  # pragma: no cover
    from .factor import FactorBank


def _factor_matrix(L: Any, where: str, R: int | None = None) -> np.ndarray:
    """``L`` (n, R) as a finite float64 C-contiguous array; ``R``: the columns it must have."""
    A = _dense_array(L, where, 2, "samples x factor columns")
    if R is not None and A.shape[1] != R:
        raise BankError(f"{where} must have R = {R} columns like L_train; got shape {A.shape}")
    if not all_finite(A):
        i, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise BankError(
            f"{where} has a NaN or infinite value at [{i}, {j}]: {float(A[i, j])!r}; factors must be finite"
        )
    return A


def _int_vector(a: Any, where: str) -> np.ndarray:
    v = np.asarray(a)
    if v.ndim != 1 or v.size == 0:
        raise BankError(f"{where} must be a non-empty 1-d array of integers; got shape {v.shape}")
    if v.dtype.kind not in "iu":
        raise BankError(f"{where} must hold integers; got dtype {v.dtype}")
    return v.astype(np.int64)


def _one_layout(has_starts: bool, has_ranks: bool, where: str) -> None:
    if has_starts == has_ranks:
        raise BankError(
            f"{where}: the column layout needs exactly one of starts (M + 1,) or ranks (M,); "
            f"got {'both' if has_starts else 'neither'}"
        )


def _layout(starts: Any, ranks: Any, R: int, where: str) -> np.ndarray:
    """The column offsets (M + 1,) of the kernels, from ``starts`` or ``ranks`` (exactly one)."""
    _one_layout(starts is not None, ranks is not None, where)
    if starts is not None:
        s = _int_vector(starts, f"{where}: starts")
        if s.size < 2:
            raise BankError(f"{where}: starts must have M + 1 >= 2 entries (one kernel at least); got {s.tolist()}")
        if s[0] != 0:
            raise BankError(f"{where}: starts[0] must be 0; got {int(s[0])}")
        down = np.flatnonzero(np.diff(s) < 0)
        if down.size:
            k = int(down[0]) + 1
            raise BankError(
                f"{where}: starts must be non-decreasing; got starts[{k}] = {int(s[k])} < "
                f"starts[{k - 1}] = {int(s[k - 1])}"
            )
        if s[-1] != R:
            raise BankError(f"{where}: starts[-1] must be R = {R} (the columns of L_train); got {int(s[-1])}")
        return s
    r = _int_vector(ranks, f"{where}: ranks")
    low = np.flatnonzero(r < 1)
    if low.size:
        k = int(low[0])
        raise BankError(f"{where}: ranks must be integers >= 1; got ranks[{k}] = {int(r[k])}")
    if int(r.sum()) != R:
        raise BankError(f"{where}: ranks must sum to R = {R} (the columns of L_train); got sum {int(r.sum())}")
    return np.concatenate([[0], np.cumsum(r)]).astype(np.int64)


def _block_row_norms(LT: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """:math:`\\|L_m[i]\\|_2` for every kernel ``m`` and row ``i``, (M, n), from ``LT`` (R, n)."""
    blocks = (LT[starts[m] : starts[m + 1]] for m in range(starts.size - 1))
    return np.array([np.sqrt(np.einsum("rn,rn->n", B, B)) for B in blocks]).reshape(starts.size - 1, LT.shape[1])


@dataclass
class GivenFactorMap:
    r"""The ``factor_map`` of a bank of given factors: raw factor rows of new points (n_new, R) -> the bank's
    rows :math:`L(X_{new})^\top` (R, n_new); ``scale`` (M,) multiplies each block (``"trace"``:
    :math:`1/\|L_m\|_F` of the training factors, else 1)."""

    names: list[str]
    starts: np.ndarray
    normalize: str
    scale: np.ndarray

    @property
    def n_features(self) -> int:
        """R: the columns of the factor rows of new points."""
        return int(self.starts[-1])

    @property
    def methods(self) -> list[str]:
        """How each kernel was factored: ``given`` (by the caller)."""
        return ["given"] * len(self.names)

    def rows(self, L: np.ndarray) -> np.ndarray:
        """Checked, normalised :math:`L^\\top` (R, n) of raw rows ``L`` (n, R) (zero rows stay zero)."""
        LT = np.array(L.T, dtype=np.float64, order="C")  # a copy: the caller's rows stay as they are
        LT *= np.repeat(self.scale, np.diff(self.starts))[:, None]
        if self.normalize == "diagonal":
            norms = _block_row_norms(LT, self.starts)
            inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
            LT *= np.repeat(inv, np.diff(self.starts), axis=0)
        return LT

    def transform(self, X_new: Any) -> np.ndarray:
        """Factor rows (R, n_new) of new points given by their raw factor rows ``X_new`` (n_new, R)."""
        return self.rows(_factor_matrix(X_new, "L_new", self.n_features))

    def fold(self, kernels: Sequence[int], beta: np.ndarray) -> "FoldedGivenFactorMap":
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t}` over ``kernels`` for ``beta`` (T, R)."""
        beta = np.asarray(beta, dtype=np.float64)
        if beta.ndim != 2 or beta.shape[1] != self.n_features:
            raise ValueError(f"beta must have shape (T, {self.n_features}); got {beta.shape}")
        held = np.asarray(kernels, dtype=np.intp).ravel()
        cols = np.concatenate(
            [np.arange(self.starts[m], self.starts[m + 1]) for m in held] + [np.zeros(0, dtype=np.int64)]
        ).astype(np.intp)
        ranks = np.diff(self.starts)[held]
        sub = GivenFactorMap(
            [self.names[m] for m in held],
            np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64),
            self.normalize,
            np.asarray(self.scale, dtype=np.float64)[held].copy(),
        )
        return FoldedGivenFactorMap(sub, cols, self.n_features, np.ascontiguousarray(beta[:, cols].T))


@dataclass
class FoldedGivenFactorMap:
    r"""Sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` of some kernels of a :class:`GivenFactorMap`
    (:meth:`GivenFactorMap.fold`): the held blocks' columns ``cols`` of the raw rows (n_new, R),
    normalised by ``held``, times ``weights`` (R_held, T)."""

    held: GivenFactorMap
    cols: np.ndarray
    n_features: int
    weights: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.weights.nbytes + self.cols.nbytes + self.held.scale.nbytes)

    def decision_parts(self, X_new: Any) -> np.ndarray:
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t}`, (n_new, T), from raw rows (n_new, R)."""
        L = _factor_matrix(X_new, "L_new", self.n_features)
        return np.asarray(self.held.rows(L[:, self.cols]).T @ self.weights, dtype=np.float64)


def bank_from_factors(
    cls: type[FactorBank],
    L_train: Any,
    starts: Sequence[int] | None = None,
    *,
    ranks: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    normalize: str = "none",
    source: str = "L_train",
) -> FactorBank:
    r"""A factor bank from given factors :math:`L = [L_1, \dots, L_M]` (N, R), checked and normalised.

    Parameters
    ----------
    L_train : array (N, R)
        The factors side by side, dense (convert a ``scipy.sparse`` matrix with ``.toarray()``).
    starts : sequence of int (M + 1,), optional
        Column offsets, non-decreasing from 0 to R: kernel ``m`` is ``L_train[:, starts[m]:starts[m+1]]``.
    ranks : sequence of int (M,), optional
        Instead of ``starts``: the columns of each kernel, each >= 1.
    names : sequence of str (M,), optional
        Default ``k0``, ``k1``, ...
    normalize : {"none", "trace", "diagonal"}
    source : str
        How errors name the factors (e.g. ``f.npz: L_train``).

    Returns
    -------
    FactorBank
        Its ``transform(L_test)`` and ``decision_function(L_test, alpha, bias)`` take raw rows (n_test, R).
    """
    normalize = _check_normalize(normalize)
    L = _factor_matrix(L_train, source)
    where = source.rsplit(": ", 1)[0]
    st = _layout(starts, ranks, L.shape[1], where)
    M = st.size - 1
    nm = _names(names, M, where)
    fmap = GivenFactorMap(names=nm, starts=st, normalize=normalize, scale=_normalization(L, st, nm, normalize, source))
    return cls(fmap.rows(L), st, factor_map=fmap)


def _normalization(L: np.ndarray, starts: np.ndarray, names: list[str], normalize: str, source: str) -> np.ndarray:
    """The scale of each block (M,) ``normalize`` gives ``L`` (N, R); refuses a zero block or row it cannot scale."""
    LT = L.T
    M = starts.size - 1
    if normalize == "trace":
        tr = np.array([float(np.einsum("rn,rn->", B, B)) for B in (LT[starts[m] : starts[m + 1]] for m in range(M))])
        bad = np.flatnonzero(~(tr > 0))
        if bad.size:
            m = int(bad[0])
            raise BankError(
                f"{source}: kernel {m} ({names[m]!r}, columns {int(starts[m])}:{int(starts[m + 1])}) "
                "is all zero: tr(L_m L_m^T) = 0; normalize 'trace' needs a non-zero block; drop the "
                "kernel or use normalize 'none'"
            )
        return 1.0 / np.sqrt(tr)
    if normalize == "diagonal":
        norms = _block_row_norms(LT, starts)
        bad = np.argwhere(~(norms > 0))
        if bad.size:
            m, i = (int(v) for v in bad[0])
            raise BankError(
                f"{source}: row {i} of kernel {m} ({names[m]!r}) is zero: k(x_{i}, x_{i}) = 0; "
                "normalize 'diagonal' needs a non-zero row in every block; use normalize 'trace' "
                "or 'none'"
            )
    return np.ones(M)
