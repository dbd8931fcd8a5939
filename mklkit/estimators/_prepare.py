"""Fit preparation: the training input validated, the bank built once through the pipeline, the tasks laid out."""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import pipeline
from .._multiclass import BinaryTask
from ..components.base import REGRESSION
from ..components.params import ParamError
from ..pipeline import BankSettings, PipelineError, ProblemSettings

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data
except ImportError:  # pragma: no cover - older scikit-learn

    def validate_data(estimator: Any, *args: Any, **kwargs: Any) -> Any:
        return estimator._validate_data(*args, **kwargs)


logger = logging.getLogger("mklkit.estimators")


@dataclass
class FitState:
    prepared: Any  # the pipeline's Prepared (None once the solves are done)
    bank: Any  # what prediction needs: the bank without K (all kernels)
    tasks: list[BinaryTask]
    loss: Any
    regularizer: Any
    engine: Any
    kernels: Any  # resolved bank entries or "precomputed"
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
    refinement: Any = None  # the factors' refinement (mklkit.pipeline.refine.FactorRefinement)
    subset: dict[int, np.ndarray] = field(default_factory=dict)  # per task: the kernels kept (default bank)
    bank_choice: dict[int, dict[str, Any]] = field(default_factory=dict)  # per task: what chose them


@dataclass
class Input:
    """The training input of a fit, validated: the pipeline's data and the settings of its bank."""

    data: Any  # the pipeline's Data (labels of the first binary problem)
    y: np.ndarray  # the labels as validated (rows of zero weight dropped)
    sw: np.ndarray | None  # the sample weights of those rows
    n_features_in: int
    kernels: Any  # resolved bank entries or "precomputed"
    bank_settings: Any  # the pipeline's BankSettings
    normalize: str  # "auto" resolved


def strip_bank(bank: Any, keep: np.ndarray | None = None) -> Any:
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


def _check_given_kernels(K: np.ndarray, owner: str) -> None:
    """The precomputed kernels' PSD check (:func:`mklkit.kernels.precomputed.check_psd`), naming X's slice.

    ``K`` is the fit's C-contiguous float64 copy (:func:`mklkit.pipeline.data.kernels_in_order`).
    Non-finite values are left to the pipeline's check, which names them.
    """
    from .._jit.gram import all_finite
    from ..kernels import BankError
    from ..kernels.precomputed import check_psd

    if not all(all_finite(K[m]) for m in range(K.shape[0])):  # kernel by kernel, no (M, N, N) mask
        return
    try:
        check_psd(K, "X", index="[:, :, {m}]")
    except BankError as exc:
        raise ValueError(f"{owner}: {exc}") from None


def release(prep: FitState) -> None:
    """Drop the shards of a sharded bank (the fitted estimator keeps what prediction needs)."""
    prep.prepared.close()


class FitPreparation:
    """What a fit solves, prepared once (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

    def _encode_targets(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, list[BinaryTask]]:
        raise NotImplementedError

    def _gram_input(self, X: Any) -> np.ndarray:
        """The training Gram matrices X, (N, N, M) (samples first, kernels last), as an (M, N, N) view."""
        X = np.asarray(X)
        if X.ndim != 3 or X.shape[0] != X.shape[1]:
            raise ValueError(
                f"{self._owner}: with kernels='precomputed', X must be the training Gram matrices of shape "
                f"(n_samples, n_samples, n_kernels) (samples on the first two axes, as scikit-learn's "
                f"splitters index a pairwise input); got shape {X.shape}"
            )
        return np.moveaxis(X, 2, 0)

    def _given_kernel_input(self, X: Any, y: Any, sample_weight: Any, normalize: str, kind: str) -> Input:
        """``kernels='precomputed'``: the Gram matrices ``X`` and their labels and weights, checked."""
        owner = self._owner
        normalize = "none" if normalize == "auto" else normalize
        if normalize == "diagonal":
            raise ParamError(
                "normalize",
                self.normalize,
                "'auto', 'none' or 'trace' with "
                "kernels='precomputed' (unit-diagonal normalisation of test "
                "kernels needs the test points' own k(x, x))",
                owner=owner,
            )
        if kind not in ("array", "auto"):
            raise ParamError(
                "factor" if kind == "factor" else "scheduler",
                getattr(self, "factor", None) or getattr(self, "scheduler", None),
                "None with kernels='precomputed' (given kernels are held as one array)",
                owner=owner,
            )
        K = self._gram_input(X)
        y = self._validate_y(y)
        if y.shape[0] != K.shape[1]:
            raise ValueError(f"{owner}: X holds Gram matrices of {K.shape[1]} samples but y has {y.shape[0]} labels")
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):
            raise ValueError(
                f"{owner}: with kernels='precomputed', sample_weight must be > 0 for "
                f"every sample (a zero weight drops the sample: leave its rows and "
                f"columns out of X); got {float(np.min(sw))!r}"
            )
        data = dataclasses.replace(pipeline.gram_data(K, y, self._task), w_train=sw)
        _check_given_kernels(data.K_train, owner)  # the contiguous copy
        # the estimator's own parameters are checked above; the kernels come in memory, not from a file
        bank_settings = BankSettings.model_construct(normalize=normalize, memory_budget=self.memory_budget)
        return Input(data, y, sw, int(K.shape[1]), "precomputed", bank_settings, normalize)

    def _feature_input(self, X: Any, y: Any, sample_weight: Any, normalize: str, rep_settings: dict[str, Any]) -> Input:
        """Feature vectors ``X``: validated (rows of zero weight dropped), standardized as asked, with the bank's
        description (checked by the pipeline when it is expanded: errors name the estimator's parameter)."""
        normalize = "trace" if normalize == "auto" else normalize
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=self._task == REGRESSION, ensure_min_samples=2
        )
        y = self._validate_y(y)
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):  # a zero weight: the sample is dropped
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
            normalize=normalize,
            memory_budget=self.memory_budget,
            **rep_settings,
        )
        return Input(data, y, sw, n_features_in, kernels_resolved, bank_settings, normalize)

    def _binary_tasks(self, given: Input, kind: str) -> tuple[np.ndarray | None, list[BinaryTask]]:
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
            raise ParamError(
                "multiclass",
                getattr(self, "multiclass", None),
                "'ovr' with a factor or sharded bank (one-vs-one problems take rows of the Gram matrices)",
                owner=self._owner,
            )
        y_first = np.full(given.y.shape[0], -1.0) if tasks[0].rows is not None else tasks[0].y
        if tasks[0].rows is not None:
            y_first[tasks[0].rows] = tasks[0].y
        given.data.y_train = np.ascontiguousarray(y_first, dtype=np.float64)
        return classes, tasks

    def _prepare(self, X: Any, y: Any, C: float, sample_weight: Any = None) -> FitState:
        """Validate everything, build the bank once (:func:`mklkit.pipeline.prepare`) and lay out the tasks.

        The engine's support for the loss/regularizer pair (and the bank's
        representation) is checked on the pipeline's tiny probe problem
        before any kernel is computed.
        """
        from ..kernels.factorize.settings import warning_names

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
                prepared = pipeline.prepare(
                    data, given.bank_settings, settings, engine, progress=None if self.verbose else False
                )
        except PipelineError as exc:
            raise self._error(exc) from None
        build_s = time.perf_counter() - t0
        bank = prepared.bank
        logger.info(
            "%s: %d kernels on %d samples (normalize=%s, %s) in %.2f s; %d binary problem(s)",
            owner,
            prepared.n_kernels,
            data.n_train,
            given.normalize,
            prepared.representation,
            build_s,
            len(tasks),
        )
        kept = bank.cross_bank() if prepared.representation == "sharded" else bank
        return FitState(
            prepared=prepared,
            bank=kept if prepared.representation == "factor" else strip_bank(kept),
            tasks=tasks,
            loss=loss,
            regularizer=regularizer,
            engine=engine,
            kernels=given.kernels,
            kernel_names=list(prepared.kernel_names),
            scaler=data.scaler,
            classes=classes,
            n_features_in=given.n_features_in,
            timings={"bank_s": build_s},
            representation=prepared.representation,
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
