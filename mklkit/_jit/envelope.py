r"""A loss or its Moreau envelope :math:`\ell_\mu(z) = \sup_u uz - \ell^*(y, u) - \mu u^2/2`
found from the conjugate alone (jitted, for :mod:`mklkit._jit.bcd`).  With sample weights
:math:`(w\ell)_\mu = w\,\ell_{\mu w}` (from :math:`(w\ell)^*(u) = w\ell^*(u/w)`); an empty
``sw`` is the unweighted loss with the same compiled signature (``docs/engines.md``).
"""

import numpy as np
from numba import njit

from .records import Samples

_EPS = np.finfo(np.float64).eps

#: ``FLAGS[1]``/``FLAGS[0]``: True/False as plain bools, not literals, which numba would
#: compile a callee for once each.
FLAGS = np.array([False, True])

KIND_SMOOTH = 0  # value, deriv, deriv2 of the loss
KIND_ENVELOPE = 1  # Moreau envelope of the loss, from its conjugate


@njit(cache=True)
def gather(src, idx):  # pragma: no cover - jitted
    out = np.empty(idx.shape[0])
    for j in range(idx.shape[0]):
        out[j] = src[idx[j]]
    return out


@njit(cache=True)
def subset(smp, idx):  # pragma: no cover - jitted
    """The :class:`~mklkit._jit.records.Samples` of the samples ``idx`` (the weights stay empty if unweighted)."""
    sw = smp.sw if smp.sw.shape[0] == 0 else gather(smp.sw, idx)
    return Samples(gather(smp.y, idx), gather(smp.lo, idx), gather(smp.hi, idx), sw, smp.kind, smp.mu)


@njit(cache=True)
def envelope(smp, z, loss, want_value):  # pragma: no cover - jitted
    r"""``(value, u, h)`` of the envelope: :math:`u^\star(z)` is the root of the decreasing
    :math:`z - \partial\ell^*(u) - \mu u` in the conjugate's domain (ends, doubling brackets, then
    safeguarded Newton), ``h`` :math:`= 1/(\ell^{*\prime\prime} + \mu)`, 0 at an end or a kink."""
    y = smp.y
    lo = smp.lo
    hi = smp.hi
    w = smp.sw
    mu = smp.mu
    lp = loss.params
    conj_grad = loss.conj_grad
    n = z.shape[0]
    weighted = w.shape[0] > 0
    u = np.zeros(n)
    h = np.zeros(n)
    a = lo.copy()
    b = hi.copy()
    done = np.zeros(n, dtype=np.bool_)
    idx = np.empty(n, dtype=np.int64)
    # the ends of the domain
    for side in range(2):
        k = 0
        for i in range(n):
            e = b[i] if side == 0 else a[i]
            if np.isfinite(e) and not done[i]:
                idx[k] = i
                k += 1
        if k == 0:
            continue
        sel = idx[:k].copy()
        ends = gather(b if side == 0 else a, sel)
        g = conj_grad(gather(y, sel), ends, lp)
        for j in range(k):
            i = sel[j]
            mi = mu * w[i] if weighted else mu
            phi = z[i] - g[j] - mi * ends[j]
            if (side == 0 and phi >= 0.0) or (side == 1 and phi <= 0.0):
                u[i] = ends[j]
                done[i] = True
    # brackets for infinite ends: doubling steps away from the finite end (or 0)
    for rnd in range(1100):
        k = 0
        for i in range(n):
            if not done[i] and not (np.isfinite(a[i]) and np.isfinite(b[i])):
                idx[k] = i
                k += 1
        if k == 0:
            break
        sel = idx[:k].copy()
        probe = np.empty(k)
        for j in range(k):
            i = sel[j]
            step = 2.0 ** min(rnd, 1000)
            if not np.isfinite(b[i]):
                probe[j] = (a[i] if np.isfinite(a[i]) else 0.0) + (step if rnd > 0 or np.isfinite(a[i]) else 0.0)
            else:
                probe[j] = b[i] - step
        g = conj_grad(gather(y, sel), probe, lp)
        for j in range(k):
            i = sel[j]
            mi = mu * w[i] if weighted else mu
            phi = z[i] - g[j] - mi * probe[j]
            if phi >= 0.0:
                a[i] = probe[j]
            else:
                b[i] = probe[j]
    # safeguarded Newton inside the brackets
    width0 = np.empty(n)
    for i in range(n):
        if not done[i]:
            u[i] = 0.5 * (a[i] + b[i])
            width0[i] = b[i] - a[i]
    for it in range(400):
        k = 0
        for i in range(n):
            if not done[i]:
                idx[k] = i
                k += 1
        if k == 0:
            break
        sel = idx[:k].copy()
        ys = gather(y, sel)
        us = gather(u, sel)
        g = conj_grad(ys, us, lp)
        H = loss.conj_hess(ys, us, lp)
        for j in range(k):
            i = sel[j]
            mi = mu * w[i] if weighted else mu
            phi = z[i] - g[j] - mi * u[i]
            scale = abs(z[i]) + abs(g[j]) + mi * abs(u[i])
            if abs(phi) <= 16.0 * _EPS * scale:
                der = H[j] + mi
                h[i] = 1.0 / der if (der > 0.0 and np.isfinite(der)) else 0.0
                done[i] = True
                continue
            if phi > 0.0:
                a[i] = u[i]
            else:  # phi < 0 or nan: the root is below
                b[i] = u[i]
            if b[i] - a[i] <= 4.0 * _EPS * (abs(a[i]) + abs(b[i])) + 1e-15 * width0[i]:
                u[i] = 0.5 * (a[i] + b[i])  # a jump of phi: a kink of the conjugate
                done[i] = True
                continue
            der = H[j] + mi
            un = u[i] + phi / der if (der > 0.0 and np.isfinite(der)) else np.nan
            if not (a[i] < un < b[i]):
                un = 0.5 * (a[i] + b[i])
            u[i] = un
    for i in range(n):  # rounding may not leave the domain
        u[i] = min(max(u[i], lo[i]), hi[i])
    if want_value:
        c = loss.conj(y, u, lp)
        val = np.empty(n)
        for i in range(n):
            mi = mu * w[i] if weighted else mu
            val[i] = u[i] * z[i] - c[i] - 0.5 * mi * u[i] * u[i]
    else:
        val = np.empty(0)
    if weighted:
        # (w l)_mu = w l_{mu w}: value, derivative u = w v and curvature times w
        for i in range(n):
            u[i] *= w[i]
            h[i] *= w[i]
        for i in range(val.shape[0]):
            val[i] *= w[i]
    return val, u, h


@njit(cache=True)
def loss_terms(smp, z, loss, want_value, want_curv):  # pragma: no cover - jitted
    """Value, derivative and curvature at ``z`` of the loss (``KIND_SMOOTH``) or its envelope,
    times the weights if any; arrays not asked for are empty."""
    if smp.kind == KIND_ENVELOPE:
        return envelope(smp, z, loss, want_value)
    y = smp.y
    w = smp.sw
    lp = loss.params
    v = loss.value(y, z, lp) if want_value else np.empty(0)
    d1 = loss.deriv(y, z, lp)
    d2 = loss.deriv2(y, z, lp) if want_curv else np.empty(0)
    if w.shape[0] > 0:
        # new arrays: a kernel's output is not written into
        if want_value:
            v = w * v
        d1 = w * d1
        if want_curv:
            d2 = w * d2
    return v, d1, d2


@njit(cache=True)
def sum_value(smp, z, loss):  # pragma: no cover - jitted
    v, _, _ = loss_terms(smp, z, loss, FLAGS[1], FLAGS[0])
    return np.sum(v)
