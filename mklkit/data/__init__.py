"""Data sets: the bundled benchmarks of the SpicyMKL (Suzuki & Tomioka 2011, §6.1, §6.2) and SMO-MKL
(Vishwanathan et al. 2010, §6) experiments (sources and citations: ``mklkit/data/README.md``), file loaders,
splitting and scaling.  Labels are kept as given (float64); the bundled sets use ``+1`` / ``-1``.

>>> from mklkit.data import load_builtin, train_test_split, Standardizer
>>> train, test = train_test_split(load_builtin("sonar"), test_size=0.2, seed=0)
>>> X_train = Standardizer().fit(train.X).transform(train.X)
"""

from __future__ import annotations

from .builtin import available, load_builtin
from .dataset import DataError, Dataset
from .files import detect_format, load_file
from .preprocessing import Standardizer, train_test_split

__all__ = ["DataError", "Dataset", "available", "detect_format", "load_builtin", "load_file", "train_test_split"]
__all__ += ["Standardizer"]
