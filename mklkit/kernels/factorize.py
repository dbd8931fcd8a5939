r"""Building factor banks from data: :math:`K_m \approx L_m L_m^\top` without N × N matrices.

:func:`build_factor_bank` turns a bank description (the ``kernels.bank``
vocabulary of :func:`~mklkit.kernels.bank.expand_bank`) and training points
into a :class:`~mklkit.kernels.factor.FactorBank` whose kernel ``m`` is the
normalised kernel of :meth:`KernelBank.build <mklkit.kernels.bank.KernelBank.build>`
— same functions, parameters, feature groups and normalisation — held as a
factor.  Per kernel:

exact (``method="exact"``, and ``"auto"`` where it applies)
    The kernel has an explicit, small feature map :math:`\phi` and
    :math:`L = \phi(X)`.  ``linear`` on a feature group is its own factor,
    :math:`L = X_g` (sparse stays sparse when every kernel of the bank is
    such a factor); ``poly`` :math:`(s\langle x,z\rangle + c)^p` has the
    monomial map
    :math:`\phi_\alpha(x) = \sqrt{\binom{p}{j} c^{p-j} s^j \tfrac{j!}{\alpha!}}\;x^\alpha`
    over the multi-indices :math:`|\alpha| = j \le p` (only :math:`j = p` when
    :math:`c = 0`), of dimension :math:`\binom{d+p}{p}`; it is used up to
    ``max_exact_dim`` dimensions (default 256), beyond that ``"auto"`` falls
    back to pivoted Cholesky (and says so in the log).
pivoted Cholesky (``"pivoted_cholesky"``; ``"auto"`` for all others)
    The incomplete Cholesky decomposition with greedy pivoting (Harbrecht,
    Peters & Schneider 2012, Alg. 1; Fine & Scheinberg 2001): pivot
    :math:`i = \arg\max_i d_i` of the residual diagonal
    :math:`d = \mathrm{diag}(K - LL^\top)`, new column
    :math:`\ell = (K_{:,i} - L L_{i,:}^\top)/\sqrt{d_i}`, until
    :math:`\mathrm{tr}(K - LL^\top) = \sum_i d_i \le` ``tol`` :math:`\cdot\,\mathrm{tr}K`
    or the rank reaches ``rank``.  Kernel columns are computed through the
    kernel function in batches of 64 candidate pivots (the largest residual
    diagonals; one :meth:`~mklkit.kernels.functions.KernelFunction.gram`
    call and one BLAS product per batch); within a batch the greedy step
    takes the candidate of largest residual while it is at least half the
    largest residual of all points, else a new batch starts.
Nyström (``"nystrom"``)
    Landmarks :math:`S`, a uniform sample without replacement (``seed``):
    :math:`K \approx C K_{SS}^{+} C^\top`, :math:`C = K_{:,S}`, with
    :math:`K_{SS} = U\Lambda U^\top` cut at eigenvalues
    :math:`\lambda \le 10^{-8}\lambda_{\max}` (so that rounding in :math:`C`,
    amplified by :math:`\lambda^{-1}`, stays below about :math:`10^{-8}` of the
    largest entry; pivoted Cholesky is accurate to round-off) and
    :math:`L = C\,U_k\Lambda_k^{-1/2}`.  ``rank`` landmarks, or (``rank=None``)
    64, 128, ... (nested samples) until the trace tolerance holds.

Extension to new points (:meth:`FactorMap.transform`, also
:meth:`FactorBank.transform <mklkit.kernels.factor.FactorBank.transform>`):
:math:`\phi(X_{new})` for exact factors;
:math:`L_{new} = K(X_{new}, X_P)\,L_P^{-\top}` for pivoted Cholesky with
pivots :math:`P` (:math:`L_P = L_{P,:}` is lower triangular);
:math:`L_{new} = K(X_{new}, X_S)\,U_k\Lambda_k^{-1/2}` for Nyström.  Then
:math:`L_{new}L^\top` is the approximation of the cross kernel that
:math:`LL^\top` is of the training kernel (exactly :math:`K(X_{new}, X)` for
exact factors), and predictions :math:`\sum_m L_{m,new}\beta_m + b`
(:math:`\beta_m = L_m^\top\alpha_m`) need no :math:`N_{new}\times N` matrix.

Normalisation as in :class:`~mklkit.kernels.bank.KernelBank`: ``"trace"``
divides by :math:`\mathrm{tr}K_m = \sum_i k_m(x_i, x_i)` (from the diagonal;
factors by its square root); ``"diagonal"`` factors
:math:`k(x,z)/\sqrt{k(x,x)k(z,z)}` (rows of :math:`L` scaled by
:math:`1/\sqrt{k(x_i,x_i)}`, new points by their own diagonal, a new point
with :math:`k(x,x) = 0` gets a zero row); ``"none"``.

Approximation error: per kernel the residual trace
:math:`\mathrm{tr}(K_m) - \|L_m\|_F^2 \ge 0` of the normalised kernel, exact
from the diagonal (``FactorBank.trace_error``, ``relative_trace_error``,
``overall_trace_error``).  Since :math:`K_m - L_mL_m^\top \succeq 0`, it
bounds every residual entry: :math:`|(K - LL^\top)_{ij}| \le \sqrt{d_i d_j}`
and :math:`\|K - LL^\top\|_2 \le \mathrm{tr}(K - LL^\top)`.

Memory: ``memory_budget`` bytes (default
:data:`~mklkit.kernels.bank.DEFAULT_MEMORY_BUDGET`) bound the factors plus
the working space of the kernel being factorized (its feature columns, one
batch of kernel rows).  Bytes known in advance (exact factors, and the
upper bound ``rank`` per kernel when given) are checked before anything is
allocated; a tolerance that cannot be reached within the budget is reported
before the allocation that would exceed it, naming the key to change and
what fits.  The factors of each kernel grow in blocks of 256 rows (no
copies while growing) and are moved into the bank's one (R, N) array at
the end, block by block.
"""
from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.linalg import eigh, solve_triangular

from .._kernels.factor import pivot_batch
from .._kernels.gram import all_finite, divide_outer_inplace
from ..components.params import did_you_mean
from .bank import (
    DEFAULT_MEMORY_BUDGET,
    NORMALIZATIONS,
    BankError,
    KernelSpec,
    Resolver,
    expand_bank,
    format_bytes,
)
from .factor import FactorBank
from .functions import BaseRows, KernelFunction, Linear, Poly

__all__ = [
    "METHODS",
    "DEFAULT_TOL",
    "MAX_EXACT_DIM",
    "FactorError",
    "KernelFactor",
    "FactorMap",
    "build_factor_bank",
    "check_settings",
    "poly_map_dim",
]

logger = logging.getLogger(__name__)

#: The factorization methods of :func:`build_factor_bank`.
METHODS = ("auto", "exact", "pivoted_cholesky", "nystrom")
#: Default relative residual trace.
DEFAULT_TOL = 1e-3
#: Largest dimension of an explicit polynomial feature map (``max_exact_dim``).
MAX_EXACT_DIM = 256
#: Candidate pivots per batch of kernel columns, and rows per block of a growing factor.
_BATCH = 64
_CHUNK = 256
#: A candidate pivot is taken while its residual is at least this fraction of the largest.
_ACCEPT = 0.5
#: The residual diagonal counts as zero below this fraction of the largest diagonal entry.
_FLOOR = 1e-13
#: Nyström: eigenvalues of K_SS below this fraction of the largest are cut.  Rounding in
#: the kernel columns is amplified by up to its inverse: entries of L L^T are accurate to
#: about eps / _EIG_CUTOFF (2e-8) relative to the largest (pivoted Cholesky: to round-off).
_EIG_CUTOFF = 1e-8
_NYSTROM_START = 64


class FactorError(BankError):
    """An invalid factorization setting, or a factorization that does not fit the memory budget.

    ``key`` names the setting (``rank``, ``tol``, ``method``, ... with the
    ``root`` prefix given to :func:`build_factor_bank`).
    """


# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------
def _key(root: str, name: str) -> str:
    return f"{root}.{name}" if root else name


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _bad(root: str, name: str, allowed: str, value: Any, hint: str = "") -> FactorError:
    key = _key(root, name)
    return FactorError(f"{key} must be {allowed}; got {value!r}{hint}", key=key,
                       problem="invalid value" + hint, value=value, allowed=allowed)


def check_settings(rank: Any = None, tol: Any = DEFAULT_TOL, method: Any = "auto", seed: Any = 0,
                   root: str = "") -> None:
    """Validate ``rank``, ``tol``, ``method`` and ``seed`` of :func:`build_factor_bank` (no data needed).

    Raises
    ------
    FactorError
        With ``key`` (``<root>.rank`` ...), ``value`` and ``allowed`` as data.
    """
    if rank is not None and not (_is_int(rank) and rank >= 1):
        raise _bad(root, "rank", "an integer >= 1 or None (as needed for tol)", rank)
    if not (_is_real(tol) and 0.0 <= float(tol) < 1.0):
        raise _bad(root, "tol", "a number in [0, 1) (the relative residual trace)", tol)
    if method not in METHODS:
        raise _bad(root, "method", f"one of {', '.join(map(repr, METHODS))}", method,
                   did_you_mean(str(method), list(METHODS)))
    if not (_is_int(seed) and seed >= 0):
        raise _bad(root, "seed", "an integer >= 0", seed)


def _check_settings(rank: Any, tol: Any, method: Any, seed: Any, normalize: Any, memory_budget: Any,
                    max_exact_dim: Any, root: str) -> float:
    """Validate the settings of :func:`build_factor_bank`; returns the budget in bytes."""
    check_settings(rank, tol, method, seed, root)
    if normalize not in NORMALIZATIONS:
        raise _bad(root, "normalize", f"one of {', '.join(map(repr, NORMALIZATIONS))}", normalize,
                   did_you_mean(str(normalize), list(NORMALIZATIONS)))
    if not (_is_int(max_exact_dim) and max_exact_dim >= 1):
        raise _bad(root, "max_exact_dim", "an integer >= 1", max_exact_dim)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if not (_is_real(budget) and math.isfinite(budget) and budget > 0):
        raise _bad(root, "memory_budget", "a number of bytes > 0 or None", memory_budget)
    return float(budget)


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


def _exact_dim(spec: KernelSpec) -> int | None:
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
    spec : KernelSpec
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

    spec: KernelSpec
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


def _kernel_rows(func: KernelFunction, A: np.ndarray, B: np.ndarray, dA: np.ndarray | None,
                 dB: np.ndarray | None, label: str, base: np.ndarray | None = None) -> np.ndarray:
    r""":math:`k(a_i, b_j)` (n_A, n_B) through the kernel function, divided by
    :math:`\sqrt{d_{A,i} d_{B,j}}` when the diagonals are given (zero where :math:`d_B = 0`).

    ``base``: the function's base matrix of ``A`` against ``B``, already
    computed (:class:`~mklkit.kernels.functions.BaseRows`); it is overwritten.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        G = func.gram(A, B) if base is None else func.from_base(base, out=base)
    if not isinstance(G, np.ndarray) or G.shape != (A.shape[0], B.shape[0]):
        got = G.shape if isinstance(G, np.ndarray) else type(G).__name__
        raise BankError(f"kernel {label!r}: gram() must return an array of shape "
                        f"{(A.shape[0], B.shape[0])}; got {got}")
    G = np.ascontiguousarray(G, dtype=np.float64)
    if G.size and not all_finite(G):
        raise BankError(f"kernel {label!r} has NaN or infinite values (overflow?); standardise the "
                        "features or change its parameters")
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
        from ..data import Dataset

        if isinstance(X_new, Dataset):
            X_new = X_new.X
        X = _as_points(X_new, "X_new")
        if X.shape[1] != self.n_features:
            raise BankError(f"X_new must have shape (n, {self.n_features}) like the training data; "
                            f"got {X.shape}")
        groups = _Groups(X)
        if self.sparse:
            return sp.vstack([self._block(kf, groups) for kf in self.kernels], format="csr")
        out = np.empty((int(self.starts[-1]), X.shape[0]))
        for m, kf in enumerate(self.kernels):
            B = self._block(kf, groups)
            out[self.starts[m]:self.starts[m + 1]] = B.toarray() if sp.issparse(B) else B
        return out

    def _block(self, kf: KernelFactor, groups: "_Groups") -> Any:
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


def _exact_rows(kf: KernelFactor, groups: "_Groups", diagonal: bool, name: str
                ) -> tuple[Any, np.ndarray]:
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


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------
def _as_points(X: Any, name: str) -> Any:
    """``X`` as a finite float64 CSR matrix or C-contiguous array (n, d)."""
    if sp.issparse(X):
        Xs = sp.csr_matrix(X, dtype=np.float64)
        if Xs.ndim != 2 or Xs.shape[0] < 1 or Xs.shape[1] < 1:
            raise BankError(f"{name} must be a non-empty 2-d array (samples x features); got shape "
                            f"{Xs.shape}")
        if not np.all(np.isfinite(Xs.data)):
            raise BankError(f"{name} contains NaN or infinite values")
        Xs.sort_indices()
        return Xs
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < 1 or A.shape[1] < 1:
        raise BankError(f"{name} must be a non-empty 2-d array (samples x features); got shape "
                        f"{A.shape}")
    if not np.all(np.isfinite(A)):
        r, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise BankError(f"{name}[{r}, {j}] is {float(A[r, j])!r}; NaN and infinite values are not "
                        "allowed")
    return np.ascontiguousarray(A)


class _Groups:
    """The columns of one feature group at a time (the last one kept), dense or sparse."""

    def __init__(self, X: Any) -> None:
        self.X = X
        self.sparse = sp.issparse(X)
        self._key: tuple[int, ...] | None = None
        self._dense: np.ndarray | None = None
        self._base: BaseRows | None = None

    def dense(self, features: tuple[int, ...]) -> np.ndarray:
        if features != self._key or self._dense is None:
            self._dense = self._base = None
            cols = np.asarray(features, dtype=np.intp)
            if self.sparse:
                self._dense = np.ascontiguousarray(self.X[:, cols].toarray())
            elif cols.size == self.X.shape[1] and np.array_equal(cols, np.arange(cols.size)):
                self._dense = self.X
            else:
                self._dense = np.ascontiguousarray(self.X[:, cols])
            self._key = features
        return self._dense

    def base_rows(self, features: tuple[int, ...], kind: str) -> BaseRows:
        """Base-matrix rows of the group (shared by consecutive kernels on it)."""
        A = self.dense(features)
        if self._base is None or self._base.kind != kind or self._base.X is not A:
            self._base = None
            self._base = BaseRows(kind, A)
        return self._base

    def sparse_columns(self, features: tuple[int, ...]) -> sp.csr_matrix:
        return sp.csr_matrix(self.X[:, np.asarray(features, dtype=np.intp)])


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
class _Budget:
    """Bytes held by factors and working space against ``memory_budget``."""

    def __init__(self, limit: float, N: int, root: str) -> None:
        self.limit = limit
        self.N = N
        self.root = root
        self.used = 0

    def fits(self, nbytes: float) -> bool:
        return self.used + nbytes <= self.limit

    def take(self, nbytes: int) -> None:
        self.used += int(nbytes)

    def release(self, nbytes: int) -> None:
        self.used -= int(nbytes)

    def rows_fitting(self, extra: float = 0.0) -> int:
        """Factor rows of N float64 that fit in what is left after ``extra`` bytes."""
        return max(0, int((self.limit - self.used - extra) // (8 * self.N)))


# ---------------------------------------------------------------------------
# The factorizations of one kernel
# ---------------------------------------------------------------------------
@dataclass
class _Approx:
    """A growing factor: blocks of rows of :math:`L^\\top` (each (rows, N)), and their count."""

    blocks: list[np.ndarray]
    rank: int


def _pivoted_cholesky(
    rows: Callable[[np.ndarray], np.ndarray], d0: np.ndarray, cap: int, tol: float,
    budget: _Budget, on_full: Callable[[int, float], None],
) -> tuple[_Approx, np.ndarray]:
    """Greedy pivoted Cholesky of the kernel whose rows ``rows(idx)`` gives; see module docs.

    ``on_full(rank, rel_residual)`` is called (and must raise) when the next
    block of rows would not fit the budget.
    """
    N = d0.size
    d = d0.copy()
    tr = float(d0.sum())
    stop_sum = tol * tr
    floor = _FLOOR * float(d0.max()) if N else 0.0
    pivots = np.empty(cap, dtype=np.int64)
    blocks: list[np.ndarray] = []
    j = 0
    while j < cap:
        if float(d.sum()) <= stop_sum or float(d.max()) <= floor:
            break
        filled = j - sum(b.shape[0] for b in blocks[:-1])          # rows in use in the last block
        if not blocks or filled == blocks[-1].shape[0]:
            n_rows = min(_CHUNK, cap - j, budget.rows_fitting())
            if n_rows < 1:
                on_full(j, float(d.sum()) / tr)
            budget.take(8 * N * n_rows)
            blocks.append(np.empty((n_rows, N)))
            filled = 0
        live = np.flatnonzero(d > floor)
        B = min(_BATCH, live.size)
        cand = live[np.argpartition(-d[live], B - 1)[:B]] if B < live.size else live
        cand = np.ascontiguousarray(cand, dtype=np.int64)
        G = rows(cand)
        for k, blk in enumerate(blocks):
            n = blk.shape[0] if k < len(blocks) - 1 else filled
            if n:
                G -= blk[:n, cand].T @ blk[:n]
        end = min(j + blocks[-1].shape[0] - filled, cap)
        j, reason = pivot_batch(G, cand, d, blocks[-1], filled, pivots, j, end, stop_sum, floor,
                                _ACCEPT)
        if reason in (1, 2):
            break
    approx = _Approx(blocks, j)
    _trim(approx, budget, N)
    return approx, pivots[:j].copy()


def _trim(approx: _Approx, budget: _Budget, N: int) -> None:
    """Cut the last block to the rows in use, and give the rest back to the budget."""
    if not approx.blocks:
        return
    held = sum(b.shape[0] for b in approx.blocks)
    spare = held - approx.rank
    if spare:
        last = approx.blocks[-1]
        keep = last.shape[0] - spare
        approx.blocks[-1] = last[:keep].copy()
        if keep == 0:
            approx.blocks.pop()
        budget.release(8 * N * spare)


def _nystrom(
    rows: Callable[[np.ndarray], np.ndarray], d0: np.ndarray, rank: int | None, tol: float,
    order: np.ndarray, budget: _Budget, on_full: Callable[[int, float], None],
) -> tuple[_Approx, np.ndarray, np.ndarray]:
    """Nyström on the first landmarks of ``order``: ``rank`` of them, or doubling until ``tol``."""
    N = d0.size
    tr = float(d0.sum())
    n = min(N, rank) if rank is not None else min(N, _NYSTROM_START)
    rel = 1.0
    while True:
        S = np.ascontiguousarray(np.sort(order[:n]))
        if not budget.fits(8 * N * 2 * n):
            on_full(n, rel)
        budget.take(8 * N * 2 * n)
        C = rows(S)                               # (n, N): k(x_S, X)
        Kss = np.ascontiguousarray(C[:, S])
        Kss = 0.5 * (Kss + Kss.T)
        lam, U = eigh(Kss, driver="evd", check_finite=False)
        keep = lam > _EIG_CUTOFF * max(float(lam[-1]), 0.0)
        W = np.ascontiguousarray(U[:, keep] / np.sqrt(lam[keep]))
        LT = np.ascontiguousarray(W.T @ C)
        del C
        budget.release(8 * N * (2 * n - LT.shape[0]))
        rel = max(tr - float(np.einsum("rn,rn->", LT, LT)), 0.0) / tr if tr > 0 else 0.0
        if rank is not None or rel <= tol or n == N:
            return _Approx([LT], LT.shape[0]), S, W
        budget.release(8 * N * LT.shape[0])
        del LT
        n = min(N, 2 * n)


# ---------------------------------------------------------------------------
# The bank
# ---------------------------------------------------------------------------
def _choose_method(spec: KernelSpec, m: int, method: str, rank: int | None, max_exact_dim: int,
                   root: str) -> str:
    dim = _exact_dim(spec)
    if method in ("pivoted_cholesky", "nystrom"):
        return method
    exact = "linear" if type(spec.function) is Linear else "poly_map"
    small = dim is not None and (exact == "linear" or dim <= max_exact_dim)
    within = dim is not None and (rank is None or dim <= rank)
    if method == "exact":
        where = f"{_key(root, 'method')}: kernel {m} {spec.label!r}"
        if dim is None:
            raise FactorError(f"{where} has no explicit feature map (exact factors exist for the "
                              "built-in linear and poly kernels); use method 'auto', "
                              "'pivoted_cholesky' or 'nystrom'", key=_key(root, "method"))
        if not small:
            raise FactorError(f"{where}: its monomial map has {dim} dimensions > max_exact_dim = "
                              f"{max_exact_dim}; use method 'auto' (pivoted Cholesky for it) or "
                              "raise max_exact_dim", key=_key(root, "method"))
        if not within:
            raise FactorError(f"{where}: its exact factor has rank {dim} > {_key(root, 'rank')} = "
                              f"{rank}; raise rank or use method 'auto'", key=_key(root, "method"))
        return exact
    if small and within:
        return exact
    if dim is not None:
        why = (f"monomial map of {dim} dimensions > max_exact_dim = {max_exact_dim}" if not small
               else f"exact rank {dim} > rank = {rank}")
        logger.info("kernel %d %r: %s; pivoted Cholesky instead", m, spec.label, why)
    return "pivoted_cholesky"


@dataclass
class _Run:
    """The settings and state of one :func:`build_factor_bank` call that every kernel reads."""

    normalize: str
    rank: int | None
    tol: float
    order: np.ndarray
    budget: _Budget
    working: int
    fair_rank: int
    root: str
    rank_so_far: int = 0


def _exact_bytes(spec: KernelSpec, kind: str, X: Any, N: int, sparse_bank: bool) -> int:
    if sparse_bank:
        nnz = int(X[:, np.asarray(spec.features, dtype=np.intp)].nnz)
        return 16 * nnz + 8 * (len(spec.features) + 1)
    return 8 * N * int(_exact_dim(spec) or 0)


def build_factor_bank(
    bank: Any,
    X: Any,
    *,
    rank: int | None = None,
    tol: float = DEFAULT_TOL,
    method: str = "auto",
    seed: int = 0,
    normalize: str = "trace",
    memory_budget: float | None = None,
    max_exact_dim: int = MAX_EXACT_DIM,
    resolve: Resolver | Mapping[str, type] | None = None,
    feature_names: Sequence[str] | None = None,
    root: str = "",
) -> FactorBank:
    r"""Factor every kernel of a bank description on the training points ``X``.

    Parameters
    ----------
    bank : list of entries, preset name, or list of KernelSpec
        The kernels (the vocabulary of :func:`~mklkit.kernels.bank.expand_bank`).
    X : ndarray (N, d), scipy.sparse matrix or Dataset
        Training points (NaN and inf refused).
    rank : int, optional
        Largest rank per approximated kernel (and per exact factor, which
        otherwise falls back to pivoted Cholesky in ``"auto"``); ``None``:
        as large as ``tol`` needs (at most N).  For Nyström: the number of
        landmarks.
    tol : float in [0, 1)
        Stop when :math:`\mathrm{tr}(K_m - L_mL_m^\top) \le` ``tol``
        :math:`\cdot\,\mathrm{tr}K_m` (0: until numerically exhausted).
    method : {"auto", "exact", "pivoted_cholesky", "nystrom"}
        ``"auto"``: exact factors where the feature map is exact and small,
        pivoted Cholesky otherwise.  ``"exact"`` refuses kernels without one.
    seed : int >= 0
        Nyström landmarks (pivoted Cholesky is deterministic).
    normalize : {"trace", "diagonal", "none"}
        As :meth:`KernelBank.build <mklkit.kernels.bank.KernelBank.build>`.
    memory_budget : float, optional
        Bytes for the factors and the working space (default 4 GiB); see the
        module docstring.
    max_exact_dim : int
        Largest explicit polynomial map (default 256).
    resolve, feature_names
        As :func:`~mklkit.kernels.bank.expand_bank`.
    root : str
        Prefix of the keys named in errors (``"kernels.factor"`` gives
        ``kernels.factor.tol``).

    Returns
    -------
    FactorBank
        With ``trace_error`` per kernel and ``factor_map``
        (:class:`FactorMap`: ``transform(X_new)``, the per-kernel methods,
        ranks and errors).

    Raises
    ------
    FactorError
        A bad setting, or factors that do not fit ``memory_budget`` (one
        line naming the key and what fits).
    BankError
        A bad bank description, bad data, or a kernel that cannot be
        normalised.
    """
    from ..data import Dataset

    limit = _check_settings(rank, tol, method, seed, normalize, memory_budget, max_exact_dim, root)
    tol = float(tol)
    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    X = _as_points(X, "X")
    N, d = X.shape
    if isinstance(bank, (list, tuple)) and bank and all(isinstance(s, KernelSpec) for s in bank):
        specs = list(bank)
    else:
        specs = expand_bank(bank, d, feature_names, resolve)
    M = len(specs)
    kinds = [_choose_method(s, m, method, rank, max_exact_dim, root) for m, s in enumerate(specs)]
    approx = [m for m in range(M) if kinds[m] in ("pivoted_cholesky", "nystrom")]
    sparse_bank = sp.issparse(X) and all(k == "linear" for k in kinds)
    budget = _Budget(limit, N, root)

    # -- what is known before anything is allocated -------------------------
    exact_bytes = sum(_exact_bytes(specs[m], kinds[m], X, N, sparse_bank)
                      for m in range(M) if m not in approx)
    widest = max((len(specs[m].features) for m in approx), default=0)
    working = 8 * N * (2 * _BATCH + 2 * widest) if approx else 0
    per_kernel = 8 * N * min(rank, N) if rank is not None else 0
    if exact_bytes + working > limit:
        plus = f" (plus {format_bytes(working)} of working space)" if working else ""
        raise FactorError(
            f"{_key(root, 'memory_budget')}: the exact factors need {format_bytes(exact_bytes)}"
            f"{plus} but memory_budget is "
            f"{format_bytes(limit)}; raise memory_budget or use method 'pivoted_cholesky' with a "
            "rank", key=_key(root, "memory_budget"))
    fair_rank = int((limit - exact_bytes - working) // (8 * N * max(len(approx), 1)))
    if rank is not None and approx and exact_bytes + working + len(approx) * per_kernel > limit:
        raise FactorError(
            f"{_key(root, 'rank')} = {rank}: {len(approx)} approximated kernels x rank "
            f"{min(rank, N)} x {N} points need {format_bytes(len(approx) * per_kernel)} (plus "
            f"{format_bytes(exact_bytes + working)} for exact factors and working space) but "
            f"memory_budget is {format_bytes(limit)}; rank <= {fair_rank} fits",
            key=_key(root, "rank"))

    t0 = time.perf_counter()
    groups = _Groups(X)
    order = np.random.default_rng(np.random.SeedSequence(int(seed))).permutation(N)
    factors: list[KernelFactor] = []
    blocks: list[Any] = []
    budget.take(exact_bytes)
    run = _Run(normalize, rank, tol, order, budget, working, fair_rank, root)
    for m, spec in enumerate(specs):
        kf, blk = _factor_one(m, spec, kinds[m], groups, run)
        factors.append(kf)
        blocks.append(blk)
        run.rank_so_far += kf.rank
    starts = np.concatenate([[0], np.cumsum([kf.rank for kf in factors])]).astype(np.int64)
    LT = _assemble(blocks, starts, N, sparse_bank)
    fmap = FactorMap(factors, starts, normalize, d, sparse_bank)
    out = FactorBank(LT, starts, trace_error=[kf.trace_error for kf in factors], factor_map=fmap)
    logger.info(
        "factored %d kernels on %d samples in %.2f s: total rank %d (%s), %s; residual trace "
        "%.3g of the total", M, N, time.perf_counter() - t0, out.total_rank,
        ", ".join(f"{k} {kinds.count(k)}" for k in dict.fromkeys(kinds)), format_bytes(out.nbytes),
        out.overall_trace_error)
    return out


def _factor_one(m: int, spec: KernelSpec, kind: str, groups: _Groups, run: _Run
                ) -> tuple[KernelFactor, Any]:
    """Kernel ``m``: its :class:`KernelFactor` and its rows of :math:`L^\\top` (an array, a CSR
    matrix, or an :class:`_Approx`)."""
    func, label = spec.function, spec.label
    normalize, rank, tol, budget, root = run.normalize, run.rank, run.tol, run.budget, run.root
    N = groups.X.shape[0]
    kf = KernelFactor(spec, kind, 0, 1.0, 0.0)
    if kind in ("linear", "poly_map"):
        blk, diag = _exact_rows(kf, groups, False, "X")
    else:
        A = np.ascontiguousarray(groups.dense(spec.features))
        diag = _diag(func, A, label, "X")
    tr_raw = float(diag.sum())
    where = f"kernel {m} {label!r}"
    if normalize == "trace" and not (tr_raw > 0.0 and math.isfinite(tr_raw)):
        raise BankError(f"{where} has trace {tr_raw!r}; unit-trace normalisation needs a positive "
                        "trace (a constant-zero feature?); drop the feature or use "
                        "normalize='diagonal' or 'none'")
    if normalize == "diagonal" and not np.all(diag > 0.0):
        i = int(np.argmin(diag))
        raise BankError(f"{where} has k(x, x) = {float(diag[i])!r} at sample {i}; unit-diagonal "
                        "normalisation needs k(x, x) > 0 for every training point; use "
                        "normalize='trace' or 'none'")
    scale = kf.scale = 1.0 / math.sqrt(tr_raw) if normalize == "trace" else 1.0
    trace = kf.trace = (1.0 if normalize == "trace" else
                        float(N) if normalize == "diagonal" else tr_raw)
    if kind in ("linear", "poly_map"):
        if normalize == "diagonal":
            blk = _scale_columns(blk, diag)
        kf.rank = int(blk.shape[0])
    else:
        dn = diag if normalize == "diagonal" else None
        d0 = np.ones(N) if dn is not None else diag.copy()

        base = groups.base_rows(spec.features, func.uses) if func.uses is not None else None

        def rows(idx: np.ndarray) -> np.ndarray:
            return _kernel_rows(func, np.ascontiguousarray(A[idx]), A,
                                None if dn is None else dn[idx], dn, label,
                                None if base is None else base(idx))

        def on_full(r: int, rel: float) -> None:
            raise FactorError(
                f"{_key(root, 'tol')} = {tol:g} is not reached within {_key(root, 'memory_budget')}"
                f" = {format_bytes(budget.limit)}: {where} has relative residual trace {rel:.3g} "
                f"at rank {r}, and no more rows of {N} points fit (total rank so far "
                f"{run.rank_so_far + r}); loosen {_key(root, 'tol')}, set {_key(root, 'rank')} <= "
                f"{run.fair_rank} (fits for every approximated kernel) or raise "
                f"{_key(root, 'memory_budget')}", key=_key(root, "tol"))

        budget.take(run.working)
        cap = N if rank is None else min(rank, N)
        if kind == "pivoted_cholesky":
            blk, piv = _pivoted_cholesky(rows, d0, cap, tol, budget, on_full)
            # L_P = L[P, :]; row j of L^T is zero at the pivots before j: L_P is lower triangular
            LPt = np.vstack([b[:, piv] for b in blk.blocks]) if blk.blocks else np.zeros((0, 0))
            kf.basis = np.ascontiguousarray(LPt.T)
            kf.points = np.ascontiguousarray(A[piv])
            kf.point_diag = None if dn is None else dn[piv].copy()
        else:
            blk, S, W = _nystrom(rows, d0, rank, tol, run.order, budget, on_full)
            kf.basis, kf.points = W, np.ascontiguousarray(A[S])
            kf.point_diag = None if dn is None else dn[S].copy()
        budget.release(run.working)
        kf.rank = blk.rank
    sq = _squared_norm(blk) * scale * scale
    kf.trace_error = max(trace - sq, 0.0)
    if kind in ("linear", "poly_map") and scale != 1.0:
        blk = blk * scale
    elif isinstance(blk, _Approx) and scale != 1.0:
        for b in blk.blocks:
            b *= scale
    return kf, blk


def _squared_norm(blk: Any) -> float:
    if isinstance(blk, _Approx):
        return float(sum(np.einsum("rn,rn->", b, b) for b in blk.blocks))
    if sp.issparse(blk):
        return float(blk.multiply(blk).sum())
    return float(np.einsum("rn,rn->", blk, blk))


def _assemble(blocks: list[Any], starts: np.ndarray, N: int, sparse_bank: bool) -> Any:
    """One (R, N) array (or CSR matrix) from the kernels' rows; each block freed once moved."""
    if sparse_bank:
        return sp.vstack(blocks, format="csr")
    LT = np.empty((int(starts[-1]), N))
    for m in range(len(blocks)):
        blk, blocks[m] = blocks[m], None
        r = int(starts[m])
        parts = blk.blocks if isinstance(blk, _Approx) else [blk]
        while parts:
            b = parts.pop(0)
            b = b.toarray() if sp.issparse(b) else b
            LT[r:r + b.shape[0]] = b
            r += b.shape[0]
            del b
    return LT
