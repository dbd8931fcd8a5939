"""Multiclass decompositions shared by the estimators: one-vs-rest and one-vs-one.

A decomposition is a list of :class:`BinaryTask`; every task is a binary
problem on one Gram bank, built once for all tasks.  One-vs-one tasks use a
subset of the training rows; :meth:`mklkit.pipeline.Prepared.subproblem` copies exactly the
``M x n x n`` block a task needs, when the task is solved; predictions go
through :func:`mklkit.pipeline.new_points` and
:meth:`mklkit.pipeline.TestSide.decision_function` with the task's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit as sigmoid  # 1/(1 + exp(-f)), without overflow

__all__ = [
    "BinaryTask",
    "encode_classes",
    "ovr_tasks",
    "ovo_tasks",
    "ovo_decision",
    "ovr_proba",
    "pairwise_coupling",
    "sigmoid",
]


@dataclass(frozen=True)
class BinaryTask:
    """One binary subproblem of a multiclass decomposition.

    Attributes
    ----------
    positive : int
        Index (into ``classes_``) of the class labelled +1.
    negative : int
        Index of the class labelled -1, or ``-1`` for "all other classes".
    rows : ndarray of int or None
        Training rows the task uses (``None``: all rows).
    y : ndarray (n_rows,)
        Labels in {-1, +1}, float64.
    """

    positive: int
    negative: int
    rows: np.ndarray | None
    y: np.ndarray

    def describe(self, classes: np.ndarray) -> str:
        """``'a' vs rest`` or ``'b' vs 'a'``."""
        pos = repr(classes[self.positive].item() if hasattr(classes[self.positive], "item") else classes[self.positive])
        if self.negative < 0:
            return f"class {pos} vs rest"
        neg = repr(classes[self.negative].item() if hasattr(classes[self.negative], "item") else classes[self.negative])
        return f"class {pos} vs {neg}"


def encode_classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labels in sorted order (scikit-learn's ``classes_``) and each row's index into them.

    Any labels: numbers (``{0, 1}``, ``{-1, +1}``, ``{1, 2, 3}``) or strings.
    The estimators and the spec pipeline encode their targets here; with two
    classes the greater one (``classes[1]``) is the positive class unless a
    spec names another (``data.positive``).
    """
    classes, codes = np.unique(np.asarray(y), return_inverse=True)
    return classes, np.ascontiguousarray(codes.ravel(), dtype=np.intp)


def ovr_tasks(codes: np.ndarray, n_classes: int, positive: int = 1) -> list[BinaryTask]:
    """One task per class (class k +1, the rest -1); a single task for 2 classes.

    ``codes`` are class indices in ``0 .. n_classes - 1``; ``positive`` is
    the index of the class labelled +1 when there are two.
    """
    if n_classes == 2:
        return [BinaryTask(positive, 1 - positive, None, np.where(codes == positive, 1.0, -1.0))]
    return [BinaryTask(k, -1, None, np.where(codes == k, 1.0, -1.0)) for k in range(n_classes)]


def ovo_tasks(codes: np.ndarray, n_classes: int) -> list[BinaryTask]:
    """One task per pair ``i < j`` on the rows of classes i and j (j is +1).

    The order of pairs is scikit-learn's (``(0,1), (0,2), ..., (1,2), ...``).
    """
    if n_classes == 2:
        return ovr_tasks(codes, 2)
    tasks = []
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            rows = np.flatnonzero((codes == i) | (codes == j))
            tasks.append(BinaryTask(j, i, rows, np.where(codes[rows] == j, 1.0, -1.0)))
    return tasks


def ovo_decision(F: np.ndarray, tasks: list[BinaryTask], n_classes: int) -> np.ndarray:
    """Votes plus bounded confidences, as scikit-learn's ``SVC`` (``decision_function_shape="ovr"``).

    ``F`` (n, n_tasks) holds the pairwise decision values (positive: the
    task's ``positive`` class).  Each class gets its number of won duels
    plus :math:`s/(3(|s| + 1))`, where ``s`` sums its signed confidences;
    the added term lies in (-1/3, 1/3) and only breaks ties of votes.
    """
    n = F.shape[0]
    votes = np.zeros((n, n_classes))
    conf = np.zeros((n, n_classes))
    for t, task in enumerate(tasks):
        f = F[:, t]
        win = f > 0
        votes[win, task.positive] += 1
        votes[~win, task.negative] += 1
        conf[:, task.positive] += f
        conf[:, task.negative] -= f
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))


def ovr_proba(F: np.ndarray) -> np.ndarray:
    """Normalised one-vs-rest probabilities :math:`\\sigma(f_k)/\\sum_j \\sigma(f_j)`."""
    P = sigmoid(F)
    total = P.sum(axis=1, keepdims=True)
    return P / np.where(total > 0, total, 1.0)


def pairwise_coupling(F: np.ndarray, tasks: list[BinaryTask], n_classes: int) -> np.ndarray:
    r"""Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2).

    With :math:`r_{ij} = P(y = i \mid y \in \{i, j\})` (the sigmoid of the
    pairwise decision value), solve

    .. math::
        \min_p \sum_i \sum_{j \ne i} (r_{ji} p_i - r_{ij} p_j)^2
        \quad\text{s.t.}\quad \textstyle\sum_i p_i = 1,

    a linear system of size ``n_classes + 1`` per sample (the solution is
    non-negative; tiny negative round-off is clipped).  This is what LIBSVM
    and scikit-learn's ``SVC(probability=True)`` use.
    """
    n = F.shape[0]
    R = np.full((n, n_classes, n_classes), 0.5)
    for t, task in enumerate(tasks):
        p = np.clip(sigmoid(F[:, t]), 1e-12, 1.0 - 1e-12)
        R[:, task.positive, task.negative] = p
        R[:, task.negative, task.positive] = 1.0 - p
    Q = -R.transpose(0, 2, 1) * R  # Q_ij = -r_ji r_ij (i != j)
    sq = R * R
    idx = np.arange(n_classes)
    Q[:, idx, idx] = sq.sum(axis=1) - sq[:, idx, idx]  # Q_ii = sum_{s != i} r_si^2
    A = np.zeros((n, n_classes + 1, n_classes + 1))
    A[:, :n_classes, :n_classes] = Q
    A[:, :n_classes, n_classes] = 1.0
    A[:, n_classes, :n_classes] = 1.0
    b = np.zeros((n, n_classes + 1))
    b[:, n_classes] = 1.0
    p = np.linalg.solve(A, b[..., None])[:, :n_classes, 0]
    p = np.clip(p, 0.0, None)
    return p / p.sum(axis=1, keepdims=True)
