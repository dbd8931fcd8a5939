"""The estimators' base: fit and fit_path over the parameter checks, the fit preparation, the solves and
the prediction of the modules before it; the fitted state, pickles and tags."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator, clone

from .._interrupts import interrupt_guard
from ..components.base import CLASSIFICATION, REGRESSION
from ..components.params import ParamError
from ..pipeline.problem_settings import C_NAMES
from ..result import TrivialModelWarning, trivial_message, warn_if_trivial
from ._checks import ParameterChecks, check_C
from ._path import MKLPath, pack_results, unpack_results
from ._predict import Prediction
from ._prepare import FitPreparation, FitState, release, strip_bank
from ._solve import Solving, verbosity

logger = logging.getLogger("mklkit.estimators")


class BaseMKL(ParameterChecks, FitPreparation, Solving, Prediction, BaseEstimator):
    """Shared machinery of :class:`MKLClassifier` and :class:`MKLRegressor`."""

    _task: str = CLASSIFICATION

    # -- fitted state -----------------------------------------------------------
    def _set_fitted(self, prep: FitState, results: list[Any], predictor: Any = None) -> None:
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
            self.bank_ = strip_bank(prep.bank, active_idx)
        # on a factor bank: what the factors leave out of the kernels (None otherwise)
        self.factor_approximation_ = prep.approximation if prep.representation == "factor" else None
        self.factor_refinement_ = prep.refinement
        self.n_features_in_ = prep.n_features_in
        self._tasks = prep.tasks
        if prep.classes is not None:
            self.classes_ = prep.classes
        if self._task == REGRESSION:
            self.y_offset_, self.y_scale_ = (float(v) for v in prep.target)

    def _fit(self, X: Any, y: Any, sample_weight: Any = None) -> "BaseMKL":
        owner = self._owner
        named = isinstance(self.C, str) and self.C in C_NAMES
        C: Any = self.C if named else check_C(self.C, owner, allow_auto=True)
        with verbosity(self.verbose), self._compiling(), interrupt_guard():
            prep = self._prepare(X, y, 1.0 if named else C, sample_weight)
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, [C])
                refined = self._refine(prep, [r[0] for r in runs])
                runs = [[r] for r in refined]
            finally:
                release(prep)
            logger.info("%s: solved %d problem(s) in %.2f s", owner, len(runs), time.perf_counter() - t0)
        self._set_fitted(prep, [r[0] for r in runs])
        self._warn_trivial(prep, [r[0] for r in runs])
        return self

    def _warn_trivial(self, prep: FitState, results: Sequence[Any]) -> None:
        """One :class:`~mklkit.result.TrivialModelWarning` when some binary problem has every kernel off."""

        off = [t for t, r in enumerate(results) if r.trivial]
        if not off:
            return
        t = off[0]
        where = f"{self._owner}: C"
        if len(results) > 1:
            desc = prep.tasks[t].describe(prep.classes) if prep.classes is not None else f"problem {t + 1}"
            where = f"{self._owner}: {len(off)} of {len(results)} binary problems, e.g. {desc}: C"
        warn_if_trivial(
            results[t],
            prep.task_C.get(t, math.nan),
            where=where,
            stacklevel=4,
            auto=isinstance(self.C, str) and self.C in ("auto", "scale"),
        )

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
                raise ParamError("Cs", Cs, "a number of values >= 1, or a sequence of numbers > 0", owner=owner)
            grid = np.array([1.0])
        else:
            values = [Cs] if np.isscalar(Cs) else list(np.asarray(Cs, dtype=object).ravel())
            if len(values) == 0:
                raise ParamError("Cs", Cs, "a non-empty sequence of numbers > 0", owner=owner)
            grid = np.array(sorted({check_C(c, owner, "Cs") for c in values}, reverse=True))
        with verbosity(self.verbose), self._compiling(), interrupt_guard():
            prep = self._prepare(X, y, float(grid[0]), sample_weight)
            if n_path is not None:
                grid = self._path_from_c_max(prep, int(n_path))
            t0 = time.perf_counter()
            try:
                runs = self._run_all(prep, list(grid))
            finally:
                release(prep)
            total = time.perf_counter() - t0
        prep.prepared = None  # the path keeps no Gram matrices
        if n_path is None:  # explicit values: say which learn nothing (a path from C_max starts trivial)
            off = [float(grid[c]) for c in range(grid.size) if all(r.trivial for r in _runs_at(runs, c))]
            if off:
                import warnings

                cmax = [r.C_max for r in _runs_at(runs, 0) if r.C_max is not None]
                text = trivial_message(min(off), max(cmax) if cmax else None, where=f"{owner}.fit_path: Cs")
                warnings.warn(
                    f"{text} (all kernels off at {len(off)} of {grid.size} values of Cs: "
                    f"{', '.join(f'{c:.6g}' for c in off)})",
                    TrivialModelWarning,
                    stacklevel=2,
                )
        per_C = [[runs[t][c] for t in range(len(runs))] for c in range(grid.size)]
        warm = bool(getattr(prep.engine, "supports_warm_start", False))
        predictors = None
        if prep.representation == "factor":  # per C the active kernels' maps; the training factors go
            predictors = [_factor_predictor(prep.bank, res, None) for res in per_C]
            prep.bank = None
        return MKLPath(
            Cs=grid,
            results=per_C,
            kernel_names=list(prep.kernel_names),
            warm_started=warm,
            time_s=total,
            _template=clone(self),
            _prep=prep,
            _predictors=predictors,
        )

    def _path_from_c_max(self, prep: FitState, n: int) -> np.ndarray:
        """``n`` values of C from ``C_max`` down to ``1e-3 C_max``, evenly on a log scale."""
        from ..engines.common import zero_solution

        cmax = 0.0
        for task in prep.tasks:
            problem = prep.prepared.subproblem(task.y, task.rows, C=1.0)
            cmax = max(cmax, zero_solution(problem).C_max)
        if not (math.isfinite(cmax) and cmax > 0.0):
            raise ParamError(
                "Cs",
                n,
                f"a sequence of numbers > 0: the regularizer "
                f"{prep.regularizer.describe()} has no finite C_max (C_max = {cmax:g}), so a "
                "path from C_max cannot be made",
                owner=self._owner,
            )
        return cmax * np.logspace(0.0, -3.0, n)

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


def _runs_at(runs: list[list[Any]], c: int) -> list[Any]:
    """The results of every task at the ``c``-th C."""
    return [runs[t][c] for t in range(len(runs))]


def _factor_predictor(bank: Any, results: Sequence[Any], active: np.ndarray | None) -> Any:
    """The :class:`~mklkit.kernels.factor.FactorPredictor` of the results (one per task) on a factor
    bank: the maps of the ``active`` kernels (``None``: those active in some result) and their
    folded coefficients."""
    if active is None:
        active = np.unique(np.concatenate([np.asarray(r.active_set, dtype=np.int64) for r in results]))
    return bank.predictor(
        np.stack([np.asarray(r.alpha, dtype=np.float64) for r in results]),
        np.array([float(r.bias) for r in results]),
        active,
    )
