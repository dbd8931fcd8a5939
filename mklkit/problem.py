"""The MKL problem handed to engines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .components.base import Loss, Regularizer
from .kernels.ops import ArrayBank, BankAccessError, GramBank


class _BankField:
    """The ``K`` field of :class:`Problem`: the (M, N, N) array, or a :class:`~mklkit.kernels.ops.BankAccessError`
    saying what to do for a bank that holds none (e.g. a :class:`~mklkit.kernels.sharded.ShardedBank`)."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            raise AttributeError("K")  # a required field: no default
        K = obj.__dict__["_K"]
        if isinstance(K, GramBank):
            try:
                return K.as_array()
            except BankAccessError as exc:
                raise BankAccessError(
                    f"problem.K: {exc}; this engine reads the whole Gram bank as one array. "
                    "Solve the problem with engine 'spicy' (it works through problem.bank), "
                    "or build an in-memory bank (KernelBank.build) for this engine"
                ) from None
        return K

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__["_K"] = value
        obj.__dict__.pop("_bank", None)


@dataclass
class Problem:
    r"""An MKL training problem in representer form (SpicyMKL eq. 7 / 42):

    .. math::
        \min_{\alpha, b} \sum_i w_i\,\ell\big(y_i, \textstyle\sum_m (K_m\alpha_m)_i + b\big)
            + C \sum_m g(\|\alpha_m\|_{K_m}^2)

    with per-sample weights :math:`w_i > 0` (all 1 when ``sample_weight`` is None).

    Attributes
    ----------
    K : ndarray (M, N, N) or GramBank
        Contiguous float64 Gram bank (symmetric PSD), or a :class:`~mklkit.kernels.ops.GramBank` such as
        a :class:`~mklkit.kernels.sharded.ShardedBank`; reading ``problem.K`` of a bank that is not one
        array raises :class:`~mklkit.kernels.ops.BankAccessError` (engines working through :attr:`bank`
        accept both).
    y : ndarray (N,)
        Labels, validated by ``loss.validate_labels``.
    C : float
        Regularization constant, > 0.
    bias : bool
        Fit the unregularized offset b (adds the constraint 1ᵀρ = 0 to the dual).
    sample_weight : ndarray (N,), optional
        Finite weights :math:`w_i > 0` of the loss terms (:class:`mklkit.engines.objectives.SampleLoss`;
        only for engines with ``Requires(sample_weight=True)``); leave out a row of weight 0.
    """

    K: Any = _BankField()  # type: ignore[assignment]
    y: np.ndarray
    loss: Loss
    regularizer: Regularizer
    C: float
    bias: bool = True
    kernel_names: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sample_weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        K = self.__dict__["_K"]
        if isinstance(K, GramBank):
            shape = tuple(K.shape)
        else:
            K = self.K = np.ascontiguousarray(K, dtype=np.float64)
            shape = K.shape
        if len(shape) != 3 or shape[1] != shape[2]:
            raise ValueError(f"K must have shape (M, N, N); got {shape}")
        self.y = self.loss.validate_labels(self.y)
        if self.y.shape[0] != shape[1]:
            raise ValueError(f"K has N={shape[1]} samples but y has {self.y.shape[0]} labels")
        if not (self.C > 0 and np.isfinite(self.C)):
            raise ValueError(f"C must be a finite number > 0; got {self.C!r}")
        self.C = float(self.C)
        if self.sample_weight is not None:
            w = np.ascontiguousarray(self.sample_weight, dtype=np.float64)
            if w.shape != (shape[1],):
                raise ValueError(f"sample_weight must have shape ({shape[1]},) (one weight per sample); got {w.shape}")
            if not (np.all(np.isfinite(w)) and np.all(w > 0.0)):
                bad = w[~(np.isfinite(w) & (w > 0.0))]
                raise ValueError(
                    f"sample_weight must hold finite numbers > 0 (leave a sample of "
                    f"weight 0 out of the problem); got {bad[0]!r}"
                )
            self.sample_weight = w

    @property
    def weighted(self) -> bool:
        """Whether the problem has per-sample weights (``sample_weight`` is not None)."""
        return self.sample_weight is not None

    @property
    def bank(self) -> GramBank:
        """The Gram bank's operations: an :class:`~mklkit.kernels.ops.ArrayBank` over ``K``, or the given bank."""
        bank = self.__dict__.get("_bank")
        if bank is None:
            K = self.__dict__["_K"]
            bank = K if isinstance(K, GramBank) else ArrayBank(K)
            self.__dict__["_bank"] = bank
        return bank

    @property
    def representation(self) -> str:
        """Where the kernels are held: ``"array"``, ``"sharded"`` or ``"factor"`` (the bank's, or
        ``extra["representation"]`` of a probe problem standing for a bank not built yet)."""
        return str(self.extra.get("representation") or self.bank.representation)

    @property
    def n_kernels(self) -> int:
        return int(self.bank.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.bank.shape[1])

    def __repr__(self) -> str:
        M, N = self.n_kernels, self.n_samples
        kind = "" if isinstance(self.__dict__["_K"], np.ndarray) else f", {self.bank!r}"
        return (
            f"Problem(M={M}, N={N}{kind}, loss={self.loss.describe()}, "
            f"regularizer={self.regularizer.describe()}, C={self.C!r}, bias={self.bias}"
            + (", weighted" if self.weighted else "")
            + ")"
        )
