"""The shared machinery of the estimators: validation, the bank through the pipeline, solving, prediction."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import numbers
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from .. import pipeline
from .._interrupts import interrupt_guard
from .._multiclass import BinaryTask
from ..components.base import CLASSIFICATION, REGRESSION, Component
from ..components.params import ParamError
from ..pipeline import (
    BankSettings,
    PipelineError,
    ProblemSettings,
    Representation,
    check_support,
    new_points,
    parse_bytes,
    problem_at,
)
from ..pipeline.heldout import path_decides, path_engine, select_C
from ..pipeline.kernel_subset import (
    kernels_on_all_features,
    prefer_subset,
    restrict_result,
    subset_problem,
    supports_subset,
    widen_result,
)
from ..pipeline.refine import refine_prepared
from ..pipeline.settings import AUTO_C_SCALE, C_NAMES, FactorSettings, ShardedSettings, auto_C, kernel_resolver
from ..plugins import get_registry
from ..result import TrivialModelWarning, trivial_message, warn_if_trivial
from ._path import MKLPath, pack_results, unpack_results

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(estimator: Any, *args: Any, **kwargs: Any) -> Any:
        return estimator._validate_data(*args, **kwargs)

logger = logging.getLogger("mklkit.estimators")


#: Gaussian widths on all features, as multiples of sqrt(d) (standardised
#: features have squared distances of about 2d).
DEFAULT_ALL_WIDTH_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Gaussian widths on every single (standardised) feature.
DEFAULT_EACH_WIDTHS = (0.5, 1.0, 2.0)
#: Polynomial degrees on all features.
DEFAULT_DEGREES = (1, 2)

_NORMALIZE = ("auto", "trace", "diagonal", "none")
_MULTICLASS = ("ovr", "ovo")


def feature_kinds(X: Any) -> np.ndarray:
    """Per column of ``X`` (dense or sparse): ``"constant"`` (one value), ``"binary"`` (two values:
    indicators, yes/no codes) or ``"real"`` (more), in one pass over the data."""
    if sp.issparse(X):
        A = sp.csc_matrix(X)
        N = A.shape[0]
        kinds = np.full(A.shape[1], "real", dtype=object)
        for j in range(A.shape[1]):
            data = A.data[A.indptr[j]:A.indptr[j + 1]]
            values = np.unique(data if A.indptr[j + 1] - A.indptr[j] == N else np.append(data, 0.0))
            kinds[j] = "constant" if values.size == 1 else "binary" if values.size == 2 else "real"
        return kinds
    A = np.asarray(X)
    first = A[0]
    other = A != first                        # (N, d): where a column leaves its first value
    moves = other.any(axis=0)
    second = A[np.argmax(other, axis=0), np.arange(A.shape[1])]
    two = np.all(~other | (A == second), axis=0)
    return np.where(~moves, "constant", np.where(two, "binary", "real")).astype(object)


def default_kernels(n_features: int, X: Any = None) -> list[dict[str, Any]]:
    r"""The kernel bank of ``kernels="auto"`` for ``n_features`` standardised features.

    * Gaussian kernels on all features with widths
      :math:`\sigma = s\sqrt d`, :math:`s \in \{0.25, 0.5, 1, 2, 4\}`
      (standardised features have :math:`E\|x - z\|^2 = 2d`, so these span
      the useful range whatever ``d``);
    * polynomial kernels :math:`(\langle x, z\rangle + 1)^p`, ``p = 1, 2``,
      on all features;
    * Gaussian kernels with widths 0.5, 1 and 2 on every single feature (they
      let the regularizer select features).

    That is :math:`7 + 3d` kernels: 187 for sonar (d = 60) against 1647 for
    the ``simplemkl`` preset, at the same cross-validated accuracy on the
    bundled UCI sets (``docs/api.md``).

    With the training features ``X`` (what the estimators pass) the kernels of
    single features follow what each feature is (:func:`feature_kinds`):

    * a feature with two values (an indicator) gets **one linear kernel**:
      every kernel on a two-valued feature is :math:`a + b\,[x = z]`, so its
      functions are a constant and the indicator whatever the kernel, and
      three widths would be three copies of one source (on w8a's 300
      indicators: 307 kernels instead of 907, each an exact factor of rank 1);
    * a constant feature gets none (its kernel is a constant, which the bias
      already is).

    The kernels on all features are always there.
    """
    return _default_bank(int(n_features), None if X is None else feature_kinds(X))


def _default_bank(d: int, kinds: np.ndarray | None) -> list[dict[str, Any]]:
    """:func:`default_kernels` for ``d`` features of the given kinds (``None``: all real)."""
    if d < 1:
        raise ValueError(f"n_features must be >= 1; got {d!r}")
    root = math.sqrt(d)
    bank: list[dict[str, Any]] = [
        {"function": "rbf", "width": [round(f * root, 6) for f in DEFAULT_ALL_WIDTH_FACTORS],
         "features": "all"},
        {"function": "poly", "degree": list(DEFAULT_DEGREES), "features": "all"},
    ]
    if kinds is None or np.all(kinds == "real"):
        return bank + [{"function": "rbf", "width": list(DEFAULT_EACH_WIDTHS), "features": "each"}]
    if kinds.size != d:
        raise ValueError(f"X has {kinds.size} features, n_features is {d}")
    # the kernels of single features in column order, a run of features of one kind in one entry
    previous = None
    for j in range(d):
        kind = kinds[j]
        if kind == "constant":
            continue
        if kind != previous:
            bank.append({"function": "linear", "features": []} if kind == "binary" else
                        {"function": "rbf", "width": list(DEFAULT_EACH_WIDTHS), "features": []})
        bank[-1]["features"].append([j])
        previous = kind
    return bank


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _registry() -> Any:
    return get_registry()


def _spec_name(spec: Any) -> str | None:
    """The component name a loss/regularizer/engine spec refers to."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        name = spec.get("name")
        return name if isinstance(name, str) else None
    return getattr(spec, "name", None)


def _check_C(C: Any, owner: str, key: str = "C", allow_auto: bool = False) -> float:
    allowed = "'auto', 'path', 'scale' or a finite number > 0" if allow_auto else "a finite number > 0"
    if isinstance(C, (bool, np.bool_)) or not isinstance(C, numbers.Real):
        raise ParamError(key, C, allowed, owner=owner)
    value = float(C)
    if not (value > 0.0 and math.isfinite(value)):
        raise ParamError(key, C, allowed, owner=owner)
    return value


def _check_choice(value: Any, key: str, choices: Sequence[str], owner: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ParamError(key, value, "one of " + ", ".join(repr(c) for c in choices), owner=owner)
    return value


def _check_budget(value: Any, owner: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return float(parse_bytes(value))
        except (TypeError, ValueError):
            raise ParamError("memory_budget", value, "None, a number of bytes > 0 or a size "
                             "such as '512MB' or '4GiB'", owner=owner) from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not value > 0:
        raise ParamError("memory_budget", value, "None, a number of bytes > 0 or a size "
                         "such as '512MB' or '4GiB'", owner=owner)
    return float(value)


def _strip_bank(bank: Any, keep: np.ndarray | None = None) -> Any:
    """A shallow copy of a KernelBank without its Gram matrices, restricted to ``keep``.

    What :meth:`KernelBank.cross` and :meth:`KernelBank.normalize_cross`
    need survives: the kernel specs, normalisation constants and training
    points.  ``K`` becomes an empty (M_keep, N, 0) array, so the copy pickles
    small.
    """
    new = copy.copy(bank)
    N = bank.n_samples
    if keep is None:
        keep = np.arange(bank.n_kernels)
    keep = np.asarray(keep, dtype=np.intp)
    new.K = np.empty((keep.size, N, 0))
    new.names = [bank.names[m] for m in keep]
    if bank.specs is not None:
        new.specs = [bank.specs[m] for m in keep]
    new.traces = np.asarray(bank.traces)[keep].copy()
    if bank.train_diag is not None:
        new.train_diag = np.asarray(bank.train_diag)[keep].copy()
    return new


def _updated_spec(spec: Any, updates: Mapping[str, Any]) -> Any:
    """A component spec with some parameters changed, in mapping or instance form."""

    if isinstance(spec, Component):
        return type(spec)(**{**spec.get_params(), **updates})
    if isinstance(spec, str):
        return {"name": spec, **updates}
    if isinstance(spec, Mapping):
        return {**spec, **updates}
    return spec  # invalid; fit reports it


@contextlib.contextmanager
def _verbosity(verbose: int) -> Iterator[None]:
    """Show mklkit's log records on stderr while ``verbose`` is set.

    ``verbose=1``: INFO (bank building, one line per engine iteration and per
    solve); ``verbose>=2``: DEBUG (the engines' own step details).  When the
    application has configured logging (the root logger has handlers), the
    records go there; otherwise a temporary stderr handler is attached.
    """
    if not verbose:
        yield
        return
    lg = logging.getLogger("mklkit")
    old_level = lg.level
    handler = None
    if not lg.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        lg.addHandler(handler)
    lg.setLevel(logging.INFO if int(verbose) <= 1 else logging.DEBUG)
    try:
        yield
    finally:
        lg.setLevel(old_level)
        if handler is not None:
            lg.removeHandler(handler)


# ---------------------------------------------------------------------------
# Prepared training data (shared by fit and fit_path)
# ---------------------------------------------------------------------------
@dataclass
class _FitState:
    prepared: Any                       # the pipeline's Prepared (None once the solves are done)
    bank: Any                           # what prediction needs: the bank without K (all kernels)
    tasks: list[BinaryTask]
    loss: Any
    regularizer: Any
    engine: Any
    kernels: Any                        # resolved bank entries or "precomputed"
    kernel_names: list[str]
    scaler: Any
    classes: np.ndarray | None
    n_features_in: int
    timings: dict[str, float] = field(default_factory=dict)
    task_C: dict[int, float] = field(default_factory=dict)  # per task: the C of its last solve
    selection: dict[int, Any] = field(default_factory=dict)  # per task: C="path"'s HeldoutPath
    representation: str = "array"
    target: tuple[float, float] = (0.0, 1.0)  # regression: the engines saw (y - offset) / scale
    approximation: dict[str, Any] | None = None  # a factor bank's FactorBank.approximation()
    refinement: Any = None              # the factors' refinement (mklkit.pipeline.refine.FactorRefinement)
    subset: dict[int, np.ndarray] = field(default_factory=dict)  # per task: the kernels kept (default bank)
    bank_choice: dict[int, dict[str, Any]] = field(default_factory=dict)  # per task: what chose them


@dataclass
class _Input:
    """The training input of a fit, validated: the pipeline's data and the settings of its bank."""

    data: Any                           # the pipeline's Data (labels of the first binary problem)
    y: np.ndarray                       # the labels as validated (rows of zero weight dropped)
    sw: np.ndarray | None               # the sample weights of those rows
    n_features_in: int
    kernels: Any                        # resolved bank entries or "precomputed"
    bank_settings: Any                  # the pipeline's BankSettings
    normalize: str                      # "auto" resolved


# ---------------------------------------------------------------------------
# Base estimator
# ---------------------------------------------------------------------------
class _BaseMKL(BaseEstimator):
    """Shared machinery of :class:`MKLClassifier` and :class:`MKLRegressor`."""

    _task: str = CLASSIFICATION

    # -- validation of the constructor arguments ------------------------------
    @property
    def _owner(self) -> str:
        return type(self).__name__

    def _precomputed(self) -> bool:
        return isinstance(self.kernels, str) and self.kernels == "precomputed"

    def _components(self) -> tuple[Any, Any, Any]:
        """Loss, regularizer and engine instances; errors say what is allowed."""
        from ..engines.base import Engine

        reg = _registry()
        owner = self._owner
        loss = reg.create("loss", self.loss)
        if loss.task != self._task:
            ok = [r.name for r in reg.registrations("loss") if r.cls.task == self._task]
            raise ParamError("loss", self.loss, f"a {self._task} loss (one of {', '.join(ok)})",
                             owner=owner)
        regularizer = reg.create("regularizer", self.regularizer)
        engine = reg.create("engine", self.engine)
        if self.engine_params is not None and not isinstance(self.engine_params, Mapping):
            raise ParamError("engine_params", self.engine_params,
                             "None or a mapping of engine options", owner=owner)
        updates = dict(self.engine_params or {})
        if self.tol is not None:
            updates["tol"] = self.tol
        if self.max_iter is not None:
            updates["max_iter"] = self.max_iter
        if updates:
            engine = type(engine)(**{**engine.get_params(), **updates})
        if not isinstance(engine, Engine):  # pragma: no cover - registry guarantees it
            raise ParamError("engine", self.engine, "an mklkit engine", owner=owner)
        return loss, regularizer, engine

    def _check_support(self, engine: Any, problem: Any) -> None:
        """The pipeline's engine check (:func:`mklkit.pipeline.check_support`), naming the ``engine`` parameter."""

        try:
            check_support(engine, problem)
        except PipelineError as exc:
            raise self._error(exc) from None

    def _error(self, exc: Any) -> ValueError:
        """A :class:`~mklkit.pipeline.PipelineError` as this estimator's one-line error (its parameter named)."""
        return ValueError(f"{self._owner}: {exc.message(key=_param_of(exc.key))}")

    def _warning_text(self, warning: Any) -> str:
        """A keyed warning (:class:`~mklkit.kernels.factorize.RankCapWarning`) in this estimator's words, as :meth:`_error`."""
        return f"{self._owner}: {warning.message(key=_param_of(warning.key))}"

    # -- data -----------------------------------------------------------------
    def _encode_targets(self, y: np.ndarray, sample_weight: np.ndarray | None = None
                        ) -> tuple[np.ndarray | None, list[BinaryTask]]:
        raise NotImplementedError

    def _representation(self) -> tuple[str, dict[str, Any]]:
        """The bank representation of the ``factor`` / ``scheduler`` parameters: its kind
        (``"auto"``, ``"array"``, ``"sharded"`` or ``"factor"``) and its BankSettings keys."""

        owner = self._owner
        factor, scheduler = getattr(self, "factor", None), getattr(self, "scheduler", None)
        if factor not in (None, False, "auto") and scheduler is not None:
            raise ParamError("scheduler", scheduler, "None when factor is given (one representation)", owner=owner)
        if scheduler is not None:
            return "sharded", {"sharded": ShardedSettings.model_construct(scheduler=scheduler)}
        if isinstance(factor, str) and factor == "auto":
            return "auto", {}
        if factor is None or factor is False:
            return "array", {"factor": False}
        if factor is True:
            factor = {}
        if not isinstance(factor, Mapping) or set(factor) - {"rank", "tol", "method", "seed", "refine"}:
            raise ParamError("factor", factor, "'auto', None/False (Gram matrices), True or a mapping with keys "
                             "rank, tol, method, seed, refine", owner=owner)
        settings = FactorSettings.model_construct(**dict(factor))
        try:
            Representation("factor", settings).check(root="factor")
        except PipelineError as exc:
            raise ValueError(f"{owner}: {exc}") from None
        return "factor", {"factor": settings}

    def _gram_input(self, X: Any) -> np.ndarray:
        """The training Gram matrices X, (N, N, M) (samples first, kernels last), as an (M, N, N) view."""
        X = np.asarray(X)
        if X.ndim != 3 or X.shape[0] != X.shape[1]:
            raise ValueError(
                f"{self._owner}: with kernels='precomputed', X must be the training Gram matrices of shape "
                f"(n_samples, n_samples, n_kernels) (samples on the first two axes, as scikit-learn's "
                f"splitters index a pairwise input); got shape {X.shape}")
        return np.moveaxis(X, 2, 0)

    def _checked_options(self) -> str:
        """Check ``normalize``, ``memory_budget``, ``bias``, ``standardize`` and ``verbose``; ``normalize`` as given."""
        owner = self._owner
        normalize = _check_choice(self.normalize, "normalize", _NORMALIZE, owner)
        _check_budget(self.memory_budget, owner)
        if not isinstance(self.bias, (bool, np.bool_)):
            raise ParamError("bias", self.bias, "True or False", owner=owner)
        if not (isinstance(self.standardize, (bool, np.bool_)) or (isinstance(self.standardize, str)
                                                                   and self.standardize == "auto")):
            raise ParamError("standardize", self.standardize, "'auto', True or False", owner=owner)
        if (isinstance(self.verbose, (bool, np.bool_))
                or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0):
            raise ParamError("verbose", self.verbose, "an integer >= 0", owner=owner)
        return normalize

    def _given_kernel_input(self, X: Any, y: Any, sample_weight: Any, normalize: str, kind: str) -> _Input:
        """``kernels='precomputed'``: the Gram matrices ``X`` and their labels and weights, checked."""
        owner = self._owner
        normalize = "none" if normalize == "auto" else normalize
        if normalize == "diagonal":
            raise ParamError("normalize", self.normalize, "'auto', 'none' or 'trace' with "
                             "kernels='precomputed' (unit-diagonal normalisation of test "
                             "kernels needs the test points' own k(x, x))", owner=owner)
        if kind not in ("array", "auto"):
            raise ParamError("factor" if kind == "factor" else "scheduler",
                             getattr(self, "factor", None) or getattr(self, "scheduler", None),
                             "None with kernels='precomputed' (given kernels are held as one array)",
                             owner=owner)
        K = self._gram_input(X)
        y = self._validate_y(y)
        if y.shape[0] != K.shape[1]:
            raise ValueError(f"{owner}: X holds Gram matrices of {K.shape[1]} samples "
                             f"but y has {y.shape[0]} labels")
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):
            raise ValueError(f"{owner}: with kernels='precomputed', sample_weight must be > 0 for "
                             f"every sample (a zero weight drops the sample: leave its rows and "
                             f"columns out of X); got {float(np.min(sw))!r}")
        data = dataclasses.replace(pipeline.gram_data(K, y, self._task), w_train=sw)
        _check_given_kernels(data.K_train, owner)   # the contiguous copy
        # the estimator's own parameters are checked above; the kernels come in memory, not from a file
        bank_settings = BankSettings.model_construct(normalize=normalize, memory_budget=self.memory_budget)
        return _Input(data, y, sw, int(K.shape[1]), "precomputed", bank_settings, normalize)

    def _feature_input(self, X: Any, y: Any, sample_weight: Any, normalize: str,
                       rep_settings: dict[str, Any]) -> _Input:
        """Feature vectors ``X``: validated (rows of zero weight dropped), standardized as asked, with the bank's
        description (checked by the pipeline when it is expanded: errors name the estimator's parameter)."""
        normalize = "trace" if normalize == "auto" else normalize
        X, y = _validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                              y_numeric=self._task == REGRESSION, ensure_min_samples=2)
        y = self._validate_y(y)
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):   # a zero weight: the sample is dropped
            keep = np.flatnonzero(sw > 0.0)
            X, y, sw = X[keep], y[keep], sw[keep]
        n_features_in = int(X.shape[1])
        kernels_resolved = self._bank_entries(n_features_in, X)
        names = getattr(self, "feature_names_in_", None)
        data = pipeline.array_data(X, y, self._task, None if names is None else [str(n) for n in names])
        data = dataclasses.replace(data, w_train=sw)
        # "auto": dense features are standardized; sparse ones (indicators, counts) kept as they are
        if (not sp.issparse(X)) if isinstance(self.standardize, str) else bool(self.standardize):
            data = pipeline.standardize(data)
        bank_settings = BankSettings.model_construct(
            preset=kernels_resolved if isinstance(kernels_resolved, str) else None,
            bank=None if isinstance(kernels_resolved, str) else tuple(kernels_resolved),
            normalize=normalize, memory_budget=self.memory_budget, **rep_settings)
        return _Input(data, y, sw, n_features_in, kernels_resolved, bank_settings, normalize)

    def _binary_tasks(self, given: _Input, kind: str) -> tuple[np.ndarray | None, list[BinaryTask]]:
        """The classes and binary problems of the labels; a one-vs-one layout keeps the bank as Gram matrices.

        The labels of the first binary problem on every row become the data's
        (they stand for all of them in the pipeline's checks).
        """
        classes, tasks = self._encode_targets(given.y, given.sw)
        if kind == "auto" and any(t.rows is not None for t in tasks):
            # one-vs-one problems take rows of the Gram matrices: no factors
            given.bank_settings = given.bank_settings.model_copy(update={"factor": False})
            kind = "array"
        if kind not in ("array", "auto") and any(t.rows is not None for t in tasks):
            raise ParamError("multiclass", getattr(self, "multiclass", None), "'ovr' with a factor or "
                             "sharded bank (one-vs-one problems take rows of the Gram matrices)", owner=self._owner)
        y_first = np.full(given.y.shape[0], -1.0) if tasks[0].rows is not None else tasks[0].y
        if tasks[0].rows is not None:
            y_first[tasks[0].rows] = tasks[0].y
        given.data.y_train = np.ascontiguousarray(y_first, dtype=np.float64)
        return classes, tasks

    def _prepare(self, X: Any, y: Any, C: float, sample_weight: Any = None) -> _FitState:
        """Validate everything, build the bank once (:func:`mklkit.pipeline.prepare`) and lay out the tasks.

        The engine's support for the loss/regularizer pair (and the bank's
        representation) is checked on the pipeline's tiny probe problem
        before any kernel is computed.
        """
        from ..kernels.factorize.build import warning_names

        owner = self._owner
        loss, regularizer, engine = self._components()
        normalize = self._checked_options()
        kind, rep_settings = self._representation()
        if self._precomputed():
            given = self._given_kernel_input(X, y, sample_weight, normalize, kind)
        else:
            given = self._feature_input(X, y, sample_weight, normalize, rep_settings)
        classes, tasks = self._binary_tasks(given, kind)
        data = given.data
        settings = ProblemSettings(loss=loss, regularizer=regularizer, C=C, bias=bool(self.bias))
        t0 = time.perf_counter()
        try:
            with warning_names(self._warning_text):
                prepared = pipeline.prepare(data, given.bank_settings, settings, engine,
                                            progress=None if self.verbose else False)
        except PipelineError as exc:
            raise self._error(exc) from None
        build_s = time.perf_counter() - t0
        bank = prepared.bank
        logger.info("%s: %d kernels on %d samples (normalize=%s, %s) in %.2f s; %d binary problem(s)",
                    owner, prepared.n_kernels, data.n_train, given.normalize, prepared.representation, build_s,
                    len(tasks))
        kept = bank.cross_bank() if prepared.representation == "sharded" else bank
        return _FitState(
            prepared=prepared, bank=kept if prepared.representation == "factor" else _strip_bank(kept), tasks=tasks,
            loss=loss, regularizer=regularizer, engine=engine, kernels=given.kernels,
            kernel_names=list(prepared.kernel_names), scaler=data.scaler, classes=classes,
            n_features_in=given.n_features_in, timings={"bank_s": build_s}, representation=prepared.representation,
            approximation=bank.approximation() if prepared.representation == "factor" else None,
            target=self._target_scaling(given.y, given.sw),
        )

    def _target_scaling(self, y: np.ndarray, sample_weight: np.ndarray | None = None) -> tuple[float, float]:
        """``(offset, scale)`` of the targets the engines see (regression, ``standardize_y``)."""
        return 0.0, 1.0

    def _sample_weight(self, sample_weight: Any, y: np.ndarray) -> np.ndarray | None:
        """The per-sample weights of a fit (``None``: unweighted), validated by scikit-learn's
        ``_check_sample_weight`` (shape (n_samples,), finite, >= 0, not all 0).

        Weights that are all 1 are the unweighted problem (every engine solves it).
        """
        if sample_weight is None:
            return None
        from sklearn.utils.validation import _check_sample_weight

        sw = _check_sample_weight(sample_weight, y, dtype=np.float64, ensure_non_negative=True)
        if not np.all(np.isfinite(sw)):
            raise ValueError(f"{self._owner}: sample_weight must be finite")
        if not np.any(sw > 0.0):
            raise ValueError(f"{self._owner}: sample_weight must have a weight > 0; got all zeros")
        return None if np.all(sw == 1.0) else np.array(sw, dtype=np.float64)

    def _validate_y(self, y: Any) -> np.ndarray:
        if y is None:
            raise ValueError(f"{self._owner} requires y to be passed, but the target y is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"{self._owner}: y must be a 1-d array; got shape {y.shape}")
        return y

    def _bank_entries(self, n_features: int, X: Any = None) -> Any:
        kernels = self.kernels
        if isinstance(kernels, str):
            if kernels == "auto":
                kinds = None if X is None else feature_kinds(X)
                bank = _default_bank(n_features, kinds)
                if kinds is not None:
                    logger.info("%s: kernels='auto': 7 kernels on all %d features, 3 Gaussian kernels on "
                                "each of %d features, 1 linear kernel on each of %d two-valued ones, none on "
                                "%d constant ones", self._owner, n_features, int(np.sum(kinds == "real")),
                                int(np.sum(kinds == "binary")), int(np.sum(kinds == "constant")))
                return bank
            from ..kernels import available_presets

            if kernels not in available_presets():
                raise ParamError(
                    "kernels", kernels,
                    "'auto', 'precomputed', a preset name (" + ", ".join(available_presets())
                    + "), a list of bank entries (docs/data_and_kernels.md) or a mapping "
                    "{'preset': name}", owner=self._owner)
            return kernels
        if isinstance(kernels, Mapping):
            return [dict(kernels)]
        if isinstance(kernels, (list, tuple)) and len(kernels) > 0:
            return [dict(e) if isinstance(e, Mapping) else e for e in kernels]
        raise ParamError(
            "kernels", kernels,
            "'auto', 'precomputed', a preset name, a non-empty list of bank entries "
            "(docs/data_and_kernels.md) or one entry as a mapping", owner=self._owner)

    # -- solving --------------------------------------------------------------
    def _run_task(self, prep: _FitState, t: int, Cs: Sequence[float], warm: Any = None) -> list[Any]:
        """Solve task ``t`` for every C in ``Cs`` in turn, each warm-started from the previous
        (the first from ``warm``, a result of the task on the same rows)."""
        task = prep.tasks[t]
        from ..engines.base import solve_from

        base = prep.prepared.subproblem(task.y, task.rows)  # the task's rows of the shared bank, once
        where = (f"{self._owner}: problem {t + 1}/{len(prep.tasks)}"
                 + (f" ({task.describe(prep.classes)})" if prep.classes is not None
                    and len(prep.tasks) > 1 else ""))
        results: list[Any] = []
        keep = prep.subset.get(t)   # the kernels the held-out rows kept (pipeline.kernel_subset)
        work = base if keep is None else subset_problem(base, keep)
        previous = warm if keep is None else restrict_result(warm, keep)
        for C in Cs:
            if isinstance(C, str) and C == "auto":   # held-out rows decide where there are enough of them

                C = "path" if path_decides(base) else "scale"
            if isinstance(C, str) and C == "path":
                C, work = self._path_C(prep, t, base, where)
                keep = prep.subset.get(t)
                previous = prep.selection[t].start  # the chosen path solution, on all rows
                prep.selection[t].start = None
            elif isinstance(C, str):  # "scale"
                C = self._auto_C(base)
                logger.info("%s: C='%s' is %.6g (the root mean diagonal of the kernels, x %g)",
                            where, self.C, C, _auto_scale(self._task))
            problem = problem_at(work, C=C)
            self._check_support(prep.engine, problem)
            callback = None
            if self.verbose:
                def callback(rec: dict[str, Any], _w: str = where, _C: float = C) -> bool:
                    logger.info("%s C=%g it=%d objective=%.6g gap=%.3e active=%d", _w, _C,
                                rec.get("iteration", -1), rec.get("objective", math.nan),
                                rec.get("gap", math.nan), rec.get("n_active", -1))
                    return False
            result = solve_from(prep.engine, problem, callback, previous)
            prep.task_C[t] = float(C)  # the last C of the task (C="auto" resolves per task)
            logger.info("%s C=%g: %s", where, C, result.message or result.status)
            results.append(result if keep is None else widen_result(result, keep, base.n_kernels))
            previous = result
        return results

    def _run_all(self, prep: _FitState, Cs: Sequence[float] | None = None,
                 warm: Sequence[Any] | None = None) -> list[list[Any]]:
        """``out[t][c]``: the result of task t at ``Cs[c]`` (``None``: each task's own last C,
        warm-started from ``warm[t]``); tasks in parallel (``n_jobs``)."""
        n_tasks = len(prep.tasks)
        n_jobs = getattr(self, "n_jobs", None)

        def args(t: int) -> tuple[Any, ...]:
            return (prep, t, [prep.task_C[t]] if Cs is None else Cs, None if warm is None else warm[t])

        if n_tasks > 1 and n_jobs not in (None, 1):
            from joblib import Parallel, delayed

            return list(Parallel(n_jobs=n_jobs, prefer="threads")(
                delayed(self._run_task)(*args(t)) for t in range(n_tasks)))
        return [self._run_task(*args(t)) for t in range(n_tasks)]

    def _refine(self, prep: _FitState, results: list[Any]) -> list[Any]:
        """Factors that follow the solution (:mod:`mklkit.pipeline.refine`) when the bank's factor
        settings ask for it (``{"refine": ...}``; by default when ``C="path"``)."""
        from ..kernels import DEFAULT_MEMORY_BUDGET

        def resolve(prepared: Any, warm: list[Any]) -> list[Any]:
            prep.prepared = prepared
            return [r[0] for r in self._run_all(prep, None, warm)]

        def progress(rec: dict[str, Any]) -> None:
            logger.info("%s: factors refined for %d kernels (rank %s -> %s): total rank %d, %.2f s",
                        self._owner, len(rec["kernels"]), rec["ranks_before"], rec["ranks_after"],
                        rec["total_rank"], rec["time_s"])

        t0 = time.perf_counter()
        prepared, results, info = refine_prepared(
            prep.prepared, results, resolve, _check_budget(self.memory_budget, self._owner) or DEFAULT_MEMORY_BUDGET,
            isinstance(self.C, str) and self.C == "path", progress=progress)
        if info is not None:
            prep.prepared, prep.bank = prepared, prepared.bank
            prep.approximation = prepared.bank.approximation()
            prep.refinement = info
            prep.timings["refine_s"] = time.perf_counter() - t0
        return results

    # -- fitted state -----------------------------------------------------------
    def _set_fitted(self, prep: _FitState, results: list[Any], predictor: Any = None) -> None:
        """Set the fitted attributes from one result per task.

        On a factor bank ``bank_`` is the results' :class:`~mklkit.kernels.factor.FactorPredictor`
        (``predictor``, or made here from ``prep.bank``): the active kernels' maps, no training factors.
        """
        M = len(prep.kernel_names)
        active = np.zeros(M, dtype=bool)
        for r in results:
            active[r.active_set] = True
        active_idx = np.flatnonzero(active)
        single = len(results) == 1
        self.result_ = results[0] if single else list(results)
        weights = np.array([np.asarray(r.kernel_weights, dtype=np.float64) for r in results])
        self.kernel_weights_ = weights[0] if single else weights
        self.active_kernels_ = active_idx
        iters = np.array([int(r.iterations) for r in results])
        gaps = np.array([float(r.gap) for r in results])
        self.n_iter_ = int(iters[0]) if single else iters
        self.dual_gap_ = float(gaps[0]) if single else gaps
        cmax = np.array([math.nan if r.C_max is None else float(r.C_max) for r in results])
        self.C_max_ = float(cmax[0]) if single else cmax
        Cs = np.array([prep.task_C.get(t, math.nan) for t in range(len(results))])
        self.C_ = float(Cs[0]) if single else Cs
        sel = [prep.selection.get(t) for t in range(len(results))]
        if any(v is not None for v in sel):
            self.C_selection_ = sel[0] if single else sel
        elif hasattr(self, "C_selection_"):
            del self.C_selection_
        # the default bank's kernels on all features against the whole bank (single problems)
        self.bank_choice_ = prep.bank_choice.get(0) if single else None
        self.kernels_ = prep.kernels
        self.kernel_names_ = list(prep.kernel_names)
        self.loss_ = prep.loss
        self.regularizer_ = prep.regularizer
        self.engine_ = prep.engine
        # the engine that produced each answer (auto's delegate, after any fallback)
        solved = [r.solved_by or prep.engine.name for r in results]
        self.solved_by_ = solved[0] if single else np.array(solved, dtype=object)
        self.scaler_ = prep.scaler
        if prep.representation == "factor":
            self.bank_ = predictor if predictor is not None else _factor_predictor(prep.bank, results, active_idx)
        else:
            self.bank_ = _strip_bank(prep.bank, active_idx)
        # on a factor bank: what the factors leave out of the kernels (None otherwise)
        self.factor_approximation_ = (prep.approximation if prep.representation == "factor"
                                      else None)
        self.factor_refinement_ = prep.refinement
        self.n_features_in_ = prep.n_features_in
        self._tasks = prep.tasks
        if prep.classes is not None:
            self.classes_ = prep.classes
        if self._task == REGRESSION:
            self.y_offset_, self.y_scale_ = (float(v) for v in prep.target)

    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> "_BaseMKL":
        owner = self._owner
        named = isinstance(self.C, str) and self.C in C_NAMES
        C: Any = self.C if named else _check_C(self.C, owner, allow_auto=True)
        with _verbosity(self.verbose), self._compiling(), interrupt_guard():
            prep = self._prepare(X, y, 1.0 if named else C, sample_weight)
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, [C])
                refined = self._refine(prep, [r[0] for r in runs])
                runs = [[r] for r in refined]
            finally:
                _release(prep)
            logger.info("%s: solved %d problem(s) in %.2f s", owner, len(runs),
                        time.perf_counter() - t0)
        self._set_fitted(prep, [r[0] for r in runs])
        self._warn_trivial(prep, [r[0] for r in runs])
        return self

    def _warn_trivial(self, prep: _FitState, results: Sequence[Any]) -> None:
        """One :class:`~mklkit.result.TrivialModelWarning` when some binary problem has every kernel off."""

        off = [t for t, r in enumerate(results) if r.trivial]
        if not off:
            return
        t = off[0]
        where = f"{self._owner}: C"
        if len(results) > 1:
            desc = prep.tasks[t].describe(prep.classes) if prep.classes is not None else f"problem {t + 1}"
            where = f"{self._owner}: {len(off)} of {len(results)} binary problems, e.g. {desc}: C"
        warn_if_trivial(results[t], prep.task_C.get(t, math.nan), where=where, stacklevel=4,
                        auto=isinstance(self.C, str) and self.C in ("auto", "scale"))

    def _compiling(self) -> Any:
        """The once-per-process note that numba compiles (:func:`mklkit.compilation.announce_compilation`)."""
        from ..compilation import announce_compilation

        what = (f"loss {_spec_name(self.loss)!r}, regularizer {_spec_name(self.regularizer)!r} "
                f"and engine {_spec_name(self.engine)!r}")
        return announce_compilation(what, warn=True)

    def _path_C(self, prep: _FitState, t: int, problem: Any, where: str) -> tuple[float, Any]:
        """``C="path"``: C chosen on held-out rows of the task's problem (:mod:`mklkit.pipeline.heldout`);
        with the default bank, also its kernels on all features alone, kept unless the whole bank does
        better on the same rows (:mod:`mklkit.pipeline.kernel_subset`).  Returns C and the problem
        (the task's, or the kept kernels') to fit at it."""
        from ..engines.base import solve_from

        engine = path_engine(prep.engine)

        def solve(p: Any, warm: Any) -> Any:
            return solve_from(engine, p, None, warm)

        def progress(rec: dict[str, Any]) -> None:
            logger.info("%s: C=%.4g (%.3g of the reference) held-out loss %.5f, metric %.4f, "
                        "%d active kernels", where, rec["C"], rec["ratio"], rec["loss"], rec["metric"],
                        rec["n_active"])

        def path(p: Any) -> Any:
            try:
                return select_C(p, solve, self._auto_C, progress=progress)
            except ValueError as exc:
                raise ValueError(f"{self._owner}: {exc}") from None

        self._check_support(prep.engine, problem)   # the path's problems are of the same kind
        sel = path(problem)
        prep.selection[t] = sel
        logger.info("%s: C='path' chose %.6g in %.2f s\n%s", where, sel.C, sel.time_s, sel.summary())
        keep = self._subset_candidate(prep, problem)
        if keep is None:
            sel.chosen_rows = sel.held_weights = None
            return sel.C, problem
        part = subset_problem(problem, keep)
        sub = path(part)
        kept, diff, se = prefer_subset(sel, sub)
        sel.chosen_rows = sel.held_weights = sub.chosen_rows = sub.held_weights = None
        names = [problem.kernel_names[m] for m in keep] if problem.kernel_names else keep.tolist()
        prep.bank_choice[t] = {
            "kept": "kernels on all features" if kept else "whole bank", "kernels": names,
            "criterion": sel.criterion, "difference": diff, "difference_se": se,
            "whole_bank_C": sel.C, "subset_C": sub.C, "whole_bank_path_s": sel.time_s,
            "subset_path_s": sub.time_s}
        logger.info("%s: the %d kernels on all features alone: held-out %s %+.5f +- %.5f against the "
                    "whole bank of %d -> %s (path %.2f s)\n%s", where, keep.size, sel.criterion, diff, se,
                    problem.n_kernels, prep.bank_choice[t]["kept"], sub.time_s, sub.summary())
        if not kept:
            return sel.C, problem
        prep.subset[t] = keep
        prep.selection[t] = sub
        return sub.C, part

    def _subset_candidate(self, prep: _FitState, problem: Any) -> np.ndarray | None:
        """The kernels on all features of the default bank (``kernels="auto"``), for a single
        problem on Gram matrices or factors whose bank has Gaussian kernels on single features
        (real-valued features); else ``None``.  Banks of indicators (one linear kernel each) are
        left whole: on a9a and w8a the kernels on all features alone were within one standard
        error of the whole bank (+0.18 and +0.08 points), and their path cost a9a 20 s more."""
        from ..kernels import expand_bank

        if not (isinstance(self.kernels, str) and self.kernels == "auto") or len(prep.tasks) != 1:
            return None
        if not supports_subset(problem):
            return None
        specs = expand_bank(prep.kernels, prep.n_features_in, resolve=kernel_resolver())
        if len(specs) != problem.n_kernels:
            return None
        if not any(len(s.features) == 1 and s.function.name == "rbf" for s in specs):
            return None
        keep = kernels_on_all_features(specs, prep.n_features_in)
        return keep if 0 < keep.size < problem.n_kernels else None

    def _auto_C(self, problem: Any) -> float:
        """``C="scale"`` on a task's training kernels: the rule of specs' ``problem.C: scale``
        (:func:`mklkit.pipeline.settings.auto_C`)."""

        try:
            return auto_C(problem, key="C")
        except PipelineError as exc:
            raise self._error(exc) from None

    def fit_path(self, X: Any, y: Any, Cs: Sequence[float] | int, sample_weight: Any = None) -> "MKLPath":
        """Solve for every C of a regularization path, warm-starting each from the last.

        The kernel bank is built once.  The values are processed from the
        largest C (the most regularized, sparsest solution) to the smallest;
        every solve gets the previous solution as ``warm_start`` when the
        engine supports it (``engine.supports_warm_start``; other engines
        solve each C from their usual start).  The estimator itself is not
        changed: ``path.estimator(i)`` gives a fitted copy at ``path.Cs[i]``.

        Parameters
        ----------
        X, y, sample_weight
            As for :meth:`fit` (``C_max`` then accounts for the weights).
        Cs : sequence of float, or int
            Regularization constants > 0 (at least one); or the number of
            values of a path from ``C_max`` down: ``Cs`` values spaced evenly
            on a log scale from :math:`C_{max}` (where every kernel is off,
            :func:`mklkit.engines.common.zero_solution`; the largest over the
            binary problems of a multiclass fit) to :math:`10^{-3}C_{max}`, as
            glmnet and celer do.  That needs a sparse regularizer (``l1``,
            ``elasticnet`` with ``lam < 1``): the others have no finite
            ``C_max``.

        Returns
        -------
        MKLPath
        """
        owner = self._owner
        n_path = Cs if isinstance(Cs, (int, np.integer)) and not isinstance(Cs, bool) else None
        if n_path is not None:
            if n_path < 1:
                raise ParamError("Cs", Cs, "a number of values >= 1, or a sequence of numbers > 0",
                                 owner=owner)
            grid = np.array([1.0])
        else:
            values = [Cs] if np.isscalar(Cs) else list(np.asarray(Cs, dtype=object).ravel())
            if len(values) == 0:
                raise ParamError("Cs", Cs, "a non-empty sequence of numbers > 0", owner=owner)
            grid = np.array(sorted({_check_C(c, owner, "Cs") for c in values}, reverse=True))
        with _verbosity(self.verbose), self._compiling(), interrupt_guard():
            prep = self._prepare(X, y, float(grid[0]), sample_weight)
            if n_path is not None:
                grid = self._path_from_c_max(prep, int(n_path))
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, list(grid))
            finally:
                _release(prep)
            total = time.perf_counter() - t0
        prep.prepared = None  # the path keeps no Gram matrices
        if n_path is None:  # explicit values: say which learn nothing (a path from C_max starts trivial)
            off = [float(grid[c]) for c in range(grid.size) if all(r.trivial for r in _runs_at(runs, c))]
            if off:
                import warnings

                cmax = [r.C_max for r in _runs_at(runs, 0) if r.C_max is not None]
                text = trivial_message(min(off), max(cmax) if cmax else None, where=f"{owner}.fit_path: Cs")
                warnings.warn(f"{text} (all kernels off at {len(off)} of {grid.size} values of Cs: "
                              f"{', '.join(f'{c:.6g}' for c in off)})", TrivialModelWarning, stacklevel=2)
        per_C = [[runs[t][c] for t in range(len(runs))] for c in range(grid.size)]
        warm = bool(getattr(prep.engine, "supports_warm_start", False))
        predictors = None
        if prep.representation == "factor":  # per C the active kernels' maps; the training factors go
            predictors = [_factor_predictor(prep.bank, res, None) for res in per_C]
            prep.bank = None
        return MKLPath(Cs=grid, results=per_C, kernel_names=list(prep.kernel_names),
                       warm_started=warm, time_s=total, _template=clone(self), _prep=prep,
                       _predictors=predictors)

    def _path_from_c_max(self, prep: _FitState, n: int) -> np.ndarray:
        """``n`` values of C from ``C_max`` down to ``1e-3 C_max``, evenly on a log scale."""
        from ..engines.common import zero_solution

        cmax = 0.0
        for task in prep.tasks:
            problem = prep.prepared.subproblem(task.y, task.rows, C=1.0)
            cmax = max(cmax, zero_solution(problem).C_max)
        if not (math.isfinite(cmax) and cmax > 0.0):
            raise ParamError(
                "Cs", n, f"a sequence of numbers > 0: the regularizer "
                f"{prep.regularizer.describe()} has no finite C_max (C_max = {cmax:g}), so a "
                "path from C_max cannot be made", owner=self._owner)
        return cmax * np.logspace(0.0, -3.0, n)

    # -- prediction -------------------------------------------------------------
    def _test_side(self, X: Any) -> Any:
        """The test side of ``X`` (:func:`mklkit.pipeline.new_points`): kernels of the active kernels, or factor rows."""
        from ..kernels import MemoryBudgetError

        check_is_fitted(self, "result_")
        owner = self._owner
        bank = self.bank_
        active = np.asarray(self.active_kernels_, dtype=np.intp)
        if self._precomputed():
            M, N = len(self.kernel_names_), bank.n_samples
            Kx = np.asarray(X)
            if Kx.ndim != 3 or Kx.shape[1] != N or Kx.shape[2] != M:
                raise ValueError(
                    f"{owner}: with kernels='precomputed', X must hold the test-versus-training "
                    f"kernels of shape (n_test, {N}, {M}); got shape {Kx.shape}")
            sub = np.moveaxis(Kx, 2, 0)[active]
            if not np.all(np.isfinite(sub)):
                raise ValueError(f"{owner}: X contains NaN or infinite values")
            return new_points(bank, K=sub, kernels=active)
        X = _validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        try:
            return new_points(bank, X, scaler=self.scaler_, kernels=active,
                              memory_budget=_check_budget(self.memory_budget, owner))
        except MemoryBudgetError as exc:
            raise ValueError(f"{owner}: {exc.describe('memory_budget')}") from None

    def _task_values(self, X: Any) -> np.ndarray:
        """Decision values of every binary task, (n, n_tasks)."""
        side = self._test_side(X)
        if side.K is None:  # a factor bank: the fitted FactorPredictor maps the points (all tasks at once)
            return self.bank_.decision_function(side.X)
        results = self.result_ if isinstance(self.result_, list) else [self.result_]
        return np.column_stack([side.decision_function(r, self.bank_, rows=task.rows)
                                for r, task in zip(results, self._tasks)])

    # -- pickles ----------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle: ``result_``'s coefficients keep their non-zero rows only
        (the inactive kernels' zero rows come back on loading)."""
        state = super().__getstate__()
        if "result_" in state:
            state = {**state, "result_": pack_results(state["result_"])}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "result_" in state:
            state = {**state, "result_": unpack_results(state["result_"])}
        super().__setstate__(state)

    # -- parameters -------------------------------------------------------------
    _COMPONENT_PARAMS = ("loss", "regularizer", "engine")

    def set_params(self, **params: Any) -> "_BaseMKL":
        """Set parameters; ``regularizer__lam=0.2`` sets one component parameter.

        For ``loss``, ``regularizer`` and ``engine``, a key ``<name>__<param>``
        replaces the component spec by one with that parameter changed,
        whatever form it was given in (name, mapping or instance), so that
        ``GridSearchCV`` can search over ``{"regularizer__lam": [...]}``.
        The value is validated by the component in ``fit``.
        """
        nested: dict[str, dict[str, Any]] = {}
        for key in list(params):
            head, sep, sub = key.partition("__")
            if sep and head in self._COMPONENT_PARAMS and "__" not in sub:
                nested.setdefault(head, {})[sub] = params.pop(key)
        super().set_params(**params)
        for head, updates in nested.items():
            setattr(self, head, _updated_spec(getattr(self, head), updates))
        return self

    # -- tags -------------------------------------------------------------------
    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        if self._precomputed():
            # X (n, n_train, M): scikit-learn's splitters index the first two axes of a pairwise input
            tags.input_tags.pairwise = True
            tags.input_tags.two_d_array = False
            tags.input_tags.three_d_array = True
            tags.input_tags.sparse = False
        else:
            tags.input_tags.sparse = True
        return tags


def _auto_scale(task: str) -> float:
    return AUTO_C_SCALE.get(task, 1.0)


def _check_given_kernels(K: np.ndarray, owner: str) -> None:
    """The precomputed kernels' PSD check (:func:`mklkit.kernels.precomputed.check_psd`), naming X's slice.

    ``K`` is the fit's C-contiguous float64 copy (:func:`mklkit.pipeline.data.kernels_in_order`).
    Non-finite values are left to the pipeline's check, which names them.
    """
    from .._jit.gram import all_finite
    from ..kernels import BankError
    from ..kernels.precomputed import check_psd

    if not all(all_finite(K[m]) for m in range(K.shape[0])):   # kernel by kernel, no (M, N, N) mask
        return
    try:
        check_psd(K, "X", index="[:, :, {m}]")
    except BankError as exc:
        raise ValueError(f"{owner}: {exc}") from None


def _runs_at(runs: list[list[Any]], c: int) -> list[Any]:
    """The results of every task at the ``c``-th C."""
    return [runs[t][c] for t in range(len(runs))]


def _factor_predictor(bank: Any, results: Sequence[Any], active: np.ndarray | None) -> Any:
    """The :class:`~mklkit.kernels.factor.FactorPredictor` of the results (one per task) on a factor
    bank: the maps of the ``active`` kernels (``None``: those active in some result) and their
    folded coefficients."""
    if active is None:
        active = np.unique(np.concatenate([np.asarray(r.active_set, dtype=np.int64) for r in results]))
    return bank.predictor(np.stack([np.asarray(r.alpha, dtype=np.float64) for r in results]),
                          np.array([float(r.bias) for r in results]), active)


def _release(prep: _FitState) -> None:
    """Drop the shards of a sharded bank (the fitted estimator keeps what prediction needs)."""
    prep.prepared.close()


#: Estimator parameter of each pipeline key (errors name the parameter).
_PARAMS = {"kernels.memory_budget": "memory_budget", "kernels.normalize": "normalize",
           "kernels.precomputed": "X", "kernels.sharded.scheduler": "scheduler", "engine.name": "engine",
           "data.standardize": "standardize", "problem.loss": "loss"}


def _param_of(key: str) -> str:
    """The estimator parameter of a pipeline key (``kernels.bank[1].width`` -> ``kernels[1].width``)."""
    if key in _PARAMS:
        return _PARAMS[key]
    for prefix, name in (("kernels.bank", "kernels"), ("kernels.preset", "kernels"), ("kernels.factor", "factor")):
        if key.startswith(prefix):
            return name + key[len(prefix):]
    return key


def _is_logistic(est: Any) -> bool:
    return _spec_name(est.loss) == "logistic"
