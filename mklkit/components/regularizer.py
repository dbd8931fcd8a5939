r"""The regularizer contract: :class:`Regularizer` with its kernels
(:class:`RegularizerJit`), the optional Bregman form (:class:`BregmanJit`) and
the p-norm forms of the kernel weights (:class:`WeightNorm`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, NamedTuple, Sequence

import numpy as np

from .component import Component, _Derived, _kernels, _refuse_declared_tuples

__all__ = ["Regularizer", "RegularizerJit", "BregmanJit", "WeightNorm"]


class RegularizerJit(NamedTuple):
    r"""Jitted numerics of a block-norm regularizer (SpicyMKL §4, eq. 42).

    The regularizer acts on the block norms :math:`x_m = \|\alpha_m\|_{K_m} \ge 0`
    through :math:`\tilde g_C(x) = C\,g(x^2)` with ``g`` concave and
    non-decreasing and :math:`\tilde g` convex.  All functions are vectorized:
    ``x``/``v``/``y`` are C-contiguous float64 arrays of non-negative numbers,
    ``C > 0`` a float, ``params`` the ``param_vector``.

    value(x, C, params)       : :math:`\tilde g_C(x)`
    prox(v, C, params)        : :math:`\mathrm{prox}(v|\tilde g_C) =
                                \mathrm{argmin}_{x\ge0} \tilde g_C(x) + (x-v)^2/2`
    prox_deriv(v, C, params)  : :math:`d\,\mathrm{prox}(v|\tilde g_C)/dv`
    conj(y, C, params)        : :math:`\tilde g_C^*(y) = \sup_{x\ge0} xy - \tilde g_C(x)`
                                (``inf`` outside its domain), eq. (45)
    conj_grad(y, C, params)   : :math:`d\tilde g_C^*/dy` (where smooth)
    conj_hess(y, C, params)   : :math:`d^2\tilde g_C^*/dy^2` (where smooth)
    env(y, C, params)         : Moreau envelope of the conjugate
                                :math:`\widehat{\tilde g_C^*}(y) = \min_{y'\ge0}
                                \tilde g_C^*(y') + (y'-y)^2/2` (§4.2)
    env_grad(y, C, params)    : its gradient
    env_hess(y, C, params)    : its second derivative
    weight(x, params)         : kernel weight :math:`d = 1/(2 g'(x^2))` (§4.1)
    penalty(d, params)        : :math:`h(d) = -2 g^*(1/(2d))` of the Tikhonov form
                                (44), Table 3 (``inf`` outside its domain)

    By the Moreau decomposition (eq. 23) the envelope of the conjugate has the
    gradient :math:`\mathrm{prox}(y|\tilde g_C)` and the second derivative
    ``prox_deriv``, so the kernels ``env_grad`` and ``env_hess`` default to
    ``prox`` and ``prox_deriv`` and engines use those.  A regularizer may still
    write them; the conformance kit then checks them against the derivation
    (``env_grad_prox``, ``env_hess_prox_deriv``).
    """

    value: Any
    prox: Any
    prox_deriv: Any
    conj: Any
    conj_grad: Any
    conj_hess: Any
    env: Any
    env_grad: Any
    env_hess: Any
    weight: Any
    penalty: Any


class BregmanJit(NamedTuple):
    r"""Bregman form of a kernel-weight regularizer (SMO-MKL §5.2).

    :math:`r_F(d) = F(d) - F(d_0) - (d - d_0)^\top f(d_0)` with a separable,
    strictly convex generator; all functions are elementwise on float64
    arrays.

    F(d, params)       : generator :math:`F` per coordinate
    f(d, params)       : :math:`f = F'`
    finv(theta, params): :math:`f^{-1}`
    d0(params)         : the reference point :math:`d_0` (a scalar)

    A regularizer writes them as the kernels ``bregman_F``, ``bregman_f``,
    ``bregman_finv`` and ``bregman_d0``.
    """

    F: Any
    f: Any
    finv: Any
    d0: Any


class WeightNorm(NamedTuple):
    r"""A regularizer given by a p-norm of the kernel weights (coupling the blocks).

    With block norms :math:`x_m = \|f_m\|` and :math:`s = 2p/(p+1)`:

    * ``lam`` given (the squared p-norm penalty, SMO-MKL eq. 1):

      .. math::
          R(f) = \min_{d\ge0}\ \frac12\sum_m\frac{x_m^2}{d_m} + \frac\lambda2\|d\|_p^2
               = \tfrac34(2\lambda)^{1/3}\,\|x\|_s^{4/3};

    * ``lam`` None (the p-norm constraint; ``p = 1`` is the squared block
      1-norm of the support kernel machine, Bach et al. 2004, problem (P)):

      .. math::
          R(f) = \min_{d\ge0,\ \|d\|_p\le1}\ \frac12\sum_m\frac{x_m^2}{d_m}
               = \tfrac12\,\|x\|_s^2 .

    The problem's regularizer term is :math:`C\,R(f)`.
    """

    p: float
    lam: float | None = None

    @property
    def block_exponent(self) -> float:
        """:math:`s = 2p/(p+1)`, the exponent of the norm of the block norms."""
        return 2.0 * float(self.p) / (float(self.p) + 1.0)

    def _norm(self, x: np.ndarray, s: float) -> float:
        x = np.asarray(x, dtype=np.float64)
        top = float(np.max(x)) if x.size else 0.0
        if top <= 0.0:
            return 0.0
        if math.isinf(s):
            return top
        if s == 1.0:
            return float(np.sum(x))
        return top * float(np.sum((x / top) ** s)) ** (1.0 / s)

    def value(self, norms: np.ndarray, C: float) -> float:
        r""":math:`C\,R` at the block norms ``norms`` (all kernels)."""
        n = self._norm(norms, self.block_exponent)
        if self.lam is None:
            return 0.5 * float(C) * n * n
        return float(C) * 0.75 * (2.0 * float(self.lam)) ** (1.0 / 3.0) * n ** (4.0 / 3.0)

    def conj(self, dual_norms: np.ndarray, C: float) -> float:
        r"""The conjugate of :math:`C\,R` at the dual block norms :math:`\|\rho\|_{K_m}`.

        :math:`C R = \varphi(\|x\|_s)`, so its conjugate is
        :math:`\varphi^*(\|y\|_{s^*})` with :math:`1/s + 1/s^* = 1`:
        :math:`u^2/(2C)` for the constraint, :math:`27u^4/(256a^3)` with
        :math:`a = \tfrac34 C(2\lambda)^{1/3}` for the penalty.
        """
        s = self.block_exponent
        dual = math.inf if s == 1.0 else s / (s - 1.0)
        u = self._norm(dual_norms, dual)
        if self.lam is None:
            return u * u / (2.0 * float(C))
        a = 0.75 * float(C) * (2.0 * float(self.lam)) ** (1.0 / 3.0)
        return 27.0 * u**4 / (256.0 * a**3)

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float, betas: Any = None) -> Any:
        r""":math:`C\,R` as a cvxpy expression of the block norms ``norms`` (the conic
        reference); ``NotImplemented`` for the constraint form with p > 1."""
        import cvxpy as cp

        p, lam = float(self.p), self.lam
        if lam is None:
            if p != 1.0:
                return NotImplemented
            return C / 2 * cp.square(cp.sum(cp.hstack(norms)))
        if p <= 1.0:
            return NotImplemented
        s = 2 * p / (p + 1)
        return C * 0.75 * (2 * lam) ** (1 / 3) * cp.power(cp.pnorm(cp.hstack(norms), s), 4 / 3)


_ENV_DEFAULTS = (("env_grad", "prox"), ("env_hess", "prox_deriv"))


class Regularizer(Component):
    r"""A separable block-norm regularizer :math:`C \sum_m g(\|\alpha_m\|_{K_m}^2)`.

    Kernels a regularizer writes (``@kernel`` methods)
    ---------------------------------------------------
    value, prox, prox_deriv, conj, conj_grad, conj_hess, env, weight, penalty
        The fields of :class:`RegularizerJit`, with their signatures;
        ``env_grad`` and ``env_hess`` default to ``prox`` and ``prox_deriv``.
    bregman_F, bregman_f, bregman_finv, bregman_d0
        Optional, all four or none: the fields of :class:`BregmanJit`.  When
        given, the Tikhonov penalty is this Bregman divergence,
        :math:`h(d) = r_F(d)`, so that
        :math:`g(t) = \min_{d>0} t/(2d) + r_F(d)/2`.

    Derived, read-only: ``jit`` (a :class:`RegularizerJit` of the kernels)
    and ``bregman`` (a :class:`BregmanJit`, or None).

    Class attributes a regularizer declares
    ---------------------------------------
    separable : bool
        True (the default) when the regularizer is
        :math:`C\sum_m g(\|\alpha_m\|_{K_m}^2)`.  False when it couples the
        blocks (e.g. a squared p-norm of the kernel weights): the kernels
        then describe it on a bank of one kernel only, and engines that rely
        on separability (``jit`` applied per block) must decline it in
        ``supports``.  A non-separable regularizer also reports
        ``smooth_conjugate = False``: it has no separable conjugate for the
        one-step method.
    weight_norm : :class:`WeightNorm` or None
        When given, the regularizer is that p-norm form of the kernel
        weights (over all blocks, ``separable`` or not); engines that solve
        its dual (SMO-MKL, the support kernel machine) read ``p`` and
        ``lam`` from it.  May be a property when it depends on the parameters.
    """

    kind: ClassVar[str] = "regularizer"
    separable: ClassVar[bool] = True
    weight_norm: ClassVar[WeightNorm | None] = None

    #: The kernels of ``jit`` and those without a default.
    KERNELS: ClassVar[tuple[str, ...]] = RegularizerJit._fields
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = tuple(
        f for f in RegularizerJit._fields if f not in ("env_grad", "env_hess")
    )
    #: The kernels of ``bregman``, in the order of :class:`BregmanJit`.
    BREGMAN_KERNELS: ClassVar[tuple[str, ...]] = ("bregman_F", "bregman_f", "bregman_finv", "bregman_d0")
    _defaulted: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _refuse_declared_tuples(cls, ("jit", "bregman"))
        defaulted = set()
        for derived, source in _ENV_DEFAULTS:
            if derived in cls.__dict__ or (hasattr(cls, derived) and derived not in cls._defaulted):
                continue  # written by this class or an ancestor
            fn = getattr(cls, source, None)
            setattr(cls, derived, None if fn is None else staticmethod(fn))
            defaulted.add(derived)
        cls._defaulted = frozenset(defaulted)

    @_Derived
    def jit(cls) -> RegularizerJit:
        """The kernels as a :class:`RegularizerJit` (read-only)."""
        return RegularizerJit(*_kernels(cls, RegularizerJit._fields))

    @_Derived
    def bregman(cls) -> BregmanJit | None:
        """The Bregman form as a :class:`BregmanJit`; None when the regularizer
        lacks any of its kernels (read-only)."""
        fns = _kernels(cls, cls.BREGMAN_KERNELS)
        return None if any(f is None for f in fns) else BregmanJit(*fns)

    @property
    def smooth_conjugate(self) -> bool:
        r"""True when :math:`\tilde g_C^*` is twice differentiable on [0, ∞)
        (selects the one-step method of SpicyMKL §4.3)."""
        return False

    @property
    def tikhonov_form(self) -> bool:
        r"""True when ``g`` is concave, so that the kernel-weight map and the
        penalty ``h`` of the Tikhonov form (44) exist (SpicyMKL §4.1).

        Block-ℓq with q > 2 has a convex ``g``: the optimization is still
        well posed, but there is no kernel-weight equivalent.
        """
        return True

    @property
    def sparse(self) -> bool:
        r"""True when :math:`\tilde g_C'(0) > 0`, so that blocks can be exactly zero."""
        return True

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float, betas: Any = None) -> Any:
        r""":math:`\sum_m \tilde g_C(x_m)` as a cvxpy expression of the block norms
        ``norms`` (``squares``: their squares, ``betas``: the block variables), for the
        conic reference (:mod:`mklkit.testing.conic`).  The default is the form of
        ``weight_norm`` when there is one, else ``NotImplemented``.  cvxpy is imported
        inside."""
        wn = self.weight_norm
        return NotImplemented if wn is None else wn.cvxpy_expr(norms, squares, C, betas)

    def conj_radius(self, C: float) -> float:
        r"""Radius of the domain of :math:`\tilde g_C^*` (``inf`` if unbounded).

        Used to project a dual point into the domain when computing the
        duality gap (SpicyMKL §6.1).
        """
        return float("inf")

    def zero_threshold(self, C: float) -> float:
        r"""The largest dual block norm at which a block stays exactly zero.

        .. math::
            t_C = \tilde g_C'(0^+) = \sup\{v \ge 0 : \mathrm{prox}(v \mid \tilde g_C) = 0\}

        (block soft-thresholding, SpicyMKL eq. 13: :math:`t_C = C` for the
        block 1-norm, :math:`C(1-\lambda)` for the elastic net, 0 for the
        non-sparse regularizers).  By the optimality condition of eq. (42),
        :math:`\alpha_m = 0` is optimal for kernel ``m`` exactly when
        :math:`\|\rho\|_{K_m} \le t_C` at the dual solution, which gives the
        smallest ``C`` at which every block is zero (``C_max``, see
        :func:`mklkit.engines.common.zero_solution`).

        Derived from ``jit.prox`` by bisection at ``C = 1`` (to a few
        ulps) and scaled, since :math:`\tilde g_C = C g(\cdot^2)` is linear in
        ``C``; a regularizer need not implement it.  A regularizer that is not
        :attr:`sparse` has :math:`t_C = 0` (its prox may round to 0 for tiny
        ``v`` without a threshold).
        """
        t1 = self.__dict__.get("_zero_threshold_1")
        if t1 is None:
            t1 = _prox_threshold(self.jit.prox, self.param_vector) if self.sparse else 0.0
            self.__dict__["_zero_threshold_1"] = t1
        return float(C) * t1


def _prox_threshold(prox: Any, params: np.ndarray) -> float:
    r""":math:`\sup\{v \ge 0: \mathrm{prox}(v \mid \tilde g_1) = 0\}` by bisection.

    Returns 0 when the prox is positive for every :math:`v > 0` (tested at
    :math:`10^{-12}`), ``inf`` when it is zero up to :math:`10^{300}`; otherwise
    the largest probed ``v`` with a zero prox, within 4 ulps of the threshold.
    """

    def zero(v: float) -> bool:
        out = prox(np.array([v]), 1.0, params)
        return not float(np.asarray(out)[0]) > 0.0

    if not zero(1e-12):
        return 0.0
    lo, hi = 1e-12, 1.0
    while zero(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            return float("inf")
    for _ in range(2000):
        if hi - lo <= 4.0 * np.finfo(np.float64).eps * hi:
            break
        mid = 0.5 * (lo + hi)
        if zero(mid):
            lo = mid
        else:
            hi = mid
    return lo
