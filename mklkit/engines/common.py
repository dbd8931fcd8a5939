r"""The dual side of the certificate every engine computes the same way (``docs/engines.md``):
:math:`D(\rho)` (SpicyMKL eq. 48) at a point made feasible the paper's way (§6.1), the zero
solution and ``C_max``, the best points of a run, the certificate of a point and the
:class:`~mklkit.result.SolveResult`.  The primal side is :mod:`mklkit.engines.objectives`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..components.base import Loss, Regularizer
from ..problem import Problem
from ..result import SolveResult, Status
from .capabilities import SEPARABLE, needs
from .objectives import (
    SampleLoss,
    as_vector,
    block_norms,
    dual_block_norms,
    kernel_weights,
    loss_value,  # noqa: F401 - the engines' names, re-exported
    optimal_bias,
    predict,
    primal_objective,
    primal_value,
    regularizer_value,  # noqa: F401 - the engines' names, re-exported
    relative_gap,
)

#: Statuses that come with a :class:`~mklkit.result.ConvergenceWarning`.
UNCONVERGED = (Status.MAX_ITER, Status.STALLED, Status.NUMERICAL_ERROR)

#: SpicyMKL and the proximal engine work block by block (prox, conjugate and envelope of one
#: block norm): a regularizer that couples the blocks is declined, not solved block-wise.
SEPARABLE_SUMS = needs(SEPARABLE, why="this engine solves sums over kernels of a function of one block norm")

#: :math:`|\mathbf 1^\top\rho| / \|\rho\|_1` below which :func:`project_dual` keeps the given norms.
_CENTRED = 1e-12


def loss_conjugate(loss: Loss, y: np.ndarray, rho: np.ndarray, weights: np.ndarray | None = None) -> float:
    r""":math:`L^*(-\rho) = \sum_i (w_i\ell)^*(y_i, -\rho_i)` (SpicyMKL eq. 15); ``inf`` outside the domain."""
    return float(np.sum(SampleLoss(loss, y, weights).conj(-np.asarray(rho, dtype=np.float64))))


def regularizer_conjugate(reg: Regularizer, norms: np.ndarray, C: float) -> float:
    r""":math:`\sum_m \tilde g_C^*(y_m)` at dual block norms (SpicyMKL eq. 45); ``inf`` outside its domain."""
    return float(np.sum(reg.jit.conj(as_vector(norms), float(C), reg.param_vector)))


def dual_objective(problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None) -> float:
    r""":math:`D(\rho)` of SpicyMKL eq. (48) at ``rho`` as given (``-inf`` outside the domain);
    ``norms``: :math:`\|\rho\|_{K_m}` when known."""
    if norms is None:
        norms = dual_block_norms(problem.bank, rho)
    val = loss_conjugate(problem.loss, problem.y, rho, problem.sample_weight) + regularizer_conjugate(
        problem.regularizer, norms, problem.C
    )
    return -val


def project_sum_box(rho: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r"""Euclidean projection onto :math:`\{\rho: \mathbf 1^\top\rho = 0,\ l \le \rho \le u\}`.

    :math:`\tilde\rho = \mathrm{clip}(\rho - \tau, l, u)` with the shift :math:`\tau` found by
    a binary search over the breakpoints of the piecewise-linear sum (:math:`O(N\log N)`),
    then exactly on its piece.  Infinite bounds are allowed; ``ValueError`` when the set is
    empty.
    """
    rho = np.asarray(rho, dtype=np.float64)
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    if float(np.sum(lo)) > 0.0 or float(np.sum(hi)) < 0.0:
        raise ValueError(
            "no point of the box has a zero sum: the dual is infeasible "
            f"(sum of lower ends {float(np.sum(lo)):g}, of upper ends "
            f"{float(np.sum(hi)):g})"
        )

    def total(tau: float) -> float:
        return float(np.sum(np.clip(rho - tau, lo, hi)))

    with np.errstate(invalid="ignore"):
        bp = np.concatenate([rho - hi, rho - lo])
    bp = np.unique(bp[np.isfinite(bp)])
    # S(left) >= 0 >= S(right) on the piece [left, right]
    left, right = -math.inf, math.inf
    if bp.size:
        i, j = 0, bp.size - 1
        if total(bp[0]) < 0.0:
            right = bp[0]
        elif total(bp[-1]) > 0.0:
            left = bp[-1]
        else:
            while j - i > 1:  # S(bp[i]) >= 0 >= S(bp[j])
                mid = (i + j) // 2
                if total(bp[mid]) >= 0.0:
                    i = mid
                else:
                    j = mid
            left, right = bp[i], bp[j]
            if total(left) == 0.0:
                return np.clip(rho - left, lo, hi)
    # on the open piece every coordinate is clipped at the same end or free
    probe = (
        (left + right) / 2
        if math.isfinite(left) and math.isfinite(right)
        else (left + 1.0 if math.isfinite(left) else (right - 1.0 if math.isfinite(right) else 0.0))
    )
    shifted = rho - probe
    free = (shifted > lo) & (shifted < hi)
    fixed = np.clip(shifted, lo, hi)[~free]
    if np.any(free):
        tau = (float(np.sum(rho[free])) + float(np.sum(fixed))) / int(np.sum(free))
        if math.isfinite(left):
            tau = max(tau, left)
        if math.isfinite(right):
            tau = min(tau, right)
    else:
        tau = probe
    return np.clip(rho - tau, lo, hi)


def dual_box(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    r"""Bounds of :math:`\rho_i`, :math:`[-\mathrm{upper}_i, -\mathrm{lower}_i]` of the domain of
    the (weighted) loss conjugate in :math:`u = -\rho_i`."""
    sl = SampleLoss.of(problem)
    return -sl.conj_upper(), -sl.conj_lower()


def centre_dual(rho: np.ndarray, lower: np.ndarray, upper: np.ndarray, bias: bool = True) -> np.ndarray:
    r"""A new array: the projection of ``rho`` onto :math:`\mathbf 1^\top\rho = 0` in its box
    (the paper's plain centring when it stays in the box, else :func:`project_sum_box`);
    without a bias the clipping into the box."""
    rho = np.asarray(rho, dtype=np.float64)
    if not bias:
        return np.clip(rho, lower, upper)
    shifted = rho - float(np.sum(rho)) / rho.size
    if np.all((shifted >= lower) & (shifted <= upper)):
        return shifted
    return project_sum_box(rho, lower, upper)


def project_dual(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""A dual point made feasible the way of SpicyMKL §6.1, with its block norms.

    :func:`centre_dual` in the box of :func:`dual_box`, then :func:`scale_into_radius`
    when the domain of :math:`\tilde g_C^*` is a ball (``conj_radius``).  ``norms``
    (:math:`\|\rho\|_{K_m}`) are reused when the projection leaves ``rho`` unchanged
    (centred to :math:`10^{-12}\|\rho\|_1` and inside the box), else recomputed.
    """
    rho = np.asarray(rho, dtype=np.float64)
    lo, hi = dual_box(problem)
    unchanged = bool(np.all((rho >= lo) & (rho <= hi)))
    if problem.bias:
        unchanged = unchanged and abs(float(np.sum(rho))) <= _CENTRED * float(np.sum(np.abs(rho)))
    rho = centre_dual(rho, lo, hi, problem.bias)
    if norms is None or not unchanged:
        norms = dual_block_norms(problem.bank, rho)
    else:
        norms = np.array(norms, dtype=np.float64)
    return scale_into_radius(rho, norms, float(problem.regularizer.conj_radius(problem.C)))


def scale_into_radius(rho: np.ndarray, norms: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    r"""New arrays :math:`\rho/s`, norms :math:`/s` with :math:`s = \max\{\max_m\|\rho\|_{K_m}/R, 1\}`
    made a few ulps larger when rounding would leave a norm above :math:`R` (SpicyMKL §6.1)."""
    rho = np.array(rho, dtype=np.float64)
    norms = np.array(norms, dtype=np.float64)
    if not (math.isfinite(radius) and norms.size):
        return rho, norms
    top = float(np.max(norms))
    if top <= radius:
        return rho, norms
    scale = top / radius
    for _ in range(8):
        if float(np.max(norms / scale)) <= radius:
            break
        scale *= 1.0 + 4.0 * np.finfo(np.float64).eps
    return rho / scale, norms / scale


def projected_dual_objective(
    problem: Problem, rho: np.ndarray, *, norms: np.ndarray | None = None
) -> tuple[float, np.ndarray, np.ndarray]:
    """``(dual, rho_feasible, norms)``: :func:`dual_objective` at the point of :func:`project_dual`."""
    rho_f, norms_f = project_dual(problem, rho, norms=norms)
    return dual_objective(problem, rho_f, norms=norms_f), rho_f, norms_f


@dataclass(frozen=True)
class ZeroSolution:
    r"""The solution :math:`\alpha = 0`, :math:`b = b_0` (``bias``) of a problem at ``C``.

    ``objective`` :math:`P(0, b_0)`; ``rho`` its dual point :math:`\rho^0 = -u`,
    :math:`u_i \in \partial_z\ell(y_i, b_0)`, with ``dual_norms`` :math:`\|\rho^0\|_{K_m}`
    (NaN without a threshold); ``C_max`` :math:`\max_m\|\rho^0\|_{K_m} / t_1` (``inf`` when no
    ``C`` makes α = 0 optimal); ``dual_objective`` :math:`D` at ``rho`` made feasible when
    ``C >= C_max`` (``-inf`` below).
    """

    bias: float
    objective: float
    dual_objective: float
    rho: np.ndarray
    dual_norms: np.ndarray
    C_max: float
    C: float

    @property
    def gap(self) -> float:
        return relative_gap(self.objective, self.dual_objective)

    def optimal(self, tol: float) -> bool:
        """Whether α = 0 is the certified solution: ``C >= C_max`` and gap <= ``tol``."""
        gap = self.gap
        return self.C >= self.C_max and math.isfinite(gap) and gap <= tol


def _zero_dual(sl: SampleLoss, b: float, bias: bool, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r""":math:`\rho = -u` for a subgradient :math:`u \in \partial_z (w\ell)(y, b)` with
    :math:`\mathbf 1^\top u = 0` (with a bias): at kinks, the one-sided derivatives
    (:math:`\pm 10^{-9}(1 + |b|)`) bound ``sl.deriv`` projected by :func:`project_sum_box`
    (``lower``, ``upper``: the fallback box)."""
    n = sl.y.size

    def d(z: float) -> np.ndarray:
        return sl.deriv(np.full(n, z))

    u = d(b)
    if not bias:
        return -u
    h = 1e-9 * (1.0 + abs(b))
    left, right = d(b - h), d(b + h)
    lo = np.minimum(np.minimum(left, right), u)
    hi = np.maximum(np.maximum(left, right), u)
    try:
        u = project_sum_box(u, lo, hi)
    except ValueError:
        u = project_sum_box(u, lower, upper)
    return -u


def zero_solution(problem: Problem) -> ZeroSolution:
    r"""The zero solution of ``problem``, certified against ``C_max``.

    At :math:`\alpha = 0` the optimality conditions of eq. (42) hold when
    :math:`\|\rho^0\|_{K_m} \le t_C` for every kernel (the lasso-type threshold, as
    ``lambda_max`` in glmnet), i.e. for :math:`C \ge C_{max}`; Fenchel–Young then makes
    :math:`D(\rho^0) = P(0, b_0)`.  Exact for a loss differentiable at :math:`b_0`, an upper
    bound of the threshold at kinks (hinge).  One pass over the bank.
    """
    loss, reg = problem.loss, problem.regularizer
    y = as_vector(problem.y)
    N = problem.n_samples
    w = problem.sample_weight
    b0 = optimal_bias(loss, y, np.zeros(N), weights=w) if problem.bias else 0.0
    lo, hi = dual_box(problem)
    rho = _zero_dual(SampleLoss.of(problem), b0, problem.bias, -hi, -lo)
    t1 = float(reg.zero_threshold(1.0))
    M = problem.n_kernels
    if not np.any(rho != 0.0):
        norms, C_max = np.zeros(M), 0.0
    elif t1 > 0.0 and math.isfinite(t1):
        norms = dual_block_norms(problem.bank, rho)
        top = float(np.max(norms)) if norms.size else 0.0
        C_max = top / t1 if top > 0.0 else 0.0
    else:  # no threshold: alpha = 0 is never optimal, no pass over the bank
        norms, C_max = np.full(M, math.nan), math.inf
    primal = primal_value(problem, np.full(N, b0), np.zeros(norms.size))
    dual = -math.inf
    if problem.C >= C_max:
        dual, _, _ = projected_dual_objective(problem, rho, norms=norms)
    return ZeroSolution(
        bias=float(b0),
        objective=float(primal),
        dual_objective=float(dual),
        rho=rho,
        dual_norms=norms,
        C_max=float(C_max),
        C=float(problem.C),
    )


class Incumbents:
    """The best primal and the best dual point seen: by weak duality their gap certifies the
    primal point and is never larger than the current iterate's.  ``offer_primal`` and
    ``offer_dual`` keep the ``state`` (arrays not modified later) of a better value."""

    def __init__(self, zero: ZeroSolution | None = None, M: int = 0, N: int = 0) -> None:
        self.primal = math.inf
        self.dual = -math.inf
        self.primal_state: dict[str, Any] = {}
        self.dual_state: dict[str, Any] = {}
        self.primal_iteration = -2
        if zero is not None:  # iteration -1: the zero solution
            self.offer_primal(zero.objective, -1, alpha=np.zeros((M, N)), bias=zero.bias, norms=np.zeros(M))

    def offer_primal(self, value: float, iteration: int, **state: Any) -> None:
        if math.isfinite(value) and value < self.primal:
            self.primal, self.primal_state, self.primal_iteration = float(value), state, iteration

    def offer_dual(self, value: float, iteration: int, **state: Any) -> None:
        if math.isfinite(value) and value > self.dual:
            self.dual, self.dual_state = float(value), state

    @property
    def gap(self) -> float:
        """:func:`relative_gap` of the incumbents (``inf`` before both exist)."""
        if not (math.isfinite(self.primal) and math.isfinite(self.dual)):
            return math.inf
        return relative_gap(self.primal, self.dual)


@dataclass(frozen=True)
class Certificate:
    r"""The primal value, the dual value at the feasible point ``rho``, their relative
    ``gap``, the primal block ``norms`` and the engine's own values (``extra``).

    Build it with :meth:`at` (``rho`` made feasible here) or :meth:`of` (both values known).
    """

    primal: float
    dual: float
    gap: float
    rho: np.ndarray
    norms: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, primal: float, dual: float, rho: np.ndarray, norms: np.ndarray, **extra: Any) -> "Certificate":
        return cls(
            primal=float(primal), dual=float(dual), gap=relative_gap(primal, dual), rho=rho, norms=norms, extra=extra
        )

    @classmethod
    def at(
        cls,
        problem: Problem,
        primal: float,
        rho: np.ndarray,
        norms: np.ndarray,
        *,
        dual_norms: np.ndarray | None = None,
        **extra: Any,
    ) -> "Certificate":
        r"""With the dual at ``rho`` made feasible (:func:`projected_dual_objective`;
        ``dual_norms``: :math:`\|\rho\|_{K_m}` when known)."""
        dual, rho_f, _ = projected_dual_objective(problem, rho, norms=dual_norms)
        return cls.of(primal, dual, rho_f, norms, **extra)


def certify(problem: Problem, alpha: np.ndarray, bias: float, rho: np.ndarray | None = None) -> Certificate:
    r"""The duality gap of ``(alpha, bias)`` from scratch: the dual at the given ``rho`` and at
    :math:`-\ell'(z)` at the predictions, the larger kept (weak duality holds for either)."""
    b = float(bias) if problem.bias else 0.0
    alpha = np.asarray(alpha, dtype=np.float64)
    norms = block_norms(problem.bank, alpha)
    z = predict(problem.bank, alpha, b)
    primal = primal_objective(problem, alpha, b, norms=norms, z=z)
    at_z = -SampleLoss.of(problem).deriv(z)
    best = Certificate.of(primal, -math.inf, at_z, norms)
    for point in ([] if rho is None else [rho]) + [at_z]:
        if not np.all(np.isfinite(point)):
            continue
        try:
            cert = Certificate.at(problem, primal, point, norms)
        except ValueError:  # no feasible projection: this point certifies nothing
            continue
        if cert.dual > best.dual:
            best = cert
    return best


def build_result(
    problem: Problem,
    *,
    engine: str,
    status: Status,
    alpha: np.ndarray,
    bias: float,
    primal: float,
    dual: float,
    iterations: int,
    history: list[dict[str, Any]],
    message: str,
    time_s: float,
    norms: np.ndarray | None = None,
    rho: np.ndarray | None = None,
    C_max: float | None = None,
    weights: np.ndarray | None = None,
) -> SolveResult:
    r"""A :class:`~mklkit.result.SolveResult`.

    It holds ``alpha`` itself when a float64 array (a copy of an (M, N) array costs 0.2 s per
    solve on w8a's bank).  ``norms`` (:math:`\|\alpha_m\|_{K_m}`) are computed when not
    given; ``weights`` (kernel weights) are :func:`kernel_weights` of them unless given, for
    a regularizer that couples the blocks.  ``rho``: the dual point of ``dual``.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if norms is None:
        norms = block_norms(problem.bank, alpha)
    norms = np.array(norms, dtype=np.float64)
    if weights is None:
        weights = kernel_weights(problem.regularizer, norms)
    else:
        weights = np.array(weights, dtype=np.float64)
    return SolveResult(
        status=status,
        objective=float(primal),
        dual_objective=float(dual),
        gap=float(relative_gap(primal, dual)),
        iterations=int(iterations),
        alpha=alpha,
        bias=float(bias) if problem.bias else 0.0,
        kernel_weights=weights,
        block_norms=norms,
        history=history,
        message=message,
        time_s=float(time_s),
        engine=engine,
        dual=None if rho is None else np.array(rho, dtype=np.float64),
        C_max=None if C_max is None else float(C_max),
    )
