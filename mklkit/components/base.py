r"""Component contracts: losses and regularizers.

Every engine of mklkit is generic over these two contracts; a third-party
plugin implements them exactly as the built-ins do.  The mathematics is in
``docs/contracts.md``; equation numbers refer to Suzuki & Tomioka (2011),
"SpicyMKL: a fast algorithm for Multiple Kernel Learning with thousands of
kernels" (``shared/papers/suzuki2011_spicymkl.txt``).

Design (see ``shared/STYLE.md``):

* A component is a plain, picklable Python class.  ``__init__`` validates the
  parameters declared in ``params`` and stores them; nothing else.
* Its numerics are ``@kernel`` methods (:func:`kernel`: a static method
  compiled with ``njit(cache=True)``) of float64 arrays plus a float64
  parameter vector (``param_vector``).  Engines call them from Python on
  whole vectors (``type(c).deriv(y, z, c.param_vector)``) or pass them to
  jitted loops; the read-only attributes ``jit``, ``constrained`` and
  ``bregman`` group them as a :class:`LossJit`, :class:`ConstrainedConjugate`,
  :class:`RegularizerJit` or :class:`BregmanJit`.  No jitclass is involved, so
  the compiled code is cached on disk.

Sign convention for losses.  ``conj`` is the ordinary convex conjugate in the
second argument, :math:`\ell^*(y, u) = \sup_z (uz - \ell(y, z))`.  The paper
writes the dual of (7) with :math:`\ell^*(y_i, -\rho_i)` (eq. 15): engines
evaluate the conjugate at :math:`u = -\rho`.
"""
from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, NamedTuple, Sequence

import numpy as np
from numba import njit

from .params import Param, ParamError, validate_params

__all__ = [
    "kernel",
    "Component",
    "Loss",
    "LossJit",
    "ConstrainedConjugate",
    "Regularizer",
    "RegularizerJit",
    "BregmanJit",
    "WeightNorm",
    "LabelError",
    "CLASSIFICATION",
    "REGRESSION",
]

CLASSIFICATION = "classification"
REGRESSION = "regression"


class LabelError(ValueError):
    """Labels that a loss cannot be trained on."""


def kernel(fn: Callable) -> staticmethod:
    """A compiled method of a component: ``staticmethod(njit(cache=True)(fn))``.

    A kernel has no ``self``: the parameters arrive as the vector ``params``
    (the component's ``param_vector``, numeric parameters in declaration
    order).  Kernels defined in a class body are cached on disk like
    module-level functions.
    """
    return staticmethod(njit(cache=True)(fn))


class _Derived:
    """A read-only attribute that groups the kernel methods of a component class."""

    def __init__(self, build: Callable[[type], Any]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        return self._build(type(obj) if cls is None else cls)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"'{self._name}' of {type(obj).__name__} is derived from its "
                             "@kernel methods and cannot be set")


def _refuse_declared_tuples(cls: type, names: Sequence[str]) -> None:
    given = [n for n in names if n in cls.__dict__]
    if given:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} assigns {', '.join(map(repr, given))}: "
                        "a component writes its numerics as @kernel methods "
                        "(mklkit.components.base.kernel), from which "
                        f"{' and '.join(map(repr, given))} {'is' if len(given) == 1 else 'are'} derived")


def _kernels(cls: type, names: Sequence[str]) -> list[Any]:
    return [getattr(cls, n, None) for n in names]


class Component:
    """Base of every pluggable component.

    Subclasses set the class attributes ``kind``, ``name``, ``description``
    and ``params``; instances hold validated parameter values as attributes
    of the same names.
    """

    kind: ClassVar[str] = ""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()

    def __init__(self, **kwargs: Any) -> None:
        values = validate_params(self.params, kwargs, owner=self.name or type(self).__name__)
        self._param_values = values
        for key, val in values.items():
            setattr(self, key, val)
        self._check()

    def _check(self) -> None:
        """Cross-parameter checks; raise :class:`ParamError`."""

    # -- parameters -----------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Validated parameters in declaration order (scikit-learn's ``get_params``).

        Parameter values are numbers, strings and flags, never estimators, so
        ``deep=True`` adds no nested ``<name>__<key>`` entries.  With this
        signature scikit-learn's ``clone`` copies a component given as an
        estimator parameter like any estimator: ``type(c)(**c.get_params(deep=False))``.
        """
        return dict(self._param_values)

    @property
    def param_vector(self) -> np.ndarray:
        """Numeric parameters as a C-contiguous float64 vector (declaration order)."""
        vals = [float(v) for v in self._param_values.values() if isinstance(v, (int, float))]
        return np.ascontiguousarray(vals, dtype=np.float64)

    def describe(self) -> str:
        """The name with the parameters, for messages: ``elasticnet(lam=0.5)``."""
        params = self.get_params()
        if not params:
            return self.name
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}"
                         for k, v in params.items())
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._param_values.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._param_values == other._param_values  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._param_values.items())))

    def __reduce__(self):
        return (_rebuild, (type(self), self._param_values))


def _rebuild(cls, values):
    return cls(**values)


# ---------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------
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
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = ("value", "deriv", "conj", "conj_grad",
                                                   "conj_lower", "conj_upper")
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
            s_lo = np.where(lo < 0.0, np.asarray(k.conj(y, as_array(np.minimum(lo, 0.0)), p))
                            / np.where(lo < 0.0, lo, 1.0), 0.0)
            s_hi = np.where(hi > 0.0, np.asarray(k.conj(y, as_array(np.maximum(hi, 0.0)), p))
                            / np.where(hi > 0.0, hi, 1.0), 0.0)
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
                    f"the {self.task} loss {self.name!r} needs both classes -1 and +1; "
                    f"got only {values[0]:g}"
                )
        return np.ascontiguousarray(yf)


# ---------------------------------------------------------------------------
# Regularizers
# ---------------------------------------------------------------------------
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
        return 27.0 * u ** 4 / (256.0 * a ** 3)

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float,
                   betas: Any = None) -> Any:
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
        f for f in RegularizerJit._fields if f not in ("env_grad", "env_hess"))
    #: The kernels of ``bregman``, in the order of :class:`BregmanJit`.
    BREGMAN_KERNELS: ClassVar[tuple[str, ...]] = ("bregman_F", "bregman_f", "bregman_finv",
                                                  "bregman_d0")
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

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float,
                   betas: Any = None) -> Any:
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


def as_array(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """C-contiguous float64 copy-free view where possible (cached signatures match)."""
    return np.ascontiguousarray(x, dtype=np.float64)


__all__ += ["Param", "ParamError", "as_array"]
