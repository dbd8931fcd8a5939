"""The pipeline's data: ``Data``, standardizing, data given in memory (the estimators), folds."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Sequence

from .errors import PipelineError, strip_prefix
from .settings import CVSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


@dataclass
class Data:
    """Training/test data after loading, label checks, splitting and scaling: features ``X_*``; or
    precomputed kernels ``K_train`` (M, N, N), ``K_test`` (M, N_test, N); or the raw rows ``X_*`` of
    precomputed factors laid out by ``factor_starts``.  The test part is ``None`` when there is none."""

    X_train: Any
    y_train: np.ndarray
    name: str
    task: str
    X_test: Any = None
    y_test: np.ndarray | None = None
    feature_names: list[str] = field(default_factory=list)
    K_train: np.ndarray | None = None
    K_test: np.ndarray | None = None
    kernel_names: list[str] | None = None
    #: ``K_test_diag`` of precomputed kernels (the test points' own k(x, x)).
    test_diag: np.ndarray | None = None
    #: the Standardizer applied to ``X_*`` (``None``: not standardized).
    scaler: Any = None
    #: column offsets of the kernels in the rows of precomputed factors (``X_*``); ``None`` otherwise.
    factor_starts: np.ndarray | None = None
    #: the sorted labels of a classification target (``None``: regression); ``y_*`` are +1/-1
    #: (``classes[positive]`` +1) for two classes, else the class indices 0 .. K-1 (float64)
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
        return None if self.classes is None else [plain(c) for c in self.classes]

    def label_of(self, value: float) -> Any:
        """The data's own label of a value of ``y_*`` (+1/-1, or a class index); the value itself in regression."""
        if self.classes is None:
            return value
        if self.positive is not None:
            return plain(self.classes[self.positive if value > 0 else 1 - self.positive])
        return plain(self.classes[int(value)])


def plain(v: Any) -> Any:
    """A numpy scalar as a Python value (JSON, messages); integral floats as ints (labels 0/1 read as 0.0/1.0)."""
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def label_text(v: Any) -> str:
    """A label as shown in messages: numbers as ``1``, ``0.5``; strings quoted."""
    v = plain(v)
    return repr(v) if isinstance(v, str) else f"{v:g}"


def _contiguous(X: Any) -> Any:
    import numpy as np
    import scipy.sparse as sp

    if X is None or sp.issparse(X):
        return X
    return np.ascontiguousarray(X, dtype=np.float64)


def contiguous_data(d: Data) -> Data:
    d.X_train, d.X_test = _contiguous(d.X_train), _contiguous(d.X_test)
    return d


def standardize(d: Data) -> Data:
    """Centre and scale ``X_train`` (and ``X_test``) with (weighted) training statistics; precomputed kernels and
    factors are returned unchanged."""
    from ..data import DataError, Standardizer

    if d.precomputed or d.X_train is None or d.factor_starts is not None:
        return d
    try:
        sc = Standardizer().fit(d.X_train, sample_weight=d.w_train)
        X_train = sc.transform(d.X_train)
        X_test = sc.transform(d.X_test) if d.X_test is not None else None
    except DataError as exc:
        raise PipelineError("data.standardize", str(exc), True) from None
    return contiguous_data(replace(d, X_train=X_train, X_test=X_test, scaler=sc))


def array_data(X: Any, y: Any, task: str, feature_names: Sequence[str] | None = None, w_train: Any = None) -> Data:
    """Feature data given in memory (the estimators): ``X`` (N, d), ``y`` and ``w_train`` checked by the caller."""
    import numpy as np

    names = [str(n) for n in feature_names] if feature_names is not None else [f"x{j}" for j in range(X.shape[1])]
    return contiguous_data(
        Data(X_train=X, y_train=np.asarray(y), feature_names=names, name="X", task=task, w_train=w_train)
    )


def kernels_in_order(K: Any) -> Any:
    """A C-contiguous float64 copy of kernels (M, N, N) (from a samples-first view by one parallel pass)."""
    import numpy as np

    from .._jit.gram import kernels_first

    K = np.asarray(K)
    src = np.moveaxis(K, 0, -1) if K.ndim == 3 else None
    if src is not None and src.dtype == np.float64 and src.flags.c_contiguous and K.shape[0] > 1:
        out = np.empty(K.shape, dtype=np.float64)
        kernels_first(src, out)
        return out
    return np.array(K, dtype=np.float64, order="C")


def gram_data(K: Any, y: Any, task: str, w_train: Any = None) -> Data:
    """Precomputed training kernels (M, N, N) given in memory, copied (the bank normalises them in place)."""
    import numpy as np

    K = kernels_in_order(K)
    return Data(X_train=None, y_train=np.asarray(y), name="X", task=task, K_train=K, w_train=w_train)


def make_folds(cv: CVSettings, d: Data) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(train rows, validation rows), ...]`` of the training part of ``d`` (a PipelineError at
    ``cv.folds`` or ``cv.test_size`` when the data cannot be split so)."""
    import numpy as np

    y = d.y_train
    n = int(y.shape[0])
    classification = d.task == "classification"
    if d.multiclass:
        assert d.classes is not None
        raise PipelineError(
            "cv",
            f"the target of {d.name} has {len(d.classes)} classes; cross-validation solves binary problems",
            d.class_labels,
            "a target with two classes (mklkit run solves more classes one-vs-rest)",
        )
    if cv.kind == "folds":
        from sklearn.model_selection import KFold, StratifiedKFold

        if classification:
            classes, counts = np.unique(y, return_counts=True)
            if counts.min() < cv.n:
                raise PipelineError(
                    "cv.folds",
                    f"cannot make {cv.n} stratified folds of {d.name}: class "
                    f"{label_text(d.label_of(classes[np.argmin(counts)]))} has only {counts.min()} training rows",
                    cv.n,
                    f"an integer in [2, {max(2, counts.min())}] for these data",
                )
            splitter: Any = StratifiedKFold(n_splits=cv.n, shuffle=True, random_state=cv.seed)
        else:
            if cv.n > n:
                raise PipelineError(
                    "cv.folds", f"more folds than the {n} training rows of {d.name}", cv.n, f"an integer in [2, {n}]"
                )
            splitter = KFold(n_splits=cv.n, shuffle=True, random_state=cv.seed)
        return [
            (np.asarray(tr, dtype=np.intp), np.asarray(va, dtype=np.intp))
            for tr, va in splitter.split(np.zeros((n, 1)), y)
        ]
    from ..data import DataError, Dataset, train_test_split

    ds = Dataset(X=np.arange(n, dtype=np.float64)[:, None], y=y, feature_names=["index"], name=d.name)
    out = []
    for i in range(cv.n):
        try:
            tr, va = train_test_split(ds, test_size=cv.test_size, seed=cv.seed + i, stratify=classification)
        except DataError as exc:
            raise PipelineError(
                "cv.test_size", f"cannot split {d.name}: {strip_prefix(str(exc), d.name)}", cv.test_size
            ) from None
        out.append((tr.X[:, 0].astype(np.intp), va.X[:, 0].astype(np.intp)))
    return out


def fold(d: Data, train: Any, val: Any, standardized: bool = False) -> Data:
    """The rows ``train`` and ``val`` of ``d``'s training part as training and test part (features
    standardized on ``train`` when ``standardized``; raw precomputed kernels as blocks)."""
    import numpy as np
    import scipy.sparse as sp

    train = np.asarray(train, dtype=np.intp)
    val = np.asarray(val, dtype=np.intp)
    w = d.w_train
    d = replace(
        d,
        y_train=np.ascontiguousarray(d.y_train[train]),
        y_test=np.ascontiguousarray(d.y_train[val]),
        w_train=None if w is None else np.ascontiguousarray(w[train]),
    )
    if d.precomputed:
        K = d.K_train
        assert K is not None
        return replace(
            d,
            K_train=np.ascontiguousarray(K[:, train][:, :, train]),
            K_test=np.ascontiguousarray(K[:, val][:, :, train]),
            test_diag=np.ascontiguousarray(np.diagonal(K, axis1=1, axis2=2)[:, val]),
        )

    def rows(X: Any, idx: Any) -> Any:
        part = X[idx]
        return part if sp.issparse(part) else np.ascontiguousarray(part, dtype=np.float64)

    out = replace(d, X_train=rows(d.X_train, train), X_test=rows(d.X_train, val), scaler=None)
    return standardize(out) if standardized else out
