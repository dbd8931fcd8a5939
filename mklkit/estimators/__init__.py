"""scikit-learn estimators for Multiple Kernel Learning (``docs/api.md``).

:class:`MKLClassifier` and :class:`MKLRegressor` learn a combination of many kernels with any registered loss,
regularizer and engine (SpicyMKL, Suzuki & Tomioka 2011, eq. 42 in representer form), following scikit-learn's
conventions: they work in ``Pipeline``, ``GridSearchCV`` and ``cross_val_score``, clone, and pickle.
"""

from __future__ import annotations

from ._classes import MKLClassifier, MKLRegressor
from ._defaults import DEFAULT_ALL_WIDTH_FACTORS, DEFAULT_DEGREES, DEFAULT_EACH_WIDTHS, default_kernels, feature_kinds
from ._oneclass import MKLOneClassSVM, one_class_kernels
from ._path import MKLPath

__all__ = [
    "MKLClassifier",
    "MKLRegressor",
    "MKLOneClassSVM",
    "MKLPath",
    "default_kernels",
    "one_class_kernels",
    "feature_kinds",
    "DEFAULT_ALL_WIDTH_FACTORS",
    "DEFAULT_EACH_WIDTHS",
    "DEFAULT_DEGREES",
]
