r"""The ``smo_mkl`` engine: SMO-MKL (Vishwanathan, Sun, Theera-Ampornpunt & Varma 2010).

Problems
--------
Losses whose conjugate is linear on each side of 0 on a bounded domain
(``linear_conjugate``: ``hinge``, ``eps_insensitive`` (§5.3), a pinball
loss): the dual of eq. (9) with box constraints, see :class:`mklkit_smo.state._SmoState`.
Regularizers: the squared p-norm of the kernel weights (``weight_norm =
WeightNorm(p, lam)``, e.g. ``pnorm_squared`` of this distribution; SMO-MKL
eq. 1) or any separable regularizer that gives its Bregman form
(``bregman``, e.g. the core ``kl``; §5.2).  A bias is required (the
constraint :math:`z^\top\beta = 0` of the dual).  What the engine requires
is declared in :attr:`SmoMKL.requires` (:mod:`mklkit.engines.capabilities`).

mklkit's convention (:class:`mklkit.problem.Problem`) puts ``C`` on the
regularizer, :math:`\sum_i\ell_i + C\,R(f)`; the paper puts it on the loss.
The engine solves the paper's dual with :math:`C_{\mathrm{paper}} = 1/C`:

* ``pnorm_squared(p, lam)``: :math:`R = \min_d \tfrac12\sum_k\|f_k\|^2/d_k
  + \tfrac\lambda2\|d\|_p^2`; the dual is eq. (9) with :math:`0\le\alpha\le 1/C`
  and the paper's λ = ``lam``.
* a Bregman form :math:`r_F` (the regularizer's Tikhonov penalty,
  :math:`C\sum_k g(\|f_k\|^2)` with :math:`g(t) = \min_d t/(2d) + r_F(d)/2`):
  the dual is eqs. (21)/(23) with λ = 1/2 and :math:`0\le\alpha\le 1/C`.  So
  the core ``kl(d0)`` at ``C`` is the paper's KL problem with
  :math:`C_{\mathrm{paper}} = 1/C`, λ = 1/2 and that :math:`d_0`;
  :func:`kl_from_paper` maps the paper's (λ, d0, C) to ``kl``'s (d0, C).

Reported values (core scale, as every engine): ``objective`` is
:math:`\sum_i\ell(y_i, f(x_i) + b) + C R(f)` at the solution, which equals
:math:`C\,P_{\mathrm{paper}}`; ``dual_objective`` is :math:`C` times the
SMO-MKL dual (9)/(23) at the final :math:`\alpha`; ``gap`` is
:math:`(P - D)/|P|`.  The history records also carry the paper-scale values
``objective_smo`` and ``dual_objective_smo``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from mklkit.components.base import Param
from mklkit.engines.base import Engine, Requires, Run
from mklkit.engines.capabilities import ARRAY_BANK, BREGMAN_FORM, LINEAR_CONJUGATE, PNORM_PENALTY, needs
from mklkit.problem import Problem
from mklkit.result import SolveResult

from .loop import _SmoRun
from .source import FeatureKernels

__all__ = ["SmoMKL", "kl_from_paper"]

#: Options of the SMO loop that ``smo_mkl`` and ``skm_smo`` share.
CACHE_MB = Param(
    "cache_mb", 512.0, "LRU cache of kernel rows in MiB (kernels computed on the fly)", low=0.0, low_open=True
)
SHRINKING = Param("shrinking", True, "leave out variables stuck at a bound (LibSVM's shrinking)", type=bool)
PARALLEL = Param(
    "parallel", "auto", "multithreaded passes over the (M, N) state", type=str, choices=("auto", "on", "off")
)


def kl_from_paper(lam: float, d0: float, C_paper: float) -> tuple[dict[str, Any], float]:
    r"""The core ``kl`` regularizer spec and ``C`` of the paper's KL-regularized problem.

    SMO-MKL §5.2 solves :math:`\tfrac12\sum_k\|w_k\|^2/d_k + C_p\sum_i\ell_i
    + \lambda\,r_{KL}(d; d_0)`.  Substituting :math:`d = \tilde d/\sqrt{2\lambda}`
    (and using :math:`r_{KL}(c\tilde d; d_0) = c\,r_{KL}(\tilde d; d_0/c)`) turns it
    into :math:`C_p` times mklkit's :math:`\sum_i\ell_i + C\sum_k g_{kl}(\|w_k\|^2)`
    with ``d0`` :math:`= d_0\sqrt{2\lambda}` and :math:`C = \sqrt{2\lambda}/C_p`.

    Returns
    -------
    spec : dict
        ``{"name": "kl", "d0": ...}`` for :meth:`mklkit.plugins.Registry.create`.
    C : float
    """
    if not (lam > 0 and d0 > 0 and C_paper > 0):
        raise ValueError(f"lam, d0 and C_paper must be > 0; got {lam!r}, {d0!r}, {C_paper!r}")
    s = math.sqrt(2.0 * lam)
    return {"name": "kl", "d0": d0 * s}, s / C_paper


def bias_and_kernel_problems(problem: Problem, label: str) -> list[str]:
    """What an SMO engine (``label`` in the messages) cannot take in ``problem``'s
    bias and kernels: SMO keeps the constraint :math:`y^\\top\\alpha = 0`, and the
    kernels come from ``K`` or from a :class:`FeatureKernels` source."""
    bad = []
    if not problem.bias:
        bad.append(f"the problem has no bias; {label} keeps the bias constraint y^T alpha = 0 (set bias: true)")
    src = problem.extra.get("kernel_source") if problem.extra else None
    if src is not None:
        if not isinstance(src, FeatureKernels):
            bad.append(f"problem.extra['kernel_source'] must be a FeatureKernels; got {type(src).__name__}")
        elif src.n_samples != problem.n_samples:
            bad.append(f"the kernel source has {src.n_samples} points but the problem has {problem.n_samples} labels")
    elif problem.n_kernels == 0:
        bad.append("the problem has no kernels (K has shape (0, N, N) and there is no kernel source)")
    return bad


class SmoMKL(Engine):
    r"""SMO-MKL: sequential minimal optimization of the p-norm / Bregman MKL dual.

    Parameters
    ----------
    tol : float
        Relative duality gap :math:`(P - D)/|P|` at which to stop (§4.3).
    max_iter : int
        Maximum number of SMO steps (two-variable updates).
    kkt_tol : float
        Initial tolerance on the maximal KKT violation of the inner loop; it
        is divided by 10 each time the inner loop meets it while the gap is
        still above ``tol``.
    check_every : int
        SMO steps between duality-gap checks (one history record and one call
        of ``callback`` each) and between shrinking steps.  0: a record every
        ``max(1, min(n // 20, 1000))`` steps for ``n`` dual variables, and
        shrinking every ``min(max(n, 100), 1000)`` steps (LibSVM's interval).
    cache_mb : float
        Size of the LRU cache of kernel rows (MiB) for kernels computed on the
        fly; at least two rows are always kept.
    analytic : bool
        For p = 2, solve the two-variable problem through the roots of a cubic
        (§5.1) instead of Newton-Raphson.
    shrinking : bool
        Leave out of the working-set selection (and of the passes over the
        kernels) the variables at a bound whose gradient keeps them there, as
        LibSVM does; they are brought back, with their kernel sums recomputed
        exactly, before the duality gap is certified.
    parallel : {"auto", "on", "off"}
        Multithreaded passes over the (M, N) state; ``auto`` when M N is large.
    """

    name: ClassVar[str] = "smo_mkl"
    description: ClassVar[str] = (
        "SMO-MKL (Vishwanathan et al. 2010): p-norm / Bregman MKL by sequential minimal "
        "optimization; hinge and eps_insensitive losses"
    )
    params: ClassVar[tuple[Param, ...]] = (
        Param("tol", 1e-3, "relative duality gap at which to stop", low=0.0, low_open=True),
        Param("max_iter", 10_000_000, "maximum number of SMO steps (two-variable updates)", type=int, low=1),
        Param(
            "kkt_tol", 1e-3, "initial tolerance on the maximal KKT violation of the inner loop", low=0.0, low_open=True
        ),
        Param("check_every", 0, "SMO steps between duality-gap checks (0: automatic)", type=int, low=0),
        CACHE_MB,
        Param("analytic", True, "p = 2: solve the two-variable problem by the roots of a cubic", type=bool),
        SHRINKING,
        PARALLEL,
    )
    supports_warm_start: ClassVar[bool] = True
    unit: ClassVar[str] = "SMO step"
    requires: ClassVar[Requires] = Requires(
        loss=(
            needs(
                LINEAR_CONJUGATE,
                why="SMO-MKL solves the SVM-type dual (box-constrained "
                "dual variables) of losses such as hinge and "
                "eps_insensitive",
            ),
        ),
        regularizer=(needs(PNORM_PENALTY, BREGMAN_FORM),),
        bank=(ARRAY_BANK,),
    )

    # -- capability ----------------------------------------------------------
    def problem_reasons(self, problem: Problem) -> list[str]:
        """A Bregman form must be the kernel-weight penalty; the bias and the kernels."""
        bad = []
        reg = problem.regularizer
        if not PNORM_PENALTY.holds(reg) and BREGMAN_FORM.holds(reg):
            why = _bregman_mismatch(reg)
            if why:
                bad.append(why)
        return bad + bias_and_kernel_problems(problem, "SMO-MKL")

    # -- solve ---------------------------------------------------------------
    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Solve ``problem`` by SMO (a ``warm_start``'s dual point starts it)."""
        return _SmoRun(self, problem, run, warm_start).run_loop()


def _bregman_mismatch(reg: Any) -> str | None:
    """Check that the Bregman form is the regularizer's Tikhonov penalty (h = r_F)."""
    b = reg.bregman
    pv = reg.param_vector
    try:
        d0 = float(b.d0(pv))
        ds = np.array([0.25, 0.5, 1.0, 2.0, 4.0]) * d0
        F = np.asarray(b.F(ds, pv), dtype=np.float64)
        Fd0 = float(np.asarray(b.F(np.array([d0]), pv))[0])
        fd0 = float(np.asarray(b.f(np.array([d0]), pv))[0])
        rF = F - Fd0 - (ds - d0) * fd0
        h = np.asarray(reg.jit.penalty(ds, pv), dtype=np.float64)
    except Exception as exc:  # noqa: BLE001 - a plugin's failure becomes the reason
        return f"evaluating the Bregman form of {reg.name!r} failed ({type(exc).__name__}: {exc})"
    if not (np.all(np.isfinite(rF)) and np.allclose(h, rF, rtol=1e-8, atol=1e-12 * max(1.0, d0))):
        return (
            f"the Bregman form of {reg.describe()} is not its kernel-weight penalty "
            "(penalty(d) != F(d) - F(d0) - (d - d0) f(d0))"
        )
    return None
