"""A problem on some of a bank's kernels and its results in the whole bank's shape: with the default bank
the estimators keep its kernels on all features when their held-out path is no worse than the whole
bank's beyond the paired standard error (:func:`prefer_subset`; ``docs/api.md``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from .heldout_rows import paired_excess


def all_features_subset(problem: Any, specs: Sequence[Any], n_features: int) -> np.ndarray | None:
    """The indices of a bank's kernels (``specs``: :class:`~mklkit.kernels.BankKernel`) on all ``n_features``
    columns, when the bank also has Gaussian kernels on single features, ``problem``'s bank can give some of its
    kernels (Gram matrices in memory, factors) and they are some but not all of them; else ``None``.  Banks of
    indicators are left whole: on a9a and w8a the kernels on all features alone were within one standard error
    of the whole bank (+0.18 and +0.08 points), and their path cost a9a 20 s more."""
    if not callable(getattr(problem.bank, "subset", None)) or len(specs) != problem.n_kernels:
        return None
    if not any(len(s.features) == 1 and s.function.name == "rbf" for s in specs):
        return None
    keep = np.array([m for m, s in enumerate(specs) if len(set(s.features)) == n_features], dtype=np.int64)
    return keep if 0 < keep.size < problem.n_kernels else None


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
    """A result on the kernels ``keep`` in the shape of the whole bank of ``n_kernels`` (the others 0)."""
    alpha = np.zeros((n_kernels, np.asarray(result.alpha).shape[1]))
    alpha[keep] = result.alpha
    weights, norms = np.zeros(n_kernels), np.zeros(n_kernels)
    weights[keep], norms[keep] = result.kernel_weights, result.block_norms
    return dataclasses.replace(result, alpha=alpha, kernel_weights=weights, block_norms=norms)


def prefer_subset(whole: Any, subset: Any) -> tuple[bool, float, float]:
    """``(keep the subset, its mean held-out criterion minus the whole bank's, the paired standard error)``
    of two :class:`~mklkit.pipeline.heldout.HeldoutPath`: the subset unless the whole bank is better by more
    than the standard error."""
    a, b = whole.chosen_rows, subset.chosen_rows
    if a is None or b is None or whole.held_weights is None or a.shape != b.shape:
        return False, float("nan"), float("nan")
    diff, se = paired_excess(np.array([b, a]), 1, whole.held_weights)
    return bool(diff[0] <= se[0]), float(diff[0]), float(se[0])
