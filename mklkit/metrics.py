r"""Kernel metrics: alignment, centred alignment, radius, margin, their ratio and the spectral ratio.

Every function takes kernels in any of these forms:

* one Gram matrix, an (N, N) array: the result is a float;
* a stack, an (M, N, N) array, a :class:`~mklkit.kernels.KernelBank` or an
  :class:`~mklkit.kernels.ops.ArrayBank`: one value per kernel, an (M,) array;
* a :class:`~mklkit.kernels.FactorBank` (:math:`K_m = L_mL_m^\top`): one value per kernel, computed
  from the factors without forming an N × N matrix.

The Frobenius products of factors are those of small matrices,
:math:`\langle L_1L_1^\top, L_2L_2^\top\rangle_F = \|L_1^\top L_2\|_F^2`; centring a factor kernel
centres the rows of its factor, :math:`HLL^\top H = (HL)(HL)^\top` with :math:`H = I - \mathbf 1\mathbf
1^\top/N`; the quadratic programs of :func:`radius` and :func:`margin` read the columns
:math:`K_{:,k} = L L_{k,:}^\top`.  See ``docs/metrics.md``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ._jit import simplex as ksimplex
from ._jit.gram import all_finite
from .components.params import ParamError
from .kernels.build import KernelBank
from .kernels.factor import FactorBank
from .kernels.ops import ArrayBank
from .result import ConvergenceWarning, Status

__all__ = [
    "SimplexSolution",
    "alignment",
    "alignment_matrix",
    "centered_alignment",
    "combine",
    "frobenius_products",
    "margin",
    "radius",
    "ratio",
    "spectral_ratio",
    "target_kernel",
]

_KERNELS = "a square (N, N) array, an (M, N, N) stack of Gram matrices, a KernelBank, an ArrayBank or a FactorBank"
_REBUILD = (
    " (a fitted estimator's bank_ keeps no training kernels: build them with "
    "KernelBank.build(est.scaler_.transform(X), est.kernels_) or build_factor_bank, docs/metrics.md)"
)
_LABELS = "a 1-d array of N class labels (at least two classes) or an (N, c) array of real targets"
#: the memory of the centred copies of dense kernels made at a time
_CHUNK_BYTES = 256 * 2**20
#: the default relative tolerance of the quadratic programs
TOL = 1e-8


# --------------------------------------------------------------------------- the kernels given


@dataclass
class _Kernels:
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


def _kernels(K: Any, key: str, owner: str) -> _Kernels:
    if isinstance(K, FactorBank):
        return _Kernels(K.n_samples, False, blocks=[K.block(m) for m in range(K.n_kernels)])
    if isinstance(K, (KernelBank, ArrayBank)):
        if K.K.ndim != 3 or K.K.shape[1] != K.K.shape[2]:
            raise ParamError(
                key, f"a {type(K).__name__} without Gram matrices (K.shape {K.K.shape})", _KERNELS + _REBUILD, owner
            )
        return _Kernels(int(K.K.shape[1]), False, dense=K.K)
    if getattr(K, "representation", None) is not None or isinstance(K, (str, bytes)) or K is None:
        hint = _REBUILD if type(K).__name__ == "FactorPredictor" else ""
        raise ParamError(key, type(K).__name__ if not isinstance(K, (str, bytes)) else K, _KERNELS + hint, owner)
    try:
        A = np.asarray(K, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParamError(key, type(K).__name__, _KERNELS, owner) from None
    if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2] or A.shape[-1] < 1 or A.size == 0:
        raise ParamError(f"{key}.shape", A.shape, _KERNELS, owner)
    single = A.ndim == 2
    A = np.ascontiguousarray(A[None] if single else A)
    if not all_finite(A.reshape(1, -1)):
        raise ParamError(key, "an array with NaN or infinite entries", "finite Gram matrices", owner)
    for m in range(A.shape[0]):
        asym = float(np.max(np.abs(A[m] - A[m].T)))
        if asym > 1e-10 * max(float(np.max(np.abs(A[m]))), 1e-300):
            where = key if single else f"{key}[{m}]"
            raise ParamError(where, f"a matrix with |K - K^T| up to {asym:.3g}", "a symmetric Gram matrix", owner)
    return _Kernels(int(A.shape[1]), single, dense=A)


def _target_factor(y: Any, n: int, owner: str) -> np.ndarray:
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
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ParamError("y", "labels with NaN or infinite entries", _LABELS, owner)
    if arr.dtype.kind in "fc" and np.any(arr != np.round(arr)):
        raise ParamError(
            "y", "real values in a 1-d array", "class labels in a 1-d array; real targets as y[:, None]", owner
        )
    classes, codes = np.unique(arr, return_inverse=True)
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
    Y = _target_factor(y, n, "target_kernel")
    return Y @ Y.T


# --------------------------------------------------------------------------- Frobenius products


def _dense_chunks(A: np.ndarray, centered: bool) -> Iterator[tuple[slice, np.ndarray]]:
    """``A`` (M, N, N) by chunks of kernels, each (b, N, N): :math:`HA_mH` (a copy) when ``centered``."""
    n = A.shape[1]
    step = A.shape[0] if not centered else max(1, int(_CHUNK_BYTES // max(8 * n * n, 1)))
    for a in range(0, A.shape[0], step):
        C = A[a : a + step]
        if centered:
            C = C - C.mean(axis=1, keepdims=True)
            C -= C.mean(axis=2, keepdims=True)
        yield slice(a, a + C.shape[0]), C


def _flat(C: np.ndarray) -> np.ndarray:
    return C.reshape(C.shape[0], -1)


def _dense_block(B: Any) -> np.ndarray:
    return np.ascontiguousarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)


class _Factors:
    r"""Transposed factors prepared for Frobenius products, one block at a time (no copy of the bank):
    dense blocks centred explicitly (:math:`(HL)^\top`), sparse blocks kept with their mean rows
    :math:`\mu = L^\top\mathbf 1/N` for the rank-one correction :math:`(HL_1)^\top(HL_2) = L_1^\top L_2 -
    N\mu_1\mu_2^\top`."""

    def __init__(self, blocks: list[Any], n: int, centered: bool) -> None:
        self.n = n
        self.blocks = blocks
        self.centered = centered

    def block(self, k: int) -> tuple[Any, np.ndarray | None]:
        """The block ``k`` to multiply (centred when dense) and its mean rows (sparse and centred)."""
        B = self.blocks[k]
        if sp.issparse(B):
            B = sp.csr_matrix(B)
            return B, (np.asarray(B.mean(axis=1)).ravel() if self.centered else None)
        B = np.asarray(B, dtype=np.float64)
        return (B - B.mean(axis=1, keepdims=True) if self.centered else B), None

    def cross(self, k: int, other: "_Factors", j: int) -> np.ndarray:
        r""":math:`\tilde L_k^\top \tilde L_j` (r_k, r_j) of the (centred) factors."""
        Tk, mk = self.block(k)
        Tj, mj = other.block(j) if (other is not self or j != k) else (Tk, mk)
        P = Tk @ Tj.T
        P = P.toarray() if sp.issparse(P) else np.asarray(P)
        if mk is not None and mj is not None:
            P = P - self.n * np.outer(mk, mj)
        return P

    def dense(self, k: int) -> np.ndarray:
        r""":math:`(HL_k)^\top` or :math:`L_k^\top` (r_k, N) as a dense array."""
        T, mu = self.block(k)
        T = _dense_block(T)
        return T - mu[:, None] if mu is not None else T

    def stacked(self) -> tuple[Any, np.ndarray | None]:
        r"""All blocks stacked, (R, N): sparse with the mean rows (R,) when centred, or dense centred
        (one copy of the factors)."""
        if all(sp.issparse(B) for B in self.blocks):
            S = sp.vstack([sp.csr_matrix(B) for B in self.blocks], format="csr")
            return S, (np.asarray(S.mean(axis=1)).ravel() if self.centered else None)
        S = np.vstack([_dense_block(B) for B in self.blocks])
        if self.centered:
            S -= S.mean(axis=1, keepdims=True)
        return S, None


def _norms(ks: _Kernels, centered: bool) -> np.ndarray:
    r""":math:`\|K_m\|_F` (or :math:`\|HK_mH\|_F`) for every kernel, (M,)."""
    out = np.empty(ks.m)
    if ks.dense is not None:
        for sl, C in _dense_chunks(ks.dense, centered):
            F = _flat(C)
            out[sl] = np.sqrt(np.einsum("mk,mk->m", F, F))
    else:
        fa = _Factors(ks.blocks or [], ks.n, centered)
        for k in range(ks.m):
            out[k] = float(np.linalg.norm(fa.cross(k, fa, k)))
    return out


def _inner_dense_factor(A: np.ndarray, T: np.ndarray, centered: bool) -> np.ndarray:
    r""":math:`\langle K_m, (HL)(HL)^\top\rangle = \mathrm{tr}(\tilde L^\top K_m\tilde L)` for every dense
    ``A[m]`` and one factor ``T`` :math:`=\tilde L^\top` (r, N) (centred by the caller when ``centered``:
    :math:`\langle HK_mH, \tilde L\tilde L^\top\rangle = \langle K_m, \tilde L\tilde L^\top\rangle`)."""
    M, n, _ = A.shape
    KL = (A.reshape(M * n, n) @ T.T).reshape(M, n, -1)
    return np.einsum("mnr,rn->m", KL, T)


def _inner(A: _Kernels, B: _Kernels, centered: bool) -> np.ndarray:
    r""":math:`\langle \tilde A_m, \tilde B_m\rangle_F` (``B`` one kernel: :math:`\tilde B_0`), (M,)."""
    M = A.m
    idx = (lambda m: 0) if B.m == 1 else (lambda m: m)
    out = np.empty(M)
    if A.dense is not None and B.dense is not None:
        if B.m == 1:
            Bc = next(_dense_chunks(B.dense, centered))[1]
            v = Bc.reshape(-1)
            for sl, C in _dense_chunks(A.dense, centered):
                out[sl] = _flat(C) @ v
        else:
            for sl, C in _dense_chunks(A.dense, centered):
                D = next(_dense_chunks(B.dense[sl], centered))[1] if centered else B.dense[sl]
                out[sl] = np.einsum("mk,mk->m", _flat(C), _flat(D))
        return out
    if A.dense is None and B.dense is None:
        fa, fb = _Factors(A.blocks or [], A.n, centered), _Factors(B.blocks or [], B.n, centered)
        for m in range(M):
            P = fa.cross(m, fb, idx(m))
            out[m] = float(np.einsum("ij,ij->", P, P))
        return out
    dense, factor = (A, B) if A.dense is not None else (B, A)
    ff = _Factors(factor.blocks or [], factor.n, centered)
    assert dense.dense is not None
    if dense.m == 1 and factor.m > 1:
        for m in range(M):
            out[m] = _inner_dense_factor(dense.dense, ff.dense(m), centered)[0]
    elif factor.m == 1:
        out[:] = _inner_dense_factor(dense.dense, ff.dense(0), centered)
    else:
        for m in range(M):
            out[m] = _inner_dense_factor(dense.dense[m : m + 1], ff.dense(m), centered)[0]
    return out


def _cosines(inner: np.ndarray, n1: np.ndarray, n2: np.ndarray, owner: str, centered: bool) -> np.ndarray:
    denom = n1 * n2
    zero = np.flatnonzero(denom <= 0.0)
    if zero.size:
        what = "centred kernel" if centered else "kernel"
        raise ParamError(
            "K1" if np.any(n1[zero] <= 0.0) else "K2",
            f"a {what} of zero Frobenius norm (kernel {int(zero[0])})",
            f"kernels with a non-zero {what}: the cosine is undefined at 0",
            owner,
        )
    return np.clip(inner / denom, -1.0, 1.0)


def _second(K2: Any, y: Any, first: _Kernels, owner: str) -> _Kernels:
    if (K2 is None) == (y is None):
        raise ParamError("K2", "both K2 and y" if K2 is not None else "neither K2 nor y", "exactly one of them", owner)
    if y is not None:
        Y = _target_factor(y, first.n, owner)
        return _Kernels(first.n, True, blocks=[Y.T])
    second = _kernels(K2, "K2", owner)
    if second.n != first.n:
        raise ParamError("K2", f"kernels on {second.n} points", f"kernels on N = {first.n} points like K1", owner)
    if second.m != 1 and second.m != first.m:
        raise ParamError("K2", f"{second.m} kernels", f"one kernel or M = {first.m} like K1", owner)
    return second


def _alignment(K1: Any, K2: Any, y: Any, centered: bool, owner: str) -> Any:
    first = _kernels(K1, "K1", owner)
    second = _second(K2, y, first, owner)
    inner = _inner(first, second, centered)
    n1 = _norms(first, centered)
    n2 = _norms(second, centered)
    n2 = np.broadcast_to(n2, n1.shape) if second.m == 1 else n2
    return first.out(_cosines(inner, n1, n2, owner, centered))


def alignment(K1: Any, K2: Any = None, *, y: Any = None) -> Any:
    r"""Kernel alignment: the cosine of two kernels in the Frobenius inner product (Cristianini et al. 2002).

    .. math::

        A(K_1, K_2) = \frac{\langle K_1, K_2\rangle_F}{\|K_1\|_F\,\|K_2\|_F},
        \qquad \langle K_1, K_2\rangle_F = \sum_{ij} K_{1,ij}K_{2,ij}.

    With labels ``y`` in place of ``K2`` it is the kernel–target alignment :math:`A(K, T)`,
    :math:`T` the target kernel of :func:`target_kernel`.  It lies in [-1, 1] (in [0, 1] for two
    positive semidefinite kernels) and does not change when a kernel is multiplied by a constant > 0.

    Parameters
    ----------
    K1 : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    K2 : the same forms, optional
        One kernel (compared with every kernel of ``K1``) or M kernels (compared pairwise).
    y : array (N,) of labels or (N, c) of real targets, optional
        In place of ``K2``.

    Returns
    -------
    float for one Gram matrix ``K1`` (and one ``K2``), else ndarray (M,)

    See Also
    --------
    centered_alignment, alignment_matrix
    """
    return _alignment(K1, K2, y, False, "alignment")


def centered_alignment(K1: Any, K2: Any = None, *, y: Any = None) -> Any:
    r"""Centred kernel alignment (Cortes, Mohri & Rostamizadeh 2012): :func:`alignment` of the centred kernels.

    .. math::

        \rho(K_1, K_2) = \frac{\langle HK_1H, HK_2H\rangle_F}{\|HK_1H\|_F\,\|HK_2H\|_F},
        \qquad H = I - \tfrac1N\mathbf 1\mathbf 1^\top,

    :math:`HKH` being the Gram matrix of the features centred at their mean.  Unlike :func:`alignment`
    it does not change when a constant is added to a kernel, and it does not reward the mean
    similarity every kernel shares; with ``y`` it measures how well a kernel separates the classes.

    Parameters and returns as :func:`alignment`.
    """
    return _alignment(K1, K2, y, True, "centered_alignment")


def alignment_matrix(K: Any, centered: bool = True, normalized: bool = True) -> np.ndarray:
    r"""The alignments of every pair of kernels of a bank, (M, M).

    :math:`F_{kl} = \langle \tilde K_k, \tilde K_l\rangle_F / (\|\tilde K_k\|_F\|\tilde K_l\|_F)`, with
    :math:`\tilde K = HKH` (``centered``, the default) or :math:`\tilde K = K`; ``normalized=False``
    gives the products :math:`\langle \tilde K_k, \tilde K_l\rangle_F` themselves (the matrix of
    ALIGNF's quadratic program, Cortes et al. 2012; its vector is :func:`frobenius_products` with
    ``y``).  A dense bank costs one matrix product of its (M, N²) rows (by chunks of 256 MiB of centred
    copies when ``centered``); a factor bank the products :math:`\|\tilde L_k^\top\tilde L_l\|_F^2`,
    one (r_k, R) product per kernel.

    Parameters
    ----------
    K : array (M, N, N), KernelBank, ArrayBank or FactorBank
    centered, normalized : bool

    Returns
    -------
    ndarray (M, M), symmetric (a unit diagonal when ``normalized``)
    """
    owner = "alignment_matrix"
    ks = _kernels(K, "K", owner)
    F = _products(ks, centered)
    if not normalized:
        return F
    d = np.sqrt(np.diag(F))
    return _cosines(F, d[:, None], d[None, :], owner, centered)


def frobenius_products(K1: Any, K2: Any = None, *, y: Any = None, centered: bool = False) -> Any:
    r"""The Frobenius products :math:`\langle \tilde K_1, \tilde K_2\rangle_F = \sum_{ij}\tilde K_{1,ij}\tilde
    K_{2,ij}`, the numerators of :func:`alignment` (:math:`\tilde K = K`) and :func:`centered_alignment`
    (``centered``: :math:`\tilde K = HKH`).

    With ``y``, :math:`\langle \tilde K, \tilde T\rangle_F` for the target kernel :math:`T` of
    :func:`target_kernel`: with ``centered``, the vector of ALIGNF (Cortes et al. 2012), whose matrix is
    ``alignment_matrix(K, normalized=False)``.  Inputs and returns as :func:`alignment`.
    """
    owner = "frobenius_products"
    first = _kernels(K1, "K1", owner)
    second = _second(K2, y, first, owner)
    return first.out(_inner(first, second, bool(centered)))


def _products(ks: _Kernels, centered: bool) -> np.ndarray:
    r"""The Frobenius products :math:`\langle\tilde K_k,\tilde K_l\rangle_F` of all pairs, (M, M)."""
    M = ks.m
    F = np.empty((M, M))
    if ks.dense is not None:
        chunks = list(_dense_chunks(ks.dense, centered)) if not centered or ks.dense.nbytes <= _CHUNK_BYTES else None
        if chunks is not None and len(chunks) == 1:
            R = _flat(chunks[0][1])
            F[:] = R @ R.T
        else:
            for si, Ci in _dense_chunks(ks.dense, centered):
                Ri = _flat(Ci)
                for sj, Cj in _dense_chunks(ks.dense[si.start :], centered):
                    sj = slice(sj.start + si.start, sj.stop + si.start)
                    F[si, sj] = Ri @ _flat(Cj).T
                    F[sj, si] = F[si, sj].T
        return (F + F.T) / 2.0
    blocks = ks.blocks or []
    ranks = np.array([B.shape[0] for B in blocks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(ranks)])
    owner_of_row = np.repeat(np.arange(M), ranks)
    S, mu = _Factors(blocks, ks.n, centered).stacked()
    for k in range(M):
        P = S[starts[k] : starts[k + 1]] @ S.T
        P = P.toarray() if sp.issparse(P) else np.asarray(P)
        if mu is not None:
            P = P - ks.n * np.outer(mu[starts[k] : starts[k + 1]], mu)
        F[k] = np.bincount(owner_of_row, weights=np.einsum("ij,ij->j", P, P), minlength=M)
    return (F + F.T) / 2.0


# --------------------------------------------------------------------------- spectral ratio


def spectral_ratio(K: Any, normalized: bool = False) -> Any:
    r"""The spectral ratio :math:`\|K\|_* / \|K\|_F`, the nuclear over the Frobenius norm.

    For a positive semidefinite kernel the nuclear norm is the trace, so the ratio is
    :math:`\mathrm{tr}K / \|K\|_F = \sum_i\lambda_i / \sqrt{\sum_i\lambda_i^2}`: between 1 (rank one: a
    kernel that sees all points alike) and :math:`\sqrt{\mathrm{rank}\,K} \le \sqrt N` (a flat spectrum,
    :math:`K \propto I`: every point its own cluster).  It measures the effective rank, the
    expressiveness of a kernel; it does not depend on the labels or on the kernel's scale.
    ``normalized`` maps it to [0, 1] as :math:`(r - 1)/(\sqrt N - 1)` (MKLpy's ``spectral_ratio``,
    whose default this is).  Kernels are taken as positive semidefinite (their trace is used).

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    normalized : bool

    Returns
    -------
    float for one Gram matrix, else ndarray (M,)
    """
    ks = _kernels(K, "K", "spectral_ratio")
    traces = _traces(ks)
    norms = _norms(ks, False)
    zero = np.flatnonzero(norms <= 0.0)
    if zero.size:
        raise ParamError(
            "K", f"a zero kernel (kernel {int(zero[0])})", "kernels with a non-zero Frobenius norm", "spectral_ratio"
        )
    r = traces / norms
    if normalized:
        r = (r - 1.0) / (np.sqrt(ks.n) - 1.0) if ks.n > 1 else np.zeros_like(r)
    return ks.out(r)


def _traces(ks: _Kernels) -> np.ndarray:
    if ks.dense is not None:
        return np.einsum("mii->m", ks.dense)
    out = np.empty(ks.m)
    for m, B in enumerate(ks.blocks or []):
        out[m] = float(B.multiply(B).sum()) if sp.issparse(B) else float(np.einsum("ij,ij->", B, B))
    return out


# --------------------------------------------------------------------------- radius and margin


@dataclass(frozen=True)
class SimplexSolution:
    r"""The certified solution of the quadratic program of :func:`radius` or :func:`margin` for one kernel.

    Attributes
    ----------
    value : float
        :math:`R` or :math:`\rho` (the square root of ``squared``).
    squared : float
        The optimum found, :math:`R^2` or :math:`\rho^2`: within ``gap`` of the true one
        (:math:`R^2 \le` ``squared + gap``; :math:`\rho^2 \ge` ``squared - gap``).
    gap : float
        The Frank–Wolfe duality gap of the returned point (absolute, in kernel units).
    n_iter : int
        Pairwise steps taken.
    status : Status
        ``converged`` (``gap <= tol * squared`` or below the gradient's round-off, :math:`64\sqrt
        N\epsilon\max_iK_{ii}`, or the margin below the zero level), ``max_iter``, or
        ``stalled`` (round-off leaves no descent step before ``tol``).
    coef : ndarray (N,)
        :math:`\beta` (radius: the ball's centre :math:`\sum_i\beta_i\phi(x_i)`) or :math:`\gamma`
        (margin: the two nearest points :math:`\sum_{y_i=+}\gamma_i\phi(x_i)` and
        :math:`\sum_{y_i=-}\gamma_i\phi(x_i)`), each summing to 1 (per class).
    """

    value: float
    squared: float
    gap: float
    n_iter: int
    status: Status
    coef: np.ndarray


def _check_solver(tol: Any, max_iter: Any, owner: str) -> tuple[float, int | None]:
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0.0 < float(tol) < 1.0):
        raise ParamError("tol", tol, "a number in (0, 1)", owner)
    if max_iter is not None and (
        isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1
    ):
        raise ParamError("max_iter", max_iter, "an integer >= 1 or None", owner)
    return float(tol), (None if max_iter is None else int(max_iter))


def _solve(
    kernel: tuple[np.ndarray, np.ndarray, bool],
    s: np.ndarray,
    p_of_diag: bool,
    group: np.ndarray,
    tol: float,
    floor_rel: float,
    max_iter: int | None,
) -> tuple[float, float, int, Status, np.ndarray]:
    r"""Minimise :math:`f(\gamma) = (s\circ\gamma)^\top K(s\circ\gamma) + p^\top\gamma` on the groups'
    simplices; ``p = -diag K`` when ``p_of_diag``.

    Rounds of pairwise steps (:func:`mklkit._jit.simplex.simplex_pairs`), each followed by an
    active-set step: the minimiser of :math:`f` on the affine hull of the current support (the KKT
    system of the equality-constrained program, least squares when singular), taken as far as
    :math:`\gamma \ge 0` allows, which ends the slow tail of pairwise steps once the support is found.
    The gradient and the gap are recomputed from :math:`\gamma` after every round.  Returns
    ``(f, gap, steps, status, gamma)``.
    """
    K, L, factor = kernel
    n = s.shape[0]
    diag = np.einsum("ij,ij->i", L, L) if factor else np.ascontiguousarray(np.diagonal(K))
    p = -diag if p_of_diag else np.zeros(n)
    n_groups = int(group.max()) + 1
    masks = [group == c for c in range(n_groups)]
    gamma = _vertex_start(K, L, factor, diag, group, n_groups, p_of_diag)
    scale = max(float(diag.max()), 0.0)
    # the precision the gradient is computed to: a gap below it is round-off
    atol = 64.0 * np.sqrt(n) * np.finfo(float).eps * max(scale, np.finfo(float).tiny)
    floor = floor_rel * scale if floor_rel > 0.0 else -np.inf
    limit = max(10_000, 100 * n) if max_iter is None else max_iter
    per_round = min(limit, max(1_000, 10 * n))

    def gradient(x: np.ndarray) -> np.ndarray:
        v = s * x
        Kv = L @ (L.T @ v) if factor else K @ v
        return 2.0 * s * Kv + p

    def measure(x: np.ndarray) -> tuple[np.ndarray, float, float]:
        g = gradient(x)
        gap = sum(float(x[mk] @ g[mk] - g[mk].min()) for mk in masks)
        return g, 0.5 * float(x @ (g + p)), max(gap, 0.0)

    def done(f: float, gap: float) -> bool:
        return gap <= max(tol * abs(f), atol) or f <= floor

    # a factor kernel's columns are cached; when all N fit the budget, they are one BLAS product
    slots = min(n, max(2, int(_CHUNK_BYTES // (8 * n)))) if factor else 0
    filled = factor and slots == n
    cache = L @ L.T if filled else np.empty((slots, n if factor else 0))
    steps, code = 0, ksimplex.MAX_ITER
    grad, f, gap = measure(gamma)
    while not done(f, gap) and steps < limit:
        args = (diag, s, p, group, n_groups, gamma, grad, tol, atol, floor, min(per_round, limit - steps))
        it, _, _, code = ksimplex.simplex_pairs(K, L, factor, cache, filled, *args)
        steps += it
        f_before = f
        grad, f, gap = measure(gamma)
        if done(f, gap):
            break
        polished = _active_set_step(K, L, factor, s, p, group, n_groups, gamma)
        if polished is not None:
            g2, f2, gap2 = measure(polished)
            if f2 <= f:
                gamma, grad, f, gap = polished, g2, f2, gap2
        if code == ksimplex.STALLED and not f < f_before:
            break
    if done(f, gap):
        status = Status.CONVERGED
    else:
        status = Status.MAX_ITER if steps >= limit else Status.STALLED
    return f, gap, steps, status, gamma


def _vertex_start(
    K: np.ndarray, L: np.ndarray, factor: bool, diag: np.ndarray, group: np.ndarray, n_groups: int, farthest: bool
) -> np.ndarray:
    r"""A vertex to start from, so that the support grows from one point per group: the point farthest
    from the first one (``farthest``: the radius), or, group after group, the point nearest the one
    chosen in the group before (the margin: a close pair of points of the two classes)."""

    def column(k: int) -> np.ndarray:
        return L @ L[k] if factor else K[k]

    gamma = np.zeros(diag.size)
    if farthest:
        gamma[int(np.argmax(diag - 2.0 * column(0)))] = 1.0
        return gamma
    members = [np.flatnonzero(group == c) for c in range(n_groups)]
    chosen = [int(members[0][0])]
    for c in list(range(1, n_groups)) + [0]:
        d2 = diag[members[c]] - 2.0 * column(chosen[-1])[members[c]]  # + K_kk, the same for all
        pick = int(members[c][int(np.argmin(d2))])
        chosen = chosen[1:] + [pick] if c == 0 else chosen + [pick]
    gamma[chosen] = 1.0
    return gamma


#: the largest support the active-set step solves its KKT system on
_ACTIVE_SET_MAX = 1000


def _active_set_step(
    K: np.ndarray,
    L: np.ndarray,
    factor: bool,
    s: np.ndarray,
    p: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    gamma: np.ndarray,
) -> np.ndarray | None:
    r"""The point :math:`\gamma + t(\hat\gamma - \gamma)`, :math:`\hat\gamma` the minimiser of :math:`f` on
    :math:`\{\gamma_i = 0\ (i \notin S),\ \sum_{i\in G_c}\gamma_i = 1\}` (S the support) and the largest
    :math:`t \le 1` with :math:`\gamma \ge 0`; ``None`` when the support has more than
    :data:`_ACTIVE_SET_MAX` points."""
    S = np.flatnonzero(gamma > 0.0)
    if S.size > _ACTIVE_SET_MAX or S.size == 0:
        return None
    KS = L[S] @ L[S].T if factor else K[np.ix_(S, S)]
    Q = (s[S][:, None] * s[S][None, :]) * KS
    A = (group[S][None, :] == np.arange(n_groups)[:, None]).astype(np.float64)
    k = S.size
    M = np.zeros((k + n_groups, k + n_groups))
    M[:k, :k] = 2.0 * Q
    M[:k, k:] = A.T
    M[k:, :k] = A
    rhs = np.concatenate([-p[S], np.ones(n_groups)])
    sol = np.linalg.lstsq(M, rhs, rcond=None)[0][:k]
    if not np.all(np.isfinite(sol)):
        return None
    d = sol - gamma[S]
    neg = d < 0.0
    t = 1.0 if not np.any(neg) else min(1.0, float(np.min(-gamma[S][neg] / d[neg])))
    out = gamma.copy()
    out[S] = np.maximum(gamma[S] + t * d, 0.0)
    for c in range(n_groups):  # exactly on the simplices again after round-off
        mk = group == c
        out[mk] /= out[mk].sum()
    return out


def _each_kernel(ks: _Kernels) -> Iterator[tuple[np.ndarray, np.ndarray, bool]]:
    """``(K, L, factor)`` per kernel: the Gram matrix, or its factor :math:`L_m` (N, r_m)."""
    empty = np.empty((0, 0))
    if ks.dense is not None:
        for m in range(ks.m):
            yield np.ascontiguousarray(ks.dense[m]), empty, False
    else:
        for B in ks.blocks or []:
            yield empty, np.ascontiguousarray(_dense_block(B).T), True


def _warn_unconverged(sols: list[SimplexSolution], what: str, tol: float) -> None:
    bad = [m for m, s in enumerate(sols) if s.status is not Status.CONVERGED]
    if bad:
        s = sols[bad[0]]
        fix = "raise max_iter" if s.status is Status.MAX_ITER else "round-off stopped it: raise tol"
        warnings.warn(
            f"{what}: the quadratic program did not reach tol={tol:g} in {s.n_iter} steps "
            f"(kernel{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad[:5]))}{'...' if len(bad) > 5 else ''}; "
            f"gap {s.gap:.3g} at {s.squared:.6g}): {fix}",
            ConvergenceWarning,
            stacklevel=3,  # the caller of radius, margin or ratio
        )


def _radius_solutions(ks: _Kernels, tol: float, max_iter: int | None) -> list[SimplexSolution]:
    s = np.ones(ks.n)
    group = np.zeros(ks.n, dtype=np.int64)
    sols = []
    for kernel in _each_kernel(ks):
        f, gap, steps, status, beta = _solve(kernel, s, True, group, tol, 0.0, max_iter)
        r2 = max(-f, 0.0)
        sols.append(SimplexSolution(float(np.sqrt(r2)), r2, gap, steps, status, beta))
    return sols


def radius(K: Any, *, tol: float = TOL, max_iter: int | None = None, return_solution: bool = False) -> Any:
    r"""The radius of the smallest ball that encloses the points in feature space.

    .. math::

        R^2 = \min_c \max_i \|\phi(x_i) - c\|^2
            = \max_{\beta \in \Delta_N}\ \sum_i \beta_i K_{ii} - \beta^\top K\beta,
        \qquad \Delta_N = \{\beta \ge 0,\ \textstyle\sum_i\beta_i = 1\},

    the dual of the minimum enclosing ball, with the centre :math:`c = \sum_i\beta_i\phi(x_i)`.  The
    quadratic program is solved by pairwise steps (:mod:`mklkit._jit.simplex`) until the Frank–Wolfe gap,
    which bounds the error of :math:`R^2`, is at most ``tol`` times :math:`R^2` (or below the precision
    the gradient is computed to, :math:`64\sqrt N\,\epsilon\max_iK_{ii}`); a program that does not get
    there in ``max_iter`` steps emits :class:`mklkit.ConvergenceWarning`.  On a factor bank each step
    reads two columns :math:`K_{:,k} = L L_{k,:}^\top`, cached (all N, one matrix product, while
    :math:`8N^2` bytes fit 256 MiB; the most recently used ones otherwise).

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    tol : float
        Relative duality gap on :math:`R^2` (default 1e-8).
    max_iter : int, optional
        Pairwise steps per kernel (default :math:`\max(10^4, 100N)`).
    return_solution : bool
        Also return the :class:`SimplexSolution` of each kernel (a list).

    Returns
    -------
    float for one Gram matrix, else ndarray (M,); with ``return_solution``, ``(value, solutions)``
    """
    owner = "radius"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = _kernels(K, "K", owner)
    sols = _radius_solutions(ks, tol, max_iter)
    _warn_unconverged(sols, owner, tol)
    values = ks.out(np.array([s.value for s in sols]))
    return (values, sols) if return_solution else values


def _binary(y: Any, n: int, owner: str) -> np.ndarray:
    """Labels of two classes as :math:`\\pm 1` (the first class in sorted order :math:`-1`)."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ParamError("y.shape", arr.shape, f"({n},): one label per point of the kernels", owner)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ParamError("y", "labels with NaN or infinite entries", "labels of exactly two classes", owner)
    classes, codes = np.unique(arr, return_inverse=True)
    if classes.size != 2:
        got = f"labels of {classes.size} class{'es' if classes.size != 1 else ''} ({', '.join(map(repr, classes[:5].tolist()))})"
        raise ParamError("y", got, "labels of exactly two classes (the margin is between two classes)", owner)
    return 2.0 * codes - 1.0


def _margin_solutions(ks: _Kernels, s: np.ndarray, tol: float, max_iter: int | None) -> list[SimplexSolution]:
    group = (s > 0).astype(np.int64)
    sols = []
    for kernel in _each_kernel(ks):
        f, gap, steps, status, gamma = _solve(kernel, s, False, group, tol, tol, max_iter)
        scale = float(np.max(np.einsum("ij,ij->i", kernel[1], kernel[1]) if kernel[2] else np.diagonal(kernel[0])))
        rho2 = 0.0 if f <= tol * scale else f
        sols.append(SimplexSolution(float(np.sqrt(rho2)), rho2, gap, steps, status, gamma))
    return sols


def margin(K: Any, y: Any, *, tol: float = TOL, max_iter: int | None = None, return_solution: bool = False) -> Any:
    r"""The distance between the convex hulls of the two classes in feature space (the hard margin).

    .. math::

        \rho = \min_{\gamma^+\in\Delta_+,\ \gamma^-\in\Delta_-}\
            \Big\|\sum_{y_i=+}\gamma^+_i\phi(x_i) - \sum_{y_i=-}\gamma^-_i\phi(x_i)\Big\|,
        \qquad \rho^2 = \min_\gamma\ (y\circ\gamma)^\top K (y\circ\gamma),

    with one simplex per class.  This is MKLpy's convention (``margin`` there is the same distance);
    the margin of the hard-margin SVM, the distance from the separating hyperplane to the nearest
    point, is :math:`\rho/2`.  :math:`\rho = 0` when the hulls meet: the classes cannot be separated in
    that feature space (the returned value is exactly 0 once :math:`\rho^2 \le` ``tol`` :math:`\max_i
    K_{ii}`).  Solved and certified as :func:`radius`: the Frank–Wolfe gap bounds the error of
    :math:`\rho^2`.

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    y : array (N,)
        Labels of exactly two classes.
    tol, max_iter, return_solution
        As in :func:`radius` (``tol`` on :math:`\rho^2`).

    Returns
    -------
    float for one Gram matrix, else ndarray (M,); with ``return_solution``, ``(value, solutions)``
    """
    owner = "margin"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = _kernels(K, "K", owner)
    s = _binary(y, ks.n, owner)
    sols = _margin_solutions(ks, s, tol, max_iter)
    _warn_unconverged(sols, owner, tol)
    values = ks.out(np.array([sol.value for sol in sols]))
    return (values, sols) if return_solution else values


def ratio(K: Any, y: Any, *, tol: float = TOL, max_iter: int | None = None) -> Any:
    r"""The radius–margin ratio :math:`R^2 / (N\rho^2)`, :func:`radius` over :func:`margin`, squared.

    Divided by N as in MKLpy's ``ratio``: :math:`4R^2/(N\rho^2) = R^2\|w\|^2/N` (with the SVM margin
    :math:`\rho/2 = 1/\|w\|`) is the radius–margin bound on the leave-one-out error rate of the
    hard-margin SVM (Vapnik 1998; Chapelle et al. 2002), four times this ratio.  Lower is better.  When
    the classes cannot be separated (:math:`\rho = 0`) the ratio is infinite: the value is ``inf``,
    with a ``RuntimeWarning`` naming the kernels.

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    y : array (N,)
        Labels of exactly two classes.
    tol, max_iter
        As in :func:`radius`.

    Returns
    -------
    float for one Gram matrix, else ndarray (M,)
    """
    owner = "ratio"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = _kernels(K, "K", owner)
    s = _binary(y, ks.n, owner)
    rs = _radius_solutions(ks, tol, max_iter)
    ms = _margin_solutions(ks, s, tol, max_iter)
    _warn_unconverged(rs, "ratio (radius)", tol)
    _warn_unconverged(ms, "ratio (margin)", tol)
    r2 = np.array([sol.squared for sol in rs])
    m2 = np.array([sol.squared for sol in ms])
    zero = np.flatnonzero(m2 <= 0.0)
    if zero.size:
        warnings.warn(
            f"ratio: the classes cannot be separated (margin 0) with kernel{'s' if zero.size > 1 else ''} "
            f"{', '.join(map(str, zero[:5].tolist()))}{'...' if zero.size > 5 else ''}: the ratio is inf",
            RuntimeWarning,
            stacklevel=2,
        )
    with np.errstate(divide="ignore"):
        values = np.where(m2 > 0.0, r2 / (ks.n * np.where(m2 > 0.0, m2, 1.0)), np.inf)
    return ks.out(values)


# --------------------------------------------------------------------------- the learned kernel


def combine(K: Any, weights: Any) -> Any:
    r"""The combined kernel :math:`\sum_m d_mK_m` of a bank and kernel weights :math:`d \ge 0`.

    A dense bank gives the (N, N) array (one pass over the bank); a :class:`~mklkit.kernels.FactorBank`
    gives a factor bank of one kernel with the factor :math:`[\sqrt{d_1}L_1, \dots, \sqrt{d_M}L_M]`
    (kernels of weight 0 left out), so the metrics of the learned kernel never form it either:
    ``centered_alignment(combine(bank, clf.kernel_weights_), y=y)``.

    Parameters
    ----------
    K : array (M, N, N), KernelBank, ArrayBank or FactorBank
    weights : array (M,)
        Non-negative weights, e.g. a fitted estimator's ``kernel_weights_`` (a binary problem's; a
        one-vs-rest fit has one row per problem: pass one row).

    Returns
    -------
    ndarray (N, N), or FactorBank of one kernel
    """
    owner = "combine"
    ks = _kernels(K, "K", owner)
    d = np.asarray(weights, dtype=np.float64)
    if d.shape != (ks.m,):
        raise ParamError(
            "weights.shape", d.shape, f"({ks.m},): one weight per kernel (one row of kernel_weights_)", owner
        )
    if not np.all(np.isfinite(d)) or np.any(d < 0.0):
        raise ParamError(
            "weights",
            d.tolist() if d.size <= 8 else "weights with negative or non-finite entries",
            "finite weights >= 0",
            owner,
        )
    if ks.dense is not None:
        return np.tensordot(d, ks.dense, axes=1)
    keep = np.flatnonzero(d > 0.0)
    if keep.size == 0:
        raise ParamError("weights", "all zero", "finite weights >= 0, at least one > 0", owner)
    blocks = ks.blocks or []
    if all(sp.issparse(blocks[m]) for m in keep):
        LT = sp.vstack([blocks[m] * np.sqrt(d[m]) for m in keep], format="csr")
    else:
        LT = np.vstack([_dense_block(blocks[m]) * np.sqrt(d[m]) for m in keep])
    return FactorBank(LT, [0, LT.shape[0]])
