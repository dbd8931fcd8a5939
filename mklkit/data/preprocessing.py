"""Splitting (``train_test_split``, stratified by default) and scaling (``Standardizer``) of data sets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from .dataset import DataError, Dataset


def train_test_split(
    ds: Dataset, test_size: float | int = 0.2, seed: int | None = 0, stratify: bool = True
) -> tuple[Dataset, Dataset]:
    """Random train/test split (scikit-learn's ``train_test_split``).

    Parameters
    ----------
    ds : Dataset
    test_size : float in (0, 1) or int >= 1
        Fraction or number of test rows.
    seed : int or None
        Random seed (``None``: not reproducible).
    stratify : bool
        Keep the class proportions of ``y`` in both parts (classification); ``False`` for regression targets.

    Returns
    -------
    (train, test) : tuple of Dataset
        Named ``<name>[train]`` and ``<name>[test]``.
    """
    from sklearn.model_selection import train_test_split as _split

    n = ds.n_samples
    fraction = isinstance(test_size, (float, np.floating))
    if (
        isinstance(test_size, bool)
        or not isinstance(test_size, (int, float, np.integer, np.floating))
        or (fraction and not 0.0 < float(test_size) < 1.0)
    ):
        raise DataError(f"{ds.name}: test_size must be a fraction in (0, 1) or a row count; got {test_size!r}")
    if not fraction and not 1 <= int(test_size) < n:
        raise DataError(f"{ds.name}: test_size must be a row count in [1, {n - 1}]; got {test_size!r}")
    if stratify:
        classes, counts = np.unique(ds.y, return_counts=True)
        if counts.min() < 2:
            raise DataError(
                f"{ds.name}: cannot stratify: class {classes[np.argmin(counts)]:g} has {counts.min()} row; every "
                "class needs at least 2 (use stratify=False for regression targets)"
            )
    try:
        tr, te = _split(np.arange(n), test_size=test_size, random_state=seed, stratify=ds.y if stratify else None)
    except ValueError as exc:
        raise DataError(f"{ds.name}: cannot split ({exc})") from None
    return _take(ds, tr, "train"), _take(ds, te, "test")


def _take(ds: Dataset, rows: np.ndarray, part: str) -> Dataset:
    X = ds.X[rows] if sp.issparse(ds.X) else np.ascontiguousarray(ds.X[rows])
    y = np.ascontiguousarray(ds.y[rows])
    return replace(ds, X=X, y=y, feature_names=list(ds.feature_names), name=f"{ds.name}[{part}]")


class Standardizer:
    """Per-feature scaling fitted on training data only.

    Dense input is centred and divided by the (population) standard deviation; sparse input is only divided and
    stays sparse (Gaussian kernels do not see centring, inner-product kernels do).  Columns constant on the
    training data get scale 1, so they map to 0 (dense) or stay unchanged (sparse), never to NaN.

    Attributes
    ----------
    mean_ : ndarray (n_features,)
        Subtracted column means (zeros for sparse input).
    scale_ : ndarray (n_features,)
        Column standard deviations (1 where a column is constant).
    sparse_ : bool
        Whether it was fitted on sparse input.
    """

    def __init__(self) -> None:
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        self.sparse_: bool = False

    def fit(self, X: Any, sample_weight: Any = None) -> "Standardizer":
        """Compute column means and scales of ``X`` (array, sparse or Dataset); with ``sample_weight`` (n,), those
        of the rows repeated by integer weights (scikit-learn's :class:`~sklearn.preprocessing.StandardScaler`)."""
        from sklearn.preprocessing import StandardScaler

        X = X.X if isinstance(X, Dataset) else X
        if X.shape[0] == 0:
            raise DataError("Standardizer.fit: X has no rows")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        self.sparse_ = bool(sp.issparse(X))
        A = sp.csr_matrix(X, dtype=np.float64) if self.sparse_ else _dense(X, "Standardizer.fit")
        stats = StandardScaler(with_mean=not self.sparse_).fit(A, sample_weight=w)
        std = np.sqrt(stats.var_)
        std[std <= 1e-12 * np.maximum(np.abs(stats.mean_), 1.0)] = 1.0
        self.mean_ = np.zeros(X.shape[1]) if self.sparse_ else stats.mean_
        self.scale_ = std
        return self

    def transform(self, X: Any) -> Any:
        """Scale ``X`` with the fitted statistics: a Dataset gives a Dataset, an array an array, sparse input CSR."""
        if self.scale_ is None or self.mean_ is None:
            raise DataError("Standardizer.transform: call fit() first")
        if isinstance(X, Dataset):
            return replace(X, X=self.transform(X.X), feature_names=list(X.feature_names))
        if X.shape[1] != self.scale_.shape[0]:
            raise DataError(
                f"Standardizer.transform: X has {X.shape[1]} columns; it was fitted on {self.scale_.shape[0]}"
            )
        if not sp.issparse(X):
            return np.ascontiguousarray((_dense(X, "Standardizer.transform") - self.mean_) / self.scale_)
        if not self.sparse_ and np.any(self.mean_ != 0):
            raise DataError(
                "Standardizer.transform: fitted on dense data (centring) but given a sparse matrix; fit on sparse "
                "data or densify"
            )
        out = sp.csr_matrix(X, dtype=np.float64, copy=True)
        out.data /= self.scale_[out.indices]
        return out

    def fit_transform(self, X: Any) -> Any:
        """``fit(X).transform(X)``."""
        return self.fit(X).transform(X)


def _dense(X: Any, where: str) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise DataError(f"{where}: X must be 2-d (samples x features); got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        r, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
        raise DataError(f"{where}: X[{r}, {j}] is {float(A[r, j])!r}; NaN and infinite values are not allowed")
    return A
