"""The epoch written once against component objects, for (b) structref and (c) jitclass:
``loss.value(y, z)``, ``loss.deriv(y, z)``, ``loss.lipschitz()``, ``pen.value(x, C)``,
``pen.prox(v, C)`` are methods of the objects; options, bank and state are records.
Five arguments.  Same arithmetic, in the same order, as ``a_current.epoch``."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def epoch(opts, bank, loss, pen, st):  # pragma: no cover - jitted
    LT = bank.LT
    starts = bank.starts
    y = bank.y
    beta = st.beta
    z = st.z
    r = st.r
    lam = st.lam
    C = opts.C
    N = z.shape[0]
    M = starts.shape[0] - 1
    g = np.empty(LT.shape[0])
    for i in range(N):
        r[i] = loss.deriv(y[i], z[i])
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
        t = pen.prox(nv, C / lam[m])
        sc = t / nv if nv > 0.0 else 0.0
        for a in range(s, e):
            d = sc * g[a] - beta[a]
            if d != 0.0:
                beta[a] += d
                for i in range(N):
                    z[i] += d * LT[a, i]
        for i in range(N):
            r[i] = loss.deriv(y[i], z[i])
    if opts.with_bias:
        gb = 0.0
        for i in range(N):
            gb += r[i]
        db = -gb / (loss.lipschitz() * N)
        st.bias[0] += db
        for i in range(N):
            z[i] += db
        for i in range(N):
            r[i] = loss.deriv(y[i], z[i])
    f = 0.0
    for i in range(N):
        f += loss.value(y[i], z[i])
    for m in range(M):
        nb2 = 0.0
        for a in range(starts[m], starts[m + 1]):
            nb2 += beta[a] * beta[a]
        f += pen.value(math.sqrt(nb2), C)
    return f


def fit(opts, bank, loss, pen, st, epochs):
    f = np.nan
    for _ in range(epochs):
        f = epoch(opts, bank, loss, pen, st)
    return f
