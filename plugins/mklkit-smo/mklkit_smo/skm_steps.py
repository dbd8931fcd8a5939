r"""Steps of the SKM's Moreau-Yosida regularized dual :math:`G` along a whole direction
(the SMO loop moves two variables at a time): the exact line search, the extrapolation
along the last stage's displacement and the Newton step on the free variables.

Directions ``d`` live in the space of ``beta`` and keep :math:`y^\top d = 0`.  Each step
needs the full (unshrunk) state and a precomputed bank.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .skm_run import _SkmRun

__all__ = ["extrapolate", "newton_step"]

#: Rounds of a Newton step (free variables that would leave their box are held fixed and
#: the system solved again), and the largest free set.
_NEWTON_ROUNDS = 3
_NEWTON_MAX = 2000


def extrapolate(run: _SkmRun, direction: np.ndarray) -> float:
    r"""A line search on the current stage's :math:`G` along the last stage's displacement.

    From one stage to the next the solution :math:`\alpha(\kappa)` moves along
    the valley of :math:`G` where the active kernels keep :math:`J_j(\alpha)`
    (nearly) equal.  Across the valley the curvature of :math:`G` grows like
    :math:`1/\kappa^2`, so SMO's two-variable steps, which all cross it, follow
    the valley only in tiny steps: the last stages took most of the SMO steps
    on larger data sets while :math:`\alpha` hardly moved.  The displacement of
    the previous stage, :math:`\alpha_k - \alpha_{k-1}`, points along the valley;
    this step minimizes :math:`G` exactly along it (a one-dimensional convex
    problem, by bisection on :math:`G'`, :func:`~mklkit_smo._skm.skm_line_min`).  The
    direction is made feasible first: components that would leave :math:`[0, U]` at
    once, or before the minimizer, are set to zero and :math:`y^\top d = 0` is restored
    on the free components, so the step keeps the constraints.  SMO then solves the
    stage as before (a descent step does not change what it converges to, nor its
    stopping test).  Needs the full (unshrunk) state and a precomputed bank.  Returns
    the step length (0: none).
    """
    beta = run.beta
    ub = run.ub
    y = run.z
    interior = (beta > 0.0) & (beta < ub)
    D = np.array(direction, dtype=np.float64)
    D[~np.isfinite(D)] = 0.0
    blocked = ((D > 0.0) & (beta >= ub)) | ((D < 0.0) & (beta <= 0.0))
    for _ in range(8):
        D[blocked] = 0.0
        free = (D != 0.0) & interior
        r = float(y @ D)
        if r != 0.0:
            # y^T d = 0 again, by the least change on the free components
            if not np.any(free):
                return 0.0
            D[free] -= y[free] * (r / np.count_nonzero(free))
        nz = D != 0.0
        if not np.any(nz):
            return 0.0
        tmax = _room(run, D)
        w, q = _forms(run, D)
        # the minimizer along the line with the box ignored (G is defined there too)
        t_line = _line_min(run, w, q, D, max(4.0 * tmax, 1.0) if tmax < math.inf else 1.0)
        if t_line <= tmax or not t_line > 0.0:
            break
        # leave out the components that reach their bound before the minimizer
        blocked = nz & (_ratios(run, D) < t_line)
    else:
        return 0.0
    if not tmax > 0.0:
        return 0.0
    t = _line_min(run, w, q, D, min(tmax, t_line) if t_line > 0.0 else tmax)
    return _take_step(run, D, t, w, q)


def _ratios(run: _SkmRun, D: np.ndarray) -> np.ndarray:
    """The t at which each component of beta + t d reaches its bound (inf where d = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(D > 0.0, run.ub - run.beta, run.beta)
        return np.where(D != 0.0, room / np.abs(D), math.inf)


def _room(run: _SkmRun, D: np.ndarray) -> float:
    """The largest t with beta + t d in the box."""
    return float(np.min(_ratios(run, D), initial=math.inf))


def _forms(run: _SkmRun, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w_j = (D(y)d)^T K_j D(y) alpha and q_j = d^T D(y) K_j D(y) d (O(m |d|^2))."""
    gd = run.z * D
    sv = np.ascontiguousarray(np.flatnonzero(gd), dtype=np.int64)
    u = np.zeros_like(run.v)
    run.smo.sync_precomputed(run.K, sv, np.ascontiguousarray(gd[sv]), sv, sv.size, True, u)
    return run.v[:, sv] @ gd[sv], u[:, sv] @ gd[sv]


def _line_min(run: _SkmRun, w: np.ndarray, q: np.ndarray, D: np.ndarray, hi: float) -> float:
    """The minimizer of G along d over [0, hi] (bisection on G', convex)."""
    from ._skm import skm_line_min

    return float(
        skm_line_min(
            np.ascontiguousarray(run.c, dtype=np.float64),
            np.ascontiguousarray(w),
            np.ascontiguousarray(q),
            float(np.sum(D)),
            run.reg.bpar,
            hi,
        )
    )


def _take_step(run: _SkmRun, D: np.ndarray, t: float, w: np.ndarray, q: np.ndarray) -> float:
    """alpha += t d (components reaching a bound snapped to it) when G decreases; t or 0."""
    from ._skm import skm_phi

    if not t > 0.0:
        return 0.0
    c0 = np.ascontiguousarray(run.c, dtype=np.float64)
    ct = np.maximum(c0 + t * (2.0 * w + t * q), 0.0)
    if not skm_phi(ct, run.reg.bpar) - t * float(np.sum(D)) < skm_phi(c0, run.reg.bpar):
        return 0.0  # no decrease of G (rounding)
    beta, ub = run.beta, run.ub
    new = beta + t * D
    hit = (D != 0.0) & (_ratios(run, D) <= t)
    top = hit & (D > 0.0)
    new[top] = ub[top]
    new[hit & (D < 0.0)] = 0.0
    new = np.minimum(np.maximum(new, 0.0), ub)
    g0 = run.gamma.copy()
    run.beta[:] = new
    run.gamma[:] = run.z * new
    run._sync(np.arange(run.N, dtype=np.int64), g0)
    with np.errstate(all="ignore"):
        run._refresh()
    return t


def _hessian(run: _SkmRun, pts: np.ndarray) -> np.ndarray:
    r"""Hessian of G in :math:`\gamma = D(y)\alpha` on the points ``pts`` (:func:`newton_step`)."""
    from ._skm import weighted_block

    smo = run.smo
    c = np.ascontiguousarray(run.c, dtype=np.float64)
    d, u1, u2 = np.zeros(run.M), np.zeros(run.M), np.zeros(run.M)
    r1 = smo.reg_coeffs(run.opts, run.fns, c, d, u1, u2)
    H = weighted_block(run.K, np.ascontiguousarray(pts, dtype=np.int64), d)
    V = run.v[:, pts]
    pv = u1 @ V
    return H + (V.T * u2) @ V + r1 * np.outer(pv, pv)


def newton_step(run: _SkmRun) -> float:
    r"""A Newton step of G on the free variables, by the exact line search; the step (0: none).

    In :math:`\gamma = D(y)\alpha` the Hessian of G is
    :math:`H = \sum_k\eta_kK_k + \sum_ku^{(2)}_kv_kv_k^\top + r_1pp^\top`,
    :math:`p = \sum_ku^{(1)}_kv_k` -- the curvature of the SMO pair step, for all free
    variables at once.  The step minimizes the quadratic model on them with
    :math:`\sum_i\delta_i = 0` (:math:`y^\top\alpha` kept):
    :math:`\delta = H^{-1}(S - \lambda e)`, :math:`\lambda = e^\top H^{-1}S/e^\top H^{-1}e`
    (Cholesky).  Free variables that would leave their box before the full step are
    held at their values and the system solved again (``_NEWTON_ROUNDS``).  The
    step length is then the exact minimizer of G along :math:`\delta` in the box.
    Needs the full (unshrunk) state and a precomputed bank.
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    from ._skm import block_forms

    beta, z, ub = run.beta, run.z, run.ub
    F = np.flatnonzero((beta > 0.0) & (beta < ub))
    if not 2 <= F.size <= _NEWTON_MAX:
        return 0.0
    pts = np.ascontiguousarray(run.pt[F], dtype=np.int64)
    H = _hessian(run, pts)
    V = run.v[:, pts]
    S = z[F] * run.e[F] - run.F[pts]
    up = np.where(z[F] > 0.0, ub[F] - beta[F], beta[F])  # room for delta > 0
    down = np.where(z[F] > 0.0, beta[F], ub[F] - beta[F])  # room for delta < 0
    keep = np.ones(F.size, dtype=bool)
    delta = np.zeros(F.size)
    for _ in range(_NEWTON_ROUNDS):
        idx = np.flatnonzero(keep)
        if idx.size < 2:
            return 0.0
        Hs = H[np.ix_(idx, idx)]
        Hs[np.diag_indices_from(Hs)] += 1e-10 * max(float(np.trace(Hs)) / idx.size, 1e-300)
        try:
            x = cho_solve(cho_factor(Hs), np.column_stack([S[idx], np.ones(idx.size)]))
        except (LinAlgError, ValueError):
            return 0.0
        den = float(np.sum(x[:, 1]))
        if not (den > 0.0 and np.all(np.isfinite(x))):
            return 0.0
        delta[:] = 0.0
        delta[idx] = x[:, 0] - (float(np.sum(x[:, 0])) / den) * x[:, 1]
        # would leave the box before the full step (beta moves by z delta)
        out = keep & (np.where(delta > 0.0, up, down) < np.abs(delta))
        if not np.any(out):
            break
        keep &= ~out
    D = np.zeros(run.n)
    D[F] = z[F] * delta
    w = V @ delta
    q = np.empty(run.M)
    block_forms(run.K, pts, delta, q)
    t = _line_min(run, w, q, D, min(_room(run, D), 2.0))
    return _take_step(run, D, t, w, q)
