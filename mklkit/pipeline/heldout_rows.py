"""The held-out rows of a problem (``C="path"``): the split, the fitting rows' problem and the held-out rows'
predictions through the same bank, the path solutions kept meanwhile, the held-out scores."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..components.base import CLASSIFICATION
from ..result import pack_results, unpack_results
from .assemble import problem_at
from .bank import TestSide, rows_of


def split_rows(y: np.ndarray, fraction: float, seed: int, stratify: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(fit, held)`` sorted row indices; by class when ``stratify`` (each class keeps a row on both sides)."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if stratify else [np.arange(y.size)]
    held = []
    for g in groups:
        k = round(fraction * g.size)
        k = min(max(k, 1 if g.size > 1 else 0), g.size - 1)
        held.append(rng.permutation(g)[:k])
    held_rows = np.sort(np.concatenate(held)).astype(np.intp)
    mask = np.ones(y.size, dtype=bool)
    mask[held_rows] = False
    return np.flatnonzero(mask).astype(np.intp), held_rows


def fold_rows(y: np.ndarray, folds: int, seed: int, stratify: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(fit, held)`` sorted row indices of each of ``folds`` folds: every row held out by one fold; by class when
    ``stratify`` (each class dealt round the folds in a random order, the next class from the next fold on)."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if stratify else [np.arange(y.size)]
    label = np.empty(y.size, dtype=np.intp)
    dealt = 0
    for g in groups:
        label[rng.permutation(g)] = (dealt + np.arange(g.size)) % folds
        dealt += g.size
    return [
        (np.flatnonzero(label != k).astype(np.intp), np.flatnonzero(label == k).astype(np.intp)) for k in range(folds)
    ]


class HeldoutRows:
    """The fitting rows' problem and the held-out rows' predictions, through the problem's bank."""

    def __init__(self, problem: Any, fit: np.ndarray, held: np.ndarray) -> None:
        self.fit, self.held = fit, held
        rep = problem.representation
        w = problem.sample_weight
        wf = None if w is None else w[fit]
        y = np.asarray(problem.y)[fit]
        self._K: np.ndarray | None = None  # a Gram bank: its held-out x fitting blocks are read per value
        self.factor_bank: Any = None  # a factor bank: the fitting rows' factors
        if rep == "array":
            self._K = problem.K
            self.problem = problem_at(problem, y=y, K=rows_of(problem.K, fit), sample_weight=wf)
        elif rep == "factor":
            from ..kernels.factor import FactorBank

            bank = problem.bank
            share = fit.size / max(problem.n_samples, 1)
            self.factor_bank = FactorBank(
                bank.sample_columns(fit), bank.starts, trace_error=np.asarray(bank.trace_error) * share
            )
            # the held-out rows are new points of the fitting rows' factors: their factor rows
            self._side = TestSide(_factor_rows=bank.sample_columns(held))
            self.problem = problem_at(problem, y=y, K=self.factor_bank, sample_weight=wf)
        else:
            raise ValueError(
                f"C='path' needs the kernels in memory (Gram matrices or factors); "
                f"the bank is a {rep} bank: give C a number"
            )

    def decision(self, result: Any) -> np.ndarray:
        """Predictions on the held-out rows of a solve on the fitting rows."""
        if self._K is None:
            return self._side.decision_function(result, self.factor_bank)
        f = np.full(self.held.size, float(result.bias))
        alpha = np.asarray(result.alpha, dtype=np.float64)
        block = np.ix_(self.held, self.fit)
        for m in np.asarray(result.active_set, dtype=np.intp):
            f += self._K[m][block] @ alpha[m]
        return f


#: Bytes of path solutions on Gram matrices kept to start the fit on all rows from (on factors every
#: solution is kept, as its R factor coordinates).
KEEP_BYTES = 256 * 2**20


class KeptSolution:
    r"""A path solution while it waits: on factors its coordinates :math:`\beta = L^\top\alpha`, on Gram
    matrices its coefficients of the non-zero kernels."""

    def __init__(self, result: Any, bank: Any = None) -> None:
        self.bank = bank
        self.beta: np.ndarray | None = None
        alpha = getattr(result, "alpha", None)
        if bank is not None and isinstance(alpha, np.ndarray) and alpha.ndim == 2:
            self.beta = bank.coefficients(alpha)
            self.result = replace(result, alpha=None, dual=None, history=[])
            self.nbytes = 0  # R numbers: never held against KEEP_BYTES
            return
        self.result = pack_results(result)
        alpha = self.result.alpha
        self.nbytes = int(getattr(alpha, "values", alpha).nbytes)

    def on_rows(self, fit: np.ndarray, n: int) -> Any:
        r"""The solution as a warm start on all ``n`` rows, 0 on the held-out rows (the same predictor)."""
        if self.beta is not None:
            r, part = self.result, self.bank.alpha_from_beta(self.beta)
        else:
            r = unpack_results(self.result)
            part = r.alpha
        alpha = np.zeros((part.shape[0], n))
        alpha[:, fit] = part
        return replace(r, alpha=alpha, dual=None, history=[])


def held_out_scores(
    loss: Any, y: np.ndarray, f: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, float]:
    """The loss on every held-out row, the wrong labels (1/0; ``None`` in regression) and the accuracy or
    :math:`R^2`, weighted by ``w``."""
    per_row = np.asarray(loss.jit.value(y, np.ascontiguousarray(f), loss.param_vector), dtype=np.float64)
    sw = float(w.sum())
    if loss.task == CLASSIFICATION:
        wrong = (np.where(f >= 0.0, 1.0, -1.0) != y).astype(np.float64)
        return per_row, wrong, 1.0 - float(wrong @ w) / sw
    centre = float(y @ w) / sw
    var = float(((y - centre) ** 2) @ w) / sw
    mse = float(((y - f) ** 2) @ w) / sw
    return per_row, None, (1.0 - mse / var if var > 0.0 else -mse)


def criterion_of(loss: Any) -> str:
    """What chooses C on held-out rows: ``"error"`` for a classification loss whose primal is not smooth (the
    hinge: its held-out value keeps falling after the accuracy turned, ``docs/api.md``), else ``"loss"``."""
    return "error" if loss.task == CLASSIFICATION and not loss.smooth_primal else "loss"


def effective_size(w: np.ndarray) -> float:
    """Kish's effective number of rows of weights ``w`` (their count when all are equal)."""
    return float(w.sum()) ** 2 / float(np.sum(w * w)) if w.size else 0.0


def paired_excess(rows: np.ndarray, best: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per value: the mean held-out loss above that of ``best``, and its standard error paired over the rows."""
    diff = rows - rows[best]
    sw = float(w.sum())
    n_eff = effective_size(w)
    mean = diff @ w / sw
    var = ((diff - mean[:, None]) ** 2) @ w / sw
    return mean, np.sqrt(var / n_eff)
