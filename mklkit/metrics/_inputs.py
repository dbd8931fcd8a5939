r"""The kernels and targets the metrics accept, checked: one Gram matrix, a stack, a dense bank or a
factor bank; labels, real targets and the target kernel they define."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .._jit.gram import all_finite
from ..components.params import ParamError
from ..kernels.build import KernelBank
from ..kernels.factor import FactorBank
from ..kernels.ops import ArrayBank

#: the memory of the centred copies of dense kernels made at a time, and of a factor kernel's cached columns
CHUNK_BYTES = 256 * 2**20

KERNELS = "a square (N, N) array, an (M, N, N) stack of Gram matrices, a KernelBank, an ArrayBank or a FactorBank"
_REBUILD = (
    " (a fitted estimator's bank_ keeps no training kernels: build them with "
    "KernelBank.build(est.scaler_.transform(X), est.kernels_) or build_factor_bank, docs/metrics.md)"
)
_LABELS = "a 1-d array of N class labels (at least two classes) or an (N, c) array of real targets"


@dataclass
class Kernels:
    """Kernels as given: ``dense`` (M, N, N) or ``blocks`` (the M transposed factors :math:`L_m^\\top`)."""

    n: int
    single: bool
    dense: np.ndarray | None = None
    blocks: list[Any] | None = None

    @property
    def m(self) -> int:
        return int(self.dense.shape[0]) if self.dense is not None else len(self.blocks or ())

    def out(self, values: np.ndarray) -> Any:
        """A float for one Gram matrix, else the (M,) array."""
        return float(values[0]) if self.single else values


def kernels_of(K: Any, key: str, owner: str) -> Kernels:
    """``K`` in any of the accepted forms, checked (square, finite, symmetric)."""
    if isinstance(K, FactorBank):
        return Kernels(K.n_samples, False, blocks=[K.block(m) for m in range(K.n_kernels)])
    if isinstance(K, (KernelBank, ArrayBank)):
        if K.K.ndim != 3 or K.K.shape[1] != K.K.shape[2]:
            raise ParamError(
                key, f"a {type(K).__name__} without Gram matrices (K.shape {K.K.shape})", KERNELS + _REBUILD, owner
            )
        return Kernels(int(K.K.shape[1]), False, dense=K.K)
    if getattr(K, "representation", None) is not None or isinstance(K, (str, bytes)) or K is None:
        hint = _REBUILD if type(K).__name__ == "FactorPredictor" else ""
        raise ParamError(key, type(K).__name__ if not isinstance(K, (str, bytes)) else K, KERNELS + hint, owner)
    try:
        A = np.asarray(K, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParamError(key, type(K).__name__, KERNELS, owner) from None
    if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2] or A.shape[-1] < 1 or A.size == 0:
        raise ParamError(f"{key}.shape", A.shape, KERNELS, owner)
    single = A.ndim == 2
    A = np.ascontiguousarray(A[None] if single else A)
    if not all_finite(A.reshape(1, -1)):
        raise ParamError(key, "an array with NaN or infinite entries", "finite Gram matrices", owner)
    for m in range(A.shape[0]):
        asym = float(np.max(np.abs(A[m] - A[m].T)))
        if asym > 1e-10 * max(float(np.max(np.abs(A[m]))), 1e-300):
            where = key if single else f"{key}[{m}]"
            raise ParamError(where, f"a matrix with |K - K^T| up to {asym:.3g}", "a symmetric Gram matrix", owner)
    return Kernels(int(A.shape[1]), single, dense=A)


def dense_block(B: Any) -> np.ndarray:
    """A factor block as a contiguous float64 array."""
    return np.ascontiguousarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)


def _classes(arr: np.ndarray, allowed: str, owner: str) -> tuple[np.ndarray, np.ndarray]:
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ParamError("y", "labels with NaN or infinite entries", allowed, owner)
    return np.unique(arr, return_inverse=True)


def target_factor(y: Any, n: int, owner: str) -> np.ndarray:
    """The factor Y (N, c) of the target kernel :math:`YY^\\top` (:func:`target_kernel`)."""
    arr = np.asarray(y)
    if arr.ndim == 2:
        if arr.shape[0] != n or arr.shape[1] < 1:
            raise ParamError("y.shape", arr.shape, f"(N, c) with N = {n}, the kernels' size", owner)
        try:
            Y = np.asarray(arr, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParamError("y", f"an array of {arr.dtype}", "real targets in a 2-d array", owner) from None
        if not np.all(np.isfinite(Y)):
            raise ParamError("y", "an array with NaN or infinite entries", "finite targets", owner)
        return np.ascontiguousarray(Y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParamError("y.shape", arr.shape, f"({n},), one label per point, or {_LABELS}", owner)
    classes, codes = _classes(arr, _LABELS, owner)
    if arr.dtype.kind in "fc" and np.any(classes != np.round(classes)):
        raise ParamError(
            "y", "real values in a 1-d array", "class labels in a 1-d array; real targets as y[:, None]", owner
        )
    if classes.size < 2:
        raise ParamError("y", f"labels of one class ({classes[0]!r})" if classes.size else arr.shape, _LABELS, owner)
    if classes.size == 2:
        return (2.0 * codes - 1.0)[:, None]
    Y = np.zeros((n, classes.size))
    Y[np.arange(n), codes] = 1.0
    return Y


def target_kernel(y: Any) -> np.ndarray:
    r"""The target (ideal) kernel of labels: :math:`yy^\top` for two classes, :math:`YY^\top` for more.

    Two classes are coded :math:`y_i = \pm 1` (the first class in sorted order is :math:`-1`), so the
    entry is :math:`+1` for a pair of the same class and :math:`-1` otherwise (Cristianini et al. 2002).
    More classes use the class indicators :math:`Y_{ic} = [y_i = c]`, so the entry is 1 for a pair of
    the same class and 0 otherwise.  Both have the same centred kernel up to a positive factor when
    there are two classes.  An (N, c) array of real targets ``Y`` gives :math:`YY^\top` as it is.

    Parameters
    ----------
    y : array (N,) of labels, or array (N, c) of real targets

    Returns
    -------
    ndarray (N, N)
    """
    n = int(np.shape(y)[0]) if np.ndim(y) else 0
    Y = target_factor(y, n, "target_kernel")
    return Y @ Y.T


def two_classes(y: Any, n: int, owner: str) -> np.ndarray:
    r"""Labels of two classes as :math:`\pm 1` (the first class in sorted order :math:`-1`)."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParamError("y.shape", arr.shape, f"({n},): one label per point of the kernels", owner)
    classes, codes = _classes(arr, "labels of exactly two classes", owner)
    if classes.size != 2:
        got = f"labels of {classes.size} class{'es' if classes.size != 1 else ''} ({', '.join(map(repr, classes[:5].tolist()))})"
        raise ParamError("y", got, "labels of exactly two classes (the margin is between two classes)", owner)
    return 2.0 * codes - 1.0


def second_kernels(K2: Any, y: Any, first: Kernels, owner: str) -> Kernels:
    """The kernels compared with ``first``: ``K2`` (one kernel or as many), or the target kernel of ``y``."""
    if (K2 is None) == (y is None):
        raise ParamError("K2", "both K2 and y" if K2 is not None else "neither K2 nor y", "exactly one of them", owner)
    if y is not None:
        return Kernels(first.n, True, blocks=[target_factor(y, first.n, owner).T])
    second = kernels_of(K2, "K2", owner)
    if second.n != first.n:
        raise ParamError("K2", f"kernels on {second.n} points", f"kernels on N = {first.n} points like K1", owner)
    if second.m != 1 and second.m != first.m:
        raise ParamError("K2", f"{second.m} kernels", f"one kernel or M = {first.m} like K1", owner)
    return second
