r"""Boolean kernels on 0/1 features: ``conjunctive``, ``disjunctive``, ``dnf`` and ``tanimoto``.

Each is an inner product in a space of boolean formulas over the :math:`n` binary features
(Polato & Aiolli 2018): the number of formulas of a kind that both points satisfy.  All are functions of
:math:`\langle x, z\rangle` (the features both have) and :math:`|x| = \langle x, x\rangle`; the
binomial coefficients are exact integers (``math.comb``) rounded once to float64, so every kernel value is
exact while :math:`\binom{n}{d}` stays below :math:`2^{53}` and finite up to about :math:`1.8\cdot10^{308}`
(beyond it: a :class:`~mklkit.kernels.description.BankError` naming the kernel).  The kernels read
the features as given (``raw_input``): the data must not be standardised.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from ..components.params import Param
from .errors import BankError
from .functions import KernelFunction

#: Largest table of binomial coefficients built at once; above it only the arguments that occur are computed.
_TABLE_MAX = 1 << 20


def binary_points(X: Any, name: str, kernel: str) -> Any:
    """``X`` as float64 (CSR when sparse) after checking every entry is 0 or 1; :class:`BankError` naming the
    row, column and value otherwise."""
    A = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise BankError(f"{name} must be a 2-d array of 0/1 features; got shape {A.shape}")
    values = A.data if sp.issparse(A) else A
    bad = (values != 0.0) & (values != 1.0)
    if bad.any():
        if sp.issparse(A):
            coo = A.tocoo()
            k = int(np.flatnonzero((coo.data != 0.0) & (coo.data != 1.0))[0])
            r, j, v = int(coo.row[k]), int(coo.col[k]), float(coo.data[k])
        else:
            r, j = (int(t) for t in np.argwhere(bad)[0])
            v = float(A[r, j])
        raise BankError(
            f"{name}[{r}, {j}] (column {j}) is {v!r}: kernel {kernel!r} takes binary features; allowed: 0 or 1",
            key=f"{name}[{r}, {j}]",
            problem=f"kernel {kernel!r} takes binary features",
            value=v,
            allowed="0 or 1",
        )
    return A


def comb_at(a: np.ndarray, r: int, top: int, kernel: str) -> np.ndarray:
    r""":math:`\binom{a}{r}` elementwise for integer ``a`` in ``[0, top]`` (0 where :math:`a < r`), float64,
    from exact integers; :class:`BankError` when a value exceeds float64."""
    a = np.rint(np.asarray(a, dtype=np.float64)).astype(np.int64)

    def one(v: int) -> float:
        try:
            return float(math.comb(int(v), r)) if v >= 0 else 0.0
        except OverflowError:
            raise BankError(
                f"kernel {kernel!r}: the binomial coefficient C({int(v)}, {r}) overflows float64; "
                "use fewer features or a smaller degree",
                problem="a binomial coefficient overflows float64",
                value=r,
                allowed="C(n, degree) <= 1.8e308",
            ) from None

    if top + 1 <= _TABLE_MAX:
        table = np.array([one(v) for v in range(top + 1)])
        return table[np.clip(a, 0, top)]
    uniq, inv = np.unique(a, return_inverse=True)
    return np.array([one(v) for v in uniq])[inv.reshape(a.shape)]


class _Boolean(KernelFunction):
    """The inner products, row counts and checks the boolean kernels share; ``from_counts`` gives the kernel."""

    raw_input: ClassVar[bool] = True

    def _parts(self, X: Any, Z: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        A = binary_points(X, "X", self.name)
        B = A if Z is None else binary_points(Z, "Z", self.name)
        if B.shape[1] != A.shape[1]:
            raise ValueError(f"X has {A.shape[1]} columns but Z has {B.shape[1]}")
        L = A @ B.T
        L = np.asarray(L.toarray() if sp.issparse(L) else L, dtype=np.float64)
        sa = np.asarray(A.sum(axis=1), dtype=np.float64).ravel()
        sb = sa if Z is None else np.asarray(B.sum(axis=1), dtype=np.float64).ravel()
        return L, sa, sb, int(A.shape[1])

    def gram(self, X: Any, Z: Any = None) -> np.ndarray:
        if Z is X:
            Z = None
        L, sa, sb, n = self._parts(X, Z)
        G = np.ascontiguousarray(self.from_counts(L, sa[:, None], sb[None, :], n), dtype=np.float64)
        if Z is None:
            G = 0.5 * (G + G.T)
        return G

    def diag(self, X: Any) -> np.ndarray:
        A = binary_points(X, "X", self.name)
        s = np.asarray(A.sum(axis=1), dtype=np.float64).ravel()
        return np.ascontiguousarray(self.from_counts(s, s, s, int(A.shape[1])), dtype=np.float64)

    def from_counts(self, L: np.ndarray, sx: np.ndarray, sz: np.ndarray, n: int) -> np.ndarray:
        """The kernel from :math:`\\langle x, z\\rangle`, :math:`|x|`, :math:`|z|` (broadcast) and ``n``."""
        raise NotImplementedError


class Conjunctive(_Boolean):
    r"""Monotone conjunctive kernel :math:`k(x, z) = \binom{\langle x, z\rangle}{c}`: the number of
    conjunctions of ``c`` distinct variables (:math:`x_{j_1} \wedge \dots \wedge x_{j_c}`) true for both.

    Its feature map is :math:`\phi_S(x) = \prod_{j \in S} x_j` over the :math:`\binom{n}{c}` subsets
    :math:`S` of ``c`` features (exact factors when that is small).
    """

    name: ClassVar[str] = "conjunctive"
    description: ClassVar[str] = "monotone conjunctive kernel C(<x,z>, c) on 0/1 features"
    params: ClassVar[tuple[Param, ...]] = (Param("c", 2, "literals per conjunction", type=int, low=1),)

    def from_counts(self, L: np.ndarray, sx: np.ndarray, sz: np.ndarray, n: int) -> np.ndarray:
        return comb_at(L, self.c, n, self.name)

    def explicit_map(self, X: Any) -> "ConjunctionMap":
        """The map over the c-subsets of the features (:class:`ConjunctionMap`)."""
        return ConjunctionMap(self, np.asarray(X).shape[1] if not sp.issparse(X) else X.shape[1])


class ConjunctionMap:
    r"""The exact feature map of the conjunctive kernel: :math:`\phi_S(x) = \prod_{j\in S} x_j` for the
    :math:`\binom{n}{c}` subsets :math:`S` of ``c`` of the ``n`` features (``dim``)."""

    def __init__(self, func: Conjunctive, n_features: int) -> None:
        self.func = func
        self.n_features = int(n_features)
        self.dim = math.comb(self.n_features, int(func.c))

    def rows(self, A: Any) -> np.ndarray:
        """The (dim, n) rows :math:`\\phi(a)^\\top` of the points ``A``."""
        B = binary_points(A, "X_new", self.func.name)
        B = B.toarray() if sp.issparse(B) else B
        Bt = np.ascontiguousarray(B.T)
        out = np.empty((self.dim, B.shape[0]))
        for k, S in enumerate(itertools.combinations(range(self.n_features), int(self.func.c))):
            row = out[k]
            row[:] = Bt[S[0]]
            for j in S[1:]:
                row *= Bt[j]
        return out


class Disjunctive(_Boolean):
    r"""Monotone disjunctive kernel: the number of disjunctions of ``d`` distinct variables true for both
    points, :math:`k(x, z) = \binom{n}{d} - \binom{n-|x|}{d} - \binom{n-|z|}{d} + \binom{n-|x|-|z|+\langle
    x,z\rangle}{d}` (inclusion–exclusion over the d-subsets missing :math:`x` or :math:`z`)."""

    name: ClassVar[str] = "disjunctive"
    description: ClassVar[str] = "monotone disjunctive kernel: d-disjunctions true for both 0/1 points"
    params: ClassVar[tuple[Param, ...]] = (Param("d", 2, "literals per disjunction", type=int, low=1),)

    def from_counts(self, L: np.ndarray, sx: np.ndarray, sz: np.ndarray, n: int) -> np.ndarray:
        d = int(self.d)
        total = comb_at(np.array(n), d, n, self.name)
        return (
            total
            - comb_at(n - sx, d, n, self.name)
            - comb_at(n - sz, d, n, self.name)
            + comb_at(n - sx - sz + L, d, n, self.name)
        )


class DNF(_Boolean):
    r"""Monotone DNF kernel: the number of disjunctions of ``d`` distinct conjunctions of ``c`` variables
    true for both points, the disjunctive kernel over the :math:`N_c = \binom{n}{c}` conjunctive features:
    :math:`k(x, z) = \binom{N_c}{d} - \binom{N_c - \binom{|x|}{c}}{d} - \binom{N_c - \binom{|z|}{c}}{d} +
    \binom{N_c - \binom{|x|}{c} - \binom{|z|}{c} + \binom{\langle x,z\rangle}{c}}{d}`."""

    name: ClassVar[str] = "dnf"
    description: ClassVar[str] = "monotone DNF kernel: d-disjunctions of c-conjunctions true for both 0/1 points"
    params: ClassVar[tuple[Param, ...]] = (
        Param("d", 2, "conjunctions per disjunction", type=int, low=1),
        Param("c", 2, "literals per conjunction", type=int, low=1),
    )

    def from_counts(self, L: np.ndarray, sx: np.ndarray, sz: np.ndarray, n: int) -> np.ndarray:
        c, d = int(self.c), int(self.d)
        Nc = math.comb(n, c)
        cx, cz, cL = (comb_at(v, c, n, self.name) for v in (sx, sz, L))
        total = comb_at(np.array(Nc), d, Nc, self.name)
        return (
            total
            - comb_at(Nc - cx, d, Nc, self.name)
            - comb_at(Nc - cz, d, Nc, self.name)
            + comb_at(Nc - cx - cz + cL, d, Nc, self.name)
        )


class Tanimoto(_Boolean):
    r"""Tanimoto (Jaccard) kernel :math:`k(x, z) = \langle x,z\rangle / (|x| + |z| - \langle x,z\rangle)`
    on 0/1 features (:math:`|x| = \|x\|^2`): shared features over features of either.  Two all-zero rows
    (two empty sets, equal) have :math:`k = 1`, so :math:`k(x, x) = 1` for every :math:`x`; an all-zero row
    against any other row has :math:`k = 0`."""

    name: ClassVar[str] = "tanimoto"
    description: ClassVar[str] = "Tanimoto kernel <x,z>/(|x|+|z|-<x,z>) on 0/1 features"
    params: ClassVar[tuple[Param, ...]] = ()

    def from_counts(self, L: np.ndarray, sx: np.ndarray, sz: np.ndarray, n: int) -> np.ndarray:
        union = np.asarray(sx + sz - L, dtype=np.float64)
        L = np.broadcast_to(np.asarray(L, dtype=np.float64), union.shape)
        return np.divide(L, union, out=np.ones(union.shape), where=union > 0)


#: The boolean kernels, registered by ``mklkit.builtin``.
BOOLEAN_KERNEL_FUNCTIONS: tuple[type[KernelFunction], ...] = (Conjunctive, Disjunctive, DNF, Tanimoto)
