r"""The typed records the jitted loops of the bcd engine take (:mod:`mklkit._jit.bcd`).

Each record class (these and those of :mod:`mklkit._jit.dual_cd`) is registered with one fixed
numba type (:func:`register`), so that numba types an argument without looking at its fields
(field by field costs about 100 µs per call).  Arrays are C-contiguous float64 or int64 as the
type says.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types

from ..first_class import first_class, fixed_type

_f8 = types.float64
_i8 = types.int64
_b1 = types.boolean
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
#: A loss kernel ``f(y, z_or_u, params)`` passed into the loops.
LOSS_FN = types.FunctionType(_F1(_F1, _F1, _F1))
#: A regularizer kernel ``f(x, C, params)`` passed into the loops.
REG_FN = types.FunctionType(_F1(_F1, _f8, _F1))

#: The loss's kernels (each a :data:`LOSS_FN`) and its parameter vector.
LossFns = namedtuple("LossFns", "value deriv deriv2 conj conj_grad conj_hess params")
#: The regularizer's ``value`` and ``prox`` on block norms (each a :data:`REG_FN`) and ``params``.
RegFns = namedtuple("RegFns", "value prox params")
#: The factor bank's arrays (:class:`~mklkit.kernels.factor_arrays.FactorArrays`).
Bank = namedtuple("Bank", "starts lip LT indptr indices data supp_ptr supp_idx tptr tcol tval grams goff sparse")
#: The samples: labels, the domain ``[lo, hi]`` of the loss's own conjugate, the weights ``sw``
#: (empty: unweighted), the loss in use ``kind`` (``KIND_*``) and the envelope's smoothing.
Samples = namedtuple("Samples", "y lo hi sw kind mu")
#: The options of a working-set solve (:func:`mklkit._jit.bcd.solve_ws`; ``lip``: the bound of
#: the loss's second derivative, inf if none; ``scale``: the curvature scale of the violation).
BcdOptions = namedtuple(
    "BcdOptions", "method with_bias check max_newton max_epochs anderson exact_rank max_inner C lip tol ratio scale"
)
#: What a solve updates in place: the coordinates ``beta`` (R,) of the working set ``ws``, the
#: predictions ``z`` (N,), the ``bias`` (1,) and the ``stats`` counters (``ST_*``).
BcdState = namedtuple("BcdState", "ws beta z bias stats")


def register(cls: type, field_types: list) -> types.BaseTuple:
    """The numba type of the namedtuple ``cls`` with ``field_types``, given to every instance
    (:func:`~mklkit.first_class.fixed_type`)."""
    typ = types.BaseTuple.from_types(field_types, cls)
    fixed_type(cls, typ)
    return typ


LOSS_FNS_T = register(LossFns, [LOSS_FN] * 6 + [_F1])
REG_FNS_T = register(RegFns, [REG_FN, REG_FN, _F1])
BANK_T = register(Bank, [_I1, _F1, _F2, _I1, _I1, _F1, _I1, _I1, _I1, _I1, _F1, _F1, _I1, _b1])
SAMPLES_T = register(Samples, [_F1, _F1, _F1, _F1, _i8, _f8])
BCD_OPTIONS_T = register(BcdOptions, [_i8, _b1, _b1, _i8, _i8, _i8, _i8, _i8, _f8, _f8, _f8, _f8, _f8])
BCD_STATE_T = register(BcdState, [_I1, _F1, _F1, _F1, _F1])


def _vec(a, dtype=np.float64):
    return np.ascontiguousarray(a, dtype=dtype)


def _inplace(name, a, dtype=np.float64):
    """``a`` itself, which a loop writes into: it must have the record's type already."""
    if not (
        isinstance(a, np.ndarray) and a.dtype == dtype and a.ndim == 1 and a.flags.c_contiguous and a.flags.writeable
    ):
        raise TypeError(f"{name} must be a writeable C-contiguous 1-d {np.dtype(dtype)} array")
    return a


def loss_fns(loss) -> LossFns:
    """The :class:`LossFns` of a loss component; a kernel the loss does not give (None) is
    replaced by ``value``, which is never called in its place."""
    k = loss.jit
    fns = [first_class(getattr(k, n) or k.value, LOSS_FN) for n in LossFns._fields[:-1]]
    return LossFns(*fns, _vec(loss.param_vector))


def reg_fns(reg) -> RegFns:
    k = reg.jit
    return RegFns(first_class(k.value, REG_FN), first_class(k.prox, REG_FN), _vec(reg.param_vector))


def samples(y, lo, hi, sw, kind, mu) -> Samples:
    """A :class:`Samples` with its arrays converted (``sw``: None or empty when unweighted)."""
    return Samples(_vec(y), _vec(lo), _vec(hi), _vec(np.zeros(0) if sw is None else sw), int(kind), float(mu))


def bcd_state(ws, beta, z, bias, stats) -> BcdState:
    """A :class:`BcdState`; the arrays written in place must have their type already."""
    return BcdState(
        _vec(ws, np.int64), _inplace("beta", beta), _inplace("z", z), _inplace("bias", bias), _inplace("stats", stats)
    )
