"""Data sets from files: CSV, NPZ and LIBSVM/svmlight text (``load_file``, ``detect_format``); every cell checked,
errors naming the file, the row and the column."""

from __future__ import annotations

import csv
import gzip
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from ..components.params import did_you_mean
from .dataset import DataError, Dataset

logger = logging.getLogger("mklkit.data")

_FORMATS = ("csv", "npz", "libsvm")
#: format of each file suffix (after a compression suffix .gz or .bz2)
_SUFFIXES = {".csv": "csv", ".npz": "npz", ".libsvm": "libsvm", ".svm": "libsvm", ".txt": "libsvm"}


def detect_format(path: str | os.PathLike[str], default: str | None = None) -> str:
    """File format from the name: ``"csv"``, ``"npz"`` or ``"libsvm"``.

    Compression suffixes (``.gz``, ``.bz2``) are ignored.  An unknown suffix returns ``default`` if given, else
    raises :class:`DataError`.
    """
    name = Path(path).name.lower().removesuffix(".gz").removesuffix(".bz2")
    fmt = next((f for suffix, f in _SUFFIXES.items() if name.endswith(suffix)), default)
    if fmt is None:
        raise DataError(
            f"{Path(path)}: cannot tell the file format from the name; use a name ending in .csv, .csv.gz, .npz, "
            ".libsvm, .svm or .txt (optionally .gz), or pass fmt='csv', 'npz' or 'libsvm'"
        )
    return fmt


def load_file(
    path: str | os.PathLike[str], target: str | int | None = None, fmt: str | None = None, n_features: int | None = None
) -> Dataset:
    """Load a data set from a file.

    Parameters
    ----------
    path : path-like
        CSV (``.csv``, ``.csv.gz``) with one header row; NPZ with arrays ``X`` and ``y`` (optionally
        ``feature_names``); LIBSVM/svmlight text (``.libsvm``, ``.svm``, ``.txt``, each optionally ``.gz``).
    target : str or int, optional
        CSV only: the label column, by name or 0-based index (default: the last column); every other column is a
        feature.
    fmt : {"csv", "npz", "libsvm"}, optional
        Overrides detection from the file name.
    n_features : int, optional
        LIBSVM only: number of columns (pass it: a test file may not use the highest index).  Default: the highest
        index in the file.

    Returns
    -------
    Dataset
        Dense float64 ``X`` for CSV/NPZ, ``scipy.sparse.csr_matrix`` for LIBSVM; ``name`` is the file stem,
        ``source`` the path.

    Raises
    ------
    DataError
        Missing file; unknown format; missing target column or NPZ array; ragged rows; non-numeric, NaN or infinite
        cells (the message names the file, the row and the column).
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: data file not found")
    if fmt is None:
        fmt = detect_format(p)
    elif fmt not in _FORMATS:
        raise DataError(f"{p}: fmt must be one of {', '.join(map(repr, _FORMATS))}; got {fmt!r}")
    if target is not None and fmt != "csv":
        raise DataError(f"{p}: target is only used for CSV files; got target={target!r} for a {fmt} file")
    if n_features is not None and fmt != "libsvm":
        raise DataError(f"{p}: n_features is only used for LIBSVM files; got n_features={n_features!r}")
    if fmt == "csv":
        X, y, names = _load_csv(p, target)
    elif fmt == "npz":
        X, y, names = _load_npz(p)
    else:
        X, y, names = _load_libsvm(p, n_features)
    logger.debug("loaded %s: %d rows, %d features", p, X.shape[0], X.shape[1])
    stem = p.name
    for suffix in (".gz", ".bz2", *_SUFFIXES):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    return Dataset(X=X, y=y, feature_names=names, name=stem, source=str(p))


def _target_column(path: Path, header: list[str], target: str | int | None) -> int:
    """The index of the CSV label column ``target`` (default: the last)."""
    ncol = len(header)
    if target is None:
        return ncol - 1
    if isinstance(target, bool) or not isinstance(target, (int, str)):
        raise DataError(f"{path}: target must be a column name or index; got {target!r}")
    if isinstance(target, int):
        if not -ncol <= target < ncol:
            raise DataError(
                f"{path}: target column index {target} is out of range; the file has {ncol} columns: "
                f"{', '.join(header)}"
            )
        return target % ncol
    if target not in header:
        raise DataError(
            f"{path}: no target column {target!r}{did_you_mean(target, header)}; columns: {', '.join(header)}"
        )
    return header.index(target)


def _load_csv(path: Path, target: str | int | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: cannot read as CSV text ({exc})") from None
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()  # trailing blank lines
    if not rows:
        raise DataError(f"{path}: empty file; a header row and at least one data row are needed")
    header, body = [h.strip() for h in rows[0]], rows[1:]
    if not body:
        raise DataError(f"{path}: no data rows below the header")
    ncol = len(header)
    if ncol < 2:
        raise DataError(
            f"{path}: the header has {ncol} column; at least one feature and one target column are needed "
            "(is the file comma-separated?)"
        )
    for r, row in enumerate(body):
        if len(row) != ncol:
            raise DataError(f"{path}: row {r + 1} (line {r + 2}) has {len(row)} cells; the header has {ncol}")
    t = _target_column(path, header, target)
    feat = [j for j in range(ncol) if j != t]
    names = [header[j] for j in feat]
    try:
        A = np.array(body, dtype=np.float64)
    except ValueError:
        A = None
    if A is None:  # class labels that are words: the features must still be numbers
        labels = np.array([row[t].strip() for row in body])
        cells = [[row[j] for j in feat] for row in body]
        try:
            F = np.array(cells, dtype=np.float64)
        except ValueError:
            _raise_bad_cell(path, cells, names)
        bad = next((r for r, v in enumerate(labels) if v == ""), None)
        if bad is not None:
            raise DataError(
                f"{path}: row {bad + 1} (line {bad + 2}), column {header[t]!r}: an empty cell; every row needs a label"
            )
        if any(_is_number(v) for v in labels):  # numbers with a stray word: a typo, not class names
            r = next(i for i, v in enumerate(labels) if not _is_number(v))
            raise DataError(
                f"{path}: row {r + 1} (line {r + 2}), column {header[t]!r}: non-numeric value {str(labels[r])!r}; "
                "the other labels are numbers (labels are all numbers or all words)"
            )
        _check_finite(path, F, names, line_offset=2)
        return np.ascontiguousarray(F), labels, names
    _check_finite(path, A, header, line_offset=2)
    return np.ascontiguousarray(A[:, feat]), np.ascontiguousarray(A[:, t]), names


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _raise_bad_cell(path: Path, body: list[list[str]], header: list[str]) -> None:
    for r, row in enumerate(body):
        for j, cell in enumerate(row):
            if not _is_number(cell):
                what = "an empty cell" if not cell.strip() else f"non-numeric value {cell!r}"
                raise DataError(
                    f"{path}: row {r + 1} (line {r + 2}), column {header[j]!r}: {what}; every cell must be a number"
                ) from None
    raise DataError(f"{path}: cannot convert the cells to numbers")  # pragma: no cover


def _check_finite(path: Path, A: np.ndarray, header: Sequence[str], line_offset: int | None) -> None:
    bad = ~np.isfinite(A)
    if bad.any():
        r, j = (int(v) for v in np.argwhere(bad)[0])
        line = f" (line {r + line_offset})" if line_offset is not None else ""
        raise DataError(
            f"{path}: row {r + 1}{line}, column {header[j]!r}: value {float(A[r, j])!r}; "
            "NaN and infinite values are not allowed"
        )


def _load_npz(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("X", "y") if k not in z.files]
            if missing:
                raise DataError(
                    f"{path}: missing array{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
                    f"the file has: {', '.join(z.files) or 'no arrays'}"
                )
            X, y = z["X"], z["y"]
            names = z["feature_names"] if "feature_names" in z.files else None
    except (OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{path}: cannot read as NPZ ({exc})") from None
    if X.ndim != 2:
        raise DataError(f"{path}: array 'X' must be 2-d (samples x features); got shape {X.shape}")
    if y.ndim != 1:
        raise DataError(f"{path}: array 'y' must be 1-d; got shape {y.shape}")
    if y.shape[0] != X.shape[0]:
        raise DataError(f"{path}: 'X' has {X.shape[0]} rows but 'y' has {y.shape[0]} entries")
    if X.shape[0] == 0:
        raise DataError(f"{path}: 'X' has no rows")
    words = y.dtype.kind in "US"  # class labels as strings
    for key, arr in (("X", X), ("y", y)):
        if not (key == "y" and words) and not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise DataError(f"{path}: array {key!r} must be numeric; got dtype {arr.dtype}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y.astype(str)) if words else np.ascontiguousarray(y, dtype=np.float64)
    feature_names = [f"x{j}" for j in range(X.shape[1])] if names is None else [str(v) for v in np.ravel(names)]
    if len(feature_names) != X.shape[1]:
        raise DataError(f"{path}: 'feature_names' has {len(feature_names)} entries but 'X' has {X.shape[1]} columns")
    _check_finite(path, X, [f"{n} (X column {j})" for j, n in enumerate(feature_names)], None)
    if not words:
        _check_finite(path, y[:, None], ["y"], None)
    return X, y, feature_names


def _load_libsvm(path: Path, n_features: int | None) -> tuple[sp.csr_matrix, np.ndarray, list[str]]:
    from sklearn.datasets import load_svmlight_file

    if n_features is not None and (
        isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1
    ):
        raise DataError(f"{path}: n_features must be an integer >= 1; got {n_features!r}")
    try:
        X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    except (ValueError, RuntimeError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read as LIBSVM text ({exc})") from None
    X = sp.csr_matrix(X, dtype=np.float64)
    if max(X.nnz, *X.shape) < np.iinfo(np.int32).max:  # scikit-learn's SVC takes 32-bit indices only
        X.indices = X.indices.astype(np.int32, copy=False)
        X.indptr = X.indptr.astype(np.int32, copy=False)
    X.sort_indices()
    if X.shape[0] == 0:
        raise DataError(f"{path}: no data rows")
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        k = int(bad[0])
        r, j = int(np.searchsorted(X.indptr, k, side="right") - 1), int(X.indices[k])
        raise DataError(
            f"{path}: row {r + 1}, column x{j} (index {j + 1}): value {float(X.data[k])!r}; "
            "NaN and infinite values are not allowed"
        )
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        r = int(bad[0])
        raise DataError(f"{path}: row {r + 1}, label: value {float(y[r])!r}; NaN and infinite labels are not allowed")
    return X, np.ascontiguousarray(y, dtype=np.float64), [f"x{j}" for j in range(X.shape[1])]
