"""The public estimators: :class:`MKLClassifier` and :class:`MKLRegressor`."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from .._multiclass import (
    BinaryTask,
    encode_classes,
    ovo_decision,
    ovo_tasks,
    ovr_proba,
    ovr_tasks,
    pairwise_coupling,
    sigmoid,
)
from ..components.base import CLASSIFICATION, REGRESSION
from ..components.params import ParamError
from ._base import BaseMKL
from ._checks import MULTICLASS, check_choice, is_logistic, multiclass_mode

_KERNELS_DOC = """\
    kernels : "auto", "precomputed", str, list or mapping, default="auto"
        The kernel bank: ``"auto"`` (:func:`default_kernels` on the standardised features; with C chosen on held-out
        rows of one problem, its kernels on all features alone are kept unless the whole bank is better beyond the
        paired standard error, ``bank_choice_``), a preset name (``"simplemkl"``, ``"smomkl"``), or bank entries as
        in the YAML ``kernels.bank`` section (``docs/data_and_kernels.md``), e.g. ``[{"function": "rbf", "width":
        [1, 5]}]``.  ``"precomputed"``: ``X`` is the Gram matrices, (N, N, M) in ``fit`` (``np.stack(Ks,
        axis=-1)``) and (N_test, N, M) in ``predict``; the estimator is then pairwise.
"""

_COMMON_DOC = """\
    regularizer : str, mapping or Regularizer, default="elasticnet"
        A registered regularizer by name, as ``{"name": ..., **params}``, or an instance (a plugin's too).  The
        default elastic net (λ = 0.5) is sparse in the kernels and has a smooth conjugate.
    weighting : None, str, mapping or Weighting, default=None
        A two-stage method (``docs/two_stage.md``): kernel weights :math:`\\eta` learnt first by a registered
        weighting (%(weightings)s; a plugin's too), by name, as ``{"name": ..., **params}`` or an instance, then the
        learner on :math:`\\sum_m \\eta_m K_m` (the ``uniform`` regularizer on the scaled bank, certified by the
        engine's gap); ``kernel_weights_`` is :math:`\\eta`, per binary problem.  The regularizer is then ``uniform``
        (``regularizer`` left at its default, or ``"uniform"``; any other is refused), and the default bank is kept
        whole (no ``bank_choice_``).
    C : float, "auto", "path" or "scale", default="auto"
        Regularization constant > 0 (larger: fewer, smoother kernels).  ``"path"``: chosen on 20 %% held-out rows
        along a warm-started path from ``C_max`` down (:func:`mklkit.pipeline.heldout.select_C`, ``C_selection_``).
        ``"scale"``: :math:`%(C)s\\sqrt{\\bar d}`, :math:`\\bar d` the mean diagonal of the training kernels
        (:math:`%(C)s/\\sqrt N` at unit trace), a penalty the same for every N.  %(C_note)s  ``"auto"``: ``"path"``
        from 2,500 training rows per binary problem, else ``"scale"``.  The value used is ``C_``.
    bias : bool, default=True
        Fit an unregularized offset.
    engine : str, mapping or Engine, default="auto"
        Any registered engine (``mklkit plugins``); ``"auto"`` picks one for the problem and the bank
        (``docs/engines.md``).
    engine_params : dict, optional
        Options of the engine (``docs/engines.md``).
    tol : float, optional
        Relative duality gap at which the engine stops (``None``: the engine's default, spicy's 1e-2 as in SpicyMKL
        §6.1); overrides ``engine_params["tol"]``.
    max_iter : int, optional
        Maximum number of outer iterations (``None``: the engine's default).
    normalize : {"auto", "trace", "diagonal", "none"}, default="auto"
        Kernel normalisation; ``"auto"``: unit trace (SpicyMKL §6.1) for a bank, none for precomputed kernels.
    standardize : "auto" or bool, default="auto"
        Centre and scale the features with training statistics (sparse input is only scaled); ``"auto"``: dense
        input only (scaling rare indicators costs accuracy: a9a 85.2 %% -> 85.1 %%, docs/api.md), and never when a
        kernel of the bank reads its features as given (boolean and string kernels: 0/1 features, symbol codes;
        ``True`` with them is an error).
    memory_budget : int, float or str, optional
        Largest bank to build (in ``fit``; the test kernels in ``predict``), in bytes or as ``"512MB"``/``"4GiB"``
        (default 4 GiB); checked before anything is allocated.
    factor : "auto", None, False, True or dict, default="auto"
        Kernels as factors :math:`K_m \\approx L_mL_m^\\top` (``docs/factor_banks.md``): ``{"rank", "tol",
        "method", "seed", "refine"}`` (``refine``: more rank for the kernels in use after the solve, by default with
        ``C="path"``, :mod:`mklkit.pipeline.refine`), ``True`` (the settings of ``"auto"``), ``None``/``False``
        (Gram matrices), ``"auto"``: exact factors for small explicit feature maps, Gram matrices within
        ``memory_budget`` and N <= 5,000, approximate factors otherwise (said on stderr).
    scheduler : str or distributed.Client, optional
        Build the bank in shards on a Dask cluster, released after ``fit``; exclusive with ``factor``.
    device : str, optional
        ``"cuda"``, ``"cuda:K"`` or ``"cpu"``: solve on that device with the engine ``apg`` (accelerated proximal
        gradient on the factor coordinates, through PyTorch or CuPy on a GPU; ``engine_params`` adds its options,
        e.g. ``{"array_library": "cupy"}``), the kernels as factors (``factor`` ``"auto"`` factors them).
        ``None``: the engines of ``engine`` on this machine's CPU.
    verbose : int, default=0
        1: log the bank build and every engine iteration (:mod:`logging`, on stderr unless the application
        configured logging); 2: also the engines' debug records.
"""

_ATTR_DOC = """\
    kernel_weights_ : ndarray of shape (n_kernels,) or (n_problems, n_kernels)
        Kernel weights :math:`d_m` (summing to 1), or a weighting's :math:`\\eta`; one row per binary problem for
        multiclass fits.
    active_kernels_ : ndarray of int
        Indices of the kernels with a non-zero block in some problem (the only ones computed to predict).
    kernel_names_ : list of str
        One label per kernel of the bank, e.g. ``rbf(width=2)[x3]``.
    kernels_ : list or str
        The resolved bank description (``"precomputed"`` for Gram input).
    n_iter_, dual_gap_ : int and float, or ndarrays
        Outer iterations and final relative duality gaps (certificates of optimality); one per binary problem.
    C_, C_max_ : float or ndarray
        The C of the fit, and the smallest C at which every kernel is off (``inf`` for non-sparse regularizers), where
        a path starts (``fit_path(X, y, Cs=20)``); one per binary problem.
    C_selection_ : HeldoutPath or list of HeldoutPath
        Where C was chosen on held-out rows: the path and its choice (:class:`mklkit.pipeline.heldout.HeldoutPath`).
    bank_choice_ : dict or None
        With ``kernels="auto"`` and C chosen on held-out rows of one problem: the bank ``"kept"`` (``"kernels on all
        features"`` or ``"whole bank"``), the ``"kernels"`` on all features, the held-out ``"difference"`` of their
        path's choice from the whole bank's, its ``"difference_se"``, each path's C and seconds.
    factor_approximation_, factor_refinement_ : dict, FactorRefinement or None
        On a factor bank, what the factors leave out (:meth:`mklkit.kernels.factor.FactorBank.approximation`) and
        their refinement round by round (:mod:`mklkit.pipeline.refine`).
    result_ : SolveResult or list of SolveResult
        The engines' full results (``alpha``, ``bias``, ``history``, ...).
    loss_, regularizer_, engine_ : components
        The resolved components, with their parameters.
    solved_by_ : str or ndarray of str
        The engine that produced the answer (for ``engine="auto"``, its delegate after any fallback).
    scaler_ : mklkit.data.Standardizer or None
    bank_ : KernelBank or FactorPredictor
        What prediction needs: the active kernels' specifications, normalisation constants and training points (no
        Gram matrices), or a :class:`~mklkit.kernels.factor.FactorPredictor` on a factor bank.
    n_features_in_ : int
        Number of features (for precomputed kernels: the number of training samples).
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a data frame with string column names.
"""


def _store(est: BaseMKL, params: dict[str, Any]) -> None:
    """Keep the constructor's arguments as they are (scikit-learn's convention; ``fit`` checks them)."""
    for key, value in params.items():
        if key != "self":
            setattr(est, key, value)


class MKLClassifier(ClassifierMixin, BaseMKL):
    __doc__ = f"""Multiple Kernel Learning classifier.

    Learns a combination of kernels and a kernel classifier together; binary labels of any type; several classes
    through one-vs-rest (default) or one-vs-one, all binary problems sharing one Gram bank.

    Parameters
    ----------
{_KERNELS_DOC}    loss : str, mapping or Loss, default="logistic"
        A registered classification loss (``predict_proba`` needs the logistic loss); the error message of an
        unsupported loss/regularizer pair names the engines that can solve it.
{_COMMON_DOC % dict(weightings="``average``, ``alignf``, ``easymkl``, ``fheuristic``, ``pwmk``", C="1", C_note="The scale 1 (C = 0.05 at N = 400) is the best of a grid on the UCI sets and reaches SVC's accuracy on a9a (docs/api.md).")}
    multiclass : {{"auto", "ovr", "ovo", "joint"}}, default="auto"
        One-vs-rest (one problem per class on all rows), one-vs-one (one problem per pair of classes on their
        rows only), or joint: one problem on all rows with one kernel weighting shared by all classes, the
        multinomial loss (``loss="logistic"`` or ``"multinomial"``, or a ``MulticlassLoss``) and the regularizer
        on each kernel's block of class coefficients (``docs/multiclass.md``; ``kernel_weights_`` of shape
        (n_kernels,), ``engine="auto"``, the tolerance 1e-3 unless ``tol`` is given).  ``"auto"``: joint where
        it applies (such a loss, ``engine="auto"``, no weighting), else one-vs-rest.  Two classes are one
        binary problem in every mode.
    n_jobs : int, optional
        Binary problems solved in parallel (threads; the jitted kernels release the GIL).  ``None``: one at a time.
    class_weight : None, "balanced" or dict, default=None
        Weights of the classes, multiplied into ``sample_weight`` (as in ``SVC``): ``{{label: weight}}`` (missing
        labels weigh 1), or ``"balanced"``: ``n_samples / (n_classes * np.bincount(y))``.  A weighted problem is
        solved by the engines that accept sample weights (``docs/engines.md``).

    Attributes
    ----------
    classes_ : ndarray
        The class labels.
    class_weight_ : ndarray of shape (n_classes,)
        The weight of each class (all 1 without ``class_weight``).
{_ATTR_DOC}
    Notes
    -----
    ``predict_proba`` (logistic loss only): binary :math:`P(y = c_1) = \\sigma(f)`, the sigmoid of the decision
    function; one-vs-rest: the normalised sigmoids :math:`\\sigma(f_k)/\\sum_j\\sigma(f_j)`; one-vs-one: pairwise
    coupling of the pairwise sigmoids (Wu, Lin & Weng 2004, method 2); joint: the softmax of the K outputs.
    """

    _task = CLASSIFICATION

    def __init__(
        self,
        kernels: Any = "auto",
        *,
        loss: Any = "logistic",
        regularizer: Any = "elasticnet",
        weighting: Any = None,
        C: Any = "auto",
        bias: bool = True,
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
        multiclass: str = "auto",
        n_jobs: int | None = None,
        class_weight: Any = None,
    ) -> None:
        _store(self, locals())

    def _sample_weight(self, sample_weight: Any, y: np.ndarray) -> np.ndarray | None:
        """``sample_weight`` (validated) times the weight of each sample's class (``class_weight``)."""
        from sklearn.utils.class_weight import compute_class_weight

        sw = super()._sample_weight(sample_weight, y)
        check_classification_targets(y)
        classes = np.unique(y)
        cw = self.class_weight
        if not (cw is None or (isinstance(cw, str) and cw == "balanced") or isinstance(cw, Mapping)):
            raise ParamError("class_weight", cw, "None, 'balanced' or a dict {label: weight}", owner=self._owner)
        try:
            weights = np.asarray(compute_class_weight(cw, classes=classes, y=y), dtype=np.float64)
        except ValueError as exc:
            raise ValueError(f"{self._owner}: class_weight: {exc}") from None
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0.0)):
            raise ParamError("class_weight", cw, "weights that are finite numbers >= 0", owner=self._owner)
        self.class_weight_ = weights
        if np.all(weights == 1.0):
            return sw
        per_sample = weights[np.searchsorted(classes, y)]
        out = per_sample if sw is None else sw * per_sample
        if not np.any(out > 0.0):
            raise ValueError(f"{self._owner}: sample_weight times class_weight is 0 for every sample")
        return None if np.all(out == 1.0) else out

    def _encode_targets(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, list[BinaryTask], tuple[float, float]]:
        """The classes, the binary problems and ``(offset, scale)`` of the targets the engines see."""
        check_choice(self.multiclass, "multiclass", MULTICLASS, self._owner)
        check_classification_targets(y)
        classes, codes = encode_classes(y)
        if classes.size < 2:
            raise ValueError(f"{self._owner} needs samples of at least 2 classes; got 1 class ({classes[0]!r})")
        # "joint": the one-vs-rest layout (a column per class on all rows), solved as one problem
        tasks = (ovo_tasks if multiclass_mode(self) == "ovo" else ovr_tasks)(codes.ravel(), classes.size)
        return classes, tasks, (0.0, 1.0)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "MKLClassifier":
        """Build the kernel bank and solve the MKL problem(s).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data; with ``kernels="precomputed"`` the Gram matrices, (N, N, M).
        y : array-like of shape (n_samples,)
            Class labels (any two or more values).
        sample_weight : array-like of shape (n_samples,), optional
            Weights >= 0 of the samples' loss terms, multiplied by ``class_weight`` (see :meth:`MKLRegressor.fit`).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def decision_function(self, X: Any) -> np.ndarray:
        """Decision values: (n,) for two classes (positive: ``classes_[1]``), else (n, n_classes).

        One-vs-one fits return ``SVC``'s "ovr" shape: votes plus a tie-breaking confidence in (-1/3, 1/3).
        """
        F = self._task_values(X)
        if len(self.classes_) == 2:
            return F[:, 0]
        if multiclass_mode(self) == "ovo":
            return ovo_decision(F, self._tasks, len(self.classes_))
        return F

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels."""
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]

    @available_if(is_logistic)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, (n, n_classes); logistic loss only (see Notes)."""
        F = self._task_values(X)
        if len(self.classes_) == 2:
            p = sigmoid(F[:, 0])
            return np.column_stack([1.0 - p, p])
        mode = multiclass_mode(self)
        if mode == "ovo":
            return pairwise_coupling(F, self._tasks, len(self.classes_))
        if mode == "joint":
            return self.loss_.proba(F)
        return ovr_proba(F)

    @available_if(is_logistic)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class MKLRegressor(RegressorMixin, BaseMKL):
    __doc__ = f"""Multiple Kernel Learning regressor.

    Parameters
    ----------
{_KERNELS_DOC}    loss : str, mapping or Loss, default="squared"
        A registered regression loss (``squared``, ``eps_insensitive``, ``huber``, a plugin's), subject to the
        engine's support.
{_COMMON_DOC % dict(weightings="``average``, ``alignf``, ``fheuristic``: those that read a real target", C="6", C_note="The scale 6 (C = 0.3 at N = 400) is the best of a grid on diabetes and liver/drinks (docs/api.md).")}
    standardize_y : bool, default=True
        Fit the targets standardized, :math:`(y - \\bar y)/s_y` (not centred with ``bias=False``; :math:`s_y` is
        then the root mean square), and map predictions back: ``C`` and the ``eps``/``delta`` of the
        ``eps_insensitive`` and ``huber`` losses are then in units of the target's standard deviation, so the
        defaults suit any target scale (raw diabetes targets, std 77: ``eps_insensitive`` reaches R² 0.06 without
        it, 0.39 with it, docs/api.md).  ``dual_gap_`` and ``result_`` refer to the standardized problem.

    Attributes
    ----------
{_ATTR_DOC}
    y_offset_, y_scale_ : float
        The engines saw ``(y - y_offset_) / y_scale_`` (``0`` and ``1`` with ``standardize_y=False``); ``predict``
        undoes it.
    """

    _task = REGRESSION

    def __init__(
        self,
        kernels: Any = "auto",
        *,
        loss: Any = "squared",
        regularizer: Any = "elasticnet",
        weighting: Any = None,
        C: Any = "auto",
        bias: bool = True,
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
        standardize_y: bool = True,
    ) -> None:
        _store(self, locals())

    def _numeric_targets(self, y: np.ndarray) -> np.ndarray:
        try:
            yf = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{self._owner}: y must be numeric; got dtype {np.asarray(y).dtype}") from None
        if not np.all(np.isfinite(yf)):
            raise ValueError(f"{self._owner}: y contains NaN or infinite values")
        return yf

    def _target_scaling(self, yf: np.ndarray, sample_weight: np.ndarray | None = None) -> tuple[float, float]:
        """``(offset, scale)``: the engines see ``(y - offset) / scale`` (weighted with ``sample_weight``)."""
        if not isinstance(self.standardize_y, (bool, np.bool_)):
            raise ParamError("standardize_y", self.standardize_y, "True or False", owner=self._owner)
        if not self.standardize_y:
            return 0.0, 1.0
        offset = float(np.average(yf, weights=sample_weight)) if self.bias else 0.0
        scale = float(np.sqrt(np.average((yf - offset) ** 2, weights=sample_weight)))
        return offset, (scale if scale > 0.0 and math.isfinite(scale) else 1.0)

    def _encode_targets(
        self, y: np.ndarray, sample_weight: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, list[BinaryTask], tuple[float, float]]:
        yf = self._numeric_targets(y)
        offset, scale = self._target_scaling(yf, sample_weight)
        return None, [BinaryTask(0, -1, None, np.ascontiguousarray((yf - offset) / scale))], (offset, scale)

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "MKLRegressor":
        r"""Build the kernel bank and solve the MKL problem.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Training data; with ``kernels="precomputed"`` the Gram matrices, (N, N, M).
        y : array-like of shape (n_samples,)
            Real targets.
        sample_weight : array-like of shape (n_samples,), optional
            Weights :math:`w_i \ge 0` of the loss terms, :math:`\sum_i w_i\ell(y_i, f(x_i)) + C\sum_m g(\|f_m\|^2)`:
            an integer weight is the sample repeated that many times (the standardisation of the features and of
            ``y``, the unit-trace normalisation and ``C="auto"`` are weighted too), a weight 0 drops the sample
            (with ``kernels="precomputed"`` every weight must be > 0).  Weights all 1 are the unweighted problem;
            others are solved by the engines that accept sample weights (``proximal``, and ``auto``).

        Returns
        -------
        self
        """
        return self._fit(X, y, sample_weight)

    def predict(self, X: Any) -> np.ndarray:
        """Predictions :math:`s_y(\\sum_m K_m(X, X_{train})\\alpha_m + b) + \\bar y`, shape (n,) (``standardize_y``)."""
        return self._task_values(X)[:, 0] * getattr(self, "y_scale_", 1.0) + getattr(self, "y_offset_", 0.0)
