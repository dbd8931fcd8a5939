r"""Kernel functions, the ``kernel`` component kind: built-ins ``rbf``, ``poly`` and ``linear``.

A kernel function sets ``uses = "sqdist"`` or ``"inner"`` and implements the elementwise map
:meth:`KernelFunction.from_base` (Gram matrices, diagonals and the sharing of one base matrix across
kernels come for free), or overrides :meth:`KernelFunction.gram` (and :meth:`KernelFunction.diag`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .._jit.gram import (
    sqdist_cross_inplace,
    sqdist_direct,
    sqdist_refine_inplace,
    sqdist_rows_t,
    sqdist_symmetric_inplace,
    symmetrize_inplace,
)
from ..components.base import Component
from ..components.params import Param

BASES = ("sqdist", "inner")
#: Up to this many columns, squared distances are summed term by term (no BLAS).
_DIRECT_MAX_COLS = 12
#: Squared distances below this fraction of ``|x|^2 + |z|^2`` are recomputed term by term.
_REFINE_TAU = 1e-4


def as_matrix(X: Any, name: str = "X") -> np.ndarray:
    """``X`` as a C-contiguous float64 2-d array (no copy when it already is one)."""
    A = np.ascontiguousarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array (samples x features); got shape {A.shape}")
    return A


def squared_distances(X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
    r"""Squared Euclidean distances :math:`\|x_i - z_j\|^2`, (n_X, n_Z); ``Z=None``: exactly symmetric, zero diagonal.

    Up to 12 columns summed term by term; else by BLAS on columns centred on the mean of ``X``, with the
    entries small against the norms (near-duplicates) recomputed term by term.
    """
    X = as_matrix(X)
    Zm = None if Z is None else as_matrix(Z, "Z")
    if Zm is not None and Zm.shape[1] != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but Z has {Zm.shape[1]}")
    if X.shape[1] == 1:
        x = X[:, 0]
        z = x if Zm is None else Zm[:, 0]
        D = np.subtract.outer(x, z)
        np.square(D, out=D)
        return D
    if X.shape[1] <= _DIRECT_MAX_COLS:
        D = np.empty((X.shape[0], X.shape[0] if Zm is None else Zm.shape[0]))
        sqdist_direct(X, X if Zm is None else Zm, D)
        return D
    mu = X.mean(axis=0) if X.shape[0] else np.zeros(X.shape[1])
    Xc = np.ascontiguousarray(X - mu)
    sqx = np.einsum("ij,ij->i", Xc, Xc)
    if Zm is None:
        G = np.ascontiguousarray(Xc @ Xc.T)
        sqdist_symmetric_inplace(G, sqx)
        sqdist_refine_inplace(G, Xc, Xc, sqx, sqx, _REFINE_TAU)
        return G
    Zc = np.ascontiguousarray(Zm - mu)
    sqz = np.einsum("ij,ij->i", Zc, Zc)
    G = np.ascontiguousarray(Xc @ Zc.T)
    sqdist_cross_inplace(G, sqx, sqz)
    sqdist_refine_inplace(G, Xc, Zc, sqx, sqz, _REFINE_TAU)
    return G


def inner_products(X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
    r"""Inner products :math:`\langle x_i, z_j\rangle` by BLAS; exactly symmetric for ``Z=None``."""
    X = as_matrix(X)
    if Z is None:
        G = np.ascontiguousarray(X @ X.T)
        symmetrize_inplace(G)
        return G
    Zm = as_matrix(Z, "Z")
    if Zm.shape[1] != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but Z has {Zm.shape[1]}")
    return np.ascontiguousarray(X @ Zm.T)


def base_matrix(kind: str, X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
    """``squared_distances`` (``kind="sqdist"``) or ``inner_products`` (``"inner"``)."""
    if kind == "sqdist":
        return squared_distances(X, Z)
    if kind == "inner":
        return inner_products(X, Z)
    raise ValueError(f"base kind must be one of {', '.join(map(repr, BASES))}; got {kind!r}")


class BaseRows:
    """``rows(idx)``: ``base_matrix(kind, X[idx], X)`` (up to round-off), with ``X`` centred and its squared
    norms computed once (kernel columns in batches: pivoted Cholesky, Nyström)."""

    def __init__(self, kind: str, X: np.ndarray) -> None:
        if kind not in BASES:
            raise ValueError(f"base kind must be one of {', '.join(map(repr, BASES))}; got {kind!r}")
        self.kind = kind
        self.X = as_matrix(X)
        self._centred = kind == "sqdist" and self.X.shape[1] > _DIRECT_MAX_COLS
        # few columns: term by term against the transposed points (the values of squared_distances)
        self._Xt = (
            np.ascontiguousarray(self.X.T) if kind == "sqdist" and 1 < self.X.shape[1] <= _DIRECT_MAX_COLS else None
        )
        if self._centred:
            mu = self.X.mean(axis=0) if self.X.shape[0] else np.zeros(self.X.shape[1])
            self.Xc = np.ascontiguousarray(self.X - mu)
            self.sq = np.einsum("ij,ij->i", self.Xc, self.Xc)

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        """``(len(idx), N)`` base values of the points ``idx`` against all points."""
        if self._Xt is not None:
            D = np.empty((len(idx), self.X.shape[0]))
            sqdist_rows_t(np.ascontiguousarray(self.X[idx]), self._Xt, D)
            return D
        if not self._centred:
            return base_matrix(self.kind, np.ascontiguousarray(self.X[idx]), self.X)
        A = np.ascontiguousarray(self.Xc[idx])
        sqa = np.ascontiguousarray(self.sq[idx])
        G = np.ascontiguousarray(A @ self.Xc.T)
        sqdist_cross_inplace(G, sqa, self.sq)
        sqdist_refine_inplace(G, A, self.Xc, sqa, self.sq, _REFINE_TAU)
        return G


def base_diagonal(kind: str, X: np.ndarray) -> np.ndarray:
    """The diagonal of ``base_matrix(kind, X)`` without forming the matrix."""
    X = as_matrix(X)
    if kind == "sqdist":
        return np.zeros(X.shape[0])
    if kind == "inner":
        return np.einsum("ij,ij->i", X, X)
    raise ValueError(f"base kind must be one of {', '.join(map(repr, BASES))}; got {kind!r}")


class KernelFunction(Component):
    """Base class of kernel functions (component kind ``"kernel"``); ``uses``: the base matrix
    (``"sqdist"``, ``"inner"``) it is an elementwise function of, ``None`` when it overrides :meth:`gram`."""

    kind: ClassVar[str] = "kernel"
    uses: ClassVar[str | None] = None
    #: ``True``: the kernel reads its features as given (0/1 indicators, integer symbol codes), so they must
    #: not be standardised: ``standardize="auto"`` (estimators) and the default of a spec's ``data.standardize``
    #: then leave the data as it is, and asking for standardisation is an error naming the kernel.
    raw_input: ClassVar[bool] = False

    def gram(self, X: np.ndarray, Z: np.ndarray | None = None) -> np.ndarray:
        """Gram matrix :math:`k(x_i, z_j)` (n_X, n_Z) of dense float64 points restricted to this kernel's
        features; ``Z=None`` (or ``Z is X``): ``X`` against itself, exactly symmetric."""
        if self.uses is None:
            raise NotImplementedError(
                f"kernel function {self.name!r} must override gram() or set uses to "
                f"one of {', '.join(map(repr, BASES))}"
            )
        if Z is X:
            Z = None
        base = base_matrix(self.uses, X, Z)
        return self.from_base(base, out=base)

    def from_base(self, base: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Elementwise map from the base matrix (``uses``) to kernel values, of any shape, written into and
        returning ``out`` (``base`` itself, or another array: then ``base`` must not change)."""
        raise NotImplementedError(f"kernel function {self.name!r} does not implement from_base()")

    def array_values(self, base: Any, xp: Any) -> Any:
        """:meth:`from_base` on an array of any array-API library ``xp`` (a GPU's): a new array.  The
        built-ins write it with the namespace's functions; by default numpy arrays only (through
        :meth:`from_base`), so that a kernel function of a plugin factors on a device once it writes this."""
        if not isinstance(base, np.ndarray):
            raise NotImplementedError(
                f"kernel function {self.name!r} gives no array_values(base, xp): its kernels are not "
                "evaluated on a device (write it with the namespace's functions, as rbf does)"
            )
        return self.from_base(base, out=np.array(base, dtype=np.float64))

    def diag(self, X: np.ndarray) -> np.ndarray:
        """:math:`k(x_i, x_i)` for every row, shape (n,), without the full Gram matrix."""
        X = as_matrix(X)
        if self.uses is not None:
            d = base_diagonal(self.uses, X)
            return self.from_base(d, out=d)
        out = np.empty(X.shape[0])
        step = 256
        for start in range(0, X.shape[0], step):
            block = X[start : start + step]
            out[start : start + step] = np.diagonal(self.gram(block)).copy()
        return out

    def explicit_map(self, X: np.ndarray) -> Any:
        r"""The exact finite feature map :math:`\phi` with :math:`k(x, z) = \langle\phi(x), \phi(z)\rangle` for
        the training points ``X`` and any new points, or ``None`` (the default: none).

        A map is an object with ``dim`` (its dimension) and ``rows(A)``, the (dim, n) array or CSR matrix
        :math:`\phi(A)^\top`; factor banks use it as an exact factor when ``dim`` is small enough
        (``docs/factor_banks.md``).  It may drop coordinates that are zero on every training point.
        """
        return None

    def label(self) -> str:
        """Label such as ``rbf(width=0.5)`` or ``poly(degree=2,offset=0)``: the first parameter, and the
        others where they differ from their defaults."""
        shown = []
        for k, p in enumerate(self.params):
            v = self._param_values[p.name]
            if k == 0 or p.required or v != p.default:
                shown.append(f"{p.name}={_fmt(v)}")
        return f"{self.name}({','.join(shown)})" if shown else self.name


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class RBF(KernelFunction):
    r"""Gaussian kernel :math:`k(x, z) = \exp(-\|x - z\|^2 / (2\sigma^2))`, ``width`` :math:`\sigma` as in
    SimpleMKL and SpicyMKL §6 (scikit-learn's ``gamma = 1/(2σ²)``)."""

    name: ClassVar[str] = "rbf"
    description: ClassVar[str] = "Gaussian kernel exp(-||x-z||^2 / (2 width^2))"
    params: ClassVar[tuple[Param, ...]] = (
        Param("width", 1.0, "bandwidth sigma in exp(-||x-z||^2/(2 sigma^2))", low=0.0, low_open=True),
    )
    uses: ClassVar[str | None] = "sqdist"

    def from_base(self, base: np.ndarray, out: np.ndarray) -> np.ndarray:
        np.multiply(base, -0.5 / (self.width * self.width), out=out)
        np.exp(out, out=out)
        return out

    def array_values(self, base: Any, xp: Any) -> Any:
        return xp.exp(base * (-0.5 / (self.width * self.width)))

    def diag(self, X: np.ndarray) -> np.ndarray:
        return np.ones(as_matrix(X).shape[0])


class Poly(KernelFunction):
    r"""Polynomial kernel :math:`k(x, z) = (s\langle x, z\rangle + c)^p`."""

    name: ClassVar[str] = "poly"
    description: ClassVar[str] = "polynomial kernel (scale <x,z> + offset)^degree"
    params: ClassVar[tuple[Param, ...]] = (
        Param("degree", 2, "polynomial degree p", type=int, low=1),
        Param("offset", 1.0, "additive constant c >= 0", low=0.0),
        Param("scale", 1.0, "factor s > 0 on the inner product", low=0.0, low_open=True),
    )
    uses: ClassVar[str | None] = "inner"

    def from_base(self, base: np.ndarray, out: np.ndarray) -> np.ndarray:
        if self.scale == 1.0:
            np.add(base, self.offset, out=out)
        else:
            np.multiply(base, self.scale, out=out)
            np.add(out, self.offset, out=out)
        if self.degree == 2:
            np.square(out, out=out)
        elif self.degree > 2:
            np.power(out, float(self.degree), out=out)
        return out

    def array_values(self, base: Any, xp: Any) -> Any:
        return (base * self.scale + self.offset) ** int(self.degree)


class Linear(KernelFunction):
    r"""Linear kernel :math:`k(x, z) = \langle x, z\rangle`."""

    name: ClassVar[str] = "linear"
    description: ClassVar[str] = "linear kernel <x,z>"
    params: ClassVar[tuple[Param, ...]] = ()
    uses: ClassVar[str | None] = "inner"

    def from_base(self, base: np.ndarray, out: np.ndarray) -> np.ndarray:
        if out is not base:
            np.copyto(out, base)
        return out

    def array_values(self, base: Any, xp: Any) -> Any:
        return xp.asarray(base, copy=True)


#: The built-in kernel functions, registered by ``mklkit.builtin``.
BUILTIN_KERNEL_FUNCTIONS: tuple[type[KernelFunction], ...] = (RBF, Poly, Linear)
