"""Multiclass decompositions shared by the estimators and the spec pipeline: one-vs-rest and one-vs-one
binary tasks on one Gram bank (a one-vs-one task on its classes' rows), and their predictions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit as sigmoid  # 1/(1 + exp(-f)), without overflow


@dataclass(frozen=True)
class BinaryTask:
    """One binary subproblem: the indices (into ``classes_``) of the class labelled +1 and of the class
    labelled -1 (``-1``: all others), the training rows it uses (``None``: all) and its labels ±1."""

    positive: int
    negative: int
    rows: np.ndarray | None
    y: np.ndarray

    def describe(self, classes: np.ndarray) -> str:
        """``class 'a' vs rest`` or ``class 'b' vs 'a'``."""

        def label(k: int) -> str:
            return repr(classes[k].item() if hasattr(classes[k], "item") else classes[k])

        return f"class {label(self.positive)} vs {'rest' if self.negative < 0 else label(self.negative)}"


def encode_classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labels (numbers or strings) in sorted order (scikit-learn's ``classes_``) and each row's
    index into them; with two classes ``classes[1]`` is the positive one unless a spec names another."""
    classes, codes = np.unique(np.asarray(y), return_inverse=True)
    return classes, np.ascontiguousarray(codes.ravel(), dtype=np.intp)


def ovr_tasks(codes: np.ndarray, n_classes: int, positive: int = 1) -> list[BinaryTask]:
    """One task per class (class k +1, the rest -1); for 2 classes a single task, ``positive`` labelled +1."""
    if n_classes == 2:
        return [BinaryTask(positive, 1 - positive, None, np.where(codes == positive, 1.0, -1.0))]
    return [BinaryTask(k, -1, None, np.where(codes == k, 1.0, -1.0)) for k in range(n_classes)]


def ovo_tasks(codes: np.ndarray, n_classes: int) -> list[BinaryTask]:
    """One task per pair ``i < j`` on the rows of classes i and j (j is +1), in scikit-learn's order."""
    if n_classes == 2:
        return ovr_tasks(codes, 2)
    tasks = []
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            rows = np.flatnonzero((codes == i) | (codes == j))
            tasks.append(BinaryTask(j, i, rows, np.where(codes[rows] == j, 1.0, -1.0)))
    return tasks


def ovo_decision(F: np.ndarray, tasks: list[BinaryTask], n_classes: int) -> np.ndarray:
    """Votes plus bounded confidences :math:`s/(3(|s| + 1))` (``s``: the sum of a class's signed pairwise
    decision values ``F`` (n, n_tasks); it only breaks ties), as scikit-learn's ``SVC``."""
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
    r"""Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2, as LIBSVM): with
    :math:`r_{ij} = P(y = i \mid y \in \{i, j\})`, :math:`\min_p \sum_i \sum_{j \ne i} (r_{ji} p_i - r_{ij} p_j)^2`
    s.t. :math:`\sum_i p_i = 1`, a linear system of size ``n_classes + 1`` per sample (round-off clipped)."""
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
