"""Component contracts, which every engine is generic over and a plugin implements as the
built-ins do: :class:`Component` and :func:`kernel`, :class:`Loss`, :class:`Regularizer` and
:class:`WeightNorm` (``docs/contracts.md``; equations are SpicyMKL's)."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, ClassVar, NamedTuple, Sequence

import numpy as np
from numba import njit

from .params import Param, ParamError, validate_params  # noqa: F401 - ParamError: importable with the contracts

CLASSIFICATION = "classification"
REGRESSION = "regression"
INF = np.inf  # a global of the kernels, frozen into them when they compile


class LabelError(ValueError):
    """Labels that a loss cannot be trained on."""


def kernel(fn: Callable) -> staticmethod:
    """A compiled method of a component, ``staticmethod(njit(cache=True)(fn))``: no ``self``,
    the numeric parameters arrive as the vector ``params`` (``param_vector``)."""
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
        raise AttributeError(
            f"'{self._name}' of {type(obj).__name__} is derived from its @kernel methods and cannot be set"
        )


def _grouped(record: type, names: Sequence[str] | None = None, complete: bool = False) -> _Derived:
    """The class's kernels ``names`` (``record``'s fields by default) as a read-only ``record``; with
    ``complete``, None when one is missing."""

    def build(cls: type) -> Any:
        fns = [getattr(cls, n, None) for n in names or record._fields]
        return None if complete and any(f is None for f in fns) else record(*fns)

    missing = "; None when one is missing" if complete else ""
    build.__doc__ = f"The kernels as a :class:`{record.__name__}` (read-only{missing})."
    return _Derived(build)


class Component:
    """Base of every pluggable component: a subclass sets ``kind``, ``name``, ``description``
    and ``params``; instances hold the validated parameter values as attributes."""

    kind: ClassVar[str] = ""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    #: The attributes derived from the kernel methods, which a subclass never assigns.
    _GROUPS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # the declared parameters as the class's call signature (help(), IDEs, the API reference); a malformed
        # declaration (a name twice, not an identifier) keeps the generic one: the registry refuses it, saying why
        try:
            cls.__signature__ = inspect.Signature(
                [
                    inspect.Parameter(
                        p.name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=inspect.Parameter.empty if p.required else p.default,
                    )
                    for p in cls.params
                ]
            )
        except (ValueError, TypeError, AttributeError):
            pass
        given = [n for n in cls._GROUPS if n in cls.__dict__ and not isinstance(cls.__dict__[n], _Derived)]
        if given:
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} assigns {', '.join(map(repr, given))}: "
                "a component writes its numerics as @kernel methods "
                "(mklkit.components.base.kernel), from which "
                f"{' and '.join(map(repr, given))} {'is' if len(given) == 1 else 'are'} derived"
            )

    def __init__(self, **kwargs: Any) -> None:
        values = validate_params(self.params, kwargs, owner=self.name or type(self).__name__)
        self._param_values = values
        for key, val in values.items():
            setattr(self, key, val)
        self._check()

    def _check(self) -> None:
        """Cross-parameter checks; raise :class:`ParamError`."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Validated parameters in declaration order (scikit-learn's ``get_params``)."""
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
        args = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in params.items())
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._param_values.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._param_values == other._param_values  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), tuple(self._param_values.items())))

    def __reduce__(self):
        return (functools.partial(type(self), **self._param_values), ())


def as_array(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """C-contiguous float64 array, without a copy where possible (cached signatures match)."""
    return np.ascontiguousarray(x, dtype=np.float64)


class LossJit(NamedTuple):
    r"""The kernels of a loss, ``f(y, z_or_u, params)`` (``conj_lower``, ``conj_upper``:
    ``f(y, params)``) of (N,) float64 arrays: :math:`\ell`, its derivatives in ``z``, the
    conjugate :math:`\ell^*(y, u)` (``inf`` outside its domain), its derivatives and domain."""

    value: Any
    deriv: Any
    deriv2: Any
    conj: Any
    conj_grad: Any
    conj_hess: Any
    conj_lower: Any
    conj_upper: Any


class ConstrainedConjugate(NamedTuple):
    r"""The constrained form of a non-smooth conjugate (SpicyMKL eq. 33),
    :math:`\ell^*(y, u) = \min_{\tilde u} \{\ell_0^*(y, (u, \tilde u)) : h_j \le 0\}`: kernels
    ``f(y, u, ut, params)`` of :math:`\ell_0^*`, the :math:`h_j` and their derivatives."""

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
    r"""A per-sample loss :math:`\ell(y, z)`: the kernels of :class:`LossJit` as ``@kernel``
    methods (``deriv2``, ``conj_hess`` default to 0) and, unless ``smooth_conjugate``, those of
    :class:`ConstrainedConjugate`, grouped read-only as ``jit`` and ``constrained``."""

    kind: ClassVar[str] = "loss"
    task: ClassVar[str] = CLASSIFICATION
    smooth_conjugate: ClassVar[bool] = True
    n_aux: ClassVar[int] = 0
    n_cons: ClassVar[int] = 0
    smooth_primal: ClassVar[bool] = True
    linear_conjugate: ClassVar[bool] = False

    #: The kernels of ``jit``, those without a default, and those of ``constrained``.
    KERNELS: ClassVar[tuple[str, ...]] = LossJit._fields
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = ("value", "deriv", "conj", "conj_grad", "conj_lower", "conj_upper")
    CONSTRAINED_KERNELS: ClassVar[tuple[str, ...]] = ConstrainedConjugate._fields

    deriv2 = staticmethod(_zeros)
    conj_hess = staticmethod(_zeros)

    _GROUPS = ("jit", "constrained")
    jit = _grouped(LossJit)
    constrained = _grouped(ConstrainedConjugate, complete=True)

    def deriv_lipschitz(self) -> float:
        r"""A bound on :math:`\sup_z |\partial_z^2 \ell(y, z)|` (``inf`` if none)."""
        return float("inf")

    def cvxpy_expr(self, y: np.ndarray, z: Any, w: np.ndarray | None = None) -> Any:
        r""":math:`\sum_i w_i\,\ell(y_i, z_i)` as a cvxpy expression (the conic reference), or ``NotImplemented``."""
        return NotImplemented

    def linear_pieces(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        r"""``lower, upper, slope_lower, slope_upper`` (N,) of a ``linear_conjugate`` loss: the
        domain ends :math:`l \le 0 \le u` and the slopes :math:`\ell^*(y, l)/l`,
        :math:`\ell^*(y, u)/u` (0 for an empty piece)."""
        y = as_array(y)
        k, p = self.jit, self.param_vector
        lo = np.asarray(k.conj_lower(y, p), dtype=np.float64)
        hi = np.asarray(k.conj_upper(y, p), dtype=np.float64)

        def slope(end: np.ndarray, piece: np.ndarray) -> np.ndarray:
            value = np.asarray(k.conj(y, as_array(np.where(piece, end, 0.0)), p))
            return np.where(piece, value / np.where(piece, end, 1.0), 0.0)

        with np.errstate(divide="ignore", invalid="ignore"):
            return lo, hi, slope(lo, lo < 0.0), slope(hi, hi > 0.0)

    def validate_labels(self, y: np.ndarray) -> np.ndarray:
        """The labels as a float64 vector; :class:`LabelError` unless finite (and exactly the
        two values -1 and +1 for a classification loss)."""
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


class RegularizerJit(NamedTuple):
    r"""The kernels of a regularizer :math:`\tilde g_C(x) = C\,g(x^2)` of the block norms
    (SpicyMKL §4), ``f(x, C, params)`` (``weight``, ``penalty``: ``f(x, params)``): value, prox,
    conjugate (eq. 45), Moreau envelope of the conjugate, kernel weight and Tikhonov penalty."""

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
    r"""The Bregman form :math:`r_F(d) = F(d) - F(d_0) - (d - d_0)^\top f(d_0)` of a kernel-weight
    penalty (SMO-MKL §5.2): the kernels ``bregman_F``, ``bregman_f`` (:math:`F'`),
    ``bregman_finv`` and ``bregman_d0``."""

    F: Any
    f: Any
    finv: Any
    d0: Any


class WeightNorm(NamedTuple):
    r"""A regularizer :math:`C\,R` given by a p-norm of the kernel weights: with
    :math:`s = 2p/(p+1)`, the squared p-norm penalty :math:`R = \tfrac34(2\lambda)^{1/3}\|x\|_s^{4/3}`
    (SMO-MKL eq. 1), or with ``lam`` None the constraint :math:`R = \tfrac12\|x\|_s^2`
    (``p = 1``: the support kernel machine, Bach et al. 2004)."""

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
        r"""The conjugate of :math:`C\,R` at the dual block norms (:math:`u = \|y\|_{s^*}`):
        :math:`u^2/(2C)`, or :math:`27u^4/(256a^3)` with :math:`a = \tfrac34 C(2\lambda)^{1/3}`."""
        s = self.block_exponent
        dual = math.inf if s == 1.0 else s / (s - 1.0)
        u = self._norm(dual_norms, dual)
        if self.lam is None:
            return u * u / (2.0 * float(C))
        a = 0.75 * float(C) * (2.0 * float(self.lam)) ** (1.0 / 3.0)
        return 27.0 * u**4 / (256.0 * a**3)

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float, betas: Any = None) -> Any:
        r""":math:`C\,R` as a cvxpy expression of the block norms; ``NotImplemented`` for the
        constraint form with p > 1."""
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


class Regularizer(Component):
    r"""A block-norm regularizer :math:`C \sum_m g(\|\alpha_m\|_{K_m}^2)`: the kernels of
    :class:`RegularizerJit` as ``@kernel`` methods (``env_grad``, ``env_hess`` default to
    ``prox``, ``prox_deriv``) and optionally those of :class:`BregmanJit`, grouped read-only
    as ``jit`` and ``bregman``."""

    kind: ClassVar[str] = "regularizer"
    separable: ClassVar[bool] = True
    weight_norm: ClassVar[WeightNorm | None] = None
    #: Whether :math:`\tilde g_C^*` is twice differentiable on [0, ∞) (SpicyMKL §4.3); these three
    #: flags are properties in a class where they depend on the parameters.
    smooth_conjugate: ClassVar[bool] = False
    #: Whether ``g`` is concave, so that ``weight`` and ``penalty`` exist (SpicyMKL §4.1).
    tikhonov_form: ClassVar[bool] = True
    #: Whether :math:`\tilde g_C'(0) > 0`, so that blocks can be exactly zero.
    sparse: ClassVar[bool] = True

    #: The kernels of ``jit``, those without a default, and those of ``bregman``.
    KERNELS: ClassVar[tuple[str, ...]] = RegularizerJit._fields
    REQUIRED_KERNELS: ClassVar[tuple[str, ...]] = tuple(
        f for f in RegularizerJit._fields if f not in ("env_grad", "env_hess")
    )
    BREGMAN_KERNELS: ClassVar[tuple[str, ...]] = ("bregman_F", "bregman_f", "bregman_finv", "bregman_d0")

    # the derivatives of the envelope, unless a class writes them: prox and prox_deriv (Moreau)
    env_grad = _Derived(lambda cls: getattr(cls, "prox", None))
    env_hess = _Derived(lambda cls: getattr(cls, "prox_deriv", None))

    _GROUPS = ("jit", "bregman")
    jit = _grouped(RegularizerJit)
    bregman = _grouped(BregmanJit, BREGMAN_KERNELS, complete=True)

    def cvxpy_expr(self, norms: Sequence[Any], squares: Sequence[Any], C: float, betas: Any = None) -> Any:
        r""":math:`\sum_m \tilde g_C(x_m)` as a cvxpy expression of the block norms, their squares and
        the block variables (the conic reference): that of ``weight_norm``, else ``NotImplemented``."""
        wn = self.weight_norm
        return NotImplemented if wn is None else wn.cvxpy_expr(norms, squares, C, betas)

    def conj_radius(self, C: float) -> float:
        r"""Radius of the domain of :math:`\tilde g_C^*` (``inf`` if unbounded; SpicyMKL §6.1)."""
        return float("inf")

    def zero_threshold(self, C: float) -> float:
        r""":math:`t_C = \tilde g_C'(0^+)`, the largest dual block norm at which a block stays zero
        (SpicyMKL eq. 13; it gives ``C_max``): by bisection of ``jit.prox`` at ``C = 1``, scaled."""
        t1 = self.__dict__.get("_zero_threshold_1")
        if t1 is None:
            t1 = _prox_threshold(self.jit.prox, self.param_vector) if self.sparse else 0.0
            self.__dict__["_zero_threshold_1"] = t1
        return float(C) * t1


def _prox_threshold(prox: Any, params: np.ndarray) -> float:
    r""":math:`\sup\{v \ge 0: \mathrm{prox}(v \mid \tilde g_1) = 0\}` within 4 ulps by bisection:
    0 when the prox is positive at :math:`10^{-12}`, ``inf`` when zero up to :math:`10^{300}`."""

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
