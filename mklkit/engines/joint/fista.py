r"""FISTA for the joint problem (:mod:`mklkit.engines.joint`): Beck & Teboulle (2009) in the product
RKHS (Mosci et al. 2008, as the ``proximal`` engine), with back-tracking on the curvature and function
restart (O'Donoghue & Candès 2015).  One pass over the bank per step, :math:`K_mG` for every kernel
(:meth:`~mklkit.kernels.ops.GramBank.matmats`); the step, its back-tracking and the certificate are
combinations of stored products.  On a factor bank the iteration runs in factor coordinates
:math:`\beta_m = L_m^\top A_m` (one product with :math:`L^\top` per step, one with :math:`L` per trial of
the curvature)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...kernels.factor import FactorBank
from ...kernels.ops import ArrayBank, GramBank
from ...result import Status
from ..objectives import regularizer_value
from ..proximal_objective import SumOperator, lipschitz_estimate
from .problem import JointProblem, JointRun, Outcome, factor_coefficients, factor_coordinates, _norms

#: Steps between duals with exact block norms (the others bound the norms without a pass over the bank).
EXACT_DUAL_EVERY = 10


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
        beta = factor_coordinates(self.bank, coef)
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
        return factor_coefficients(self.bank, x.X)


def run_fista(run: JointRun) -> Outcome:
    r"""FISTA with back-tracking and function restart from ``warm_start`` (or :math:`A = 0`, ``zero``).

    Every step: the loss gradient :math:`G` at the extrapolated point :math:`V`, the products
    :math:`K_mG` (one pass over the bank), then with step :math:`\eta = 1/L`
    :math:`A_m^+ = \mathrm{prox}_{\eta\tilde g_C}(\|\tilde A_m\|_{K_m})\,\tilde A_m/\|\tilde A_m\|_{K_m}`,
    :math:`\tilde A_m = V_m - \eta G`, and :math:`b^+ = b_V - (\eta/\omega)G^\top\mathbf 1` (the bias
    metric :math:`\omega` of the ``proximal`` engine); :math:`L` is doubled until the
    sufficient-decrease test holds, and shrunk before each step (halved until the first
    back-tracking, then by 0.9); momentum restarts when the objective rises.  The dual point of the
    step's gradient gives the certificate.
    """
    problem, zero, warm_start = run.problem, run.zero, run.warm_start
    loss, reg = problem.loss, problem.regularizer
    M, N, K = problem.n_kernels, problem.n_samples, problem.n_classes
    C, rp = problem.C, reg.param_vector
    # the metric and the curvature: L(grad) * lambda_max(sum K_m + 1 1^T / omega)
    bank = problem.bank
    if isinstance(bank, ArrayBank):
        S: Any = bank.K.sum(axis=0)
    elif isinstance(bank, FactorBank):
        S = SumOperator(bank)
    else:
        S = _GenericSum(bank)
    lam, omega = lipschitz_estimate(S, problem.bias)
    L = float(loss.grad_lipschitz(problem.n_classes)) * float(np.max(problem.w)) * lam

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
    for it in range(1, int(run.max_iter) + 1):
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
        end = run.record(it, best_p, best_d, norms1, step=1.0 / L)
        if end is not None:
            status, message = end
            break
    return Outcome(status, it, best_p, best_d, best_P, best_norms, best_x.b, message, coef=space.coef(best_x))


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
