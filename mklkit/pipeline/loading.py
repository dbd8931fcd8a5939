"""``load_data``: a builtin set or files, the test part (a file or a split), columns dropped or taken out as
weights, precomputed kernels or factors from an ``.npz``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .data import Data, contiguous_data, fold, label_text, plain, standardize
from .errors import FACTOR_NPZ_ALLOWED, NPZ_ALLOWED, PipelineError, not_among, one_line, strip_prefix
from .labels import Classes, encode_labels, encode_test_labels, weigh
from .bank_settings import BankSettings
from .settings import DataSettings

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


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
        raise not_among("data.sample_weight", f"no such column in {ds.name!r}", wcol, list(ds.feature_names))
    if ds.n_features - (wcol is not None) == 0:
        raise PipelineError("data.drop", "no feature columns left", list(data.drop), "drop fewer columns")


def _load_test(data: DataSettings, ds: Any, enc: Classes | None, loss: Any) -> Any:
    """The test file ``data.test``, its columns checked against the training data ``ds`` and its labels
    encoded as the training labels."""
    from ..data import DataError, detect_format, load_file

    assert data.test is not None
    tshown = data.shown("data.test")
    try:
        libsvm = (data.format or detect_format(data.test, default="libsvm")) == "libsvm"
        kwargs = {"n_features": ds.n_features} if libsvm else {}
        test = load_file(data.test, target=data.target, fmt=data.format, **kwargs)
    except DataError as exc:
        raise PipelineError("data.test", strip_prefix(str(exc), tshown, str(data.test)), shown=repr(tshown)) from None
    test = _drop(data, test, key="data.test")
    if test.n_features != ds.n_features:
        raise PipelineError(
            "data.test",
            f"has {test.n_features} feature columns but the training file has {ds.n_features}",
            shown=repr(tshown),
            allowed="a test file with the same columns as data.train",
        )
    if list(test.feature_names) != list(ds.feature_names) and not ds.is_sparse:
        diff = next(a for a, b in zip(test.feature_names, ds.feature_names) if a != b)
        raise PipelineError(
            "data.test",
            f"column {diff!r} differs from the training file's columns",
            shown=repr(tshown),
            allowed=", ".join(ds.feature_names),
        )
    if getattr(loss, "name", None) == "one_class":  # +1 inliers, -1 outliers
        test.y = _inlier_levels(data, test.y)
    else:
        test.y = encode_test_labels(enc, loss, test.y, "data.test", repr(tshown))
    return test


def _split(data: DataSettings, ds: Any, enc: Classes | None, task: str) -> tuple[Any, Any]:
    """The training and test parts of ``ds`` (no test part when ``data.test_size`` is 0)."""
    from ..data import DataError, train_test_split

    if not data.test_size:
        return ds, None
    if enc is not None:
        enc.check_split(ds.y, "data.test_size", data.test_size)
    try:
        return train_test_split(ds, test_size=data.test_size, seed=data.seed, stratify=task == "classification")
    except DataError as exc:
        raise PipelineError(
            "data.test_size", f"cannot split: {strip_prefix(str(exc), ds.name)}", data.test_size
        ) from None


def load_data(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """Load, check and split the data of the settings (standardized when ``data.standardize``; precomputed
    kernels raw, normalised on the training part by :func:`prepare`).

    Raises
    ------
    PipelineError
    """
    import numpy as np

    task = loss.task
    one_class = _one_class(data, bank, loss)
    if bank.precomputed is not None:
        return _load_precomputed(data, bank, loss)
    if bank.precomputed_factors is not None:
        return _load_precomputed_factors(data, bank, loss)
    ds = _drop(data, _load_train(data))
    _check_columns(data, ds)
    wcol = data.sample_weight
    if one_class:
        ds.y = _inlier_levels(data, ds.y)
    enc, ds.y = encode_labels(loss, data, ds.y)
    if data.test is not None:
        train, test = ds, _load_test(data, ds, enc, loss)
    else:
        train, test = _split_inliers(data, ds) if one_class else _split(data, ds, enc, task)
    if one_class:  # the training part: the inliers only
        keep = np.flatnonzero(np.asarray(train.y) == 1.0)
        if keep.size < 2:
            raise PipelineError(
                "data.inlier", f"leaves {keep.size} training rows", data.inlier, "a label of 2 or more training rows"
            )
        train = replace(train, X=train.X[keep], y=train.y[keep])
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
        X_train=train.X,
        y_train=np.ascontiguousarray(train.y, dtype=np.float64),
        X_test=None if test is None else test.X,
        y_test=None if test is None else np.ascontiguousarray(test.y, dtype=np.float64),
        feature_names=list(train.feature_names),
        name=ds.name,
        task=task,
    )
    out = weigh(out, data, enc, sw)
    return standardize(out) if data.standardize else contiguous_data(out)


def _one_class(data: DataSettings, bank: BankSettings, loss: Any) -> bool:
    """Whether the run is one-class (the ``one_class`` loss); ``data.inlier`` checked against it."""
    one_class = getattr(loss, "name", None) == "one_class"
    if data.inlier is not None and not one_class:
        raise PipelineError(
            "data.inlier",
            "only used with the one_class loss",
            data.inlier,
            f"no data.inlier with the loss {loss.name!r}",
        )
    if one_class and (bank.precomputed is not None or bank.precomputed_factors is not None):
        raise PipelineError(
            "problem.loss",
            "the one_class loss reads features (its inliers chosen by data.inlier)",
            loss.name,
            "data.builtin or data.train with kernels described by kernels.bank or kernels.preset",
        )
    return one_class


def _split_inliers(data: DataSettings, ds: Any) -> tuple[Any, Any]:
    """One-class data split: the inliers (level +1) by ``data.test_size``, every outlier in the test part."""
    import numpy as np
    import scipy.sparse as sp

    y = np.asarray(ds.y)
    ins, outs = np.flatnonzero(y == 1.0), np.flatnonzero(y != 1.0)
    inliers = replace(ds, X=ds.X[ins], y=y[ins])
    train, test = _split(data, inliers, None, "regression")
    if outs.size == 0:
        return train, test
    if test is None:
        test = replace(ds, X=ds.X[outs], y=y[outs])
    else:
        X = sp.vstack([test.X, ds.X[outs]], format="csr") if sp.issparse(ds.X) else np.vstack([test.X, ds.X[outs]])
        test = replace(test, X=X, y=np.concatenate([test.y, y[outs]]))
    return train, test


def _inlier_levels(data: DataSettings, y: Any) -> np.ndarray:
    """The one-class levels of labels ``y``: +1 for ``data.inlier`` (every row without it), -1 for the others."""
    import numpy as np

    y = np.asarray(y)
    if data.inlier is None:
        return np.ones(y.shape[0])
    v = data.inlier
    labels = [plain(c) for c in np.unique(y)]

    def same(c: Any) -> bool:
        if not isinstance(v, str) and not isinstance(c, str):
            return float(v) == float(c)
        return str(v) == (c if isinstance(c, str) else f"{c:g}")

    hit = [c for c in labels if same(c)]
    if not hit:
        raise not_among("data.inlier", "is not one of the labels of the data", v, [label_text(c) for c in labels])
    return np.where(np.array([same(plain(c)) for c in y]), 1.0, -1.0)


def _pop_column(ds: Any, name: str) -> tuple[Any, np.ndarray]:
    """``ds`` without the feature column ``name``, and that column (float64)."""
    import numpy as np
    import scipy.sparse as sp

    names = list(ds.feature_names)
    j = names.index(name)
    col = ds.X[:, j]
    col = np.asarray(col.toarray() if sp.issparse(col) else col, dtype=np.float64).ravel()
    return _keep_columns(ds, [k for k in range(len(names)) if k != j]), col


def _keep_columns(ds: Any, keep: list[int]) -> Any:
    """``ds`` with the feature columns ``keep`` only."""
    import numpy as np
    import scipy.sparse as sp

    X = ds.X[:, keep]
    if not sp.issparse(X):
        X = np.ascontiguousarray(X)
    names = list(ds.feature_names)
    return replace(ds, X=X, feature_names=[names[j] for j in keep])


def _subsample(data: DataSettings, train: Any, task: str) -> Any:
    from ..data import DataError, train_test_split

    n = train.n_samples
    size = data.train_size if isinstance(data.train_size, float) else int(data.train_size)  # type: ignore[arg-type]
    if isinstance(size, int) and size >= n:
        if size > n:
            raise PipelineError(
                "data.train_size",
                f"larger than the {n} training rows available",
                data.train_size,
                f"a row count < {n} or a fraction",
            )
        return train
    rest = (n - size) if isinstance(size, int) else (1.0 - size)
    try:
        part, _ = train_test_split(train, test_size=rest, seed=data.seed + 1, stratify=task == "classification")
    except DataError as exc:
        raise PipelineError(
            "data.train_size", f"cannot subsample: {strip_prefix(str(exc), train.name)}", data.train_size
        ) from None
    return part


def _retarget(data: DataSettings, ds: Any) -> Any:
    """``data.target`` on a builtin set: make a feature column (or ``y``) the target."""
    import numpy as np
    import scipy.sparse as sp

    target = data.target
    columns = list(ds.feature_names) + ["y"]
    if target == "y":
        return ds
    if target not in columns:
        raise not_among("data.target", f"no such column in builtin {ds.name!r}", target, columns)
    if sp.issparse(ds.X):
        raise PipelineError("data.target", f"builtin {ds.name!r} is sparse; only 'y' can be the target", target, "y")
    table = replace(ds, X=np.column_stack([ds.X, ds.y]), feature_names=columns)
    retargeted, y = _pop_column(table, target)
    retargeted.y = y
    return retargeted


def _drop(data: DataSettings, ds: Any, key: str = "data.drop") -> Any:
    if not data.drop:
        return ds
    names = list(ds.feature_names)
    for c in data.drop:
        if c not in names:
            raise not_among(key, f"no feature column {c!r} to drop", c, names)
    return _keep_columns(ds, [j for j, n in enumerate(names) if n not in data.drop])


def _given_data(
    data: DataSettings, loss: Any, key: str, shown: str, arrays: str, y: Any, y_test: Any, own_test: bool, **given: Any
) -> Data:
    """Given kernels or factors as :class:`Data`: the labels encoded, and the NPZ's own test part ``arrays``
    (where ``data.test_size`` has no use) or the rows split."""
    import numpy as np

    from ..data import Dataset

    enc, y = encode_labels(loss, data, y)
    if own_test:
        y_test = encode_test_labels(enc, loss, y_test, key, repr(shown))
        if "test_size" in data.model_fields_set and data.test_size:
            raise PipelineError(
                "data.test_size",
                f"not used: the NPZ has its own {arrays}",
                data.test_size,
                f"no data.test_size with {arrays}",
            )
    N = int(y.shape[0])
    out = Data(y_train=y, y_test=y_test, name=Path(shown).stem, task=loss.task, **given)
    if not own_test and data.test_size:
        ds = Dataset(X=np.arange(N, dtype=np.float64)[:, None], y=y, feature_names=["index"], name=shown)
        tr, te = _split(data, ds, enc, loss.task)
        out = fold(out, tr.X[:, 0].astype(np.intp), te.X[:, 0].astype(np.intp))
    return weigh(out, data, enc, None)


def _load_precomputed(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """``kernels.precomputed``: checked by :meth:`KernelBank.from_npz`, split (not normalised) here."""
    from ..kernels import BankError, KernelBank

    path, key = bank.precomputed, "kernels.precomputed"
    assert path is not None
    shown = bank.shown(key)

    def fail(text: str) -> PipelineError:
        if "normaliz" in text and "diagonal" in text:
            return PipelineError(
                "kernels.normalize", text, bank.normalize, "trace or none (or add K_test_diag to the NPZ)"
            )
        return PipelineError(key, text, shown=repr(shown), allowed=NPZ_ALLOWED)

    try:
        # checked and loaded raw: the normalisation is computed on the training part (prepare)
        pre = KernelBank.from_npz(path, normalize="none")
    except BankError as exc:
        raise fail(strip_prefix(one_line(str(exc)), str(path))) from None
    Kt = pre.K_test
    if Kt is not None and pre.y_test is None:
        raise PipelineError(
            key, "has K_test without y_test", shown=repr(shown), allowed="both K_test and y_test, or neither"
        )
    if bank.normalize == "diagonal" and Kt is not None and pre.test_diag is None:
        raise fail(
            "normalize='diagonal' needs the array K_test_diag (M, N_test) with the test points' own k(x, x) to "
            "normalise K_test"
        )
    return _given_data(
        data,
        loss,
        key,
        shown,
        "K_test",
        pre.y_train,
        pre.y_test,
        Kt is not None,
        X_train=None,
        K_train=pre.bank.K,
        K_test=Kt,
        kernel_names=list(pre.bank.names),
        test_diag=pre.test_diag,
    )


def _load_precomputed_factors(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """``kernels.precomputed_factors``: checked by :func:`~mklkit.kernels.load_precomputed_factors`
    (headers against ``kernels.memory_budget`` first), the rows split (not normalised) here."""
    from ..kernels import BankError, load_precomputed_factors

    path, key = bank.precomputed_factors, "kernels.precomputed_factors"
    assert path is not None
    shown = bank.shown(key)
    try:
        pre = load_precomputed_factors(path, memory_budget=bank.budget, normalize=bank.normalize)
    except BankError as exc:
        if exc.key == "memory_budget":
            given = bank.memory_budget
            raise PipelineError(
                "kernels.memory_budget",
                f"{shown}: {exc.problem}",
                given if given is not None else PipelineError.NO_VALUE,
                exc.allowed,
            ) from None
        text = strip_prefix(one_line(str(exc)), str(path))
        raise PipelineError(key, text, shown=repr(shown), allowed=FACTOR_NPZ_ALLOWED) from None
    return _given_data(
        data,
        loss,
        key,
        shown,
        "L_test",
        pre.y_train,
        pre.y_test,
        pre.L_test is not None,
        X_train=pre.L_train,
        X_test=pre.L_test,
        feature_names=[f"L{j}" for j in range(pre.L_train.shape[1])],
        kernel_names=list(pre.names),
        factor_starts=pre.starts,
    )
