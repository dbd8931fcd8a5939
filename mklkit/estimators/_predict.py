"""Prediction: the test side of new points and the decision values of every binary task."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from ..pipeline import new_points
from ._checks import check_budget


class Prediction:
    """The decision values of a fitted estimator (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

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
