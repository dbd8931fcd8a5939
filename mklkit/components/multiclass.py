r"""Losses of K outputs for joint multiclass MKL (``docs/multiclass.md``): the contract
:class:`MulticlassLoss` and the multinomial (softmax cross-entropy) loss :class:`Multinomial`.

A multiclass loss :math:`L(y, F_i)` takes the class index :math:`y \in \{0, \dots, K-1\}` of a
sample and its K outputs :math:`F_i \in \mathbb R^K`.  Its kernels are ``@kernel`` methods of
C-contiguous float64 arrays: the labels ``y`` (N,) as class indices, the outputs ``F`` or the
conjugate's argument ``U`` (N, K) and the parameter vector.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, NamedTuple

import numpy as np
from numba import njit

from .base import INF, Component, LabelError, _grouped, kernel
from .params import Param

__all__ = [
    "MulticlassLoss",
    "MulticlassLossJit",
    "Multinomial",
    "CrammerSinger",
    "WestonWatkins",
    "BUILTIN_MULTICLASS_LOSSES",
    "simplex_transport",
]


class MulticlassLossJit(NamedTuple):
    r"""The kernels of a multiclass loss: ``value(y, F, p)`` (N,) :math:`L(y_i, F_i)`,
    ``grad(y, F, p)`` (N, K) :math:`\partial_F L` and ``conj(y, U, p)`` (N,) the conjugate
    :math:`L^*(y_i, U_i) = \sup_F \langle U_i, F\rangle - L(y_i, F)` (``inf`` outside its domain)."""

    value: Any
    grad: Any
    conj: Any


@njit(cache=True)
def simplex_transport(Q, w, target):
    r"""Rows ``Q`` (N, K) of the simplex moved the least-structured way so that their
    ``w``-weighted column sums equal ``target`` (K,) (which sums to :math:`\sum_i w_i`): each
    column with too much mass gives up the same fraction of every row's entry, and the mass
    freed in a row is shared among the columns short of mass in proportion to their shortage.
    Rows stay in the simplex; the result is exact up to rounding."""
    N, K = Q.shape
    have = np.zeros(K)
    for i in range(N):
        for k in range(K):
            have[k] += w[i] * Q[i, k]
    r = have - target
    R = 0.0
    for k in range(K):
        if r[k] > 0.0:
            R += r[k]
    out = Q.copy()
    if R <= 0.0:
        return out
    for i in range(N):
        freed = 0.0
        for k in range(K):
            if r[k] > 0.0 and have[k] > 0.0:
                d = Q[i, k] * (r[k] / have[k])
                out[i, k] = Q[i, k] - d
                freed += d
        for k in range(K):
            if r[k] < 0.0:
                out[i, k] += freed * (-r[k] / R)
    return out


def _one_hot(y: Any, n_classes: int) -> np.ndarray:
    """The (N, K) indicator of the class indices ``y``: 1 at each row's class, 0 elsewhere."""
    yi = np.asarray(y).astype(np.int64)
    E = np.zeros((yi.shape[0], n_classes))
    E[np.arange(yi.shape[0]), yi] = 1.0
    return E


class MulticlassLoss(Component):
    r"""A loss of K outputs :math:`L(y, F)`, :math:`y` a class index, :math:`F \in \mathbb R^K`:
    the kernels of :class:`MulticlassLossJit` as ``@kernel`` methods, grouped read-only as ``jit``.

    The joint problem (``docs/multiclass.md``) has the dual variables :math:`P \in \mathbb
    R^{N\times K}` with :math:`-P_i/w_i` in the domain of :math:`L^*(y_i, \cdot)`.  The default
    :meth:`dual_point` is that of a conjugate whose domain is the shifted simplex
    :math:`\{q - e_{y}: q \in \Delta_K\}` (the multinomial and the Crammer–Singer losses); a
    loss with another domain overrides it.  The domain must be convex and contain 0 (then a
    point scaled towards 0 stays feasible).

    Class attributes: ``smooth_primal`` (:math:`\partial_F L` Lipschitz with constant
    :meth:`grad_lipschitz`, which a proximal-gradient method needs) and ``has_proba`` (the
    loss's outputs are class log-odds: :meth:`proba`).
    """

    kind: ClassVar[str] = "multiclass_loss"
    smooth_primal: ClassVar[bool] = True
    has_proba: ClassVar[bool] = False
    KERNELS: ClassVar[tuple[str, ...]] = MulticlassLossJit._fields

    _GROUPS = ("jit",)
    jit = _grouped(MulticlassLossJit)

    def grad_lipschitz(self, n_classes: int) -> float:
        r"""A bound on the spectral norm of :math:`\partial_F^2 L(y, F)` over all F of ``n_classes`` outputs
        (``inf`` if none)."""
        return math.inf

    def validate_labels(self, y: Any, n_classes: int) -> np.ndarray:
        """The class indices as a float64 vector; :class:`LabelError` unless integers in [0, n_classes)."""
        y = np.asarray(y)
        if y.ndim != 1 or y.size == 0:
            raise LabelError(f"multiclass labels must be a non-empty 1-d vector of class indices; got shape {y.shape}")
        yf = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(yf)) or np.any(yf != np.round(yf)) or np.any(yf < 0) or np.any(yf >= n_classes):
            raise LabelError(f"multiclass labels must be class indices 0..{n_classes - 1}; got values outside them")
        return np.ascontiguousarray(yf)

    def optimal_offset(self, y: np.ndarray, w: np.ndarray, n_classes: int) -> np.ndarray:
        r"""The offset :math:`b \in \mathbb R^K` minimizing :math:`\sum_i w_iL(y_i, b)` (the model without
        kernels), centred.  By default numerically: L-BFGS from 0 on the loss's own kernels (a loss invariant to
        adding a constant to every output, as the joint problem's losses are); a loss with a closed form
        overrides it."""
        from scipy.optimize import minimize

        counts = np.bincount(y.astype(np.int64), weights=w, minlength=n_classes)
        if np.any(counts <= 0.0):
            missing = [int(k) for k in np.flatnonzero(counts <= 0.0)]
            raise LabelError(f"every class needs a sample of weight > 0; classes {missing} have none")
        p = self.param_vector
        N = y.shape[0]

        def value_grad(b: np.ndarray) -> tuple[float, np.ndarray]:
            F = np.ascontiguousarray(np.tile(b, (N, 1)))
            return float(w @ self.jit.value(y, F, p)), (w[:, None] * self.jit.grad(y, F, p)).sum(axis=0)

        opts = {"gtol": 1e-12, "ftol": 0.0, "maxiter": 1000}
        res = minimize(value_grad, np.zeros(n_classes), jac=True, method="L-BFGS-B", options=opts)
        b = np.asarray(res.x, dtype=np.float64)
        return b - b.mean()

    def dual_point(self, y: np.ndarray, G: np.ndarray, w: np.ndarray, bias: bool) -> np.ndarray:
        r"""A dual point :math:`P` near :math:`-G` (``G`` the weighted loss gradient
        :math:`w_i\partial_F L(y_i, F_i)`) with :math:`-P_i/w_i` in the domain of
        :math:`L^*(y_i,\cdot)` and, with a bias, :math:`\mathbf 1^\top P = 0`.

        Shifted simplex: :math:`q_i = e_{y_i} + G_i/w_i` clipped at 0 and renormalised into
        :math:`\Delta_K`, moved by :func:`simplex_transport` so that :math:`\sum_i w_iq_i` equals the
        weighted class counts (the bias constraint), and :math:`P_i = w_i(e_{y_i} - q_i)`.
        """
        E = _one_hot(y, G.shape[1])
        Q = np.maximum(E + G / w[:, None], 0.0)
        s = Q.sum(axis=1)
        Q = np.where(s[:, None] > 0.0, Q / np.where(s > 0.0, s, 1.0)[:, None], E)
        if bias:
            Q = simplex_transport(np.ascontiguousarray(Q), w, (w[:, None] * E).sum(axis=0))
        return w[:, None] * (E - Q)

    def proba(self, F: np.ndarray) -> np.ndarray:
        """Class probabilities of the outputs ``F`` (N, K), for a loss with ``has_proba``."""
        raise NotImplementedError(f"the multiclass loss {self.name!r} gives no class probabilities")

    def cvxpy_expr(self, y: np.ndarray, F: Any, w: np.ndarray | None = None) -> Any:
        r""":math:`\sum_i w_iL(y_i, F_i)` as a cvxpy expression of ``F`` (N, K), or ``NotImplemented``."""
        return NotImplemented


@njit(cache=True)
def _shifted_simplex_point(y, U, i):
    r"""Row ``i``'s :math:`q = U_i + e_{y_i}` when it lies in the simplex :math:`\Delta_K` (entries >= -1e-12,
    sum within 1e-9 of 1: the domain of the conjugates of the multinomial and Crammer–Singer losses), else an
    empty array."""
    K = U.shape[1]
    q = np.empty(K)
    total = 0.0
    for k in range(K):
        q[k] = U[i, k] + (1.0 if k == int(y[i]) else 0.0)
        if q[k] < -1e-12:
            return np.empty(0)
        total += q[k]
    if abs(total - 1.0) > 1e-9:
        return np.empty(0)
    return q


def softmax(F: np.ndarray) -> np.ndarray:
    """Row-wise softmax, computed stably."""
    Z = F - F.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


class Multinomial(MulticlassLoss):
    r"""Multinomial logistic (softmax cross-entropy) loss
    :math:`L(y, F) = \log\sum_k e^{F_k} - F_y`.

    Gradient :math:`\partial_F L = \mathrm{softmax}(F) - e_y`; its Hessian
    :math:`\mathrm{diag}(p) - pp^\top` has spectral norm at most 1/2.  Conjugate: with
    :math:`U = q - e_y`, :math:`L^*(y, U) = \sum_k q_k\log q_k` (negative entropy) for
    :math:`q \in \Delta_K`, ``inf`` otherwise.  For K = 2 it is the binary logistic loss of
    :math:`z = F_1 - F_0`.
    """

    name = "multinomial"
    description = "multinomial logistic (softmax cross-entropy) loss of K outputs"
    has_proba = True

    @kernel
    def value(y, F, params):
        N, K = F.shape
        out = np.empty(N)
        for i in range(N):
            top = F[i, 0]
            for k in range(1, K):
                top = max(top, F[i, k])
            s = 0.0
            for k in range(K):
                s += math.exp(F[i, k] - top)
            out[i] = top + math.log(s) - F[i, int(y[i])]
        return out

    @kernel
    def grad(y, F, params):
        N, K = F.shape
        out = np.empty((N, K))
        for i in range(N):
            top = F[i, 0]
            for k in range(1, K):
                top = max(top, F[i, k])
            s = 0.0
            for k in range(K):
                out[i, k] = math.exp(F[i, k] - top)
                s += out[i, k]
            for k in range(K):
                out[i, k] /= s
            out[i, int(y[i])] -= 1.0
        return out

    @kernel
    def conj(y, U, params):
        N = U.shape[0]
        out = np.empty(N)
        for i in range(N):
            q = _shifted_simplex_point(y, U, i)
            if q.size == 0:
                out[i] = INF
                continue
            val = 0.0
            for k in range(q.size):
                if q[k] > 0.0:
                    val += q[k] * math.log(q[k])
            out[i] = val
        return out

    def grad_lipschitz(self, n_classes: int) -> float:
        return 0.5

    def optimal_offset(self, y: np.ndarray, w: np.ndarray, n_classes: int) -> np.ndarray:
        r""":math:`b_k = \log\pi_k`, :math:`\pi_k` the weighted class frequencies (softmax(b) = π)."""
        counts = np.bincount(y.astype(np.int64), weights=w, minlength=n_classes).astype(np.float64)
        if np.any(counts <= 0.0):
            missing = [int(k) for k in np.flatnonzero(counts <= 0.0)]
            raise LabelError(f"every class needs a sample of weight > 0; classes {missing} have none")
        b = np.log(counts / counts.sum())
        return b - b.mean()

    def proba(self, F: np.ndarray) -> np.ndarray:
        """:math:`\\mathrm{softmax}(F)` row by row."""
        return softmax(np.asarray(F, dtype=np.float64))

    def cvxpy_expr(self, y: np.ndarray, F: Any, w: np.ndarray | None = None) -> Any:
        import cvxpy as cp

        N, K = F.shape
        E = _one_hot(y, K)
        terms = cp.log_sum_exp(F, axis=1) - cp.sum(cp.multiply(E, F), axis=1)
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(np.asarray(w, dtype=np.float64), terms))


@njit(cache=True)
def _simplex_projection(v):
    r"""The Euclidean projection of ``v`` (K,) onto the simplex :math:`\Delta_K` (sort and threshold:
    Held, Wolfe & Crowder 1974; Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    total = 0.0
    theta = 0.0
    for j in range(u.shape[0]):
        total += u[j]
        t = (total - 1.0) / (j + 1)
        if u[j] - t > 0.0:
            theta = t
    return np.maximum(v - theta, 0.0)


@njit(cache=True)
def _cs_point(y, F, gamma, i):
    r"""Row ``i``'s maximizer :math:`q^* = \mathrm{proj}_{\Delta}((c + F_i)/\gamma)`, :math:`c = \mathbf 1 - e_y`,
    and :math:`z = c + F_i`."""
    K = F.shape[1]
    z = np.empty(K)
    for k in range(K):
        z[k] = F[i, k] + (0.0 if k == int(y[i]) else 1.0)
    return _simplex_projection(z / gamma), z


class CrammerSinger(MulticlassLoss):
    r"""The multiclass hinge of Crammer & Singer (2001) smoothed with parameter :math:`\gamma > 0`
    (Nesterov 2005; Shalev-Shwartz & Zhang 2016):

    .. math::
        L_\gamma(y, F) = \max_{q \in \Delta_K}\ \langle q, c + F\rangle - \tfrac\gamma2\|q\|^2 - F_y,
        \qquad c = \mathbf 1 - e_y,

    where the hinge :math:`L(y, F) = \max_k (1[k \ne y] + F_k - F_y)` drops the quadratic:
    :math:`L - \gamma/2 \le L_\gamma \le L - \gamma/(2K)`, so the joint problem's optimum with
    :math:`L_\gamma` is within :math:`\gamma\sum_iw_i/2` of the hinge's.  Gradient
    :math:`q^* - e_y` with :math:`q^* = \mathrm{proj}_{\Delta}((c + F)/\gamma)`, Lipschitz with constant
    :math:`1/\gamma`.  Conjugate: with :math:`U = q - e_y`, :math:`q \in \Delta_K`,
    :math:`L_\gamma^*(y, U) = -\langle U, c\rangle + \tfrac\gamma2\|q\|^2`; the shifted simplex of
    :meth:`MulticlassLoss.dual_point`.  ``params = [smoothing]``.
    """

    name = "crammer_singer"
    description = "multiclass hinge of Crammer & Singer, smoothed (K outputs)"
    params = (Param("smoothing", 0.1, "gamma: the quadratic that smooths the hinge", low=0.0, low_open=True),)

    @kernel
    def value(y, F, params):
        gamma = params[0]
        N = F.shape[0]
        out = np.empty(N)
        for i in range(N):
            q, z = _cs_point(y, F, gamma, i)
            out[i] = np.dot(q, z) - 0.5 * gamma * np.dot(q, q) - F[i, int(y[i])]
        return out

    @kernel
    def grad(y, F, params):
        gamma = params[0]
        N, K = F.shape
        out = np.empty((N, K))
        for i in range(N):
            q, _ = _cs_point(y, F, gamma, i)
            for k in range(K):
                out[i, k] = q[k]
            out[i, int(y[i])] -= 1.0
        return out

    @kernel
    def conj(y, U, params):
        gamma = params[0]
        N = U.shape[0]
        out = np.empty(N)
        for i in range(N):
            q = _shifted_simplex_point(y, U, i)
            if q.size == 0:
                out[i] = INF
                continue
            # -<U, 1 - e_y> = -(sum of q off the label's entry), on the simplex
            out[i] = -(np.sum(q) - q[int(y[i])]) + 0.5 * gamma * np.dot(q, q)
        return out

    def grad_lipschitz(self, n_classes: int) -> float:
        return 1.0 / float(self.param_vector[0])

    def cvxpy_expr(self, y: np.ndarray, F: Any, w: np.ndarray | None = None) -> Any:
        r"""By duality :math:`\max_{q\in\Delta}\langle q, z\rangle - \tfrac\gamma2\|q\|^2 = \min_t\, t +
        \sum_k(z_k - t)_+^2/(2\gamma)`: an auxiliary variable per row, minimized with the problem."""
        import cvxpy as cp

        gamma = float(self.param_vector[0])
        N, K = F.shape
        E = _one_hot(y, K)
        t = cp.Variable(N)
        Z = F + (1.0 - E)
        terms = (
            t
            + cp.sum(cp.square(cp.pos(Z - cp.reshape(t, (N, 1), order="C") @ np.ones((1, K)))), axis=1) / (2 * gamma)
            - cp.sum(cp.multiply(E, F), axis=1)
        )
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(np.asarray(w, dtype=np.float64), terms))


@njit(cache=True)
def _smoothed_hinge(t, gamma):
    r"""The hinge :math:`(t)_+` smoothed with parameter :math:`\gamma` (its Moreau envelope) and its derivative."""
    if t <= 0.0:
        return 0.0, 0.0
    if t < gamma:
        return 0.5 * t * t / gamma, t / gamma
    return t - 0.5 * gamma, 1.0


@njit(cache=True)
def max_circulation(F):
    r"""A circulation :math:`0 \le f \le F` on the complete directed graph of capacities ``F`` (K, K) (the
    diagonal ignored) that leaves no cycle of positive capacity unused: cycles are found by depth-first search
    in the graph of the capacities left, two-cycles first, and each takes the capacity of its narrowest edge.
    Every node's inflow equals its outflow up to rounding (each cycle adds the same amount to both)."""
    K = F.shape[0]
    left = F.copy()
    f = np.zeros((K, K))
    for a in range(K):
        left[a, a] = 0.0
    for a in range(K):  # two-cycles
        for b in range(a + 1, K):
            d = min(left[a, b], left[b, a])
            if d > 0.0:
                f[a, b] += d
                f[b, a] += d
                left[a, b] -= d
                left[b, a] -= d
    parent = np.empty(K, np.int64)
    state = np.empty(K, np.int64)  # 0 unseen, 1 on the path, 2 done
    stack = np.empty(K, np.int64)
    nxt = np.empty(K, np.int64)
    while True:
        found = False
        state[:] = 0
        for s in range(K):
            if found or state[s] != 0:
                continue
            top = 0
            stack[0] = s
            nxt[s] = 0
            state[s] = 1
            while top >= 0 and not found:
                u = stack[top]
                if nxt[u] >= K:
                    state[u] = 2
                    top -= 1
                    continue
                v = nxt[u]
                nxt[u] += 1
                if v == u or left[u, v] <= 0.0:
                    continue
                if state[v] == 1:  # a cycle v -> ... -> u -> v
                    d = left[u, v]
                    x = u
                    while x != v:
                        d = min(d, left[parent[x], x])
                        x = parent[x]
                    f[u, v] += d
                    left[u, v] -= d
                    x = u
                    while x != v:
                        f[parent[x], x] += d
                        left[parent[x], x] -= d
                        x = parent[x]
                    found = True
                elif state[v] == 0:
                    parent[v] = u
                    state[v] = 1
                    nxt[v] = 0
                    top += 1
                    stack[top] = v
        if not found:
            return f


class WestonWatkins(MulticlassLoss):
    r"""The multiclass hinge of Weston & Watkins (1999), each of its terms smoothed with parameter
    :math:`\gamma > 0`:

    .. math::
        L_\gamma(y, F) = \sum_{k \ne y} h_\gamma(1 + F_k - F_y), \qquad
        h_\gamma(t) = \max_{a \in [0, 1]}\ at - \tfrac\gamma2 a^2,

    :math:`h_\gamma` the hinge :math:`(t)_+` smoothed (0, :math:`t^2/(2\gamma)`, :math:`t - \gamma/2`), so
    :math:`L - (K-1)\gamma/2 \le L_\gamma \le L` and the joint problem's optimum with :math:`L_\gamma` is within
    :math:`(K-1)\gamma\sum_iw_i/2` of the hinge's.  Gradient: :math:`a_k = h_\gamma'(1 + F_k - F_y)` for
    :math:`k \ne y` and :math:`-\sum_{k \ne y} a_k` at :math:`y`; its Hessian is :math:`D^\top\mathrm{diag}(h'')D`
    with :math:`D = [I \mid -\mathbf 1]`, so the gradient is Lipschitz with constant :math:`K/\gamma`.
    Conjugate: :math:`L_\gamma^*(y, U) = \sum_{k\ne y}(\tfrac\gamma2U_k^2 - U_k)` on
    :math:`\{U: U_k \in [0, 1]\ (k \ne y),\ \sum_k U_k = 0\}` (:meth:`dual_point`).  ``params = [smoothing]``.
    """

    name = "weston_watkins"
    description = "multiclass hinge of Weston & Watkins, smoothed (K outputs)"
    params = (Param("smoothing", 0.1, "gamma: the quadratic that smooths each hinge", low=0.0, low_open=True),)

    @kernel
    def value(y, F, params):
        gamma = params[0]
        N, K = F.shape
        out = np.zeros(N)
        for i in range(N):
            c = int(y[i])
            for k in range(K):
                if k != c:
                    out[i] += _smoothed_hinge(1.0 + F[i, k] - F[i, c], gamma)[0]
        return out

    @kernel
    def grad(y, F, params):
        gamma = params[0]
        N, K = F.shape
        out = np.zeros((N, K))
        for i in range(N):
            c = int(y[i])
            for k in range(K):
                if k != c:
                    a = _smoothed_hinge(1.0 + F[i, k] - F[i, c], gamma)[1]
                    out[i, k] = a
                    out[i, c] -= a
        return out

    @kernel
    def conj(y, U, params):
        gamma = params[0]
        N, K = U.shape
        out = np.empty(N)
        for i in range(N):
            c = int(y[i])
            val = 0.0
            total = 0.0
            scale = 1.0
            inside = True
            for k in range(K):
                total += U[i, k]
                scale += abs(U[i, k])
                if k != c:
                    if U[i, k] < -1e-12 or U[i, k] > 1.0 + 1e-12:
                        inside = False
                    val += 0.5 * gamma * U[i, k] * U[i, k] - U[i, k]
            out[i] = val if inside and abs(total) <= 1e-9 * scale else INF
        return out

    def grad_lipschitz(self, n_classes: int) -> float:
        return float(n_classes) / float(self.param_vector[0])

    def dual_point(self, y: np.ndarray, G: np.ndarray, w: np.ndarray, bias: bool) -> np.ndarray:
        r""":math:`U_i = G_i/w_i` with the entries off the label clipped into [0, 1] and the label's entry minus
        their sum.  With a bias, :math:`\sum_iw_iU_i = 0` is a circulation: :math:`w_iU_{ik}` is a flow from class
        :math:`y_i` to class :math:`k`, and every class must receive what it sends.  The flows between each pair
        of classes are scaled down to a circulation within them (:func:`max_circulation`).  :math:`P = -wU`."""
        N, K = G.shape
        yi = y.astype(np.int64)
        U = np.clip(G / w[:, None], 0.0, 1.0) * (1.0 - _one_hot(yi, K))
        if bias:
            flows = np.zeros((K, K))
            np.add.at(flows, yi, w[:, None] * U)
            kept = max_circulation(flows)
            ratio = np.divide(kept, flows, out=np.zeros((K, K)), where=flows > 0.0)
            U = U * np.minimum(ratio[yi], 1.0)
        U[np.arange(N), yi] = -U.sum(axis=1)
        return -w[:, None] * U

    def cvxpy_expr(self, y: np.ndarray, F: Any, w: np.ndarray | None = None) -> Any:
        r""":math:`h_\gamma(t) = \min_s\, (s)_+ + (t - s)^2/(2\gamma)` (the Moreau envelope of the hinge): an
        auxiliary variable per output, minimized with the problem."""
        import cvxpy as cp

        gamma = float(self.param_vector[0])
        N, K = F.shape
        E = _one_hot(y, K)
        S = cp.Variable((N, K))
        T = 1.0 + F - cp.reshape(cp.sum(cp.multiply(E, F), axis=1), (N, 1), order="C") @ np.ones((1, K))
        terms = cp.sum(cp.multiply(1.0 - E, cp.pos(S) + cp.square(T - S) / (2 * gamma)), axis=1)
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(np.asarray(w, dtype=np.float64), terms))


BUILTIN_MULTICLASS_LOSSES = (Multinomial, CrammerSinger, WestonWatkins)
