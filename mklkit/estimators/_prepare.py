"""Fit preparation: the training input validated, the bank built once through the pipeline, the tasks laid out."""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import _check_sample_weight, column_or_1d, validate_data

from .. import pipeline
from .._multiclass import BinaryTask
from ..components.base import REGRESSION
from ..components.params import ParamError
from ..pipeline import BankSettings, PipelineError, ProblemSettings
from ..pipeline.bank_settings import kernel_resolver

logger = logging.getLogger("mklkit.estimators")


@dataclass
class FitState:
    """What a fit solves and what its fitted attributes are made of; the dicts are per task."""

    prepared: Any  # the pipeline's Prepared (None once a path is solved)
    bank: Any  # what prediction needs: the bank without K (all kernels), or the factor bank
    tasks: list[BinaryTask]
    loss: Any
    regularizer: Any
    engine: Any
    kernels: Any  # resolved bank entries or "precomputed"
    kernel_names: list[str]
    scaler: Any
    classes: np.ndarray | None
    n_features_in: int
    task_C: dict[int, float] = field(default_factory=dict)  # the C of the task's last solve
    selection: dict[int, Any] = field(default_factory=dict)  # C="path"'s HeldoutPath
    representation: str = "array"
    target: tuple[float, float] = (0.0, 1.0)  # regression: the engines saw (y - offset) / scale
    approximation: dict[str, Any] | None = None  # a factor bank's FactorBank.approximation()
    refinement: Any = None  # mklkit.pipeline.refine.FactorRefinement
    subset: dict[int, np.ndarray] = field(default_factory=dict)  # the kernels kept of the default bank
    bank_choice: dict[int, dict[str, Any]] = field(default_factory=dict)  # what chose them
    weighting: Any = None  # a two-stage method's weighting component (pipeline.weighting)
    joint_loss: Any = None  # multiclass="joint": the multiclass loss of the one problem


@dataclass
class Input:
    """The validated training input: the pipeline's data (its rows' labels and weights) and the bank's settings."""

    data: Any
    n_features_in: int
    kernels: Any  # resolved bank entries or "precomputed"
    bank_settings: Any


def strip_bank(bank: Any, keep: np.ndarray | None = None) -> Any:
    """A shallow copy of a KernelBank restricted to ``keep``, its ``K`` an empty (M_keep, N, 0) array: what
    :meth:`KernelBank.cross` needs (specs, normalisation constants, training points), small to pickle."""
    new = copy.copy(bank)
    keep = np.arange(bank.n_kernels) if keep is None else np.asarray(keep, dtype=np.intp)
    new.K = np.empty((keep.size, bank.n_samples, 0))
    new.names = [bank.names[m] for m in keep]
    if bank.specs is not None:
        new.specs = [bank.specs[m] for m in keep]
    new.traces = np.asarray(bank.traces)[keep].copy()
    if bank.train_diag is not None:
        new.train_diag = np.asarray(bank.train_diag)[keep].copy()
    return new


class FitPreparation:
    """What a fit solves, prepared once (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

    def _given_kernel_input(self, X: Any, y: Any, sample_weight: Any, normalize: str, kind: str) -> Input:
        """``kernels='precomputed'``: the Gram matrices ``X``, (N, N, M), and their labels and weights, checked."""
        from .._jit.gram import all_finite
        from ..kernels import BankError
        from ..kernels.precomputed import check_psd

        owner = self._owner
        normalize = "none" if normalize == "auto" else normalize
        if normalize == "diagonal":
            raise ParamError(
                "normalize",
                self.normalize,
                "'auto', 'none' or 'trace' with kernels='precomputed' (unit-diagonal normalisation of test "
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
        X = np.asarray(X)
        if X.ndim != 3 or X.shape[0] != X.shape[1]:
            raise ValueError(
                f"{owner}: with kernels='precomputed', X must be the training Gram matrices of shape "
                f"(n_samples, n_samples, n_kernels) (samples on the first two axes, as scikit-learn's "
                f"splitters index a pairwise input); got shape {X.shape}"
            )
        K = np.moveaxis(X, 2, 0)
        if y is None:
            raise ValueError(f"{owner} requires y to be passed, but the target y is None")
        y = column_or_1d(y)
        if y.shape[0] != K.shape[1]:
            raise ValueError(f"{owner}: X holds Gram matrices of {K.shape[1]} samples but y has {y.shape[0]} labels")
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):
            raise ValueError(
                f"{owner}: with kernels='precomputed', sample_weight must be > 0 for every sample (a zero weight "
                f"drops the sample: leave its rows and columns out of X); got {float(np.min(sw))!r}"
            )
        data = pipeline.gram_data(K, y, self._task, w_train=sw)
        # the PSD check on the contiguous copy; non-finite values are left to the pipeline's check, which names them
        if all(all_finite(data.K_train[m]) for m in range(data.K_train.shape[0])):
            try:
                check_psd(data.K_train, "X", index="[:, :, {m}]")
            except BankError as exc:
                raise ValueError(f"{owner}: {exc}") from None
        bank_settings = BankSettings.model_construct(normalize=normalize, memory_budget=self.memory_budget)
        return Input(data, int(K.shape[1]), "precomputed", bank_settings)

    def _feature_input(self, X: Any, y: Any, sample_weight: Any, normalize: str, rep_settings: dict[str, Any]) -> Input:
        """Feature vectors ``X``, validated (rows of zero weight dropped) and standardized as asked, with the bank's
        description (checked by the pipeline when expanded)."""
        normalize = "trace" if normalize == "auto" else normalize
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=np.float64, y_numeric=self._task == REGRESSION, ensure_min_samples=2
        )
        sw = self._sample_weight(sample_weight, y)
        if sw is not None and not np.all(sw > 0.0):  # a zero weight: the sample is dropped
            keep = np.flatnonzero(sw > 0.0)
            X, y, sw = X[keep], y[keep], sw[keep]
        n_features_in = int(X.shape[1])
        kernels = self._bank_entries(n_features_in, X)
        names = getattr(self, "feature_names_in_", None)
        data = pipeline.array_data(X, y, self._task, names, w_train=sw)
        if self._standardizes(X, kernels):
            data = pipeline.standardize(data)
        bank_settings = BankSettings.model_construct(
            preset=kernels if isinstance(kernels, str) else None,
            bank=None if isinstance(kernels, str) else tuple(kernels),
            normalize=normalize,
            memory_budget=self.memory_budget,
            **rep_settings,
        )
        return Input(data, n_features_in, kernels, bank_settings)

    def _standardizes(self, X: Any, kernels: Any) -> bool:
        """Whether the features are standardized: ``"auto"``: dense features, unless a kernel of the bank reads
        its features as given (0/1 indicators, symbol codes: ``KernelFunction.raw_input``); sparse ones
        (indicators, counts) are kept as they are.  ``True`` with such a kernel is a :class:`ParamError`."""
        from ..kernels import raw_input_kernels

        raw = raw_input_kernels(kernels, resolve=kernel_resolver(), root="kernels")
        if isinstance(self.standardize, str):
            return not sp.issparse(X) and not raw
        if self.standardize and raw:
            key, name = raw[0]
            raise ParamError(
                "standardize",
                self.standardize,
                f"'auto' or False: kernel {name!r} ({key}) reads its features as given (0/1 indicators or "
                "symbol codes), so they must not be standardised",
                owner=self._owner,
            )
        return bool(self.standardize)

    def _binary_tasks(self, given: Input, kind: str) -> tuple[np.ndarray | None, list[BinaryTask], tuple[float, float]]:
        """:meth:`_encode_targets` of the labels (one-vs-one problems take rows of Gram matrices); the labels of the
        first problem on every row become the data's, for the pipeline's checks."""
        y = given.data.y_train
        classes, tasks, target = self._encode_targets(y, given.data.w_train)
        rows = any(t.rows is not None for t in tasks)
        if kind == "auto" and rows:
            given.bank_settings = given.bank_settings.model_copy(update={"factor": False})
        elif kind != "array" and rows:
            raise ParamError(
                "multiclass",
                getattr(self, "multiclass", None),
                "'ovr' with a factor or sharded bank (one-vs-one problems take rows of the Gram matrices)",
                owner=self._owner,
            )
        y_first = tasks[0].y
        if tasks[0].rows is not None:
            y_first = np.full(y.shape[0], -1.0)
            y_first[tasks[0].rows] = tasks[0].y
        given.data.y_train = np.ascontiguousarray(y_first, dtype=np.float64)
        return classes, tasks, target

    def _prepare(self, X: Any, y: Any, C: float, sample_weight: Any = None) -> FitState:
        """Validate everything, build the bank once (:func:`mklkit.pipeline.prepare`; the engine's support is
        checked on its probe problem before any kernel is computed) and lay out the tasks."""
        from ..kernels.factorize.settings import warning_names

        loss, regularizer, engine = self._components()
        weighting = self._weighting()
        normalize = self._checked_options()
        kind, rep_settings = self._representation()
        if self._precomputed():
            given = self._given_kernel_input(X, y, sample_weight, normalize, kind)
        else:
            given = self._feature_input(X, y, sample_weight, normalize, rep_settings)
        classes, tasks, target = self._binary_tasks(given, kind)
        data = given.data
        settings = ProblemSettings(loss=loss, regularizer=regularizer, C=C, bias=bool(self.bias))
        t0 = time.perf_counter()
        try:
            with warning_names(self._warning_text):
                progress = None if self.verbose else False
                prepared = pipeline.prepare(data, given.bank_settings, settings, engine, progress=progress)
        except PipelineError as exc:
            raise self._error(exc) from None
        rep = prepared.representation
        logger.info(
            f"{self._owner}: {prepared.n_kernels} kernels on {data.n_train} samples "
            f"(normalize={given.bank_settings.normalize}, {rep}) in {time.perf_counter() - t0:.2f} s; {len(tasks)} binary problem(s)"
        )
        bank = prepared.bank.cross_bank() if rep == "sharded" else prepared.bank
        return FitState(
            prepared=prepared,
            bank=bank if rep == "factor" else strip_bank(bank),
            tasks=tasks,
            loss=loss,
            regularizer=regularizer,
            engine=engine,
            kernels=given.kernels,
            kernel_names=list(prepared.kernel_names),
            scaler=data.scaler,
            classes=classes,
            n_features_in=given.n_features_in,
            representation=rep,
            approximation=bank.approximation() if rep == "factor" else None,
            target=target,
            weighting=weighting,
        )

    def _sample_weight(self, sample_weight: Any, y: np.ndarray) -> np.ndarray | None:
        """The weights of a fit, validated by scikit-learn's ``_check_sample_weight``; ``None``: unweighted (also
        for weights all 1)."""
        if sample_weight is None:
            return None
        sw = _check_sample_weight(sample_weight, y, dtype=np.float64, ensure_non_negative=True)  # finite too
        if not np.any(sw > 0.0):
            raise ValueError(f"{self._owner}: sample_weight must have a weight > 0; got all zeros")
        return None if np.all(sw == 1.0) else np.array(sw, dtype=np.float64)
