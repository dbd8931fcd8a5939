r"""Built-in block-norm regularizers: l1, elasticnet, lq, uniform, kl.

All are of the form :math:`C\sum_m g(\|\alpha_m\|_{K_m}^2)` (SpicyMKL eq. 42)
with :math:`\tilde g_C(x) = C g(x^2)`; Table 3 gives the kernel-weight
penalties.  See ``docs/contracts.md`` and ``docs/kl_regularizer.md``.
"""
from __future__ import annotations

from .._jit import regularizers as _k
from .base import BregmanJit, Regularizer, RegularizerJit
from .params import Param

__all__ = ["L1", "ElasticNet", "Lq", "Uniform", "KL", "BUILTIN_REGULARIZERS"]


class L1(Regularizer):
    r"""Block 1-norm :math:`C\sum_m\|\alpha_m\|_{K_m}`, :math:`g(t) = \sqrt t` (eq. 4).

    prox: block soft-threshold :math:`(v - C)_+` (eq. 13); conjugate: the
    indicator of :math:`[0, C]` (eq. 21); envelope :math:`(y - C)_+^2/2`;
    kernel weight :math:`d_m = \|\alpha_m\|_{K_m}`, :math:`h(d) = d`.
    """

    name = "l1"
    description = "block 1-norm (sparse MKL, SpicyMKL eq. 4)"
    jit = RegularizerJit(
        value=_k.l1_value,
        prox=_k.l1_prox,
        prox_deriv=_k.l1_prox_deriv,
        conj=_k.l1_conj,
        conj_grad=_k.l1_conj_grad,
        conj_hess=_k.l1_conj_grad,  # 0 on the domain, inf outside
        env=_k.l1_env,
        weight=_k.l1_weight,
        penalty=_k.l1_penalty,
    )

    def conj_radius(self, C: float) -> float:
        return float(C)


class ElasticNet(Regularizer):
    r"""Elastic net :math:`C\sum_m((1-\lambda)\|\alpha_m\|_{K_m} + \tfrac\lambda2\|\alpha_m\|_{K_m}^2)` (eq. 43).

    prox :math:`(v - C(1-\lambda))_+/(1 + C\lambda)`; conjugate (46)
    :math:`(y - C(1-\lambda))_+^2/(2C\lambda)`, smooth for :math:`\lambda > 0`
    (one-step method, §4.3.1); kernel weight
    :math:`d = x/(1 - \lambda + \lambda x)`; :math:`h(d) = (1-\lambda)^2 d/(1 - \lambda d)`.
    ``lam = 0`` is the block 1-norm, ``lam = 1`` the uniform combination.
    """

    name = "elasticnet"
    description = "elastic-net MKL: (1-lam)*block 1-norm + lam/2*squared block 2-norm"
    params = (
        Param("lam", 0.5, "weight of the squared (smooth) part", low=0.0, high=1.0),
    )
    jit = RegularizerJit(
        value=_k.en_value,
        prox=_k.en_prox,
        prox_deriv=_k.en_prox_deriv,
        conj=_k.en_conj,
        conj_grad=_k.en_conj_grad,
        conj_hess=_k.en_conj_hess,
        env=_k.en_env,
        weight=_k.en_weight,
        penalty=_k.en_penalty,
    )

    @property
    def smooth_conjugate(self) -> bool:
        return self.lam > 0.0

    @property
    def sparse(self) -> bool:
        return self.lam < 1.0

    def conj_radius(self, C: float) -> float:
        return float(C) if self.lam == 0.0 else float("inf")


class Lq(Regularizer):
    r"""Block ℓq-norm :math:`\frac Cq\sum_m\|\alpha_m\|_{K_m}^q`, :math:`g(t) = t^{q/2}/q` (§4.3.2).

    Conjugate :math:`C^{1-r}y^r/r` with :math:`r = q/(q-1)`: smooth, so the
    one-step method applies.  For :math:`q \le 2`, ``g`` is concave and the
    kernel weight is :math:`d = \|\alpha_m\|^{2-q}` with
    :math:`h(d) = d^p/p`, :math:`p = q/(2-q)` (ℓp-norm MKL; Table 3 prints
    :math:`p = q/(q-2)`, whose sign is off).  For :math:`q > 2` there is no
    Tikhonov form; weights are reported as :math:`\|\alpha_m\|^{2-q}` on the
    non-zero blocks.
    """

    name = "lq"
    description = "block lq-norm (non-sparse lp-norm MKL), q > 1"
    params = (Param("q", 2.0, "exponent of the block norm", low=1.0, low_open=True),)
    jit = RegularizerJit(
        value=_k.lq_value,
        prox=_k.lq_prox,
        prox_deriv=_k.lq_prox_deriv,
        conj=_k.lq_conj,
        conj_grad=_k.lq_conj_grad,
        conj_hess=_k.lq_conj_hess,
        env=_k.lq_env,
        weight=_k.lq_weight,
        penalty=_k.lq_penalty,
    )

    @property
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False

    @property
    def tikhonov_form(self) -> bool:
        return self.q <= 2.0


class Uniform(Regularizer):
    r"""Uniform combination :math:`\frac C2\sum_m\|\alpha_m\|_{K_m}^2`: every :math:`d_m = 1`.

    Equivalent to an SVM-type problem on :math:`\sum_m K_m`;
    :math:`h = I_{[0,1]}` (Table 3).
    """

    name = "uniform"
    description = "uniform kernel weights (squared block 2-norm, all d_m = 1)"
    jit = RegularizerJit(
        value=_k.uni_value,
        prox=_k.uni_prox,
        prox_deriv=_k.uni_prox_deriv,
        conj=_k.uni_conj,
        conj_grad=_k.uni_conj_grad,
        conj_hess=_k.uni_conj_hess,
        env=_k.uni_env,
        weight=_k.uni_weight,
        penalty=_k.uni_penalty,
    )

    @property
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False


class KL(Regularizer):
    r"""Generalized KL divergence on kernel weights (SMO-MKL §5.2, eq. 22).

    Tikhonov penalty :math:`h(d) = d\log(d/d_0) - d + d_0`; through
    :math:`g(t) = \inf_{d>0} t/(2d) + h(d)/2` (SpicyMKL §4.1) this gives
    :math:`d(t) = d_0\exp(W(2t/d_0^2)/2)`,
    :math:`g(t) = t/d - (d - d_0)/2` and the smooth conjugate
    :math:`\tilde g_C^*(y) = \tfrac{C d_0}{2}(e^{y^2/C^2} - 1)`.
    Derivation: ``docs/kl_regularizer.md``.
    """

    name = "kl"
    description = "generalized KL divergence of the kernel weights from d0 (non-sparse)"
    params = (
        Param("d0", 1.0, "reference kernel weight", low=0.0, low_open=True),
    )
    jit = RegularizerJit(
        value=_k.kl_value,
        prox=_k.kl_prox,
        prox_deriv=_k.kl_prox_deriv,
        conj=_k.kl_conj,
        conj_grad=_k.kl_conj_grad,
        conj_hess=_k.kl_conj_hess,
        env=_k.kl_env,
        weight=_k.kl_weight,
        penalty=_k.kl_penalty,
    )
    bregman = BregmanJit(F=_k.kl_F, f=_k.kl_f, finv=_k.kl_finv, d0=_k.kl_d0)

    @property
    def smooth_conjugate(self) -> bool:
        return True

    @property
    def sparse(self) -> bool:
        return False


BUILTIN_REGULARIZERS = (L1, ElasticNet, Lq, Uniform, KL)
