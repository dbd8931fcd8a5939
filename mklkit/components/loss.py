r"""The loss contract: :class:`Loss` with its kernels (:class:`LossJit`) and the
constrained form of a non-smooth conjugate (:class:`ConstrainedConjugate`).

Sign convention.  ``conj`` is the ordinary convex conjugate in the second
argument, :math:`\ell^*(y, u) = \sup_z (uz - \ell(y, z))`.  The paper writes
the dual of (7) with :math:`\ell^*(y_i, -\rho_i)` (eq. 15): engines evaluate
the conjugate at :math:`u = -\rho`.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
from numba import njit

from .component import CLASSIFICATION, Component, LabelError, _Derived, _kernels, _refuse_declared_tuples, as_array

__all__ = ["Loss", "LossJit", "ConstrainedConjugate"]


class LossJit(NamedTuple):
    r"""Jitted numerics of a loss; every function is vectorized over samples.

    All arguments are C-contiguous float64 arrays of equal length ``N`` and
    ``params`` is the component's ``param_vector``; results are new arrays.

    value(y, z, params)      : :math:`\ell(y_i, z_i)`
    deriv(y, z, params)      : :math:`\partial_z \ell(y_i, z_i)` (a subgradient where
                               :math:`\ell` has a kink)
    deriv2(y, z, params)     : :math:`\partial_z^2 \ell(y_i, z_i)` (0 where undefined)
    conj(y, u, params)       : :math:`\ell^*(y_i, u_i)`, ``inf`` outside the domain
    conj_grad(y, u, params)  : :math:`\partial_u \ell^*(y_i, u_i)` on the domain
    conj_hess(y, u, params)  : :math:`\partial_u^2 \ell^*(y_i, u_i)` (the diagonal
                               of the Hessian of :math:`L^*`)
    conj_lower(y, params)    : lower end of the domain of :math:`\ell^*(y_i,\cdot)`
                               (``-inf`` if unbounded)
    conj_upper(y, params)    : upper end of the domain
    """

    value: Any
    deriv: Any
    deriv2: Any
    conj: Any
    conj_grad: Any
    conj_hess: Any
    conj_lower: Any
    conj_upper: Any


class ConstrainedConjugate(NamedTuple):
    r"""Constrained representation of a non-smooth conjugate (SpicyMKL §3.4.2, eq. 33).

    .. math::
        \ell^*(y, u) = \min_{\tilde u \in \mathbb{R}^{B'}}
            \{\ell_0^*(y, (u, \tilde u)) : h_j(y, (u, \tilde u)) \le 0,\ j = 1..B\}

    with twice differentiable convex :math:`\ell_0^*` and :math:`h_j`.  Let
    ``w = (u, ũ)`` of length ``1 + B'``; ``u`` has shape (N,), ``ut`` shape
    (N, B') (``B'`` may be 0).

    l0(y, u, ut, params)        -> (N,)                 :math:`\ell_0^*`
    l0_grad(y, u, ut, params)   -> (N, 1+B')            gradient in ``w``
    l0_hess(y, u, ut, params)   -> (N, 1+B', 1+B')      Hessian in ``w``
    cons(y, u, ut, params)      -> (N, B)               :math:`h_j`
    cons_grad(y, u, ut, params) -> (N, B, 1+B')         gradients in ``w``
    cons_hess(y, u, ut, params) -> (N, B, 1+B', 1+B')   Hessians in ``w``
    """

    l0: Any
    l0_grad: Any
    l0_hess: Any
    cons: Any
    cons_grad: Any
    cons_hess: Any


@njit(cache=True)
def _zeros(y, z, params):
    return np.zeros(y.shape[0])


class Loss(Component):
    r"""A per-sample loss :math:`\ell(y, z)` of label ``y`` and prediction ``z``.

    Kernels a loss writes (``@kernel`` methods)
    --------------------------------------------
    value, deriv, deriv2, conj, conj_grad, conj_hess, conj_lower, conj_upper
        The fields of :class:`LossJit`, with their signatures.  ``deriv2`` and
        ``conj_hess`` default to 0.
    l0, l0_grad, l0_hess, cons, cons_grad, cons_hess
        The fields of :class:`ConstrainedConjugate`, required when
        ``smooth_conjugate`` is False.

    Derived, read-only: ``jit`` (a :class:`LossJit` of the kernels) and
    ``constrained`` (a :class:`ConstrainedConjugate`, or None when the loss
    has no constrained form).

    Class attributes a loss declares
    ---------------------------------
    task : ``"classification"`` or ``"regression"``
    smooth_conjugate : bool
        True when :math:`\ell^*(y,\cdot)` is twice differentiable on the interior
        of its domain and its gradient is unbounded at a finite boundary (or
        the domain is all of :math:`\mathbb{R}`): Newton with back-tracking
        then keeps iterates inside the domain (logistic, squared).  False when
        the engine must use :attr:`constrained` (hinge, ε-insensitive).
    n_aux, n_cons : int
        ``B'`` and ``B`` of the constrained representation.
    smooth_primal : bool
        True when :math:`\ell(y,\cdot)` is differentiable with Lipschitz
        derivative (needed by the proximal-gradient engine).
    linear_conjugate : bool
        True when the domain :math:`[l, u]` of :math:`\ell^*(y,\cdot)`
        (``conj_lower``, ``conj_upper``) is bounded, contains 0, and
        :math:`\ell^*(y,\cdot)` is linear on :math:`[l, 0]` and on :math:`[0, u]`
        with :math:`\ell^*(y, 0) = 0`: then
        :math:`\ell(y, z) = -l\,(s_- - z)_+ + u\,(z - s_+)_+` with the slopes
        :math:`s_\mp` of the two pieces, and the dual is the box-constrained
        quadratic-type dual of the SVM (hinge, ε-insensitive, pinball; the
        SMO-MKL engines need it).  The conformance kit checks the claim.
    """

    kind: ClassVar[str] = "loss"
    task: ClassVar[str] = CLASSIFICATION
    smooth_conjugate: ClassVar[bool] = True
    n_aux: ClassVar[int] = 0
    n_cons: ClassVar[int] = 0
    smooth_primal: ClassVar[bool] = True
    linear_conjugate: ClassVar[bool] = False

    #: The kernels of ``jit`` and those without a default.
    KERNELS: ClassVar[tuple[str, ...]] = LossJit._fields
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = ("value", "deriv", "conj", "conj_grad", "conj_lower", "conj_upper")
    #: The kernels of ``constrained`` (all required when ``smooth_conjugate`` is False).
    CONSTRAINED_KERNELS: ClassVar[tuple[str, ...]] = ConstrainedConjugate._fields

    deriv2 = staticmethod(_zeros)
    conj_hess = staticmethod(_zeros)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _refuse_declared_tuples(cls, ("jit", "constrained"))

    @_Derived
    def jit(cls) -> LossJit:
        """The kernels as a :class:`LossJit` (read-only)."""
        return LossJit(*_kernels(cls, LossJit._fields))

    @_Derived
    def constrained(cls) -> ConstrainedConjugate | None:
        """The constrained form as a :class:`ConstrainedConjugate`; None when the
        loss lacks any of its kernels (read-only)."""
        fns = _kernels(cls, ConstrainedConjugate._fields)
        return None if any(f is None for f in fns) else ConstrainedConjugate(*fns)

    def deriv_lipschitz(self) -> float:
        r"""A bound on :math:`\sup_z |\partial_z^2 \ell(y, z)|` (``inf`` if none)."""
        return float("inf")

    def cvxpy_expr(self, y: np.ndarray, z: Any, w: np.ndarray | None = None) -> Any:
        r""":math:`\sum_i w_i\,\ell(y_i, z_i)` as a cvxpy expression of the predictions
        ``z`` (``w`` None: all 1), for the conic reference (:mod:`mklkit.testing.conic`);
        ``NotImplemented`` when the loss gives none.  cvxpy is imported inside."""
        return NotImplemented

    def linear_pieces(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""The pieces of a conjugate declared ``linear_conjugate``, per sample.

        Derived from ``jit``: the domain ends :math:`l \le 0 \le u`
        (``conj_lower``, ``conj_upper``) and the slopes
        :math:`s_- = \ell^*(y, l)/l` of the piece on :math:`[l, 0]` and
        :math:`s_+ = \ell^*(y, u)/u` of the piece on :math:`[0, u]` (0 for an
        empty piece).  Then :math:`\ell(y, z) = -l\,(s_- - z)_+ + u\,(z - s_+)_+`:
        the hinge has, for :math:`y = 1`, :math:`(l, u, s_-) = (-1, 0, 1)`.

        Returns
        -------
        lower, upper, slope_lower, slope_upper : ndarray (N,)
        """
        y = as_array(y)
        k, p = self.jit, self.param_vector
        lo = np.asarray(k.conj_lower(y, p), dtype=np.float64)
        hi = np.asarray(k.conj_upper(y, p), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            s_lo = np.where(
                lo < 0.0, np.asarray(k.conj(y, as_array(np.minimum(lo, 0.0)), p)) / np.where(lo < 0.0, lo, 1.0), 0.0
            )
            s_hi = np.where(
                hi > 0.0, np.asarray(k.conj(y, as_array(np.maximum(hi, 0.0)), p)) / np.where(hi > 0.0, hi, 1.0), 0.0
            )
        return lo, hi, s_lo, s_hi

    def validate_labels(self, y: np.ndarray) -> np.ndarray:
        """Check labels for this loss and return them as a float64 vector.

        Classification losses need exactly the two values -1 and +1;
        regression losses need finite real values.  Raises
        :class:`LabelError` with a message saying what is allowed.
        """
        y = np.asarray(y)
        if y.ndim != 1:
            raise LabelError(f"labels must be a 1-d vector; got shape {y.shape}")
        if y.size == 0:
            raise LabelError("labels are empty")
        try:
            yf = y.astype(np.float64)
        except (TypeError, ValueError):
            raise LabelError(f"labels must be numbers; got dtype {y.dtype}") from None
        if not np.all(np.isfinite(yf)):
            raise LabelError("labels contain NaN or inf")
        if self.task == CLASSIFICATION:
            values = np.unique(yf)
            if not np.all(np.isin(values, (-1.0, 1.0))):
                shown = ", ".join(f"{v:g}" for v in values[:6])
                more = ", ..." if values.size > 6 else ""
                kind = "a continuous target" if values.size > 10 else "labels"
                raise LabelError(
                    f"the {self.task} loss {self.name!r} needs labels in {{-1, +1}}; "
                    f"got {kind} with values {{{shown}{more}}}"
                )
            if values.size != 2:
                raise LabelError(
                    f"the {self.task} loss {self.name!r} needs both classes -1 and +1; got only {values[0]:g}"
                )
        return np.ascontiguousarray(yf)
