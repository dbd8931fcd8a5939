r"""The optimisation problems of the weightings, each solved with a certificate:

* :func:`nonnegative_qp`: :math:`\min_{v \ge 0} v^\top M v - 2 v^\top a` (ALIGNF), exactly, by non-negative least
  squares on a square root of :math:`M`; certified by its KKT conditions.
* :func:`simplex_pair_qp`: :math:`\min_{\gamma \in \Gamma} \gamma^\top A\gamma` on the product :math:`\Gamma` of
  the simplices of two classes (EasyMKL), by accelerated projected gradient reading only products :math:`Av`;
  certified by the Frank-Wolfe gap, an upper bound on the distance to the optimal value.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import nnls

from ..result import ConvergenceWarning


@dataclass(frozen=True)
class QPSolution:
    """A solution ``x`` with its certificate: ``status`` (``"converged"`` or ``"max_iter"``), ``gap`` (the
    Frank-Wolfe gap, or the largest violation of the KKT conditions relative to the data), ``iterations``
    and the ``objective``."""

    x: np.ndarray
    objective: float
    gap: float
    iterations: int
    status: str

    @property
    def converged(self) -> bool:
        return self.status == "converged"


#: The relative size of a diagonal entry of :math:`M` below which :func:`nonnegative_qp` takes its coordinate as null.
_NULL_DIAGONAL = 1e-10


def nonnegative_qp(M: np.ndarray, a: np.ndarray, tol: float = 1e-9) -> QPSolution:
    r"""The minimiser of :math:`v^\top M v - 2v^\top a` over :math:`v \ge 0`, for :math:`M` symmetric positive
    semi-definite and :math:`a` in its range.

    Coordinates with :math:`M_{kk} \le 10^{-10}\max_l M_{ll}` (a kernel constant after centring: its
    :math:`a_k` is rounding noise as well) are left at 0.  On the others, with :math:`M = Q\Lambda Q^\top` (the
    eigenvalues above :math:`10^{-12}\lambda_{max}` kept),
    :math:`R = \Lambda^{1/2}Q^\top` and :math:`b = \Lambda^{-1/2}Q^\top a`,
    :math:`\|Rv - b\|^2 = v^\top Mv - 2v^\top a + \|b\|^2`: the problem is the non-negative least-squares problem
    of :math:`(R, b)`, solved exactly by the active-set method of Lawson and Hanson (``scipy.optimize.nnls``).

    The certificate ``gap`` is the largest violation of the KKT conditions :math:`g = Mv - a \ge 0`,
    :math:`g_k = 0` where :math:`v_k > 0`, relative to :math:`\max(\|a\|_\infty, \|M\|\,\|v\|_\infty)`; ``status`` is
    ``"converged"`` when it is at most ``tol``.
    """
    M = 0.5 * (np.asarray(M, dtype=np.float64) + np.asarray(M, dtype=np.float64).T)
    a = np.asarray(a, dtype=np.float64)
    diag = np.diag(M)
    top_diag = float(diag.max()) if diag.size else 0.0
    # a coordinate whose M_kk is rounding noise (a kernel that is constant after centring) has a_k of
    # noise too: left at 0, or the noise would be an unbounded direction of descent
    live = np.flatnonzero(diag > _NULL_DIAGONAL * top_diag) if top_diag > 0.0 else np.zeros(0, dtype=np.int64)
    v = np.zeros_like(a)
    if live.size == 0:
        return QPSolution(v, 0.0, 0.0, 0, "converged")
    lam, Q = np.linalg.eigh(M[np.ix_(live, live)])
    top = float(lam[-1])
    keep = lam > 1e-12 * top
    root = np.sqrt(lam[keep])
    R = root[:, None] * Q[:, keep].T
    b = (Q[:, keep].T @ a[live]) / root
    v[live], _ = nnls(R, b, maxiter=50 * max(1, live.size))
    g = M @ v - a
    g[np.setdiff1d(np.arange(a.size), live)] = 0.0  # the null coordinates: no condition
    scale = max(float(np.max(np.abs(a))), top * float(np.max(np.abs(v))), np.finfo(float).tiny)
    active = v > 0.0
    violation = max(float(np.max(np.maximum(-g, 0.0))), float(np.max(np.abs(g[active]), initial=0.0)))
    gap = violation / scale
    objective = float(v @ M @ v - 2.0 * v @ a)
    return QPSolution(v, objective, gap, int(np.count_nonzero(v)), "converged" if gap <= tol else "max_iter")


def _project_simplex(v: np.ndarray) -> np.ndarray:
    """The Euclidean projection of ``v`` on the unit simplex (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    ind = np.arange(1, v.size + 1)
    rho = int(np.nonzero(u - css / ind > 0)[0][-1])
    return np.maximum(v - css[rho] / (rho + 1.0), 0.0)


def _project_pair(v: np.ndarray, pos: np.ndarray) -> np.ndarray:
    out = np.empty_like(v)
    out[pos] = _project_simplex(v[pos])
    out[~pos] = _project_simplex(v[~pos])
    return out


def _fw_gap(x: np.ndarray, g: np.ndarray, pos: np.ndarray) -> float:
    r""":math:`g^\top x - \min_{s \in \Gamma} g^\top s` (the minimum at a vertex of each simplex)."""
    return float(g @ x - g[pos].min() - g[~pos].min())


def _support_solution(block: Callable[[np.ndarray], np.ndarray], x: np.ndarray, pos: np.ndarray) -> np.ndarray | None:
    r"""The minimiser of :math:`\gamma^\top A\gamma` on the affine hull of the face of :math:`\Gamma` that ``x``
    lies on (its support :math:`S`), from the KKT system of :math:`A_{SS}` (``block(S)``); ``None`` when it leaves
    the face (a negative entry) or the system is singular."""
    S = np.flatnonzero(x > 0.0)
    E = np.vstack([pos[S], ~pos[S]]).astype(np.float64)
    n = S.size
    kkt = np.zeros((n + 2, n + 2))
    kkt[:n, :n] = 2.0 * block(S)
    kkt[:n, n:], kkt[n:, :n] = E.T, E
    rhs = np.concatenate([np.zeros(n), [1.0, 1.0]])
    try:
        sol = np.linalg.solve(kkt, rhs)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(sol[:n])) or np.any(sol[:n] < 0.0):
        return None
    out = np.zeros_like(x)
    out[S] = sol[:n]
    return out


def simplex_pair_qp(
    apply: Callable[[np.ndarray], np.ndarray],
    pos: np.ndarray,
    *,
    block: Callable[[np.ndarray], np.ndarray] | None = None,
    tol: float = 1e-8,
    max_iter: int = 100_000,
    lipschitz: float | None = None,
    owner: str = "easymkl",
) -> QPSolution:
    r"""The minimiser of :math:`f(\gamma) = \gamma^\top A\gamma` over
    :math:`\Gamma = \{\gamma \ge 0: \sum_{i \in P}\gamma_i = 1, \sum_{i \notin P}\gamma_i = 1\}`, :math:`A`
    symmetric positive semi-definite given by its products ``apply(v)`` :math:`= Av`.

    Accelerated projected gradient (FISTA with the backtracking of :math:`L` and the gradient restart of
    O'Donoghue & Candès 2015), one product :math:`Av` per iteration (and one per backtracking step): the product
    at the extrapolated point is the same combination of the products at the last two iterates.  With ``block``
    (:math:`A_{SS}` of a set of rows :math:`S`), each time the Frank-Wolfe gap has fallen a hundredfold the
    minimiser on the current face (the support of the iterate) is solved from its KKT system and taken when it
    stays in :math:`\Gamma` and lowers the gap: the face is usually found long before projected gradient reaches a
    tight gap.  Stops when the Frank-Wolfe gap
    :math:`G(\gamma) = \nabla f(\gamma)^\top\gamma - \min_{s \in \Gamma}\nabla f(\gamma)^\top s \ge f(\gamma) - f^*`
    is at most ``tol`` :math:`\max(1, f(\gamma))`; otherwise warns with :class:`~mklkit.ConvergenceWarning` after
    ``max_iter`` iterations.

    Parameters
    ----------
    apply : callable
        ``apply(v)`` :math:`= Av` for a vector (N,).
    pos : ndarray of bool (N,)
        The rows of the first simplex (the positive class); the others form the second.
    block : callable, optional
        ``block(S)`` :math:`= A_{SS}` for row indices ``S``.
    tol : float
        Relative Frank-Wolfe gap at which to stop.
    max_iter : int
        Iterations at most.
    lipschitz : float, optional
        A first estimate of :math:`\lambda_{max}(A)` (default: 20 power iterations); backtracking corrects it.
    """
    pos = np.asarray(pos, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"{owner}: the target needs rows of both classes; got {n_pos} positive and {n_neg} negative")
    x = np.where(pos, 1.0 / n_pos, 1.0 / n_neg)
    Ax = apply(x)
    if lipschitz is None:
        v = np.random.default_rng(0).standard_normal(x.size)
        est = 0.0
        for _ in range(20):
            w = apply(v)
            est = float(np.linalg.norm(w))
            v = w / est if est > 0 else v
        lipschitz = est
    L = max(2.0 * float(lipschitz), 1e-12)  # of the gradient 2Ax
    x_prev, Ax_prev, t = x, Ax, 1.0
    f = float(x @ Ax)
    gap = _fw_gap(x, 2.0 * Ax, pos)
    polish_at = 1e-2 * gap
    it = 0
    while gap > tol * max(1.0, f) and it < max_iter:
        it += 1
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        beta = (t - 1.0) / t_next
        y = x + beta * (x - x_prev)
        Ay = Ax + beta * (Ax - Ax_prev)
        gy = 2.0 * Ay
        while True:
            z = _project_pair(y - gy / L, pos)
            Az = apply(z)
            d = z - y
            # f(z) = f(y) + grad f(y)'d + d'Ad exactly: the step is accepted when d'Ad <= L/2 |d|^2
            if float(d @ (Az - Ay)) <= 0.5 * L * float(d @ d) * (1.0 + 1e-12):
                break
            L *= 2.0
        fz = float(z @ Az)
        if float(gy @ (z - x)) > 0.0 or fz > f:  # restart: the momentum points uphill
            t_next = 1.0
        x_prev, Ax_prev, x, Ax, t, f = x, Ax, z, Az, t_next, fz
        gap = _fw_gap(x, 2.0 * Ax, pos)
        if block is not None and gap <= polish_at and gap > tol * max(1.0, f):
            polish_at = 1e-2 * gap
            cand = _support_solution(block, x, pos)
            if cand is not None:
                Ac = apply(cand)
                fc, gc = float(cand @ Ac), _fw_gap(cand, 2.0 * Ac, pos)
                if gc < gap and fc <= f + 1e-12 * max(1.0, abs(f)):
                    x_prev, Ax_prev, x, Ax, t, f, gap = cand, Ac, cand, Ac, 1.0, fc, gc
    status = "converged" if gap <= tol * max(1.0, f) else "max_iter"
    if status != "converged":
        warnings.warn(
            f"{owner}: the margin problem stopped after {it} iterations with Frank-Wolfe gap {gap:.3g} "
            f"(tol {tol:g} x max(1, objective)); raise max_iter or tol",
            ConvergenceWarning,
            stacklevel=3,
        )
    return QPSolution(x, f, gap, it, status)
