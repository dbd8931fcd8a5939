r"""The typed records that the jitted loops of the bcd engine take (:mod:`mklkit._jit.bcd`).

A record is a named tuple whose class is registered with one fixed numba type: numba types
an argument of that class without looking at its fields (typing a named tuple field by
field would cost about 100 µs per call of a loop).  Arrays in a record are C-contiguous,
float64 or int64 as the type says; the builders below convert what they may copy and
check what the loops write into.

* :class:`LossFns` — the loss: its kernels ``f(y, z_or_u, params)`` as compiled addresses
  (:data:`LOSS_FN`) and its parameter vector (:func:`loss_fns`).
* :class:`RegFns` — the regularizer: ``value`` and ``prox`` ``f(x, C, params)``
  (:data:`REG_FN`) and its parameter vector (:func:`reg_fns`).
* :class:`Bank` — the factor bank's arrays (made once per bank by
  :class:`~mklkit.kernels.factor_arrays.FactorArrays`).
* :class:`Samples` — the samples and the loss in use on them.
* :class:`BcdOptions` — the options of one working-set solve.
* :class:`BcdState` — the working set and the point that a solve updates in place.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import types

from ..first_class import first_class, fixed_type

__all__ = [
    "LOSS_FN",
    "REG_FN",
    "LossFns",
    "RegFns",
    "Bank",
    "Samples",
    "BcdOptions",
    "BcdState",
    "LOSS_FNS_T",
    "REG_FNS_T",
    "BANK_T",
    "SAMPLES_T",
    "BCD_OPTIONS_T",
    "BCD_STATE_T",
    "loss_fns",
    "reg_fns",
    "samples",
    "bcd_state",
]

_f8 = types.float64
_i8 = types.int64
_b1 = types.boolean
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
#: Signature of a loss kernel ``f(y, z_or_u, params)`` passed into the loops.
LOSS_FN = types.FunctionType(_F1(_F1, _F1, _F1))
#: Signature of a regularizer kernel ``f(x, C, params)`` passed into the loops.
REG_FN = types.FunctionType(_F1(_F1, _f8, _F1))


#: The loss: ``value``, ``deriv``, ``deriv2`` (of :math:`\ell(y, z)` in ``z``), ``conj``,
#: ``conj_grad``, ``conj_hess`` (of :math:`\ell^*(y, u)` in ``u``), each a :data:`LOSS_FN`,
#: and ``params``, the loss's parameter vector.
LossFns = namedtuple("LossFns", ["value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess", "params"])
#: The regularizer: ``value`` :math:`\tilde g_C(x)` and ``prox``
#: :math:`\mathrm{prox}_{\tilde g_C}(x)` on block norms, each a :data:`REG_FN`, and ``params``.
RegFns = namedtuple("RegFns", ["value", "prox", "params"])
#: The factors :math:`L^\top` (R, N), block ``m`` the rows ``starts[m]:starts[m + 1]``:
#: ``lip[m]`` :math:`\|L_m\|_2^2`; ``LT`` the C-contiguous array (dense) or ``indptr``,
#: ``indices``, ``data`` its CSR arrays (``sparse``); ``supp_ptr``/``supp_idx`` the samples
#: each block touches and ``tptr``/``tcol``/``tval`` its entries sample by sample (sparse);
#: ``grams`` the Gram matrices :math:`L_m^\top L_m` of the small blocks, block ``m`` at
#: ``goff[m]`` (-1: none) (:class:`~mklkit.kernels.factor_arrays.FactorArrays`).
Bank = namedtuple(
    "Bank",
    [
        "starts",
        "lip",
        "LT",
        "indptr",
        "indices",
        "data",
        "supp_ptr",
        "supp_idx",
        "tptr",
        "tcol",
        "tval",
        "grams",
        "goff",
        "sparse",
    ],
)
#: The samples: labels ``y``; ``lo``, ``hi`` the domain of the loss's own conjugate;
#: ``sw`` the sample weights (empty: unweighted); the loss in use ``kind``
#: (``KIND_SMOOTH``: the loss itself, ``KIND_ENVELOPE``: its Moreau envelope) and the
#: envelope's smoothing ``mu``.
Samples = namedtuple("Samples", ["y", "lo", "hi", "sw", "kind", "mu"])
#: The options of a working-set solve: ``method`` (``METHOD_BCD`` or ``METHOD_NEWTON``),
#: ``with_bias``; ``check`` (block coordinate descent: every block step checked on the
#: loss, no curvature bound known); ``max_newton`` Newton steps; ``max_epochs`` epochs (of
#: coordinate descent, or per Newton step); ``anderson`` iterates combined by Anderson
#: extrapolation (0: off); ``exact_rank`` (Newton: blocks of at most this rank minimized
#: exactly) in at most ``max_inner`` iterations; ``C``; ``lip`` the bound of the loss's
#: second derivative (inf: none known); ``tol`` the violation of the working set that ends
#: the solve; ``ratio`` (Newton: the inner tolerance over the violation); ``scale`` the
#: curvature scale of the violation (a block's step is :math:`1/(\text{scale}\|L_m\|^2)` or
#: shorter).
BcdOptions = namedtuple(
    "BcdOptions",
    [
        "method",
        "with_bias",
        "check",
        "max_newton",
        "max_epochs",
        "anderson",
        "exact_rank",
        "max_inner",
        "C",
        "lip",
        "tol",
        "ratio",
        "scale",
    ],
)
#: What a solve updates in place: the working set ``ws`` (block indices), the coordinates
#: ``beta`` (R,), the predictions ``z`` (N,), the ``bias`` (1,) and ``stats`` (``ST_*``
#: counters, :mod:`mklkit._jit.bcd`).
BcdState = namedtuple("BcdState", ["ws", "beta", "z", "bias", "stats"])

_from = types.BaseTuple.from_types
LOSS_FNS_T = _from([LOSS_FN] * 6 + [_F1], LossFns)
REG_FNS_T = _from([REG_FN, REG_FN, _F1], RegFns)
BANK_T = _from([_I1, _F1, _F2, _I1, _I1, _F1, _I1, _I1, _I1, _I1, _F1, _F1, _I1, _b1], Bank)
SAMPLES_T = _from([_F1, _F1, _F1, _F1, _i8, _f8], Samples)
BCD_OPTIONS_T = _from([_i8, _b1, _b1, _i8, _i8, _i8, _i8, _i8, _f8, _f8, _f8, _f8, _f8], BcdOptions)
BCD_STATE_T = _from([_I1, _F1, _F1, _F1, _F1], BcdState)


for _cls, _t in (
    (LossFns, LOSS_FNS_T),
    (RegFns, REG_FNS_T),
    (Bank, BANK_T),
    (Samples, SAMPLES_T),
    (BcdOptions, BCD_OPTIONS_T),
    (BcdState, BCD_STATE_T),
):
    fixed_type(_cls, _t)


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
    """The :class:`LossFns` of a loss component (its ``jit`` kernels and ``param_vector``);
    a kernel the loss does not give (None) is replaced by ``value``, which has the same
    signature and is never called in its place."""
    k = loss.jit
    fns = [
        first_class(getattr(k, n) or k.value, LOSS_FN)
        for n in ("value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess")
    ]
    return LossFns(*fns, _vec(loss.param_vector))


def reg_fns(reg) -> RegFns:
    """The :class:`RegFns` of a regularizer component (its ``jit`` kernels and
    ``param_vector``)."""
    k = reg.jit
    return RegFns(first_class(k.value, REG_FN), first_class(k.prox, REG_FN), _vec(reg.param_vector))


def samples(y, lo, hi, sw, kind, mu) -> Samples:
    """A :class:`Samples` with its arrays converted (``sw``: None or empty when unweighted)."""
    return Samples(_vec(y), _vec(lo), _vec(hi), _vec(np.zeros(0) if sw is None else sw), int(kind), float(mu))


def bcd_state(ws, beta, z, bias, stats) -> BcdState:
    """A :class:`BcdState`; ``beta``, ``z``, ``bias`` and ``stats`` are written in place, so
    they must be float64 C-contiguous already (``ws`` is converted)."""
    return BcdState(
        _vec(ws, np.int64), _inplace("beta", beta), _inplace("z", z), _inplace("bias", bias), _inplace("stats", stats)
    )
