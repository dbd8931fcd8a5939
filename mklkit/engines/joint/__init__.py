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
binary problem.  :func:`solve_joint` runs one of two iterations over the same problem and
certificate: block coordinate descent in factor coordinates on a factor bank (:mod:`.descent`; each
kernel's block moves with its own curvature), FISTA in the product RKHS on any bank (:mod:`.fista`).
Modules: ``problem`` (the problem, its result, the zero solution and the certificate), ``descent``,
``fista``.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any, Callable

import numpy as np

from ...components.params import ParamError
from ...kernels.factor import FactorBank
from ...result import ConvergenceWarning, Status
from ..common import UNCONVERGED
from ..objectives import kernel_weights, relative_gap
from .descent import run_descent
from .fista import run_fista
from .problem import (
    JointProblem,
    JointResult,
    JointRun,
    Outcome,
    certify_joint,
    factor_coefficients,
    joint_C_max,
    joint_zero,
)

__all__ = ["JointProblem", "JointResult", "solve_joint", "certify_joint", "joint_zero", "joint_C_max", "METHODS"]

#: The iterations of :func:`solve_joint` (``"auto"``: ``"bcd"`` on a factor bank, else ``"fista"``).
METHODS = ("auto", "bcd", "fista")


def solve_joint(
    problem: JointProblem,
    *,
    tol: float = 1e-4,
    max_iter: int = 10000,
    warm_start: JointResult | None = None,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    method: str = "auto",
) -> JointResult:
    r"""Solve a :class:`JointProblem`, certified by the relative duality gap.

    :math:`A = 0` with the optimal offset is returned at once when its certificate already meets
    ``tol`` (:math:`C \ge C_{\max}`).  Otherwise ``method`` iterates (module docstring): ``"bcd"``
    (block coordinate descent in factor coordinates, :mod:`~mklkit.engines.joint.descent`; factor banks
    only) or ``"fista"`` (:mod:`~mklkit.engines.joint.fista`); the run stops when the best primal and the
    best dual seen are within ``tol``, else after ``max_iter`` steps with a
    :class:`~mklkit.result.ConvergenceWarning`.

    Parameters
    ----------
    problem : JointProblem
    tol : float
        Relative duality gap at which to stop.
    max_iter : int
        Most steps (FISTA steps, or sweeps over the blocks).
    warm_start : JointResult, optional
        A result of the same bank and labels (e.g. at a neighbouring C).
    callback : callable, optional
        Called with each step's record (``iteration``, ``objective``, ``dual_objective``, ``gap``,
        ``n_active``, ``time_s``); a true return stops the run (status ``stopped``).
    method : {"auto", "bcd", "fista"}
        ``"auto"``: ``"bcd"`` on a :class:`~mklkit.kernels.factor.FactorBank`, else ``"fista"``.

    Returns
    -------
    JointResult
    """
    if not (tol > 0 and math.isfinite(tol)):
        raise ParamError("tol", tol, "a finite number > 0", owner="joint")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ParamError("max_iter", max_iter, "an integer >= 1", owner="joint")
    factor = isinstance(problem.bank, FactorBank)
    if method not in METHODS:
        raise ParamError("method", method, "'auto', 'bcd' or 'fista'", owner="joint")
    if method == "bcd" and not factor:
        raise ParamError("method", method, "'auto' or 'fista': 'bcd' needs a FactorBank", owner="joint")
    loss, reg = problem.loss, problem.regularizer
    if not loss.smooth_primal or not math.isfinite(loss.grad_lipschitz(problem.n_classes)):
        raise ParamError(
            "loss", loss.name, "a multiclass loss with a Lipschitz gradient (smooth_primal), e.g. 'multinomial'"
        )
    t0 = time.perf_counter()
    M, N, K = problem.n_kernels, problem.n_samples, problem.n_classes
    zero = joint_zero(problem)
    descent = method == "bcd" or (method == "auto" and factor)
    run = JointRun(problem, zero, tol, int(max_iter), warm_start, callback, t0, "sweep" if descent else "step")
    zero_gap = relative_gap(zero.objective, zero.dual_objective)
    if problem.C >= zero.C_max and math.isfinite(zero_gap) and zero_gap <= tol:
        out = Outcome(
            Status.CONVERGED,
            0,
            zero.objective,
            zero.dual_objective,
            zero.dual,
            np.zeros(M),
            zero.bias,
            f"A = 0 is optimal: C = {problem.C:.6g} >= C_max = {zero.C_max:.6g}",
            coef=np.zeros((M, N, K)),
        )
    else:
        out = (run_descent if descent else run_fista)(run)
    if out.status == Status.MAX_ITER:
        out = dataclasses.replace(
            out,
            message=f"max_iter = {max_iter} {run.unit}s reached with relative gap "
            f"{relative_gap(out.primal, out.dual):.3g} > tol {tol:g}",
        )
    if out.status in UNCONVERGED:
        warnings.warn(f"joint multiclass MKL: {out.message}", ConvergenceWarning, stacklevel=2)
    coef = out.coef if out.coef is not None else factor_coefficients(problem.bank, out.factor_coef)
    return JointResult(
        status=out.status,
        objective=float(out.primal),
        dual_objective=float(out.dual),
        gap=float(relative_gap(out.primal, out.dual)),
        iterations=int(out.iterations),
        coef=coef,
        bias=np.asarray(out.bias, dtype=np.float64) if problem.bias else np.zeros(K),
        block_norms=out.norms,
        kernel_weights=kernel_weights(reg, out.norms),
        dual=out.P,
        C_max=float(zero.C_max),
        history=run.history,
        message=out.message,
        time_s=time.perf_counter() - t0,
        factor_coef=out.factor_coef if factor else None,
    )
