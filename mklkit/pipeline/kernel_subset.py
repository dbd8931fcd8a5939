r"""The kernels on all features alone, chosen on held-out rows when they cost nothing.

At the small C that the held-out path chooses on a few thousand rows and
more, the elastic net's kernel weights are nearly uniform, so the model is
close to the plain sum of the bank.  In the default bank the :math:`3d`
kernels on single features then outweigh the 7 on all features, and where
the classes depend on the features jointly that costs accuracy (twonorm,
ringnorm, waveform, the 20,000-point ``make_classification`` set of
``benchmarks/bench_vs_svc.py``); where they follow single features or one-hot
groups (splice, the small UCI sets) the single-feature kernels are what
wins.  So the estimators with the default bank run the held-out path twice
when it decides C: on the whole bank and on its kernels on all features,
over the same held-out rows, and keep the smaller bank unless the whole one
is better by more than the paired standard error of the difference
(:func:`prefer_subset`) — the sparsest model that costs no held-out
accuracy.

The smaller bank is a problem on some of the bank's kernels
(:func:`subset_problem`: Gram matrices or factor blocks taken out, nothing
recomputed); its solutions are certified on it, and
:func:`widen_result` puts them back in the whole bank's shape (the other
kernels at weight 0) for everything downstream.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from .heldout_rows import paired_excess

__all__ = [
    "kernels_on_all_features",
    "supports_subset",
    "subset_problem",
    "restrict_result",
    "widen_result",
    "prefer_subset",
]


def kernels_on_all_features(specs: Sequence[Any], n_features: int) -> np.ndarray:
    """Indices of the kernels (:class:`~mklkit.kernels.BankKernel`) whose features are all
    ``n_features`` columns."""
    return np.array([m for m, s in enumerate(specs) if len(set(s.features)) == n_features], dtype=np.int64)


def supports_subset(problem: Any) -> bool:
    """Whether the problem's bank can give a bank of some of its kernels (``subset``: Gram
    matrices in memory, factors)."""
    return callable(getattr(problem.bank, "subset", None))


def subset_problem(problem: Any, keep: np.ndarray) -> Any:
    """``problem`` on the kernels ``keep`` only (their Gram matrices or factor blocks, copied)."""
    names = None if problem.kernel_names is None else [problem.kernel_names[m] for m in keep]
    return dataclasses.replace(problem, K=problem.bank.subset(keep), kernel_names=names)


def restrict_result(result: Any, keep: np.ndarray) -> Any:
    """A result on the whole bank as a warm start on the kernels ``keep``."""
    if result is None:
        return None
    return dataclasses.replace(
        result,
        alpha=np.ascontiguousarray(np.asarray(result.alpha)[keep]),
        kernel_weights=np.asarray(result.kernel_weights)[keep],
        block_norms=np.asarray(result.block_norms)[keep],
    )


def widen_result(result: Any, keep: np.ndarray, n_kernels: int) -> Any:
    """A result on the kernels ``keep`` in the shape of the whole bank of ``n_kernels``: the
    others at weight 0, coefficients 0 (the same predictor; the gap is the subset problem's)."""
    alpha = np.zeros((n_kernels, np.asarray(result.alpha).shape[1]))
    alpha[keep] = result.alpha
    weights = np.zeros(n_kernels)
    weights[keep] = result.kernel_weights
    norms = np.zeros(n_kernels)
    norms[keep] = result.block_norms
    return dataclasses.replace(result, alpha=alpha, kernel_weights=weights, block_norms=norms)


def prefer_subset(whole: Any, subset: Any) -> tuple[bool, float, float]:
    """Whether the subset's path (a :class:`~mklkit.pipeline.heldout.HeldoutPath`) is kept over
    the whole bank's: unless the whole bank's held-out criterion at its chosen C is lower than
    the subset's by more than the paired standard error over the same held-out rows.

    Returns ``(keep the subset, mean criterion of the subset minus the whole bank's, its
    standard error)``.
    """
    a, b = whole.chosen_rows, subset.chosen_rows
    if a is None or b is None or whole.held_weights is None or a.shape != b.shape:
        return False, float("nan"), float("nan")
    diff, se = paired_excess(np.array([b, a]), 1, whole.held_weights)
    return bool(diff[0] <= se[0]), float(diff[0]), float(se[0])
