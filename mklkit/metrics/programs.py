r"""The radius and margin programs: convex quadratic programs on simplices, solved by pairwise steps
(:mod:`mklkit._jit.simplex`) with an active-set step per round, certified by the Frank–Wolfe gap; the
radius, the margin and their ratio.

On a factor bank the steps read the columns :math:`K_{:,k} = L L_{k,:}^\top`, cached.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from .._jit import simplex as ksimplex
from ..components.params import ParamError
from ..result import ConvergenceWarning, Status
from . import _inputs
from ._inputs import Kernels, dense_block, kernels_of, two_classes

#: the default relative tolerance of the quadratic programs
TOL = 1e-8
#: one kernel as the programs read it: ``(K, L, factor, diag)`` (:func:`_each_kernel`)
_Kernel = tuple[np.ndarray, np.ndarray, bool, np.ndarray]


@dataclass(frozen=True)
class SimplexSolution:
    r"""The certified solution of the quadratic program of :func:`radius` or :func:`margin` for one kernel.

    Attributes
    ----------
    value : float
        :math:`R` or :math:`\rho` (the square root of ``squared``).
    squared : float
        The optimum found, :math:`R^2` or :math:`\rho^2`: within ``gap`` of the true one
        (:math:`R^2 \le` ``squared + gap``; :math:`\rho^2 \ge` ``squared - gap``).
    gap : float
        The Frank–Wolfe duality gap of the returned point (absolute, in kernel units).
    n_iter : int
        Pairwise steps taken.
    status : Status
        ``converged`` (``gap <= tol * squared`` or below the gradient's round-off, :math:`64\sqrt
        N\epsilon\max_iK_{ii}`, or the margin below the zero level), ``max_iter``, or
        ``stalled`` (round-off leaves no descent step before ``tol``).
    coef : ndarray (N,)
        :math:`\beta` (radius: the ball's centre :math:`\sum_i\beta_i\phi(x_i)`) or :math:`\gamma`
        (margin: the two nearest points :math:`\sum_{y_i=+}\gamma_i\phi(x_i)` and
        :math:`\sum_{y_i=-}\gamma_i\phi(x_i)`), each summing to 1 (per class).
    """

    value: float
    squared: float
    gap: float
    n_iter: int
    status: Status
    coef: np.ndarray


def _check_solver(tol: Any, max_iter: Any, owner: str) -> tuple[float, int | None]:
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (0.0 < float(tol) < 1.0):
        raise ParamError("tol", tol, "a number in (0, 1)", owner)
    if max_iter is not None and (
        isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1
    ):
        raise ParamError("max_iter", max_iter, "an integer >= 1 or None", owner)
    return float(tol), (None if max_iter is None else int(max_iter))


def _solve(
    kernel: _Kernel,
    s: np.ndarray,
    p_of_diag: bool,
    group: np.ndarray,
    tol: float,
    floor_rel: float,
    max_iter: int | None,
) -> tuple[float, float, int, Status, np.ndarray]:
    r"""Minimise :math:`f(\gamma) = (s\circ\gamma)^\top K(s\circ\gamma) + p^\top\gamma` on the groups'
    simplices; ``p = -diag K`` when ``p_of_diag``.

    Rounds of pairwise steps (:func:`mklkit._jit.simplex.simplex_pairs`), each followed by an
    active-set step: the minimiser of :math:`f` on the affine hull of the current support (the KKT
    system of the equality-constrained program, least squares when singular), taken as far as
    :math:`\gamma \ge 0` allows, which ends the slow tail of pairwise steps once the support is found.
    The gradient and the gap are recomputed from :math:`\gamma` after every round.  Returns
    ``(f, gap, steps, status, gamma)``.
    """
    K, L, factor, diag = kernel
    n = s.shape[0]
    p = -diag if p_of_diag else np.zeros(n)
    n_groups = int(group.max()) + 1
    masks = [group == c for c in range(n_groups)]
    gamma = _vertex_start(kernel, masks, p_of_diag)
    scale = max(float(diag.max()), 0.0)
    # the precision the gradient is computed to: a gap below it is round-off
    atol = 64.0 * np.sqrt(n) * np.finfo(float).eps * max(scale, np.finfo(float).tiny)
    floor = floor_rel * scale if floor_rel > 0.0 else -np.inf
    limit = max(10_000, 100 * n) if max_iter is None else max_iter
    per_round = min(limit, max(1_000, 10 * n))

    def gradient(x: np.ndarray) -> np.ndarray:
        v = s * x
        Kv = L @ (L.T @ v) if factor else K @ v
        return 2.0 * s * Kv + p

    def measure(x: np.ndarray) -> tuple[np.ndarray, float, float]:
        g = gradient(x)
        gap = sum(float(x[mk] @ g[mk] - g[mk].min()) for mk in masks)
        return g, 0.5 * float(x @ (g + p)), max(gap, 0.0)

    def done(f: float, gap: float) -> bool:
        return gap <= max(tol * abs(f), atol) or f <= floor

    # a factor kernel's columns are cached; when all N fit the budget, they are one BLAS product
    slots = min(n, max(2, int(_inputs.CHUNK_BYTES // (8 * n)))) if factor else 0
    filled = factor and slots == n
    cache = L @ L.T if filled else np.empty((slots, n if factor else 0))
    steps, code = 0, ksimplex.MAX_ITER
    grad, f, gap = measure(gamma)
    while not done(f, gap) and steps < limit:
        args = (diag, s, p, group, n_groups, gamma, grad, tol, atol, floor, min(per_round, limit - steps))
        it, _, _, code = ksimplex.simplex_pairs(K, L, factor, cache, filled, *args)
        steps += it
        f_before = f
        grad, f, gap = measure(gamma)
        if done(f, gap):
            break
        polished = _active_set_step(kernel, s, p, masks, gamma)
        if polished is not None:
            g2, f2, gap2 = measure(polished)
            if f2 <= f:
                gamma, grad, f, gap = polished, g2, f2, gap2
        if code == ksimplex.STALLED and not f < f_before:
            break
    if done(f, gap):
        status = Status.CONVERGED
    else:
        status = Status.MAX_ITER if steps >= limit else Status.STALLED
    return f, gap, steps, status, gamma


def _vertex_start(kernel: _Kernel, masks: list[np.ndarray], farthest: bool) -> np.ndarray:
    r"""A vertex to start from, so that the support grows from one point per group: the point farthest
    from the first one (``farthest``: the radius), or, group after group, the point nearest the one
    chosen in the group before (the margin: a close pair of points of the two classes)."""

    K, L, factor, diag = kernel

    def column(k: int) -> np.ndarray:
        return L @ L[k] if factor else K[k]

    gamma = np.zeros(diag.size)
    if farthest:
        gamma[int(np.argmax(diag - 2.0 * column(0)))] = 1.0
        return gamma
    members = [np.flatnonzero(mk) for mk in masks]
    chosen = [int(members[0][0])]
    for c in list(range(1, len(masks))) + [0]:
        d2 = diag[members[c]] - 2.0 * column(chosen[-1])[members[c]]  # + K_kk, the same for all
        pick = int(members[c][int(np.argmin(d2))])
        chosen = chosen[1:] + [pick] if c == 0 else chosen + [pick]
    gamma[chosen] = 1.0
    return gamma


#: the largest support the active-set step solves its KKT system on
_ACTIVE_SET_MAX = 1000


def _active_set_step(
    kernel: _Kernel, s: np.ndarray, p: np.ndarray, masks: list[np.ndarray], gamma: np.ndarray
) -> np.ndarray | None:
    r"""The point :math:`\gamma + t(\hat\gamma - \gamma)`, :math:`\hat\gamma` the minimiser of :math:`f` on
    :math:`\{\gamma_i = 0\ (i \notin S),\ \sum_{i\in G_c}\gamma_i = 1\}` (S the support) and the largest
    :math:`t \le 1` with :math:`\gamma \ge 0`; ``None`` when the support has more than
    :data:`_ACTIVE_SET_MAX` points."""
    K, L, factor, _ = kernel
    S = np.flatnonzero(gamma > 0.0)
    if S.size > _ACTIVE_SET_MAX or S.size == 0:
        return None
    KS = L[S] @ L[S].T if factor else K[np.ix_(S, S)]
    Q = (s[S][:, None] * s[S][None, :]) * KS
    A = np.array([mk[S] for mk in masks], dtype=np.float64)
    k, n_groups = S.size, len(masks)
    M = np.zeros((k + n_groups, k + n_groups))
    M[:k, :k] = 2.0 * Q
    M[:k, k:] = A.T
    M[k:, :k] = A
    rhs = np.concatenate([-p[S], np.ones(n_groups)])
    sol = np.linalg.lstsq(M, rhs, rcond=None)[0][:k]
    if not np.all(np.isfinite(sol)):
        return None
    d = sol - gamma[S]
    neg = d < 0.0
    t = 1.0 if not np.any(neg) else min(1.0, float(np.min(-gamma[S][neg] / d[neg])))
    out = gamma.copy()
    out[S] = np.maximum(gamma[S] + t * d, 0.0)
    for mk in masks:  # exactly on the simplices again after round-off
        out[mk] /= out[mk].sum()
    return out


def _each_kernel(ks: Kernels) -> Iterator[_Kernel]:
    r"""``(K, L, factor, diag)`` per kernel: the Gram matrix or its factor :math:`L_m` (N, r_m), and
    :math:`\mathrm{diag}\,K_m`."""
    empty = np.empty((0, 0))
    if ks.dense is not None:
        for m in range(ks.m):
            K = np.ascontiguousarray(ks.dense[m])
            yield K, empty, False, np.ascontiguousarray(np.diagonal(K))
    else:
        for B in ks.blocks or []:
            L = np.ascontiguousarray(dense_block(B).T)
            yield empty, L, True, np.einsum("ij,ij->i", L, L)


def _which(kernels: Any) -> str:
    """``kernel 3`` or ``kernels 0, 2, 5, 6, 7...``: the first five of the kernels named."""
    more = "..." if len(kernels) > 5 else ""
    return f"kernel{'s' if len(kernels) > 1 else ''} {', '.join(map(str, kernels[:5]))}{more}"


def _warn_unconverged(sols: list[SimplexSolution], what: str, tol: float) -> None:
    bad = [m for m, s in enumerate(sols) if s.status is not Status.CONVERGED]
    if bad:
        s = sols[bad[0]]
        fix = "raise max_iter" if s.status is Status.MAX_ITER else "round-off stopped it: raise tol"
        warnings.warn(
            f"{what}: the quadratic program did not reach tol={tol:g} in {s.n_iter} steps "
            f"({_which(bad)}; gap {s.gap:.3g} at {s.squared:.6g}): {fix}",
            ConvergenceWarning,
            stacklevel=4,  # the caller of radius, margin or ratio
        )


def _radius_solutions(ks: Kernels, tol: float, max_iter: int | None, what: str) -> list[SimplexSolution]:
    s = np.ones(ks.n)
    group = np.zeros(ks.n, dtype=np.int64)
    sols = []
    for kernel in _each_kernel(ks):
        f, gap, steps, status, beta = _solve(kernel, s, True, group, tol, 0.0, max_iter)
        r2 = max(-f, 0.0)
        sols.append(SimplexSolution(float(np.sqrt(r2)), r2, gap, steps, status, beta))
    _warn_unconverged(sols, what, tol)
    return sols


def radius(K: Any, *, tol: float = TOL, max_iter: int | None = None, return_solution: bool = False) -> Any:
    r"""The radius of the smallest ball that encloses the points in feature space.

    .. math::

        R^2 = \min_c \max_i \|\phi(x_i) - c\|^2
            = \max_{\beta \in \Delta_N}\ \sum_i \beta_i K_{ii} - \beta^\top K\beta,
        \qquad \Delta_N = \{\beta \ge 0,\ \textstyle\sum_i\beta_i = 1\},

    the dual of the minimum enclosing ball, with the centre :math:`c = \sum_i\beta_i\phi(x_i)`.  The
    quadratic program is solved by pairwise steps (:mod:`mklkit._jit.simplex`) until the Frank–Wolfe gap,
    which bounds the error of :math:`R^2`, is at most ``tol`` times :math:`R^2` (or below the precision
    the gradient is computed to, :math:`64\sqrt N\,\epsilon\max_iK_{ii}`); a program that does not get
    there in ``max_iter`` steps emits :class:`mklkit.ConvergenceWarning`.  On a factor bank each step
    reads two columns :math:`K_{:,k} = L L_{k,:}^\top`, cached (all N, one matrix product, while
    :math:`8N^2` bytes fit 256 MiB; the most recently used ones otherwise).

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    tol : float
        Relative duality gap on :math:`R^2` (default 1e-8).
    max_iter : int, optional
        Pairwise steps per kernel (default :math:`\max(10^4, 100N)`).
    return_solution : bool
        Also return the :class:`SimplexSolution` of each kernel (a list).

    Returns
    -------
    float for one Gram matrix, else ndarray (M,); with ``return_solution``, ``(value, solutions)``
    """
    owner = "radius"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = kernels_of(K, "K", owner)
    sols = _radius_solutions(ks, tol, max_iter, owner)
    values = ks.out(np.array([sol.value for sol in sols]))
    return (values, sols) if return_solution else values


def _margin_solutions(ks: Kernels, s: np.ndarray, tol: float, max_iter: int | None, what: str) -> list[SimplexSolution]:
    group = (s > 0).astype(np.int64)
    sols = []
    for kernel in _each_kernel(ks):
        f, gap, steps, status, gamma = _solve(kernel, s, False, group, tol, tol, max_iter)
        rho2 = 0.0 if f <= tol * float(np.max(kernel[3])) else f
        sols.append(SimplexSolution(float(np.sqrt(rho2)), rho2, gap, steps, status, gamma))
    _warn_unconverged(sols, what, tol)
    return sols


def margin(K: Any, y: Any, *, tol: float = TOL, max_iter: int | None = None, return_solution: bool = False) -> Any:
    r"""The distance between the convex hulls of the two classes in feature space (the hard margin).

    .. math::

        \rho = \min_{\gamma^+\in\Delta_+,\ \gamma^-\in\Delta_-}\
            \Big\|\sum_{y_i=+}\gamma^+_i\phi(x_i) - \sum_{y_i=-}\gamma^-_i\phi(x_i)\Big\|,
        \qquad \rho^2 = \min_\gamma\ (y\circ\gamma)^\top K (y\circ\gamma),

    with one simplex per class.  This is MKLpy's convention (``margin`` there is the same distance);
    the margin of the hard-margin SVM, the distance from the separating hyperplane to the nearest
    point, is :math:`\rho/2`.  :math:`\rho = 0` when the hulls meet: the classes cannot be separated in
    that feature space (the returned value is exactly 0 once :math:`\rho^2 \le` ``tol`` :math:`\max_i
    K_{ii}`).  Solved and certified as :func:`radius`: the Frank–Wolfe gap bounds the error of
    :math:`\rho^2`.

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    y : array (N,)
        Labels of exactly two classes.
    tol, max_iter, return_solution
        As in :func:`radius` (``tol`` on :math:`\rho^2`).

    Returns
    -------
    float for one Gram matrix, else ndarray (M,); with ``return_solution``, ``(value, solutions)``
    """
    owner = "margin"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = kernels_of(K, "K", owner)
    sols = _margin_solutions(ks, two_classes(y, ks.n, owner), tol, max_iter, owner)
    values = ks.out(np.array([sol.value for sol in sols]))
    return (values, sols) if return_solution else values


def ratio(K: Any, y: Any, *, tol: float = TOL, max_iter: int | None = None) -> Any:
    r"""The radius–margin ratio :math:`R^2 / (N\rho^2)`, :func:`radius` over :func:`margin`, squared.

    Divided by N as in MKLpy's ``ratio``: :math:`4R^2/(N\rho^2) = R^2\|w\|^2/N` (with the SVM margin
    :math:`\rho/2 = 1/\|w\|`) is the radius–margin bound on the leave-one-out error rate of the
    hard-margin SVM (Vapnik 1998; Chapelle et al. 2002), four times this ratio.  Lower is better.  When
    the classes cannot be separated (:math:`\rho = 0`) the ratio is infinite: the value is ``inf``,
    with a ``RuntimeWarning`` naming the kernels.

    Parameters
    ----------
    K : array (N, N) or (M, N, N), KernelBank, ArrayBank or FactorBank
    y : array (N,)
        Labels of exactly two classes.
    tol, max_iter
        As in :func:`radius`.

    Returns
    -------
    float for one Gram matrix, else ndarray (M,)
    """
    owner = "ratio"
    tol, max_iter = _check_solver(tol, max_iter, owner)
    ks = kernels_of(K, "K", owner)
    s = two_classes(y, ks.n, owner)
    rs = _radius_solutions(ks, tol, max_iter, "ratio (radius)")
    ms = _margin_solutions(ks, s, tol, max_iter, "ratio (margin)")
    r2 = np.array([sol.squared for sol in rs])
    m2 = np.array([sol.squared for sol in ms])
    zero = np.flatnonzero(m2 <= 0.0)
    if zero.size:
        warnings.warn(
            f"ratio: the classes cannot be separated (margin 0) with {_which(zero.tolist())}: the ratio is inf",
            RuntimeWarning,
            stacklevel=2,
        )
    with np.errstate(divide="ignore"):
        values = np.where(m2 > 0.0, r2 / (ks.n * np.where(m2 > 0.0, m2, 1.0)), np.inf)
    return ks.out(values)
