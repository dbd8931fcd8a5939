"""Data of the pipeline: loading, label checks, splitting, standardizing, folds."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..components.params import did_you_mean
from .errors import PipelineError, _one_line
from .settings import _FACTOR_NPZ_ALLOWED, _NPZ_ALLOWED, CVSettings, BankSettings, DataSettings, _strip

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


def _labels(loss: Any, y: Any, key: str = "problem.loss") -> np.ndarray:
    """Check labels with the loss; a LabelError becomes a PipelineError at ``problem.loss``."""
    from ..components.base import LabelError

    try:
        return loss.validate_labels(y)
    except LabelError as exc:
        from ..plugins import get_registry

        others = [r.name for r in get_registry().registrations("loss")
                  if getattr(r.cls, "task", None) != loss.task]
        other_task = "regression" if loss.task == "classification" else "classification"
        allowed = (f"a {other_task} loss ({', '.join(others) or 'none installed'}) for this target, "
                   f"or a target that fits {loss.name!r}")
        what, got = getattr(exc, "problem", None), getattr(exc, "got", None)
        if what is None:
            what, sep, got = _one_line(str(exc)).partition("; got ")
            got = got if sep else None
        if got:
            raise PipelineError(key, f"labels do not fit the loss: {what}", allowed=allowed,
                                shown=got) from None
        raise PipelineError(key, f"labels do not fit the loss: {what}", loss.name, allowed) from None


def load_data(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """Load, check and split the data of the settings (standardized when ``data.standardize``).

    Precomputed kernels are loaded raw (normalised by :func:`prepare`, on the
    training part only).

    Raises
    ------
    PipelineError
    """
    import numpy as np

    from ..data import DataError, detect_format, load_builtin, load_file, train_test_split

    task = loss.task
    if bank.precomputed is not None:
        return _load_precomputed(data, bank, loss)
    if bank.precomputed_factors is not None:
        return _load_precomputed_factors(data, bank, loss)
    if data.builtin is not None:
        try:
            ds = load_builtin(data.builtin)
        except DataError as exc:
            raise PipelineError("data.builtin", _strip(str(exc), data.builtin), data.builtin) from None
        if data.target is not None:
            ds = _retarget(data, ds)
    else:
        shown = data.shown("data.train")
        assert data.train is not None
        try:
            ds = load_file(data.train, target=data.target, fmt=data.format)
        except DataError as exc:
            text = _strip(str(exc), shown, str(data.train))
            if data.target is not None and "target" in text:
                raise PipelineError("data.target", text, data.target) from None
            raise PipelineError("data.train", text, shown=repr(shown)) from None
    ds = _drop(data, ds)
    if ds.n_features == 0:
        raise PipelineError("data.drop", "no feature columns left", list(data.drop), "drop fewer columns")
    ds.y = _labels(loss, ds.y)
    test = None
    if data.test is not None:
        tshown = data.shown("data.test")
        try:
            n_features = ds.n_features if (data.format or detect_format(data.test, default="libsvm")) == "libsvm" else None
            kwargs: dict[str, Any] = {"target": data.target, "fmt": data.format}
            if n_features is not None:
                kwargs["n_features"] = n_features
            test = load_file(data.test, **kwargs)
        except DataError as exc:
            raise PipelineError("data.test", _strip(str(exc), tshown, str(data.test)), shown=repr(tshown)) from None
        test = _drop(data, test, key="data.test")
        if test.n_features != ds.n_features:
            raise PipelineError("data.test", f"has {test.n_features} feature columns but the training file has "
                                f"{ds.n_features}", shown=repr(tshown),
                                allowed="a test file with the same columns as data.train")
        if list(test.feature_names) != list(ds.feature_names) and not ds.is_sparse:
            diff = next(a for a, b in zip(test.feature_names, ds.feature_names) if a != b)
            raise PipelineError("data.test", f"column {diff!r} differs from the training file's columns",
                                shown=repr(tshown), allowed=", ".join(ds.feature_names))
        test.y = _labels(loss, test.y)
        train = ds
    elif data.test_size:
        try:
            train, test = train_test_split(ds, test_size=data.test_size, seed=data.seed,
                                           stratify=task == "classification")
        except DataError as exc:
            raise PipelineError("data.test_size", f"cannot split: {_strip(str(exc), ds.name)}", data.test_size) from None
    else:
        train = ds
    n_total = ds.n_samples + (test.n_samples if (data.test is not None and test is not None) else 0)
    if data.train_size is not None:
        train = _subsample(data, train, task)
        train.y = _labels(loss, train.y)  # a small subsample may lose a class
    if test is not None:
        test.y = _labels(loss, test.y)
    out = Data(
        X_train=train.X, y_train=np.ascontiguousarray(train.y, dtype=np.float64),
        X_test=None if test is None else test.X,
        y_test=None if test is None else np.ascontiguousarray(test.y, dtype=np.float64),
        feature_names=list(ds.feature_names), name=ds.name, task=task, n_total=n_total,
    )
    return standardize(out) if data.standardize else _contiguous_data(out)


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
        raise PipelineError("data.train_size", f"cannot subsample: {_strip(str(exc), train.name)}",
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

    ``scaler``: a fitted :class:`~mklkit.data.Standardizer` to apply instead
    (prediction).  Precomputed kernels and factors are returned unchanged.
    """
    from ..data import DataError, Standardizer

    if d.precomputed or d.X_train is None or d.factor_starts is not None:
        return d
    try:
        sc = scaler if scaler is not None else Standardizer().fit(d.X_train)
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
        text = _strip(_one_line(str(exc)), str(path))
        if "normaliz" in text and "diagonal" in text:
            return PipelineError("kernels.normalize", text, bank.normalize,
                                 "trace or none (or add K_test_diag to the NPZ)")
        return PipelineError(key, text, shown=repr(shown), allowed=_NPZ_ALLOWED)

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
    y = _labels(loss, y)
    if Kt is not None:
        yt = _labels(loss, yt)
        if "test_size" in data.model_fields_set and data.test_size:
            raise PipelineError("data.test_size", "not used: the NPZ has its own K_test", data.test_size,
                                "no data.test_size with K_test")
    K = pre.bank.K
    N = K.shape[1]
    out = Data(X_train=None, y_train=y, X_test=None, y_test=yt, feature_names=[], name=Path(shown).stem,
               task=loss.task, K_train=K, K_test=Kt, kernel_names=list(pre.bank.names),
               n_total=N + (0 if yt is None else int(yt.shape[0])), test_diag=pre.test_diag)
    if Kt is None and data.test_size:
        ds = Dataset(X=np.arange(N, dtype=np.float64)[:, None], y=y, feature_names=["index"], name=shown)
        try:
            tr, te = train_test_split(ds, test_size=data.test_size, seed=data.seed,
                                      stratify=loss.task == "classification")
        except DataError as exc:
            raise PipelineError("data.test_size", f"cannot split: {_strip(str(exc), shown)}", data.test_size) from None
        out = fold(out, tr.X[:, 0].astype(np.intp), te.X[:, 0].astype(np.intp))
        out.y_train, out.y_test = _labels(loss, out.y_train), _labels(loss, out.y_test)
    return out


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
        text = _strip(_one_line(str(exc)), str(path))
        if exc.key == "memory_budget":
            given = bank.memory_budget
            raise PipelineError("kernels.memory_budget", f"{shown}: {exc.problem}",
                                given if given is not None else PipelineError.NO_VALUE, exc.allowed) from None
        raise PipelineError(key, text, shown=repr(shown), allowed=_FACTOR_NPZ_ALLOWED) from None
    y, Lt, yt = _labels(loss, pre.y_train), pre.L_test, pre.y_test
    if Lt is not None:
        yt = _labels(loss, yt)
        if "test_size" in data.model_fields_set and data.test_size:
            raise PipelineError("data.test_size", "not used: the NPZ has its own L_test", data.test_size,
                                "no data.test_size with L_test")
    N, R = pre.L_train.shape
    columns = [f"L{j}" for j in range(R)]
    out = Data(X_train=pre.L_train, y_train=y, X_test=Lt, y_test=yt, feature_names=columns,
               name=Path(shown).stem, task=loss.task, kernel_names=list(pre.names),
               n_total=N + (0 if yt is None else int(yt.shape[0])), factor_starts=pre.starts)
    if Lt is None and data.test_size:
        ds = Dataset(X=pre.L_train, y=y, feature_names=columns, name=shown)
        try:
            tr, te = train_test_split(ds, test_size=data.test_size, seed=data.seed,
                                      stratify=loss.task == "classification")
        except DataError as exc:
            raise PipelineError("data.test_size", f"cannot split: {_strip(str(exc), shown)}", data.test_size) from None
        out = replace(out, X_train=np.ascontiguousarray(tr.X), X_test=np.ascontiguousarray(te.X),
                      y_train=_labels(loss, tr.y), y_test=_labels(loss, te.y))
    return out


def array_data(X: Any, y: Any, task: str, feature_names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Feature data given in memory (the estimators): ``X`` (N, d) dense or sparse, ``y`` checked by the caller."""
    import numpy as np

    d = int(X.shape[1])
    names = [str(n) for n in feature_names] if feature_names is not None else [f"x{j + 1}" for j in range(d)]
    return _contiguous_data(Data(X_train=X, y_train=np.asarray(y), X_test=None, y_test=None, feature_names=names,
                                 name=name, task=task, n_total=int(X.shape[0])))


def gram_data(K: Any, y: Any, task: str, names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Precomputed training kernels (M, N, N) given in memory, not yet normalised.

    ``K`` is copied (the bank normalises its training kernels in place; the
    caller's array stays as it was).
    """
    import numpy as np

    K = np.array(K, dtype=np.float64, order="C")
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
    if cv.kind == "folds":
        from sklearn.model_selection import KFold, StratifiedKFold

        if classification:
            classes, counts = np.unique(y, return_counts=True)
            if counts.min() < cv.n:
                raise PipelineError(
                    "cv.folds", f"cannot make {cv.n} stratified folds of {d.name}: class "
                    f"{classes[np.argmin(counts)]:g} has only {counts.min()} training rows", cv.n,
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
            raise PipelineError("cv.test_size", f"cannot split {d.name}: {_strip(str(exc), d.name)}",
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
