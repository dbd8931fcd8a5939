r"""scikit-learn estimators for Multiple Kernel Learning.

:class:`MKLClassifier` and :class:`MKLRegressor` learn a sparse or non-sparse
combination of many kernels by solving

.. math::
    \min_{\alpha, b}\ \sum_i \ell\Big(y_i, \sum_m (K_m\alpha_m)_i + b\Big)
        + C \sum_m g\big(\|\alpha_m\|_{K_m}^2\big)

(SpicyMKL, Suzuki & Tomioka 2011, eq. 42 in representer form) with any
registered loss, regularizer and engine.  They follow scikit-learn's
conventions: the constructor only stores its arguments, ``fit`` validates
them, builds the kernel bank once and solves; they work in ``Pipeline``,
``GridSearchCV`` and ``cross_val_score``, clone, and pickle.

Usage is documented in ``docs/api.md``.
"""

from __future__ import annotations

from ._classes import MKLClassifier, MKLRegressor
from ._defaults import DEFAULT_ALL_WIDTH_FACTORS, DEFAULT_DEGREES, DEFAULT_EACH_WIDTHS, default_kernels, feature_kinds
from ._path import MKLPath

__all__ = [
    "MKLClassifier",
    "MKLRegressor",
    "MKLPath",
    "default_kernels",
    "feature_kinds",
    "DEFAULT_ALL_WIDTH_FACTORS",
    "DEFAULT_EACH_WIDTHS",
    "DEFAULT_DEGREES",
]
