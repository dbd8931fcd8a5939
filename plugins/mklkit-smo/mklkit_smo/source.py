r"""Kernel sources: where the SMO-MKL engine gets its kernel rows.

A step of SMO-MKL needs two rows :math:`K_k(x_i, \cdot)` of every kernel and
the diagonals :math:`K_k(x_j, x_j)`.  They come from one of two sources:

* the precomputed bank ``Problem.K`` (M, N, N) -- the default;
* a :class:`FeatureKernels` object placed in ``problem.extra["kernel_source"]``,
  which computes the rows on demand from the features and the kernel
  descriptions of :mod:`mklkit.kernels` (``rbf``, ``poly``, ``linear`` on any
  feature subsets, the ``kernels.bank`` vocabulary and presets), normalised
  exactly like :meth:`mklkit.kernels.KernelBank.build`.  The engine keeps the
  most recently used rows in an LRU cache (engine option ``cache_mb``), the
  scheme of LibSVM.  With a kernel source ``Problem.K`` may be the empty
  array of shape (0, N, N) (:meth:`FeatureKernels.problem` makes one).

Rows are computed by jitted code: for every group of kernels sharing a
feature subset, one sparse pass gives the inner products
:math:`\langle x_i, x_j\rangle_S` (and the squared distances through the
squared norms), then each kernel of the group maps them elementwise.  Dense
and sparse (CSR, e.g. LIBSVM files) features are both stored column-wise.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from mklkit.kernels import RBF, BankKernel, Linear, Poly, expand_bank

__all__ = ["KernelSource", "FeatureKernels", "SUPPORTED_FUNCTIONS"]

#: Kernel functions that :class:`FeatureKernels` evaluates on the fly.
SUPPORTED_FUNCTIONS = ("rbf", "poly", "linear")

_NORMALIZE = ("trace", "diagonal", "none")


class KernelSource:
    """Base class of kernel sources handed to the engine in ``problem.extra["kernel_source"]``.

    Attributes
    ----------
    n_kernels, n_samples : int
    names : list of str
    """

    n_kernels: int
    n_samples: int
    names: list[str]

    def diag(self) -> np.ndarray:
        """:math:`K_k(x_j, x_j)` of every kernel, shape (M, N)."""
        raise NotImplementedError


class FeatureKernels(KernelSource):
    r"""Kernels computed on the fly from features.

    Parameters
    ----------
    X : ndarray (N, D), scipy.sparse matrix or :class:`mklkit.data.Dataset`
        Training points (NaN and inf are refused).
    bank : list of entries, preset name, or list of :class:`mklkit.kernels.BankKernel`
        The kernels, in the ``kernels.bank`` vocabulary of
        :func:`mklkit.kernels.expand_bank` (e.g. ``"smomkl"`` or
        ``[{"function": "rbf", "width": [1, 2], "features": "each"}]``).
        Only ``rbf``, ``poly`` and ``linear`` can be computed on the fly.
    normalize : {"trace", "diagonal", "none"}
        As :meth:`mklkit.kernels.KernelBank.build`: ``"trace"`` divides
        :math:`K_k` by its trace on the training points.
    feature_names : sequence of str, optional
        Column names for name-based ``features`` entries and labels.

    Examples
    --------
    >>> src = FeatureKernels(X, "smomkl")                       # doctest: +SKIP
    >>> problem = src.problem(y, loss, regularizer, C=0.01)     # doctest: +SKIP
    >>> result = SmoMKL(cache_mb=1024).solve(problem)          # doctest: +SKIP
    >>> f = src.decision_function(result, X_test)              # doctest: +SKIP
    """

    def __init__(self, X: Any, bank: Any, normalize: str = "trace", feature_names: Sequence[str] | None = None) -> None:
        if normalize not in _NORMALIZE:
            raise ValueError(f"normalize must be one of {', '.join(map(repr, _NORMALIZE))}; got {normalize!r}")
        if hasattr(X, "X") and hasattr(X, "feature_names"):  # a Dataset
            if feature_names is None:
                feature_names = list(X.feature_names)
            X = X.X
        Xr = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else sp.csr_matrix(np.asarray(X, dtype=np.float64))
        if Xr.ndim != 2 or Xr.shape[0] < 1 or Xr.shape[1] < 1:
            raise ValueError(f"X must be a non-empty 2-d array; got shape {Xr.shape}")
        if not np.all(np.isfinite(Xr.data)):
            raise ValueError("X contains NaN or infinite values")
        Xr.sort_indices()
        N, D = Xr.shape
        if isinstance(bank, (list, tuple)) and bank and all(isinstance(s, BankKernel) for s in bank):
            specs = list(bank)
        else:
            specs = expand_bank(bank, D, feature_names)
        for m, s in enumerate(specs):
            if not isinstance(s.function, (RBF, Poly, Linear)):
                raise ValueError(
                    f"kernel {m} {s.label!r}: the function {s.function.name!r} cannot be computed "
                    f"on the fly; supported: {', '.join(SUPPORTED_FUNCTIONS)} (precompute the bank "
                    "and pass it as Problem.K instead)"
                )
            if any(f < 0 or f >= D for f in s.features):
                raise ValueError(f"kernel {m} {s.label!r} uses a column outside [0, {D - 1}]")
        self.specs = specs
        self.names = [s.label for s in specs]
        self.normalize = normalize
        self.n_samples = int(N)
        self.n_features = int(D)
        self.n_kernels = len(specs)
        self._Xr = Xr
        Xc = Xr.tocsc()
        Xc.sort_indices()
        self._build_program(Xr, Xc)

    # -- construction ---------------------------------------------------------
    def _build_program(self, Xr: sp.csr_matrix, Xc: sp.csc_matrix) -> None:
        N = self.n_samples
        groups: dict[tuple[int, ...], int] = {}
        feats: list[tuple[int, ...]] = []
        k_group = np.empty(self.n_kernels, dtype=np.int64)
        for m, s in enumerate(self.specs):
            key = tuple(sorted(int(f) for f in s.features))
            g = groups.get(key)
            if g is None:
                g = groups[key] = len(feats)
                feats.append(key)
            k_group[m] = g
        G = len(feats)
        g_fptr = np.zeros(G + 1, dtype=np.int64)
        g_fptr[1:] = np.cumsum([len(f) for f in feats])
        g_feat = np.ascontiguousarray(np.concatenate([np.asarray(f, dtype=np.int64) for f in feats]))
        member = sp.csc_matrix((np.ones(g_feat.size), g_feat, g_fptr), shape=(self.n_features, G))
        g_sqn = np.asarray((Xr.multiply(Xr) @ member).T.todense(), dtype=np.float64)
        k_fam = np.empty(self.n_kernels, dtype=np.int64)
        k_par = np.zeros((self.n_kernels, 4))
        raw = np.empty((self.n_kernels, N))
        for m, s in enumerate(self.specs):
            fn = s.function
            sqn = g_sqn[k_group[m]]
            if isinstance(fn, RBF):
                k_fam[m] = 0
                k_par[m, 0] = -0.5 / (fn.width * fn.width)
                raw[m] = 1.0
            elif isinstance(fn, Poly):
                k_fam[m] = 1
                k_par[m, :3] = (fn.scale, fn.offset, float(fn.degree))
                raw[m] = (fn.scale * sqn + fn.offset) ** fn.degree
            else:
                k_fam[m] = 2
                raw[m] = sqn
        k_pn = np.empty((0, 0))
        if self.normalize == "trace":
            tr = raw.sum(axis=1)
            bad = np.flatnonzero(~(tr > 0))
            if bad.size:
                m = int(bad[0])
                raise ValueError(
                    f"kernel {m} {self.names[m]!r} has trace {tr[m]!r}; unit-trace normalisation needs a positive trace"
                )
            k_par[:, 3] = 1.0 / tr
            self.traces = tr
            diag = raw / tr[:, None]
        elif self.normalize == "diagonal":
            bad = np.argwhere(~(raw > 0))
            if bad.size:
                m, i = (int(v) for v in bad[0])
                raise ValueError(
                    f"kernel {m} {self.names[m]!r} has K[{i}, {i}] = {raw[m, i]!r}; "
                    "unit-diagonal normalisation needs a positive diagonal"
                )
            k_par[:, 3] = 1.0
            k_pn = np.ascontiguousarray(1.0 / np.sqrt(raw))
            self.traces = raw.sum(axis=1)
            diag = np.ones_like(raw)
        else:
            k_par[:, 3] = 1.0
            self.traces = raw.sum(axis=1)
            diag = raw
        self._diag = np.ascontiguousarray(diag)
        self.program = {
            "xr_ptr": np.ascontiguousarray(Xr.indptr, dtype=np.int64),
            "xr_idx": np.ascontiguousarray(Xr.indices, dtype=np.int64),
            "xr_val": np.ascontiguousarray(Xr.data, dtype=np.float64),
            "xc_ptr": np.ascontiguousarray(Xc.indptr, dtype=np.int64),
            "xc_idx": np.ascontiguousarray(Xc.indices, dtype=np.int64),
            "xc_val": np.ascontiguousarray(Xc.data, dtype=np.float64),
            "g_fptr": g_fptr,
            "g_feat": g_feat,
            "g_sqn": np.ascontiguousarray(g_sqn),
            "k_group": k_group,
            "k_fam": k_fam,
            "k_par": np.ascontiguousarray(k_par),
            "k_pn": k_pn,
        }
        self.n_groups = G

    # -- what the engine reads --------------------------------------------------
    def diag(self) -> np.ndarray:
        """:math:`K_k(x_j, x_j)` after normalisation, shape (M, N)."""
        return self._diag

    @property
    def row_bytes(self) -> int:
        """Bytes of one cached row (all kernels): ``8 M N``."""
        return 8 * self.n_kernels * self.n_samples

    def workspace(self) -> tuple[np.ndarray, np.ndarray]:
        """Scratch arrays for the jitted row computation: ``xi`` (D,) and ``acc`` (G, N)."""
        return np.zeros(self.n_features), np.zeros((self.n_groups, self.n_samples))

    def feature_rows(self) -> Any:
        """The record (:class:`mklkit_smo._records.FeatureRows`) the jitted row computation
        takes: :attr:`program` and a new :meth:`workspace`."""
        from ._records import FeatureRows, check_record

        xi, acc = self.workspace()
        return check_record(FeatureRows(**self.program, xi=xi, acc=acc))

    def rows(self, indices: Sequence[int], parallel: bool = False) -> np.ndarray:
        """Kernel rows :math:`K_k(x_i, \\cdot)` for the given points, shape (len, M, N)."""
        from ._smo import compute_row

        idx = np.asarray(indices, dtype=np.int64).ravel()
        out = np.empty((idx.size, self.n_kernels, self.n_samples))
        rows = self.feature_rows()
        for r, i in enumerate(idx):
            if not 0 <= i < self.n_samples:
                raise IndexError(f"row {i} outside [0, {self.n_samples - 1}]")
            compute_row(int(i), bool(parallel), rows, out[r])
        return out

    def gram(self) -> np.ndarray:
        """The whole bank (M, N, N) -- for small problems and tests."""
        return np.ascontiguousarray(np.transpose(self.rows(range(self.n_samples)), (1, 0, 2)))

    # -- predictions ------------------------------------------------------------
    def cross_apply(self, X_new: Any, coef: np.ndarray, block: int = 2048) -> np.ndarray:
        r""":math:`\sum_k K_k(X_{new}, X)\,coef_k` without forming the test kernels.

        ``coef`` has shape (M, N) (the ``alpha`` of a
        :class:`~mklkit.result.SolveResult`).  Test kernels get the training
        normalisation (the test points' own :math:`k(x, x)` for ``"diagonal"``).
        """
        coef = np.asarray(coef, dtype=np.float64)
        if coef.shape != (self.n_kernels, self.n_samples):
            raise ValueError(f"coef must have shape ({self.n_kernels}, {self.n_samples}); got {coef.shape}")
        Xn = (
            sp.csr_matrix(X_new, dtype=np.float64)
            if sp.issparse(X_new)
            else sp.csr_matrix(np.asarray(X_new, dtype=np.float64))
        )
        if Xn.shape[1] != self.n_features:
            raise ValueError(f"X_new has {Xn.shape[1]} columns; the training data has {self.n_features}")
        out = np.zeros(Xn.shape[0])
        active = [m for m in range(self.n_kernels) if np.any(coef[m] != 0.0)]
        if not active:
            return out
        p = self.program
        by_group: dict[int, list[int]] = {}
        for m in active:
            by_group.setdefault(int(p["k_group"][m]), []).append(m)
        Xt = self._Xr
        for g, ms in by_group.items():
            cols = p["g_feat"][p["g_fptr"][g] : p["g_fptr"][g + 1]]
            A = Xt[:, cols]
            sqa = p["g_sqn"][g]
            for start in range(0, Xn.shape[0], block):
                B = Xn[start : start + block][:, cols]
                inner = np.asarray((B @ A.T).todense())
                sqb = np.asarray(B.multiply(B).sum(axis=1)).ravel()
                for m in ms:
                    fam = int(p["k_fam"][m])
                    par = p["k_par"][m]
                    if fam == 0:
                        dist = np.maximum(sqb[:, None] + sqa[None, :] - 2.0 * inner, 0.0)
                        Km = np.exp(par[0] * dist)
                        raw_b = np.ones(B.shape[0])
                    elif fam == 1:
                        Km = (par[0] * inner + par[1]) ** int(par[2])
                        raw_b = (par[0] * sqb + par[1]) ** int(par[2])
                    else:
                        Km = inner.copy()
                        raw_b = sqb
                    Km *= par[3]
                    if self.normalize == "diagonal":
                        Km *= (1.0 / np.sqrt(raw_b))[:, None] * p["k_pn"][m][None, :]
                    out[start : start + block] += Km @ coef[m]
        return out

    def decision_function(self, result: Any, X_new: Any) -> np.ndarray:
        r"""Predictions :math:`\sum_k K_k(x, X)\alpha_k + b` of a result on new points."""
        return self.cross_apply(X_new, result.alpha) + float(result.bias)

    def problem(self, y: Any, loss: Any, regularizer: Any, C: float, bias: bool = True, **extra: Any) -> Any:
        """A :class:`mklkit.problem.Problem` whose kernels come from this source.

        ``Problem.K`` is the empty (0, N, N) array; the engine reads the rows
        from ``problem.extra["kernel_source"]``.
        """
        from mklkit.problem import Problem

        return Problem(
            K=np.empty((0, self.n_samples, self.n_samples)),
            y=y,
            loss=loss,
            regularizer=regularizer,
            C=C,
            bias=bias,
            kernel_names=list(self.names),
            extra={"kernel_source": self, **extra},
        )

    def __repr__(self) -> str:
        return (
            f"FeatureKernels(n_kernels={self.n_kernels}, n_samples={self.n_samples}, "
            f"n_groups={self.n_groups}, normalize={self.normalize!r})"
        )
