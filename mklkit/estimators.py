r"""scikit-learn estimators for Multiple Kernel Learning.

:class:`MKLClassifier` and :class:`MKLRegressor` learn a sparse or non-sparse
combination of many kernels by solving

.. math::
    \min_{\alpha, b}\ \sum_i \ell\Big(y_i, \sum_m (K_m\alpha_m)_i + b\Big)
        + C \sum_m g\big(\|\alpha_m\|_{K_m}^2\big)

(SpicyMKL, Suzuki & Tomioka 2011, eq. 42 in representer form) with any
registered loss, regularizer and engine.  They follow scikit-learn's
conventions: the constructor only stores its arguments, ``fit`` validates
them, builds the kernel bank once and solves; they work in ``Pipeline``,
``GridSearchCV`` and ``cross_val_score``, clone, and pickle.

Usage is documented in ``docs/api.md``.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import math
import numbers
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._multiclass import (
    BinaryTask,
    ovo_decision,
    ovo_tasks,
    ovr_proba,
    ovr_tasks,
    pairwise_coupling,
    sigmoid,
    subset_bank,
)
from .components.base import CLASSIFICATION, REGRESSION
from .components.params import ParamError

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(estimator: Any, *args: Any, **kwargs: Any) -> Any:
        return estimator._validate_data(*args, **kwargs)

__all__ = ["MKLClassifier", "MKLRegressor", "MKLPath", "default_kernels"]

logger = logging.getLogger(__name__)

#: Gaussian widths on all features, as multiples of sqrt(d) (standardised
#: features have squared distances of about 2d).
DEFAULT_ALL_WIDTH_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Gaussian widths on every single (standardised) feature.
DEFAULT_EACH_WIDTHS = (0.5, 1.0, 2.0)
#: Polynomial degrees on all features.
DEFAULT_DEGREES = (1, 2)

_NORMALIZE = ("auto", "trace", "diagonal", "none")
_MULTICLASS = ("ovr", "ovo")


def default_kernels(n_features: int) -> list[dict[str, Any]]:
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
    """
    d = int(n_features)
    if d < 1:
        raise ValueError(f"n_features must be >= 1; got {n_features!r}")
    root = math.sqrt(d)
    return [
        {"function": "rbf", "width": [round(f * root, 6) for f in DEFAULT_ALL_WIDTH_FACTORS],
         "features": "all"},
        {"function": "poly", "degree": list(DEFAULT_DEGREES), "features": "all"},
        {"function": "rbf", "width": list(DEFAULT_EACH_WIDTHS), "features": "each"},
    ]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def _registry() -> Any:
    from .plugins import get_registry

    return get_registry()


def _spec_name(spec: Any) -> str | None:
    """The component name a loss/regularizer/engine spec refers to."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        name = spec.get("name")
        return name if isinstance(name, str) else None
    return getattr(spec, "name", None)


def _check_C(C: Any, owner: str, key: str = "C") -> float:
    if isinstance(C, (bool, np.bool_)) or not isinstance(C, numbers.Real):
        raise ParamError(key, C, "a finite number > 0", owner=owner)
    value = float(C)
    if not (value > 0.0 and math.isfinite(value)):
        raise ParamError(key, C, "a finite number > 0", owner=owner)
    return value


def _check_choice(value: Any, key: str, choices: Sequence[str], owner: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ParamError(key, value, "one of " + ", ".join(repr(c) for c in choices), owner=owner)
    return value


def _check_budget(value: Any, owner: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        from .pipeline import parse_bytes

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
    from .components.base import Component

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


def _solve(engine: Any, problem: Any, callback: Any, warm_start: Any) -> Any:
    """``engine.solve``, passing ``warm_start`` only to engines that use it."""
    if warm_start is not None and getattr(engine, "supports_warm_start", False):
        return engine.solve(problem, callback, warm_start=warm_start)
    return engine.solve(problem, callback)


# ---------------------------------------------------------------------------
# Prepared training data (shared by fit and fit_path)
# ---------------------------------------------------------------------------
@dataclass
class _Prepared:
    K: np.ndarray                       # (M, N, N) normalised training bank
    bank: Any                           # KernelBank without K (all kernels)
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
    representation: str = "array"


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
        from .engines.base import Engine

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
        reason = engine.supports(problem)
        if reason is None:
            return
        ok = _registry().engines_supporting(problem, exclude=engine.name)
        combo = (f"loss {problem.loss.describe()} with regularizer "
                 f"{problem.regularizer.describe()}")
        hint = (f"engines that can: {', '.join(ok)}" if ok
                else "no installed engine supports this pair; choose another loss or regularizer")
        raise ValueError(
            f"{self._owner}: engine {engine.name!r} cannot solve {combo}: {reason}; {hint}"
        )

    # -- data -----------------------------------------------------------------
    def _encode_targets(self, y: np.ndarray) -> tuple[np.ndarray | None, list[BinaryTask]]:
        raise NotImplementedError

    def _representation(self) -> Any:
        """The bank representation of the ``factor`` / ``scheduler`` parameters."""
        from .pipeline import Representation

        owner = self._owner
        factor, scheduler = getattr(self, "factor", None), getattr(self, "scheduler", None)
        if factor is not None and scheduler is not None:
            raise ParamError("scheduler", scheduler, "None when factor is given (one representation)", owner=owner)
        if scheduler is not None:
            return Representation("sharded", scheduler=scheduler)
        if factor is None:
            return Representation()
        if factor is True:
            factor = {}
        if not isinstance(factor, Mapping) or set(factor) - {"rank", "tol", "method", "seed"}:
            raise ParamError("factor", factor, "None, True or a mapping with keys rank, tol, method, seed",
                             owner=owner)
        rep = Representation("factor", **dict(factor))
        try:
            rep.check(root="factor")
        except ValueError as exc:
            raise ValueError(f"{owner}: {exc}") from None
        return rep

    def _gram_input(self, X: Any, fitted: bool = False) -> tuple[np.ndarray, bool]:
        """Precomputed kernels as (M, rows, N), and whether X had the deprecated layout.

        X is (rows, N, M) (samples first, kernels last), or (M, rows, N) (deprecated).
        """
        import warnings

        owner = self._owner
        X = np.asarray(X)
        old = getattr(self, "_legacy_layout", False) if fitted else (
            X.ndim == 3 and X.shape[1] == X.shape[2] and X.shape[0] != X.shape[1])
        if X.ndim != 3 or (not fitted and not old and X.shape[0] != X.shape[1]):
            raise ValueError(
                f"{owner}: with kernels='precomputed', X must be the training Gram matrices of shape "
                f"(n_samples, n_samples, n_kernels) (samples on the first two axes, as scikit-learn's "
                f"splitters index a pairwise input); got shape {X.shape}")
        if old and not fitted:
            warnings.warn(
                f"{owner}: precomputed Gram matrices of shape (n_kernels, n_samples, n_samples) are "
                "deprecated; pass np.moveaxis(K, 0, -1), shape (n_samples, n_samples, n_kernels), which "
                "GridSearchCV and cross_val_score can split", FutureWarning, stacklevel=4)
        return (X if old else np.moveaxis(X, 2, 0)), bool(old)

    def _prepare(self, X: Any, y: Any, C: float) -> _Prepared:
        """Validate everything, build the bank once (:func:`mklkit.pipeline.prepare`) and lay out the tasks.

        The engine's support for the loss/regularizer pair (and the bank's
        representation) is checked on the pipeline's tiny probe problem
        before any kernel is computed.
        """
        from . import pipeline
        from .pipeline import BankSettings, PipelineError, ProblemSettings

        owner = self._owner
        loss, regularizer, engine = self._components()
        normalize = _check_choice(self.normalize, "normalize", _NORMALIZE, owner)
        budget = _check_budget(self.memory_budget, owner)
        for key in ("standardize", "bias"):
            if not isinstance(getattr(self, key), (bool, np.bool_)):
                raise ParamError(key, getattr(self, key), "True or False", owner=owner)
        if (isinstance(self.verbose, (bool, np.bool_))
                or not isinstance(self.verbose, numbers.Integral) or self.verbose < 0):
            raise ParamError("verbose", self.verbose, "an integer >= 0", owner=owner)
        representation = self._representation()
        precomputed = self._precomputed()
        if precomputed:
            normalize = "none" if normalize == "auto" else normalize
            if normalize == "diagonal":
                raise ParamError("normalize", self.normalize, "'auto', 'none' or 'trace' with "
                                 "kernels='precomputed' (unit-diagonal normalisation of test "
                                 "kernels needs the test points' own k(x, x))", owner=owner)
            if representation.kind != "array":
                raise ParamError("factor" if representation.kind == "factor" else "scheduler",
                                 getattr(self, "factor", None) or getattr(self, "scheduler", None),
                                 "None with kernels='precomputed' (given kernels are held as one array)",
                                 owner=owner)
            K, self._legacy_layout = self._gram_input(X)
            y = self._validate_y(y)
            if y.shape[0] != K.shape[1]:
                raise ValueError(f"{owner}: X holds Gram matrices of {K.shape[1]} samples "
                                 f"but y has {y.shape[0]} labels")
            n_features_in = int(K.shape[1])
            kernels_resolved: Any = "precomputed"
            data = pipeline.gram_data(K, y, self._task)
            bank_settings = BankSettings(precomputed=None, normalize=normalize, memory_budget=budget,
                                         memory_budget_given=self.memory_budget)
        else:
            normalize = "trace" if normalize == "auto" else normalize
            X, y = _validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                                  y_numeric=self._task == REGRESSION, ensure_min_samples=2)
            y = self._validate_y(y)
            n_features_in = int(X.shape[1])
            kernels_resolved = self._bank_entries(n_features_in)
            names = getattr(self, "feature_names_in_", None)
            data = pipeline.array_data(X, y, self._task, None if names is None else [str(n) for n in names])
            if self.standardize:
                data = pipeline.standardize(data)
            bank_settings = BankSettings(
                preset=kernels_resolved if isinstance(kernels_resolved, str) else None,
                bank=None if isinstance(kernels_resolved, str) else tuple(kernels_resolved),
                normalize=normalize, memory_budget=budget, memory_budget_given=self.memory_budget,
                representation=representation)
        classes, tasks = self._encode_targets(y)
        if representation.kind != "array" and any(t.rows is not None for t in tasks):
            raise ParamError("multiclass", getattr(self, "multiclass", None), "'ovr' with a factor or "
                             "sharded bank (one-vs-one problems take rows of the Gram matrices)", owner=owner)
        # the labels of the first binary problem on every row stand for all of them in the checks
        y_first = np.full(y.shape[0], -1.0) if tasks[0].rows is not None else tasks[0].y
        if tasks[0].rows is not None:
            y_first[tasks[0].rows] = tasks[0].y
        data.y_train = np.ascontiguousarray(y_first, dtype=np.float64)
        settings = ProblemSettings(loss=loss, regularizer=regularizer, C=C, bias=bool(self.bias))
        M = int(data.K_train.shape[0]) if precomputed else len(pipeline._expand(bank_settings, data))
        self._check_support(engine, pipeline.probe_problem(data.y_train, M, settings, representation.kind))
        t0 = time.perf_counter()
        try:
            prepared = pipeline.prepare(data, bank_settings, settings, engine,
                                        progress=None if self.verbose else False)
        except PipelineError as exc:
            raise ValueError(f"{owner}: {exc.message(key=_param_of(exc.key))}") from None
        build_s = time.perf_counter() - t0
        bank = prepared.bank
        logger.info("%s: %d kernels on %d samples (normalize=%s, %s) in %.2f s; %d binary problem(s)",
                    owner, prepared.n_kernels, data.n_train, normalize, prepared.representation, build_s,
                    len(tasks))
        if prepared.representation == "sharded":
            kept = bank.cross_bank()
            K_all: Any = bank
        else:
            kept = bank
            K_all = prepared.problem.K if prepared.representation == "array" else bank
        return _Prepared(
            K=K_all, bank=kept if prepared.representation == "factor" else _strip_bank(kept), tasks=tasks,
            loss=loss, regularizer=regularizer, engine=engine, kernels=kernels_resolved,
            kernel_names=list(prepared.kernel_names), scaler=data.scaler, classes=classes,
            n_features_in=n_features_in, timings={"bank_s": build_s}, representation=prepared.representation,
        )

    def _validate_y(self, y: Any) -> np.ndarray:
        if y is None:
            raise ValueError(f"{self._owner} requires y to be passed, but the target y is None")
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1:
            raise ValueError(f"{self._owner}: y must be a 1-d array; got shape {y.shape}")
        return y

    def _bank_entries(self, n_features: int) -> Any:
        kernels = self.kernels
        if isinstance(kernels, str):
            if kernels == "auto":
                return default_kernels(n_features)
            from .kernels import available_presets

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

    def _problem(self, prep: _Prepared, task: BinaryTask, K: Any, C: float) -> Any:
        from .problem import Problem

        return Problem(K=K, y=task.y, loss=prep.loss, regularizer=prep.regularizer, C=C,
                       bias=bool(self.bias), kernel_names=prep.kernel_names)

    # -- solving --------------------------------------------------------------
    def _run_task(self, prep: _Prepared, t: int, Cs: Sequence[float]) -> list[Any]:
        """Solve task ``t`` for every C in ``Cs`` in turn, each warm-started from the previous."""
        task = prep.tasks[t]
        K = subset_bank(prep.K, task.rows)
        where = (f"{self._owner}: problem {t + 1}/{len(prep.tasks)}"
                 + (f" ({task.describe(prep.classes)})" if prep.classes is not None
                    and len(prep.tasks) > 1 else ""))
        results: list[Any] = []
        previous = None
        for C in Cs:
            problem = self._problem(prep, task, K, C)
            self._check_support(prep.engine, problem)
            callback = None
            if self.verbose:
                def callback(rec: dict[str, Any], _w: str = where, _C: float = C) -> bool:
                    logger.info("%s C=%g it=%d objective=%.6g gap=%.3e active=%d", _w, _C,
                                rec.get("iteration", -1), rec.get("objective", math.nan),
                                rec.get("gap", math.nan), rec.get("n_active", -1))
                    return False
            result = _solve(prep.engine, problem, callback, previous)
            logger.info("%s C=%g: %s", where, C, result.message or result.status)
            results.append(result)
            previous = result
        return results

    def _run_all(self, prep: _Prepared, Cs: Sequence[float]) -> list[list[Any]]:
        """``out[t][c]``: the result of task t at ``Cs[c]``; tasks in parallel (``n_jobs``)."""
        n_tasks = len(prep.tasks)
        n_jobs = getattr(self, "n_jobs", None)
        if n_tasks > 1 and n_jobs not in (None, 1):
            from joblib import Parallel, delayed

            return list(Parallel(n_jobs=n_jobs, prefer="threads")(
                delayed(self._run_task)(prep, t, Cs) for t in range(n_tasks)))
        return [self._run_task(prep, t, Cs) for t in range(n_tasks)]

    # -- fitted state -----------------------------------------------------------
    def _set_fitted(self, prep: _Prepared, results: list[Any]) -> None:
        """Set the fitted attributes from one result per task."""
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
        self.kernels_ = prep.kernels
        self.kernel_names_ = list(prep.kernel_names)
        self.loss_ = prep.loss
        self.regularizer_ = prep.regularizer
        self.engine_ = prep.engine
        self.scaler_ = prep.scaler
        self.bank_ = prep.bank if prep.representation == "factor" else _strip_bank(prep.bank, active_idx)
        self.n_features_in_ = prep.n_features_in
        self._tasks = prep.tasks
        if prep.classes is not None:
            self.classes_ = prep.classes

    def _fit(self, X: Any, y: Any) -> "_BaseMKL":
        owner = self._owner
        C = _check_C(self.C, owner)
        with _verbosity(self.verbose):
            prep = self._prepare(X, y, C)
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, [C])
            finally:
                _release(prep)
            logger.info("%s: solved %d problem(s) in %.2f s", owner, len(runs),
                        time.perf_counter() - t0)
        self._set_fitted(prep, [r[0] for r in runs])
        return self

    def fit_path(self, X: Any, y: Any, Cs: Sequence[float] | int) -> "MKLPath":
        """Solve for every C of a regularization path, warm-starting each from the last.

        The kernel bank is built once.  The values are processed from the
        largest C (the most regularized, sparsest solution) to the smallest;
        every solve gets the previous solution as ``warm_start`` when the
        engine supports it (``engine.supports_warm_start``; other engines
        solve each C from their usual start).  The estimator itself is not
        changed: ``path.estimator(i)`` gives a fitted copy at ``path.Cs[i]``.

        Parameters
        ----------
        X, y
            As for :meth:`fit`.
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
        with _verbosity(self.verbose):
            prep = self._prepare(X, y, float(grid[0]))
            if n_path is not None:
                grid = self._path_from_c_max(prep, int(n_path))
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, list(grid))
            finally:
                _release(prep)
            total = time.perf_counter() - t0
        K = prep.K
        prep.K = np.empty((len(prep.kernel_names), 0, 0))  # the path keeps no Gram matrices
        del K
        per_C = [[runs[t][c] for t in range(len(runs))] for c in range(grid.size)]
        warm = bool(getattr(prep.engine, "supports_warm_start", False))
        return MKLPath(Cs=grid, results=per_C, kernel_names=list(prep.kernel_names),
                       warm_started=warm, time_s=total, _template=clone(self), _prep=prep)

    def _path_from_c_max(self, prep: _Prepared, n: int) -> np.ndarray:
        """``n`` values of C from ``C_max`` down to ``1e-3 C_max``, evenly on a log scale."""
        from .engines.common import zero_solution

        cmax = 0.0
        for task in prep.tasks:
            problem = self._problem(prep, task, subset_bank(prep.K, task.rows), 1.0)
            cmax = max(cmax, zero_solution(problem).C_max)
        if not (math.isfinite(cmax) and cmax > 0.0):
            raise ParamError(
                "Cs", n, f"a sequence of numbers > 0: the regularizer "
                f"{prep.regularizer.describe()} has no finite C_max (C_max = {cmax:g}), so a "
                "path from C_max cannot be made", owner=self._owner)
        return cmax * np.logspace(0.0, -3.0, n)

    # -- prediction -------------------------------------------------------------
    def _cross(self, X: Any) -> tuple[np.ndarray | None, int]:
        """Test-versus-training kernels of the active kernels, (n_active, n, N), and n.

        ``None`` instead of the kernels when no kernel is active.
        """
        check_is_fitted(self, "result_")
        owner = self._owner
        bank = self.bank_
        if self._precomputed():
            M, N = len(self.kernel_names_), bank.n_samples
            Kx = np.asarray(X)
            legacy = getattr(self, "_legacy_layout", False)
            if not legacy:
                if Kx.ndim != 3 or Kx.shape[1] != N or Kx.shape[2] != M:
                    raise ValueError(
                        f"{owner}: with kernels='precomputed', X must hold the test-versus-training "
                        f"kernels of shape (n_test, {N}, {M}); got shape {Kx.shape}")
                Kx = np.moveaxis(Kx, 2, 0)
            if Kx.ndim != 3 or Kx.shape[0] != M or Kx.shape[2] != N:
                raise ValueError(
                    f"{owner}: with kernels='precomputed', X must hold the test-versus-training "
                    f"kernels of shape ({M}, n_test, {N}); got shape {Kx.shape}")
            sub = np.array(Kx[self.active_kernels_], dtype=np.float64, order="C")
            if not np.all(np.isfinite(sub)):
                raise ValueError(f"{owner}: X contains NaN or infinite values")
            if sub.shape[0] == 0:
                return None, int(Kx.shape[1])
            return bank.normalize_cross(sub), int(Kx.shape[1])
        X = _validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        if self.scaler_ is not None:
            if sp.issparse(X) and not self.scaler_.sparse_:
                X = X.toarray()
            X = self.scaler_.transform(X)
        if getattr(bank, "representation", "array") == "factor":
            return bank.transform(X), int(X.shape[0])
        if bank.n_kernels == 0:
            return None, int(X.shape[0])
        from .kernels import MemoryBudgetError

        try:
            Kc = bank.cross(X, memory_budget_bytes=_check_budget(self.memory_budget, owner))
        except MemoryBudgetError as exc:
            raise ValueError(f"{owner}: {exc.describe('memory_budget')}") from None
        return Kc, int(X.shape[0])

    def _task_values(self, X: Any) -> np.ndarray:
        """Decision values of every binary task, (n, n_tasks)."""
        Kc, n = self._cross(X)
        results = self.result_ if isinstance(self.result_, list) else [self.result_]
        F = np.empty((n, len(results)))
        if getattr(self.bank_, "representation", "array") == "factor":
            for t, r in enumerate(results):  # the factor rows of the new points: no n x N matrix
                beta = self.bank_.coefficients(np.asarray(r.alpha, dtype=np.float64))
                F[:, t] = np.asarray(Kc.T @ beta, dtype=np.float64).ravel() + float(r.bias)
            return F
        pos_of = {int(m): i for i, m in enumerate(self.active_kernels_)}
        for t, (r, task) in enumerate(zip(results, self._tasks)):
            act = r.active_set
            f = np.full(n, float(r.bias))
            if act.size and Kc is not None:
                idx = np.array([pos_of[int(m)] for m in act], dtype=np.intp)
                alpha = np.asarray(r.alpha, dtype=np.float64)[act]
                Kt = Kc[idx] if task.rows is None else Kc[idx][:, :, task.rows]
                f += np.einsum("mij,mj->i", Kt, alpha)
            F[:, t] = f
        return F

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


def _release(prep: _Prepared) -> None:
    """Drop the shards of a sharded bank (the fitted estimator keeps what prediction needs)."""
    if prep.representation == "sharded":
        prep.K.close()


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


# ---------------------------------------------------------------------------
# Public estimators
# ---------------------------------------------------------------------------
_COMMON_DOC = """\
    kernels : "auto", "precomputed", str, list or mapping, default="auto"
        The kernel bank.  ``"auto"``: :func:`default_kernels` (7 + 3d kernels
        on the standardised features).  A preset name (``"simplemkl"``,
        ``"smomkl"``) or a list of bank entries, the vocabulary of the YAML
        ``kernels.bank`` section (``docs/data_and_kernels.md``), e.g.
        ``[{"function": "rbf", "width": [1, 5]}, {"function": "poly",
        "degree": 2, "features": "each"}]``.  ``"precomputed"``: ``X`` is
        the training Gram matrices, shape (N, N, M) (samples on the first
        two axes, kernels last: ``np.stack(Ks, axis=-1)``), in ``fit``, and
        the test-versus-training kernels, shape (N_test, N, M), in
        ``predict``/``decision_function``; the estimator is pairwise, so
        ``GridSearchCV`` and ``cross_val_score`` split it.  The former
        layout (M, N, N) still works, with a ``FutureWarning``.
    regularizer : str, mapping or Regularizer, default="elasticnet"
        A registered regularizer by name, as ``{"name": ..., **params}``, or
        an instance (a plugin's too).  The default elastic net (λ = 0.5) is
        sparse in the kernels and has a smooth conjugate, which the spicy
        engine's one-step Newton method solves in a few steps.
    C : float, default=%(C)s
        Regularization constant > 0 (larger: fewer, smoother kernels).  With
        trace-normalised kernels it does not scale with the number of samples.
        %(C_note)s
    bias : bool, default=True
        Fit an unregularized offset.
    engine : str, mapping or Engine, default="spicy"
        Any registered engine (``mklkit plugins`` lists them).
    engine_params : dict, optional
        Options of the engine (see ``docs/engines.md``).
    tol : float, optional
        Relative duality gap at which the engine stops; ``None``: the
        engine's default (spicy: 1e-2, as in SpicyMKL §6.1).  Overrides
        ``engine_params["tol"]``.
    max_iter : int, optional
        Maximum number of outer iterations; ``None``: the engine's default.
    normalize : {"auto", "trace", "diagonal", "none"}, default="auto"
        Kernel normalisation: ``"auto"`` is ``"trace"`` (unit trace, SpicyMKL
        §6.1) for a kernel bank and ``"none"`` for precomputed kernels.
    standardize : bool, default=True
        Centre and scale every feature with training statistics before the
        kernels are computed (sparse input is only scaled).  Ignored for
        precomputed kernels.
    memory_budget : int, float or str, optional
        Largest Gram bank to build (the training bank in ``fit``, the
        test-versus-training kernels in ``predict``), in bytes or as
        ``"512MB"``/``"4GiB"`` (default 4 GiB); checked before anything is
        allocated.
    factor : None, True or dict, optional
        Hold the kernels as factors :math:`K_m \approx L_mL_m^\top`
        (:func:`mklkit.kernels.build_factor_bank`): ``{"rank": r, "tol": t,
        "method": m, "seed": s}`` (``True``: the defaults); predictions go
        through the factor rows of the new points (``docs/factor_banks.md``).
    scheduler : str or distributed.Client, optional
        Build the bank in shards on a Dask cluster (``ShardedBank``); the
        shards are released after ``fit``.  Exclusive with ``factor``.
    verbose : int, default=0
        1: log the bank build and every engine iteration (module
        :mod:`logging`, shown on stderr unless the application configured
        logging); 2: also the engines' debug records.
"""

_ATTR_DOC = """\
    kernel_weights_ : ndarray of shape (n_kernels,) or (n_problems, n_kernels)
        Kernel weights :math:`d_m` (summing to 1) of the solution; one row
        per binary problem for multiclass fits.
    active_kernels_ : ndarray of int
        Indices of the kernels with a non-zero block in at least one problem
        (the only ones computed at prediction time).
    kernel_names_ : list of str
        One label per kernel of the bank, e.g. ``rbf(width=2)[x3]``.
    kernels_ : list or str
        The resolved bank description (``"precomputed"`` for Gram input).
    n_iter_ : int or ndarray of int
        Outer iterations of the engine (one per binary problem for multiclass).
    dual_gap_ : float or ndarray
        Final relative duality gaps (certificates of optimality).
    C_max_ : float or ndarray
        The smallest C at which every kernel is off (``inf`` for non-sparse
        regularizers; one per binary problem for multiclass): a path of C
        starts just below it (``fit_path(X, y, Cs=20)``).
    result_ : SolveResult or list of SolveResult
        The engines' full results (``alpha``, ``bias``, ``history``, ...).
    loss_, regularizer_, engine_ : components
        The resolved components, with their parameters.
    scaler_ : mklkit.data.Standardizer or None
    bank_ : KernelBank
        What prediction needs: the active kernels' specifications,
        normalisation constants and the (standardised) training points; its
        ``K`` is empty (the training Gram matrices are not kept).
    n_features_in_ : int
        Number of features (for precomputed kernels: the number of training
        samples, the last dimension of the test kernels).
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a data frame with string column names.
"""


class MKLClassifier(ClassifierMixin, _BaseMKL):
    __doc__ = f"""Multiple Kernel Learning classifier.

    Learns a combination of kernels and a kernel classifier together; binary
    labels of any type; several classes through one-vs-rest (default) or
    one-vs-one, all binary problems sharing one Gram bank.

    Parameters
    ----------
    loss : str, mapping or Loss, default="logistic"
        A registered classification loss.  ``predict_proba`` needs the
        logistic loss.  Whether a loss/regularizer pair is supported depends
        on the engine: the error message names the engines that can solve it.
{_COMMON_DOC % dict(C="0.05", C_note="The default is the best of a grid on the bundled UCI sets (docs/api.md).")}
    multiclass : {{"ovr", "ovo"}}, default="ovr"
        One-vs-rest (one problem per class on all rows) or one-vs-one (one
        problem per pair of classes on their rows only).
    n_jobs : int, optional
        Binary problems solved in parallel (threads; the jitted kernels
        release the GIL).  ``None``: one at a time.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
{_ATTR_DOC}
    Notes
    -----
    ``predict_proba`` (logistic loss only): binary :math:`P(y = c_1) =
    \\sigma(f)`, the sigmoid of the decision function, which the logistic
    loss models; one-vs-rest: the normalised sigmoids
    :math:`\\sigma(f_k)/\\sum_j\\sigma(f_j)`; one-vs-one: pairwise coupling
    of the pairwise sigmoids (Wu, Lin & Weng 2004, method 2).
    """

    _task = CLASSIFICATION

    def __init__(
        self,
        kernels: Any = "auto",
        *,
        loss: Any = "logistic",
        regularizer: Any = "elasticnet",
        C: float = 0.05,
        bias: bool = True,
        engine: Any = "spicy",
        engine_params: Mapping[str, Any] | None = None,
        tol: float | None = None,
        max_iter: int | None = None,
        normalize: str = "auto",
        standardize: bool = True,
        multiclass: str = "ovr",
        n_jobs: int | None = None,
        memory_budget: Any = None,
        factor: Any = None,
        scheduler: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernels = kernels
        self.loss = loss
        self.regularizer = regularizer
        self.C = C
        self.bias = bias
        self.engine = engine
        self.engine_params = engine_params
        self.tol = tol
        self.max_iter = max_iter
        self.normalize = normalize
        self.standardize = standardize
        self.multiclass = multiclass
        self.n_jobs = n_jobs
        self.memory_budget = memory_budget
        self.factor = factor
        self.scheduler = scheduler
        self.verbose = verbose

    def _encode_targets(self, y: np.ndarray) -> tuple[np.ndarray | None, list[BinaryTask]]:
        multiclass = _check_choice(self.multiclass, "multiclass", _MULTICLASS, self._owner)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"{self._owner} needs samples of at least 2 classes; got 1 class "
                f"({classes[0]!r})")
        tasks = (ovr_tasks if multiclass == "ovr" else ovo_tasks)(codes.ravel(), classes.size)
        return classes, tasks

    def fit(self, X: Any, y: Any) -> "MKLClassifier":
        """Build the kernel bank and solve the MKL problem(s).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data; with ``kernels="precomputed"`` an array (M, N, N)
            of Gram matrices.
        y : array-like of shape (n_samples,)
            Class labels (any two or more values).

        Returns
        -------
        self
        """
        return self._fit(X, y)

    def decision_function(self, X: Any) -> np.ndarray:
        """Decision values: (n,) for two classes (positive: ``classes_[1]``), else (n, n_classes).

        One-vs-one fits return scikit-learn's ``SVC`` "ovr" shape: votes plus
        a tie-breaking confidence in (-1/3, 1/3).
        """
        F = self._task_values(X)
        if len(self.classes_) == 2:
            return F[:, 0]
        if self.multiclass == "ovo":
            return ovo_decision(F, self._tasks, len(self.classes_))
        return F

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]

    @available_if(_is_logistic)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, (n, n_classes); logistic loss only (see Notes)."""
        F = self._task_values(X)
        if len(self.classes_) == 2:
            p = sigmoid(F[:, 0])
            return np.column_stack([1.0 - p, p])
        if self.multiclass == "ovo":
            return pairwise_coupling(F, self._tasks, len(self.classes_))
        return ovr_proba(F)

    @available_if(_is_logistic)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class MKLRegressor(RegressorMixin, _BaseMKL):
    __doc__ = f"""Multiple Kernel Learning regressor.

    Parameters
    ----------
    loss : str, mapping or Loss, default="squared"
        A registered regression loss (``squared``, ``eps_insensitive``,
        ``huber``, a plugin's), subject to the engine's support.
{_COMMON_DOC % dict(C="0.3", C_note="The default is the best of a grid on diabetes and liver/drinks (docs/api.md).")}
    Attributes
    ----------
{_ATTR_DOC}
    """

    _task = REGRESSION

    def __init__(
        self,
        kernels: Any = "auto",
        *,
        loss: Any = "squared",
        regularizer: Any = "elasticnet",
        C: float = 0.3,
        bias: bool = True,
        engine: Any = "spicy",
        engine_params: Mapping[str, Any] | None = None,
        tol: float | None = None,
        max_iter: int | None = None,
        normalize: str = "auto",
        standardize: bool = True,
        memory_budget: Any = None,
        factor: Any = None,
        scheduler: Any = None,
        verbose: int = 0,
    ) -> None:
        self.kernels = kernels
        self.loss = loss
        self.regularizer = regularizer
        self.C = C
        self.bias = bias
        self.engine = engine
        self.engine_params = engine_params
        self.tol = tol
        self.max_iter = max_iter
        self.normalize = normalize
        self.standardize = standardize
        self.memory_budget = memory_budget
        self.factor = factor
        self.scheduler = scheduler
        self.verbose = verbose

    def _encode_targets(self, y: np.ndarray) -> tuple[np.ndarray | None, list[BinaryTask]]:
        try:
            yf = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{self._owner}: y must be numeric; got dtype {np.asarray(y).dtype}") from None
        if not np.all(np.isfinite(yf)):
            raise ValueError(f"{self._owner}: y contains NaN or infinite values")
        return None, [BinaryTask(0, -1, None, np.ascontiguousarray(yf))]

    def fit(self, X: Any, y: Any) -> "MKLRegressor":
        """Build the kernel bank and solve the MKL problem.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data; with ``kernels="precomputed"`` an array (M, N, N).
        y : array-like of shape (n_samples,)
            Real targets.

        Returns
        -------
        self
        """
        return self._fit(X, y)

    def predict(self, X: Any) -> np.ndarray:
        """Predictions :math:`\\sum_m K_m(X, X_{train})\\alpha_m + b`, shape (n,)."""
        return self._task_values(X)[:, 0]


# ---------------------------------------------------------------------------
# Regularization path
# ---------------------------------------------------------------------------
@dataclass
class MKLPath:
    """Solutions along a regularization path (:meth:`MKLClassifier.fit_path`).

    Attributes
    ----------
    Cs : ndarray (n_Cs,)
        The regularization constants, largest first (the solve order).
    results : list of list of SolveResult
        ``results[i][t]``: binary problem ``t`` at ``Cs[i]`` (one problem for
        binary classification and regression).
    kernel_names : list of str
    warm_started : bool
        Whether the engine used the warm starts (``engine.supports_warm_start``).
    time_s : float
        Seconds spent solving the whole path (the bank build excluded).
    """

    Cs: np.ndarray
    results: list[list[Any]]
    kernel_names: list[str]
    warm_started: bool
    time_s: float
    _template: Any = field(repr=False, default=None)
    _prep: Any = field(repr=False, default=None)

    def __len__(self) -> int:
        return int(self.Cs.size)

    @property
    def active_kernels(self) -> list[np.ndarray]:
        """Per C: indices of the kernels active in at least one binary problem."""
        out = []
        for res in self.results:
            act = np.zeros(len(self.kernel_names), dtype=bool)
            for r in res:
                act[r.active_set] = True
            out.append(np.flatnonzero(act))
        return out

    @property
    def n_active(self) -> np.ndarray:
        """Per C: the number of active kernels."""
        return np.array([a.size for a in self.active_kernels])

    @property
    def kernel_weights(self) -> np.ndarray:
        """(n_Cs, n_kernels), or (n_Cs, n_problems, n_kernels) for multiclass."""
        W = np.array([[r.kernel_weights for r in res] for res in self.results], dtype=np.float64)
        return W[:, 0] if W.shape[1] == 1 else W

    @property
    def n_iter(self) -> np.ndarray:
        """Outer iterations per C (and per binary problem for multiclass)."""
        A = np.array([[r.iterations for r in res] for res in self.results])
        return A[:, 0] if A.shape[1] == 1 else A

    @property
    def gaps(self) -> np.ndarray:
        """Final relative duality gaps per C (and per binary problem)."""
        A = np.array([[r.gap for r in res] for res in self.results], dtype=np.float64)
        return A[:, 0] if A.shape[1] == 1 else A

    @property
    def solve_times(self) -> np.ndarray:
        """Engine time per C (summed over binary problems)."""
        return np.array([sum(r.time_s for r in res) for res in self.results])

    def estimator(self, i: int) -> Any:
        """A fitted estimator at ``Cs[i]`` (a clone of the one that made the path)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"path index {i} out of range for {len(self)} values of C")
        est = clone(self._template).set_params(C=float(self.Cs[i]))
        est._set_fitted(self._prep, list(self.results[i]))
        return est

    def summary(self) -> str:
        """One line per C: C, active kernels, iterations, gap, seconds."""
        lines = [f"{'C':>10}  {'active':>6}  {'iter':>5}  {'gap':>9}  {'time_s':>7}"]
        act = self.n_active
        for i, C in enumerate(self.Cs):
            res = self.results[i]
            lines.append(
                f"{C:10.4g}  {act[i]:6d}  {sum(r.iterations for r in res):5d}  "
                f"{max(r.gap for r in res):9.2e}  {sum(r.time_s for r in res):7.3f}")
        return "\n".join(lines)
