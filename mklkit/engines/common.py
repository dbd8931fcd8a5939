r"""Quantities every engine computes the same way.

The objectives and the gap are in :mod:`mklkit.engines.objectives`, the
projection of a dual point in :mod:`mklkit.engines.dual_point` (both
re-exported here); this module adds the
zero solution and ``C_max``, the best points of a run (:class:`Incumbents`),
the certificate of a point (:class:`Certificate`: primal, dual and gap) and
the assembly of a :class:`~mklkit.result.SolveResult`.

Weak duality between any primal point and any feasible dual point is what
makes these certificates (the objectives and the projection of §6.1 are
described in :mod:`mklkit.engines.objectives` and
:mod:`mklkit.engines.dual_point`).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult, Status
from .capabilities import SEPARABLE, needs
from . import dual_point as _dual_point
from . import objectives as _objectives
from .dual_point import *  # noqa: F403 - re-exported: common is where engines look them up
from .dual_point import dual_box, project_dual, project_sum_box, projected_dual_objective
from .objectives import *  # noqa: F403 - re-exported: common is where engines look them up
from .objectives import (  # used here
    SampleLoss,
    as_vector,
    block_norms,
    dual_block_norms,
    kernel_weights,
    loss_value,
    optimal_bias,
    predict,
    primal_objective,
    regularizer_value,
    relative_gap,
)

__all__ = [
    "SEPARABLE_SUMS",
    *_objectives.__all__,
    *_dual_point.__all__,
    "ZeroSolution",
    "zero_solution",
    "zero_result",
    "Incumbents",
    "incumbent_result",
    "Certificate",
    "certify",
    "build_result",
    "UNCONVERGED",
]

#: Statuses that come with a :class:`~mklkit.result.ConvergenceWarning`.
UNCONVERGED = (Status.MAX_ITER, Status.STALLED, Status.NUMERICAL_ERROR)

#: Why engines of sums over kernels need ``separable`` (the reason of :data:`SEPARABLE_SUMS`).
SEPARABLE_WHY = "this engine solves sums over kernels of a function of one block norm"

#: SpicyMKL and the proximal engine minimize :math:`C\\sum_m g(\\|\\alpha_m\\|_{K_m})`
#: block by block (prox, conjugate and envelope of one block norm); a
#: regularizer that couples the blocks (``separable = False``) is a
#: different problem, so it is declined rather than solved block-wise.
SEPARABLE_SUMS = needs(SEPARABLE, why=SEPARABLE_WHY)


# ---------------------------------------------------------------------------
# The zero solution and C_max
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ZeroSolution:
    r"""The solution :math:`\alpha = 0` with the optimal offset, its dual point and ``C_max``.

    Attributes
    ----------
    bias : float
        :math:`b_0 = \mathrm{argmin}_b \sum_i\ell(y_i, b)` (0 without a bias).
    objective : float
        :math:`P(0, b_0)`.
    dual_objective : float
        When ``C >= C_max``: :math:`D` at :attr:`rho` made feasible
        (:func:`project_dual`), equal to :attr:`objective` up to rounding;
        ``-inf`` (not evaluated) below.
    rho : ndarray (N,)
        :math:`\rho^0 = -u` with :math:`u_i \in \partial_z\ell(y_i, b_0)` and
        :math:`\mathbf 1^\top\rho^0 = 0` (with a bias): the dual point of the
        zero solution, before any scaling into the regularizer's domain.
    dual_norms : ndarray (M,)
        :math:`\|\rho^0\|_{K_m}` (NaN when the regularizer has no threshold,
        :math:`t_1 = 0`: they are not needed then).
    C : float
        The problem's ``C``, at which :attr:`dual_objective` is evaluated.
    C_max : float
        :math:`\max_m\|\rho^0\|_{K_m} / t_1` with :math:`t_1` the regularizer's
        :meth:`~mklkit.components.base.Regularizer.zero_threshold` at ``C = 1``:
        for every :math:`C \ge C_{max}`, :math:`\alpha = 0` is optimal, with a
        zero duality gap.  ``inf`` when no ``C`` makes it optimal (a non-sparse
        regularizer and :math:`\rho^0 \ne 0`).
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
        """Relative duality gap of the zero solution at the problem's ``C``."""
        return relative_gap(self.objective, self.dual_objective)

    def optimal(self, tol: float) -> bool:
        """Whether α = 0 is the certified solution: ``C >= C_max`` and gap <= ``tol``."""
        gap = self.gap
        return self.C >= self.C_max and math.isfinite(gap) and gap <= tol


def _zero_dual(sl: SampleLoss, b: float, bias: bool, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    r"""A subgradient :math:`u \in \partial_z (w\ell)(y, b)` with :math:`\mathbf 1^\top u = 0`
    (with a bias); returns :math:`\rho = -u`.

    ``sl.deriv`` (:class:`~mklkit.engines.objectives.SampleLoss`) gives one
    subgradient per sample.  Where the loss
    has a kink at :math:`b`, the one-sided derivatives (a step of
    :math:`10^{-9}(1 + |b|)` either side) span the subdifferential, and the
    given subgradients are projected onto the zero sum within those intervals
    (:func:`project_sum_box`): the selection nearest to ``deriv``.  ``lower``
    and ``upper`` (the domain of the conjugate) are the fallback box.
    """
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
    r"""The zero solution :math:`(\alpha, b) = (0, b_0)` of ``problem``, certified against ``C_max``.

    With sample weights, :math:`b_0` minimizes :math:`\sum_i w_i\ell(y_i, b)` and
    :math:`\rho^0 = -w\,\ell'(b_0)` (:class:`~mklkit.engines.objectives.SampleLoss`),
    so ``C_max`` accounts for the weights.

    At :math:`\alpha = 0` the optimality conditions of eq. (42) are
    :math:`-\rho^0 \in \partial L(b_0\mathbf 1)`, :math:`\mathbf 1^\top\rho^0 = 0` and
    :math:`\|\rho^0\|_{K_m} \le \tilde g_C'(0^+)` for every kernel: the
    lasso-type threshold (as ``lambda_max`` in glmnet and celer), here
    :math:`C_{max} = \max_m\|\rho^0\|_{K_m}/t_1`.  Weak duality certifies it:
    for :math:`C \ge C_{max}` the dual point :math:`\rho^0` is feasible and
    Fenchel–Young makes :math:`D(\rho^0) = P(0, b_0)`.

    For a loss differentiable at :math:`b_0` (logistic, squared) ``C_max`` is
    the exact threshold.  Where the loss has kinks at :math:`b_0` (hinge,
    ε-insensitive) the dual point is one subgradient selection
    (:func:`_zero_dual`), so ``C_max`` is an upper bound of the exact
    threshold: α = 0 is still certified optimal for every :math:`C \ge C_{max}`,
    and engines reach it iteratively below.

    Costs one pass over the bank (:math:`\|\rho^0\|_{K_m}`; none for a regularizer
    without a threshold) and a 1-d search for :math:`b_0`.
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
    else:
        # no threshold: alpha = 0 is never optimal, and the pass over the bank is skipped
        norms, C_max = np.full(M, math.nan), math.inf
    primal = loss_value(loss, y, np.full(N, b0), w) + regularizer_value(reg, np.zeros(norms.size), problem.C)
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


def zero_result(problem: Problem, zero: ZeroSolution, *, engine: str, t0: float) -> SolveResult:
    r"""The certified result :math:`\alpha = 0`, :math:`b = b_0` when ``C >= C_max``.

    Engines return it before iterating (:meth:`ZeroSolution.optimal`); one
    history record (iteration 0) carries the objectives.
    """
    M, N = problem.n_kernels, problem.n_samples
    gap = zero.gap
    elapsed = time.perf_counter() - t0
    record = {
        "iteration": 0,
        "objective": zero.objective,
        "dual_objective": zero.dual_objective,
        "gap": gap,
        "n_active": 0,
        "time_s": elapsed,
    }
    message = (
        f"{engine}: alpha = 0 is optimal: C = {problem.C:g} >= C_max = {zero.C_max:.6g} "
        f"(relative duality gap {gap:.3e}); every kernel weight is 0"
    )
    rho, _ = project_dual(problem, zero.rho, norms=zero.dual_norms)
    return build_result(
        problem,
        engine=engine,
        status=Status.CONVERGED,
        alpha=np.zeros((M, N)),
        bias=zero.bias,
        primal=zero.objective,
        dual=zero.dual_objective,
        iterations=0,
        history=[record],
        message=message,
        time_s=elapsed,
        norms=np.zeros(M),
        rho=rho,
        C_max=zero.C_max,
    )


class Incumbents:
    r"""The best primal point and the best dual point an engine has seen.

    Weak duality holds between *any* primal point and *any* feasible dual
    point, so the smallest primal value and the largest dual value seen
    bound the optimum from both sides: their relative gap certifies the
    primal incumbent, and it is never larger than the gap of the current
    iterate.  Engines return the incumbents, so a solve that stalls or
    oscillates never returns a point worse than one it has already seen
    (the zero solution included, when given).

    ``offer_primal(value, **state)`` and ``offer_dual(value, **state)`` keep
    the state of the better value (copies are the caller's concern: pass
    arrays that are not modified later).
    """

    def __init__(self, zero: ZeroSolution | None = None, M: int = 0, N: int = 0) -> None:
        self.primal = math.inf
        self.dual = -math.inf
        self.primal_state: dict[str, Any] = {}
        self.dual_state: dict[str, Any] = {}
        self.primal_iteration = self.dual_iteration = -2
        if zero is not None:  # iteration -1: the zero solution
            self.offer_primal(zero.objective, -1, alpha=np.zeros((M, N)), bias=zero.bias, norms=np.zeros(M))

    def offer_primal(self, value: float, iteration: int, **state: Any) -> bool:
        """Keep ``state`` if ``value`` is a finite primal value below the incumbent."""
        if math.isfinite(value) and value < self.primal:
            self.primal, self.primal_state, self.primal_iteration = float(value), state, iteration
            return True
        return False

    def offer_dual(self, value: float, iteration: int, **state: Any) -> bool:
        """Keep ``state`` if ``value`` is a finite dual value above the incumbent."""
        if math.isfinite(value) and value > self.dual:
            self.dual, self.dual_state, self.dual_iteration = float(value), state, iteration
            return True
        return False

    @property
    def gap(self) -> float:
        """:func:`relative_gap` of the incumbents (``inf`` before both exist)."""
        if not (math.isfinite(self.primal) and math.isfinite(self.dual)):
            return math.inf
        return relative_gap(self.primal, self.dual)


def incumbent_result(
    problem: Problem,
    inc: Incumbents,
    *,
    engine: str,
    status: Status,
    message: str,
    iterations: int,
    history: list[dict[str, Any]],
    t0: float,
    C_max: float | None,
    unit: str = "iteration",
    stacklevel: int = 4,
    warn: bool = True,
) -> SolveResult:
    """The result of a run from its :class:`Incumbents`: best primal and best dual point.

    The primal state offered must hold ``alpha`` (M, N), ``bias`` and
    ``norms`` (M,); the dual state ``rho``.  When the primal point is not
    the last iterate, the message says where it comes from (``unit`` names
    an iteration of the engine).  ``warn``: as for :func:`build_result`
    (:class:`mklkit.engines.base.Run` builds results without and
    :meth:`mklkit.engines.base.Engine.solve` warns once).
    """
    st = inc.primal_state
    if inc.primal_iteration != iterations:
        where = "alpha = 0 (the zero solution)" if inc.primal_iteration < 0 else f"{unit} {inc.primal_iteration}"
        message += f"; the primal point is that of {where}"
    return build_result(
        problem,
        engine=engine,
        status=status,
        alpha=st["alpha"],
        bias=st["bias"],
        primal=inc.primal,
        dual=inc.dual,
        iterations=iterations,
        history=history,
        message=message,
        time_s=time.perf_counter() - t0,
        norms=st["norms"],
        rho=inc.dual_state.get("rho"),
        C_max=C_max,
        stacklevel=stacklevel + 1,
        warn=warn,
    )


# ---------------------------------------------------------------------------
# Certificate of a given point
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Certificate:
    r"""Primal and dual objectives of a point and their gap: what every engine certifies.

    Build it with :meth:`at` (the primal value and a dual point that
    :func:`project_dual` makes feasible) or :meth:`of` (both values already
    known, e.g. a dual the engine evaluates in a form of its own).  Values an
    engine carries beside the certificate (its predictions, the bias it used,
    a smoothed gap) are in :attr:`extra`.

    Attributes
    ----------
    primal : float
        :math:`P(\alpha, b)`.
    dual : float
        :math:`D(\tilde\rho)` at the feasible dual point :attr:`rho`.
    gap : float
        :func:`relative_gap` of the two.
    rho : ndarray (N,)
        That feasible dual point.
    norms : ndarray (M,)
        :math:`\|\alpha_m\|_{K_m}`.
    extra : dict
        The engine's own values.
    """

    primal: float
    dual: float
    gap: float
    rho: np.ndarray
    norms: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, primal: float, dual: float, rho: np.ndarray, norms: np.ndarray, **extra: Any) -> "Certificate":
        """The certificate of a primal value and a dual value at the feasible point ``rho``."""
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
        r"""The certificate of a primal value and the dual at ``rho`` made feasible
        (:func:`projected_dual_objective`; ``dual_norms``: :math:`\|\rho\|_{K_m}` when
        known)."""
        dual, rho_f, _ = projected_dual_objective(problem, rho, norms=dual_norms)
        return cls.of(primal, dual, rho_f, norms, **extra)


def certify(problem: Problem, alpha: np.ndarray, bias: float, rho: np.ndarray | None = None) -> Certificate:
    r"""The duality gap of ``(alpha, bias)`` on ``problem``'s bank, from scratch.

    The primal :math:`P(\alpha, b)` (:func:`primal_objective`), and
    the dual at two feasible points (:meth:`Certificate.at`): the
    given ``rho`` (e.g. the dual point an engine returned on another
    representation of the same kernels) and :math:`-\ell'(z)` at the
    predictions :math:`z = \sum_m K_m\alpha_m + b`; the certificate with the
    larger dual value is kept (weak duality holds for either).  One pass over
    the bank for the block norms and the predictions, one for each dual point.
    """
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


# ---------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------
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
    stacklevel: int = 3,
    weights: np.ndarray | None = None,
    warn: bool = True,
) -> SolveResult:
    r"""Assemble a :class:`~mklkit.result.SolveResult` and warn when unconverged.

    Kernel weights are :func:`kernel_weights` of the primal block norms
    unless given.  The result holds ``alpha`` itself when it is a float64
    array (the engine's run has ended; nothing writes to it after).  With
    ``warn``, statuses in :data:`UNCONVERGED` emit ``message`` as a
    :class:`~mklkit.result.ConvergenceWarning` (never an exception).

    Parameters
    ----------
    norms : ndarray (M,), optional
        :math:`\|\alpha_m\|_{K_m}`; computed when not given.
    rho : ndarray (N,), optional
        The dual point used for ``dual``.
    C_max : float, optional
        :attr:`ZeroSolution.C_max` of the problem, when the engine computed it.
    weights : ndarray (M,), optional
        Kernel weights summing to 1 (or all 0), for an engine whose
        regularizer's ``weight`` kernel does not give them (a regularizer
        that couples the blocks).
    """
    # the result takes ``alpha`` over (a copy only to convert it): the engines hand in a fresh
    # array, and a copy of an (M, N) array costs 0.2 s per solve on w8a's bank
    alpha = np.asarray(alpha, dtype=np.float64)
    if norms is None:
        norms = block_norms(problem.bank, alpha)
    norms = np.array(norms, dtype=np.float64)
    if weights is None:
        weights = kernel_weights(problem.regularizer, norms)
    else:
        weights = np.array(weights, dtype=np.float64)
    gap = relative_gap(primal, dual)
    if warn and status in UNCONVERGED:
        warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel)
    return SolveResult(
        status=status,
        objective=float(primal),
        dual_objective=float(dual),
        gap=float(gap),
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
