r"""Kernel banks: the normalised Gram matrices of a description in one contiguous (M, N, N) float64 array.

Normalisation: ``"trace"`` (SpicyMKL §6.1) :math:`K_m / \operatorname{tr}(K_m)`; ``"diagonal"``
:math:`K_{m,ij} / \sqrt{K_{m,ii} K_{m,jj}}`; ``"none"``.  The constants are kept, and
:meth:`KernelBank.cross` applies the same transform to test kernels.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .._jit.gram import divide_outer_inplace
from ..data import Dataset
from .description import BankError, BankKernel, Resolver, _check_normalize, expand_bank
from .fill import _dense_columns, _fill, _localizer
from .memory import MemoryBudgetError, _check_budget, estimate_bytes, estimate_peak_bytes, format_bytes
from .precomputed import _normalize_bank, bank_from_precomputed, precomputed_from_npz

__all__ = ["KernelBank", "MemoryBudgetError", "estimate_bytes", "estimate_peak_bytes", "format_bytes"]

logger = logging.getLogger(__name__)


def _shape_of(X: Any) -> tuple[int, ...]:
    return tuple(X.shape) if hasattr(X, "shape") else np.shape(X)


def _training_points(X: Any, feature_names: Sequence[str] | None) -> tuple[Any, int, int, list[str] | None]:
    """``X`` (unwrapped from a :class:`Dataset`) checked 2-d and non-empty, ``N``, ``d``, the feature names."""
    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    shape = _shape_of(X)
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise BankError(f"X must be a non-empty 2-d array (samples x features); got shape {shape}")
    N, d = int(shape[0]), int(shape[1])
    if feature_names is not None:
        feature_names = [str(n) for n in feature_names]
    return X, N, d, feature_names


@dataclass(eq=False)
class KernelBank:
    """A bank of ``M`` Gram matrices on ``N`` training points.

    Build one with :meth:`build`, :meth:`from_precomputed` or :meth:`from_npz`.

    Attributes
    ----------
    K : ndarray (M, N, N)
        C-contiguous float64, each ``K[m]`` exactly symmetric, normalised.
    names : list of str
        One label per kernel, e.g. ``rbf(width=0.5)[x3]``.
    specs : list of BankKernel or None
        The kernels (``None`` for precomputed banks).
    normalize : {"trace", "diagonal", "none"}
    traces : ndarray (M,)
        ``trace(K_m)`` before normalisation.
    train_diag : ndarray (M, N) or None
        ``diag(K_m)`` before normalisation (``"diagonal"``).
    feature_names : list of str or None
    """

    K: np.ndarray
    names: list[str]
    specs: list[BankKernel] | None
    normalize: str
    traces: np.ndarray
    train_diag: np.ndarray | None
    _X_train: np.ndarray | None = None
    _columns: np.ndarray | None = None
    _n_features: int | None = None
    feature_names: list[str] | None = None
    source: str = ""

    @property
    def n_kernels(self) -> int:
        """M."""
        return int(self.K.shape[0])

    @property
    def n_samples(self) -> int:
        """N."""
        return int(self.K.shape[1])

    @property
    def nbytes(self) -> int:
        """Bytes held by ``K``."""
        return int(self.K.nbytes)

    def __len__(self) -> int:
        return self.n_kernels

    def __repr__(self) -> str:
        return (
            f"KernelBank(n_kernels={self.n_kernels}, n_samples={self.n_samples}, "
            f"normalize={self.normalize!r}, {format_bytes(self.nbytes)})"
        )

    @classmethod
    def build(
        cls,
        X: Any,
        entries_or_preset: Any,
        normalize: str = "trace",
        memory_budget_bytes: float | None = None,
        progress: bool | None = None,
        resolve: Resolver | Mapping[str, type] | None = None,
        feature_names: Sequence[str] | None = None,
        root: str = "bank",
    ) -> "KernelBank":
        """Compute and normalise all Gram matrices of a bank description.

        Parameters
        ----------
        X : ndarray (N, d), scipy.sparse matrix or Dataset
            Training points (sparse input is densified, restricted to the columns the bank uses).
        entries_or_preset : list of entries or str
            Bank description or preset name.
        normalize : {"trace", "diagonal", "none"}
        memory_budget_bytes : float, optional
            Refuse (``BankError``) when :func:`estimate_bytes` exceeds it (default 4 GiB).
        progress : callable, optional
            ``progress(event)`` with ``what``, ``done``, ``total`` and ``elapsed_s``.
        resolve : callable or mapping, optional
            Kernel-function lookup (default: built-ins).
        feature_names : sequence of str, optional
            Column names (default: the Dataset's, else ``x0 .. x(d-1)``).
        root : str
            Prefix of key paths in description errors.
        """
        normalize = _check_normalize(normalize)
        X, N, d, feature_names = _training_points(X, feature_names)
        specs = expand_bank(entries_or_preset, d, feature_names, resolve, root=root)
        M = len(specs)
        _check_budget(M, N, N, memory_budget_bytes, "kernel bank")
        bank = cls.for_cross(X, specs, normalize, np.empty(M), None, feature_names)
        t0 = time.perf_counter()
        K = np.empty((M, N, N), dtype=np.float64)
        _fill(K, specs, _localizer(bank._columns, d), bank._X_train, None, "building kernel bank", progress)
        labels = [f"kernel {m} {s.label!r}" for m, s in enumerate(specs)]
        bank.traces, bank.train_diag = _normalize_bank(K, labels, normalize, built=True)
        bank.K = K
        logger.info(
            "built %d kernels on %d samples (%s, normalize=%s) in %.2f s",
            M,
            N,
            format_bytes(K.nbytes),
            normalize,
            time.perf_counter() - t0,
        )
        return bank

    @classmethod
    def for_cross(
        cls,
        X: Any,
        specs: Sequence[BankKernel],
        normalize: str,
        traces: np.ndarray,
        train_diag: np.ndarray | None = None,
        feature_names: Sequence[str] | None = None,
    ) -> "KernelBank":
        """A bank without Gram matrices (``K`` empty (M, N, 0)) that computes :meth:`cross` for the kernels
        ``specs`` built elsewhere on ``X``, with their ``traces`` (and ``train_diag``)."""
        normalize = _check_normalize(normalize)
        shape = _shape_of(X)
        N, d = int(shape[0]), int(shape[1])
        columns = np.unique(np.concatenate([np.asarray(s.features, dtype=np.intp) for s in specs]))
        XA = _dense_columns(X, columns, "X")
        fnames = list(feature_names) if feature_names is not None else [f"x{j}" for j in range(d)]
        traces = np.asarray(traces, dtype=np.float64)
        names = [s.label for s in specs]
        K = np.empty((len(specs), N, 0))
        return cls(K, names, list(specs), normalize, traces, train_diag, XA, columns, d, fnames, source="data")

    def cross(self, X_new: Any, memory_budget_bytes: float | None = None, progress: bool | None = None) -> np.ndarray:
        """Test-versus-training kernels (M, N_new, N) of ``X_new`` with the training normalisation.

        ``"diagonal"`` divides by the new points' own :math:`\\sqrt{k_m(x, x)}` (a zero row where it is 0);
        ``bank.cross(X_train)`` reproduces ``bank.K`` up to round-off.
        """
        if self.specs is None or self._X_train is None or self._columns is None:
            raise BankError(
                f"this bank was loaded from precomputed kernels ({self.source}); it has no "
                "training points to compute cross kernels from: use the precomputed test kernels"
            )
        if isinstance(X_new, Dataset):
            X_new = X_new.X
        shape = _shape_of(X_new)
        if len(shape) != 2 or shape[1] != self._n_features:
            raise BankError(f"X_new must have shape (n, {self._n_features}) like the training data; got {shape}")
        n_new, N, M = int(shape[0]), self.n_samples, self.n_kernels
        _check_budget(M, N, n_new, memory_budget_bytes, "cross-kernel bank")
        XB = _dense_columns(X_new, self._columns, "X_new")
        local = _localizer(self._columns, self._n_features)
        C = np.empty((M, n_new, N), dtype=np.float64)
        _fill(C, self.specs, local, XB, self._X_train, "computing test kernels", progress)
        if self.normalize != "diagonal":
            return self.normalize_cross(C)
        for m, spec in enumerate(self.specs):
            dnew = np.asarray(spec.function.diag(np.ascontiguousarray(XB[:, local(spec.features)])), dtype=np.float64)
            self._divide_diag(C[m], dnew, self.train_diag[m], m)  # type: ignore[index]
        return C

    def _divide_diag(self, Cm: np.ndarray, dnew: np.ndarray, dtrain: np.ndarray, m: int) -> None:
        if dnew.shape != (Cm.shape[0],) or not np.all(np.isfinite(dnew)) or np.any(dnew < 0):
            raise BankError(f"kernel {m} {self.names[m]!r}: k(x, x) of the new points must be finite and >= 0")
        s_new = np.sqrt(dnew)
        zero = s_new == 0.0
        s_new[zero] = 1.0
        divide_outer_inplace(Cm, s_new, np.sqrt(dtrain))
        Cm[zero] = 0.0

    def weight_traces(self, sample_weight: np.ndarray) -> None:
        r"""Make ``"trace"`` normalisation weighted, :math:`K_m / \sum_i w_i k_m(x_i, x_i)`, in place (the
        test kernels follow)."""
        if self.normalize != "trace":
            return
        w = np.asarray(sample_weight, dtype=np.float64)
        tau = np.einsum("mii,i->m", self.K, w)
        self.K /= tau[:, None, None]
        self.traces = np.asarray(self.traces, dtype=np.float64) * tau

    def normalize_cross(self, C: np.ndarray, test_diag: np.ndarray | None = None) -> np.ndarray:
        """Apply this bank's normalisation to raw test kernels ``C`` (M, N_new, N) in place and return it
        (``"diagonal"`` needs ``test_diag`` (M, N_new), the test points' :math:`k_m(x, x)`)."""
        if not isinstance(C, np.ndarray) or C.dtype != np.float64 or not C.flags.c_contiguous:
            raise BankError("test kernels must be a C-contiguous float64 array (they are normalised in place)")
        if C.ndim != 3 or C.shape[0] != self.n_kernels or C.shape[2] != self.n_samples:
            raise BankError(f"test kernels must have shape ({self.n_kernels}, n_test, {self.n_samples}); got {C.shape}")
        if self.normalize == "trace":
            C /= self.traces[:, None, None]
        elif self.normalize == "diagonal":
            if test_diag is None or np.shape(test_diag) != (C.shape[0], C.shape[1]):
                raise BankError(
                    f"unit-diagonal normalisation of test kernels needs test_diag of shape "
                    f"({C.shape[0]}, {C.shape[1]}); got {None if test_diag is None else np.shape(test_diag)}"
                )
            assert self.train_diag is not None
            for m in range(C.shape[0]):
                self._divide_diag(C[m], np.array(test_diag[m], dtype=np.float64), self.train_diag[m], m)
        return C

    from_precomputed = classmethod(bank_from_precomputed)
    from_npz = classmethod(precomputed_from_npz)
