"""The recommended representation, in mklkit terms: a component is one class whose
``@kernel`` methods are its compiled numerics (array functions of today's signatures,
``njit(cache=True)``), and ``compiled()`` is one typed record of their compiled
addresses plus the parameter vector, which every engine loop takes as one argument.

Only the part that differs from ``mklkit.components.base`` is here: ``Component``
(parameters, ``param_vector``, pickling) and ``Param`` are mklkit's own."""

from __future__ import annotations

from collections import namedtuple
from typing import Any, ClassVar

import numpy as np
from numba import njit, types

from mklkit.components.base import CLASSIFICATION, Component
from mklkit.components.params import Param  # noqa: F401  (re-exported for plugins)

from .a_current import FirstClass

__all__ = ["kernel", "Loss", "LossFns", "LOSS_FNS_T", "ConstrainedFns", "CONSTRAINED_FNS_T"]

_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_F3 = types.float64[:, :, ::1]
_F4 = types.float64[:, :, :, ::1]
LOSS_FN = types.FunctionType(_F1(_F1, _F1, _F1))  # f(y, z_or_u, params) -> (N,)
BOUND_FN = types.FunctionType(_F1(_F1, _F1))  # f(y, params) -> (N,)


def _cfn(out):
    return types.FunctionType(out(_F1, _F1, _F2, _F1))  # f(y, u, ut, params)


def kernel(fn):
    """A compiled method of a component: ``njit(cache=True)``, no ``self`` (parameters
    arrive as the vector ``params``, in declaration order)."""
    f = staticmethod(njit(cache=True)(fn))
    f.__func__._mklkit_kernel = True
    return f


#: The compiled object of a loss: one record, one argument of every loop.
LossFns = namedtuple(
    "LossFns", ["value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess", "conj_lower", "conj_upper", "params"]
)
LOSS_FNS_T = types.NamedTuple([LOSS_FN] * 6 + [BOUND_FN] * 2 + [_F1], LossFns)
#: Its constrained representation (SpicyMKL eq. 33), for losses that are not
#: ``smooth_conjugate``.
ConstrainedFns = namedtuple("ConstrainedFns", ["l0", "l0_grad", "l0_hess", "cons", "cons_grad", "cons_hess", "params"])
CONSTRAINED_FNS_T = types.NamedTuple(
    [_cfn(_F1), _cfn(_F2), _cfn(_F3), _cfn(_F2), _cfn(_F3), _cfn(_F4), _F1], ConstrainedFns
)


@njit(cache=True)
def _zeros(y, z, params):  # pragma: no cover - jitted
    return np.zeros(y.shape[0])


class Loss(Component):
    """A loss: parameters as today; numerics as ``@kernel`` methods.

    Required kernels: ``value``, ``deriv``, ``conj``, ``conj_grad``, ``conj_lower``,
    ``conj_upper``; ``deriv2`` and ``conj_hess`` default to 0 (where undefined), and a
    loss that is not ``smooth_conjugate`` adds ``l0`` ... ``cons_hess``."""

    kind: ClassVar[str] = "loss"
    task: ClassVar[str] = CLASSIFICATION
    smooth_conjugate: ClassVar[bool] = True
    smooth_primal: ClassVar[bool] = True
    linear_conjugate: ClassVar[bool] = False
    n_aux: ClassVar[int] = 0
    n_cons: ClassVar[int] = 0

    deriv2 = staticmethod(_zeros)
    conj_hess = staticmethod(_zeros)

    _LOSS = ("value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess")
    _BOUNDS = ("conj_lower", "conj_upper")
    _CONS = ("l0", "l0_grad", "l0_hess", "cons", "cons_grad", "cons_hess")

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._fns = None  # the compiled addresses, made once per class

    @classmethod
    def _addresses(cls):
        if cls.__dict__.get("_fns") is None:
            fns = [FirstClass(getattr(cls, k), LOSS_FN) for k in cls._LOSS]
            fns += [FirstClass(getattr(cls, k), BOUND_FN) for k in cls._BOUNDS]
            cons = None
            if not cls.smooth_conjugate:
                ts = CONSTRAINED_FNS_T.types
                cons = [FirstClass(getattr(cls, k), t) for k, t in zip(cls._CONS, ts)]
            cls._fns = (fns, cons)
        return cls._fns

    def compiled(self) -> LossFns:
        """The loss as one typed record (``LOSS_FNS_T``) for the engines' loops."""
        fns, _ = self._addresses()
        return LossFns(*fns, self.param_vector)

    def constrained_compiled(self) -> ConstrainedFns | None:
        _, cons = self._addresses()
        return None if cons is None else ConstrainedFns(*cons, self.param_vector)

    def deriv_lipschitz(self) -> float:
        return float("inf")

    def cvxpy_expr(self, y: np.ndarray, z: Any) -> Any:
        r""":math:`\sum_i \ell(y_i, z_i)` as a cvxpy expression of the predictions ``z``
        (the conic reference); ``NotImplemented`` when there is none."""
        return NotImplemented


@njit(types.float64(LOSS_FNS_T, _F1, _F1), cache=True)
def sum_value(loss, y, z):  # pragma: no cover - jitted, compiled once for every loss
    """A loop that takes a loss as one argument (compiled once, for every loss)."""
    return np.sum(loss.value(y, z, loss.params))
