r"""A convex quadratic program on a product of simplices, solved by pairwise steps (SMO).

.. math::

    \min_{\gamma}\ f(\gamma) = (s\circ\gamma)^\top K (s\circ\gamma) + p^\top\gamma
    \quad\text{s.t.}\quad \gamma \ge 0,\quad \textstyle\sum_{i \in G_c}\gamma_i = 1 \ \text{for every group } c,

with :math:`K` positive semidefinite, given as an (N, N) array or as a factor :math:`L` (N, r),
:math:`K = LL^\top`, and signs :math:`s_i` equal within a group.  A step moves mass :math:`t` from
:math:`j` to :math:`i` in one group, :math:`\gamma \leftarrow \gamma + t(e_i - e_j)`, with the exact
line search :math:`t = \min\{(g_j - g_i) / (2a_{ij}),\ \gamma_j\}`, :math:`a_{ij} = s_c^2(K_{ii} + K_{jj}
- 2K_{ij})`, :math:`g = \nabla f = 2\,s\circ K(s\circ\gamma) + p`.  :math:`j` is the support point of
largest gradient and :math:`i` the point of the largest second-order decrease :math:`(g_j-g_i)^2/a_{ij}`
(Fan, Chen & Lin 2005, WSS 2), in the group of the largest violation :math:`\max_{\gamma_j>0}g_j -
\min_i g_i`.  This is pairwise Frank–Wolfe with exact line search (Lacoste-Julien & Jaggi 2015).

The Frank–Wolfe gap :math:`\sum_c\big(\sum_{i\in G_c}\gamma_ig_i - \min_{i\in G_c} g_i\big) \ge
f(\gamma) - f^\star` certifies every iterate (convexity).
"""

import numpy as np
from numba import njit

from .blocks import FM

#: the codes :func:`simplex_pairs` returns
CONVERGED, MAX_ITER, BELOW_FLOOR, STALLED = 0, 1, 2, 3

_TAU = 1e-12


@njit(cache=True, fastmath=FM)
def _column(K, L, factor, cache, slot_of, owner, stamp, clock, k):  # pragma: no cover - jitted
    """:math:`K_{:,k}`: a row of ``K``, or for a factor ``L`` (N, r) the product :math:`L L_{k,:}^\\top`
    kept in ``cache`` (its least recently used slot replaced); ``slot_of``/``owner`` map points and slots."""
    if not factor:
        return K[k]
    slot = slot_of[k]
    if slot < 0:
        slot = 0
        for q in range(1, stamp.shape[0]):
            if stamp[q] < stamp[slot]:
                slot = q
        if owner[slot] >= 0:
            slot_of[owner[slot]] = -1
        owner[slot] = k
        slot_of[k] = slot
        n, r = L.shape
        out = cache[slot]
        for i in range(n):
            acc = 0.0
            for q in range(r):
                acc += L[i, q] * L[k, q]
            out[i] = acc
    stamp[slot] = clock
    return cache[slot]


@njit(cache=True)
def simplex_pairs(
    K, L, factor, cache, filled, diag, s, p, group, n_groups, gamma, grad, tol, atol, floor, max_iter
):  # pragma: no cover - jitted
    r"""Minimise :math:`f` (module docstring) from the feasible ``gamma`` (updated in place).

    ``grad`` holds :math:`\nabla f(\gamma)` on entry and is kept up to date; ``diag`` is
    :math:`\mathrm{diag}\,K`; ``cache`` (S, N), S >= 2, holds the columns of a factor kernel last
    used (all of them, in order, when ``filled``).  Stops when the gap is at most
    :math:`\max(\mathrm{tol}\,|f|, \mathrm{atol})` (:data:`CONVERGED`), when :math:`f \le` ``floor``
    (:data:`BELOW_FLOOR`), after ``max_iter`` steps (:data:`MAX_ITER`), or when round-off leaves no
    descent pair (:data:`STALLED`).  Returns ``(steps, f, gap, code)``.
    """
    n = gamma.shape[0]
    slot_of = np.full(n, -1, dtype=np.int64)
    owner = np.full(cache.shape[0], -1, dtype=np.int64)
    if filled:  # the cache holds all N columns: row k is column k
        for k in range(n):
            slot_of[k] = k
            owner[k] = k
    stamp = np.zeros(cache.shape[0], dtype=np.int64)
    gmin = np.empty(n_groups)
    gmax = np.empty(n_groups)
    jmax = np.empty(n_groups, dtype=np.int64)
    dots = np.empty(n_groups)
    it = 0
    f = 0.0
    gap = 0.0
    code = MAX_ITER
    while True:
        for c in range(n_groups):
            gmin[c] = np.inf
            gmax[c] = -np.inf
            jmax[c] = -1
            dots[c] = 0.0
        f = 0.0
        for k in range(n):
            c = group[k]
            g = grad[k]
            dots[c] += gamma[k] * g
            f += gamma[k] * (g + p[k])
            if g < gmin[c]:
                gmin[c] = g
            if gamma[k] > 0.0 and g > gmax[c]:
                gmax[c] = g
                jmax[c] = k
        f *= 0.5
        gap = 0.0
        for c in range(n_groups):
            v = dots[c] - gmin[c]
            if v > 0.0:
                gap += v
        if gap <= max(tol * abs(f), atol):
            code = CONVERGED
            break
        if f <= floor:
            code = BELOW_FLOOR
            break
        if it >= max_iter:
            code = MAX_ITER
            break
        best_c = 0
        worst = -np.inf
        for c in range(n_groups):
            if gmax[c] - gmin[c] > worst:
                worst = gmax[c] - gmin[c]
                best_c = c
        j = jmax[best_c]
        cj = _column(K, L, factor, cache, slot_of, owner, stamp, 2 * it + 1, j)
        sc2 = s[j] * s[j]
        i = -1
        best = np.inf
        for k in range(n):
            if group[k] != best_c:
                continue
            b = grad[j] - grad[k]
            if b > 0.0:
                a = sc2 * (diag[k] + diag[j] - 2.0 * cj[k])
                if a <= _TAU:
                    a = _TAU
                score = -b * b / a
                if score < best:
                    best = score
                    i = k
        if i < 0:  # no descent pair left at this precision
            code = STALLED
            break
        ci = _column(K, L, factor, cache, slot_of, owner, stamp, 2 * it + 2, i)
        b = grad[j] - grad[i]
        a = sc2 * (diag[i] + diag[j] - 2.0 * ci[j])
        t = gamma[j]
        if a > 0.0 and b < 2.0 * a * gamma[j]:
            t = b / (2.0 * a)
        gamma[i] += t
        if t == gamma[j]:
            gamma[j] = 0.0
        else:
            gamma[j] -= t
        w = 2.0 * t * s[j]
        for k in range(n):
            grad[k] += w * s[k] * (ci[k] - cj[k])
        it += 1
    return it, f, gap, code
