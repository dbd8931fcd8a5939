r"""The one-class estimator: :class:`MKLOneClassSVM`, novelty and outlier detection with learned kernel weights."""

from __future__ import annotations

import logging
import math
import numbers
import time
import warnings
from typing import Any, Mapping

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._multiclass import BinaryTask
from ..components.base import REGRESSION
from ..components.params import ParamError
from ..pipeline.one_class import nu_of, reach_nu, total_weight
from ..result import ConvergenceWarning, warn_if_trivial
from ._base import BaseMKL
from ._checks import check_C
from ._classes import _store

logger = logging.getLogger("mklkit.estimators")

#: Engine tolerance (relative duality gap) when ``tol`` is not given: ``nu_`` is then certified to 1e-3 of itself.
ONE_CLASS_TOL = 1e-3

#: ``regularizer="auto"``: the block lq-norm with this q (non-sparse; ``docs/one_class.md`` has the measurements).
ONE_CLASS_Q = 1.75


#: Gaussian widths of ``kernels="auto"`` for one-class MKL, as multiples of sqrt(d): the classifiers' five
#: (:data:`~mklkit.estimators.DEFAULT_ALL_WIDTH_FACTORS`) one octave narrower (``docs/one_class.md``).
ONE_CLASS_WIDTH_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0)


def one_class_kernels(n_features: int) -> list[dict[str, Any]]:
    r"""The bank of ``kernels="auto"`` for one-class MKL: Gaussian kernels on all ``n_features`` standardised
    features with widths :math:`\sigma = s\sqrt d`, :math:`s \in \{0.125, 0.25, 0.5, 1, 2\}`
    (:data:`ONE_CLASS_WIDTH_FACTORS`).

    Standardised features have :math:`E\|x - z\|^2 = 2d`: at :math:`s = 4` (the classifiers' widest) the kernel
    is about 0.94 on typical pairs, nearly constant, and pulls the ranking of new points toward the distance to
    the mean; one octave narrower ranks outliers better (test ROC AUC, 10 splits of ``bench_oneclass.py``,
    paired differences: ionosphere +0.0033 ± 0.0007, wdbc +0.0005 ± 0.0003).  The kernels of single features
    and the polynomial kernels of :func:`default_kernels` rank outliers less well here (``docs/one_class.md``).
    """
    d = int(n_features)
    if d < 1:
        raise ValueError(f"n_features must be >= 1; got {n_features!r}")
    return [{"function": "rbf", "width": [round(f * math.sqrt(d), 6) for f in ONE_CLASS_WIDTH_FACTORS]}]


class MKLOneClassSVM(OutlierMixin, BaseMKL):
    r"""One-class SVM with learned kernel weights (one-class MKL): novelty and outlier detection.

    Solves, on the training points alone (no labels), with :math:`f = \sum_m K_m\alpha_m` and no bias,

    .. math::
        \min_\alpha \sum_i w_i \max(0, 1 - f(x_i)) + \sum_m \tilde g_C(\|\alpha_m\|_{K_m}),

    the one-class SVM that separates the data from the origin with margin 1 (Schölkopf et al. 2001) with the
    ``one_class`` loss.  With the ``l1`` regularizer (:math:`\tilde g_C(x) = Cx`) its dual is
    :math:`\max_\rho \sum_i\rho_i` s.t. :math:`0 \le \rho_i \le w_i`, :math:`\|\rho\|_{K_m} \le C`; with
    :math:`s = \sum_i\rho^*_i < \sum_i w_i`, :math:`a = \rho^*/s` solves the ν-one-class MKL dual
    :math:`\min_a \max_m \|a\|_{K_m}` s.t. :math:`0 \le a_i \le w_i/(\nu W)`, :math:`\sum_i a_i = 1`
    (:math:`W = \sum_i w_i`; the ν-one-class SVM with kernel weights on the simplex) at
    :math:`\nu(C) = \sum_i\rho^*_i / W = P^*(C)/W`, concave and increasing in C, 1 from ``C_max`` on (every
    kernel off).  ``nu`` is reached by a warm-started path down from ``C_max`` by chord steps
    :math:`C \leftarrow C\,\nu/\nu(C)` (concavity keeps every step at :math:`\nu(C) \ge \nu`), with bisection
    in :math:`\log C` as a safeguard, until :math:`|\nu(C) - \nu| \le` ``nu_tol``; each solve is certified by
    the engine's duality gap.  With any other regularizer the dual is
    :math:`\max_{0 \le \rho \le w} \sum_i\rho_i - \sum_m \tilde g_C^*(\|\rho\|_{K_m})`,
    :math:`\nu(C) = \sum_i\rho^*_i/W` is not concave (non-decreasing for ``lq`` and ``uniform``,
    :func:`~mklkit.pipeline.one_class.reach_nu`), and C is found by bracketing and bisection in
    :math:`\log C`; the KKT conditions (:math:`\rho_i = w_i` where :math:`f(x_i) < 1`, :math:`\rho_i = 0`
    where :math:`f(x_i) > 1`) keep the ν-property for every regularizer.  ``docs/one_class.md``.

    Parameters
    ----------
    kernels : "auto", "precomputed", str, list or mapping, default="auto"
        The kernel bank, as for :class:`MKLClassifier` but for ``"auto"``: :func:`one_class_kernels`, five
        Gaussian widths :math:`s\sqrt d`, :math:`s` = 0.125 … 2, on all standardised features;
        ``"precomputed"``: ``X`` is (N, N, M) in ``fit``, (N_test, N, M) after.
    nu : float in (0, 1], default=0.5
        The fraction :math:`\nu` of the dual mass: an upper bound on the fraction of training outliers
        (:math:`f < 1`) and a lower bound on the fraction of support vectors (:math:`f \le 1`), as scikit-learn's
        ``OneClassSVM(nu=...)``; C is found to reach it (any regularizer).  Not used when ``C`` is given.
    C : float, optional
        Solve at this regularization constant > 0 instead of reaching ``nu``; ``nu_`` is then the :math:`\nu`
        of the solution.
    nu_tol : float, default=0.01
        Tolerance on :math:`|\nu_{reached} - \nu|` of the search for C.
    regularizer : "auto", str, mapping or Regularizer, default="auto"
        A registered regularizer; ``"auto"``: the block lq-norm with q = 1.75 (:data:`ONE_CLASS_Q`), whose
        kernel weights mix the widths (``"l1"``, the sparse one-class MKL, keeps only the widest of nested
        Gaussian widths).
    engine : str, mapping or Engine, default="auto"
        An engine that solves the ``one_class`` loss without bias (``spicy``, ``dualcd``, ``bcd``, ``auto``;
        ``docs/engines.md``).
    engine_params : dict, optional
        Options of the engine.
    tol : float, optional
        Relative duality gap at which each solve stops (``None``: 1e-3, so that :math:`\nu` is certified to
        1e-3 of itself).
    max_iter : int, optional
        Maximum number of outer iterations of each solve.
    normalize, standardize, memory_budget, factor, scheduler, device, verbose
        As for :class:`MKLClassifier` (``device``: the engine ``apg`` on that device, the one-class loss
        through its smoothing).

    Attributes
    ----------
    nu_ : float
        The :math:`\nu` reached, :math:`\sum_i\rho_i/\sum_i w_i` at the solution's dual point.
    C_ : float
        The regularization constant solved (found for ``nu``, or given).
    offset_ : float
        1, the margin: ``decision_function = score_samples - offset_``.
    C_search_ : ndarray of shape (n_solves, 3)
        The solves of the search for C: rows :math:`(C, \nu(C), \text{gap})` in the order solved (one row with
        ``C`` given).
    kernel_weights_ : ndarray of shape (n_kernels,)
        Kernel weights :math:`d_m` (summing to 1).
    n_iter_, dual_gap_ : int and float
        Outer iterations and relative duality gap of the final solve.
    C_max_ : float
        The smallest C at which every kernel is off (:math:`\nu = 1`).
    result_ : SolveResult
        The engine's full result (``alpha``, ``dual`` the :math:`\rho` above, ``history``, ...).
    active_kernels_, kernel_names_, kernels_, loss_, regularizer_, engine_, solved_by_, scaler_, bank_,
    factor_approximation_, n_features_in_, feature_names_in_
        As for :class:`MKLClassifier`.
    """

    _task = REGRESSION  # the one_class loss's task: real levels (all 1)
    loss = "one_class"
    bias = False

    def __init__(
        self,
        kernels: Any = "auto",
        *,
        nu: float = 0.5,
        C: float | None = None,
        nu_tol: float = 0.01,
        regularizer: Any = "auto",
        engine: Any = "auto",
        engine_params: Mapping[str, Any] | None = None,
        tol: float | None = None,
        max_iter: int | None = None,
        normalize: str = "auto",
        standardize: Any = "auto",
        memory_budget: Any = None,
        factor: Any = "auto",
        scheduler: Any = None,
        device: str | None = None,
        verbose: int = 0,
    ) -> None:
        _store(self, locals())

    # ------------------------------------------------------------------ checks
    def _regularizer_spec(self) -> Any:
        """``"auto"``: the block lq-norm with q = :data:`ONE_CLASS_Q`; anything else as given."""
        if isinstance(self.regularizer, str) and self.regularizer == "auto":
            return {"name": "lq", "q": ONE_CLASS_Q}
        return self.regularizer

    def _bank_entries(self, n_features: int, X: Any) -> Any:
        """``"auto"``: :func:`one_class_kernels`; anything else as for the other estimators."""
        if isinstance(self.kernels, str) and self.kernels == "auto":
            return one_class_kernels(n_features)
        return super()._bank_entries(n_features, X)

    def _components(self) -> tuple[Any, Any, Any]:
        """The base's components, the engine's ``tol`` 1e-3 unless ``tol`` or ``engine_params["tol"]`` is given."""
        loss, regularizer, engine = super()._components()
        if self.tol is None and "tol" not in (self.engine_params or {}) and "tol" in engine.get_params():
            engine = type(engine)(**{**engine.get_params(), "tol": ONE_CLASS_TOL})
        return loss, regularizer, engine

    def _target(self) -> float | None:
        """The ``nu`` to reach (``None``: ``C`` given), checked with ``C``, ``nu_tol`` and the regularizer."""
        owner = self._owner
        if self.C is not None:
            check_C(self.C, owner)
            return None
        nu = self.nu
        if isinstance(nu, (bool, np.bool_)) or not isinstance(nu, numbers.Real) or not (0.0 < float(nu) <= 1.0):
            raise ParamError("nu", nu, "a number in (0, 1], or C given instead", owner=owner)
        tol = self.nu_tol
        if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) or not (0.0 < float(tol) < 1.0):
            raise ParamError("nu_tol", tol, "a number in (0, 1)", owner=owner)
        return float(nu)

    def _encode_targets(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, list[BinaryTask], tuple[float, float]]:
        """One problem on every row, every level 1."""
        return None, [BinaryTask(0, -1, None, np.ones(y.shape[0]))], (0.0, 1.0)

    # --------------------------------------------------------------------- fit
    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> "MKLOneClassSVM":
        """Build the kernel bank and solve the one-class MKL problem (C found for ``nu``, or ``C`` as given).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data (the inliers, or data with few outliers); with ``kernels="precomputed"`` the Gram
            matrices, (N, N, M).
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional
            Weights >= 0 of the samples' loss terms (an integer weight is the sample repeated); ``nu`` is then a
            fraction of the total weight.

        Returns
        -------
        self
        """
        target = self._target()
        n = _num_samples(X)
        levels = np.ones(n)
        with self._prepared(X, levels, 1.0 if self.C is None else float(self.C), sample_weight) as prep:
            t0 = time.perf_counter()
            base = prep.prepared.subproblem(prep.tasks[0].y, None)
            total = total_weight(base)
            if target is None:
                C, result = float(self.C), self._run_task(prep, 0, [float(self.C)])[0]
                search = [(C, nu_of(result, total), float(result.gap))]
            else:
                C, result, search = self._search(prep, base, target)
            prep.task_C[0] = C
            logger.info(
                "%s: %d solve(s) in %.2f s, C = %.6g, nu = %.4f",
                self._owner,
                len(search),
                time.perf_counter() - t0,
                prep.task_C[0],
                nu_of(result, total),
            )
        self._set_fitted(prep, [result])
        for name in ("y_offset_", "y_scale_"):  # the levels are 1: nothing to map back
            self.__dict__.pop(name, None)
        self.nu_ = nu_of(result, total)
        self.offset_ = 1.0
        self.C_search_ = np.array(search, dtype=np.float64)
        if target is None:
            warn_if_trivial(result, float(self.C), where=f"{self._owner}: C", stacklevel=2)
        return self

    def _search(self, prep: Any, base: Any, target: float) -> tuple[float, Any, list[Any]]:
        """C for ``nu`` (:func:`mklkit.pipeline.one_class.reach_nu`, each solve warm-started through the estimator's
        solves); a :class:`ConvergenceWarning` when it is not reached within ``nu_tol``: C, result, solves."""
        try:
            found = reach_nu(base, lambda C, warm: self._run_task(prep, 0, [C], warm)[0], target, float(self.nu_tol))
        except ValueError as exc:
            raise ValueError(f"{self._owner}: {exc}") from None
        if not found.reached:
            warnings.warn(
                f"{self._owner}: nu = {target:g} not reached within nu_tol = {float(self.nu_tol):g} after "
                f"{len(found.steps)} solves: the closest is nu = {found.nu:.4g} at C = {found.C:.6g} (the engines' "
                f"gaps: {max(st[2] for st in found.steps):.2g} at most); a smaller tol or a larger nu_tol may help",
                ConvergenceWarning,
                stacklevel=3,
            )
        return found.C, found.result, found.steps

    def fit_path(self, X: Any, y: Any = None, Cs: Any = None, sample_weight: Any = None) -> Any:
        """Not available: a one-class fit finds its C for ``nu`` (``C_search_`` records the solves)."""
        raise NotImplementedError(f"{self._owner}.fit_path: use fit with C or nu (C_search_ holds the solves)")

    # ---------------------------------------------------------------- predict
    def score_samples(self, X: Any) -> np.ndarray:
        r"""The values :math:`f(x) = \sum_m K_m(x, X_{train})\alpha_m`, shape (n,): larger inside the support."""
        return self._task_values(X)[:, 0]

    def decision_function(self, X: Any) -> np.ndarray:
        """``score_samples(X) - offset_``: > 0 inside the estimated support, < 0 outside."""
        check_is_fitted(self, "offset_")
        return self.score_samples(X) - self.offset_

    def predict(self, X: Any) -> np.ndarray:
        """+1 for inliers (``decision_function >= 0``), -1 for outliers."""
        return np.where(self.decision_function(X) >= 0.0, 1, -1)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags
