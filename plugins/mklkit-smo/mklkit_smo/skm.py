r"""The ``skm_smo`` engine: the support kernel machine by Moreau-Yosida regularized SMO.

Bach, Lanckriet & Jordan (2004), "Multiple kernel learning, conic duality,
and the SMO algorithm" (ICML).

Problem
-------
Hinge loss with the squared block 1-norm ``l1_squared`` and a bias.  In
mklkit's convention (``C`` on the regularizer) the objective is

.. math::
    \sum_i \max\big(0, 1 - y_i(\textstyle\sum_m f_m(x_i) + b)\big)
        + \frac C2\Big(\sum_m\|f_m\|\Big)^2 = C\cdot P,

with :math:`P` the paper's primal (P) (all :math:`d_j = 1`) at
:math:`C_{\mathrm{paper}} = 1/C`.  Its conic dual is (D_K),
:math:`\min \tfrac12\gamma^2 - e^\top\alpha` over :math:`0\le\alpha\le C_{\mathrm{paper}}`,
:math:`y^\top\alpha = 0`, :math:`\sqrt{\alpha^\top D(y)K_jD(y)\alpha}\le d_j\gamma`,
whose optimal value is :math:`-P^*`.

Algorithm (§4)
--------------
The MY-regularized dual :math:`\min G(\alpha)` (Appendix B, :mod:`mklkit_smo._skm`)
is differentiable; it is minimized by the SMO loop of :mod:`mklkit_smo._smo`
(maximal violating pair / second-order working set, a safeguarded Newton
line search on the convex two-variable problem, kernel caching and
shrinking) in its ``REG_SKM`` mode, until the pair conditions (OPT4) hold
with :math:`2\varepsilon = \varepsilon_2` (the first stage, the SVM on the sum of
the kernels, only starts the continuation and is solved to ``_SVM_STAGE_TOL``).

Continuation (§4.4): :math:`a_j = \kappa\,d_j/\rho`, :math:`d_j(\kappa) = (1-\kappa)\,d_j/\rho`,
:math:`\rho = \sqrt{(1-\kappa)^2+\kappa^2}`, from :math:`\kappa = 1` (an SVM on
:math:`\sum_j K_j/d_j^2`, the sum of the kernels for equal :math:`d_j`) with
:math:`\kappa \leftarrow \mu\kappa`.  The paper's schedule is :math:`a_j = \kappa`,
:math:`d_j = 1 - \kappa`; dividing both by :math:`\rho` keeps the strength of
the regularizer for a single active kernel fixed at :math:`\tfrac12 d_j^2\|w_j\|^2`
while leaving :math:`a_j/d_j(\kappa) = \kappa/(1-\kappa)` -- the ratio of Theorem 1 --
as in the paper, so the intermediate problems stay close in scale to the
target one.  After each stage the weights :math:`\tilde\eta(\alpha)` are
rescaled so that :math:`\sum_j d_j^2\eta_j = 1` for the *target* :math:`d_j`, and
the (ε1, ε2)-optimality conditions (OPT3) of the target SKM are checked for
:math:`(\alpha, \eta)`; when :math:`\tilde\eta` just misses them, the LP of (OPT3)
(§3.3) gives the best weights for that :math:`\alpha`, which are checked the same
way.  The solve stops when they hold and the certified relative duality gap
:math:`(P - D)/|P|` is at most ``tol``.

Identical points
----------------
Points with the same label and the same row in every kernel enter the dual only
through the sum of their :math:`\alpha_i`; by default (``merge_identical``) the
SMO loop runs on the distinct points, each group one variable in
:math:`[0, kU]` (:class:`MergedPoints`), and once that problem is solved its last
stage is run again on all points, where (OPT3) and the gap are certified.

Reported values
---------------
``objective`` is :math:`C\cdot P` at :math:`w_j = \eta_j\sum_i\alpha_iy_i\phi_j(x_i)`
with the optimal bias (mklkit's primal; with ``C = 1`` it is the paper's P),
``dual_objective`` is :math:`C\,(e^\top\alpha - \tfrac12\max_j c_j/d_j^2)`, i.e.
:math:`-C` times the value of (D_K) at :math:`\alpha`.  History records carry the
paper-scale values (``objective_skm``, ``dual_objective_skm``), :math:`\kappa` and
the reached (ε1, ε2) (``eps1_per_n``, ``eps2``); the message states them.
"""
from __future__ import annotations

import logging
import math
from typing import Any, ClassVar

import numpy as np

from mklkit.components.base import Param
from mklkit.engines.base import Engine, Requires, Run, needs
from mklkit.engines.capabilities import ARRAY_BANK, HINGE_CONJUGATE, L1_SQUARED_FORM
from mklkit.engines.common import relative_gap
from mklkit.problem import Problem
from mklkit.result import SolveResult, Status

from .engine import CACHE_MB, PARALLEL, SHRINKING, bias_and_kernel_problems
from .loop import _SmoRun
from .regularizer import L1Squared
from .state import _Reg

__all__ = ["SkmSMO", "MergedPoints", "opt3", "sparsify_weights", "lanckriet_problem",
           "lanckriet_weights"]

logger = logging.getLogger(__name__)

#: Newton steps at the start of a stage, and the rounds of each (free variables that would
#: leave their box are held fixed and the system solved again), and the largest free set.
_NEWTON_STEPS = 3
_NEWTON_ROUNDS = 3
_NEWTON_MAX = 2000
#: (OPT4) tolerance of the first stage, the SVM on the sum of the kernels (see ``_stage_tol``).
_SVM_STAGE_TOL = 1e-2


# ---------------------------------------------------------------------------
# optimality conditions of the SKM (§3.3) and the sparsity LP (§3.4)
# ---------------------------------------------------------------------------
def _pair_sets(alpha: np.ndarray, y: np.ndarray, U: float) -> tuple[np.ndarray, np.ndarray]:
    """Keerthi et al.'s index sets: ``up`` = I_M u I_0- u I_C+ ... as masks on S = y - F.

    In terms of the scores :math:`S_i = y_i - F_i` the conditions read
    :math:`\\max_{up} S \\le \\min_{low} S + 2\\varepsilon_2`; ``up`` holds the
    points whose :math:`\\alpha_i y_i` may increase, ``low`` those whose may decrease.
    """
    up = np.where(y > 0, alpha < U, alpha > 0)
    low = np.where(y > 0, alpha > 0, alpha < U)
    return up, low


def opt3(v: np.ndarray, c: np.ndarray, alpha: np.ndarray, y: np.ndarray, U: float,
         eta: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    r"""The smallest :math:`(\varepsilon_1, \varepsilon_2)` for which :math:`(\alpha, \eta)` satisfies (OPT3).

    Parameters
    ----------
    v : ndarray (M, N)
        :math:`K_jD(y)\alpha` for every kernel.
    c : ndarray (M,)
        :math:`\alpha^\top D(y)K_jD(y)\alpha`.
    alpha : ndarray (N,)
        Dual variables in :math:`[0, U]`.
    eta : ndarray (M,)
        Candidate weights with :math:`\eta\ge0`, :math:`\sum_j d_j^2\eta_j = 1`.
    d : ndarray (M,)
        The SKM's block weights.

    Returns
    -------
    eps1, eps2 : float
        :math:`\varepsilon_1 = \max_{\eta_j > 0} J(\alpha) - J_j(\alpha)` (every kernel
        with a positive weight is :math:`\varepsilon_1`-active, §3.3) and
        :math:`\varepsilon_2 = \tfrac12(\max_{up}S - \min_{low}S)_+` with
        :math:`S = y - K(\eta)D(y)\alpha`.
    """
    Jj = 0.5 * c / (d * d) - float(np.sum(alpha))
    pos = eta > 0
    e1 = float(np.max(Jj) - np.min(Jj[pos])) if np.any(pos) else math.inf
    F = eta @ v
    S = y - F
    up, low = _pair_sets(alpha, y, U)
    if not (np.any(up) and np.any(low)):
        return e1, 0.0
    e2 = 0.5 * max(float(np.max(S[up]) - np.min(S[low])), 0.0)
    return e1, e2


def _lp_weights(v: np.ndarray, alpha: np.ndarray, y: np.ndarray, U: float, d: np.ndarray,
                allowed: np.ndarray) -> tuple[np.ndarray | None, float]:
    r"""The weights on ``allowed`` kernels with the least :math:`\varepsilon_2` of (OPT3) (HiGHS LP).

    The LP of §3.3 for a given :math:`\alpha`: variables :math:`(\eta_{allowed}, b, t)`,
    minimize :math:`t` subject to :math:`\sum_j d_j^2\eta_j = 1`, :math:`\eta\ge0` and,
    on :math:`S = y - K(\eta)D(y)\alpha`, :math:`S_i + b \le t` for ``up`` and
    :math:`S_i + b \ge -t` for ``low``.  Returns the weights (full length, or
    None when the LP fails) and the optimal :math:`t`.
    """
    from scipy.optimize import linprog

    idx = np.flatnonzero(allowed)
    if idx.size == 0:
        return None, math.inf
    up, low = _pair_sets(alpha, y, U)
    V = v[idx].T  # (N, |allowed|): F = V eta
    nu, nl = int(up.sum()), int(low.sum())
    # up:   y_i - V_i eta + b <= t  ->  -V_i eta + b - t <= -y_i
    # low:  y_i - V_i eta + b >= -t ->   V_i eta - b - t <=  y_i
    A_ub = np.vstack([np.hstack([-V[up], np.ones((nu, 1)), -np.ones((nu, 1))]),
                      np.hstack([V[low], -np.ones((nl, 1)), -np.ones((nl, 1))])])
    b_ub = np.concatenate([-y[up], y[low]])
    A_eq = np.concatenate([d[idx] ** 2, [0.0, 0.0]])[None, :]
    cost = np.zeros(idx.size + 2)
    cost[-1] = 1.0
    bounds = [(0.0, None)] * idx.size + [(None, None), (0.0, None)]
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=bounds,
                  method="highs")
    if res.status != 0:
        return None, math.inf
    eta = np.zeros(v.shape[0])
    eta[idx] = np.maximum(res.x[:idx.size], 0.0)
    return eta, float(res.x[-1])


def sparsify_weights(v: np.ndarray, c: np.ndarray, alpha: np.ndarray, y: np.ndarray, U: float,
                     eta: np.ndarray, d: np.ndarray, eps1: float, eps2: float) -> np.ndarray:
    r"""§3.4: drop kernels one by one while (OPT3) stays feasible (HiGHS LP each time).

    Kernels are tried from the smallest weight up.  For each candidate
    :math:`j` the LP of (OPT3) with :math:`\eta_j = 0` (and every kernel
    dropped before) on the :math:`\varepsilon_1`-active set is solved; if it is
    feasible, kernel :math:`j` is removed and the LP's weights are kept.
    Returns weights that satisfy (OPT3) with :math:`(\varepsilon_1, \varepsilon_2)`
    (``eta`` itself when nothing can be removed).
    """
    Jj = 0.5 * c / (d * d) - float(np.sum(alpha))
    allowed = (Jj >= np.max(Jj) - eps1) & (eta > 0)
    best = eta.copy()
    for j in np.argsort(eta):
        if not allowed[j] or np.sum(allowed) <= 1:
            continue
        trial = allowed.copy()
        trial[j] = False
        sol, t = _lp_weights(v, alpha, y, U, d, trial)
        if sol is not None and t <= eps2:
            e1, e2 = opt3(v, c, alpha, y, U, sol, d)
            if e1 <= eps1 and e2 <= eps2 * (1.0 + 1e-9) + 1e-12:
                allowed = trial & (sol > 0)
                best = sol
    return best


# ---------------------------------------------------------------------------
# Lanckriet et al.'s problem (L), §2.3
# ---------------------------------------------------------------------------
def lanckriet_problem(K: np.ndarray, y: np.ndarray, C_L: float, c: float = 1.0,
                      loss: Any = None) -> tuple[Problem, np.ndarray]:
    r"""The ``l1_squared`` problem whose solution solves Lanckriet et al.'s (L).

    (L) on the bank :math:`K_j` with trace constant :math:`c` and box
    :math:`0\le\alpha\le C_L` is (D_K) with :math:`d_j = \sqrt{\operatorname{tr}K_j/c}`
    (§2.3); that is (D_K) with unit weights on :math:`\tilde K_j = K_j/d_j^2
    = cK_j/\operatorname{tr}K_j`, i.e. ``l1_squared`` at ``C = 1/C_L``.

    Returns
    -------
    problem : Problem
        On the rescaled bank :math:`\tilde K`.
    d : ndarray (M,)
        The weights :math:`d_j`; pass them to :func:`lanckriet_weights`.
    """
    from mklkit.plugins import get_registry

    K = np.ascontiguousarray(K, dtype=np.float64)
    if not (c > 0 and math.isfinite(c)):
        raise ValueError(f"the trace constant c must be a finite number > 0; got {c!r}")
    tr = np.einsum("mii->m", K)
    if np.any(tr <= 0):
        raise ValueError(f"every kernel needs a positive trace; got traces {tr.tolist()!r}")
    d = np.sqrt(tr / c)
    if loss is None:
        loss = get_registry().create("loss", "hinge")
    Kt = K / (d * d)[:, None, None]
    return Problem(K=Kt, y=y, loss=loss, regularizer=L1Squared(), C=1.0 / C_L), d


def lanckriet_weights(result: SolveResult, d: np.ndarray, c: float = 1.0) -> np.ndarray:
    r"""The coefficients :math:`\mu_j` of :math:`\sum_j\mu_jK_j` in (L), with :math:`\sum_j\mu_j\operatorname{tr}K_j = c`.

    The SKM's weights :math:`\eta` on :math:`\tilde K_j = K_j/d_j^2` give the
    combination :math:`\sum_j(\eta_j/d_j^2)K_j`; they are normalised here so
    that the trace constraint of (L) holds.
    """
    eta = np.asarray(result.kernel_weights, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    mu = eta / (d * d)
    tr = d * d * c
    s = float(np.sum(mu * tr))
    return mu * (c / s) if s > 0 else mu


# ---------------------------------------------------------------------------
# identical points
# ---------------------------------------------------------------------------
#: Two points are merged when their squared distance in every kernel's feature space,
#: K_pp + K_qq - 2 K_pq, is at most this fraction of K_pp + K_qq (rounding level).
_IDENTICAL_RTOL = 1e-12
#: The SMO loop runs on the distinct points when they are at most this fraction of all.
_MERGE_FRACTION = 0.9


class MergedPoints:
    r"""The SKM's dual on the distinct points: identical points merged (exact).

    Points :math:`p, q` with the same label and :math:`\phi_j(x_p) = \phi_j(x_q)`
    for every kernel have equal rows in every :math:`K_j`, so (D_K) and its
    Moreau-Yosida regularization depend on :math:`\alpha_p, \alpha_q` only through
    :math:`\alpha_p + \alpha_q` (in :math:`e^\top\alpha`, :math:`y^\top\alpha` and
    :math:`K_jD(y)\alpha`).  A group of :math:`k` identical points is one variable
    in :math:`[0, kU]`; spreading its value over the members (:meth:`expand`) gives a
    point of the original dual with the same value, the same scores :math:`S_p` and
    the same pair conditions.  Binary or categorical features make such
    groups common (Adult: 6212 points, 1759 distinct).

    Attributes
    ----------
    rep : ndarray (G,)
        The first point of each group.
    of : ndarray (N,)
        The group of every point.
    count : ndarray (G,)
        Group sizes (float64).
    K : ndarray (M, G, G)
        The bank on the representatives.
    y : ndarray (G,)
    """

    def __init__(self, K: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        rep, of, count = np.unique(group, return_inverse=True, return_counts=True)
        self.rep = rep.astype(np.int64)
        self.of = of.astype(np.int64)
        self.count = count.astype(np.float64)
        from ._skm import sub_bank

        self.K = sub_bank(K, self.rep)
        self.y = np.ascontiguousarray(y[self.rep], dtype=np.float64)

    @classmethod
    def find(cls, K: np.ndarray, y: np.ndarray, probes: int = 8, seed: int = 0,
             max_fraction: float = 1.0) -> "MergedPoints | None":
        """Group the identical points of the bank ``K``.

        None when all points are distinct, or when more than ``max_fraction`` of them
        are (then the merged bank would cost nearly as much memory as the bank and
        save little).

        Candidates share a label and a signature -- a random combination of each
        kernel's diagonal and a few of its columns, equal for identical points --
        and are confirmed by their distances in every kernel (``_IDENTICAL_RTOL``).
        O(M N (probes + 1)) for the signatures plus O(M) per comparison; the comparisons
        grow with the square of the longest run of equal signatures among distinct
        points (one-hot data under a linear kernel puts most points in one run: 6000
        such points take 0.2 s).
        """
        from ._skm import identical_groups

        M, N = K.shape[0], K.shape[1]
        rng = np.random.default_rng(seed)
        cols = np.sort(rng.choice(N, min(probes, N), replace=False))
        w = rng.standard_normal((M, cols.size + 1))
        h = np.zeros(N)
        scale = 0.0
        for k in range(M):
            dk = np.diagonal(K[k])
            h += K[k][:, cols] @ w[k, :-1] + dk * w[k, -1]
            scale += float(np.sum(np.abs(w[k]))) * float(np.max(np.abs(dk), initial=0.0))
        yy = np.ascontiguousarray(y, dtype=np.float64)
        order = np.lexsort((h, yy)).astype(np.int64)
        group = np.empty(N, dtype=np.int64)
        identical_groups(K, yy, order, np.ascontiguousarray(h[order]), 1e-9 * max(scale, 1e-300),
                         _IDENTICAL_RTOL, group)
        n_distinct = int(np.sum(group == np.arange(N)))
        if n_distinct == N or n_distinct > max_fraction * N:
            return None
        return cls(K, yy, group)

    def expand(self, beta: np.ndarray, U: float) -> np.ndarray:
        """Dual variables of the original points: each group's value filled into its points in turn.

        The members of a group get :math:`U` each until its value is used up, one of
        them the remainder and the rest 0 -- as few support vectors as possible.  All
        members have the same score, so the pair conditions do not change.
        """
        order = np.argsort(self.of, kind="stable")
        g = self.of[order]
        first = np.searchsorted(g, g)  # position of each group's first point in ``order``
        rank = np.arange(g.size) - first
        out = np.empty(g.size)
        out[order] = np.clip(beta[g] - rank * U, 0.0, U)
        return out


# ---------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------
class SkmSMO(Engine):
    r"""Support kernel machine by Moreau-Yosida regularized SMO (Bach et al. 2004).

    Parameters
    ----------
    tol : float
        Certified relative duality gap :math:`(P - D)/|P|` required, besides
        (OPT3), to stop.
    max_iter : int
        Maximum number of SMO steps over all continuation stages.
    eps1 : float
        :math:`\varepsilon_1/n` of the (ε1, ε2)-optimality conditions (OPT3),
        in the paper's scale (§4.4: 5e-4).
    eps2 : float
        :math:`\varepsilon_2` of (OPT3) (§4.4: 1e-4); each MY-regularized problem is
        solved to :math:`\varepsilon_2/2`-optimality (OPT4).
    mu : float
        Continuation factor, :math:`\kappa \leftarrow \mu\kappa` (§4.4: 0.5).
    max_stages : int
        Maximum number of continuation stages.
    sparsify : bool
        After convergence, remove kernels while the LP of (OPT3) stays feasible (§3.4).
    remove_kernels : bool
        Leave out of the SMO loop the kernels with zero weight in two successive
        stages, and check after convergence that they can stay out (§4.4).  A step
        then costs O(m_active n) instead of O(m n).  Precomputed banks only: with a
        kernel source (rows computed on the fly) every kernel stays in the loop.
    extrapolate : bool
        Start every stage from the last stage's solution moved, by an exact line search
        on the new stage's :math:`G`, along the displacement of :math:`\alpha` over the
        last stage (see :meth:`_Skm._extrapolate`).  Precomputed banks only.
    newton : bool
        Start every stage after the first with up to three Newton steps of :math:`G` on
        the free variables, each with the exact line search (see :meth:`_Skm._newton`).
        Precomputed banks only.
    merge_identical : bool
        Solve on the distinct points: points with the same label and the same row in
        every kernel are one variable with a box :math:`n_g` times as large
        (:class:`MergedPoints`, exact); the last stage is then run and checked again on
        all points.  Precomputed banks only.
    check_every, cache_mb, shrinking, parallel
        As for ``smo_mkl``.
    """

    name: ClassVar[str] = "skm_smo"
    description: ClassVar[str] = (
        "support kernel machine (Bach, Lanckriet & Jordan 2004): squared block 1-norm MKL by "
        "Moreau-Yosida regularized SMO; hinge loss"
    )
    params: ClassVar[tuple[Param, ...]] = (
        Param("tol", 1e-3, "certified relative duality gap (P - D)/|P| required besides (OPT3)",
              low=0.0, low_open=True),
        Param("max_iter", 10_000_000, "maximum number of SMO steps over all stages", type=int,
              low=1),
        Param("eps1", 5e-4, "eps1/n of the (eps1, eps2)-optimality conditions (OPT3)",
              low=0.0, low_open=True),
        Param("eps2", 1e-4, "eps2 of (OPT3); MY stages are solved to eps2/2 (OPT4)", low=0.0,
              low_open=True),
        Param("mu", 0.5, "continuation factor kappa <- mu kappa", low=0.0, high=1.0,
              low_open=True, high_open=True),
        Param("max_stages", 60, "maximum number of continuation stages", type=int, low=1),
        Param("sparsify", False, "remove kernels while the LP of (OPT3) stays feasible (§3.4)",
              type=bool),
        Param("remove_kernels", True,
              "leave out kernels with zero weight in two successive stages (checked at the end; "
              "precomputed banks)", type=bool),
        Param("extrapolate", True,
              "start each stage with an exact line search along the previous stage's "
              "displacement of alpha (precomputed banks)", type=bool),
        Param("newton", True,
              "start each stage with up to three Newton steps of G on the free variables "
              "(precomputed banks)", type=bool),
        Param("merge_identical", True,
              "solve on the distinct points (identical points merged, exact); the last stage is "
              "checked on all points (precomputed banks)", type=bool),
        Param("check_every", 0, "SMO steps between exact refreshes (0: automatic)", type=int,
              low=0),
        CACHE_MB,
        SHRINKING,
        PARALLEL,
    )

    unit: ClassVar[str] = "SMO step"
    requires: ClassVar[Requires] = Requires(
        loss=(needs(HINGE_CONJUGATE, why="the SKM's conic dual (D_K) is that of the hinge "
                                         "loss (a classifier)"),),
        regularizer=(needs(L1_SQUARED_FORM, why="the SKM solves the squared block 1-norm"),),
        bank=(ARRAY_BANK,),
    )

    def problem_reasons(self, problem: Problem) -> list[str]:
        """The bias and the kernels (:func:`~mklkit_smo.engine.bias_and_kernel_problems`)."""
        return bias_and_kernel_problems(problem, "the SKM")

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Continuation over kappa around the SMO state (module docstring)."""
        return _Skm(self, problem, run).run_loop()


class _Options:
    """The option set ``_SmoRun`` (smo_mkl's state) reads, from the SKM engine's options."""

    def __init__(self, engine: SkmSMO) -> None:
        self.name = engine.name
        p = dict(engine.get_params())
        p.update(kkt_tol=p["eps2"], analytic=False)
        self._p = p

    def get_params(self) -> dict[str, Any]:
        return self._p


class _SkmRun(_SmoRun):
    """smo_mkl's SMO state with the SKM's regularizer form (``REG_SKM``)."""

    def _reg_form(self, reg: Any) -> _Reg:
        src = self.problem.extra.get("kernel_source") if self.problem.extra else None
        M = src.n_kernels if src is not None else self.problem.n_kernels
        bpar = np.concatenate([np.ones(M), np.zeros(M)])  # kappa = 1: a = d = 1, d(kappa) = 0
        return _Reg(self.smo.REG_SKM, 2.0, 0.5, 0.0, 0.0, 0.0, bpar, self.smo.no_function, None,
                    reg)


class _Skm:
    """One SKM solve: continuation over kappa around the SMO state."""

    def __init__(self, engine: SkmSMO, problem: Problem, outer: Run | None = None) -> None:
        self.engine = engine
        self.problem = problem
        # the solve's clock, history, callback and ending
        self.outer = outer if outer is not None else Run(engine, problem)
        p = engine.get_params()
        self.tol = float(p["tol"])
        self.max_iter = int(p["max_iter"])
        self.eps2 = float(p["eps2"])
        self.eps1 = float(p["eps1"]) * problem.n_samples
        self.mu = float(p["mu"])
        self.max_stages = int(p["max_stages"])
        self.sparsify = bool(p["sparsify"])
        # the line search needs the bank (K_j D(y) d for the direction d)
        on_the_fly = bool(problem.extra and problem.extra.get("kernel_source") is not None)
        self.extrapolate = bool(p["extrapolate"]) and not on_the_fly
        self.newton = bool(p["newton"]) and not on_the_fly
        self.C = float(problem.C)
        self.U = 1.0 / self.C
        src = problem.extra.get("kernel_source") if problem.extra else None
        self.M = src.n_kernels if src is not None else problem.n_kernels
        self.remove = bool(p["remove_kernels"]) and src is None  # needs the bank K[kept]
        self.dt = np.ones(self.M)  # the SKM's d_j (l1_squared: unweighted)
        self.steps = 0
        self.merged: MergedPoints | None = None
        if bool(p["merge_identical"]) and src is None:
            self.merged = MergedPoints.find(problem.K, problem.y, max_fraction=_MERGE_FRACTION)
            if self.merged is not None:
                logger.info("skm_smo: %d points, %d distinct", problem.n_samples,
                            self.merged.rep.size)

    # -- one stage ---------------------------------------------------------------
    def _new_run(self, kept: np.ndarray, beta: np.ndarray | None) -> _SkmRun:
        pb = self.problem
        mp = self.merged
        K, y = (mp.K, mp.y) if mp is not None else (pb.K, pb.y)
        if kept.size < self.M or mp is not None:
            pb = Problem(K=K[kept] if kept.size < self.M else K, y=y, loss=pb.loss,
                         regularizer=pb.regularizer, C=pb.C, bias=pb.bias)
        run = _SkmRun(_Options(self.engine), pb, self.outer)
        if mp is not None:
            run.ub[:] = self.U * mp.count
        if beta is not None and np.any(beta):
            run.beta[:] = beta
            run.gamma[:] = run.z * beta
            run._sync(np.arange(run.N, dtype=np.int64))
            run._refresh()
        return run

    def _set_kappa(self, run: _SkmRun, kappa: float, kept: np.ndarray) -> None:
        rho = math.hypot(1.0 - kappa, kappa)
        d = self.dt[kept]
        m = kept.size
        run.reg.bpar[:m] = kappa * d / rho
        run.reg.bpar[m:] = (1.0 - kappa) * d / rho
        if run.shrunk:
            run._writeback()
            with np.errstate(all="ignore"):
                run._unshrink()
        else:
            with np.errstate(all="ignore"):
                run._refresh()

    def _extrapolate(self, run: _SkmRun, direction: np.ndarray) -> float:
        r"""A line search on the current stage's :math:`G` along the last stage's displacement.

        From one stage to the next the solution :math:`\alpha(\kappa)` moves along
        the valley of :math:`G` where the active kernels keep :math:`J_j(\alpha)`
        (nearly) equal.  Across the valley the curvature of :math:`G` grows like
        :math:`1/\kappa^2`, so SMO's two-variable steps, which all cross it, follow
        the valley only in tiny steps: the last stages took most of the SMO steps
        on larger data sets while :math:`\alpha` hardly moved.  The displacement of
        the previous stage, :math:`\alpha_k - \alpha_{k-1}`, points along the valley;
        this step minimizes :math:`G` exactly along it (a one-dimensional convex
        problem, by bisection on :math:`G'`, :func:`~mklkit_smo._skm.skm_line_min`).  The direction is made feasible first:
        components that would leave :math:`[0, U]` at once, or before the minimizer,
        are set to zero and :math:`y^\top d = 0` is restored on the free components,
        so the step keeps the constraints.  SMO then solves the stage as before (a
        descent step does not change what it converges to, nor its stopping test).
        Needs the full (unshrunk) state and a precomputed bank.  Returns the step
        length (0: none).
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
            tmax = self._room(run, D)
            w, q = self._forms(run, D)
            # the minimizer along the line with the box ignored (G is defined there too)
            t_line = self._line_min(run, w, q, D, max(4.0 * tmax, 1.0)
                                    if tmax < math.inf else 1.0)
            if t_line <= tmax or not t_line > 0.0:
                break
            # leave out the components that reach their bound before the minimizer
            blocked = nz & (self._ratios(run, D) < t_line)
        else:
            return 0.0
        if not tmax > 0.0:
            return 0.0
        t = self._line_min(run, w, q, D, min(tmax, t_line) if t_line > 0.0 else tmax)
        return self._take_step(run, D, t, w, q)

    # -- steps along a direction d (beta space, y^T d = 0) ----------------------------
    @staticmethod
    def _ratios(run: _SkmRun, D: np.ndarray) -> np.ndarray:
        """The t at which each component of beta + t d reaches its bound (inf where d = 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(D > 0.0, run.ub - run.beta, run.beta)
            return np.where(D != 0.0, room / np.abs(D), math.inf)

    @classmethod
    def _room(cls, run: _SkmRun, D: np.ndarray) -> float:
        """The largest t with beta + t d in the box."""
        return float(np.min(cls._ratios(run, D), initial=math.inf))

    @staticmethod
    def _forms(run: _SkmRun, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """w_j = (D(y)d)^T K_j D(y) alpha and q_j = d^T D(y) K_j D(y) d (O(m |d|^2))."""
        gd = run.z * D
        sv = np.ascontiguousarray(np.flatnonzero(gd), dtype=np.int64)
        u = np.zeros_like(run.v)
        run.smo.sync_precomputed(run.K, sv, np.ascontiguousarray(gd[sv]), sv, sv.size, True, u)
        return run.v[:, sv] @ gd[sv], u[:, sv] @ gd[sv]

    @staticmethod
    def _line_min(run: _SkmRun, w: np.ndarray, q: np.ndarray, D: np.ndarray,
                  hi: float) -> float:
        """The minimizer of G along d over [0, hi] (bisection on G', convex)."""
        from ._skm import skm_line_min

        return float(skm_line_min(np.ascontiguousarray(run.c, dtype=np.float64),
                                  np.ascontiguousarray(w), np.ascontiguousarray(q),
                                  float(np.sum(D)), run.reg.bpar, hi))

    @classmethod
    def _take_step(cls, run: _SkmRun, D: np.ndarray, t: float, w: np.ndarray,
                   q: np.ndarray) -> float:
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
        hit = (D != 0.0) & (cls._ratios(run, D) <= t)
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

    @staticmethod
    def _hessian(run: _SkmRun, pts: np.ndarray) -> np.ndarray:
        r"""Hessian of G in :math:`\gamma = D(y)\alpha` on the points ``pts`` (:meth:`_newton`)."""
        from ._skm import weighted_block

        smo = run.smo
        c = np.ascontiguousarray(run.c, dtype=np.float64)
        d, u1, u2 = np.zeros(run.M), np.zeros(run.M), np.zeros(run.M)
        r1 = smo.reg_coeffs(run.opts, run.fns, c, d, u1, u2)
        H = weighted_block(run.K, np.ascontiguousarray(pts, dtype=np.int64), d)
        V = run.v[:, pts]
        pv = u1 @ V
        return H + (V.T * u2) @ V + r1 * np.outer(pv, pv)

    def _newton(self, run: _SkmRun) -> float:
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
        H = self._hessian(run, pts)
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
        t = self._line_min(run, w, q, D, min(self._room(run, D), 2.0))
        return self._take_step(run, D, t, w, q)

    def _inner(self, run: _SkmRun) -> int:
        """SMO on G until the pair conditions hold on the full problem; the smo stop code."""
        smo = run.smo
        while True:
            budget = min(run.refresh_every, self.max_iter - self.steps)
            if budget <= 0:
                return smo.STOP_CHUNK
            done, stop, viol = run._chunk(budget)
            self.steps += done
            numerical = stop == smo.STOP_NUMERICAL or not np.all(np.isfinite(run.c))
            if run.shrunk:
                run._writeback()
            if numerical:
                return smo.STOP_NUMERICAL
            if stop in (smo.STOP_KKT, smo.STOP_STALLED) or self.steps >= self.max_iter:
                if run.shrunk:
                    with np.errstate(all="ignore"):
                        run._unshrink()
                    if stop == smo.STOP_KKT and run._violation() > run.eps:
                        continue  # met only on the shrunk problem
                else:
                    with np.errstate(all="ignore"):
                        run._refresh()
                if self.steps >= self.max_iter and stop != smo.STOP_KKT:
                    return smo.STOP_CHUNK
                return stop
            if not run.shrunk:
                with np.errstate(all="ignore"):
                    run._refresh()
            if run.shrinking:
                run._shrink()

    # -- checks --------------------------------------------------------------------
    def _weights(self, run: _SkmRun, kept: np.ndarray) -> np.ndarray:
        """eta~(alpha) rescaled to sum_j d_j^2 eta_j = 1 for the target d (full length M)."""
        from ._skm import skm_eta_tilde

        et = np.empty(kept.size)
        skm_eta_tilde(np.ascontiguousarray(run.c), run.reg.bpar, et)
        eta = np.zeros(self.M)
        if not np.all(np.isfinite(et)):
            return np.full(self.M, np.nan)
        eta[kept] = et
        s = float(np.sum(self.dt**2 * eta))
        return eta / s if s > 0 else np.full(self.M, np.nan)

    def _full_state(self, run: _SkmRun, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v = K_j D(y) alpha and c_j for every kernel (also the ones left out)."""
        if kept.size == self.M:
            return run.v, run.c
        v = np.zeros((self.M, run.N))
        v[kept] = run.v
        out = np.setdiff1d(np.arange(self.M), kept)
        g = run.gamma
        sv = np.flatnonzero(g)
        bank = self.merged.K if self.merged is not None else self.problem.K
        for j in out:
            v[j] = g[sv] @ bank[j][sv]
        c = np.maximum(np.einsum("mi,i->m", v, g), 0.0)
        return v, c

    def _on_points(self, v: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v and the dual variables on the original points (from the merged ones)."""
        mp = self.merged
        if mp is None:
            return v, beta
        return np.ascontiguousarray(v[:, mp.of]), mp.expand(beta, self.U)

    def _evaluate(self, v: np.ndarray, c: np.ndarray, beta: np.ndarray,
                  eta: np.ndarray) -> dict[str, float]:
        """(OPT3) reached, primal P, dual D (paper scale) and the bias at (alpha, eta)."""
        y = self.problem.y
        e1, e2 = opt3(v, c, beta, y, self.U, eta, self.dt)
        F = eta @ v
        bp = y - F
        k = min(max(int(np.sum(y > 0)) - 1, 0), bp.size - 1)
        b = float(np.partition(bp, k)[k])
        hinge = float(np.sum(np.maximum(0.0, 1.0 - y * (F + b))))
        norms = eta * np.sqrt(np.maximum(c, 0.0))
        P = 0.5 * float(np.sum(self.dt * norms)) ** 2 + self.U * hinge
        D = float(np.sum(beta)) - 0.5 * float(np.max(c / self.dt**2))
        gap = relative_gap(P, D) if math.isfinite(P) else math.nan
        return {"e1": e1, "e2": e2, "P": P, "D": D, "gap": gap, "bias": b}

    def _record(self, stage: int, kappa: float, run: _SkmRun, ev: dict[str, float],
                eta: np.ndarray, viol: float, m_active: int, beta: np.ndarray,
                callback: bool = True, **more: Any) -> dict[str, Any]:
        """A history record of a stage (:meth:`mklkit.engines.base.Run.record`)."""
        n = self.problem.n_samples
        return self.outer.record(
            stage, self.C * ev["P"], self.C * ev["D"], ev["gap"], int(np.sum(eta > 0)),
            callback=callback,
            kappa=kappa,
            smo_steps=int(self.steps),
            eps1_per_n=ev["e1"] / n,
            eps2=ev["e2"],
            kkt_violation=viol,
            n_sv=int(np.sum(beta > 0.0)),
            n_bound=int(np.sum(beta >= self.U)),
            n_points_in_loop=int(run.N),
            n_kernels_in_loop=int(m_active),
            bias=ev["bias"],
            objective_skm=ev["P"],
            dual_objective_skm=ev["D"],
            newton_evaluations=int(run.istate[run.smo.IS_NEWTON]),
            **more,
        )

    def _certify_by_lp(self, v: np.ndarray, c: np.ndarray,
                       beta: np.ndarray) -> tuple[np.ndarray, dict[str, float]] | None:
        """Weights from the LP of (OPT3) on the eps1-active kernels, with their evaluation,
        when they meet (OPT3) and the gap; else None."""
        Jj = 0.5 * c / self.dt**2 - float(np.sum(beta))
        allowed = Jj >= np.max(Jj) - self.eps1
        eta, t = _lp_weights(v, beta, self.problem.y, self.U, self.dt, allowed)
        if eta is None or not t <= self.eps2:
            return None
        ev = self._evaluate(v, c, beta, eta)  # (OPT3) checked again, not taken from the LP
        return (eta, ev) if self._met(ev) else None

    def _stage_tol(self, kappa: float, kept: np.ndarray) -> float:
        """The (OPT4) tolerance of a stage on max_up S - min_low S (2 eps = eps2, §4.4).

        The first stage (kappa = 1) is the SVM on the sum of the kernels; with more than
        one kernel it has no kernel weights to certify and only starts the
        continuation, so it is solved to ``_SVM_STAGE_TOL`` (the scores are of order one).
        """
        if kappa == 1.0 and kept.size > 1:
            return max(self.eps2, _SVM_STAGE_TOL)
        return self.eps2

    def _met(self, ev: dict[str, float]) -> bool:
        return ev["e1"] <= self.eps1 and ev["e2"] <= self.eps2 and ev["gap"] <= self.tol

    # -- main loop -------------------------------------------------------------------
    def run_loop(self) -> SolveResult:
        outer = self.outer
        kept = np.arange(self.M)
        run = self._new_run(kept, None)
        smo = run.smo
        kappa = 1.0
        stage = 0
        zero_before = np.zeros(self.M, dtype=bool)
        ends: list[np.ndarray] = []
        eta = np.full(self.M, np.nan)
        eta_ev = np.zeros(self.M)
        ev: dict[str, float] = {}
        while True:
            stage += 1
            self._set_kappa(run, kappa, kept)
            run.eps = self._stage_tol(kappa, kept)
            if self.extrapolate and kappa < 1.0 and len(ends) >= 2:
                self._extrapolate(run, ends[-1] - ends[-2])
            if self.newton and kappa < 1.0 and ends:  # not when repeating a stage on all points
                for _ in range(_NEWTON_STEPS):
                    if run._violation() <= run.eps or not self._newton(run) > 0.0:
                        break
            stop = self._inner(run)
            ends = [*ends[-1:], self._beta_full(run)]  # the last two stages' solutions
            viol = run._violation()
            v, c = self._full_state(run, kept)
            v, beta = self._on_points(v, run.beta.copy())
            eta = self._weights(run, kept) if kappa < 1.0 else np.full(self.M, np.nan)
            source = "eta_tilde"
            e2_tilde = math.nan
            if kappa < 1.0 and np.all(np.isfinite(eta)):
                ev = self._evaluate(v, c, beta, eta)
                eta_ev = eta
                if (not self._met(ev) and ev["e1"] <= self.eps1 and ev["e2"] <= 2.0 * self.eps2
                        and stop != smo.STOP_NUMERICAL):
                    # eta~ just misses (OPT3): the best weights for this alpha may not (§3.3)
                    lp = self._certify_by_lp(v, c, beta)
                    if lp is not None:
                        e2_tilde = ev["e2"]
                        eta, ev = lp
                        eta_ev = eta
                        source = "lp"
            else:
                eta_svm = np.zeros(self.M)
                eta_svm[kept] = 1.0 / max(kept.size, 1)  # the SVM on the sum of kernels
                eta_ev = eta_svm / np.sum(self.dt**2 * eta_svm)
                ev = self._evaluate(v, c, beta, eta_ev)
                ev["e1"] = math.inf if kappa < 1.0 or self.M > 1 else ev["e1"]
            more = {"weights_from": source}
            if source == "lp":
                more["eps2_eta_tilde"] = e2_tilde
            self._record(stage, kappa, run, ev, np.nan_to_num(eta), viol, kept.size, beta, **more)
            at = f"at kappa = {kappa:.3g}, stage {stage}"
            if stop == smo.STOP_NUMERICAL or not (math.isfinite(ev["P"]) and math.isfinite(ev["D"])):
                outer.end(Status.NUMERICAL_ERROR, self.steps, f"non-finite values {at}",
                          gap=ev["gap"])
                break
            if outer.stop_requested:
                outer.end(Status.STOPPED, self.steps, at, gap=ev["gap"])
                break
            ok = self._met(ev)
            if kept.size < self.M:
                # kernels left out must stay eps1-inactive with the full bank: checked at the
                # end, and whenever one of them is the most active kernel (then eps1 of (OPT3)
                # cannot be met without it)
                Jj = 0.5 * c / self.dt**2 - float(np.sum(beta))
                out = np.setdiff1d(np.arange(self.M), kept)
                top = np.max(Jj[kept])
                back = out[Jj[out] > top - self.eps1]
                if back.size and (ok or np.max(Jj[out]) > top):
                    logger.info("skm_smo: %d kernels left out are active again; put back",
                                back.size)
                    kept = np.union1d(kept, back)
                    full = self._beta_full(run)
                    run = self._new_run(kept, full)
                    zero_before[:] = False
                    continue  # same kappa with the kernels back
            if ok and self.merged is not None:
                # the merged problem is solved: the same stage again on all points, where
                # (OPT3) and the gap are checked once more (with every kernel back)
                full = self.merged.expand(self._beta_full(run), self.U)
                self.merged = None
                kept = np.arange(self.M)
                zero_before[:] = False
                ends = []
                run = self._new_run(kept, full)
                continue
            if ok:
                outer.end(Status.CONVERGED, self.steps, gap=ev["gap"])
                break
            if stop == smo.STOP_CHUNK or self.steps >= self.max_iter:
                outer.end(Status.MAX_ITER, self.steps, at, gap=ev["gap"])
                break
            if stop == smo.STOP_STALLED:
                outer.end(Status.STALLED, self.steps, f"the SMO steps stopped making progress "
                                                      f"{at}", gap=ev["gap"])
                break
            if stage >= self.max_stages:
                outer.end(Status.STALLED, self.steps, f"max_stages={self.max_stages} "
                                                      "continuation stages reached",
                          gap=ev["gap"])
                break
            if self.remove and kappa < 1.0 and np.all(np.isfinite(eta)):
                zero = eta == 0.0
                drop = zero & zero_before
                zero_before = zero
                n_drop = int(np.sum(drop[kept]))
                # a smaller loop is a new state (a copy of the kept bank, v synced from
                # scratch): worth it only when it at least halves the work of a step
                if 2 * n_drop >= kept.size and n_drop < kept.size:
                    keep_now = kept[~drop[kept]]
                    run = self._new_run(keep_now, self._beta_full(run))
                    kept = keep_now
            kappa *= self.mu
        if outer.status == Status.CONVERGED and self.sparsify:
            v, c = self._full_state(run, kept)
            v, beta = self._on_points(v, run.beta.copy())
            sparse = sparsify_weights(v, c, beta, self.problem.y, self.U, eta, self.dt,
                                      self.eps1, self.eps2)
            if np.sum(sparse > 0) < np.sum(eta > 0):
                ev2 = self._evaluate(v, c, beta, sparse)
                logger.info("skm_smo: §3.4 removed %d kernels", int(np.sum(eta > 0)
                                                                     - np.sum(sparse > 0)))
                eta, ev = sparse, ev2
                eta_ev = eta
                self._record(stage, kappa, run, ev, eta, viol, kept.size, beta, callback=False,
                             sparsified=True)
        n = self.problem.n_samples
        outer.message += (f"; (eps1, eps2)-optimality (OPT3) reached: eps1/n = "
                          f"{ev['e1'] / n:.3g}, eps2 = {ev['e2']:.3g}; kappa = {kappa:.3g} "
                          f"after {stage} stages")
        if outer.status == Status.CONVERGED:
            outer.message += (f" (targets eps1/n = {self.eps1 / n:g}, eps2 = {self.eps2:g}, "
                              f"tol = {self.tol:g})")
        # the point whose objective ev holds (the SVM on the sum of the kernels at kappa = 1)
        return self._result(run, kept, eta_ev, ev)

    def _beta_full(self, run: _SkmRun) -> np.ndarray:
        if run.shrunk:
            run._writeback()
            run._unshrink()
        return run.beta.copy()

    def _result(self, run: _SkmRun, kept: np.ndarray, eta: np.ndarray,
                ev: dict[str, float]) -> SolveResult:
        r"""The result at the weights ``eta``: blocks :math:`\eta_j K_jD(y)\alpha`."""
        eta = np.nan_to_num(np.asarray(eta, dtype=np.float64))
        v, c = self._full_state(run, kept)
        gamma = self.problem.y * self._on_points(v, run.beta)[1]  # D(y) alpha, paper scale
        norms = eta * np.sqrt(np.maximum(c, 0.0))
        total = float(np.sum(eta))
        weights = eta / total if total > 0.0 else np.zeros_like(eta)
        return self.outer.result(
            int(self.steps), alpha=eta[:, None] * gamma[None, :], bias=float(ev.get("bias", 0.0)),
            primal=float(self.C * ev.get("P", math.nan)),
            dual=float(self.C * ev.get("D", math.nan)), rho=self.C * gamma, norms=norms,
            weights=weights)
