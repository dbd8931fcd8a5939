"""(a) Today's representation: module-level ``@njit(cache=True)`` array functions
``f(y, z, params)``, passed one by one (as compiled addresses, ``FirstClass``,
exactly as ``mklkit._jit.bcd.first_class``) to a loop compiled once with an
explicit signature; options, bank and state positionally (17 arguments)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.core.typing.typeof import typeof_impl

_f8 = types.float64
_b1 = types.boolean
_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_I1 = types.int64[::1]
LOSS_FN = types.FunctionType(_F1(_F1, _F1, _F1))
REG_FN = types.FunctionType(_F1(_F1, _f8, _F1))


class FirstClass(types.WrapperAddressProtocol):
    """A jitted kernel passed by its compiled address (as mklkit's ``FirstClass``)."""

    def __init__(self, fn, fn_type):
        self._type = fn_type
        self._sig = fn_type.signature
        self._cres = fn.get_compile_result(self._sig)
        self._addr = self._cres.library.get_pointer_to_function(self._cres.fndesc.llvm_cfunc_wrapper_name)

    def __wrapper_address__(self):
        return self._addr

    def signature(self):
        return self._sig


@typeof_impl.register(FirstClass)
def _typeof_first_class(val, c):
    return val._type


# ---------------------------------------------------------------- components
@njit(cache=True)
def logistic_value(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = -y[i] * z[i]
        out[i] = max(t, 0.0) + math.log1p(math.exp(-abs(t)))
    return out


@njit(cache=True)
def logistic_deriv(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -y[i] / (1.0 + math.exp(y[i] * z[i]))
    return out


@njit(cache=True)
def squared_value(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = 0.5 * (z[i] - y[i]) ** 2
    return out


@njit(cache=True)
def squared_deriv(y, z, params):
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = z[i] - y[i]
    return out


@njit(cache=True)
def grouplasso_value(x, C, params):
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = C * x[i]
    return out


@njit(cache=True)
def grouplasso_prox(v, C, params):
    out = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        out[i] = max(v[i] - C, 0.0)
    return out


@njit(cache=True)
def elasticnet_value(x, C, params):
    a = params[0]
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = C * (a * x[i] + 0.5 * (1.0 - a) * x[i] * x[i])
    return out


@njit(cache=True)
def elasticnet_prox(v, C, params):
    a = params[0]
    out = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        out[i] = max(v[i] - C * a, 0.0) / (1.0 + C * (1.0 - a))
    return out


class Component:
    def __init__(self, fns, params, lip=1.0):
        self.fns = tuple(FirstClass(f, t) for f, t in fns)
        self.params = np.ascontiguousarray(params, dtype=np.float64)
        self.lip = lip


def make_loss(name, **kw):
    if name == "logistic":
        return Component([(logistic_value, LOSS_FN), (logistic_deriv, LOSS_FN)], [], 0.25)
    if name == "squared":
        return Component([(squared_value, LOSS_FN), (squared_deriv, LOSS_FN)], [], 1.0)
    raise KeyError(name)


def make_pen(name, **kw):
    if name == "grouplasso":
        return Component([(grouplasso_value, REG_FN), (grouplasso_prox, REG_FN)], [])
    if name == "elasticnet":
        return Component([(elasticnet_value, REG_FN), (elasticnet_prox, REG_FN)], [kw.get("l1_ratio", 0.5)])
    raise KeyError(name)


# ---------------------------------------------------------------- the loop
@njit(
    types.float64(_f8, _b1, _F2, _I1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, _F1, LOSS_FN, LOSS_FN, REG_FN, REG_FN),
    cache=True,
)
def epoch(
    C, with_bias, LT, starts, y, lp, rp, beta, z, r, bias, lam, value, deriv, reg_value, reg_prox
):  # pragma: no cover - jitted
    """One pass of proximal block coordinate descent, then a gradient step on the bias;
    returns the objective after the pass."""
    N = z.shape[0]
    M = starts.shape[0] - 1
    g = np.empty(LT.shape[0])
    one = np.empty(1)
    r[:] = deriv(y, z, lp)
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
        t = reg_prox(one, C / lam[m], rp)[0]
        sc = t / nv if nv > 0.0 else 0.0
        for a in range(s, e):
            d = sc * g[a] - beta[a]
            if d != 0.0:
                beta[a] += d
                for i in range(N):
                    z[i] += d * LT[a, i]
        r[:] = deriv(y, z, lp)
    if with_bias:
        gb = 0.0
        for i in range(N):
            gb += r[i]
        db = -gb / (lam[M] * N)
        bias[0] += db
        for i in range(N):
            z[i] += db
        r[:] = deriv(y, z, lp)
    f = np.sum(value(y, z, lp))
    for m in range(M):
        nb2 = 0.0
        for a in range(starts[m], starts[m + 1]):
            nb2 += beta[a] * beta[a]
        one[0] = math.sqrt(nb2)
        f += reg_value(one, C, rp)[0]
    return f


def fit(opts, bank, loss, pen, st, epochs):
    lam = np.append(st.lam, loss.lip)
    f = np.nan
    for _ in range(epochs):
        f = epoch(
            opts.C,
            opts.with_bias,
            bank.LT,
            bank.starts,
            bank.y,
            loss.params,
            pen.params,
            st.beta,
            st.z,
            st.r,
            st.bias,
            lam,
            *loss.fns,
            *pen.fns,
        )
    return f
