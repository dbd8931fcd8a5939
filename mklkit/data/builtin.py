"""The bundled data sets (``available``, ``load_builtin``); ``mklkit/data/README.md`` gives their sources."""

from __future__ import annotations

from importlib import resources

from ..components.params import unknown_name
from .dataset import DataError, Dataset
from .files import load_file

_CSV = "sonar ionosphere liver pima wpbc wdbc wbc australian ringnorm twonorm waveform splice".split()
#: name -> (file name, n_features for LIBSVM files), in the order of the data README
_BUILTIN: dict[str, tuple[str, int | None]] = {
    **{name: (f"{name}.csv.gz", None) for name in _CSV},
    "a9a": ("a9a.libsvm.gz", 123),
    "a9a_test": ("a9a.t.libsvm.gz", 123),
    "w8a": ("w8a.libsvm.gz", 300),
}


def available() -> list[str]:
    """Names of the bundled data sets, in the order of the data README."""
    return list(_BUILTIN)


def load_builtin(name: str) -> Dataset:
    """Load a bundled data set by name.

    Parameters
    ----------
    name : str
        One of :func:`available`.  The CSV sets load dense; ``a9a``, ``a9a_test`` (123 features) and ``w8a`` (300
        features) load as CSR.

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
        raise DataError(unknown_name("builtin data set", name, available()))
    filename, n_features = _BUILTIN[name]
    with resources.as_file(resources.files(__package__).joinpath(filename)) as real:
        ds = load_file(real, n_features=n_features)
    ds.name = ds.source = name
    return ds
