r"""Frobenius products of kernels and what is built on them: alignment, centred alignment, their (M, M)
matrix, the spectral ratio; the combined kernel of a bank and weights.  Dense kernels are centred by
chunks of at most :data:`~mklkit.metrics._inputs.CHUNK_BYTES` of copies; factor kernels are never formed.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ..components.params import ParamError
from ..kernels.factor import FactorBank
from . import _inputs
from ._inputs import Kernels, dense_block, kernels_of, second_kernels

# --------------------------------------------------------------------------- Frobenius products


def _centred(A: np.ndarray, centered: bool) -> np.ndarray:
    """:math:`HA_mH` for every kernel of ``A`` (M, N, N), a copy; ``A`` itself when not ``centered``."""
    if not centered:
        return A
    C = A - A.mean(axis=1, keepdims=True)
    C -= C.mean(axis=2, keepdims=True)
    return C


def _step(A: np.ndarray, centered: bool) -> int:
    """The kernels of ``A`` (M, N, N) centred at a time: all of them when not ``centered``."""
    return A.shape[0] if not centered else max(1, int(_inputs.CHUNK_BYTES // max(8 * A.shape[1] ** 2, 1)))


def _dense_chunks(A: np.ndarray, centered: bool) -> Iterator[tuple[slice, np.ndarray]]:
    """``A`` (M, N, N) by chunks of :func:`_step` kernels, centred when ``centered``."""
    step = _step(A, centered)
    for a in range(0, A.shape[0], step):
        C = _centred(A[a : a + step], centered)
        yield slice(a, a + C.shape[0]), C


def _flat(C: np.ndarray) -> np.ndarray:
    return C.reshape(C.shape[0], -1)


class _Factors:
    r"""Transposed factors, one block at a time (no copy of the bank): dense blocks centred explicitly
    (:math:`(HL)^\top`), sparse ones kept with their mean rows :math:`\mu = L^\top\mathbf 1/N` for the
    rank-one correction :math:`(HL_1)^\top(HL_2) = L_1^\top L_2 - N\mu_1\mu_2^\top`."""

    def __init__(self, blocks: list[Any], n: int, centered: bool) -> None:
        self.n = n
        self.blocks = blocks
        self.centered = centered

    def block(self, k: int) -> tuple[Any, np.ndarray | None]:
        B = self.blocks[k]
        if sp.issparse(B):
            B = sp.csr_matrix(B)
            return B, (np.asarray(B.mean(axis=1)).ravel() if self.centered else None)
        B = np.asarray(B, dtype=np.float64)
        return (B - B.mean(axis=1, keepdims=True) if self.centered else B), None

    def cross(self, k: int, other: "_Factors", j: int) -> np.ndarray:
        r""":math:`\tilde L_k^\top \tilde L_j` (r_k, r_j)."""
        Tk, mk = self.block(k)
        Tj, mj = other.block(j) if (other is not self or j != k) else (Tk, mk)
        P = Tk @ Tj.T
        P = P.toarray() if sp.issparse(P) else np.asarray(P)
        if mk is not None and mj is not None:
            P = P - self.n * np.outer(mk, mj)
        return P

    def dense(self, k: int) -> np.ndarray:
        r""":math:`\tilde L_k^\top` (r_k, N), dense."""
        T, mu = self.block(k)
        T = dense_block(T)
        return T - mu[:, None] if mu is not None else T

    def stacked(self) -> tuple[Any, np.ndarray | None]:
        """All blocks stacked (R, N): sparse with their mean rows when centred, or dense and centred."""
        if all(sp.issparse(B) for B in self.blocks):
            S = sp.vstack([sp.csr_matrix(B) for B in self.blocks], format="csr")
            return S, (np.asarray(S.mean(axis=1)).ravel() if self.centered else None)
        S = np.vstack([dense_block(B) for B in self.blocks])
        if self.centered:
            S -= S.mean(axis=1, keepdims=True)
        return S, None


def _norms(ks: Kernels, centered: bool) -> np.ndarray:
    r""":math:`\|\tilde K_m\|_F` for every kernel, (M,)."""
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


def _inner_dense_factor(A: np.ndarray, T: np.ndarray) -> np.ndarray:
    r""":math:`\langle A_m, \tilde L\tilde L^\top\rangle_F = \mathrm{tr}(\tilde L^\top A_m\tilde L)` for every
    kernel of ``A`` (M, N, N), ``T`` :math:`= \tilde L^\top`; a centred factor needs no centred ``A``:
    :math:`\langle HA_mH, \tilde L\tilde L^\top\rangle = \langle A_m, \tilde L\tilde L^\top\rangle`."""
    M, n, _ = A.shape
    KL = (A.reshape(M * n, n) @ T.T).reshape(M, n, -1)
    return np.einsum("mnr,rn->m", KL, T)


def _inner(A: Kernels, B: Kernels, centered: bool) -> np.ndarray:
    r""":math:`\langle \tilde A_m, \tilde B_m\rangle_F` (``B`` one kernel: :math:`\tilde B_0`), (M,)."""
    M = A.m
    out = np.empty(M)
    if A.dense is not None and B.dense is not None:
        if B.m == 1:
            v = _centred(B.dense, centered).reshape(-1)
            for sl, C in _dense_chunks(A.dense, centered):
                out[sl] = _flat(C) @ v
        else:
            for sl, C in _dense_chunks(A.dense, centered):
                out[sl] = np.einsum("mk,mk->m", _flat(C), _flat(_centred(B.dense[sl], centered)))
        return out
    if A.dense is None and B.dense is None:
        fa, fb = _Factors(A.blocks or [], A.n, centered), _Factors(B.blocks or [], B.n, centered)
        for m in range(M):
            P = fa.cross(m, fb, 0 if B.m == 1 else m)
            out[m] = float(np.einsum("ij,ij->", P, P))
        return out
    dense, factor = (A, B) if A.dense is not None else (B, A)
    assert dense.dense is not None
    ff = _Factors(factor.blocks or [], factor.n, centered)
    if factor.m == 1:
        out[:] = _inner_dense_factor(dense.dense, ff.dense(0))
    else:
        for m in range(M):
            d = 0 if dense.m == 1 else m
            out[m] = _inner_dense_factor(dense.dense[d : d + 1], ff.dense(m))[0]
    return out


def _products(ks: Kernels, centered: bool) -> np.ndarray:
    r"""The Frobenius products :math:`\langle\tilde K_k,\tilde K_l\rangle_F` of all pairs, (M, M)."""
    M = ks.m
    F = np.empty((M, M))
    if ks.dense is not None:
        if _step(ks.dense, centered) >= M:
            R = _flat(_centred(ks.dense, centered))
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


# --------------------------------------------------------------------------- alignments


def _alignment(K1: Any, K2: Any, y: Any, centered: bool, owner: str) -> Any:
    first = kernels_of(K1, "K1", owner)
    second = second_kernels(K2, y, first, owner)
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
    ks = kernels_of(K, "K", owner)
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
    first = kernels_of(K1, "K1", owner)
    second = second_kernels(K2, y, first, owner)
    return first.out(_inner(first, second, bool(centered)))


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
    ks = kernels_of(K, "K", "spectral_ratio")
    if ks.dense is not None:
        traces = np.einsum("mii->m", ks.dense)
    else:
        sq = [B.multiply(B).sum() if sp.issparse(B) else np.einsum("ij,ij->", B, B) for B in ks.blocks or []]
        traces = np.array(sq, dtype=np.float64)  # tr(LL^T) = ||L||_F^2
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
    ks = kernels_of(K, "K", owner)
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
        LT = np.vstack([dense_block(blocks[m]) * np.sqrt(d[m]) for m in keep])
    return FactorBank(LT, [0, LT.shape[0]])
