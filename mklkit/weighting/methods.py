r"""The built-in weightings: ``average`` (AverageMKL), ``alignf`` (centred alignment with non-negative weights,
Cortes, Mohri & Rostamizadeh 2012), ``easymkl`` (Aiolli & Donini 2015), ``fheuristic`` (Qiu & Lane 2009) and
``pwmk`` (Tanabe et al. 2008); ``docs/two_stage.md`` has the mathematics and when to use each."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

from .. import metrics
from ..components.base import CLASSIFICATION
from ..components.params import Param
from .base import Weighting, WeightingError
from .solvers import QPSolution, nonnegative_qp, simplex_pair_qp

logger = logging.getLogger("mklkit.weighting")


def _labels(y: np.ndarray, owner: str) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isin(y, (-1.0, 1.0))):
        bad = y[~np.isin(y, (-1.0, 1.0))][0]
        raise WeightingError(f"weighting {owner}: needs labels -1 and +1 (a binary classification); got {bad!r}")
    return y


def _normalised(w: np.ndarray) -> np.ndarray:
    return w / w.sum()


def _target(y: np.ndarray) -> np.ndarray:
    """The target as an (N, 1) column: the target kernel :math:`yy^\top` of :mod:`mklkit.metrics`."""
    return np.asarray(y, dtype=np.float64)[:, None]


def _gram(bank: Any, m: int) -> np.ndarray:
    r"""The Gram matrix :math:`K_m` (N, N) of one kernel of a Gram or factor bank (:math:`L_mL_m^\top`)."""
    if getattr(bank, "representation", "array") == "factor":
        B = bank.block(m)
        B = B.toarray() if sp.issparse(B) else np.asarray(B)
        return B.T @ B
    return np.asarray(bank.as_array()[m])


def _frobenius_norms(bank: Any) -> np.ndarray:
    r""":math:`\|K_m\|_F` of every kernel, (M,)."""
    if getattr(bank, "representation", "array") == "factor":
        return np.asarray(bank.frobenius_norms(), dtype=np.float64)
    K = bank.as_array()
    return np.sqrt(np.einsum("mij,mij->m", K, K))


class Average(Weighting):
    r"""AverageMKL: :math:`\eta_m = 1/M`, the mean of the bank's (normalised) kernels."""

    name = "average"
    description = "uniform weights 1/M: the mean of the normalised kernels (AverageMKL)"
    scale = "invariant"

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        M = int(bank.shape[0])
        return np.full(M, 1.0 / M)


def alignf_qp(bank: Any, y: np.ndarray, tol: float = 1e-9) -> tuple[QPSolution, np.ndarray, np.ndarray]:
    r"""ALIGNF's problem on a bank: :math:`v^* = \arg\min_{v \ge 0} v^\top Mv - 2v^\top a`, with
    :math:`M_{kl} = \langle K_k^c, K_l^c\rangle_F` and :math:`a_k = \langle K_k^c, yy^\top\rangle_F`
    (:func:`mklkit.metrics.alignment_matrix`, :func:`mklkit.metrics.frobenius_products`); returns the solution
    (:func:`~mklkit.weighting.solvers.nonnegative_qp`), :math:`M` and :math:`a`."""
    Mmat = metrics.alignment_matrix(bank, centered=True, normalized=False)
    a = metrics.frobenius_products(bank, y=_target(y), centered=True)
    return nonnegative_qp(Mmat, a, tol=tol), Mmat, a


class AlignF(Weighting):
    r"""ALIGNF (Cortes, Mohri & Rostamizadeh 2012, "Algorithms for learning kernels based on centered alignment",
    JMLR 13, §3.2): the combination of the centred kernels of largest alignment with the target,

    .. math::
        v^* = \arg\min_{v \ge 0}\ v^\top M v - 2 v^\top a, \qquad \eta = v^*/\|v^*\|_2,

    with :math:`M_{kl} = \langle K_k^c, K_l^c\rangle_F`, :math:`a_k = \langle K_k^c, yy^\top\rangle_F`.  The
    non-negativity constraint is kept (without it, :math:`v = M^{-1}a` can have negative entries, and
    :math:`\sum_m\eta_mK_m` need not be a kernel).  Labels :math:`\pm 1` or a real target.
    """

    name = "alignf"
    description = "centred-alignment weights, v = argmin_{v>=0} v'Mv - 2v'a, eta = v/|v| (ALIGNF)"
    scale = "inverse"
    params = (Param("tol", 1e-9, "largest relative violation of the QP's KKT conditions", low=0.0, low_open=True),)

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        sol, _, a = alignf_qp(bank, y, tol=self.tol)
        if not np.any(a > 0.0):
            raise WeightingError("weighting alignf: no kernel is aligned with the target (every centred kernel is 0)")
        if not sol.converged:
            logger.warning("alignf: the QP's KKT conditions hold to %.3g only (tol %.3g)", sol.gap, self.tol)
        v = sol.x
        return v / np.linalg.norm(v)


def easymkl_margin(bank: Any, y: np.ndarray, lam: float, *, tol: float = 1e-10, max_iter: int = 100_000) -> Any:
    r"""EasyMKL's margin problem on a bank with labels :math:`y \in \{\pm1\}^N`:

    .. math::
        \min_{\gamma \in \Gamma}\ (1-\lambda)\,\gamma^\top Y\bar K Y\gamma + \lambda\|\gamma\|^2, \qquad
        \bar K = \sum_m \hat K_m, \quad \hat K_m = \frac{N}{\operatorname{tr}K_m} K_m,

    :math:`Y = \operatorname{diag}(y)`, :math:`\Gamma` the product of the simplices of the two classes; solved by
    :func:`~mklkit.weighting.solvers.simplex_pair_qp` with the products :math:`\bar K v` (one matrix on a Gram
    bank, :math:`\sum_m s_m L_m(L_m^\top v)` on a factor bank).  Returns the
    :class:`~mklkit.weighting.solvers.QPSolution` of :math:`\gamma` and the scales :math:`s_m = N/\operatorname{tr}K_m`.
    """
    y = _labels(y, "easymkl")
    N = y.size
    tr = np.asarray(bank.trace(), dtype=np.float64)
    if not np.all(tr > 0.0):
        raise WeightingError(f"weighting easymkl: every kernel needs a trace > 0; got {tr.tolist()}")
    s = N / tr
    if getattr(bank, "representation", "array") == "array":
        Kbar = np.einsum("m,mij->ij", s, bank.as_array())

        def kbar(v: np.ndarray) -> np.ndarray:
            return Kbar @ v

        def kbar_block(S: np.ndarray) -> np.ndarray:
            return Kbar[np.ix_(S, S)]
    else:
        row_scale = np.sqrt(np.repeat(s, np.diff(bank.starts)))

        def kbar(v: np.ndarray) -> np.ndarray:
            return s @ bank.matvecs(v)

        def kbar_block(S: np.ndarray) -> np.ndarray:
            cols = bank.sample_columns(S)
            cols = np.asarray(cols.toarray() if hasattr(cols, "toarray") else cols) * row_scale[:, None]
            return cols.T @ cols

    def apply(v: np.ndarray) -> np.ndarray:
        return (1.0 - lam) * y * kbar(y * v) + lam * v

    def block(S: np.ndarray) -> np.ndarray:
        yS = y[S]
        return (1.0 - lam) * yS[:, None] * kbar_block(S) * yS[None, :] + lam * np.eye(S.size)

    return simplex_pair_qp(apply, y > 0, block=block, tol=tol, max_iter=max_iter, owner="easymkl"), s


class EasyMKL(Weighting):
    r"""EasyMKL (Aiolli & Donini 2015, "EasyMKL: a scalable multiple kernel learning algorithm", Neurocomputing
    169): the distance between the convex hulls of the two classes in the feature space of the sum of the
    (unit-mean-diagonal) kernels, regularised by :math:`\lambda` (:func:`easymkl_margin`), then each kernel
    weighted by its share of that distance,

    .. math::
        \hat\eta_m \propto \gamma^\top Y\hat K_m Y\gamma, \qquad
        \eta_m \propto \hat\eta_m\,\frac{N}{\operatorname{tr}K_m}, \quad \sum_m\eta_m = 1,

    so that :math:`\sum_m\eta_mK_m \propto \sum_m\hat\eta_m\hat K_m` (on a unit-trace bank, the default,
    :math:`\eta = \hat\eta`).  Binary labels only.  ``lam`` defaults to 0.1, as MKLpy's.
    """

    name = "easymkl"
    description = "EasyMKL: weights from the margin between the class hulls of the summed kernels"
    tasks = (CLASSIFICATION,)
    scale = "inverse"
    params = (
        Param("lam", 0.1, "weight of ||gamma||^2 against the margin term", low=0.0, high=1.0),
        Param("tol", 1e-10, "relative Frank-Wolfe gap of the margin problem", low=0.0, low_open=True),
        Param("max_iter", 100_000, "iterations of the margin problem at most", type=int, low=1),
    )

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        sol, s = easymkl_margin(bank, y, self.lam, tol=self.tol, max_iter=self.max_iter)
        rho = np.asarray(y, dtype=np.float64) * sol.x
        share = s * np.asarray(bank.dual_block_norms(rho), dtype=np.float64) ** 2
        if not np.any(share > 0.0):
            raise WeightingError("weighting easymkl: every kernel gives the two classes the same centre")
        return _normalised(_normalised(share) * s)


class FHeuristic(Weighting):
    r"""FHeuristic (Qiu & Lane 2009, "A framework for multiple kernel support vector regression and its
    applications to siRNA efficacy prediction", IEEE/ACM TCBB 6(2)): each kernel weighted by its alignment with
    the target,

    .. math::
        \eta_m \propto A(K_m, yy^\top) = \frac{y^\top K_m y}{\|K_m\|_F\,\|y\|^2}, \qquad \sum_m \eta_m = 1

    (not centred, as MKLpy's).  Labels :math:`\pm 1` or a real target.
    """

    name = "fheuristic"
    description = "weights proportional to each kernel's alignment with the target (FHeuristic)"
    scale = "invariant"

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        norms = _frobenius_norms(bank)
        products = metrics.frobenius_products(bank, y=_target(y))
        align = np.divide(products, norms * float(y @ y), out=np.zeros_like(products), where=norms > 0)
        align = np.maximum(align, 0.0)
        if not np.any(align > 0.0):
            raise WeightingError("weighting fheuristic: no kernel is aligned with the target")
        return _normalised(align)


class PWMK(Weighting):
    r"""PWMK (Tanabe, Ho, Nguyen & Kawasaki 2008, "Simple but effective methods for combining kernels in
    computational biology", IEEE RIVF): each kernel weighted by the cross-validated accuracy :math:`a_m` of a
    support vector machine on it alone, less a threshold,

    .. math::
        \eta_m \propto a_m - \delta\min_k a_k, \qquad \sum_m \eta_m = 1,

    the accuracies from scikit-learn's ``SVC(kernel="precomputed", C=C)`` over ``cv`` stratified folds
    (``cross_val_score``, as MKLpy's; defaults ``C=1000``, ``cv=3``, ``delta=0``).  Where every :math:`a_m` is
    equal and :math:`\delta = 1` the rule gives 0/0: the weights are then uniform.  Binary labels only.
    """

    name = "pwmk"
    description = "weights from each kernel's cross-validated SVM accuracy less delta x the lowest (PWMK)"
    tasks = (CLASSIFICATION,)
    scale = "none"
    params = (
        Param("delta", 0.0, "fraction of the lowest accuracy subtracted from every accuracy", low=0.0, high=1.0),
        Param("cv", 3, "stratified cross-validation folds", type=int, low=2),
        Param("C", 1000.0, "C of the single-kernel SVC", low=0.0, low_open=True),
    )

    def accuracies(self, bank: Any, y: np.ndarray) -> np.ndarray:
        """The cross-validated accuracy of each kernel alone, (M,)."""
        from sklearn.model_selection import StratifiedKFold, cross_val_score
        from sklearn.svm import SVC

        y = _labels(y, "pwmk")
        counts = min(int(np.sum(y > 0)), int(np.sum(y < 0)))
        if counts < self.cv:
            raise WeightingError(f"weighting pwmk: cv={self.cv} folds need {self.cv} rows of each class; got {counts}")
        folds = StratifiedKFold(n_splits=self.cv)
        svc = SVC(kernel="precomputed", C=self.C)
        M = int(bank.shape[0])
        return np.array([cross_val_score(svc, _gram(bank, m), y, cv=folds).mean() for m in range(M)])

    def weights(self, bank: Any, y: np.ndarray) -> np.ndarray:
        acc = self.accuracies(bank, y)
        w = acc - self.delta * acc.min()
        if not np.any(w > 0.0):
            return np.full(acc.size, 1.0 / acc.size)
        return _normalised(np.maximum(w, 0.0))


#: The built-in weightings, registered by :mod:`mklkit.builtin`.
BUILTIN_WEIGHTINGS = (Average, AlignF, EasyMKL, FHeuristic, PWMK)
__all__ = ["Average", "AlignF", "EasyMKL", "FHeuristic", "PWMK", "BUILTIN_WEIGHTINGS", "alignf_qp", "easymkl_margin"]
