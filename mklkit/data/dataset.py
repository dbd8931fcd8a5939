"""A labelled data set (``Dataset``) and the error of data that cannot be used (``DataError``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


class DataError(ValueError):
    """A data file or data set that cannot be used; the message names it."""


@dataclass(eq=False)
class Dataset:
    """A labelled data set.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features) or scipy.sparse.csr_matrix
        Features, float64 (LIBSVM files stay sparse).
    y : ndarray of shape (n_samples,)
        Labels (or regression targets), float64; class labels that are not numbers stay strings.
    feature_names : list of str
        One name per column of ``X``.
    name : str
        Short name (the builtin name or the file stem).
    source : str
        The file path, or the builtin name.
    """

    X: np.ndarray | sp.csr_matrix = field(repr=False)
    y: np.ndarray = field(repr=False)
    feature_names: list[str] = field(repr=False)
    name: str = ""
    source: str = ""

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns."""
        return int(self.X.shape[1])

    @property
    def is_sparse(self) -> bool:
        """True when ``X`` is a sparse matrix."""
        return sp.issparse(self.X)

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n_samples={self.n_samples}, n_features={self.n_features}, "
            f"sparse={self.is_sparse}, source={self.source!r})"
        )
