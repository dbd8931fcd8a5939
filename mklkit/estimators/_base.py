"""The estimators' base: ``fit`` and ``fit_path`` over the mixins of the modules before it; the fitted state, the
decision values of new points, pickles and tags."""

from __future__ import annotations

import contextlib
import logging
import math
import time
import warnings
from typing import Any, Iterator, Sequence

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from .._interrupts import interrupt_guard
from ..components.base import CLASSIFICATION, REGRESSION
from ..components.params import ParamError
from ..pipeline import new_points
from ..pipeline.heldout import c_max
from ..pipeline.joint import class_codes, joint_C_max, joint_loss
from ..pipeline.problem_settings import C_NAMES
from ..result import TrivialModelWarning, active_union, trivial_message, warn_if_trivial
from ._checks import ParameterChecks, check_budget, check_C
from ._path import MKLPath, pack_results, unpack_results
from ._prepare import FitPreparation, FitState, strip_bank
from ._solve import Solving, verbosity

logger = logging.getLogger("mklkit.estimators")


class BaseMKL(ParameterChecks, FitPreparation, Solving, BaseEstimator):
    """Shared machinery of :class:`MKLClassifier` and :class:`MKLRegressor`."""

    _task: str = CLASSIFICATION

    def _set_fitted(self, prep: FitState, results: list[Any], predictor: Any = None) -> None:
        """The fitted attributes from one result per task; on a factor bank ``bank_`` is their
        :class:`~mklkit.kernels.factor.FactorPredictor` (``predictor``, or made here)."""
        single = len(results) == 1

        def per_task(values: list[Any], dtype: Any = None) -> Any:
            return values[0] if single else np.array(values, dtype=dtype)

        active_idx = active_union(results)
        self.result_ = results[0] if single else list(results)
        self.kernel_weights_ = per_task([np.array(r.kernel_weights, dtype=np.float64) for r in results], np.float64)
        self.active_kernels_ = active_idx
        self.n_iter_ = per_task([int(r.iterations) for r in results])
        self.dual_gap_ = per_task([float(r.gap) for r in results])
        self.C_max_ = per_task([math.nan if r.C_max is None else float(r.C_max) for r in results])
        self.C_ = per_task([float(prep.task_C.get(t, math.nan)) for t in range(len(results))])
        sel = [prep.selection.get(t) for t in range(len(results))]
        if any(v is not None for v in sel):
            self.C_selection_ = sel[0] if single else sel
        elif hasattr(self, "C_selection_"):
            del self.C_selection_
        self.bank_choice_ = prep.bank_choice.get(0) if single else None
        self.kernels_ = prep.kernels
        self.kernel_names_ = list(prep.kernel_names)
        self.loss_, self.regularizer_, self.engine_ = prep.loss, prep.regularizer, prep.engine
        self.solved_by_ = per_task([r.solved_by or prep.engine.name for r in results], object)
        self.scaler_ = prep.scaler
        factor = prep.representation == "factor"
        if factor:
            self.bank_ = predictor if predictor is not None else _factor_predictor(prep.bank, results, active_idx)
        else:
            self.bank_ = strip_bank(prep.bank, active_idx)
        self.factor_approximation_ = prep.approximation if factor else None
        self.factor_refinement_ = prep.refinement
        self.n_features_in_ = prep.n_features_in
        self._tasks = prep.tasks
        if prep.classes is not None:
            self.classes_ = prep.classes
        if self._task == REGRESSION:
            self.y_offset_, self.y_scale_ = (float(v) for v in prep.target)
        if self._joint(prep):  # one problem: one weighting, gap, iteration count and C for all classes
            for name in ("kernel_weights_", "n_iter_", "dual_gap_", "C_max_", "C_"):
                setattr(self, name, getattr(self, name)[0])
            self.n_iter_, self.dual_gap_ = int(self.n_iter_), float(self.dual_gap_)
            self.C_max_, self.C_ = float(self.C_max_), float(self.C_)
            if hasattr(self, "C_selection_"):
                self.C_selection_ = self.C_selection_[0]
            self.solved_by_ = "joint"
            self.loss_ = prep.joint_loss

    @contextlib.contextmanager
    def _prepared(self, X: Any, y: Any, C: float, sample_weight: Any) -> Iterator[FitState]:
        """The fit prepared (:meth:`_prepare`) while the block solves it; a sharded bank's shards released after."""
        with verbosity(self.verbose), self._compiling(), interrupt_guard():
            prep = self._prepare(X, y, C, sample_weight)
            try:
                yield prep
            finally:
                prep.prepared.close()

    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> "BaseMKL":
        named = isinstance(self.C, str) and self.C in C_NAMES
        C: Any = self.C if named else check_C(self.C, self._owner, allow_auto=True)
        with self._prepared(X, y, 1.0 if named else C, sample_weight) as prep:
            t0 = time.perf_counter()
            results = self._refine(prep, [r[0] for r in self._run_all(prep, [C])])
            logger.info("%s: solved %d problem(s) in %.2f s", self._owner, len(results), time.perf_counter() - t0)
        self._set_fitted(prep, results)
        off = [t for t, r in enumerate(results[:1] if self._joint(prep) else results) if r.trivial]
        if off:  # one TrivialModelWarning when some binary problem has every kernel off
            t = off[0]
            where = f"{self._owner}: C"
            if len(results) > 1:
                desc = prep.tasks[t].describe(prep.classes) if prep.classes is not None else f"problem {t + 1}"
                where = f"{self._owner}: {len(off)} of {len(results)} binary problems, e.g. {desc}: C"
            auto = isinstance(self.C, str) and self.C in ("auto", "scale")
            warn_if_trivial(results[t], prep.task_C.get(t, math.nan), where=where, stacklevel=3, auto=auto)
        return self

    def fit_path(self, X: Any, y: Any, Cs: Sequence[float] | int, sample_weight: Any = None) -> "MKLPath":
        """Solve for every C of a regularization path, warm-starting each from the last.

        The kernel bank is built once; the values are solved from the largest C (the sparsest solution) down,
        each from the previous solution where the engine supports warm starts (``engine.supports_warm_start``).
        The estimator itself is not changed: ``path.estimator(i)`` is a fitted copy at ``path.Cs[i]``.

        Parameters
        ----------
        X, y, sample_weight
            As for :meth:`fit` (``C_max`` then accounts for the weights).
        Cs : sequence of float, or int
            Regularization constants > 0 (at least one); or the number of values spaced evenly on a log scale
            from :math:`C_{max}` (where every kernel is off, :func:`mklkit.engines.common.zero_solution`; the
            largest over the binary problems) to :math:`10^{-3}C_{max}`, as glmnet and celer do, which needs a
            sparse regularizer (``l1``, ``elasticnet`` with ``lam < 1``).

        Returns
        -------
        MKLPath
        """
        owner = self._owner
        n_path = Cs if isinstance(Cs, (int, np.integer)) and not isinstance(Cs, bool) else None
        if n_path is not None:
            if n_path < 1:
                raise ParamError("Cs", Cs, "a number of values >= 1, or a sequence of numbers > 0", owner=owner)
            grid = np.array([1.0])
        else:
            values = [Cs] if np.isscalar(Cs) else list(np.asarray(Cs, dtype=object).ravel())
            if len(values) == 0:
                raise ParamError("Cs", Cs, "a non-empty sequence of numbers > 0", owner=owner)
            grid = np.array(sorted({check_C(c, owner, "Cs") for c in values}, reverse=True))
        with self._prepared(X, y, float(grid[0]), sample_weight) as prep:
            if n_path is not None:
                grid = self._path_from_c_max(prep, int(n_path))
            t0 = time.perf_counter()
            runs = self._run_all(prep, list(grid))
            total = time.perf_counter() - t0
        prep.prepared = None  # the path keeps no Gram matrices
        per_C = [[task_runs[c] for task_runs in runs] for c in range(grid.size)]
        off = [float(C) for C, res in zip(grid, per_C) if all(r.trivial for r in res)]
        if n_path is None and off:  # explicit values: say which learn nothing (a path from C_max starts trivial)
            cmax = [r.C_max for r in per_C[0] if r.C_max is not None]
            text = trivial_message(min(off), max(cmax) if cmax else None, where=f"{owner}.fit_path: Cs")
            listed = ", ".join(f"{c:.6g}" for c in off)
            warnings.warn(
                f"{text} (all kernels off at {len(off)} of {grid.size} values of Cs: {listed})",
                TrivialModelWarning,
                stacklevel=2,
            )
        predictors = None
        if prep.representation == "factor":  # per C the active kernels' maps; the training factors go
            predictors = [_factor_predictor(prep.bank, res, None) for res in per_C]
            prep.bank = None
        return MKLPath(
            Cs=grid,
            results=per_C,
            kernel_names=list(prep.kernel_names),
            warm_started=bool(getattr(prep.engine, "supports_warm_start", False)),
            time_s=total,
            _template=clone(self),
            _prep=prep,
            _predictors=predictors,
        )

    def _path_from_c_max(self, prep: FitState, n: int) -> np.ndarray:
        """``n`` values of C from ``C_max`` down to ``1e-3 C_max``, evenly on a log scale."""
        if self._joint(prep):
            base = prep.prepared.subproblem(prep.tasks[0].y)
            cmax = joint_C_max(base, class_codes(prep.tasks), len(prep.classes), joint_loss(self.loss, self._owner))
        else:
            cmax = max([0.0] + [c_max(prep.prepared.subproblem(t.y, t.rows)) for t in prep.tasks])
        if not (math.isfinite(cmax) and cmax > 0.0):
            raise ParamError(
                "Cs",
                n,
                f"a sequence of numbers > 0: the regularizer {prep.regularizer.describe()} has no finite C_max "
                f"(C_max = {cmax:g}), so a path from C_max cannot be made",
                owner=self._owner,
            )
        return cmax * np.logspace(0.0, -3.0, n)

    def _test_side(self, X: Any) -> Any:
        """The test side of ``X`` (:func:`mklkit.pipeline.new_points`): the active kernels, or factor rows."""
        from ..kernels import MemoryBudgetError

        check_is_fitted(self, "result_")
        owner = self._owner
        active = np.asarray(self.active_kernels_, dtype=np.intp)
        if self._precomputed():
            M, N = len(self.kernel_names_), self.bank_.n_samples
            Kx = np.asarray(X)
            if Kx.ndim != 3 or Kx.shape[1] != N or Kx.shape[2] != M:
                raise ValueError(
                    f"{owner}: with kernels='precomputed', X must hold the test-versus-training "
                    f"kernels of shape (n_test, {N}, {M}); got shape {Kx.shape}"
                )
            sub = np.moveaxis(Kx, 2, 0)[active]
            if not np.all(np.isfinite(sub)):
                raise ValueError(f"{owner}: X contains NaN or infinite values")
            return new_points(self.bank_, K=sub, kernels=active)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        budget = check_budget(self.memory_budget, owner)
        try:
            return new_points(self.bank_, X, scaler=self.scaler_, kernels=active, memory_budget=budget)
        except MemoryBudgetError as exc:
            raise ValueError(f"{owner}: {exc.describe('memory_budget')}") from None

    def _task_values(self, X: Any) -> np.ndarray:
        """Decision values of every binary task, (n, n_tasks)."""
        side = self._test_side(X)
        if side.K is None:  # a factor bank: the fitted FactorPredictor maps the points (all tasks at once)
            return self.bank_.decision_function(side.X)
        results = self.result_ if isinstance(self.result_, list) else [self.result_]
        return np.column_stack(
            [side.decision_function(r, self.bank_, rows=task.rows) for r, task in zip(results, self._tasks)]
        )

    def __getstate__(self) -> dict[str, Any]:
        """``result_``'s coefficients pickle their non-zero rows only (zeros come back on loading)."""
        state = super().__getstate__()
        return {**state, "result_": pack_results(state["result_"])} if "result_" in state else state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "result_" in state:
            state = {**state, "result_": unpack_results(state["result_"])}
        super().__setstate__(state)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = not self._precomputed()
        if self._precomputed():  # X (n, n_train, M): scikit-learn's splitters index its first two axes
            tags.input_tags.pairwise = True
            tags.input_tags.two_d_array = False
            tags.input_tags.three_d_array = True
        return tags


def _factor_predictor(bank: Any, results: Sequence[Any], active: np.ndarray | None) -> Any:
    """The :class:`~mklkit.kernels.factor.FactorPredictor` of the results (one per task): the maps of the
    ``active`` kernels (``None``: those active in some result) and their folded coefficients."""
    active = active_union(results) if active is None else active
    alpha = np.stack([np.asarray(r.alpha, dtype=np.float64) for r in results])
    return bank.predictor(alpha, np.array([float(r.bias) for r in results]), active)
