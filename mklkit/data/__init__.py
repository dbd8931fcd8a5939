"""Data sets: the bundled benchmarks, file loaders, splitting and scaling.

The benchmark files of the SpicyMKL (Suzuki & Tomioka 2011, §6.1, §6.2) and
SMO-MKL (Vishwanathan et al. 2010, §6) experiments ship with the package; see
``mklkit/data/README.md`` for their sources, preprocessing and citations.

>>> from mklkit.data import load_builtin, train_test_split, Standardizer
>>> ds = load_builtin("sonar")
>>> train, test = train_test_split(ds, test_size=0.2, seed=0)
>>> scaler = Standardizer().fit(train.X)
>>> X_train, X_test = scaler.transform(train.X), scaler.transform(test.X)

Labels are kept as given (float64); the bundled sets use ``+1`` / ``-1``.
"""

from __future__ import annotations

from .builtin import available, load_builtin
from .dataset import DataError, Dataset
from .files import detect_format, load_file
from .preprocessing import Standardizer, train_test_split

__all__ = [
    "DataError",
    "Dataset",
    "available",
    "detect_format",
    "load_builtin",
    "load_file",
    "train_test_split",
    "Standardizer",
]
