r"""The joint multiclass problem, its result, the zero solution and the certificate
(:mod:`mklkit.engines.joint`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...components.base import Regularizer
from ...components.multiclass import MulticlassLoss
from ...components.params import ParamError
from ...kernels.ops import ArrayBank, GramBank
from ...result import SolveResult, Status
from ..common import scale_into_radius
from ..objectives import regularizer_value, relative_gap


class JointProblem:
    r"""A joint multiclass MKL problem (module docstring).

    Parameters
    ----------
    K : ndarray (M, N, N) or GramBank
        The Gram bank (an array, or a :class:`~mklkit.kernels.ops.GramBank` such as a
        :class:`~mklkit.kernels.factor.FactorBank`).
    y : array (N,)
        Class indices :math:`0, \dots, K-1`.
    n_classes : int
        K (>= 2; every class needs a sample).
    loss : MulticlassLoss
    regularizer : Regularizer
        Separable (:math:`C\sum_m g(\|A_m\|^2_{K_m})`).
    C : float
        > 0.
    bias : bool
        An unregularized offset :math:`b \in \mathbb R^K`.
    sample_weight : array (N,), optional
        Weights :math:`w_i > 0`.
    """

    def __init__(
        self,
        K: Any,
        y: Any,
        n_classes: int,
        loss: MulticlassLoss,
        regularizer: Regularizer,
        C: float,
        bias: bool = True,
        sample_weight: Any = None,
    ) -> None:
        if not isinstance(loss, MulticlassLoss):
            raise ParamError("loss", loss, "a multiclass loss (MulticlassLoss, e.g. 'multinomial')", owner="joint")
        if not isinstance(regularizer, Regularizer) or not regularizer.separable:
            raise ParamError(
                "regularizer", regularizer, "a separable regularizer (l1, elasticnet, lq, uniform, kl)", owner="joint"
            )
        self.bank: GramBank = K if isinstance(K, GramBank) else ArrayBank(np.ascontiguousarray(K, dtype=np.float64))
        M, N, _ = self.bank.shape
        if int(n_classes) < 2:
            raise ParamError("n_classes", n_classes, "an integer >= 2", owner="joint")
        self.n_classes = int(n_classes)
        self.y = loss.validate_labels(y, self.n_classes)
        if self.y.shape[0] != N:
            raise ValueError(f"the bank has N={N} samples but y has {self.y.shape[0]} labels")
        if not (isinstance(C, (int, float)) and C > 0 and math.isfinite(C)):
            raise ParamError("C", C, "a finite number > 0", owner="joint")
        self.C = float(C)
        self.bias = bool(bias)
        self.loss, self.regularizer = loss, regularizer
        self._lj, self._lp = loss.jit, loss.param_vector  # the loss's kernels, read once
        if sample_weight is None:
            self.sample_weight = None
            self.w = np.ones(N)
        else:
            w = np.ascontiguousarray(sample_weight, dtype=np.float64)
            if w.shape != (N,) or not (np.all(np.isfinite(w)) and np.all(w > 0.0)):
                raise ParamError("sample_weight", "given", f"(N,) = ({N},) finite weights > 0", owner="joint")
            self.sample_weight = self.w = w
        self.E = np.zeros((N, self.n_classes))
        self.E[np.arange(N), self.y.astype(np.int64)] = 1.0

    @property
    def n_kernels(self) -> int:
        return int(self.bank.shape[0])

    @property
    def n_samples(self) -> int:
        return int(self.bank.shape[1])

    # the objective's pieces, each in one place
    def loss_values(self, F: np.ndarray) -> float:
        r""":math:`\sum_i w_iL(y_i, F_i)`."""
        return float(np.sum(self.w * self._lj.value(self.y, np.ascontiguousarray(F), self._lp)))

    def loss_grad(self, F: np.ndarray) -> np.ndarray:
        r""":math:`G_i = w_i\partial_F L(y_i, F_i)`, (N, K)."""
        return self.w[:, None] * self._lj.grad(self.y, np.ascontiguousarray(F), self._lp)

    def loss_conjugate(self, P: np.ndarray) -> float:
        r""":math:`\sum_i (w_iL)^*(y_i, -P_i) = \sum_i w_iL^*(y_i, -P_i/w_i)`; ``inf`` outside the domain."""
        U = np.ascontiguousarray(-P / self.w[:, None])
        return float(np.sum(self.w * self._lj.conj(self.y, U, self._lp)))

    def reg_conjugate(self, dual_norms: np.ndarray) -> float:
        r""":math:`\sum_m \tilde g_C^*(\|P\|_{K_m})`."""
        reg = self.regularizer
        return float(np.sum(reg.jit.conj(np.ascontiguousarray(dual_norms), self.C, reg.param_vector)))

    def dual_value(self, P: np.ndarray, dual_norms: np.ndarray) -> tuple[float, np.ndarray]:
        r"""The dual objective at ``P`` scaled into the domain of :math:`\tilde g_C^*` (``dual_norms``:
        :math:`\|P\|_{K_m}` or upper bounds of them), and the scaled point."""
        radius = float(self.regularizer.conj_radius(self.C))
        P, norms = scale_into_radius(P, dual_norms, radius)
        return -(self.loss_conjugate(P) + self.reg_conjugate(norms)), P

    def dual_from_gradient(self, G: np.ndarray, gg: np.ndarray) -> tuple[float, np.ndarray]:
        r"""The dual at the point of :meth:`MulticlassLoss.dual_point` near :math:`-G`, ``gg`` the squares
        :math:`\|G\|^2_{K_m}`: :math:`\|P\|_{K_m} \le \|G\|_{K_m} + \sqrt{\mathrm{tr}K_m}\,\|P + G\|_F`
        (no further pass over the bank; the dual is nondecreasing in these norms, so the bound
        keeps weak duality)."""
        P = self.loss.dual_point(self.y, G, self.w, self.bias)
        gn = np.sqrt(np.maximum(gg, 0.0))
        delta = float(np.linalg.norm(P + G))
        if delta > 0.0:
            gn = gn + np.sqrt(np.maximum(self._trace(), 0.0)) * delta
        return self.dual_value(P, gn)

    def exact_dual(
        self, G: np.ndarray, dual_norms: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> tuple[float, np.ndarray]:
        r"""The dual at the point of :meth:`MulticlassLoss.dual_point` near :math:`-G` with its exact block
        norms (one pass over the bank; ``dual_norms`` computes them when given)."""
        P = self.loss.dual_point(self.y, G, self.w, self.bias)
        if dual_norms is None:
            dn = np.sqrt(np.maximum(np.einsum("mnk,nk->m", self.bank.matmats(P), P), 0.0))
        else:
            dn = dual_norms(P)
        return self.dual_value(P, dn)

    def _trace(self) -> np.ndarray:
        tr = getattr(self, "_tr", None)
        if tr is None:
            tr = self._tr = np.asarray(self.bank.trace(), dtype=np.float64)
        return tr

    def products(self, A: np.ndarray) -> np.ndarray:
        r""":math:`K_mA_m` for every kernel, (M, N, K)."""
        if isinstance(self.bank, ArrayBank):
            return np.matmul(self.bank.K, A)
        idx = np.arange(self.n_kernels, dtype=np.int64)
        return np.stack([self.bank.matvecs_rows(np.ascontiguousarray(A[:, :, k]), idx) for k in range(A.shape[2])], -1)


@dataclass(frozen=True)
class JointResult:
    r"""The outcome of :func:`solve_joint`.

    Attributes
    ----------
    status, objective, dual_objective, gap, iterations, message, time_s, history
        As in :class:`~mklkit.result.SolveResult`.
    coef : ndarray (M, N, K)
        :math:`A_m`, the class coefficients of every kernel.
    bias : ndarray (K,)
    block_norms, kernel_weights : ndarray (M,)
        :math:`\|A_m\|_{K_m}` and the kernel weights :math:`d_m` (summing to 1) shared by all classes.
    dual : ndarray (N, K)
        The feasible dual point of ``dual_objective``.
    C_max : float
        The smallest C at which :math:`A = 0` is optimal (:func:`joint_C_max`).
    factor_coef : ndarray (R, K) or None
        On a factor bank, the factor coordinates :math:`\beta_m = L_m^\top A_m` stacked like the bank's
        ``LT`` (a warm start reads them instead of ``coef``); ``None`` on other banks.
    """

    status: Status
    objective: float
    dual_objective: float
    gap: float
    iterations: int
    coef: np.ndarray
    bias: np.ndarray
    block_norms: np.ndarray
    kernel_weights: np.ndarray
    dual: np.ndarray
    C_max: float
    history: list[dict[str, Any]] = field(default_factory=list)
    factor_coef: np.ndarray | None = None
    message: str = ""
    time_s: float = 0.0
    engine: str = "joint"

    @property
    def converged(self) -> bool:
        return self.status == Status.CONVERGED

    @property
    def trivial(self) -> bool:
        """Whether every kernel is off."""
        return not np.any(self.block_norms > 0)

    @property
    def active_set(self) -> np.ndarray:
        return np.flatnonzero(self.block_norms > 0)

    def class_result(self, k: int) -> SolveResult:
        """Class ``k``'s column as a :class:`~mklkit.result.SolveResult` (its coefficients and offset;
        the shared objective, gap, block norms and weights)."""
        return SolveResult(
            status=self.status,
            objective=self.objective,
            dual_objective=self.dual_objective,
            gap=self.gap,
            iterations=self.iterations,
            alpha=np.ascontiguousarray(self.coef[:, :, k]),
            bias=float(self.bias[k]),
            kernel_weights=self.kernel_weights,
            block_norms=self.block_norms,
            history=self.history,
            message=self.message,
            time_s=self.time_s,
            engine=self.engine,
            C_max=self.C_max,
        )


@dataclass(frozen=True)
class _Zero:
    bias: np.ndarray
    objective: float
    dual_objective: float
    dual: np.ndarray
    C_max: float


def _zero_offset(problem: JointProblem) -> np.ndarray:
    if not problem.bias:
        return np.zeros(problem.n_classes)
    return np.asarray(problem.loss.optimal_offset(problem.y, problem.w, problem.n_classes), dtype=np.float64)


def joint_zero(problem: JointProblem) -> _Zero:
    r"""The solution :math:`A = 0`, :math:`b = b_0` (the optimal offset) and its certificate:
    :math:`P^0` from :math:`G^0 = w\,\partial_F L(y, \mathbf 1b_0^\top)`, ``C_max`` :math:`=
    \max_m\|G^0\|_{K_m}/t_1` (:math:`t_1 = \tilde g_1'(0^+)`, ``inf`` without a threshold);
    the dual is certified (``-inf`` otherwise) when :math:`C \ge` ``C_max``.  One pass over the bank."""
    b0 = _zero_offset(problem)
    N = problem.n_samples
    F0 = np.tile(b0, (N, 1))
    G0 = problem.loss_grad(F0)
    KG = problem.bank.matmats(G0)
    gn = np.sqrt(np.maximum(np.einsum("mnk,nk->m", KG, G0), 0.0))
    t1 = float(problem.regularizer.zero_threshold(1.0))
    top = float(np.max(gn)) if gn.size else 0.0
    if top <= 0.0:
        C_max = 0.0
    elif t1 > 0.0 and math.isfinite(t1):
        C_max = top / t1
    else:
        C_max = math.inf
    primal = problem.loss_values(F0)
    dual, P = -math.inf, -G0
    if problem.C >= C_max:
        dual, P = problem.dual_from_gradient(G0, gn**2)
    return _Zero(bias=b0, objective=primal, dual_objective=dual, dual=P, C_max=C_max)


def joint_C_max(problem: JointProblem) -> float:
    r"""The smallest C at which :math:`A = 0` is optimal (:func:`joint_zero`)."""
    return joint_zero(problem).C_max


def certify_joint(problem: JointProblem, coef: np.ndarray, bias: np.ndarray) -> tuple[float, float, np.ndarray]:
    r"""``primal, dual, P`` of ``(coef, bias)`` from scratch: the primal objective and the dual at
    the feasible point made from :math:`-G(F)` with its exact block norms (two passes)."""
    coef = np.asarray(coef, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64) if problem.bias else np.zeros(problem.n_classes)
    U = problem.products(coef)
    norms = _norms(coef, U)
    F = U.sum(axis=0) + b
    primal = problem.loss_values(F) + regularizer_value(problem.regularizer, norms, problem.C)
    dual, P = problem.exact_dual(problem.loss_grad(F))
    return primal, dual, P


def _norms(A: np.ndarray, U: np.ndarray) -> np.ndarray:
    r""":math:`\|A_m\|_{K_m} = \sqrt{\langle A_m, U_m\rangle}` with ``U`` the products :math:`K_mA_m`."""
    M = A.shape[0]
    return np.sqrt(np.maximum(np.einsum("ij,ij->i", A.reshape(M, -1), U.reshape(M, -1)), 0.0))


@dataclass
class JointRun:
    """A solve in progress: the problem, its zero solution (:func:`joint_zero`), the stopping rule, the warm
    start, the callback, the clock and the history of records; ``unit`` names a step (``"step"``,
    ``"sweep"``)."""

    problem: JointProblem
    zero: Any
    tol: float
    max_iter: int
    warm_start: JointResult | None
    callback: Callable[[dict[str, Any]], Any] | None
    t0: float
    unit: str = "step"
    history: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self, it: int, primal: float, dual: float, norms: np.ndarray, **extra: float
    ) -> tuple[Status, str] | None:
        """Append step ``it``'s record (``iteration``, ``objective``, ``dual_objective``, ``gap``, ``n_active``,
        ``extra``, ``time_s``); the status and message that end the run (the gap within ``tol``, or a true
        return of the callback), else ``None``."""
        gap = relative_gap(primal, dual)
        rec = {
            "iteration": it,
            "objective": primal,
            "dual_objective": dual,
            "gap": gap,
            "n_active": int(np.sum(norms > 0)),
            **extra,
            "time_s": time.perf_counter() - self.t0,
        }
        self.history.append(rec)
        if math.isfinite(gap) and gap <= self.tol:
            return Status.CONVERGED, f"converged: relative gap {gap:.3g} <= tol {self.tol:g} in {it} {self.unit}s"
        if self.callback is not None and self.callback(rec):
            return Status.STOPPED, f"stopped by the callback at {self.unit} {it}"
        return None


@dataclass(frozen=True)
class Outcome:
    """What an iteration of :func:`~mklkit.engines.joint.solve_joint` ends with: the status and steps, the
    best primal and dual values with the dual point, the block norms, offset and message of the returned
    point, and its coefficients (M, N, K) or factor coordinates (R, K)."""

    status: Status
    iterations: int
    primal: float
    dual: float
    P: np.ndarray
    norms: np.ndarray
    bias: np.ndarray
    message: str
    coef: np.ndarray | None = None
    factor_coef: np.ndarray | None = None


def factor_coordinates(bank: Any, coef: np.ndarray) -> np.ndarray:
    r"""The factor coordinates :math:`\beta_m = L_m^\top A_m` of coefficients (M, N, K), stacked (R, K)."""
    return np.stack([bank.coefficients(np.ascontiguousarray(coef[:, :, k])) for k in range(coef.shape[2])], -1)


def factor_coefficients(bank: Any, beta: np.ndarray) -> np.ndarray:
    r"""Coefficients (M, N, K) with :math:`L_m^\top A_m = \beta_m` for factor coordinates (R, K)
    (:meth:`~mklkit.kernels.factor.FactorBank.alpha_from_beta`: the bank's own solve of a block, triangular on
    exact factors, where it has one, else the minimum-norm coefficients)."""
    return bank.alpha_from_beta(np.asarray(beta, dtype=np.float64))
