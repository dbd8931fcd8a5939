r"""Block coordinate descent for the joint problem on a factor bank (:mod:`mklkit.engines.joint`).

In factor coordinates :math:`\beta_m = L_m^\top A_m` (stacked (R, K) like the bank's ``LT``) the joint
problem is a group lasso with K outputs,

.. math::
    \min_{\beta, b}\ \sum_i w_iL(y_i, F_i) + \sum_m \tilde g_C(\|\beta_m\|_F),\qquad
    F = \sum_m L_m\beta_m + \mathbf 1b^\top .

A sweep visits the blocks in turn.  With :math:`G` the loss gradient at the current outputs and
:math:`\lambda_m = \ell\,\max_iw_i\,\|L_m\|_2^2` (:math:`\ell` the loss's curvature bound,
:meth:`~mklkit.components.multiclass.MulticlassLoss.grad_lipschitz`; :math:`\|L_m\|_2^2` or an upper bound of
it within 25 %, :func:`~mklkit.kernels.factor_arrays.block_spectral_bounds`), the loss is majorized along block m
by a quadratic of curvature :math:`\lambda_m`, whose minimizer with the regularizer is the block prox

.. math::
    \beta_m^+ = \mathrm{prox}_{\tilde g_C/\lambda_m}(\|z\|)\,z/\|z\|,\qquad z = \beta_m - L_m^\top G/\lambda_m,

so every step lowers the objective (Tseng & Yun 2009; skglm's group BCD, Bertrand et al. 2022).  The
offset then minimizes the loss over :math:`b \in \mathbb R^K` alone by a few gradient steps of
Barzilai–Borwein length (Barzilai & Borwein 1988; :data:`OFFSET_STEPS`), safeguarded by the curvature bound:
the bound's own step moves it far too little where the predictions are confident (on digits, 120 sweeps
to a gap of 1e-3 instead of 18).  A sweep costs two passes over the bank (:math:`L_m^\top G` and :math:`L_m\Delta\beta_m` for every block), the
same as one FISTA step, but each block moves with its own curvature instead of that of
:math:`\sum_mK_m`.  Every :data:`ANDERSON` sweeps, Anderson extrapolation of the last iterates (Bertrand &
Massias 2021) replaces the iterate when it lowers the objective.  After each sweep the dual point of the
gradient with its exact block norms (one more pass) certifies the iterate.
"""

from __future__ import annotations

import math

import numpy as np

from ..._jit import joint as kj
from ..._jit.records import REG_FN
from ...first_class import first_class
from ...kernels.factor_arrays import block_spectral_bounds
from ...result import Status
from ..objectives import regularizer_value
from .problem import JointProblem, JointRun, Outcome, factor_coordinates

#: Sweeps between Anderson extrapolations (and iterates they combine).
ANDERSON = 5
#: Gradient steps on the offset after each sweep.
OFFSET_STEPS = 5


class _Blocks:
    """The blocks :math:`L_m^\\top` of a factor bank (views of a dense ``LT``, CSR slices of a sparse one),
    their curvatures :math:`\\lambda_m` and the block of every factor row."""

    def __init__(self, problem: JointProblem) -> None:
        bank = problem.bank
        self.problem = problem
        self.sparse = bool(bank.sparse)
        self.LT = bank.LT
        self.starts = np.asarray(bank.starts, dtype=np.int64)
        self.M = problem.n_kernels
        self.rows = [(int(self.starts[m]), int(self.starts[m + 1])) for m in range(self.M)]
        self.blocks = [self.LT[a:b] for a, b in self.rows]
        scale = float(problem.loss.grad_lipschitz(problem.n_classes)) * float(np.max(problem.w))
        self.lip = scale * np.asarray(block_spectral_bounds(bank), dtype=np.float64)
        self.seg = np.repeat(np.arange(self.M), np.diff(self.starts))
        if not self.sparse:  # the compiled kernels the jitted sweep calls
            self.grad = first_class(problem.loss.jit.grad, kj.MULTICLASS_GRAD)
            self.prox = first_class(problem.regularizer.jit.prox, REG_FN)

    def norms(self, beta: np.ndarray) -> np.ndarray:
        r""":math:`\|\beta_m\|_F` of every block."""
        sq = np.bincount(self.seg, weights=np.einsum("rk,rk->r", beta, beta), minlength=self.M)
        return np.sqrt(np.maximum(sq, 0.0))

    def dual_norms(self, P: np.ndarray) -> np.ndarray:
        r""":math:`\|P\|_{K_m} = \|L_m^\top P\|_F` (one pass)."""
        return self.norms(np.asarray(self.LT @ P))

    def outputs(self, beta: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(self.LT.T @ beta) + b)

    def sweep(self, beta: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One sweep over the blocks (module docstring): ``beta`` and ``F`` after it (a dense bank's sweep is
        :func:`mklkit._jit.joint.descent_sweep`, in place)."""
        p = self.problem
        C, prox, rp = p.C, p.regularizer.jit.prox, p.regularizer.param_vector
        if not self.sparse:
            beta, F = np.ascontiguousarray(beta), np.ascontiguousarray(F)
            kj.descent_sweep(
                self.LT, self.starts, self.lip, beta, F, p.y, p.w, self.grad, p.loss.param_vector, self.prox, C, rp
            )
            return beta, F
        G = p.loss_grad(F)
        for m, (a, e) in enumerate(self.rows):
            if e == a or self.lip[m] <= 0.0:
                continue
            z = beta[a:e] - np.asarray(self.blocks[m] @ G) / self.lip[m]
            nz = float(np.linalg.norm(z))
            pn = float(prox(np.array([nz]), C / self.lip[m], rp)[0]) if nz > 0.0 else 0.0
            step = (pn / nz) * z - beta[a:e] if nz > 0.0 else -beta[a:e]
            if np.any(step):
                beta[a:e] += step
                F += np.asarray(self.blocks[m].T @ step)
                G = p.loss_grad(F)
        return beta, F


def run_descent(run: JointRun) -> Outcome:
    """Block coordinate descent (module docstring) from ``warm_start`` (or :math:`\\beta = 0` with the
    optimal offset of ``zero``); ``max_iter`` sweeps at most."""
    problem, zero, warm_start = run.problem, run.zero, run.warm_start
    reg, C = problem.regularizer, problem.C
    R, K = problem.bank.LT.shape[0], problem.n_classes
    blk = _Blocks(problem)
    beta, b = np.zeros((R, K)), zero.bias.copy()
    if warm_start is not None:
        if warm_start.factor_coef is not None and np.shape(warm_start.factor_coef) == (R, K):
            beta = np.array(warm_start.factor_coef, dtype=np.float64)
        elif np.shape(warm_start.coef) == (problem.n_kernels, problem.n_samples, K):
            beta = factor_coordinates(problem.bank, np.asarray(warm_start.coef, dtype=np.float64))
        if problem.bias:
            b = np.array(warm_start.bias, dtype=np.float64)
    F = blk.outputs(beta, b)

    def objective(beta: np.ndarray, F: np.ndarray) -> tuple[float, np.ndarray]:
        norms = blk.norms(beta)
        return problem.loss_values(F) + regularizer_value(reg, norms, C), norms

    primal, norms = objective(beta, F)
    best_d, best_P = zero.dual_objective, zero.dual
    recent: list[np.ndarray] = []
    status, message, it = Status.MAX_ITER, "", 0
    for it in range(1, int(run.max_iter) + 1):
        beta, F = blk.sweep(beta, F)
        if problem.bias:
            b, F = _offset(problem, F, b)
        primal, norms = objective(beta, F)
        if ANDERSON:
            recent.append(np.concatenate([beta.ravel(), b]))
            if len(recent) > ANDERSON:
                ext = _anderson(recent)
                recent = []
                if ext is not None:
                    beta_e, b_e = ext[: R * K].reshape(R, K), ext[R * K :]
                    F_e = blk.outputs(beta_e, b_e)
                    p_e, n_e = objective(beta_e, F_e)
                    if p_e < primal:
                        beta, b, F, primal, norms = beta_e, b_e, F_e, p_e, n_e
        if not math.isfinite(primal):
            status, message = Status.NUMERICAL_ERROR, f"non-finite objective at sweep {it}"
            break
        d_val, P = problem.exact_dual(problem.loss_grad(F), blk.dual_norms)
        if d_val > best_d:
            best_d, best_P = d_val, P
        end = run.record(it, primal, best_d, norms)
        if end is not None:
            status, message = end
            break
    return Outcome(status, it, primal, best_d, best_P, norms, b, message, factor_coef=beta)


def _offset(problem: JointProblem, F: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The offset after :data:`OFFSET_STEPS` gradient steps on the loss over ``b`` alone (the outputs less the
    offset fixed), and the outputs.  Barzilai–Borwein step lengths, each halved down to the safe step
    :math:`1/(\ell\sum_iw_i)` until it lowers the loss by half its first-order decrease (at the safe step it
    always does): every step lowers the loss."""
    F0 = F - b
    safe = 1.0 / (float(problem.loss.grad_lipschitz(problem.n_classes)) * float(np.sum(problem.w)))

    def value_grad(c: np.ndarray) -> tuple[float, np.ndarray]:
        Fc = F0 + c
        return problem.loss_values(Fc), problem.loss_grad(Fc).sum(axis=0)

    c, (f, g) = b, value_grad(b)
    step = safe
    for _ in range(OFFSET_STEPS):
        gg = float(g @ g)
        if not gg > 0.0:
            break
        while True:
            c1 = c - step * g
            f1, g1 = value_grad(c1)
            if f1 <= f - 0.5 * step * gg or step <= safe:
                break
            step = max(0.5 * step, safe)
        if not f1 < f:
            break
        s, d = c1 - c, g1 - g
        c, f, g = c1, f1, g1
        sd = float(s @ d)
        step = min(max(float(s @ s) / sd, safe), 1e6 * safe) if sd > 0.0 else safe
    return c, F0 + c


def _anderson(recent: list[np.ndarray]) -> np.ndarray | None:
    r"""The Anderson extrapolation :math:`\sum_k c_kx_{k+1}` of iterates :math:`x_0, \dots, x_n`:
    :math:`c` minimizes :math:`\|\sum_k c_k(x_{k+1} - x_k)\|` with :math:`\sum_k c_k = 1`; ``None`` when
    the differences are degenerate."""
    X = np.stack(recent, axis=1)
    U = np.diff(X, axis=1)
    UU = U.T @ U
    scale = float(np.trace(UU))
    if not (scale > 0.0 and math.isfinite(scale)):
        return None
    try:
        z = np.linalg.solve(UU + 1e-10 * scale * np.eye(UU.shape[0]), np.ones(UU.shape[0]))
    except np.linalg.LinAlgError:
        return None
    total = float(np.sum(z))
    if not (math.isfinite(total) and total != 0.0):
        return None
    return X[:, 1:] @ (z / total)
