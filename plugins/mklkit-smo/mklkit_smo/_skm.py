r"""Jitted maths of the Moreau-Yosida regularized support kernel machine.

Bach, Lanckriet & Jordan (2004), "Multiple kernel learning, conic duality, and
the SMO algorithm", §4 and Appendix B.  Arrays only (float64, C-contiguous);
the engine (:mod:`mklkit_smo.skm`) does the orchestration.

With :math:`c_j = \alpha^\top D(y)K_jD(y)\alpha` and :math:`s_j = \sqrt{c_j}`
(:math:`= d_j\gamma_j` in the paper's notation), the MY-regularized dual is
:math:`\min G(\alpha)` over :math:`0\le\alpha\le C,\ y^\top\alpha = 0` with

.. math::
    G(\alpha) = \Phi(c) - e^\top\alpha,\qquad
    \Phi(c) = \min_{\gamma\ge0}\ \frac12\gamma^2
        + \frac12\sum_j \frac{(s_j - d_j\gamma)_+^2}{a_j^2}

(Appendix B: :math:`\frac{d_j^2}{a_j^2}\psi(\gamma_j^2, \gamma)
= (s_j - d_j\gamma)_+^2/a_j^2`, written so that :math:`d_j = 0` is allowed:
then :math:`\Phi = \tfrac12\sum_j c_j/a_j^2`, an SVM on
:math:`\sum_j K_j/a_j^2`).  The minimizer :math:`\gamma(\alpha)` is unique
(strict convexity); on the active set :math:`\mathcal J = \{j: s_j > d_j\gamma\}`

.. math::
    \gamma = \frac{\sum_{\mathcal J} d_j s_j/a_j^2}{1 + \sum_{\mathcal J} d_j^2/a_j^2},

found from the breakpoints :math:`\gamma_j = s_j/d_j` (:func:`skm_gamma`).  Then
:math:`\nabla G = D(y)\sum_j\eta_jK_jD(y)\alpha - e` with

.. math::
    \eta_j = \frac{1}{a_j^2}\Big(1 - \frac{d_j\gamma}{s_j}\Big)_+ = 2\,\frac{\partial\Phi}{\partial c_j},
    \qquad
    \tilde\eta_j = \frac{\eta_j}{1 - a_j^2\eta_j} = \frac{(s_j - d_j\gamma)_+}{a_j^2 d_j\gamma},
    \qquad \sum_j d_j^2\tilde\eta_j = 1 .

The SMO loop of :mod:`mklkit_smo._smo` needs, besides :math:`\eta` (its kernel
weights), the Hessian of :math:`\Phi` in :math:`c` as a diagonal plus a
rank-one part: :math:`\sum_{kl}\frac{\partial\eta_k}{\partial c_l}\,2w_kw_l
= \sum_k u^{(2)}_k w_k^2 + r_1\big(\sum_k u^{(1)}_k w_k\big)^2` with, on
:math:`\mathcal J`,

.. math::
    u^{(1)}_k = \frac{d_k}{a_k^2 s_k},\qquad u^{(2)}_k = \frac{d_k\gamma}{a_k^2 s_k^3},\qquad
    r_1 = -\frac{1}{1 + \sum_{\mathcal J} d_j^2/a_j^2}.

``params`` packs the per-kernel constants as ``[a_1..a_m, d_1..d_m]``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

__all__ = [
    "skm_gamma",
    "skm_coeffs",
    "skm_phi",
    "skm_eta_tilde",
    "skm_value_grad",
    "skm_line_min",
    "identical_groups",
    "sub_bank",
    "weighted_block",
    "block_forms",
]


@njit(cache=True)
def skm_gamma(c, params):  # pragma: no cover - jitted
    r"""The minimizer :math:`\gamma(\alpha)` of Appendix B.

    :math:`\gamma` is the root of :math:`h(\gamma) = \gamma - \sum_j d_j(s_j - d_j\gamma)_+/a_j^2`,
    which is piecewise linear, increasing and concave, with its breakpoints at
    :math:`\gamma_j = s_j/d_j` (the points Appendix B sorts).  Newton's method
    started left of the root stays left of it (a tangent of a concave function
    lies above it) and moves to :math:`A_{\mathcal J}/(1 + B_{\mathcal J})` for
    the current active set :math:`\mathcal J = \{j: \gamma_j > \gamma\}`; the set
    only shrinks, and the iteration stops when it no longer changes, i.e. on
    the root's linear piece.  The start is the root with only the kernel of the
    largest :math:`\gamma_j` active, :math:`\gamma_0 = (d_ks_k/a_k^2)/(1 + d_k^2/a_k^2)`,
    where :math:`h \le 0`.  Each pass is :math:`O(m)` (square roots only on the
    active set, the test :math:`s_j > d_j\gamma` is made on :math:`c_j`), at most
    :math:`m` of them and in practice one to three: cheaper than the
    :math:`O(m\log m)` sort on this hot path, which runs several times per SMO step.
    Kernels with :math:`d_j = 0` never enter the sum (their term does not
    depend on :math:`\gamma`).  Returns :math:`(\gamma, B)` with
    :math:`B = \sum_{\mathcal J} d_j^2/a_j^2`.
    """
    M = c.shape[0]
    top = -1
    best = 0.0
    for k in range(M):
        dk = params[M + k]
        if dk > 0.0 and c[k] > 0.0:
            r = c[k] / (dk * dk)  # gamma_k^2
            if r > best:
                best = r
                top = k
    if top < 0:
        return 0.0, 0.0
    ak = params[top]
    dk = params[M + top]
    w = dk / (ak * ak)
    g = w * math.sqrt(c[top]) / (1.0 + w * dk)
    B = w * dk
    n_prev = 1
    for _ in range(M):
        A = 0.0
        B = 0.0
        n_act = 0
        g2 = g * g
        for k in range(M):
            dk = params[M + k]
            if dk > 0.0 and c[k] > dk * dk * g2:
                ak = params[k]
                w = dk / (ak * ak)
                A += w * math.sqrt(c[k])  # d_k s_k / a_k^2
                B += w * dk
                n_act += 1
        if n_act == 0:
            return g, B  # only by rounding: g is the root
        gn = A / (1.0 + B)
        if n_act == n_prev or not gn > g:
            # the active set did not change (it can only shrink): gn is the root
            return gn if gn > g else g, B
        n_prev = n_act
        g = gn
    return g, B


@njit(cache=True)
def skm_coeffs(c, params, d, u1, u2):  # pragma: no cover - jitted
    r"""Weights :math:`\eta` (into ``d``) and curvature terms at ``c``; returns :math:`r_1`."""
    M = c.shape[0]
    g, B = skm_gamma(c, params)
    for k in range(M):
        ak = params[k]
        dk = params[M + k]
        ia2 = 1.0 / (ak * ak)
        sk = math.sqrt(c[k]) if c[k] > 0.0 else 0.0
        dg = dk * g
        if dg <= 0.0:
            # d_k = 0 or gamma = 0: the term is c_k / (2 a_k^2)
            d[k] = ia2
            u1[k] = 0.0
            u2[k] = 0.0
        elif sk > dg:
            d[k] = (sk - dg) / sk * ia2
            u1[k] = dk * ia2 / sk
            u2[k] = dg * ia2 / (sk * sk * sk)
        else:
            d[k] = 0.0
            u1[k] = 0.0
            u2[k] = 0.0
    return -1.0 / (1.0 + B)


@njit(cache=True)
def skm_phi(c, params):  # pragma: no cover - jitted
    r""":math:`\Phi(c) = \tfrac12\gamma^2 + \tfrac12\sum_j (s_j - d_j\gamma)_+^2/a_j^2` at :math:`\gamma(\alpha)`."""
    M = c.shape[0]
    g, _ = skm_gamma(c, params)
    val = 0.5 * g * g
    for k in range(M):
        ak = params[k]
        sk = math.sqrt(c[k]) if c[k] > 0.0 else 0.0
        r = sk - params[M + k] * g
        if r > 0.0:
            val += 0.5 * r * r / (ak * ak)
    return val


@njit(cache=True)
def skm_eta_tilde(c, params, out):  # pragma: no cover - jitted
    r""":math:`\tilde\eta_j = (s_j - d_j\gamma)_+/(a_j^2d_j\gamma)` into ``out``; returns :math:`\gamma`.

    Needs :math:`\gamma > 0` and every :math:`d_j > 0`; otherwise ``out`` is
    filled with NaN (there is no normalised weight yet, e.g. at
    :math:`\alpha = 0` or :math:`\kappa = 1`).
    """
    M = c.shape[0]
    g, _ = skm_gamma(c, params)
    ok = g > 0.0
    for k in range(M):
        if not params[M + k] > 0.0:
            ok = False
    for k in range(M):
        if not ok:
            out[k] = np.nan
            continue
        ak = params[k]
        dk = params[M + k]
        sk = math.sqrt(c[k]) if c[k] > 0.0 else 0.0
        r = sk - dk * g
        out[k] = r / (ak * ak * dk * g) if r > 0.0 else 0.0
    return g


@njit(cache=True)
def _line_slope(t, c0, w, q, lin, params, ct, d, u1, u2):  # pragma: no cover - jitted
    M = c0.shape[0]
    for k in range(M):
        v = c0[k] + t * (2.0 * w[k] + t * q[k])
        ct[k] = v if v > 0.0 else 0.0
    skm_coeffs(ct, params, d, u1, u2)
    g = -lin
    for k in range(M):
        g += d[k] * (w[k] + t * q[k])
    return g


@njit(cache=True)
def skm_line_min(c0, w, q, lin, params, hi):  # pragma: no cover - jitted
    r"""The minimizer over :math:`[0, hi]` of :math:`\Phi(c_0 + 2tw + t^2q) - t\,lin` (convex in t).

    Along a line :math:`\alpha + t\,d` the forms are :math:`c_j(t) = c_j + 2tw_j + t^2q_j`
    (:math:`w_j = (D(y)d)^\top K_jD(y)\alpha`, :math:`q_j = d^\top D(y)K_jD(y)d \ge 0`) and
    :math:`G(\alpha + td) - G(\alpha) = \Phi(c(t)) - \Phi(c) - t\,e^\top d`, whose derivative is
    :math:`\sum_j\eta_j(c(t))(w_j + tq_j) - e^\top d` (:math:`\eta = 2\partial\Phi/\partial c`),
    increasing in t.  Bisection on its sign; 0 when it is not negative at 0.
    """
    M = c0.shape[0]
    ct = np.empty(M)
    d = np.empty(M)
    u1 = np.empty(M)
    u2 = np.empty(M)
    if not _line_slope(0.0, c0, w, q, lin, params, ct, d, u1, u2) < 0.0:
        return 0.0
    if _line_slope(hi, c0, w, q, lin, params, ct, d, u1, u2) <= 0.0:
        return hi
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _line_slope(mid, c0, w, q, lin, params, ct, d, u1, u2) < 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return lo


@njit(cache=True)
def skm_value_grad(alpha, y, K, params, grad):  # pragma: no cover - jitted
    r""":math:`G(\alpha)` and :math:`\nabla G(\alpha)` (into ``grad``) from scratch, O(m n^2).

    A reference implementation for tests and checks (the SMO loop keeps
    :math:`K_j D(y)\alpha` up to date instead).
    """
    M = K.shape[0]
    n = alpha.shape[0]
    gam = alpha * y
    v = np.zeros((M, n))
    c = np.zeros(M)
    for k in range(M):
        for i in range(n):
            if gam[i] != 0.0:
                gi = gam[i]
                for j in range(n):
                    v[k, j] += gi * K[k, i, j]
        s = 0.0
        for j in range(n):
            s += gam[j] * v[k, j]
        c[k] = s if s > 0.0 else 0.0
    eta = np.empty(M)
    u1 = np.empty(M)
    u2 = np.empty(M)
    skm_coeffs(c, params, eta, u1, u2)
    for i in range(n):
        f = 0.0
        for k in range(M):
            f += eta[k] * v[k, i]
        grad[i] = y[i] * f - 1.0
    return skm_phi(c, params) - np.sum(alpha)


@njit(cache=True)
def _same_point(K, p, q, rtol):  # pragma: no cover - jitted
    """Points p and q coincide in every kernel's feature space (up to ``rtol``)."""
    for k in range(K.shape[0]):
        s = K[k, p, p] + K[k, q, q]
        if not K[k, p, p] + K[k, q, q] - 2.0 * K[k, p, q] <= rtol * s:
            return False
    return True


@njit(cache=True)
def identical_groups(K, y, order, h, htol, rtol, group):  # pragma: no cover - jitted
    """``group[p]``: the first point identical to p (itself when none comes before).

    ``order`` sorts the points by label, then by the signature ``h`` (sorted
    alongside); points are compared only inside runs of one label whose
    consecutive signatures differ by at most ``htol``, each with the runs'
    representatives, by :func:`_same_point`.
    """
    N = order.shape[0]
    for a in range(N):
        group[order[a]] = -1
    start = 0
    while start < N:
        end = start + 1
        while end < N and y[order[end]] == y[order[start]] and h[end] - h[end - 1] <= htol:
            end += 1
        for a in range(start, end):
            p = order[a]
            if group[p] >= 0:
                continue
            group[p] = p
            for b in range(a + 1, end):
                q = order[b]
                if group[q] < 0 and _same_point(K, p, q, rtol):
                    group[q] = p
        start = end


@njit(cache=True, parallel=True)
def sub_bank(K, idx):  # pragma: no cover - jitted
    """``K[:, idx][:, :, idx]`` in one pass (rows read in order, no intermediate copy)."""
    M = K.shape[0]
    G = idx.shape[0]
    out = np.empty((M, G, G))
    for k in range(M):
        for a in prange(G):
            row = K[k, idx[a]]
            for b in range(G):
                out[k, a, b] = row[idx[b]]
    return out


@njit(cache=True)
def weighted_block(K, idx, w):  # pragma: no cover - jitted
    """``sum_k w_k K_k[idx][:, idx]`` over the kernels with ``w_k != 0``."""
    G = idx.shape[0]
    H = np.zeros((G, G))
    for k in range(K.shape[0]):
        wk = w[k]
        if wk == 0.0:
            continue
        for a in range(G):
            row = K[k, idx[a]]
            for b in range(G):
                H[a, b] += wk * row[idx[b]]
    return H


@njit(cache=True)
def block_forms(K, idx, x, out):  # pragma: no cover - jitted
    """``out[k] = x^T K_k[idx][:, idx] x`` for every kernel."""
    G = idx.shape[0]
    for k in range(K.shape[0]):
        s = 0.0
        for a in range(G):
            xa = x[a]
            if xa == 0.0:
                continue
            row = K[k, idx[a]]
            t = 0.0
            for b in range(G):
                t += row[idx[b]] * x[b]
            s += xa * t
        out[k] = s
