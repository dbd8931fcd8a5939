"""The bundled data sets (``available``, ``load_builtin``); ``mklkit/data/README.md`` gives their sources."""

from __future__ import annotations

from importlib import resources

from ..components.params import did_you_mean
from .dataset import DataError, Dataset
from .files import load_file

#: name -> (file name, format, n_features for LIBSVM files)
_BUILTIN: dict[str, tuple[str, str, int | None]] = {
    "sonar": ("sonar.csv.gz", "csv", None),
    "ionosphere": ("ionosphere.csv.gz", "csv", None),
    "liver": ("liver.csv.gz", "csv", None),
    "pima": ("pima.csv.gz", "csv", None),
    "wpbc": ("wpbc.csv.gz", "csv", None),
    "wdbc": ("wdbc.csv.gz", "csv", None),
    "wbc": ("wbc.csv.gz", "csv", None),
    "australian": ("australian.csv.gz", "csv", None),
    "ringnorm": ("ringnorm.csv.gz", "csv", None),
    "twonorm": ("twonorm.csv.gz", "csv", None),
    "waveform": ("waveform.csv.gz", "csv", None),
    "splice": ("splice.csv.gz", "csv", None),
    "a9a": ("a9a.libsvm.gz", "libsvm", 123),
    "a9a_test": ("a9a.t.libsvm.gz", "libsvm", 123),
    "w8a": ("w8a.libsvm.gz", "libsvm", 300),
}


def available() -> list[str]:
    """Names of the bundled data sets, in the order of the data README."""
    return list(_BUILTIN)


def load_builtin(name: str) -> Dataset:
    """Load a bundled data set by name.

    Parameters
    ----------
    name : str
        One of :func:`available`.  The CSV sets load dense; ``a9a``,
        ``a9a_test`` (123 features) and ``w8a`` (300 features) load as CSR.

    Returns
    -------
    Dataset
        ``source`` is the builtin name.

    Raises
    ------
    DataError
        For an unknown name (with a did-you-mean and the list of names).
    """
    if name not in _BUILTIN:
        names = available()
        raise DataError(
            f"unknown builtin data set {name!r}{did_you_mean(str(name), names)}; available: {', '.join(names)}"
        )
    filename, fmt, n_features = _BUILTIN[name]
    path = resources.files(__package__).joinpath(filename)
    with resources.as_file(path) as real:
        ds = load_file(real, fmt=fmt, n_features=n_features)
    ds.name = name
    ds.source = name
    return ds
