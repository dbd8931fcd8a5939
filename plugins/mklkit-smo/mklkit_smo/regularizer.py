r"""Regularizers of this distribution: the squared p-norm of the kernel weights
(SMO-MKL, Vishwanathan et al. 2010, eq. 1) and, at the end of the module, the
squared block 1-norm of the support kernel machine (:class:`L1Squared`).

With block functions :math:`f_m` (:math:`\|f_m\| = \|\alpha_m\|_{K_m}` in
representer form) the regularizer is

.. math::
    R_{p,\lambda}(f) = \min_{d \ge 0}\ \frac12\sum_m \frac{\|f_m\|^2}{d_m}
        + \frac\lambda2 \Big(\sum_m d_m^p\Big)^{2/p}
      = \tfrac34 (2\lambda)^{1/3}\, \|x\|_s^{4/3},
    \qquad x_m = \|f_m\|,\ s = \frac{2p}{p+1},

(the inner minimum over :math:`d` on the sphere :math:`\|d\|_p = \tau` is
:math:`\|x\|_s^2/\tau`, then :math:`\tau^3 = \|x\|_s^2/(2\lambda)`), and an
MKL problem with it reads, in mklkit's convention
(:class:`mklkit.problem.Problem`: the constant ``C`` multiplies the
regularizer),

.. math::
    \min_{f, b}\ \sum_i \ell\big(y_i, \textstyle\sum_m f_m(x_i) + b\big) + C\,R_{p,\lambda}(f).

This is the SMO-MKL primal (1) :math:`\tfrac12\sum_m\|f_m\|^2/d_m
+ C_{\mathrm{paper}}\sum_i\ell_i + \tfrac\lambda2\|d\|_p^2` divided by
:math:`C_{\mathrm{paper}} = 1/C`.

**Not separable** (for :math:`p \ne 2`): :math:`\|x\|_s^{4/3}` is not a sum
over blocks, so the instance reports ``separable = False`` (and
``smooth_conjugate = False``): engines that apply ``kernels`` block by block
decline it.  ``kernels`` give the regularizer on a bank of *one* kernel, where
it is exact and where every identity of the conformance kit holds:

.. math::
    \tilde g_C(x) = C\,\tfrac34(2\lambda)^{1/3} x^{4/3}
    \quad (= \text{block } \ell_{4/3} \text{ with } C' = C(2\lambda)^{1/3}),
    \qquad d(x) = \Big(\frac{x^2}{2\lambda}\Big)^{1/3},
    \qquad h(d) = \lambda d^2 .

For :math:`p = 2` the block exponent is :math:`s = 4/3` and
:math:`\|x\|_{4/3}^{4/3} = \sum_m x_m^{4/3}`: the regularizer *is* separable, equal
to the block :math:`\ell_{4/3}` regularizer ``lq(q=4/3)`` at
:math:`C' = C(2\lambda)^{1/3}`, and then reports ``separable = True`` (and a
smooth conjugate), so every engine may solve it.

The whole problem is solved by the ``smo_mkl`` engine of this distribution.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from mklkit.components.base import Param, Regularizer, WeightNorm, kernel
from mklkit.components.elasticnet import Uniform
from mklkit.components.lq import Lq

__all__ = ["PnormSquared", "L1Squared"]

# The one-kernel restriction is the block l_{4/3} regularizer with C' = C (2 lam)^(1/3).
_lq_value = Lq.value
_lq_prox = Lq.prox
_lq_prox_deriv = Lq.prox_deriv
_lq_conj = Lq.conj
_lq_conj_grad = Lq.conj_grad
_lq_conj_hess = Lq.conj_hess
_lq_env = Lq.env
_Q = np.array([4.0 / 3.0])


@njit(cache=True)
def _ceff(C, params):
    return C * (2.0 * params[1]) ** (1.0 / 3.0)


class PnormSquared(Regularizer):
    r"""Squared p-norm of the kernel weights, :math:`\tfrac\lambda2\|d\|_p^2` (SMO-MKL eq. 1).

    Parameters
    ----------
    p : float
        Exponent of the norm on the kernel weights, > 1 (towards 1: sparser
        weights; larger: more uniform).
    lam : float
        Weight :math:`\lambda > 0` of the penalty.

    Notes
    -----
    Non-separable for p != 2 (see the module docstring): ``kernels`` describe
    the regularizer on a single kernel; the ``smo_mkl`` engine solves the whole
    problem through its dual (SMO-MKL eq. 9),
    :math:`\max_\alpha 1^\top\alpha - \frac1{8\lambda}\|(\alpha^\top H_k\alpha)_k\|_q^2`
    with :math:`q = p/(p-1)` and :math:`0 \le \alpha \le 1/C`.
    """

    name: ClassVar[str] = "pnorm_squared"
    description: ClassVar[str] = "squared p-norm of the kernel weights, lam/2 ||d||_p^2 (SMO-MKL; non-separable)"
    params: ClassVar[tuple[Param, ...]] = (
        Param("p", 2.0, "exponent of the norm on the kernel weights", low=1.0, low_open=True),
        Param("lam", 1.0, "weight lambda of the squared norm", low=0.0, low_open=True),
    )

    @kernel
    def value(x, C, params):
        return _lq_value(x, _ceff(C, params), _Q)

    @kernel
    def prox(v, C, params):
        return _lq_prox(v, _ceff(C, params), _Q)

    @kernel
    def prox_deriv(v, C, params):
        return _lq_prox_deriv(v, _ceff(C, params), _Q)

    @kernel
    def conj(y, C, params):
        return _lq_conj(y, _ceff(C, params), _Q)

    @kernel
    def conj_grad(y, C, params):
        return _lq_conj_grad(y, _ceff(C, params), _Q)

    @kernel
    def conj_hess(y, C, params):
        return _lq_conj_hess(y, _ceff(C, params), _Q)

    @kernel
    def env(y, C, params):
        return _lq_env(y, _ceff(C, params), _Q)

    @kernel
    def weight(x, params):
        # d = 1 / (2 g'(x^2)) = (x^2 / (2 lam))^(1/3) on a bank of one kernel
        lam = params[1]
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = (x[i] * x[i] / (2.0 * lam)) ** (1.0 / 3.0) if x[i] > 0.0 else 0.0
        return out

    @kernel
    def penalty(d, params):
        # h(d) = lam d^2: twice (lam/2) ||d||_p^2 on a bank of one kernel
        lam = params[1]
        out = np.empty(d.shape[0])
        for i in range(d.shape[0]):
            out[i] = lam * d[i] * d[i] if d[i] >= 0.0 else np.inf
        return out

    @property
    def separable(self) -> bool:  # type: ignore[override]
        r"""True only for p = 2, where :math:`\|x\|_{4/3}^{4/3}` is a sum over blocks."""
        return self.p == 2.0

    @property
    def weight_norm(self) -> WeightNorm:  # type: ignore[override]
        r"""The squared p-norm penalty :math:`\tfrac\lambda2\|d\|_p^2` of the kernel weights."""
        return WeightNorm(float(self.p), float(self.lam))

    @property
    def q(self) -> float:
        """Dual exponent :math:`q = p/(p-1)` of SMO-MKL eq. (9)."""
        return self.p / (self.p - 1.0)

    @property
    def block_exponent(self) -> float:
        r"""Exponent :math:`s = 2p/(p+1)` of the block norm in :math:`\|x\|_s^{4/3}`."""
        return self.weight_norm.block_exponent

    @property
    def smooth_conjugate(self) -> bool:
        """False for p != 2 (the blocks are coupled: no separable conjugate); True for p = 2."""
        return self.separable

    @property
    def sparse(self) -> bool:
        """False: every kernel keeps a positive weight for p > 1."""
        return False

    def weights(self, norms: np.ndarray) -> np.ndarray:
        r"""The minimizing kernel weights :math:`d_m \propto x_m^{2/(p+1)}` for block norms ``norms``.

        :math:`d_m = \tau\,x_m^{2/(p+1)}/\|x^{2/(p+1)}\|_p` with
        :math:`\tau = (\|x\|_s^2/(2\lambda))^{1/3}` (not normalised).
        """
        x = np.asarray(norms, dtype=np.float64)
        top = float(np.max(x)) if x.size else 0.0
        if top <= 0.0:
            return np.zeros_like(x)
        s = self.block_exponent
        ns = top * float(np.sum((x / top) ** s)) ** (1.0 / s)
        tau = (ns * ns / (2.0 * self.lam)) ** (1.0 / 3.0)
        u = (x / top) ** (2.0 / (self.p + 1.0))
        return tau * u / float(np.sum(u**self.p)) ** (1.0 / self.p)


class L1Squared(Regularizer):
    r"""Squared block 1-norm :math:`\tfrac12\big(\sum_m\|f_m\|\big)^2` (the SKM's problem (P)).

    Bach, Lanckriet & Jordan (2004), problem (P) with all :math:`d_j = 1`;
    the objective in mklkit's convention is

    .. math::
        \sum_i \ell\big(y_i, \textstyle\sum_m f_m(x_i) + b\big)
            + \frac C2\Big(\sum_m \|f_m\|\Big)^2 ,

    which is the paper's (P) divided by :math:`C_{\mathrm{paper}} = 1/C`.
    Weighted block norms :math:`\sum_j d_j\|f_j\|_{K_j}` are the same problem on
    the bank :math:`K_j/d_j^2`; with :math:`d_j = \sqrt{\operatorname{tr}K_j/c}`
    that is :math:`cK_j/\operatorname{tr}K_j` (see
    :func:`mklkit_smo.lanckriet_problem`), so a unit-trace bank
    (``normalize: trace``) with this regularizer is Lanckriet et al.'s
    problem (L) with :math:`c = 1`.

    It equals ``squared_l1`` of SimpleMKL (SpicyMKL eq. 5): the block 1-norm
    problem at :math:`C'` solves it at :math:`C = C'/\sum_m\|f^*_m\|` (eq. 6).

    **Not separable**: the square couples the blocks, so ``separable`` is
    False (``smooth_conjugate`` False) and engines that apply ``kernels``
    block by block decline it.  On a bank of one kernel it is
    :math:`\tfrac C2x^2`, the ``uniform`` regularizer, and ``kernels`` are
    those (kernel weight 1, :math:`h = I_{[0,1]}`), so the conformance kit
    checks the one-kernel form; ``sparse`` is False for the same reason
    (:math:`\tilde g_C'(0) = 0` on one kernel), although on several kernels the
    solution has exactly zero blocks ("support kernels").

    The whole problem is solved by the ``skm_smo`` engine of this distribution.
    """

    name: ClassVar[str] = "l1_squared"
    description: ClassVar[str] = "squared block 1-norm 1/2 (sum_m ||f_m||)^2 (support kernel machine; non-separable)"
    params: ClassVar[tuple[Param, ...]] = ()
    # on one kernel: the kernels of the uniform regularizer
    value, prox, prox_deriv, conj, conj_grad, conj_hess, env, weight, penalty = (
        staticmethod(getattr(Uniform, k)) for k in Regularizer.REQUIRED_KERNELS
    )
    separable: ClassVar[bool] = False
    #: the p = 1 constraint form: :math:`\min_{\|d\|_1\le1}\tfrac12\sum_m\|f_m\|^2/d_m`
    weight_norm: ClassVar[WeightNorm] = WeightNorm(1.0)

    @property
    def smooth_conjugate(self) -> bool:
        """False: the blocks are coupled, there is no separable conjugate."""
        return False

    @property
    def sparse(self) -> bool:
        """False on one kernel (the conformance-kit meaning); see the class notes."""
        return False
