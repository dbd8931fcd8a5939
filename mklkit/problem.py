"""The MKL problem handed to engines."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .components.base import Loss, Regularizer


@dataclass
class Problem:
    r"""An MKL training problem in representer form (SpicyMKL eq. 7 / 42):

    .. math::
        \min_{\alpha, b} \sum_i \ell\big(y_i, \textstyle\sum_m (K_m\alpha_m)_i + b\big)
            + C \sum_m g(\|\alpha_m\|_{K_m}^2)

    Attributes
    ----------
    K : ndarray (M, N, N)
        Contiguous float64 Gram bank (symmetric positive semidefinite).
    y : ndarray (N,)
        Labels, already validated by ``loss.validate_labels``.
    loss, regularizer : components
    C : float
        Regularization constant, > 0.
    bias : bool
        Fit the unregularized offset b (adds the constraint 1ᵀρ = 0 to the dual).
    kernel_names : list of str, optional
        One label per kernel for reports.
    """

    K: np.ndarray
    y: np.ndarray
    loss: Loss
    regularizer: Regularizer
    C: float
    bias: bool = True
    kernel_names: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.K = np.ascontiguousarray(self.K, dtype=np.float64)
        if self.K.ndim != 3 or self.K.shape[1] != self.K.shape[2]:
            raise ValueError(f"K must have shape (M, N, N); got {self.K.shape}")
        self.y = self.loss.validate_labels(self.y)
        if self.y.shape[0] != self.K.shape[1]:
            raise ValueError(
                f"K has N={self.K.shape[1]} samples but y has {self.y.shape[0]} labels"
            )
        if not (self.C > 0 and np.isfinite(self.C)):
            raise ValueError(f"C must be a finite number > 0; got {self.C!r}")
        self.C = float(self.C)

    @property
    def n_kernels(self) -> int:
        return self.K.shape[0]

    @property
    def n_samples(self) -> int:
        return self.K.shape[1]
