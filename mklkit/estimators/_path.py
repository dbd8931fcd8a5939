"""Solutions along a regularization path (:meth:`MKLClassifier.fit_path`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

# pickles of fitted estimators name _NonZeroRows here
from ..result import _NonZeroRows, active_union, pack_results, unpack_results  # noqa: F401


@dataclass
class MKLPath:
    """Solutions along a regularization path (:meth:`MKLClassifier.fit_path`).

    Attributes
    ----------
    Cs : ndarray (n_Cs,)
        The regularization constants, largest first (the solve order).
    results : list of list of SolveResult
        ``results[i][t]``: binary problem ``t`` at ``Cs[i]`` (one problem for binary classification and regression).
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
    #: on a factor bank: per C, what prediction needs (the training factors are not kept)
    _predictors: list[Any] | None = field(repr=False, default=None)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "results": pack_results(self.results)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({**state, "results": unpack_results(state["results"])})

    def __len__(self) -> int:
        return int(self.Cs.size)

    def _per_C(self, attr: str, dtype: Any = None) -> np.ndarray:
        """``attr`` of every result, (n_Cs,) for one problem, else (n_Cs, n_problems)."""
        A = np.array([[getattr(r, attr) for r in res] for res in self.results], dtype=dtype)
        return A[:, 0] if A.shape[1] == 1 else A

    @property
    def active_kernels(self) -> list[np.ndarray]:
        """Per C: indices of the kernels active in at least one binary problem."""
        return [active_union(res) for res in self.results]

    @property
    def n_active(self) -> np.ndarray:
        """Per C: the number of active kernels."""
        return np.array([a.size for a in self.active_kernels])

    @property
    def kernel_weights(self) -> np.ndarray:
        """(n_Cs, n_kernels), or (n_Cs, n_problems, n_kernels) for multiclass."""
        return self._per_C("kernel_weights", np.float64)

    @property
    def n_iter(self) -> np.ndarray:
        """Outer iterations per C (and per binary problem for multiclass)."""
        return self._per_C("iterations")

    @property
    def gaps(self) -> np.ndarray:
        """Final relative duality gaps per C (and per binary problem)."""
        return self._per_C("gap", np.float64)

    @property
    def solve_times(self) -> np.ndarray:
        """Engine time per C (summed over binary problems)."""
        return np.array([sum(r.time_s for r in res) for res in self.results])

    def estimator(self, i: int) -> Any:
        """A fitted estimator at ``Cs[i]`` (a clone of the one that made the path)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"path index {i} out of range for {len(self)} values of C")
        est = clone(self._template).set_params(C=float(self.Cs[i]))
        est._set_fitted(self._prep, list(self.results[i]), None if self._predictors is None else self._predictors[i])
        return est

    def summary(self) -> str:
        """One line per C: C, active kernels, iterations, gap, seconds."""
        lines = [f"{'C':>10}  {'active':>6}  {'iter':>5}  {'gap':>9}  {'time_s':>7}"]
        for C, res, act in zip(self.Cs, self.results, self.n_active):
            lines.append(
                f"{C:10.4g}  {act:6d}  {sum(r.iterations for r in res):5d}  "
                f"{max(r.gap for r in res):9.2e}  {sum(r.time_s for r in res):7.3f}"
            )
        return "\n".join(lines)
