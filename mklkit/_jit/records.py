r"""The typed records the jitted loops of the bcd engine take (:mod:`mklkit._jit.bcd`).

Each record class (these and those of :mod:`mklkit._jit.dual_cd`) is registered with one fixed
numba type (:func:`~mklkit.first_class.fixed_type`), so that numba types an argument without looking at its fields
(field by field costs about 100 µs per call).  Arrays are C-contiguous float64 or int64 as the
type says.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types

from ..first_class import check_record, first_class, fixed_type

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


LOSS_FNS_T = fixed_type(LossFns, [LOSS_FN] * 6 + [_F1])
REG_FNS_T = fixed_type(RegFns, [REG_FN, REG_FN, _F1])
BANK_T = fixed_type(Bank, [_I1, _F1, _F2, _I1, _I1, _F1, _I1, _I1, _I1, _I1, _F1, _F1, _I1, _b1])
SAMPLES_T = fixed_type(Samples, [_F1, _F1, _F1, _F1, _i8, _f8])
BCD_OPTIONS_T = fixed_type(BcdOptions, [_i8, _b1, _b1, _i8, _i8, _i8, _i8, _i8, _f8, _f8, _f8, _f8, _f8])
BCD_STATE_T = fixed_type(BcdState, [_I1, _F1, _F1, _F1, _F1])


def _vec(a, dtype=np.float64):
    return np.ascontiguousarray(a, dtype=dtype)


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
    """A :class:`BcdState` (``ws`` copied); the arrays written in place must have their type already."""
    return check_record(BcdState(np.array(ws, dtype=np.int64), beta, z, bias, stats))
