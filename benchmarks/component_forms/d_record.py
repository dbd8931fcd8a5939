"""(d) A component is a record of first-class functions (compiled addresses) plus its
parameter vector; the loop is compiled once, with an explicit signature, for every
component; options, bank and state are records too (five arguments).

Two granularities: ``epoch`` calls today's array functions ``f(y, z, params)`` (one
indirect call per block, as ``a_current``); ``epoch_s`` calls scalar functions
``f(y_i, z_i, params)`` (one indirect call per sample, never inlined)."""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.core.typing.typeof import typeof_impl

from . import a_current as A
from .a_current import LOSS_FN, REG_FN, FirstClass
from .common import Bank, Opts, State

_f8 = types.float64
_b1 = types.boolean
_i8 = types.int64
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
LOSS_S = types.FunctionType(_f8(_f8, _f8, _F1))
REG_S = types.FunctionType(_f8(_f8, _f8, _F1))

LossRec = namedtuple("LossRec", ["value", "deriv", "params", "lip"])
PenRec = namedtuple("PenRec", ["value", "prox", "params"])

OPTS_T = types.NamedTuple([_f8, _b1, _i8], Opts)
BANK_T = types.NamedTuple([_F2, _I1, _F1, _F1], Bank)
STATE_T = types.NamedUniTuple(_F1, 5, State)
LOSS_T = types.NamedTuple([LOSS_FN, LOSS_FN, _F1, _f8], LossRec)
PEN_T = types.NamedTuple([REG_FN, REG_FN, _F1], PenRec)
LOSS_ST = types.NamedTuple([LOSS_S, LOSS_S, _F1, _f8], LossRec)
PEN_ST = types.NamedTuple([REG_S, REG_S, _F1], PenRec)


def _fixed_type(cls, typ):
    """Type every instance of the record class ``cls`` as ``typ`` without looking at its
    elements: numba otherwise builds the NamedTuple type from them at every call
    (about 100 µs per call for these records, measured by ``overhead.py``)."""
    typeof_impl.register(cls)(lambda val, c: typ)


for _cls, _t in ((Opts, OPTS_T), (Bank, BANK_T), (State, STATE_T)):
    _fixed_type(_cls, _t)


class _ScalarLoss(LossRec):
    __slots__ = ()


class _ScalarPen(PenRec):
    __slots__ = ()


_fixed_type(LossRec, LOSS_T)
_fixed_type(PenRec, PEN_T)
_fixed_type(_ScalarLoss, LOSS_ST)
_fixed_type(_ScalarPen, PEN_ST)


# ------------------------------------------------------- scalar built-ins
@njit(cache=True)
def logistic_value(y, z, params):
    t = -y * z
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


@njit(cache=True)
def logistic_deriv(y, z, params):
    return -y / (1.0 + math.exp(y * z))


@njit(cache=True)
def squared_value(y, z, params):
    return 0.5 * (z - y) ** 2


@njit(cache=True)
def squared_deriv(y, z, params):
    return z - y


@njit(cache=True)
def grouplasso_value(x, C, params):
    return C * x


@njit(cache=True)
def grouplasso_prox(v, C, params):
    return max(v - C, 0.0)


@njit(cache=True)
def elasticnet_value(x, C, params):
    a = params[0]
    return C * (a * x + 0.5 * (1.0 - a) * x * x)


@njit(cache=True)
def elasticnet_prox(v, C, params):
    a = params[0]
    return max(v - C * a, 0.0) / (1.0 + C * (1.0 - a))


_VEC = {
    "logistic": (A.logistic_value, A.logistic_deriv, 0.25),
    "squared": (A.squared_value, A.squared_deriv, 1.0),
    "grouplasso": (A.grouplasso_value, A.grouplasso_prox),
    "elasticnet": (A.elasticnet_value, A.elasticnet_prox),
}
_SCA = {
    "logistic": (logistic_value, logistic_deriv, 0.25),
    "squared": (squared_value, squared_deriv, 1.0),
    "grouplasso": (grouplasso_value, grouplasso_prox),
    "elasticnet": (elasticnet_value, elasticnet_prox),
}


def loss_record(value, deriv, params, lip, scalar):
    t = LOSS_S if scalar else LOSS_FN
    return (_ScalarLoss if scalar else LossRec)(
        FirstClass(value, t), FirstClass(deriv, t), np.ascontiguousarray(params, dtype=np.float64), float(lip)
    )


def pen_record(value, prox, params, scalar):
    t = REG_S if scalar else REG_FN
    return (_ScalarPen if scalar else PenRec)(
        FirstClass(value, t), FirstClass(prox, t), np.ascontiguousarray(params, dtype=np.float64)
    )


def make_loss(name, scalar=False, **kw):
    v, d, lip = (_SCA if scalar else _VEC)[name]
    return loss_record(v, d, [], lip, scalar)


def make_pen(name, scalar=False, **kw):
    v, p = (_SCA if scalar else _VEC)[name]
    return pen_record(v, p, [kw.get("l1_ratio", 0.5)] if name == "elasticnet" else [], scalar)


# ---------------------------------------------------------------- the loops
@njit(_f8(OPTS_T, BANK_T, LOSS_T, PEN_T, STATE_T), cache=True)
def epoch(opts, bank, loss, pen, st):  # pragma: no cover - jitted
    LT = bank.LT
    starts = bank.starts
    y = bank.y
    beta = st.beta
    z = st.z
    r = st.r
    lam = st.lam
    lp = loss.params
    rp = pen.params
    C = opts.C
    N = z.shape[0]
    M = starts.shape[0] - 1
    g = np.empty(LT.shape[0])
    one = np.empty(1)
    r[:] = loss.deriv(y, z, lp)
    for m in range(M):
        s = starts[m]
        e = starts[m + 1]
        nv2 = 0.0
        for a in range(s, e):
            acc = 0.0
            for i in range(N):
                acc += LT[a, i] * r[i]
            g[a] = beta[a] - acc / lam[m]
            nv2 += g[a] * g[a]
        nv = math.sqrt(nv2)
        one[0] = nv
        t = pen.prox(one, C / lam[m], rp)[0]
        sc = t / nv if nv > 0.0 else 0.0
        for a in range(s, e):
            d = sc * g[a] - beta[a]
            if d != 0.0:
                beta[a] += d
                for i in range(N):
                    z[i] += d * LT[a, i]
        r[:] = loss.deriv(y, z, lp)
    if opts.with_bias:
        gb = 0.0
        for i in range(N):
            gb += r[i]
        db = -gb / (loss.lip * N)
        st.bias[0] += db
        for i in range(N):
            z[i] += db
        r[:] = loss.deriv(y, z, lp)
    f = np.sum(loss.value(y, z, lp))
    for m in range(M):
        nb2 = 0.0
        for a in range(starts[m], starts[m + 1]):
            nb2 += beta[a] * beta[a]
        one[0] = math.sqrt(nb2)
        f += pen.value(one, C, rp)[0]
    return f


@njit(_f8(OPTS_T, BANK_T, LOSS_ST, PEN_ST, STATE_T), cache=True)
def epoch_s(opts, bank, loss, pen, st):  # pragma: no cover - jitted
    LT = bank.LT
    starts = bank.starts
    y = bank.y
    beta = st.beta
    z = st.z
    r = st.r
    lam = st.lam
    lp = loss.params
    rp = pen.params
    C = opts.C
    N = z.shape[0]
    M = starts.shape[0] - 1
    g = np.empty(LT.shape[0])
    for i in range(N):
        r[i] = loss.deriv(y[i], z[i], lp)
    for m in range(M):
        s = starts[m]
        e = starts[m + 1]
        nv2 = 0.0
        for a in range(s, e):
            acc = 0.0
            for i in range(N):
                acc += LT[a, i] * r[i]
            g[a] = beta[a] - acc / lam[m]
            nv2 += g[a] * g[a]
        nv = math.sqrt(nv2)
        t = pen.prox(nv, C / lam[m], rp)
        sc = t / nv if nv > 0.0 else 0.0
        for a in range(s, e):
            d = sc * g[a] - beta[a]
            if d != 0.0:
                beta[a] += d
                for i in range(N):
                    z[i] += d * LT[a, i]
        for i in range(N):
            r[i] = loss.deriv(y[i], z[i], lp)
    if opts.with_bias:
        gb = 0.0
        for i in range(N):
            gb += r[i]
        db = -gb / (loss.lip * N)
        st.bias[0] += db
        for i in range(N):
            z[i] += db
        for i in range(N):
            r[i] = loss.deriv(y[i], z[i], lp)
    f = 0.0
    for i in range(N):
        f += loss.value(y[i], z[i], lp)
    for m in range(M):
        nb2 = 0.0
        for a in range(starts[m], starts[m + 1]):
            nb2 += beta[a] * beta[a]
        f += pen.value(math.sqrt(nb2), C, rp)
    return f


def fit(opts, bank, loss, pen, st, epochs):
    ep = epoch_s if isinstance(loss, _ScalarLoss) else epoch
    f = np.nan
    for _ in range(epochs):
        f = ep(opts, bank, loss, pen, st)
    return f
