"""The Gram matrices of a bank's kernels computed into an array, with progress reports."""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from .._jit.gram import all_finite, symmetrize_inplace
from .description import BankError, BankKernel
from .functions import base_matrix


class _ProgressReporter:
    """Reports ``{"what", "done", "total", "elapsed_s"}`` to ``callback`` at most every 0.1 s, and when all are done."""

    def __init__(self, total: int, label: str, progress: Any):
        self.total = total
        self.label = label
        self.callback = progress if callable(progress) else None
        self._last = 0.0
        self._t0 = time.monotonic()

    def update(self, done: int) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        self.callback({"what": self.label, "done": done, "total": self.total, "elapsed_s": now - self._t0})


def _as_points(X: Any, name: str, empty: bool = False) -> Any:
    """``X`` as a finite float64 CSR matrix or C-contiguous array (n, d); no rows only when ``empty``."""
    sparse = sp.issparse(X)
    A = sp.csr_matrix(X, dtype=np.float64) if sparse else np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < (0 if empty else 1) or A.shape[1] < 1:
        raise BankError(f"{name} must be a non-empty 2-d array (samples x features); got shape {A.shape}")
    if sparse:
        if not np.all(np.isfinite(A.data)):
            raise BankError(f"{name} contains NaN or infinite values")
        return A if A.has_sorted_indices else A.sorted_indices()  # a sorted copy: the caller's X stays as given
    if not np.all(np.isfinite(A)):
        r, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise BankError(f"{name}[{r}, {j}] is {float(A[r, j])!r}; NaN and infinite values are not allowed")
    return np.ascontiguousarray(A)


def _columns(A: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The columns ``cols`` of ``A``: ``A`` itself when they are all of them in order, else a C-contiguous copy."""
    if len(cols) == A.shape[1] and np.array_equal(cols, np.arange(len(cols))):
        return A
    return np.ascontiguousarray(A[:, cols])


def _dense_columns(X: Any, columns: np.ndarray, name: str) -> np.ndarray:
    """The needed columns of ``X`` (dense or sparse, any number of rows) as a dense float64 array, checked finite."""
    A = _as_points(X, name, empty=True)
    return np.ascontiguousarray(A[:, columns].toarray()) if sp.issparse(A) else _columns(A, columns)


def _localizer(columns: np.ndarray, d: int) -> Callable[[tuple[int, ...]], np.ndarray]:
    pos = np.full(d, -1, dtype=np.intp)
    pos[columns] = np.arange(columns.size)

    def local(features: tuple[int, ...]) -> np.ndarray:
        return pos[np.asarray(features, dtype=np.intp)]

    return local


def _fill(
    out: np.ndarray,
    specs: Sequence[BankKernel],
    local: Callable[[tuple[int, ...]], np.ndarray],
    XA: np.ndarray,
    XB: np.ndarray | None,
    label: str,
    progress: Any,
) -> None:
    """``out[m] = k_m(XA_s, XB_s)`` (``XB=None``: symmetric); consecutive kernels on the same columns share a base."""
    bar = _ProgressReporter(len(specs), label, progress)
    sub_key: tuple[int, ...] | None = None
    A = B = None
    base_key: tuple[str, tuple[int, ...]] | None = None
    base = None
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite values are reported below
        for m, spec in enumerate(specs):
            if spec.features != sub_key:
                idx = local(spec.features)
                A = _columns(XA, idx)
                B = None if XB is None else _columns(XB, idx)
                sub_key = spec.features
            func = spec.function
            target = out[m]
            where = f"kernel {m} {spec.label!r}"
            if func.uses is not None:
                key = (func.uses, spec.features)
                if key != base_key:
                    base = None  # free before allocating the next one
                    base = base_matrix(func.uses, A, B)
                    base_key = key
                res = func.from_base(base, out=target)
                if res is not target:
                    _check_result(res, target.shape, where)
                    target[...] = res
            else:
                res = func.gram(A) if B is None else func.gram(A, B)
                _check_result(res, target.shape, where)
                target[...] = res
                if B is None:
                    scale = float(np.max(np.abs(target)))
                    asym = symmetrize_inplace(target)
                    if asym > 1e-8 * scale:
                        raise BankError(
                            f"{where}: gram(X) is not symmetric "
                            f"(max |K - K^T| = {asym:.3g}); a kernel function must be symmetric"
                        )
            _check_finite(target, where)
            bar.update(m + 1)


def _check_result(res: Any, shape: tuple[int, ...], where: str) -> None:
    if not isinstance(res, np.ndarray) or res.shape != shape:
        got = res.shape if isinstance(res, np.ndarray) else type(res).__name__
        raise BankError(f"{where}: gram() must return an array of shape {shape}; got {got}")


def _check_finite(G: np.ndarray, where: str) -> None:
    if not all_finite(G):
        raise BankError(
            f"{where} has NaN or infinite values (overflow?); standardise the features or change its parameters"
        )
