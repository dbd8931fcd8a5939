r"""Built-in losses: hinge, logistic, squared, ε-insensitive.

Each is written exactly as SpicyMKL §2.1 writes it; conjugates follow
eqs. (16), (17), (34) and (35).  See ``docs/contracts.md``.
"""
from __future__ import annotations

from .._jit import losses as _k
from .base import (
    CLASSIFICATION,
    REGRESSION,
    ConstrainedConjugate,
    Loss,
    LossJit,
)
from .params import Param

__all__ = ["Hinge", "Logistic", "Squared", "EpsInsensitive", "BUILTIN_LOSSES"]


class Hinge(Loss):
    r"""Hinge loss :math:`\ell(y, z) = \max(1 - yz, 0)`.

    Conjugate (eq. 17): :math:`\ell^*(y, u) = yu` on :math:`-1 \le yu \le 0`.
    Its gradient is finite at the boundary, so engines use the constrained
    form (§3.4.1): :math:`\ell_0^* = yu`, :math:`h_1 = -1 - yu`, :math:`h_2 = yu`.
    """

    name = "hinge"
    description = "hinge loss max(1 - y z, 0) (SVM)"
    task = CLASSIFICATION
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True
    n_aux = 0
    n_cons = 2
    jit = LossJit(
        value=_k.hinge_value,
        deriv=_k.hinge_deriv,
        deriv2=_k.zeros_like,
        conj=_k.hinge_conj,
        conj_grad=_k.hinge_conj_grad,
        conj_hess=_k.zeros_like,
        conj_lower=_k.cls_conj_lower,
        conj_upper=_k.cls_conj_upper,
    )
    constrained = ConstrainedConjugate(
        l0=_k.hinge_l0,
        l0_grad=_k.hinge_l0_grad,
        l0_hess=_k.hinge_l0_hess,
        cons=_k.hinge_cons,
        cons_grad=_k.hinge_cons_grad,
        cons_hess=_k.hinge_cons_hess,
    )


class Logistic(Loss):
    r"""Logistic loss :math:`\ell(y, z) = \log(1 + e^{-yz})`.

    Conjugate (eq. 16 with :math:`u = -\rho`): with :math:`t = -yu \in [0, 1]`,
    :math:`\ell^*(y, u) = t\log t + (1-t)\log(1-t)`, whose gradient is
    unbounded at the boundary: Newton with back-tracking stays inside.
    """

    name = "logistic"
    description = "logistic loss log(1 + exp(-y z))"
    task = CLASSIFICATION
    smooth_conjugate = True
    smooth_primal = True
    jit = LossJit(
        value=_k.logistic_value,
        deriv=_k.logistic_deriv,
        deriv2=_k.logistic_deriv2,
        conj=_k.logistic_conj,
        conj_grad=_k.logistic_conj_grad,
        conj_hess=_k.logistic_conj_hess,
        conj_lower=_k.cls_conj_lower,
        conj_upper=_k.cls_conj_upper,
    )

    def deriv_lipschitz(self) -> float:
        return 0.25


class Squared(Loss):
    r"""Squared loss :math:`\ell(y, z) = (y - z)^2`.

    Conjugate: :math:`\ell^*(y, u) = uy + u^2/4` on all of :math:`\mathbb{R}`.
    """

    name = "squared"
    description = "squared loss (y - z)^2 (regression)"
    task = REGRESSION
    smooth_conjugate = True
    smooth_primal = True
    jit = LossJit(
        value=_k.squared_value,
        deriv=_k.squared_deriv,
        deriv2=_k.squared_deriv2,
        conj=_k.squared_conj,
        conj_grad=_k.squared_conj_grad,
        conj_hess=_k.squared_conj_hess,
        conj_lower=_k.unbounded_lower,
        conj_upper=_k.unbounded_upper,
    )

    def deriv_lipschitz(self) -> float:
        return 2.0


class EpsInsensitive(Loss):
    r"""ε-insensitive loss :math:`\ell(y, z) = \max(|y - z| - \varepsilon, 0)`.

    Conjugate (eq. 34): :math:`\ell^*(y, u) = yu + \varepsilon|u|` on
    :math:`|u| \le 1`, non-differentiable at 0; constrained form (eq. 35):
    :math:`\ell_0^* = yu + \varepsilon(u + 2\tilde u)` with
    :math:`u - 1 \le 0,\ -1 - u \le 0,\ -\tilde u \le 0,\ -u - \tilde u \le 0`.
    """

    name = "eps_insensitive"
    description = "epsilon-insensitive loss max(|y - z| - eps, 0) (support vector regression)"
    task = REGRESSION
    params = (Param("eps", 0.1, "half-width of the insensitive tube", low=0.0),)
    smooth_conjugate = False
    smooth_primal = False
    linear_conjugate = True
    n_aux = 1
    n_cons = 4
    jit = LossJit(
        value=_k.eps_value,
        deriv=_k.eps_deriv,
        deriv2=_k.zeros_like,
        conj=_k.eps_conj,
        conj_grad=_k.eps_conj_grad,
        conj_hess=_k.zeros_like,
        conj_lower=_k.unit_lower,
        conj_upper=_k.unit_upper,
    )
    constrained = ConstrainedConjugate(
        l0=_k.eps_l0,
        l0_grad=_k.eps_l0_grad,
        l0_hess=_k.eps_l0_hess,
        cons=_k.eps_cons,
        cons_grad=_k.eps_cons_grad,
        cons_hess=_k.eps_cons_hess,
    )


BUILTIN_LOSSES = (Hinge, Logistic, Squared, EpsInsensitive)
