"""The factors of one kernel (exact feature maps, :class:`KernelFactor`) and their extension to new points."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular

from ..._jit.gram import divide_outer_inplace
from ..description import BankError, BankKernel
from ..fill import _check_finite, _check_result
from ..functions import KernelFunction, Linear, Poly
from .points import _Groups, _new_points


#: The methods that give exact factors from an explicit feature map (``linear``, ``poly``, a kernel function's
#: own :meth:`~mklkit.kernels.functions.KernelFunction.explicit_map`).
EXACT_METHODS = ("linear", "poly_map", "feature_map")


def poly_map_dim(n_features: int, degree: int, offset: float) -> int:
    r"""Dimension of the monomial map of :math:`(s\langle x,z\rangle + c)^p`: :math:`\binom{d+p}{p}`, or
    :math:`\binom{d+p-1}{p}` when :math:`c = 0`."""
    if offset > 0.0:
        return math.comb(n_features + degree, degree)
    return math.comb(n_features + degree - 1, degree)


def _poly_monomials(func: Poly, d: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    r"""Multi-indices (sorted column tuples) and coefficients of the monomial map
    :math:`\phi_\alpha(x) = \sqrt{\binom{p}{j} c^{p-j} s^j j!/\alpha!}\;x^\alpha`, :math:`|\alpha| = j \le p`."""
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


@dataclass
class KernelFactor:
    """How kernel ``m`` of a factor bank was factored, and what extends it to new points.

    ``scale``: factor on every row (:math:`1/\\sqrt{\\mathrm{tr}K}` for ``"trace"``, else 1); ``trace``:
    :math:`\\mathrm{tr}K_m` normalised; ``trace_error``: :math:`\\mathrm{tr}K_m - \\|L_m\\|_F^2`;
    ``points``: the pivots or landmarks, ``point_diag`` their :math:`k(x, x)` (``"diagonal"``);
    ``basis``: :math:`L_P` (pivoted Cholesky) or :math:`U_k\\Lambda_k^{-1/2}` (Nyström), before
    ``scale``; ``terms``, ``coef``: the monomial map (``"poly_map"``); ``explicit``: the kernel function's
    feature map (``"feature_map"``).
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
    explicit: Any = field(default=None, repr=False)

    def through_basis(self, B: Any, transpose: bool = False) -> Any:
        r""":math:`L_P^{-1}B` (pivoted Cholesky), :math:`W^\top B` (Nyström), else ``B``; ``transpose``:
        :math:`L_P^{-\top}B`, :math:`WB`."""
        if self.method == "pivoted_cholesky":
            trans = "T" if transpose else "N"
            return solve_triangular(self.basis, B, lower=True, trans=trans, check_finite=False)
        if self.method == "nystrom":
            return self.basis @ B if transpose else self.basis.T @ B  # type: ignore[union-attr]
        return B


def _kernel_rows(
    func: KernelFunction,
    A: np.ndarray,
    B: np.ndarray,
    dA: np.ndarray | None,
    dB: np.ndarray | None,
    label: str,
    base: np.ndarray | None = None,
) -> np.ndarray:
    r""":math:`k(a_i, b_j)` (n_A, n_B), divided by :math:`\sqrt{d_{A,i} d_{B,j}}` when the diagonals are
    given (zero where :math:`d_B = 0`); ``base``: the base matrix of ``A`` against ``B``, overwritten."""
    with np.errstate(over="ignore", invalid="ignore"):
        G = func.gram(A, B) if base is None else func.from_base(base, out=base)
    _check_result(G, (A.shape[0], B.shape[0]), f"kernel {label!r}")
    G = np.ascontiguousarray(G, dtype=np.float64)
    if G.size:
        _check_finite(G, f"kernel {label!r}")
    if dA is not None and dB is not None:
        sB = np.sqrt(dB)
        zero = sB == 0.0
        sB[zero] = 1.0
        divide_outer_inplace(G, np.sqrt(dA), sB)
        G[:, zero] = 0.0
    return G


@dataclass
class FactorMap:
    """The map from points to the stacked factor rows :math:`L(X_{new})^\\top` (R, n_new) of a factor bank.

    ``kernels``: one :class:`KernelFactor` per kernel; ``n_features``: columns of the training data;
    ``sparse``: :meth:`transform` returns CSR (every kernel an exact linear factor on sparse features).
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
        """How each kernel was factored (``linear``, ``poly_map``, ``feature_map``, ``pivoted_cholesky``,
        ``nystrom``)."""
        return [k.method for k in self.kernels]

    def transform(self, X_new: Any) -> Any:
        """Factor rows of new points ``X_new`` (n_new, d): block ``m`` of the (R, n_new) result is
        :math:`L_m(X_{new})^\\top`, normalised like the training bank; CSR when ``sparse``."""
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
        B = kf.through_basis(_new_rows(kf, kf.points, groups, self.normalize))
        B = B if sp.issparse(B) else np.ascontiguousarray(B)
        return B * kf.scale if kf.scale != 1.0 else B

    def fold(self, kernels: Sequence[int], beta: np.ndarray) -> "FoldedFactorMap":
        r""":math:`\sum_m L_m(X_{new})\beta_{m,t}` over ``kernels`` for ``beta`` (T, R), the bases folded
        into the coefficients (:class:`FoldedFactorMap`)."""
        beta = np.asarray(beta, dtype=np.float64)
        if beta.ndim != 2 or beta.shape[1] != int(self.starts[-1]):
            raise ValueError(f"beta must have shape (T, {int(self.starts[-1])}); got {beta.shape}")
        held: list[KernelFactor] = []
        weights: list[np.ndarray] = []
        for m in np.asarray(kernels, dtype=np.intp).ravel():
            kf = self.kernels[int(m)]
            b = np.ascontiguousarray(beta[:, self.starts[m] : self.starts[m + 1]].T)  # (r_m, T)
            w = kf.through_basis(b, transpose=True)
            points = kf.points
            if points is not None and 2 * np.count_nonzero(points) < points.size:
                points = sp.csr_matrix(points)  # mostly-zero points (indicators, counts): CSR is smaller
            held.append(replace(kf, basis=None, points=points))
            weights.append(np.ascontiguousarray(w, dtype=np.float64))
        return FoldedFactorMap(held, weights, self.normalize, self.n_features, beta.shape[0])


@dataclass
class FoldedFactorMap:
    r"""Sums :math:`\sum_m L_m(X_{new})\beta_{m,t}` of some kernels and ``T`` coefficient vectors, without
    the training factors (:meth:`FactorMap.fold`): :math:`s\,k(x, X_P)\,L_P^{-\top}\beta` (pivoted
    Cholesky), :math:`s\,k(x, X_S)\,U_k\Lambda_k^{-1/2}\beta` (Nyström), :math:`s\,\phi(x)^\top\beta`
    (exact); ``weights[m]`` (p_m, T) holds what multiplies the kernel rows.
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
        out = np.zeros((X.shape[0], self.n_outputs))
        for kf, w in zip(self.kernels, self.weights):
            P = kf.points.toarray() if sp.issparse(kf.points) else kf.points
            part = np.asarray(_new_rows(kf, P, groups, self.normalize).T @ w, dtype=np.float64)
            out += part * kf.scale if kf.scale != 1.0 else part
        return out


def _new_rows(kf: KernelFactor, P: Any, groups: _Groups, normalize: str) -> Any:
    """Rows of new points before the basis and ``kf.scale``: the exact map, or kernel rows of the points ``P``."""
    if kf.method in EXACT_METHODS:
        return _exact_rows(kf, groups, normalize == "diagonal", "X_new")[0]
    spec = kf.spec
    A = groups.dense(spec.features)
    dnew = _diag(spec.function, A, spec.label, "X_new") if normalize == "diagonal" else None
    return _kernel_rows(spec.function, P, A, kf.point_diag, dnew, spec.label)


def _exact_rows(kf: KernelFactor, groups: _Groups, diagonal: bool, name: str) -> tuple[Any, np.ndarray]:
    """Rows (r, n) of an exact factor before ``kf.scale`` (over sqrt(k(x, x)) when ``diagonal``), and k(x, x)."""
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
        elif kf.method == "feature_map":
            B = kf.explicit.rows(A)
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
