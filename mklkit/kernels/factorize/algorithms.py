r"""The factors of one kernel, :math:`K \approx LL^\top`, and their extension to new points.

Explicit feature maps (``linear``, the monomial map of ``poly``), described
in :mod:`mklkit.kernels.factorize`; :class:`KernelFactor` (how one kernel was
factored) and :class:`FactorMap` (the factor rows of new points).  Greedy
pivoted Cholesky and Nyström are :mod:`mklkit.kernels.factorize.lowrank`,
the points they read :mod:`mklkit.kernels.factorize.points`; building a
whole bank from its description is :mod:`mklkit.kernels.factorize.build`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular

from ..._jit.gram import all_finite, divide_outer_inplace
from ..description import BankError, BankKernel
from ..functions import KernelFunction, Linear, Poly
from .points import _Groups, _new_points

__all__ = ["KernelFactor", "FactorMap", "FoldedFactorMap", "poly_map_dim"]


# ---------------------------------------------------------------------------
# Explicit feature maps
# ---------------------------------------------------------------------------
def poly_map_dim(n_features: int, degree: int, offset: float) -> int:
    r"""Dimension of the monomial map of :math:`(s\langle x,z\rangle + c)^p` on ``n_features``
    features: :math:`\binom{d+p}{p}`, or :math:`\binom{d+p-1}{p}` when :math:`c = 0`."""
    if offset > 0.0:
        return math.comb(n_features + degree, degree)
    return math.comb(n_features + degree - 1, degree)


def _poly_monomials(func: Poly, d: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    r"""Multi-indices (as sorted column tuples) and coefficients of the monomial map."""
    p, c, s = int(func.degree), float(func.offset), float(func.scale)
    terms: list[tuple[int, ...]] = []
    coef: list[float] = []
    for j in range(0 if c > 0.0 else p, p + 1):
        w = math.comb(p, j) * c ** (p - j) * s**j * math.factorial(j)
        for cols in itertools.combinations_with_replacement(range(d), j):
            mult = 1
            for _, run in itertools.groupby(cols):
                mult *= math.factorial(len(list(run)))
            terms.append(cols)
            coef.append(math.sqrt(w / mult))
    return terms, np.array(coef)


def _poly_rows(terms: Sequence[tuple[int, ...]], coef: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The monomial map of the points ``A`` (n, d), transposed: (dim, n)."""
    out = np.empty((len(terms), A.shape[0]))
    At = np.ascontiguousarray(A.T)
    for k, cols in enumerate(terms):
        row = out[k]
        row.fill(coef[k])
        for c in cols:
            row *= At[c]
    return out


def _exact_dim(spec: BankKernel) -> int | None:
    """Dimension of the explicit feature map of a kernel, ``None`` when it has none here."""
    f = spec.function
    if type(f) is Linear:
        return len(spec.features)
    if type(f) is Poly:
        return poly_map_dim(len(spec.features), int(f.degree), float(f.offset))
    return None


# ---------------------------------------------------------------------------
# Per-kernel factors and the map to new points
# ---------------------------------------------------------------------------
@dataclass
class KernelFactor:
    """How kernel ``m`` of a factor bank was factored, and what extends it to new points.

    Attributes
    ----------
    spec : BankKernel
        Function, parameters and feature group.
    method : {"linear", "poly_map", "pivoted_cholesky", "nystrom"}
    rank : int
        :math:`r_m`.
    scale : float
        Factor on every row of the map: :math:`1/\\sqrt{\\mathrm{tr}K}` for
        ``"trace"``, else 1.
    trace : float
        :math:`\\mathrm{tr}K_m` of the normalised kernel (from its diagonal).
    trace_error : float
        :math:`\\mathrm{tr}K_m - \\|L_m\\|_F^2` (clipped at 0).
    points : ndarray (p, |g|) or None
        Pivots (pivoted Cholesky) or landmarks (Nyström), their feature values.
    point_diag : ndarray (p,) or None
        :math:`k(x, x)` of those points (``"diagonal"`` normalisation).
    basis : ndarray or None
        :math:`L_P` (r, r) lower triangular (pivoted Cholesky) or
        :math:`U_k\\Lambda_k^{-1/2}` (p, r) (Nyström), before ``scale``.
    terms, coef : monomials and their coefficients (``"poly_map"``).
    """

    spec: BankKernel
    method: str
    rank: int
    scale: float
    trace: float
    trace_error: float = 0.0
    points: np.ndarray | None = field(default=None, repr=False)
    point_diag: np.ndarray | None = field(default=None, repr=False)
    basis: np.ndarray | None = field(default=None, repr=False)
    terms: list[tuple[int, ...]] | None = field(default=None, repr=False)
    coef: np.ndarray | None = field(default=None, repr=False)

    @property
    def relative_trace_error(self) -> float:
        """``trace_error / trace`` (0 for a zero kernel)."""
        return self.trace_error / self.trace if self.trace > 0 else 0.0


def _kernel_rows(
    func: KernelFunction,
    A: np.ndarray,
    B: np.ndarray,
    dA: np.ndarray | None,
    dB: np.ndarray | None,
    label: str,
    base: np.ndarray | None = None,
) -> np.ndarray:
    r""":math:`k(a_i, b_j)` (n_A, n_B) through the kernel function, divided by
    :math:`\sqrt{d_{A,i} d_{B,j}}` when the diagonals are given (zero where :math:`d_B = 0`).

    ``base``: the function's base matrix of ``A`` against ``B``, already
    computed (:class:`~mklkit.kernels.functions.BaseRows`); it is overwritten.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        G = func.gram(A, B) if base is None else func.from_base(base, out=base)
    if not isinstance(G, np.ndarray) or G.shape != (A.shape[0], B.shape[0]):
        got = G.shape if isinstance(G, np.ndarray) else type(G).__name__
        raise BankError(f"kernel {label!r}: gram() must return an array of shape {(A.shape[0], B.shape[0])}; got {got}")
    G = np.ascontiguousarray(G, dtype=np.float64)
    if G.size and not all_finite(G):
        raise BankError(
            f"kernel {label!r} has NaN or infinite values (overflow?); standardise the "
            "features or change its parameters"
        )
    if dA is not None and dB is not None:
        sB = np.sqrt(dB)
        zero = sB == 0.0
        sB[zero] = 1.0
        divide_outer_inplace(G, np.sqrt(dA), sB)
        G[:, zero] = 0.0
    return G


@dataclass
class FactorMap:
    """The map from points to the stacked factor rows of a factor bank.

    :meth:`transform` gives :math:`L(X_{new})^\\top` (R, n_new) with
    :math:`L_m(X_{new}) L_m^\\top \\approx K_m(X_{new}, X)` (equal for exact
    factors), normalised like the training bank.

    Attributes
    ----------
    kernels : list of KernelFactor
        One per kernel, in bank order.
    starts : ndarray (M + 1,)
    normalize : {"trace", "diagonal", "none"}
    n_features : int
        Columns of the training data (new points must have as many).
    sparse : bool
        ``transform`` returns CSR (every kernel an exact linear factor on
        sparse features).
    """

    kernels: list[KernelFactor]
    starts: np.ndarray
    normalize: str
    n_features: int
    sparse: bool = False

    @property
    def names(self) -> list[str]:
        """One readable label per kernel."""
        return [k.spec.label for k in self.kernels]

    @property
    def methods(self) -> list[str]:
        """How each kernel was factored: ``linear``, ``poly_map``, ``pivoted_cholesky``, ``nystrom``."""
        return [k.method for k in self.kernels]

    def transform(self, X_new: Any) -> Any:
        """Factor rows of new points.

        Parameters
        ----------
        X_new : ndarray (n_new, d), scipy.sparse matrix or Dataset
            Points with the columns of the training data.

        Returns
        -------
        ndarray or scipy.sparse.csr_matrix (R, n_new)
            Block ``m`` (rows ``starts[m]:starts[m+1]``) is :math:`L_m(X_{new})^\\top`;
            CSR when ``sparse``.
        """
        X = _new_points(X_new, self.n_features)
        groups = _Groups(X)
        if self.sparse:
            return sp.vstack([self._block(kf, groups) for kf in self.kernels], format="csr")
        out = np.empty((int(self.starts[-1]), X.shape[0]))
        for m, kf in enumerate(self.kernels):
            B = self._block(kf, groups)
            out[self.starts[m] : self.starts[m + 1]] = B.toarray() if sp.issparse(B) else B
        return out

    def _block(self, kf: KernelFactor, groups: _Groups) -> Any:
        """Rows of :math:`L_m(X_{new})^\\top` for one kernel, (r_m, n_new)."""
        diagonal = self.normalize == "diagonal"
        if kf.method in ("linear", "poly_map"):
            B, _ = _exact_rows(kf, groups, diagonal, "X_new")
        else:
            assert kf.points is not None and kf.basis is not None
            spec = kf.spec
            A = groups.dense(spec.features)
            dnew = _diag(spec.function, A, spec.label, "X_new") if diagonal else None
            C = _kernel_rows(spec.function, kf.points, A, kf.point_diag, dnew, spec.label)
            if kf.method == "pivoted_cholesky":
                B = solve_triangular(kf.basis, C, lower=True, check_finite=False)
            else:
                B = kf.basis.T @ C
            B = np.ascontiguousarray(B)
        return B * kf.scale if kf.scale != 1.0 else B

    def fold(self, kernels: Sequence[int], beta: np.ndarray) -> "FoldedFactorMap":
        r"""The sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` over the kernels ``kernels``
        for the coefficients ``beta`` (T, R) (stacked like the rows of the bank), with
        the bases folded into the coefficients (:class:`FoldedFactorMap`)."""
        beta = np.asarray(beta, dtype=np.float64)
        if beta.ndim != 2 or beta.shape[1] != int(self.starts[-1]):
            raise ValueError(f"beta must have shape (T, {int(self.starts[-1])}); got {beta.shape}")
        held: list[KernelFactor] = []
        weights: list[np.ndarray] = []
        for m in np.asarray(kernels, dtype=np.intp).ravel():
            kf = self.kernels[int(m)]
            b = np.ascontiguousarray(beta[:, self.starts[m] : self.starts[m + 1]].T)  # (r_m, T)
            if kf.method == "pivoted_cholesky":
                assert kf.basis is not None
                w = solve_triangular(kf.basis, b, lower=True, trans="T", check_finite=False)
            elif kf.method == "nystrom":
                assert kf.basis is not None
                w = kf.basis @ b
            else:
                w = b
            points = kf.points
            if points is not None and 2 * np.count_nonzero(points) < points.size:
                points = sp.csr_matrix(points)  # mostly-zero points (indicators, counts): CSR is smaller
            held.append(replace(kf, basis=None, points=points))
            weights.append(np.ascontiguousarray(w, dtype=np.float64))
        return FoldedFactorMap(held, weights, self.normalize, self.n_features, beta.shape[0])


@dataclass
class FoldedFactorMap:
    r"""Sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` of some kernels of a :class:`FactorMap`
    and ``T`` coefficient vectors, without the training factors (:meth:`FactorMap.fold`).

    The basis of each kernel is folded into its coefficients:
    :math:`L_m(x)\beta = s\,k(x, X_P)\,L_P^{-\top}\beta` (pivoted Cholesky),
    :math:`s\,k(x, X_S)\,U_k\Lambda_k^{-1/2}\beta` (Nyström),
    :math:`s\,\phi(x)^\top\beta` (explicit maps), so that only the pivots or
    landmarks and one vector per kernel and solution are kept.

    Attributes
    ----------
    kernels : list of KernelFactor
        The held kernels (their ``basis`` dropped; mostly-zero ``points`` held as CSR).
    weights : list of ndarray (p_m, T)
        Per kernel: :math:`L_P^{-\top}\beta_m`, :math:`U_k\Lambda_k^{-1/2}\beta_m` or
        :math:`\beta_m`.
    normalize : {"trace", "diagonal", "none"}
    n_features : int
    n_outputs : int
        T.
    """

    kernels: list[KernelFactor]
    weights: list[np.ndarray]
    normalize: str
    n_features: int
    n_outputs: int

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (points, their diagonals, weights)."""
        arrays = [a for kf in self.kernels for a in (kf.points, kf.point_diag, kf.coef) if a is not None]
        return int(
            sum(
                a.data.nbytes + a.indices.nbytes + a.indptr.nbytes if sp.issparse(a) else a.nbytes
                for a in arrays + self.weights
            )
        )

    def decision_parts(self, X_new: Any) -> np.ndarray:
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t}`, (n_new, T)."""
        X = _new_points(X_new, self.n_features)
        groups = _Groups(X)
        diagonal = self.normalize == "diagonal"
        out = np.zeros((X.shape[0], self.n_outputs))
        for kf, w in zip(self.kernels, self.weights):
            if kf.method in ("linear", "poly_map"):
                B, _ = _exact_rows(kf, groups, diagonal, "X_new")
            else:
                assert kf.points is not None
                spec = kf.spec
                A = groups.dense(spec.features)
                dnew = _diag(spec.function, A, spec.label, "X_new") if diagonal else None
                P = kf.points.toarray() if sp.issparse(kf.points) else kf.points
                B = _kernel_rows(spec.function, P, A, kf.point_diag, dnew, spec.label)
            part = np.asarray(B.T @ w, dtype=np.float64)
            out += part * kf.scale if kf.scale != 1.0 else part
        return out


def _exact_rows(kf: KernelFactor, groups: _Groups, diagonal: bool, name: str) -> tuple[Any, np.ndarray]:
    """Rows of an exact factor (``kf.method`` linear or poly_map) for the points of ``groups``,
    (r, n), before ``kf.scale``; divided by :math:`\\sqrt{k(x,x)}` when ``diagonal``.  Also
    returns :math:`k(x, x)`."""
    spec = kf.spec
    if kf.method == "linear" and groups.sparse:
        Xs = groups.sparse_columns(spec.features)
        B: Any = Xs.T.tocsr()
        diag = _diag_sparse(Xs)
    else:
        A = groups.dense(spec.features)
        diag = _diag(spec.function, A, spec.label, name)
        if kf.method == "linear":
            B = np.ascontiguousarray(A.T)
        else:
            if kf.terms is None:
                kf.terms, kf.coef = _poly_monomials(spec.function, len(spec.features))
            B = _poly_rows(kf.terms, kf.coef, A)
    return (_scale_columns(B, diag) if diagonal else B), diag


def _scale_columns(B: Any, diag: np.ndarray) -> Any:
    r"""Columns of ``B`` (rows of :math:`L`) times :math:`1/\sqrt{k(x,x)}` (0 where it is 0)."""
    s = np.sqrt(np.maximum(diag, 0.0))
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=s > 0)
    if sp.issparse(B):
        return sp.csr_matrix(B.multiply(inv[None, :]))
    return np.ascontiguousarray(B * inv[None, :])


def _diag(func: KernelFunction, A: np.ndarray, label: str, name: str) -> np.ndarray:
    d = np.asarray(func.diag(A), dtype=np.float64)
    if d.shape != (A.shape[0],) or not np.all(np.isfinite(d)) or np.any(d < 0):
        raise BankError(f"kernel {label!r}: k(x, x) of {name} must be finite and >= 0")
    return d


def _diag_sparse(Xs: sp.csr_matrix) -> np.ndarray:
    return np.asarray(Xs.multiply(Xs).sum(axis=1), dtype=np.float64).ravel()
