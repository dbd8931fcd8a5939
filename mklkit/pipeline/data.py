"""Data of the pipeline: loading, label checks, splitting, standardizing, folds."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..components.params import did_you_mean
from ..plugins import get_registry
from .errors import FACTOR_NPZ_ALLOWED, NPZ_ALLOWED, PipelineError, one_line, strip_prefix
from .settings import CVSettings, BankSettings, DataSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------
@dataclass
class Data:
    """Training/test data after loading, label checks, splitting and scaling.

    Feature data: ``X_train``/``X_test``.  Precomputed kernels: ``K_train``
    (M, N, N) and ``K_test`` (M, N_test, N), raw or normalised
    (``normalized``), ``X_*`` are ``None``.  Precomputed factors: ``X_train``
    (N, R) and ``X_test`` (N_test, R) are their raw rows, laid out by
    ``factor_starts`` (M + 1,), never standardized.  ``X_test``/``K_test``/``y_test``
    are ``None`` without a test part.
    """

    X_train: Any
    y_train: np.ndarray
    X_test: Any
    y_test: np.ndarray | None
    feature_names: list[str]
    name: str
    task: str
    K_train: np.ndarray | None = None
    K_test: np.ndarray | None = None
    kernel_names: list[str] | None = None
    n_total: int = 0
    #: ``K_test_diag`` of precomputed kernels (the test points' own k(x, x)).
    test_diag: np.ndarray | None = None
    #: whether ``K_train``/``K_test`` are already normalised.
    normalized: bool = False
    #: the Standardizer applied to ``X_*`` (``None``: not standardized).
    scaler: Any = None
    #: column offsets of the kernels in the rows of precomputed factors (``X_*``); ``None`` otherwise.
    factor_starts: np.ndarray | None = None
    #: classification: the distinct labels as the data give them, in sorted order; ``None`` for regression.
    #: Two classes: ``y_*`` are +1 for ``classes[positive]`` and -1 for the other.  More: ``y_*`` are
    #: the class indices 0 .. K-1 (float64), solved one-vs-rest (:attr:`mklkit.pipeline.Prepared.tasks`).
    classes: np.ndarray | None = None
    #: the index into ``classes`` of the positive class (+1) of two classes; ``None`` otherwise.
    positive: int | None = None
    #: per-sample weights > 0 of the training rows (``Problem.sample_weight``); ``None``: unweighted.
    w_train: np.ndarray | None = None
    #: the weight of each class of ``classes`` (``data.class_weight``); ``None`` without it.
    class_weights: np.ndarray | None = None

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_test(self) -> int:
        return 0 if self.y_test is None else int(self.y_test.shape[0])

    @property
    def n_features(self) -> int:
        return 0 if self.X_train is None else int(self.X_train.shape[1])

    @property
    def precomputed(self) -> bool:
        return self.K_train is not None

    @property
    def multiclass(self) -> bool:
        """More than two classes: ``y_*`` hold class indices."""
        return self.classes is not None and len(self.classes) > 2

    @property
    def class_labels(self) -> list[Any] | None:
        """``classes`` as plain Python values (JSON), or ``None`` in regression."""
        return None if self.classes is None else [_plain(c) for c in self.classes]

    def label_of(self, value: float) -> Any:
        """The data's own label of a value of ``y_*`` (+1/-1, or a class index); the value itself in regression."""
        if self.classes is None:
            return value
        if self.positive is not None:
            return _plain(self.classes[self.positive if value > 0 else 1 - self.positive])
        return _plain(self.classes[int(value)])


def _plain(v: Any) -> Any:
    """A numpy scalar as a Python value (JSON, messages); integral floats as ints (labels 0/1 read as 0.0/1.0)."""
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def label_text(v: Any) -> str:
    """A label as shown in messages: numbers as ``1``, ``0.5``; strings quoted."""
    v = _plain(v)
    return repr(v) if isinstance(v, str) else f"{v:g}"


class _Classes:
    """The class labels of a classification target: the one encoder of ``mklkit run`` (and ``validate``, ``sweep``).

    ``classes`` come from :func:`mklkit._multiclass.encode_classes` (the
    estimators' encoder): sorted, so the default positive class of two is
    the greater, as in scikit-learn.
    """

    def __init__(self, loss: Any, data: DataSettings, y: Any, key: str = "problem.loss"):
        import numpy as np

        from .._multiclass import encode_classes

        y = np.asarray(y)
        if y.ndim != 1 or y.size == 0:
            _labels(loss, y, key)  # the loss's own message (shape, empty)
        if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
            _labels(loss, y, key)
        if y.dtype.kind == "f":
            from sklearn.utils.multiclass import type_of_target

            if type_of_target(y) == "continuous":
                raise _continuous(loss, y, key)
        self.classes, _ = encode_classes(y)
        if self.classes.size < 2:
            raise PipelineError(key, f"labels do not fit the loss: the classification loss {loss.name!r} needs "
                                f"at least 2 classes; got only the label {label_text(self.classes[0])}",
                                loss.name, "a target with two or more classes, or a regression loss")
        self.positive: int | None = None
        if data.positive is not None:
            shown = ", ".join(label_text(c) for c in self.classes[:10]) + (", ..." if self.classes.size > 10 else "")
            if self.classes.size > 2:
                raise PipelineError("data.positive", f"only for two classes; the target has {self.classes.size} "
                                    f"({shown}), solved one-vs-rest", data.positive,
                                    "no data.positive with more than two classes")
            self.positive = self._index(data.positive)
            if self.positive is None:
                raise PipelineError("data.positive", "is not one of the labels of the target", data.positive,
                                    f"one of the labels present: {shown}")
        elif self.classes.size == 2:
            self.positive = 1  # the greater label, as scikit-learn

    def _index(self, value: Any) -> int | None:
        for k, c in enumerate(self.classes):
            c = _plain(c)
            if (not isinstance(value, str) and not isinstance(c, str) and float(value) == float(c)) \
                    or str(value) == (c if isinstance(c, str) else f"{c:g}"):
                return k
        return None

    def encode(self, y: Any, key: str, shown: Any = PipelineError.NO_VALUE) -> np.ndarray:
        """The engines' labels of the data's labels: +1/-1 for two classes (positive: ``classes[positive]``),
        else the class indices (float64); a label the training data do not have is an error at ``key``."""
        import numpy as np

        y = np.asarray(y)
        if (y.dtype.kind in "US") != (self.classes.dtype.kind in "US"):
            raise PipelineError(key, f"its labels are {'strings' if y.dtype.kind in 'US' else 'numbers'}, unlike "
                                "those of the training data", shown=shown,
                                allowed=f"labels among {', '.join(label_text(c) for c in self.classes[:10])}")
        idx = np.clip(np.searchsorted(self.classes, y), 0, self.classes.size - 1)
        bad = self.classes[idx] != y
        if np.any(bad):
            v = y[np.flatnonzero(bad)[0]]
            raise PipelineError(key, f"has the label {label_text(v)}, which the training data do not have",
                                shown=shown,
                                allowed="labels among " + ", ".join(label_text(c) for c in self.classes[:10]))
        if self.positive is None:
            return idx.astype(np.float64)
        return np.where(idx == self.positive, 1.0, -1.0)

    def _codes(self, y: np.ndarray) -> np.ndarray:
        """Class indices of engine labels."""
        import numpy as np

        if self.positive is None:
            return np.asarray(y, dtype=np.intp)
        return np.where(np.asarray(y) > 0, self.positive, 1 - self.positive)

    def check_split(self, y: np.ndarray, key: str, value: Any) -> None:
        """A stratified split needs two rows of every class."""
        import numpy as np

        counts = np.bincount(self._codes(y), minlength=self.classes.size)
        if counts.min() < 2:
            k = int(np.argmin(counts))
            raise PipelineError(key, f"cannot split: the class {label_text(self.classes[k])} has {counts[k]} row; "
                                "a stratified split needs at least 2 of every class", value,
                                "data.test_size: 0, or more rows of every class")

    def check_train(self, y: np.ndarray, key: str, value: Any) -> None:
        """Every class in the training rows (a small subsample may lose one)."""
        import numpy as np

        present = np.unique(self._codes(y))
        if present.size < self.classes.size:
            missing = next(k for k in range(self.classes.size) if k not in present)
            raise PipelineError(key, f"the training part has no row of the class {label_text(self.classes[missing])}",
                                value, "a larger training part (every class needs training rows)")


def _continuous(loss: Any, y: np.ndarray, key: str) -> PipelineError:
    """A classification loss on a target of non-integer numbers: name the regression losses."""
    import numpy as np

    n = int(np.unique(y).size)
    others = [r.name for r in get_registry().registrations("loss") if getattr(r.cls, "task", None) == "regression"]
    return PipelineError(key, f"labels do not fit the loss: the target looks continuous ({n} distinct values, not "
                         f"all integers), and {loss.name!r} is a classification loss; a continuous target needs a "
                         "regression loss", loss.name,
                         f"a regression loss ({', '.join(sorted(others)) or 'none installed'}) for this target, "
                         "or a target of class labels (integers or strings)")


def _labels(loss: Any, y: Any, key: str = "problem.loss") -> np.ndarray:
    """Check labels with the loss; a LabelError becomes a PipelineError at ``problem.loss``."""
    from ..components.base import LabelError

    try:
        return loss.validate_labels(y)
    except LabelError as exc:
        others = [r.name for r in get_registry().registrations("loss")
                  if getattr(r.cls, "task", None) != loss.task]
        other_task = "regression" if loss.task == "classification" else "classification"
        allowed = (f"a {other_task} loss ({', '.join(others) or 'none installed'}) for this target, "
                   f"or a target that fits {loss.name!r}")
        what, got = getattr(exc, "problem", None), getattr(exc, "got", None)
        if what is None:
            what, sep, got = one_line(str(exc)).partition("; got ")
            got = got if sep else None
        if got:
            raise PipelineError(key, f"labels do not fit the loss: {what}", allowed=allowed,
                                shown=got) from None
        raise PipelineError(key, f"labels do not fit the loss: {what}", loss.name, allowed) from None


def _encode(loss: Any, data: DataSettings, y: Any) -> tuple[_Classes | None, np.ndarray]:
    """The training labels: class indices with their :class:`_Classes` (classification), or checked numbers."""
    if loss.task == "classification":
        enc = _Classes(loss, data, y)
        return enc, enc.encode(y, "problem.loss")
    if data.positive is not None:
        raise PipelineError("data.positive", "only used with a classification loss", data.positive,
                            f"no data.positive with the regression loss {loss.name!r}")
    return None, _labels(loss, y)


def _encode_test(enc: _Classes | None, loss: Any, y: Any, key: str, shown: Any = PipelineError.NO_VALUE) -> np.ndarray:
    """Test labels like the training labels (a label the training data lack is an error at ``key``)."""
    return _labels(loss, y) if enc is None else enc.encode(y, key, shown)


def _finish(out: Data, enc: _Classes | None) -> Data:
    """The classes on ``out`` (its ``y_*`` are already the engines' labels)."""
    if enc is not None:
        out.classes, out.positive = enc.classes, enc.positive
    return out


def _load_train(data: DataSettings) -> Any:
    """The data set of ``data.builtin`` (retargeted when ``data.target``) or of the file ``data.train``."""
    from ..data import DataError, load_builtin, load_file

    if data.builtin is not None:
        try:
            ds = load_builtin(data.builtin)
        except DataError as exc:
            raise PipelineError("data.builtin", strip_prefix(str(exc), data.builtin), data.builtin) from None
        if data.target is not None:
            ds = _retarget(data, ds)
        return ds
    shown = data.shown("data.train")
    assert data.train is not None
    try:
        return load_file(data.train, target=data.target, fmt=data.format)
    except DataError as exc:
        text = strip_prefix(str(exc), shown, str(data.train))
        if data.target is not None and "target" in text:
            raise PipelineError("data.target", text, data.target) from None
        raise PipelineError("data.train", text, shown=repr(shown)) from None


def _check_columns(data: DataSettings, ds: Any) -> None:
    """Refuse a weight column ``data.sample_weight`` the data lacks, and data without a feature column left."""
    wcol = data.sample_weight
    if wcol is not None and wcol not in ds.feature_names:
        names = list(ds.feature_names)
        raise PipelineError("data.sample_weight", f"no such column in {ds.name!r}{did_you_mean(wcol, names)}",
                            wcol, ", ".join(names))
    if ds.n_features - (wcol is not None) == 0:
        raise PipelineError("data.drop", "no feature columns left", list(data.drop), "drop fewer columns")


def _load_test(data: DataSettings, ds: Any, enc: _Classes | None, loss: Any) -> Any:
    """The test file ``data.test``, its columns checked against the training data ``ds`` and its labels
    encoded as the training labels."""
    from ..data import DataError, detect_format, load_file

    assert data.test is not None
    tshown = data.shown("data.test")
    try:
        n_features = ds.n_features if (data.format or detect_format(data.test, default="libsvm")) == "libsvm" else None
        kwargs: dict[str, Any] = {"target": data.target, "fmt": data.format}
        if n_features is not None:
            kwargs["n_features"] = n_features
        test = load_file(data.test, **kwargs)
    except DataError as exc:
        raise PipelineError("data.test", strip_prefix(str(exc), tshown, str(data.test)), shown=repr(tshown)) from None
    test = _drop(data, test, key="data.test")
    if test.n_features != ds.n_features:
        raise PipelineError("data.test", f"has {test.n_features} feature columns but the training file has "
                            f"{ds.n_features}", shown=repr(tshown),
                            allowed="a test file with the same columns as data.train")
    if list(test.feature_names) != list(ds.feature_names) and not ds.is_sparse:
        diff = next(a for a, b in zip(test.feature_names, ds.feature_names) if a != b)
        raise PipelineError("data.test", f"column {diff!r} differs from the training file's columns",
                            shown=repr(tshown), allowed=", ".join(ds.feature_names))
    test.y = _encode_test(enc, loss, test.y, "data.test", repr(tshown))
    return test


def _split(data: DataSettings, ds: Any, enc: _Classes | None, task: str) -> tuple[Any, Any]:
    """The training and test parts of ``ds`` (split when ``data.test_size``; no test part otherwise)."""
    from ..data import DataError, train_test_split

    if not data.test_size:
        return ds, None
    if enc is not None:
        enc.check_split(ds.y, "data.test_size", data.test_size)
    try:
        return train_test_split(ds, test_size=data.test_size, seed=data.seed, stratify=task == "classification")
    except DataError as exc:
        raise PipelineError("data.test_size", f"cannot split: {strip_prefix(str(exc), ds.name)}", data.test_size) from None


def load_data(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """Load, check and split the data of the settings (standardized when ``data.standardize``).

    Precomputed kernels are loaded raw (normalised by :func:`prepare`, on the
    training part only).

    Raises
    ------
    PipelineError
    """
    import numpy as np

    task = loss.task
    if bank.precomputed is not None:
        return _load_precomputed(data, bank, loss)
    if bank.precomputed_factors is not None:
        return _load_precomputed_factors(data, bank, loss)
    ds = _drop(data, _load_train(data))
    _check_columns(data, ds)
    wcol = data.sample_weight
    enc, ds.y = _encode(loss, data, ds.y)
    if data.test is not None:
        train, test = ds, _load_test(data, ds, enc, loss)
    else:
        train, test = _split(data, ds, enc, task)
    n_total = ds.n_samples + (test.n_samples if (data.test is not None and test is not None) else 0)
    if data.train_size is not None:
        train = _subsample(data, train, task)
        if enc is not None:  # a small subsample may lose a class
            enc.check_train(train.y, "data.train_size", data.train_size)
    sw = None
    if wcol is not None:  # the weight column rode along through the split: take it out now
        train, sw = _pop_column(train, wcol)
        if test is not None:
            test, _ = _pop_column(test, wcol)
    out = Data(
        X_train=train.X, y_train=np.ascontiguousarray(train.y, dtype=np.float64),
        X_test=None if test is None else test.X,
        y_test=None if test is None else np.ascontiguousarray(test.y, dtype=np.float64),
        feature_names=list(train.feature_names), name=ds.name, task=task, n_total=n_total,
    )
    out = _weigh(_finish(out, enc), data, enc, sw)
    return standardize(out) if data.standardize else _contiguous_data(out)


def _pop_column(ds: Any, name: str) -> tuple[Any, np.ndarray]:
    """``ds`` without the feature column ``name``, and that column (float64)."""
    import numpy as np
    import scipy.sparse as sp

    from ..data import Dataset

    names = list(ds.feature_names)
    j = names.index(name)
    col = ds.X[:, j]
    col = np.asarray(col.toarray() if sp.issparse(col) else col, dtype=np.float64).ravel()
    keep = [k for k in range(len(names)) if k != j]
    X = ds.X[:, keep]
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
    return Dataset(X=X, y=ds.y, feature_names=[names[k] for k in keep], name=ds.name, source=ds.source), col


def _weigh(d: Data, data: DataSettings, enc: _Classes | None, sw: np.ndarray | None) -> Data:
    """``d.w_train`` from the ``data.sample_weight`` column ``sw`` (training rows) times the weight of
    each row's class (``data.class_weight``): the estimators' ``sample_weight`` and ``class_weight``.

    Rows of weight 0 leave the training part (as in the estimators); weights that are all 1 are the
    unweighted problem (``None``).
    """
    import numpy as np

    w = None
    if sw is not None:
        name = data.sample_weight
        bad = ~np.isfinite(sw) | (sw < 0.0)
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            raise PipelineError("data.sample_weight", f"column {name!r} has the weight {sw[i]:g} in a training "
                                "row", name, "finite numbers >= 0 (0 leaves the row out)")
        w = sw
    cw = data.class_weight
    if cw is not None:
        if enc is None:
            raise PipelineError("data.class_weight", "only used with a classification loss", cw,
                                "no data.class_weight with a regression loss")
        k = enc.classes.size
        codes = enc._codes(d.y_train)
        if cw == "balanced":  # the estimators' rule (scikit-learn's), on the training part
            from sklearn.utils.class_weight import compute_class_weight

            weights = compute_class_weight("balanced", classes=np.arange(k), y=codes)
        else:
            weights = np.ones(k)
            for label, v in cw.items():
                i = enc._index(label)
                if i is None:
                    raise PipelineError("data.class_weight", f"{label_text(label)} is not one of the labels of "
                                        "the target", cw, "labels among " + ", ".join(label_text(c) for c in
                                                                                    enc.classes[:10]))
                weights[i] = float(v)
        d.class_weights = weights
        w = weights[codes] if w is None else w * weights[codes]
    if w is None:
        return d
    # a zero weight comes from the class weights when they are given (else from the column)
    key, value = ("data.class_weight", cw) if cw is not None else ("data.sample_weight", data.sample_weight)
    if not np.any(w > 0.0):
        raise PipelineError(key, "every training row has weight 0", value, "weights > 0 for some rows")
    if np.any(w == 0.0):
        if d.precomputed:
            raise PipelineError(key, "gives some training rows weight 0, which precomputed kernels "
                                "cannot leave out", value, "weights > 0")
        keep = np.flatnonzero(w > 0.0)
        d.X_train, d.y_train, w = d.X_train[keep], np.ascontiguousarray(d.y_train[keep]), w[keep]
        if enc is not None:
            enc.check_train(d.y_train, key, value)
    d.w_train = None if np.all(w == 1.0) else np.ascontiguousarray(w, dtype=np.float64)
    return d


def _subsample(data: DataSettings, train: Any, task: str) -> Any:
    from ..data import DataError, train_test_split

    n = train.n_samples
    size = data.train_size if isinstance(data.train_size, float) else int(data.train_size)  # type: ignore[arg-type]
    if isinstance(size, int) and size >= n:
        if size > n:
            raise PipelineError("data.train_size", f"larger than the {n} training rows available", data.train_size,
                                f"a row count < {n} or a fraction")
        return train
    rest = (n - size) if isinstance(size, int) else (1.0 - size)
    try:
        part, _ = train_test_split(train, test_size=rest, seed=data.seed + 1, stratify=task == "classification")
    except DataError as exc:
        raise PipelineError("data.train_size", f"cannot subsample: {strip_prefix(str(exc), train.name)}",
                            data.train_size) from None
    return part


def _contiguous(X: Any) -> Any:
    import numpy as np
    import scipy.sparse as sp

    if X is None or sp.issparse(X):
        return X
    return np.ascontiguousarray(X, dtype=np.float64)


def _contiguous_data(d: Data) -> Data:
    d.X_train, d.X_test = _contiguous(d.X_train), _contiguous(d.X_test)
    return d


def standardize(d: Data, scaler: Any = None) -> Data:
    """Centre and scale ``X_train`` (and ``X_test``) with training statistics: the one standardize path.

    With ``d.w_train`` the statistics are weighted (those of the rows repeated by integer weights).

    ``scaler``: a fitted :class:`~mklkit.data.Standardizer` to apply instead
    (prediction).  Precomputed kernels and factors are returned unchanged.
    """
    from ..data import DataError, Standardizer

    if d.precomputed or d.X_train is None or d.factor_starts is not None:
        return d
    try:
        sc = scaler if scaler is not None else Standardizer().fit(d.X_train, sample_weight=d.w_train)
        X_train = sc.transform(d.X_train)
        X_test = sc.transform(d.X_test) if d.X_test is not None else None
    except DataError as exc:
        raise PipelineError("data.standardize", str(exc), True) from None
    return _contiguous_data(replace(d, X_train=X_train, X_test=X_test, scaler=sc))


def _retarget(data: DataSettings, ds: Any) -> Any:
    """``data.target`` on a builtin set: make a feature column (or ``y``) the target."""
    import numpy as np
    import scipy.sparse as sp

    from ..data import Dataset

    target = data.target
    columns = list(ds.feature_names) + ["y"]
    if target == "y":
        return ds
    if target not in columns:
        raise PipelineError("data.target", f"no such column in builtin {ds.name!r}{did_you_mean(str(target), columns)}",
                            target, ", ".join(columns))
    if sp.issparse(ds.X):
        raise PipelineError("data.target", f"builtin {ds.name!r} is sparse; only 'y' can be the target", target, "y")
    j = columns.index(target)
    table = np.column_stack([ds.X, ds.y])
    keep = [c for c in range(len(columns)) if c != j]
    return Dataset(X=np.ascontiguousarray(table[:, keep]), y=np.ascontiguousarray(table[:, j]),
                   feature_names=[columns[c] for c in keep], name=ds.name, source=ds.source)


def _drop(data: DataSettings, ds: Any, key: str = "data.drop") -> Any:
    import numpy as np
    import scipy.sparse as sp

    from ..data import Dataset

    if not data.drop:
        return ds
    names = list(ds.feature_names)
    for c in data.drop:
        if c not in names:
            raise PipelineError(key, f"no feature column {c!r} to drop{did_you_mean(c, names)}", c, ", ".join(names))
    keep = [j for j, n in enumerate(names) if n not in data.drop]
    X = ds.X[:, keep]
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
    return Dataset(X=X, y=ds.y, feature_names=[names[j] for j in keep], name=ds.name, source=ds.source)


def _load_precomputed(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """``kernels.precomputed``: checked by :meth:`KernelBank.from_npz`, split (not normalised) here."""
    import numpy as np

    from ..data import DataError, Dataset, train_test_split
    from ..kernels import BankError, KernelBank

    path = bank.precomputed
    assert path is not None
    shown = bank.shown("kernels.precomputed")
    key = "kernels.precomputed"

    def fail(exc: Exception) -> PipelineError:
        text = strip_prefix(one_line(str(exc)), str(path))
        if "normaliz" in text and "diagonal" in text:
            return PipelineError("kernels.normalize", text, bank.normalize,
                                 "trace or none (or add K_test_diag to the NPZ)")
        return PipelineError(key, text, shown=repr(shown), allowed=NPZ_ALLOWED)

    try:
        # checked and loaded raw: the normalisation is computed on the training part (prepare)
        pre = KernelBank.from_npz(path, normalize="none")
    except BankError as exc:
        raise fail(exc) from None
    y, Kt, yt = pre.y_train, pre.K_test, pre.y_test
    if Kt is not None and yt is None:
        raise PipelineError(key, "has K_test without y_test", shown=repr(shown), allowed="both K_test and y_test, or neither")
    if bank.normalize == "diagonal" and Kt is not None and pre.test_diag is None:
        raise fail(BankError(f"{path}: normalize='diagonal' needs the array K_test_diag (M, N_test) with the "
                             "test points' own k(x, x) to normalise K_test"))
    enc, y = _encode(loss, data, y)
    if Kt is not None:
        yt = _encode_test(enc, loss, yt, key, repr(shown))
        if "test_size" in data.model_fields_set and data.test_size:
            raise PipelineError("data.test_size", "not used: the NPZ has its own K_test", data.test_size,
                                "no data.test_size with K_test")
    K = pre.bank.K
    N = K.shape[1]
    out = Data(X_train=None, y_train=y, X_test=None, y_test=yt, feature_names=[], name=Path(shown).stem,
               task=loss.task, K_train=K, K_test=Kt, kernel_names=list(pre.bank.names),
               n_total=N + (0 if yt is None else int(yt.shape[0])), test_diag=pre.test_diag)
    if Kt is None and data.test_size:
        if enc is not None:
            enc.check_split(y, "data.test_size", data.test_size)
        ds = Dataset(X=np.arange(N, dtype=np.float64)[:, None], y=y, feature_names=["index"], name=shown)
        try:
            tr, te = train_test_split(ds, test_size=data.test_size, seed=data.seed,
                                      stratify=loss.task == "classification")
        except DataError as exc:
            raise PipelineError("data.test_size", f"cannot split: {strip_prefix(str(exc), shown)}", data.test_size) from None
        out = fold(out, tr.X[:, 0].astype(np.intp), te.X[:, 0].astype(np.intp))
    return _weigh(_finish(out, enc), data, enc, None)


def _load_precomputed_factors(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """``kernels.precomputed_factors``: checked by :func:`~mklkit.kernels.load_precomputed_factors`
    (headers against ``kernels.memory_budget`` first), the rows split (not normalised) here."""
    import numpy as np

    from ..data import DataError, Dataset, train_test_split
    from ..kernels import BankError, load_precomputed_factors

    path = bank.precomputed_factors
    assert path is not None
    key = "kernels.precomputed_factors"
    shown = bank.shown(key)
    try:
        pre = load_precomputed_factors(path, memory_budget=bank.budget, normalize=bank.normalize)
    except BankError as exc:
        text = strip_prefix(one_line(str(exc)), str(path))
        if exc.key == "memory_budget":
            given = bank.memory_budget
            raise PipelineError("kernels.memory_budget", f"{shown}: {exc.problem}",
                                given if given is not None else PipelineError.NO_VALUE, exc.allowed) from None
        raise PipelineError(key, text, shown=repr(shown), allowed=FACTOR_NPZ_ALLOWED) from None
    Lt, yt = pre.L_test, pre.y_test
    enc, y = _encode(loss, data, pre.y_train)
    if Lt is not None:
        yt = _encode_test(enc, loss, yt, key, repr(shown))
        if "test_size" in data.model_fields_set and data.test_size:
            raise PipelineError("data.test_size", "not used: the NPZ has its own L_test", data.test_size,
                                "no data.test_size with L_test")
    N, R = pre.L_train.shape
    columns = [f"L{j}" for j in range(R)]
    out = Data(X_train=pre.L_train, y_train=y, X_test=Lt, y_test=yt, feature_names=columns,
               name=Path(shown).stem, task=loss.task, kernel_names=list(pre.names),
               n_total=N + (0 if yt is None else int(yt.shape[0])), factor_starts=pre.starts)
    if Lt is None and data.test_size:
        if enc is not None:
            enc.check_split(y, "data.test_size", data.test_size)
        ds = Dataset(X=pre.L_train, y=y, feature_names=columns, name=shown)
        try:
            tr, te = train_test_split(ds, test_size=data.test_size, seed=data.seed,
                                      stratify=loss.task == "classification")
        except DataError as exc:
            raise PipelineError("data.test_size", f"cannot split: {strip_prefix(str(exc), shown)}", data.test_size) from None
        out = replace(out, X_train=np.ascontiguousarray(tr.X), X_test=np.ascontiguousarray(te.X),
                      y_train=tr.y, y_test=te.y)
    return _weigh(_finish(out, enc), data, enc, None)


def array_data(X: Any, y: Any, task: str, feature_names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Feature data given in memory (the estimators): ``X`` (N, d) dense or sparse, ``y`` checked by the caller."""
    import numpy as np

    d = int(X.shape[1])
    names = [str(n) for n in feature_names] if feature_names is not None else [f"x{j}" for j in range(d)]
    return _contiguous_data(Data(X_train=X, y_train=np.asarray(y), X_test=None, y_test=None, feature_names=names,
                                 name=name, task=task, n_total=int(X.shape[0])))


def kernels_in_order(K: Any) -> Any:
    """A C-contiguous float64 copy of kernels (M, N, N); a view of samples-first kernels
    (N, N, M) (the estimators' input) is copied by one parallel pass over the original."""
    import numpy as np

    from .._jit.gram import kernels_first

    K = np.asarray(K)
    src = np.moveaxis(K, 0, -1) if K.ndim == 3 else None
    if src is not None and src.dtype == np.float64 and src.flags.c_contiguous and K.shape[0] > 1:
        out = np.empty(K.shape, dtype=np.float64)
        kernels_first(src, out)
        return out
    return np.array(K, dtype=np.float64, order="C")


def gram_data(K: Any, y: Any, task: str, names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Precomputed training kernels (M, N, N) given in memory, not yet normalised.

    ``K`` is copied (the bank normalises its training kernels in place; the
    caller's array stays as it was).
    """
    import numpy as np

    K = kernels_in_order(K)
    return Data(X_train=None, y_train=np.asarray(y), X_test=None, y_test=None, feature_names=[], name=name,
                task=task, K_train=K, kernel_names=None if names is None else list(names), n_total=int(K.shape[1]))


# ---------------------------------------------------------------------------
# Folds
# ---------------------------------------------------------------------------
def make_folds(cv: CVSettings, d: Data) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(train rows, validation rows), ...]`` of the training part of ``d``.

    Raises
    ------
    PipelineError
        At ``cv.folds`` or ``cv.test_size`` when the data cannot be split so.
    """
    import numpy as np

    y = d.y_train
    n = int(y.shape[0])
    classification = d.task == "classification"
    if d.multiclass:
        assert d.classes is not None
        raise PipelineError("cv", f"the target of {d.name} has {len(d.classes)} classes; cross-validation solves "
                            "binary problems", d.class_labels, "a target with two classes (mklkit run solves more "
                            "classes one-vs-rest)")
    if cv.kind == "folds":
        from sklearn.model_selection import KFold, StratifiedKFold

        if classification:
            classes, counts = np.unique(y, return_counts=True)
            if counts.min() < cv.n:
                raise PipelineError(
                    "cv.folds", f"cannot make {cv.n} stratified folds of {d.name}: class "
                    f"{label_text(d.label_of(classes[np.argmin(counts)]))} has only {counts.min()} training rows", cv.n,
                    f"an integer in [2, {max(2, counts.min())}] for these data")
            splitter: Any = StratifiedKFold(n_splits=cv.n, shuffle=True, random_state=cv.seed)
        else:
            if cv.n > n:
                raise PipelineError("cv.folds", f"more folds than the {n} training rows of {d.name}", cv.n,
                                    f"an integer in [2, {n}]")
            splitter = KFold(n_splits=cv.n, shuffle=True, random_state=cv.seed)
        return [(np.asarray(tr, dtype=np.intp), np.asarray(va, dtype=np.intp))
                for tr, va in splitter.split(np.zeros((n, 1)), y)]
    from ..data import DataError, Dataset, train_test_split

    ds = Dataset(X=np.arange(n, dtype=np.float64)[:, None], y=y, feature_names=["index"], name=d.name)
    out = []
    for i in range(cv.n):
        try:
            tr, va = train_test_split(ds, test_size=cv.test_size, seed=cv.seed + i, stratify=classification)
        except DataError as exc:
            raise PipelineError("cv.test_size", f"cannot split {d.name}: {strip_prefix(str(exc), d.name)}",
                                cv.test_size) from None
        out.append((tr.X[:, 0].astype(np.intp), va.X[:, 0].astype(np.intp)))
    return out


def fold(d: Data, train: Any, val: Any, standardized: bool = False) -> Data:
    """The rows ``train`` as training part and ``val`` as test part of ``d``'s training part.

    Features: the rows (standardized on the fold's training rows when
    ``standardized``).  Precomputed kernels: ``K[:, train][:, :, train]`` for
    training and ``K[:, val][:, :, train]`` for the test side (raw: the
    normalisation is computed on the training part by :func:`prepare`).
    """
    import numpy as np
    import scipy.sparse as sp

    train = np.asarray(train, dtype=np.intp)
    val = np.asarray(val, dtype=np.intp)
    y_tr = np.ascontiguousarray(d.y_train[train])
    if d.w_train is not None:
        d = replace(d, w_train=np.ascontiguousarray(d.w_train[train]))
    y_va = np.ascontiguousarray(d.y_train[val])
    if d.precomputed:
        K = d.K_train
        assert K is not None
        if d.normalized:
            raise ValueError("fold() needs raw precomputed kernels (normalised ones cannot be split)")
        diag = np.ascontiguousarray(np.diagonal(K, axis1=1, axis2=2)[:, val])
        return replace(d, y_train=y_tr, y_test=y_va, K_train=np.ascontiguousarray(K[:, train][:, :, train]),
                       K_test=np.ascontiguousarray(K[:, val][:, :, train]), test_diag=diag,
                       n_total=int(train.size + val.size))

    def rows(X: Any, idx: Any) -> Any:
        part = X[idx]
        return part if sp.issparse(part) else np.ascontiguousarray(part, dtype=np.float64)

    out = replace(d, X_train=rows(d.X_train, train), X_test=rows(d.X_train, val), y_train=y_tr, y_test=y_va,
                  n_total=int(train.size + val.size), scaler=None)
    return standardize(out) if standardized else out
