r"""Joint multiclass MKL: one kernel weighting shared by all classes (``docs/multiclass.md``).

.. math::
    \min_{A, b}\ \sum_i w_i L(y_i, F_i) + \sum_m \tilde g_C(\|A_m\|_{K_m}),\qquad
    F = \sum_m K_mA_m + \mathbf 1 b^\top \in \mathbb R^{N\times K},\quad
    \|A_m\|_{K_m}^2 = \mathrm{tr}(A_m^\top K_mA_m),

with :math:`A_m \in \mathbb R^{N\times K}` the class coefficients of kernel m, a multiclass loss
(:class:`~mklkit.components.multiclass.MulticlassLoss`) and any separable regularizer applied
to the block norms (the group norm over kernels and classes together).  Its Fenchel dual is

.. math::
    \max_{P:\ \mathbf 1^\top P = 0}\ -\sum_i (w_iL)^*(y_i, -P_i) - \sum_m \tilde g_C^*(\|P\|_{K_m}),
    \qquad \|P\|_{K_m}^2 = \mathrm{tr}(P^\top K_mP),

(the constraint from the bias), and the relative duality gap certifies a solution as in the
binary problem.  :func:`solve_joint` is FISTA (Beck & Teboulle 2009) in the product RKHS
(Mosci et al. 2008, as the ``proximal`` engine): a gradient step of every block by the loss
gradient :math:`G`, the block prox of the regularizer, back-tracking on the curvature and
function restart (O'Donoghue & Candès 2015).  One pass over the bank per step, :math:`K_mG`
for every kernel (:meth:`~mklkit.kernels.ops.GramBank.matmats`); the step, its back-tracking
and the certificate are combinations of stored products.  On a factor bank the iteration runs in
factor coordinates :math:`\beta_m = L_m^\top A_m` (one product with :math:`L^\top` per step, one
with :math:`L` per trial of the curvature).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..components.base import Regularizer
from ..components.multiclass import MulticlassLoss
from ..components.params import ParamError
from ..kernels.factor import FactorBank
from ..kernels.ops import ArrayBank, GramBank
from ..result import ConvergenceWarning, SolveResult, Status
from .common import UNCONVERGED, scale_into_radius
from .objectives import kernel_weights, regularizer_value, relative_gap
from .proximal_objective import SumOperator, lipschitz_estimate

#: Steps between duals with exact block norms (the others bound the norms without a pass over the bank).
EXACT_DUAL_EVERY = 10

__all__ = ["JointProblem", "JointResult", "solve_joint", "certify_joint", "joint_zero", "joint_C_max"]


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
        lo = self.loss
        return float(np.sum(self.w * lo.jit.value(self.y, np.ascontiguousarray(F), lo.param_vector)))

    def loss_grad(self, F: np.ndarray) -> np.ndarray:
        r""":math:`G_i = w_i\partial_F L(y_i, F_i)`, (N, K)."""
        lo = self.loss
        return self.w[:, None] * lo.jit.grad(self.y, np.ascontiguousarray(F), lo.param_vector)

    def loss_conjugate(self, P: np.ndarray) -> float:
        r""":math:`\sum_i (w_iL)^*(y_i, -P_i) = \sum_i w_iL^*(y_i, -P_i/w_i)`; ``inf`` outside the domain."""
        lo = self.loss
        U = np.ascontiguousarray(-P / self.w[:, None])
        return float(np.sum(self.w * lo.jit.conj(self.y, U, lo.param_vector)))

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


class _Iterate:
    """A FISTA point: its coordinates ``X`` (coefficients (M, N, K), or factor coordinates (R, K)), the
    products ``U`` of coefficients (:math:`K_mA_m`; ``None`` in factor coordinates), offset ``b`` and
    outputs ``F``."""

    __slots__ = ("X", "U", "b", "F")

    def __init__(self, X: np.ndarray, U: np.ndarray | None, b: np.ndarray, F: np.ndarray) -> None:
        self.X, self.U, self.b, self.F = X, U, b, F

    def extrapolate(self, prev: "_Iterate", beta: float) -> "_Iterate":
        """:math:`x + \\beta(x - x_{prev})`, every part (the outputs are linear in the point)."""

        def ext(a: Any, b: Any) -> Any:
            if a is None:
                return None
            out = np.subtract(a, b)
            out *= beta
            out += a
            return out

        return _Iterate(ext(self.X, prev.X), ext(self.U, prev.U), ext(self.b, prev.b), ext(self.F, prev.F))


class _KernelSpace:
    r"""Iterates in the product RKHS on any bank: coefficients :math:`A` (M, N, K) kept with their
    products :math:`U_m = K_mA_m`; the gradient's image is :math:`K_mG` (one pass)."""

    def __init__(self, problem: JointProblem) -> None:
        self.problem, self.bank = problem, problem.bank
        self.M, self.N, self.K = problem.n_kernels, problem.n_samples, problem.n_classes

    def point(self, coef: np.ndarray | None, b: np.ndarray) -> _Iterate:
        if coef is None:
            Z = np.zeros((self.M, self.N, self.K))
            return _Iterate(Z, Z.copy(), b, np.tile(b, (self.N, 1)))
        U = self.problem.products(coef)
        return _Iterate(coef, U, b, U.sum(axis=0) + b)

    def sq_norms(self, x: _Iterate) -> np.ndarray:
        return _norms(x.X, x.U) ** 2

    def gradient(self, v: _Iterate, G: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        r"""The image of ``G``, :math:`\langle G, K_mV_m\rangle` and :math:`\|G\|^2_{K_m}`."""
        KG = self.bank.matmats(G)
        SU, SK, g = v.U.reshape(self.M, -1), KG.reshape(self.M, -1), G.ravel()
        return (SU, SK, KG), SU @ g, SK @ g

    def outputs(self, v: _Iterate, image: Any, s: np.ndarray, eta: float, b1: np.ndarray) -> np.ndarray:
        r""":math:`F^+ = \sum_m s_m(U_m - \eta K_mG) + b^+`."""
        SU, SK, _ = image
        return (s @ SU - eta * (s @ SK)).reshape(self.N, self.K) + b1

    def step(self, v: _Iterate, G: np.ndarray, image: Any, s: np.ndarray, eta: float, b1: Any, F1: Any) -> _Iterate:
        se = (s * eta)[:, None, None]
        return _Iterate(s[:, None, None] * v.X - se * G[None], s[:, None, None] * v.U - se * image[2], b1, F1)

    def dual_norms(self, P: np.ndarray) -> np.ndarray:
        return np.sqrt(np.maximum(np.einsum("mnk,nk->m", self.bank.matmats(P), P), 0.0))

    def coef(self, x: _Iterate) -> np.ndarray:
        return x.X


class _FactorSpace:
    r"""Iterates in factor coordinates on a factor bank, :math:`K_m = L_mL_m^\top`:
    :math:`\beta_m = L_m^\top A_m` (stacked (R, K)), :math:`F = \sum_mL_m\beta_m + \mathbf 1b^\top` and
    :math:`\|A_m\|_{K_m} = \|\beta_m\|_F`.  The same iteration (a gradient step
    :math:`\beta_m - \eta L_m^\top G` and the block prox), with the gradient's image
    :math:`L^\top G` (one product) and the outputs :math:`L\beta` (one product per trial step)."""

    def __init__(self, problem: JointProblem) -> None:
        bank = problem.bank
        self.problem, self.bank, self.LT = problem, bank, bank.LT
        self.M, self.N, self.K = problem.n_kernels, problem.n_samples, problem.n_classes
        self.seg = np.repeat(np.arange(self.M), np.diff(np.asarray(bank.starts)))
        self._last: np.ndarray | None = None

    def _segsum(self, X: np.ndarray) -> np.ndarray:
        return np.bincount(self.seg, weights=X.sum(axis=1), minlength=self.M).astype(np.float64)

    def point(self, coef: np.ndarray | None, b: np.ndarray) -> _Iterate:
        if coef is None:
            return _Iterate(np.zeros((self.seg.size, self.K)), None, b, np.tile(b, (self.N, 1)))
        beta = np.stack([self.bank.coefficients(np.ascontiguousarray(coef[:, :, k])) for k in range(self.K)], -1)
        return _Iterate(beta, None, b, np.asarray(self.LT.T @ beta) + b)

    def sq_norms(self, x: _Iterate) -> np.ndarray:
        return self._segsum(x.X * x.X)

    def gradient(self, v: _Iterate, G: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray]:
        T = np.asarray(self.LT @ G)
        return T, self._segsum(v.X * T), self._segsum(T * T)

    def outputs(self, v: _Iterate, image: Any, s: np.ndarray, eta: float, b1: np.ndarray) -> np.ndarray:
        self._last = s[self.seg][:, None] * (v.X - eta * image)
        return np.asarray(self.LT.T @ self._last) + b1

    def step(self, v: _Iterate, G: np.ndarray, image: Any, s: np.ndarray, eta: float, b1: Any, F1: Any) -> _Iterate:
        return _Iterate(self._last, None, b1, F1)

    def dual_norms(self, P: np.ndarray) -> np.ndarray:
        Q = np.asarray(self.LT @ P)
        return np.sqrt(np.maximum(self._segsum(Q * Q), 0.0))

    def coef(self, x: _Iterate) -> np.ndarray:
        """Coefficients with :math:`L_m^\top A_m = \beta_m`, (M, N, K): the bank's own solve of a block
        (triangular, on exact factors) where it has one, else the minimum-norm ones."""
        own = getattr(self.bank, "solve_coefficients", None)
        if own is None:
            return np.stack([self.bank.alpha_from_beta(np.ascontiguousarray(x.X[:, k])) for k in range(self.K)], -1)
        out = np.zeros((self.M, self.N, self.K))
        starts = np.asarray(self.bank.starts)
        for m in range(self.M):
            a, b = int(starts[m]), int(starts[m + 1])
            if b > a and np.any(x.X[a:b] != 0.0):
                for k in range(self.K):
                    out[m, :, k] = own(m, x.X[a:b, k])
        return out


def solve_joint(
    problem: JointProblem,
    *,
    tol: float = 1e-4,
    max_iter: int = 10000,
    warm_start: JointResult | None = None,
    callback: Callable[[dict[str, Any]], Any] | None = None,
) -> JointResult:
    r"""Solve a :class:`JointProblem` by FISTA with back-tracking and function restart.

    Every step: the loss gradient :math:`G` at the extrapolated point :math:`V`, the products
    :math:`K_mG` (one pass over the bank), then with step :math:`\eta = 1/L`
    :math:`A_m^+ = \mathrm{prox}_{\eta\tilde g_C}(\|\tilde A_m\|_{K_m})\,\tilde A_m/\|\tilde A_m\|_{K_m}`,
    :math:`\tilde A_m = V_m - \eta G`, and :math:`b^+ = b_V - (\eta/\omega)G^\top\mathbf 1` (the bias
    metric :math:`\omega` of the ``proximal`` engine); :math:`L` is doubled until the
    sufficient-decrease test holds, and shrunk before each step (halved until the first
    back-tracking, then by 0.9); momentum restarts when the objective rises.  The dual point of the
    step's gradient gives the certificate; the run stops when the best primal and the best dual
    seen are within ``tol`` (relative gap), else after ``max_iter`` steps with a
    :class:`~mklkit.result.ConvergenceWarning`.

    Parameters
    ----------
    problem : JointProblem
    tol : float
        Relative duality gap at which to stop.
    max_iter : int
        Most FISTA steps.
    warm_start : JointResult, optional
        A result of the same bank and labels (e.g. at a neighbouring C).
    callback : callable, optional
        Called with each step's record (``iteration``, ``objective``, ``dual_objective``, ``gap``,
        ``n_active``, ``time_s``); a true return stops the run (status ``stopped``).

    Returns
    -------
    JointResult
    """
    if not (tol > 0 and math.isfinite(tol)):
        raise ParamError("tol", tol, "a finite number > 0", owner="joint")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ParamError("max_iter", max_iter, "an integer >= 1", owner="joint")
    loss, reg = problem.loss, problem.regularizer
    if not loss.smooth_primal or not math.isfinite(loss.grad_lipschitz()):
        raise ParamError(
            "loss", loss.name, "a multiclass loss with a Lipschitz gradient (smooth_primal), e.g. 'multinomial'"
        )
    t0 = time.perf_counter()
    M, N, K = problem.n_kernels, problem.n_samples, problem.n_classes
    C, rp = problem.C, reg.param_vector
    zero = joint_zero(problem)
    history: list[dict[str, Any]] = []

    def finish(
        status: Status,
        it: int,
        A: np.ndarray,
        b: np.ndarray,
        primal: float,
        dual: float,
        P: np.ndarray,
        norms: np.ndarray,
        message: str,
    ) -> JointResult:
        gap = relative_gap(primal, dual)
        if status in UNCONVERGED:
            warnings.warn(f"joint multiclass MKL: {message}", ConvergenceWarning, stacklevel=3)
        return JointResult(
            status=status,
            objective=float(primal),
            dual_objective=float(dual),
            gap=float(gap),
            iterations=int(it),
            coef=A,
            bias=np.asarray(b, dtype=np.float64) if problem.bias else np.zeros(K),
            block_norms=norms,
            kernel_weights=kernel_weights(reg, norms),
            dual=P,
            C_max=float(zero.C_max),
            history=history,
            message=message,
            time_s=time.perf_counter() - t0,
        )

    zero_gap = relative_gap(zero.objective, zero.dual_objective)
    if C >= zero.C_max and math.isfinite(zero_gap) and zero_gap <= tol:
        return finish(
            Status.CONVERGED,
            0,
            np.zeros((M, N, K)),
            zero.bias,
            zero.objective,
            zero.dual_objective,
            zero.dual,
            np.zeros(M),
            f"A = 0 is optimal: C = {C:.6g} >= C_max = {zero.C_max:.6g}",
        )

    # the metric and the curvature: L(grad) * lambda_max(sum K_m + 1 1^T / omega)
    bank = problem.bank
    if isinstance(bank, ArrayBank):
        S: Any = bank.K.sum(axis=0)
    elif isinstance(bank, FactorBank):
        S = SumOperator(bank)
    else:
        S = _GenericSum(bank)
    lam, omega = lipschitz_estimate(S, problem.bias)
    L = float(loss.grad_lipschitz()) * float(np.max(problem.w)) * lam

    space: Any = _FactorSpace(problem) if isinstance(bank, FactorBank) else _KernelSpace(problem)
    if warm_start is not None and np.asarray(warm_start.coef).shape == (M, N, K):
        b0 = np.array(warm_start.bias, dtype=np.float64) if problem.bias else np.zeros(K)
        x = space.point(np.array(warm_start.coef, dtype=np.float64), b0)
    else:
        x = space.point(None, zero.bias.copy())
    x_prev = x
    norms_x = np.sqrt(np.maximum(space.sq_norms(x), 0.0))
    p_x = problem.loss_values(x.F) + regularizer_value(reg, norms_x, C)
    best_p, best_x, best_norms = p_x, x, norms_x
    best_d, best_P = zero.dual_objective, zero.dual
    t_k, shrink = 1.0, 0.5
    status, message, it = Status.MAX_ITER, "", 0
    for it in range(1, int(max_iter) + 1):
        t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k))
        beta = (t_k - 1.0) / t_next
        if beta > 0.0 and x is not x_prev:
            v = x.extrapolate(x_prev, beta)
            aa = space.sq_norms(v)
        else:
            v, aa = x, norms_x**2
        fv = problem.loss_values(v.F)
        G = problem.loss_grad(v.F)
        gb = G.sum(axis=0)
        # the gradient's image, <G, K_m V_m> and ||G||^2_{K_m}: the step's norms, outputs and model
        image, ag, gg = space.gradient(v, G)
        if not (math.isfinite(fv) and np.all(np.isfinite(gg))):
            status, message = Status.NUMERICAL_ERROR, f"non-finite loss or gradient at step {it}"
            break
        d_val, P = problem.dual_from_gradient(G, gg)
        if d_val > best_d:
            best_d, best_P = d_val, P
        L *= shrink
        for _ in range(60):
            eta = 1.0 / L
            nt = np.sqrt(np.maximum(aa - 2.0 * eta * ag + eta * eta * gg, 0.0))
            pn = np.asarray(reg.jit.prox(np.ascontiguousarray(nt), eta * C, rp), dtype=np.float64)
            s = np.where(nt > 0.0, pn / np.where(nt > 0.0, nt, 1.0), 0.0)
            b1 = v.b - (eta / omega) * gb if problem.bias else v.b
            F1 = space.outputs(v, image, s, eta, b1)
            f1 = problem.loss_values(F1)
            # ||x1 - v||^2 with A1_m - V_m = (s_m - 1) V_m - s_m eta G, and the bias in its metric
            dist = float(np.sum((s - 1.0) ** 2 * aa - 2.0 * (s - 1.0) * s * eta * ag + (s * eta) ** 2 * gg))
            dist += omega * float(np.sum((b1 - v.b) ** 2))
            model = fv + float(np.sum(G * (F1 - v.F))) + 0.5 * L * dist
            if f1 <= model + 1e-12 * (abs(fv) + 1.0):
                break
            L *= 2.0
            shrink = 0.9  # halved until the first back-tracking, then a slow drift down
        x1 = space.step(v, G, image, s, eta, b1, F1)
        norms1 = np.where(nt > 0.0, pn, 0.0)
        p1 = f1 + regularizer_value(reg, norms1, C)
        if not math.isfinite(p1):
            status, message = Status.NUMERICAL_ERROR, f"non-finite objective at step {it}"
            break
        if p1 < best_p:
            best_p, best_x, best_norms = p1, x1, norms1
        # function restart (O'Donoghue & Candes 2015): momentum off when the objective rose
        t_k = 1.0 if p1 > p_x else t_next
        x_prev, x, p_x, norms_x = x, x1, p1, norms1
        if it % EXACT_DUAL_EVERY == 0:  # the dual at the new point with exact block norms (one more pass)
            d_val, P = problem.exact_dual(problem.loss_grad(x.F), space.dual_norms)
            if d_val > best_d:
                best_d, best_P = d_val, P
        gap = relative_gap(best_p, best_d)
        rec = {
            "iteration": it,
            "objective": best_p,
            "dual_objective": best_d,
            "gap": gap,
            "n_active": int(np.sum(norms1 > 0)),
            "step": 1.0 / L,
            "time_s": time.perf_counter() - t0,
        }
        history.append(rec)
        if math.isfinite(gap) and gap <= tol:
            status, message = Status.CONVERGED, f"converged: relative gap {gap:.3g} <= tol {tol:g} in {it} steps"
            break
        if callback is not None and callback(rec):
            status, message = Status.STOPPED, f"stopped by the callback at step {it}"
            break
    if status == Status.MAX_ITER:
        message = (
            f"max_iter = {max_iter} steps reached with relative gap {relative_gap(best_p, best_d):.3g} > tol {tol:g}"
        )
    return finish(status, it, space.coef(best_x), best_x.b, best_p, best_d, best_P, best_norms, message)


class _GenericSum:
    r""":math:`\sum_m K_m + c\mathbf 1\mathbf 1^\top` of any bank through ``matvecs``."""

    def __init__(self, bank: GramBank, c: float = 0.0) -> None:
        self.bank, self.c = bank, c
        self.shape = (bank.n_samples, bank.n_samples)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        out = self.bank.matvecs(x).sum(axis=0)
        return out + self.c * float(np.sum(x)) if self.c else out

    def __add__(self, c: float) -> "_GenericSum":
        return _GenericSum(self.bank, self.c + float(c))
