r"""The one pipeline from data to a :class:`~mklkit.problem.Problem`.

``mklkit run``/``validate`` (through :class:`mklkit.spec.Spec`), ``mklkit
sweep`` (every fold), :mod:`mklkit.api` and the scikit-learn estimators all
go through this module::

    data source ──load──▶ Data ──fold/standardize──▶ Data
    bank settings ─┐                                   │
    problem settings ┼──── prepare() ◀─────────────────┘
    engine ─────────┘        │ probe: engine.supports on a tiny problem,
                             │        memory budget (train bank + test kernels)
                             ▼        before any kernel is built
                          Prepared: problem (the bank in the chosen
                          representation) + the test side (test kernels, or
                          the factor map of new points)

Every problem is raised as :class:`PipelineError`, whose ``key`` is the spec
key path (``data.target``, ``kernels.memory_budget``,
``kernels.bank[1].width``) and whose ``problem``, ``value`` and ``allowed``
are data: the spec layer prefixes the file, the estimators translate the key
into their parameter name.  No message text is parsed anywhere.

Defaults (one table, :data:`DEFAULTS`; ``docs/specs.md`` and ``docs/api.md``
show it).
"""
from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .components.params import did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .components.base import Loss, Regularizer
    from .engines.base import Engine
    from .problem import Problem

__all__ = [
    "DEFAULTS",
    "REPRESENTATIONS",
    "parse_bytes",
    "PipelineError",
    "DataSettings",
    "Representation",
    "BankSettings",
    "ProblemSettings",
    "CVSettings",
    "Data",
    "TestSide",
    "Prepared",
    "load_data",
    "array_data",
    "gram_data",
    "make_folds",
    "fold",
    "standardize",
    "check_memory",
    "check_support",
    "probe_problem",
    "prepare",
    "kernel_resolver",
]

logger = logging.getLogger(__name__)

_MISSING: Any = object()

#: Defaults of the settings, shared by specs and estimators (``docs/specs.md``).
DEFAULTS: dict[str, Any] = {
    "data.test_size": 0.2,
    "data.seed": 0,
    "data.standardize": True,
    "kernels.normalize": "trace",
    "kernels.representation": "array",
    "problem.regularizer": "l1",
    "problem.C": 1.0,
    "problem.bias": True,
    "engine.name": "spicy",
    "cv.folds": 5,
    "cv.test_size": 0.2,
    "cv.seed": 0,
}

#: Where the Gram bank lives: one (M, N, N) array, kernel shards on Dask
#: workers (:class:`~mklkit.kernels.sharded.ShardedBank`), or factors
#: :math:`K_m = L_mL_m^\top` (:class:`~mklkit.kernels.factor.FactorBank`).
REPRESENTATIONS: tuple[str, ...] = ("array", "sharded", "factor")


def _show(value: Any, limit: int = 80) -> str:
    """A short one-line rendering of an offending value."""
    if isinstance(value, Path):
        value = str(value)
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def one_line_error(head: str, shown: str | None, allowed: str | None) -> str:
    """``<head>; got <shown>; allowed: <allowed>`` (the parts that are given), on one line."""
    parts = [head]
    if shown is not None:
        parts.append(f"got {shown}")
    if allowed:
        parts.append(f"allowed: {allowed}")
    return _one_line("; ".join(parts))


class PipelineError(ValueError):
    """A problem with the data, the bank or the problem settings, with its key as data.

    ``str(err)`` reads ``<key>: <problem>; got <value>; allowed: <allowed>``.

    Attributes
    ----------
    key : str
        Spec key path (``data.target``, ``kernels.bank[1].width``); the
        estimators map it to their parameter name.
    problem : str
    value : Any
        The offending value (:attr:`has_value` tells whether there is one).
    shown : str or None
        How the value is shown (``repr`` of it, or a path as written).
    allowed : str or None
    """

    NO_VALUE: Any = _MISSING

    def __init__(self, key: str, problem: str, value: Any = _MISSING, allowed: str | None = None,
                 *, shown: str | None = None) -> None:
        self.key = key
        self.problem = _one_line(problem)
        self.has_value = value is not _MISSING or shown is not None
        self.value = None if value is _MISSING else value
        self.shown = _one_line(shown) if shown is not None else (_show(value) if self.has_value else None)
        self.allowed = _one_line(allowed) if allowed else None
        super().__init__(self.message())

    def message(self, key: str | None = None, problem: str | None = None) -> str:
        """The one-line message, with ``key`` (and ``problem``) in place of the own ones."""
        key = self.key if key is None else key
        return one_line_error(f"{key}: {problem or self.problem}" if key else (problem or self.problem),
                              self.shown if self.has_value else None, self.allowed)

    def __str__(self) -> str:
        return self.message()


def _bank_error(exc: Exception, base: str) -> PipelineError:
    """A :class:`~mklkit.kernels.bank.BankError` as a PipelineError under ``base``, from its data."""
    key = getattr(exc, "key", None) or base
    if key.startswith("bank"):
        key = "kernels." + key
    elif base.startswith("kernels.") and not key.startswith("kernels"):
        key = f"{base}.{key}" if getattr(exc, "key", None) else base
    problem = getattr(exc, "problem", None) or _one_line(str(exc))
    allowed = getattr(exc, "allowed", None)
    if getattr(exc, "has_value", False):
        return PipelineError(key, problem, exc.value, allowed)  # type: ignore[attr-defined]
    return PipelineError(key, problem, allowed=allowed)


_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}


def parse_bytes(value: Any) -> int:
    """``4GiB`` -> 4294967296; ``512MB`` -> 512000000; ints are bytes.  Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(value)
        return int(value)
    if not isinstance(value, str):
        raise ValueError(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(value)
    n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if n <= 0:
        raise ValueError(value)
    return int(n)


# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DataSettings:
    """Where the examples come from and how they are split (the spec's ``data:``).

    ``given`` maps key paths of file paths to the path as written (messages
    show that); ``explicit`` names the keys that were given.
    """

    builtin: str | None = None
    train: Path | None = None
    test: Path | None = None
    format: str | None = None
    target: str | None = None
    drop: tuple[str, ...] = ()
    test_size: float | int = DEFAULTS["data.test_size"]
    train_size: float | int | None = None
    seed: int = DEFAULTS["data.seed"]
    standardize: bool = DEFAULTS["data.standardize"]
    explicit: frozenset[str] = frozenset()
    given: Mapping[str, str] = field(default_factory=dict)

    def shown(self, key: str) -> str:
        """A file path as written (``key`` is ``data.train``, ``data.test``)."""
        if key in self.given:
            return self.given[key]
        return str(getattr(self, key.split(".")[-1]))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in ("builtin", "train", "test", "format", "target"):
            v = getattr(self, k)
            if v is not None:
                out[k] = str(v) if isinstance(v, Path) else v
        if self.drop:
            out["drop"] = list(self.drop)
        out.update(test_size=self.test_size, train_size=self.train_size, seed=self.seed,
                   standardize=self.standardize)
        return out


@dataclass(frozen=True)
class Representation:
    """How the bank is held (the spec's ``kernels.sharded`` / ``kernels.factor``).

    Attributes
    ----------
    kind : {"array", "sharded", "factor"}
    scheduler : str or distributed.Client, optional
        ``sharded``: the Dask scheduler address (or a client).
    rank, tol, method, seed
        ``factor``: the settings of :func:`~mklkit.kernels.factorize.build_factor_bank`.
    """

    kind: str = "array"
    scheduler: Any = None
    rank: int | None = None
    tol: float = 1e-3
    method: str = "auto"
    seed: int = 0

    def to_dict(self) -> dict[str, Any] | None:
        if self.kind == "sharded":
            return {"scheduler": self.scheduler if isinstance(self.scheduler, str) else "client"}
        if self.kind == "factor":
            return {"rank": self.rank, "tol": self.tol, "method": self.method, "seed": self.seed}
        return None

    def check(self, root: str = "kernels.factor") -> None:
        """Validate the factor settings (``rank``, ``tol``, ``method``, ``seed``) before any data work."""
        if self.kind != "factor":
            return
        from .kernels.factorize import check_settings

        try:
            check_settings(self.rank, self.tol, self.method, self.seed, root=root)
        except ValueError as exc:
            raise _bank_error(exc, root) from None


@dataclass(frozen=True)
class BankSettings:
    """The kernels (the spec's ``kernels:``): a preset, bank entries, or precomputed kernels."""

    preset: str | None = None
    bank: tuple[Any, ...] | None = None
    precomputed: Path | None = None
    normalize: str = DEFAULTS["kernels.normalize"]
    memory_budget: int | None = None
    memory_budget_given: Any = None
    representation: Representation = field(default_factory=Representation)
    given: Mapping[str, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        if self.precomputed is not None:
            return "precomputed"
        return "preset" if self.preset is not None else "bank"

    @property
    def entries(self) -> Any:
        """The description :func:`~mklkit.kernels.bank.expand_bank` takes."""
        return self.preset if self.preset is not None else [dict(e) if isinstance(e, Mapping) else e
                                                            for e in (self.bank or ())]

    @property
    def key(self) -> str:
        """The spec key of the description (errors name it)."""
        return "kernels.preset" if self.preset is not None else "kernels.bank"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.preset is not None:
            out["preset"] = self.preset
        if self.bank is not None:
            out["bank"] = [dict(e) if isinstance(e, Mapping) else e for e in self.bank]
        if self.precomputed is not None:
            out["precomputed"] = str(self.precomputed)
        out["normalize"] = self.normalize
        out["memory_budget"] = self.memory_budget_given
        rep = self.representation.to_dict()
        if rep is not None:
            out[self.representation.kind] = rep
        return out


@dataclass(frozen=True)
class ProblemSettings:
    """Loss, regularizer (validated component instances), C, bias (the spec's ``problem:``)."""

    loss: Loss
    regularizer: Regularizer
    C: float = DEFAULTS["problem.C"]
    bias: bool = DEFAULTS["problem.bias"]

    def to_dict(self) -> dict[str, Any]:
        return {"loss": component_dict(self.loss), "regularizer": component_dict(self.regularizer),
                "C": self.C, "bias": self.bias}


def component_dict(comp: Any) -> dict[str, Any]:
    return {"name": comp.name, **comp.get_params()}


@dataclass(frozen=True)
class CVSettings:
    """K-fold cross-validation or repeated random splits of the training part (the sweep's ``cv:``).

    ``kind="folds"``: ``n`` stratified (classification) folds, shuffled with
    ``seed``.  ``kind="splits"``: ``n`` random splits, split ``i`` holding
    out ``test_size`` with seed ``seed + i`` exactly as ``mklkit run`` does
    with ``data.seed = seed + i``.
    """

    kind: str = "folds"
    n: int = DEFAULTS["cv.folds"]
    test_size: float | int | None = None
    seed: int = DEFAULTS["cv.seed"]

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "folds":
            return {"folds": self.n, "seed": self.seed}
        return {"splits": self.n, "test_size": self.test_size, "seed": self.seed}

    def describe(self) -> str:
        if self.kind == "folds":
            return f"{self.n}-fold cross-validation (seed {self.seed})"
        size = f"{self.test_size:g}" if isinstance(self.test_size, float) else f"{self.test_size} rows"
        return f"{self.n} random splits holding out {size} (seeds {self.seed}..{self.seed + self.n - 1})"


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------
@dataclass
class Data:
    """Training/test data after loading, label checks, splitting and scaling.

    Feature data: ``X_train``/``X_test``.  Precomputed kernels: ``K_train``
    (M, N, N) and ``K_test`` (M, N_test, N), raw or normalised
    (``normalized``), ``X_*`` are ``None``.  ``X_test``/``K_test``/``y_test``
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
    from .components.base import LabelError

    try:
        return loss.validate_labels(y)
    except LabelError as exc:
        from .plugins import get_registry

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


def _strip(text: str, *prefixes: str) -> str:
    """``text`` without a leading ``"<prefix>: "`` (data errors start with the file they read)."""
    for prefix in prefixes:
        if prefix and text.startswith(prefix + ": "):
            return text[len(prefix) + 2:]
    return text


def load_data(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """Load, check and split the data of the settings (standardized when ``data.standardize``).

    Precomputed kernels are loaded raw (normalised by :func:`prepare`, on the
    training part only).

    Raises
    ------
    PipelineError
    """
    import numpy as np

    from .data import DataError, detect_format, load_builtin, load_file, train_test_split

    task = loss.task
    if bank.precomputed is not None:
        return _load_precomputed(data, bank, loss)
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
    from .data import DataError, train_test_split

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
    (prediction).  Precomputed data are returned unchanged.
    """
    from .data import DataError, Standardizer

    if d.precomputed or d.X_train is None:
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

    from .data import Dataset

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

    from .data import Dataset

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


_NPZ_ALLOWED = ("an .npz with K_train (M, N, N) symmetric PSD, y_train (N,); optional K_test (M, N_test, N), "
                "y_test, names, K_test_diag")


def _load_precomputed(data: DataSettings, bank: BankSettings, loss: Any) -> Data:
    """``kernels.precomputed``: checked by :meth:`KernelBank.from_npz`, split (not normalised) here."""
    import numpy as np

    from .data import DataError, Dataset, train_test_split
    from .kernels import BankError, KernelBank

    path = bank.precomputed
    assert path is not None
    shown = bank.given.get("kernels.precomputed", str(path))
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
        if "test_size" in data.explicit and data.test_size:
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


def array_data(X: Any, y: Any, task: str, feature_names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Feature data given in memory (the estimators): ``X`` (N, d) dense or sparse, ``y`` checked by the caller."""
    import numpy as np

    d = int(X.shape[1])
    names = [str(n) for n in feature_names] if feature_names is not None else [f"x{j + 1}" for j in range(d)]
    return _contiguous_data(Data(X_train=X, y_train=np.asarray(y), X_test=None, y_test=None, feature_names=names,
                                 name=name, task=task, n_total=int(X.shape[0])))


def gram_data(K: Any, y: Any, task: str, names: Sequence[str] | None = None, name: str = "X") -> Data:
    """Precomputed training kernels (M, N, N) given in memory, not yet normalised."""
    import numpy as np

    K = np.asarray(K)
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
    from .data import DataError, Dataset, train_test_split

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


# ---------------------------------------------------------------------------
# Checks before anything is built
# ---------------------------------------------------------------------------
def check_memory(M: int, N: int, n_test: int, bank: BankSettings) -> dict[str, int]:
    """Refuse a bank and its test kernels larger than ``kernels.memory_budget`` before building.

    The run holds the training bank while it computes the test kernels: the
    budget is compared with that peak (:func:`~mklkit.kernels.estimate_peak_bytes`).
    A factor bank is checked by :func:`~mklkit.kernels.build_factor_bank`
    itself; a sharded bank per worker by :meth:`ShardedBank.build`.
    """
    from .kernels import DEFAULT_MEMORY_BUDGET, estimate_bytes, estimate_peak_bytes, format_bytes

    need = {"train": estimate_bytes(M, N), "test": estimate_bytes(M, N, n_test) if n_test else 0,
            "peak": estimate_peak_bytes(M, N, n_test)}
    if bank.representation.kind != "array":
        return need
    budget = bank.memory_budget or DEFAULT_MEMORY_BUDGET
    if need["peak"] > budget:
        test = f", held while its test kernels ({M} x {n_test} x {N}) are computed" if n_test else ""
        given = bank.memory_budget_given if bank.memory_budget is not None else None
        raise PipelineError(
            "kernels.memory_budget",
            f"the kernel bank needs about {format_bytes(need['peak'])} ({M} kernels x {N} x {N} float64{test}, "
            f"plus working space), more than the budget of {format_bytes(budget)}",
            given if given is not None else _MISSING,
            "a larger memory budget, fewer kernels, or fewer samples",
            shown=None if given is not None else format_bytes(budget) + " (default)",
        )
    return need


def _probe_rows(y: np.ndarray, n: int = 6) -> np.ndarray:
    """A few row indices that include every label value (both classes)."""
    import numpy as np

    rows: list[int] = [int(np.flatnonzero(y == v)[0]) for v in np.unique(y)[:n]]
    for i in range(min(n, y.shape[0])):
        if len(rows) >= n:
            break
        if i not in rows:
            rows.append(i)
    return np.array(sorted(rows), dtype=np.intp)


def probe_problem(y: np.ndarray, M: int, problem: ProblemSettings, representation: str = "array") -> Problem:
    """A tiny problem with the real loss, regularizer, C, bias, labels and representation, for ``supports``."""
    import numpy as np

    from .problem import Problem

    rows = _probe_rows(y)
    n = rows.size
    K = np.empty((max(M, 1), n, n))
    K[:] = np.eye(n) / n
    return Problem(K=K, y=y[rows], loss=problem.loss, regularizer=problem.regularizer, C=problem.C,
                   bias=problem.bias, extra={"representation": representation})


def check_support(engine: Engine, problem: Problem, key: str = "engine.name") -> None:
    """Refuse an engine that cannot solve ``problem`` (its reason, and the engines that can)."""
    reason = engine.supports(problem)
    representation = problem.representation
    if reason is None and representation not in getattr(engine, "representations", ("array",)):
        reason = (f"it works on Gram banks held as one array, not as a {representation} bank "
                  f"(its representations: {', '.join(getattr(engine, 'representations', ('array',)))})")
    if reason is None:
        return
    from .plugins import get_registry

    ok = [n for n in get_registry().engines_supporting(problem, exclude=engine.name)
          if representation in getattr(get_registry().get("engine", n), "representations", ("array",))]
    combo = f"loss {problem.loss.name!r} x regularizer {problem.regularizer.name!r}"
    if representation != "array":
        combo += f" on a {representation} bank"
    allowed = (f"an engine that supports {combo}: {', '.join(ok)}" if ok
               else f"another loss or regularizer (no installed engine supports {combo})")
    raise PipelineError(key, f"engine {engine.name!r} cannot solve this problem: {_one_line(reason)}",
                        engine.name, allowed)


def kernel_resolver() -> Callable[[str], type]:
    """Kernel functions are looked up in the plugin registry (with the names it knows in errors)."""
    from .kernels.bank import UnknownName
    from .plugins import UnknownComponentError, get_registry

    reg = get_registry()

    def resolve(name: str) -> type:
        try:
            return reg.get("kernel", name)
        except UnknownComponentError as exc:
            raise UnknownName(exc.args[0] if exc.args else str(exc), reg.names("kernel")) from None

    return resolve


# ---------------------------------------------------------------------------
# Prepared problem
# ---------------------------------------------------------------------------
@dataclass
class TestSide:
    """What predictions on the test part need: test kernels or the factor map's test rows.

    ``K`` (M, N_test, N) normalised like the training bank (``array`` and
    ``sharded`` banks, precomputed kernels); or, for a factor bank, ``X``
    (the test points) — predictions then go through
    :meth:`FactorBank.decision_function` with no N_test x N matrix.
    """

    K: np.ndarray | None = None
    X: Any = None

    def decision_function(self, result: Any, bank: Any) -> np.ndarray:
        """Test predictions of a solve result."""
        if self.K is not None:
            return result.decision_function(self.K)
        return bank.decision_function(self.X, result.alpha, result.bias)


@dataclass
class Prepared:
    """Everything an engine needs, plus the test side for evaluation: the one prepared type.

    Attributes
    ----------
    data : Data
    problem : Problem or None
        ``None`` when prepared with ``build=False`` (``mklkit validate``).
    bank : KernelBank, ShardedBank, FactorBank or None
        The bank object (it knows how to map new points: ``cross``,
        ``normalize_cross`` or ``transform``).
    test : TestSide or None
        ``None`` without a test part.
    kernel_names : list of str
    n_kernels : int
    representation : str
    timings : dict
        ``data_s``, ``bank_s`` seconds.
    memory : dict
        Estimated bytes of the training bank (``train``), the test kernels
        (``test``) and their ``peak`` (checked against the budget).
    """

    data: Data
    problem: Problem | None
    bank: Any
    test: TestSide | None
    kernel_names: list[str]
    n_kernels: int
    representation: str = "array"
    timings: dict[str, float] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)
    #: what it was prepared from (the :class:`~mklkit.spec.Spec` of ``mklkit run``), or ``None``
    spec: Any = None

    @property
    def K_test(self) -> np.ndarray | None:
        """Test kernels (M, N_test, N), when the test side has them."""
        return None if self.test is None else self.test.K

    def with_C(self, C: float) -> "Prepared":
        """The same prepared problem at another C (the bank is shared)."""
        assert self.problem is not None
        return replace(self, problem=replace(self.problem, C=C))

    def train_decision(self, result: Any) -> np.ndarray:
        """Training predictions of a solve result, in the bank's representation."""
        assert self.problem is not None
        if self.representation == "array":
            return result.decision_function(self.problem.K)
        import numpy as np

        act = np.asarray(result.active_set, dtype=np.int64)
        f = self.problem.bank.combine(np.asarray(result.alpha, dtype=np.float64), act) if act.size else 0.0
        return np.zeros(self.problem.n_samples) + f + float(result.bias)

    def test_decision(self, result: Any) -> np.ndarray | None:
        """Test predictions of a solve result (``None`` without a test part)."""
        return None if self.test is None else self.test.decision_function(result, self.bank)

    def close(self) -> None:
        """Release a bank held elsewhere (the shards of a ShardedBank)."""
        close = getattr(self.bank, "close", None)
        if close is not None and self.representation == "sharded":
            close()


def _expand(bank: BankSettings, d: Data) -> list[Any]:
    from .kernels import BankError, expand_bank

    try:
        return expand_bank(bank.entries, d.n_features, d.feature_names, resolve=kernel_resolver(), root=bank.key)
    except BankError as exc:
        raise _bank_error(exc, bank.key) from None


def _client(rep: Representation) -> Any:
    if rep.scheduler is not None and not isinstance(rep.scheduler, str):
        return rep.scheduler
    from ._dask import connect

    def error(key: str, problem: str, value: Any, allowed: str) -> PipelineError:
        return PipelineError("kernels.sharded.scheduler", problem, value, allowed)

    return connect(str(rep.scheduler), error)


def _build_bank(d: Data, bank: BankSettings, progress: Callable[[dict[str, Any]], Any] | None) -> tuple[Any, TestSide | None]:
    """The training bank in its representation, and the test side."""
    import numpy as np

    from .kernels import BankError, KernelBank

    rep = bank.representation
    budget = bank.memory_budget
    try:
        if rep.kind == "factor":
            from .kernels import build_factor_bank

            fb = build_factor_bank(bank.entries, d.X_train, rank=rep.rank, tol=rep.tol, method=rep.method,
                                   seed=rep.seed, normalize=bank.normalize, memory_budget=budget,
                                   resolve=kernel_resolver(), feature_names=d.feature_names,
                                   root="kernels.factor")
            return fb, (TestSide(X=d.X_test) if d.X_test is not None else None)
        if rep.kind == "sharded":
            from .kernels.sharded import ShardedBank

            sb = ShardedBank.build(_client(rep), d.X_train, bank.entries, normalize=bank.normalize,
                                   resolve=kernel_resolver(), feature_names=d.feature_names, root=bank.key)
            K_test = sb.cross(d.X_test, memory_budget_bytes=budget) if d.X_test is not None else None
            return sb, (TestSide(K=K_test) if K_test is not None else None)
        kb = KernelBank.build(d.X_train, bank.entries, normalize=bank.normalize, memory_budget_bytes=budget,
                              progress=progress, resolve=kernel_resolver(), feature_names=d.feature_names,
                              root=bank.key)
        K_test = kb.cross(d.X_test, memory_budget_bytes=budget, progress=progress) if d.X_test is not None else None
        return kb, (TestSide(K=np.ascontiguousarray(K_test, dtype=np.float64)) if K_test is not None else None)
    except BankError as exc:
        raise _bank_error(exc, "kernels.factor" if rep.kind == "factor" and isinstance(exc, _factor_error()) else bank.key) from None


def _factor_error() -> type:
    from .kernels import FactorError

    return FactorError


def _precomputed_bank(d: Data, bank: BankSettings) -> tuple[Any, TestSide | None]:
    """Normalise raw precomputed kernels on the training part; the test kernels the same way."""
    from .kernels import BankError, KernelBank

    key = "kernels.precomputed"
    shown = bank.given.get(key, str(bank.precomputed) if bank.precomputed is not None else "X")
    try:
        kb = KernelBank.from_precomputed(d.K_train, names=d.kernel_names, normalize=bank.normalize,
                                         check_psd=False, source=shown, copy=False)
        K_test = d.K_test
        if K_test is not None:
            if bank.normalize == "diagonal" and d.test_diag is None:
                raise PipelineError("kernels.normalize", "unit-diagonal normalisation of test kernels needs "
                                    "the test points' own k(x, x)", bank.normalize,
                                    "trace or none (or add K_test_diag to the NPZ)")
            kb.normalize_cross(K_test, d.test_diag)
    except BankError as exc:
        raise PipelineError(key, _strip(_one_line(str(exc)), shown), shown=repr(shown), allowed=_NPZ_ALLOWED) from None
    return kb, (TestSide(K=K_test) if K_test is not None else None)


def prepare(
    d: Data,
    bank: BankSettings,
    problem: ProblemSettings,
    engine: Engine,
    *,
    build: bool = True,
    progress: Callable[[dict[str, Any]], Any] | bool | None = None,
    engine_key: str = "engine.name",
) -> Prepared:
    """The bank of ``bank`` on ``d`` and the :class:`Problem`, checked before any kernel is built.

    Order: expand the description on the data's columns (no Gram matrices),
    check the memory budget (training bank + test kernels), ask the engine
    whether it supports the loss, regularizer and representation on a tiny
    probe problem; then (``build=True``) build the bank in its
    representation, the test side, and the problem.

    Parameters
    ----------
    d : Data
        From :func:`load_data`, :func:`fold`, :func:`array_data` or :func:`gram_data`.
    bank, problem : settings
    engine : Engine
    build : bool
        ``False``: stop after the checks (``mklkit validate``); ``problem`` is ``None``.
    progress : callable or bool, optional
        Progress of the bank build (``KernelBank.build``'s ``progress``).
    engine_key : str
        The key that names the engine in errors (``engine.name`` or ``solver.name``).

    Raises
    ------
    PipelineError
    """
    from .problem import Problem

    t0 = time.perf_counter()
    rep = bank.representation.kind
    if d.precomputed:
        assert d.K_train is not None
        M = int(d.K_train.shape[0])
        if rep != "array":
            raise PipelineError(f"kernels.{rep}", "precomputed kernels are held as one array",
                                bank.representation.to_dict(), "no kernels.sharded or kernels.factor with "
                                "kernels.precomputed")
        names = list(d.kernel_names or [f"k{m}" for m in range(M)])
        check_support(engine, probe_problem(d.y_train, M, problem), engine_key)
        if not build:
            return Prepared(d, None, None, None, names, M, rep, {"bank_s": 0.0})
        kb, test = _precomputed_bank(d, bank)
        obj: Any = kb
        K: Any = kb.K
        names = list(kb.names)
        memory: dict[str, int] = {}
    else:
        bank.representation.check()
        specs = _expand(bank, d)
        names = [k.label for k in specs]
        M = len(specs)
        memory = check_memory(M, d.n_train, d.n_test, bank)
        check_support(engine, probe_problem(d.y_train, M, problem, rep), engine_key)
        if not build:
            return Prepared(d, None, None, None, names, M, rep, {"bank_s": 0.0}, memory)
        obj, test = _build_bank(d, bank, progress)
        K = obj.K if rep == "array" else obj
        names = list(obj.names) if rep != "factor" else list(obj.factor_map.names)
    t_bank = time.perf_counter() - t0
    logger.debug("built %d kernels (%s) on %d points in %.2f s", len(names), rep, d.n_train, t_bank)
    prob = Problem(K=K, y=d.y_train, loss=problem.loss, regularizer=problem.regularizer, C=problem.C,
                   bias=problem.bias, kernel_names=names)
    check_support(engine, prob, engine_key)
    return Prepared(d, prob, obj, test, names, len(names), rep, {"bank_s": t_bank}, memory)
