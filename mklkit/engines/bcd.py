r"""Engine ``bcd``: primal block coordinate descent on a factor bank.

With every kernel held as a factor :math:`K_m = L_mL_m^\top`
(:class:`~mklkit.kernels.factor.FactorBank`), the MKL primal (SpicyMKL
eq. 42) in the coordinates :math:`\beta_m = L_m^\top\alpha_m` is a
generalized group lasso,

.. math::
    \min_{\beta, b}\ \sum_i \ell\big(y_i, (L\beta)_i + b\big) + \sum_m \tilde g_C(\|\beta_m\|_2),

since :math:`K_m\alpha_m = L_m\beta_m` and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`.
Block-ℓ1 MKL with linear kernels on feature groups is exactly the group
lasso.  The engine solves it the way the fastest group-lasso solvers do
(skglm's ``GroupBCD`` and ``GroupProxNewton``, Bertrand et al. 2022; celer,
Massias et al. 2018/2020), generic over the component contracts:

Outer loop (working sets)
-------------------------
Every outer iteration certifies the current point (below) and scores every
block by the violation of its optimality condition, the fixed-point residual
:math:`\nu_m\|\beta_m - \mathrm{prox}_{\tilde g_C/\nu_m}(\beta_m - g_m/\nu_m)\|`
of a block step with the gradient :math:`g_m = L_m^\top\ell'(z)`
(:math:`\nu_m = L\|L_m\|_2^2`).  The working set holds the non-zero blocks
and the most violating ones, :math:`\max(p_0, 2|\text{active}|)` blocks in
all; the problem restricted to it is solved to ``inner_ratio`` times the
largest violation, in one call of the jitted loop
(:func:`mklkit._jit.bcd.solve_ws`).

Inner solvers
-------------
* ``method: bcd``: cyclic block coordinate descent on the loss itself, block
  step :math:`1/(L\|L_m\|_2^2)` with :math:`L` = ``loss.deriv_lipschitz()``
  (when that is infinite, the local curvature of ``deriv2`` with a
  sufficient-decrease test on the loss, back-tracking), and a Newton step
  on the bias after every pass.
* ``method: newton``: proximal Newton (Lee, Sun & Saunders 2014): the
  loss is replaced by its quadratic model at the current point
  (``deriv``, ``deriv2``), the model is minimized by the same block
  coordinate descent (no component call inside a pass, the curvature of
  each block checked exactly on the step), then an Armijo line search on
  the true objective.
* ``method: auto`` (default): ``newton``.  It is never slower on the
  benchmark (``benchmarks/bench_group_lasso.py``): for the squared loss the
  model is the loss, and for the logistic loss a pass needs no exponential.
  With ``newton``, a working set that differs from the last one gets one
  Newton step (``NEW_SET_NEWTON``: its solution changes the scores that
  choose the next one); on a working set met before, the steps are taken
  one at a time and the point certified after each, so that they end at
  the run's ``tol`` (:meth:`_BcdRun.newton_to_tol`).  The working set after
  two outer iterations in a row that each left the gap within 10 % of where
  it was (same smoothing, ``STALL_RATIO``, ``STALL_SLOW``) or after one whose
  Newton steps took 10 line-search halvings each (``STALL_HALVINGS``; the
  jitted loop ends its call after such a step) is solved by ``bcd``, and
  after the latter below a gap of ``ROUNDING_GAP`` the run stays with
  ``bcd``: proximal Newton can stall a little above the optimum, where the
  objective's decrease reaches its rounding (w8a, squared loss, 16,000
  points: a relative gap of 1.1e-7 for 200 iterations).

Both extrapolate the iterates every ``anderson + 1`` passes (Anderson
acceleration, Bertrand & Massias 2021) and keep the extrapolated point when
it lowers the objective.

Non-smooth losses
-----------------
A loss with ``smooth_primal = False`` (hinge, ε-insensitive, a plugin's
pinball) is replaced by its Moreau envelope
:math:`\ell_\mu(y, z) = \sup_u\{uz - \ell^*(y, u) - \tfrac\mu2u^2\}`, whose
derivative :math:`u^\star(z)` lies in the conjugate's domain and is found
from ``conj_grad``/``conj_hess`` by a safeguarded Newton search
(:func:`mklkit._jit.bcd.envelope`); its derivative is
:math:`1/\mu`-Lipschitz.  The smoothing :math:`\mu` starts at ``mu0`` (by
default a tenth of the zero solution's objective per unit of
:math:`\sum_i u_{\max,i}^2/2`) and is multiplied by ``mu_factor`` whenever
the smoothed problem is solved to within its smoothing error.  The gap is
always that of the original, non-smooth problem, at
:math:`\rho = -u^\star(z)`, which the projection keeps feasible.

Sample weights
--------------
A weighted problem (``problem.sample_weight``, :math:`w_i > 0`) has the loss
term :math:`\sum_i w_i\ell(y_i, z_i)`.  The jitted loops take the weights
as an array next to the conjugate's domain (empty for the unweighted
problem, whose arithmetic and compiled code stay as they were) and use
:math:`w_i\ell` throughout: a smooth loss's value, derivative and
curvature times :math:`w_i`; for a non-smooth loss the envelope of
:math:`w_i\ell`,

.. math::
    (w\ell)_\mu(z) = \sup_u\, uz - w\ell^*(u/w) - \tfrac\mu2u^2 = w\,\ell_{\mu w}(z),

the loss's envelope of the smoothing :math:`\mu w_i` times :math:`w_i` (its
derivative lies in :math:`w_i` times the conjugate's domain, its curvature
stays at most :math:`1/\mu`; :mod:`mklkit._jit.envelope`).  Everything else
goes through :class:`~mklkit.engines.common.SampleLoss`: the step's
Lipschitz constant :math:`\max_i w_i` times ``deriv_lipschitz()``, the dual
box (:math:`w_i` times the loss's), the primal value of the certificate,
the optimal bias of a warm start, and the default smoothing ``mu0`` (from
:math:`\sum_i u_{\max,i}^2/2` over the weighted domain).  Integer weights
give the solution of the rows repeated :math:`w_i` times
(``tests/engines/test_bcd_weights.py``).

Certificate
-----------
At every outer iteration, from the exact predictions :math:`z = L\beta + b`:
:math:`\rho = -\ell'(z)` (:math:`-u^\star(z)` when smoothed), projected onto
:math:`\mathbf 1^\top\rho = 0` inside the conjugate's box; one pass
:math:`L^\top\rho` gives the dual block norms :math:`\|\rho\|_{K_m} =
\|L_m^\top\rho\|` and the gradients for the scores; then
:func:`~mklkit.engines.common.projected_dual_objective`, the primal
:math:`P(\beta, b)` and the relative gap.  The best primal and dual points
seen are returned (:class:`~mklkit.engines.common.Incumbents`).

The result's ``alpha``: block ``m`` is the minimum-norm solution of
:math:`L_m^\top\alpha_m = \beta_m`,
:math:`\alpha_m = L_m(L_m^\top L_m)^+\beta_m` (an :math:`r_m\times r_m`
eigendecomposition, or LSQR for ranks above :data:`GRAM_MAX_RANK`), so that
:math:`K_m\alpha_m = L_m\beta_m` and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`
(the iterates stay in the row space of :math:`L_m^\top`).
"""
from __future__ import annotations

import logging
import math
import warnings
import weakref
from typing import Any, ClassVar

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..components.params import Param
from ..kernels.factor import FactorBank
from ..problem import Problem
from ..result import SolveResult, Status
from . import common
from .base import COMMON_PARAMS, Engine, Requires, Run
from .capabilities import FACTOR_BANK

__all__ = ["BCD", "BCD_ENGINES", "alpha_from_beta", "GRAM_MAX_RANK"]

logger = logging.getLogger(__name__)

#: Blocks of at most this rank get their spectral norm and the map back to
#: alpha from the r_m x r_m Gram matrix (N r^2 flops to form, r^3 to decompose), while
#: all those Gram matrices together fit :data:`GRAM_MAX_BYTES` (the smallest blocks
#: first); larger ones from sparse iterative solvers (svds, LSQR), which on the
#: ill-conditioned blocks of narrow Gaussian kernels cost far more: at 512, a refined
#: make_classification bank (15,000 points, 4 blocks of rank 736 then 1,154) took 153 s
#: in its two solves, at 2,048 82 s, with the same iterations and gaps.
GRAM_MAX_RANK = 2048
#: Bytes of all the blocks' Gram matrices (and as much again for their eigenvectors).
GRAM_MAX_BYTES = 256 * 2**20

#: Largest total rank of the non-zero blocks for the Newton steps on them (a dense
#: Hessian of that size is formed and decomposed).
POLISH_MAX_RANK = 4000

#: Largest cost of one Newton step on the non-zero blocks (total rank :math:`r_A`, K
#: blocks, :math:`\mathcal B` the samples where the loss has curvature):
#: :math:`r_A(|\mathcal B| + K)^2` through the band (``_Support._band_solve``),
#: :math:`r_A^2(|\mathcal B| + r_A/3)` with the dense Hessian.  Dearer steps are left
#: to coordinate descent.
POLISH_MAX_FLOPS = 4e9

#: BLAS threads during a solve (``None``: leave the BLAS library as it is).  As
#: for spicy (:data:`mklkit.engines.spicy.BLAS_THREADS`): the factor bank's
#: parallel jitted passes keep their threads spinning, and a multi-threaded
#: Cholesky of the Newton steps on the support next to them oversubscribes the
#: cores (on two busy cores a 176 x 176 factorization took 0.3 s with two BLAS
#: threads and 0.2 ms with one; a hinge solve on 80 samples 18 s against 0.9 s).
BLAS_THREADS: int | None = 1

_THREADPOOLS: Any = None

#: Outer iterations in a row without a lower primal value, a higher dual value
#: or a smaller smoothing before the solve is declared stalled.
STALL_ITERATIONS = 5

#: With ``method: newton``, ``STALL_SLOW`` outer iterations in a row that each leave
#: the gap above this fraction of the one before (at the same smoothing) send the next
#: working set to plain coordinate descent ...
STALL_RATIO = 0.9

#: ... (one such iteration is no stall: warm-started from the solution at a larger C,
#: the first Newton steps on the old support move the gap by a few percent, and plain
#: descent from there took 50-60 s to a gap of 2e-6 where Newton needs 2-5 s for 1e-3:
#: w8a, 8,000 points, the 50 kernels of bench_large_n, logistic + elastic net at
#: C = 1e-5..1e-4) ...
STALL_SLOW = 2

#: ... or whose Newton steps took this many halvings of the line search each on
#: average (the jitted loop ends a call after one such step, ``LS_STALL``).
STALL_HALVINGS = 10

#: After that last kind of stall with a relative gap below this (where the
#: objective's decrease nears its rounding), the run stays with coordinate
#: descent.
ROUNDING_GAP = 1e-6

#: A smooth loss's support is polished (``polish: auto``) once the relative gap is
#: below this: farther from the optimum the support still changes and the steps
#: are wasted (w8a, 1,000 points, logistic + l1: 8 steps at gap 0.75 doubled the time).
SMOOTH_POLISH_GAP = 1e-2

#: With ``method: newton``, Newton steps on a working set that differs from the
#: previous outer iteration's (``max_newton`` on one that does not): w8a with
#: 50 kernels, 39,799 points, logistic + elastic net to gap 1e-3: 9.4 s instead
#: of 20.9 s, the working set growing 10 -> 48 blocks in one step each.
NEW_SET_NEWTON = 1


def _jit():
    """The jitted loops, compiled (or loaded from the cache) on first use."""
    from .._jit import bcd as kb
    return kb


class _Factors:
    """Arrays of a :class:`FactorBank` for the jitted loops, computed once per bank.

    ``lip[m]`` is :math:`\\|L_m\\|_2^2`; ``grams`` holds the Gram matrices
    :math:`L_m^\\top L_m` of the blocks of rank at most :data:`GRAM_MAX_RANK`
    (block ``m`` at ``goff[m]``, -1 for the others); for a sparse bank,
    ``supp_ptr``/``supp_idx`` list the samples each block touches and
    ``tptr``/``tcol``/``tval`` hold each block's entries sample by sample (its
    factor :math:`L_m` in CSR form, restricted to those samples).
    """

    def __init__(self, bank: FactorBank) -> None:
        M, N, _ = bank.shape
        self.N = N
        self.sparse = bool(bank.sparse)
        self.starts = np.ascontiguousarray(bank.starts, dtype=np.int64)
        empty_i = np.zeros(0, dtype=np.int64)
        if self.sparse:
            LT = bank.LT
            self.LT = np.zeros((1, 1))
            self.indptr = np.ascontiguousarray(LT.indptr, dtype=np.int64)
            self.indices = np.ascontiguousarray(LT.indices, dtype=np.int64)
            self.data = np.ascontiguousarray(LT.data, dtype=np.float64)
            # every entry of L^T (row j of block b, sample i) sorted by block, sample, row:
            # one group per (block, sample) that the block touches
            rows = np.repeat(np.arange(LT.shape[0], dtype=np.int64), np.diff(self.indptr))
            blk = np.repeat(np.arange(M, dtype=np.int64), np.diff(self.starts))[rows]
            order = np.lexsort((rows, self.indices, blk))
            b_s, i_s = blk[order], self.indices[order]
            first = np.ones(order.size, dtype=bool)
            first[1:] = (b_s[1:] != b_s[:-1]) | (i_s[1:] != i_s[:-1])
            heads = np.flatnonzero(first)
            self.supp_idx = np.ascontiguousarray(i_s[heads], dtype=np.int64)
            self.supp_ptr = np.concatenate(
                [[0], np.cumsum(np.bincount(b_s[heads], minlength=M))]).astype(np.int64)
            self.tptr = np.append(heads, order.size).astype(np.int64)
            self.tcol = np.ascontiguousarray(rows[order] - self.starts[b_s], dtype=np.int64)
            self.tval = np.ascontiguousarray(self.data[order], dtype=np.float64)
        else:
            self.LT = bank.LT
            self.indptr = np.zeros(1, dtype=np.int64)
            self.indices = self.supp_idx = self.tptr = self.tcol = empty_i
            self.data = self.tval = np.zeros(0)
            self.supp_ptr = np.zeros(M + 1, dtype=np.int64)
        ranks = np.diff(self.starts)
        self.goff = np.full(M, -1, dtype=np.int64)
        small = np.flatnonzero((ranks > 0) & (ranks <= GRAM_MAX_RANK))
        small = small[np.argsort(ranks[small], kind="stable")]
        small = np.sort(small[np.cumsum(8 * ranks[small].astype(np.float64) ** 2) <= GRAM_MAX_BYTES])
        self.goff[small] = np.concatenate([[0], np.cumsum(ranks[small] ** 2)[:-1]]) \
            if small.size else small
        self.grams = np.zeros(int(np.sum(ranks[small] ** 2)))
        ones = np.ones(N) if self.sparse else np.zeros(0)
        for m in small:
            r = int(ranks[m])
            G = self.grams[self.goff[m]:self.goff[m] + r * r].reshape(r, r)
            if self.sparse:
                # from the sample-major copy, symmetric
                _jit().block_hessian(True, self.LT, int(self.starts[m]), int(self.starts[m + 1]),
                                     int(m), ones, self.supp_ptr, self.supp_idx, self.tptr,
                                     self.tcol, self.tval, G)
            else:
                B = self.LT[self.starts[m]:self.starts[m + 1]]
                G[:, :] = B @ B.T
                G[:, :] = 0.5 * (G + G.T)
        # eigendecompositions of the small Gram matrices, a batch per rank (spectral norms,
        # alpha_from_beta)
        self.eig: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for r in np.unique(ranks[small]):
            ms = small[ranks[small] == r]
            w, V = np.linalg.eigh(np.stack([self.gram(int(m)) for m in ms]))
            for k, m in enumerate(ms):
                self.eig[int(m)] = (w[k], V[k])
        self.lip = np.array([self._spectral_sq(bank, m) for m in range(M)])

    def gram(self, m: int) -> np.ndarray:
        """:math:`L_m^\\top L_m` of a block of rank <= GRAM_MAX_RANK."""
        r = int(self.starts[m + 1] - self.starts[m])
        return self.grams[self.goff[m]:self.goff[m] + r * r].reshape(r, r)

    def _spectral_sq(self, bank: FactorBank, m: int) -> float:
        r = int(self.starts[m + 1] - self.starts[m])
        if r == 0:
            return 0.0
        if self.goff[m] >= 0:
            top = float(self.eig[m][0][-1])
        else:
            B = bank.block(m)
            op = spla.aslinearoperator(B.T if sp.issparse(B) else np.asarray(B).T)
            top = float(spla.svds(op, k=1, tol=1e-10, return_singular_vectors=False)[0]) ** 2
        return max(top, 0.0) * (1.0 + 1e-10)


_FACTORS: "weakref.WeakKeyDictionary[FactorBank, _Factors]" = weakref.WeakKeyDictionary()


def hessian_flops(LA: Any, cols: np.ndarray | None = None) -> float:
    r"""Cost of :math:`L_A\,\mathrm{diag}(h)L_A^\top` over the samples ``cols`` (all: None):
    :math:`r_A^2|\text{cols}|` for dense rows, the sum over the samples of the squared
    number of their entries for sparse ones."""
    if sp.issparse(LA):
        per = np.bincount(LA.indices, minlength=LA.shape[1]).astype(np.float64)
        return float(np.sum(per * per if cols is None else per[cols] ** 2))
    n = LA.shape[1] if cols is None else cols.size
    return float(LA.shape[0]) ** 2 * n


def _factors(bank: FactorBank) -> _Factors:
    f = _FACTORS.get(bank)
    if f is None:
        f = _FACTORS[bank] = _Factors(bank)
    return f


def alpha_from_beta(bank: FactorBank, beta: np.ndarray) -> np.ndarray:
    r"""Coefficients :math:`\alpha` (M, N) with :math:`L_m^\top\alpha_m = \beta_m`, of minimum norm.

    :math:`\alpha_m = L_m(L_m^\top L_m)^+\beta_m` through the eigendecomposition
    of the :math:`r_m\times r_m` Gram matrix (eigenvalues below
    :math:`10^{-12}\lambda_{\max}r_m` dropped), or LSQR on
    :math:`L_m^\top\alpha_m = \beta_m` for ranks above :data:`GRAM_MAX_RANK`.
    Then :math:`K_m\alpha_m = L_m\beta_m` and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|`
    whenever :math:`\beta_m` lies in the row space of :math:`L_m^\top` (it
    does for every iterate of the engine).

    A bank that solves :math:`L_m^\top\alpha_m = \beta_m` itself
    (``bank.solve_coefficients(m, beta_m)``, e.g. the triangular solve of
    :class:`~mklkit.kernels.factorize.dense.ExactFactorBank`) is asked instead:
    any solution gives the same :math:`K_m\alpha_m` and block norm.  LSQR on
    an ill-conditioned factor of rank 2,850 ran 9,600 iterations (50 s).
    """
    M, N, _ = bank.shape
    f = _factors(bank)
    own = getattr(bank, "solve_coefficients", None)
    coef = np.zeros(f.starts[-1])          # (L_m^T L_m)^+ beta_m of the small blocks
    small: list[int] = []
    other: dict[int, np.ndarray] = {}      # the others' alpha_m, solved one by one
    for m in range(M):
        s, e = int(bank.starts[m]), int(bank.starts[m + 1])
        bm = beta[s:e]
        if e == s or not np.any(bm != 0.0):
            continue
        if own is not None:
            other[m] = own(m, bm)
        elif f.goff[m] >= 0:
            w, V = f.eig[m]
            keep = w > 1e-12 * max(float(w[-1]), 0.0) * (e - s)
            coef[s:e] = V[:, keep] @ ((V[:, keep].T @ bm) / w[keep])
            small.append(m)
        else:
            op = spla.aslinearoperator(bank.block(m))
            other[m] = spla.lsqr(op, bm, atol=1e-14, btol=1e-14, iter_lim=10 * (e - s))[0]
    # alpha_m = L_m coef_m for the small blocks in one pass (the others' coef_m are 0)
    alpha = bank.combinations(coef) if small else np.zeros((M, N))
    for m, a in other.items():
        alpha[m] = a
    return alpha


def _segment_norms(t: np.ndarray, starts: np.ndarray) -> np.ndarray:
    r""":math:`\|t_{s_m:s_{m+1}}\|_2` for every block (0 for blocks of rank 0)."""
    M = starts.size - 1
    out = np.zeros(M)
    ranks = np.diff(starts)
    nz = ranks > 0
    if t.size and np.any(nz):
        sq = np.add.reduceat(t * t, starts[:-1][nz])
        out[nz] = np.sqrt(np.maximum(sq, 0.0))
    return out


class BCD(Engine):
    r"""Primal block coordinate descent on a factor bank (module docstring).

    Parameters
    ----------
    tol : float
        Relative duality gap at which to stop.
    max_iter : int
        Maximum number of outer iterations (working-set solves).
    method : {"auto", "bcd", "newton"}
        Inner solver: coordinate descent on the loss, or proximal Newton.
    p0 : int
        Smallest working set.
    max_epochs : int
        ``bcd``: passes over the working set per outer iteration.
    max_newton : int
        ``newton``: Newton steps per outer iteration.
    newton_epochs : int
        ``newton``: passes over the working set per Newton step.
    exact_rank : int
        ``newton``: blocks of at most this rank are minimized exactly on the
        quadratic model (accelerated proximal gradient on the block, with its
        :math:`r_m\times r_m` Hessian formed at every Newton step); 0: never.
    max_inner : int
        Iterations of an exact block minimization.
    anderson : int
        Iterates combined by Anderson extrapolation (0: none).
    inner_ratio : float
        The working set is solved to this fraction of the largest violation.
    mu0 : float or None
        Initial smoothing of a non-smooth loss (None: from the data).
    mu_factor : float
        Factor by which the smoothing decreases.
    polish : {"auto", "always", "never"}
        Newton steps on the non-zero blocks after every working-set solve
        (``auto``: for a smoothed non-smooth loss, and for a smooth loss on a
        working set met before once the gap is below ``SMOOTH_POLISH_GAP``
        and its Newton system costs at most ``POLISH_MAX_FLOPS``).
    max_polish : int
        Newton steps on the non-zero blocks per outer iteration.
    """

    name: ClassVar[str] = "bcd"
    description: ClassVar[str] = (
        "primal block coordinate descent on a factor bank: working sets, Anderson "
        "extrapolation, proximal Newton, smoothing of non-smooth losses; gap-certified"
    )
    supports_warm_start: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        COMMON_PARAMS[0],
        Param("max_iter", 200, "maximum number of outer iterations (working-set solves)",
              type=int, low=1),
        Param("method", "auto", "inner solver: 'bcd' (coordinate descent on the loss), "
              "'newton' (proximal Newton, coordinate descent on the quadratic model), "
              "'auto' (newton)", type=str, choices=("auto", "bcd", "newton")),
        Param("p0", 10, "smallest working set (kernels)", type=int, low=1),
        Param("max_epochs", 1000, "method bcd: passes over the working set per outer iteration",
              type=int, low=1),
        Param("max_newton", 50, "method newton: Newton steps per outer iteration", type=int,
              low=1),
        Param("newton_epochs", 20, "method newton: passes over the working set per Newton step",
              type=int, low=1),
        Param("exact_rank", 64, "method newton: blocks of at most this rank are minimized "
              "exactly on the quadratic model (their r x r Hessian is formed at every Newton "
              "step); 0: never", type=int, low=0),
        Param("max_inner", 50, "iterations of an exact block minimization", type=int, low=1),
        Param("anderson", 5, "iterates combined by Anderson extrapolation (0: none)", type=int,
              low=0, high=50),
        Param("inner_ratio", 0.3, "the working set is solved to this fraction of the largest "
              "violation", low=0.0, high=1.0, low_open=True, high_open=True),
        Param("mu0", None, "initial smoothing of a non-smooth loss (null: from the data)",
              low=0.0, low_open=True, nullable=True),
        Param("mu_factor", 0.1, "factor by which the smoothing of a non-smooth loss decreases",
              low=0.0, high=1.0, low_open=True, high_open=True),
        Param("polish", "auto", "Newton steps on the non-zero blocks after every working-set "
              "solve: 'auto' (for a smoothed non-smooth loss; for a smooth loss near the "
              "optimum where the Newton system is cheap), 'always', 'never'", type=str,
              choices=("auto", "always", "never")),
        Param("max_polish", 8, "Newton steps on the non-zero blocks per outer iteration",
              type=int, low=1),
    )

    requires: ClassVar[Requires] = Requires(
        regularizer=(common.SEPARABLE_SUMS,),
        bank=(FACTOR_BANK,),
        sample_weight=True,  # the loss enters as w_i l (SampleLoss, the jitted loops' sw)
    )
    representations: ClassVar[tuple[str, ...]] = ("factor",)

    def problem_reasons(self, problem: Problem) -> list[str]:
        """What the loss lacks of the kernels the engine calls: ``value``, ``deriv``,
        ``deriv2`` of a smooth loss, ``conj_grad``/``conj_hess`` of one it smooths."""
        loss = problem.loss
        need = (("value", "deriv", "deriv2", "conj", "conj_lower", "conj_upper")
                if loss.smooth_primal else
                ("value", "conj", "conj_grad", "conj_hess", "conj_lower", "conj_upper"))
        missing = [k for k in need if getattr(loss.jit, k, None) is None]
        if not missing:
            return []
        why = ("it is smooth (smooth_primal), so the engine needs" if loss.smooth_primal
               else "it is not smooth (smooth_primal False), so the engine smooths it "
               "through its conjugate and needs")
        return [f"the loss {loss.describe()} gives no {', '.join(missing)}: {why} them"]

    def _solve(self, problem: Problem, run: Run, warm_start: SolveResult | None) -> SolveResult:
        """Working sets of block coordinate descent (module docstring); a ``warm_start``'s
        α and b start the solve."""
        from numba.core.errors import NumbaExperimentalFeatureWarning

        with warnings.catch_warnings():
            # the jitted loops take the component kernels as first-class functions
            warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
            if BLAS_THREADS is None:
                return _BcdRun(self, problem, run, warm_start).run_loop()
            global _THREADPOOLS
            if _THREADPOOLS is None:
                from threadpoolctl import ThreadpoolController
                _THREADPOOLS = ThreadpoolController()
            with _THREADPOOLS.limit(limits=BLAS_THREADS, user_api="blas"):
                # the bank's set-up (block Gram matrices, spectral norms) included
                return _BcdRun(self, problem, run, warm_start).run_loop()


class _BcdRun:
    """State of one solve."""

    def __init__(self, engine: BCD, problem: Problem, run: Run,
                 warm_start: SolveResult | None) -> None:
        self.kb = _jit()
        self.engine = engine
        self.problem = problem
        self.run = run
        zero = run.zero
        assert zero is not None  # the template computed it (zero_first)
        self.zero = zero
        self.bank: FactorBank = problem.bank
        self.f = _factors(self.bank)
        self.M, self.N = problem.n_kernels, problem.n_samples
        self.y = common.as_vector(problem.y)
        self.C = float(problem.C)
        self.bias = bool(problem.bias)
        self.loss = problem.loss
        self.reg = problem.regularizer
        self.lp = common.as_vector(self.loss.param_vector)
        self.rp = common.as_vector(self.reg.param_vector)
        lk = self.loss.jit
        # the weighted loss w_i l (SampleLoss); the jitted loops take the weights as an array
        # next to the domain [lo, hi] of the loss's own conjugate, empty when unweighted
        self.sl = common.SampleLoss.of(problem)
        self.sw = np.zeros(0) if self.sl.w is None else self.sl.w
        self.lo = common.as_vector(lk.conj_lower(self.y, self.lp))
        self.hi = common.as_vector(lk.conj_upper(self.y, self.lp))
        # the dual box: minus the domain of (w l)^*, w times the loss's
        self.rho_lo, self.rho_hi = -self.sl.conj_upper(), -self.sl.conj_lower()
        self.smooth = bool(self.loss.smooth_primal)
        kb = self.kb
        self.kind = kb.KIND_SMOOTH if self.smooth else kb.KIND_ENVELOPE
        self.lip_loss = float(self.sl.deriv_lipschitz()) if self.smooth else math.inf
        method = engine.method if engine.method != "auto" else "newton"
        self.method = method
        # 'auto': always for a smoothed non-smooth loss; for a smooth loss where the Newton
        # step on the working set's blocks is affordable (polishes)
        self.polish_on = engine.polish == "always" or (engine.polish == "auto" and not self.smooth)
        self.polish_cheap = engine.polish == "auto" and self.smooth
        self.mu = 0.0
        if not self.smooth:
            if engine.mu0 is not None:
                self.mu = float(engine.mu0)
            else:
                umax = np.maximum(np.abs(self.lo), np.abs(self.hi))
                umax = np.where(np.isfinite(umax), umax, 1.0)
                if self.sl.w is not None:
                    umax = self.sl.w * umax           # the domain of (w l)^*
                denom = 0.5 * float(np.sum(umax * umax))
                p0 = abs(zero.objective)
                self.mu = 0.1 * p0 / denom if (p0 > 0.0 and denom > 0.0) else 1.0
        # a loss kernel that is not used is passed as the value kernel (same signature)
        self.fns = tuple(kb.first_class(getattr(lk, k) or lk.value, kb.LOSS_FN) for k in
                         ("value", "deriv", "deriv2", "conj", "conj_grad", "conj_hess"))
        self.reg_fns = (kb.first_class(self.reg.jit.value, kb.REG_FN),
                        kb.first_class(self.reg.jit.prox, kb.REG_FN))
        self.warm = warm_start

    # -- jitted calls ---------------------------------------------------------
    def loss_terms(self, z: np.ndarray, mu: float, value: bool = False
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Values (if asked) and derivatives of the loss in use at ``z``."""
        v, d1, _ = self.kb.eval_loss(self.kind, self.y, common.as_vector(z), self.lp, mu,
                                     self.lo, self.hi, self.sw, *self.fns, value, False)
        return v, d1

    def scores(self, beta: np.ndarray, grad: np.ndarray, mu: float) -> np.ndarray:
        """Violation of every block's optimality condition (:func:`~mklkit._jit.bcd.scores`)."""
        kappa = self.curvature_scale(mu)
        return self.kb.block_scores(beta, common.as_vector(grad), self.f.starts,
                                    kappa * self.f.lip, self.C, self.rp,
                                    self.reg_fns[1])

    def curvature_scale(self, mu: float) -> float:
        r""":math:`L`, the bound of the second derivative of the loss in use (1 if none): the
        weighted loss's (:math:`\max_i w_i` times the loss's), or :math:`1/\mu` for the
        envelope, weighted or not."""
        if not self.smooth:
            return 1.0 / mu
        return self.lip_loss if math.isfinite(self.lip_loss) and self.lip_loss > 0 else 1.0

    # -- certificate ------------------------------------------------------------
    def centre(self, rho: np.ndarray) -> np.ndarray:
        r"""Projection onto :math:`\mathbf 1^\top\rho = 0` inside the dual box: the plain
        shift when it stays inside, else :func:`~mklkit.engines.common.project_sum_box`."""
        shifted = rho - float(np.sum(rho)) / rho.size
        if np.all((shifted >= self.rho_lo) & (shifted <= self.rho_hi)):
            return shifted
        return common.project_sum_box(rho, self.rho_lo, self.rho_hi)

    def certify(self, beta: np.ndarray, b: float, mu: float) -> dict[str, Any]:
        """Primal, dual and gap at ``(beta, b)`` from the exact predictions (module docstring)."""
        problem = self.problem
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        smooth_val, u = self.loss_terms(z, mu, value=not self.smooth)
        rho = -u
        if self.bias:
            rho = self.centre(rho)
        t = self.bank.project(rho)
        D, rho_f, _ = common.projected_dual_objective(
            problem, rho, norms=_segment_norms(t, self.f.starts))
        norms = _segment_norms(beta, self.f.starts)
        reg_val = common.regularizer_value(self.reg, norms, self.C)
        P = common.loss_value(self.loss, self.y, z, self.sl.w) + reg_val
        gap = common.relative_gap(P, D)
        out = {"P": P, "D": D, "gap": gap, "rho": rho_f, "grad": -t, "norms": norms,
               "z": z, "sum_u": float(np.sum(u))}
        if not self.smooth:
            P_mu = float(np.sum(smooth_val)) + reg_val
            D_mu = D - 0.5 * mu * float(rho_f @ rho_f)
            out["gap_smoothed"] = P_mu - D_mu
            out["smoothing_error"] = (P - P_mu) + 0.5 * mu * float(rho_f @ rho_f)
        return out

    # -- working sets -------------------------------------------------------------
    def working_set(self, score: np.ndarray, norms: np.ndarray) -> np.ndarray:
        """The non-zero blocks and the most violating others, ``max(p0, 2 n_active)`` in all."""
        active = norms > 0.0
        n_act = int(np.sum(active))
        size = min(self.M, max(int(self.engine.p0), 2 * n_act))
        key = np.where(active, np.inf, score)
        order = np.argsort(-key, kind="stable")[:size]
        order = order[(key[order] > 0.0) & (self.f.lip[order] > 0.0)]
        return np.ascontiguousarray(np.sort(order), dtype=np.int64)

    def polishes(self, ws: np.ndarray) -> bool:
        r"""Newton steps on the non-zero blocks after the solve of ``ws``: always for a smoothed
        non-smooth loss ('auto'), and for a smooth loss when the Newton system of the
        working set's blocks costs at most ``POLISH_MAX_FLOPS``: :math:`r_W^2(N + r_W/3)`
        for a dense factor, the squared numbers of entries per sample (plus
        :math:`r_W^3/3`) for a sparse one (the loss has curvature on every sample, so the
        step is not solved through a band).  Near the optimum coordinate descent on the quadratic model
        converges slowly when the blocks are correlated (w8a, 4,000 points, 28 groups of 10
        features, logistic + l1 at 0.01 C_max to gap 1e-8: 1,000 epochs); these steps
        converge quadratically once the support is found."""
        if self.polish_on:
            return True
        if not self.polish_cheap:
            return False
        f = self.f
        r_w = float(np.sum(f.starts[ws + 1] - f.starts[ws]))
        if not 0.0 < r_w <= POLISH_MAX_RANK:
            return False
        if f.sparse:
            groups = np.concatenate([np.arange(f.supp_ptr[m], f.supp_ptr[m + 1]) for m in ws])
            per = np.bincount(f.supp_idx[groups], weights=np.diff(f.tptr)[groups],
                              minlength=self.N)
            cost = float(per @ per)
        else:
            cost = r_w * r_w * self.N
        return cost + r_w ** 3 / 3.0 <= POLISH_MAX_FLOPS

    def solve_ws(self, ws: np.ndarray, beta: np.ndarray, b: float, z: np.ndarray, mu: float,
                 tol_in: float, method: str | None = None,
                 max_newton: int | None = None, polish: bool = False) -> tuple[float, np.ndarray]:
        """One call of :func:`mklkit._jit.bcd.solve_ws` (``method``: the run's by default;
        ``max_newton`` caps the engine's Newton steps; ``polish``: Newton steps on the support
        follow); updates ``beta``, ``z`` in place."""
        kb, f, eng = self.kb, self.f, self.engine
        method = self.method if method is None else method
        ipar = np.zeros(kb.IP_LEN, dtype=np.int64)
        ipar[kb.IP_METHOD] = kb.METHOD_NEWTON if method == "newton" else kb.METHOD_BCD
        ipar[kb.IP_SPARSE] = int(f.sparse)
        ipar[kb.IP_BIAS] = int(self.bias)
        ipar[kb.IP_KIND] = self.kind
        # with Newton steps on the support after it, coordinate descent only has to find
        # the support
        cap = int(eng.max_newton) if max_newton is None else min(int(eng.max_newton), max_newton)
        ipar[kb.IP_MAX_NEWTON] = min(cap, 3) if polish else cap
        ipar[kb.IP_MAX_EPOCHS] = int(eng.newton_epochs if method == "newton"
                                     else eng.max_epochs)
        ipar[kb.IP_ANDERSON] = int(eng.anderson)
        ipar[kb.IP_EXACT_RANK] = min(int(eng.exact_rank), GRAM_MAX_RANK)
        ipar[kb.IP_MAX_INNER] = int(eng.max_inner)
        lip = self.curvature_scale(mu) if not self.smooth else self.lip_loss
        ipar[kb.IP_CHECK] = int(not (math.isfinite(lip) and lip > 0.0))
        fpar = np.zeros(kb.FP_LEN)
        fpar[kb.FP_C] = self.C
        fpar[kb.FP_MU] = mu
        fpar[kb.FP_LIP] = lip
        fpar[kb.FP_TOL] = tol_in
        fpar[kb.FP_RATIO] = float(eng.inner_ratio)
        fpar[kb.FP_SCALE] = self.curvature_scale(mu)
        stats = np.zeros(kb.ST_LEN)
        bvec = np.array([b])
        kb.solve_ws(ipar, fpar, ws, f.starts, f.lip, f.LT, f.indptr, f.indices, f.data,
                    f.supp_ptr, f.supp_idx, f.tptr, f.tcol, f.tval, f.grams, f.goff, self.y,
                    self.lp, self.lo, self.hi, self.sw, self.rp, beta, z, bvec, stats, *self.fns,
                    *self.reg_fns)
        return float(bvec[0]) if self.bias else 0.0, stats

    def newton_to_tol(self, ws: np.ndarray, beta: np.ndarray, b: float, z: np.ndarray,
                      mu: float, tol_in: float
                      ) -> tuple[float, np.ndarray, dict[str, Any] | None]:
        """Newton steps on a working set one call at a time, certifying after each: the run's
        ``tol`` ends them as well as ``tol_in`` and ``max_newton`` (on w8a, 39,799 points,
        the second of two steps, 3 s, took the gap from 5.6e-4 to 3.7e-4 for tol 1e-3).
        Returns the bias, the summed statistics, and the certificate of the final point when
        the tolerance ended the steps (else None)."""
        kb = self.kb
        total = np.zeros(kb.ST_LEN)
        while True:
            b, stats = self.solve_ws(ws, beta, b, z, mu, tol_in, "newton", 1)
            for k in (kb.ST_EPOCHS, kb.ST_NEWTON, kb.ST_LINE_SEARCH, kb.ST_ANDERSON,
                      kb.ST_BACKTRACK, kb.ST_DECREASE):
                total[k] += stats[k]
            total[kb.ST_STATUS] = stats[kb.ST_STATUS]
            total[kb.ST_VIOLATION] = stats[kb.ST_VIOLATION]
            if (int(stats[kb.ST_STATUS]) != kb.CAPPED or stats[kb.ST_NEWTON] < 1.0
                    or total[kb.ST_NEWTON] >= int(self.engine.max_newton)):
                return b, total, None
            cert = self.certify(beta, b, mu)
            if cert["gap"] <= self.run.tol:
                return b, total, cert

    # -- main loop ------------------------------------------------------------------
    def start(self) -> tuple[np.ndarray, float]:
        """Zero with the zero solution's bias, or the warm start with its optimal bias."""
        if self.warm is None:
            return np.zeros(self.bank.total_rank), self.zero.bias
        beta = self.bank.coefficients(self.warm.alpha)
        b = 0.0
        if self.bias:
            b0 = float(self.warm.bias) if math.isfinite(self.warm.bias) else 0.0
            b = common.optimal_bias(self.loss, self.y, self.bank.expand(beta), b0,
                                    weights=self.sl.w)
        return beta, b

    def run_loop(self) -> SolveResult:
        """Outer iterations until :meth:`Run.check` ends the run; the incumbents' result."""
        run = self.run
        eng = self.engine
        tol = run.tol
        kb = self.kb
        mu = self.mu
        beta, b = self.start()
        cert = self.certify(beta, b, mu)
        inc = run.incumbents

        def offer(c: dict[str, Any], it: int) -> None:
            if math.isfinite(c["P"]) and c["P"] < inc.primal:
                inc.offer_primal(c["P"], it, beta=beta.copy(), bias=b, norms=c["norms"])
            inc.offer_dual(c["D"], it, rho=c["rho"])

        offer(cert, 0)
        z: np.ndarray | None = None
        it = 0
        quiet = 0
        # after a stall of proximal Newton (STALL_RATIO, STALL_HALVINGS) the next
        # working set is solved by plain coordinate descent (w8a, squared loss, N = 16,000:
        # relative gap 1.1e-7 for ever, plain descent 5.9e-9).  Slow early progress is no
        # stall: on a smoothed hinge (a9a, N = 3,000) plain descent there took 1,900 epochs
        method = self.method
        gap_before = cert["gap"]
        prev_ws: np.ndarray | None = None
        stuck = False
        slow = 0                   # outer iterations in a row that moved the gap by less than STALL_RATIO
        if not math.isfinite(cert["P"]):
            run.end(Status.NUMERICAL_ERROR, 0, why=f"non-finite objective at the start "
                                                   f"(primal {cert['P']!r})")
        else:
            run.check(0, cert["gap"])
        while run.status is None:
            score = self.scores(beta, cert["grad"], mu)
            viol = float(np.max(score)) if score.size else 0.0
            if self.bias:
                viol = max(viol, abs(cert["sum_u"]))
            ws = self.working_set(score, cert["norms"])
            saved = (beta.copy(), b)
            z = cert["z"] if z is None else z
            # a new working set gets NEW_SET_NEWTON Newton steps: its solution changes the
            # scores that choose the next one
            fresh = prev_ws is None or not np.array_equal(ws, prev_ws)
            tol_in = float(eng.inner_ratio) * viol
            ended: dict[str, Any] | None = None        # newton_to_tol's final certificate
            # a smooth loss's working set is polished once it is met again (its support
            # settled): a new one changes the scores that choose the next
            polish = self.polish_on or (not fresh and cert["gap"] <= SMOOTH_POLISH_GAP
                                        and self.polishes(ws))
            if fresh or method != "newton" or polish:
                b, stats = self.solve_ws(ws, beta, b, z, mu, tol_in, method,
                                         NEW_SET_NEWTON if fresh else None, polish)
            else:
                b, stats, ended = self.newton_to_tol(ws, beta, b, z, mu, tol_in)
            prev_ws = ws
            it += 1
            failed = int(stats[kb.ST_STATUS]) == kb.NUMERICAL or not np.all(np.isfinite(beta))
            n_polish = 0
            if not failed and polish:
                b, n_polish = self.polish(beta, b, mu)
                failed = not (np.all(np.isfinite(beta)) and math.isfinite(b))
            if failed:
                beta, b = saved
            prev_primal, prev_dual = inc.primal, inc.dual
            if not failed and not self.smooth:
                self.offer_kinks(inc, beta, b, mu, it)
            # the point newton_to_tol certified last is this one (no polish on that path)
            cert = ended if ended is not None and not failed else self.certify(beta, b, mu)
            offer(cert, it)
            z = None
            mu_before = mu
            if not self.smooth and min(cert["gap"], inc.gap) > tol:
                mu = self.next_mu(mu, cert, tol)
                if mu < mu_before:
                    beta, b, z = self.predict(beta, b, mu_before, mu)
            run.record(it, cert["P"], cert["D"], cert["gap"], int(np.sum(cert["norms"] > 0)),
                       ws_size=int(ws.size), violation=viol, epochs=int(stats[kb.ST_EPOCHS]),
                       newton_steps=int(stats[kb.ST_NEWTON]),
                       line_search=int(stats[kb.ST_LINE_SEARCH]),
                       anderson=int(stats[kb.ST_ANDERSON]), polish_steps=n_polish,
                       mu=mu_before, method=method)
            logger.debug("bcd it=%d P=%.12g D=%.12g gap=%.3e ws=%d epochs=%d mu=%.3g", it,
                         cert["P"], cert["D"], cert["gap"], ws.size,
                         int(stats[kb.ST_EPOCHS]), mu_before)
            progress = inc.primal < prev_primal or inc.dual > prev_dual or mu < mu_before
            quiet = 0 if progress else quiet + 1
            # Newton's line search rejecting its steps down to nothing (the decrease at the
            # objective's rounding while the dual point still improves) is a stall too
            halvings = stats[kb.ST_LINE_SEARCH] / max(stats[kb.ST_NEWTON], 1.0)
            if method == "bcd":
                # back to Newton, unless its line search failed near the rounding level,
                # where it would fail again
                stalled = stuck and self.method != "bcd" and cert["gap"] <= ROUNDING_GAP
                slow = 0
            else:
                stuck = halvings >= STALL_HALVINGS
                slow = slow + 1 if mu == mu_before and cert["gap"] > STALL_RATIO * gap_before else 0
                stalled = mu == mu_before and (slow >= STALL_SLOW or stuck)
            method = "bcd" if stalled else self.method
            gap_before = cert["gap"]
            if failed or not math.isfinite(cert["P"]):
                run.end(Status.NUMERICAL_ERROR, it,
                        why=f"non-finite value in the working-set solve of iteration {it}")
            else:
                run.check(it, cert["gap"], stalled=(
                    f"no lower primal, higher dual or smaller smoothing in {quiet} iterations "
                    "in a row" if quiet >= STALL_ITERATIONS else None))
        st = inc.primal_state
        if "beta" in st:
            st["alpha"] = alpha_from_beta(self.bank, st.pop("beta"))
        return run.result(it)

    def reg_derivatives(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""First and second derivatives of :math:`\tilde g_C` at block norms ``x > 0``.

        :math:`\tilde g_C'(x) = Cx/d(x)` from the kernel weight
        :math:`d = 1/(2g'(x^2))` of the contract (SpicyMKL §4.1), and, with
        :math:`v = x + \tilde g_C'(x)` (so that :math:`\mathrm{prox}(v) = x`),
        :math:`\tilde g_C''(x) = 1/\mathrm{prox}'(v) - 1`.
        """
        rk = self.reg.jit
        x = common.as_vector(x)
        d = np.asarray(rk.weight(x, self.rp), dtype=np.float64)
        g1 = self.C * x / d
        pd = np.asarray(rk.prox_deriv(common.as_vector(x + g1), self.C, self.rp),
                        dtype=np.float64)
        with np.errstate(divide="ignore"):
            g2 = np.where(pd > 0.0, 1.0 / pd - 1.0, np.inf)
        return g1, np.maximum(g2, 0.0)

    def support(self, beta: np.ndarray, held: np.ndarray | None = None) -> "_Support | None":
        """The non-zero blocks of ``beta`` as one dense factor, or None (none, or too large).

        ``held``: non-zero blocks left out and kept where they are; their
        predictions become the support's constant offset.
        """
        starts = self.f.starts
        nonzero = _segment_norms(beta, starts) > 0.0
        offset = None
        if held is not None and held.size:
            fixed = np.zeros_like(beta)
            for m in held:
                fixed[starts[m]:starts[m + 1]] = beta[starts[m]:starts[m + 1]]
            offset = self.bank.expand(fixed)
            nonzero[held] = False
        act = np.flatnonzero(nonzero)
        if act.size == 0:
            return None
        rows = np.concatenate([np.arange(starts[m], starts[m + 1]) for m in act])
        LT = self.bank.LT
        seg = np.concatenate([[0], np.cumsum(np.diff(starts)[act])])
        if not self.f.sparse and act[-1] - act[0] + 1 == act.size:
            # consecutive blocks of a dense factor: a view, whatever their rank (the Newton
            # system is then solved through the smoothing band, _Support.newton_step)
            return _Support(self, act, rows, LT[rows[0]:rows[-1] + 1], seg, offset)
        if rows.size > POLISH_MAX_RANK:
            return None
        # a sparse factor's rows stay sparse: its Newton system costs the products of the
        # entries each sample has, not r_A^2 N
        LA = LT[rows].tocsr() if self.f.sparse else np.ascontiguousarray(LT[rows])
        return _Support(self, act, rows, LA, seg, offset)

    def polish(self, beta: np.ndarray, b: float, mu: float) -> tuple[float, int]:
        r"""Newton steps on the objective in use restricted to the non-zero blocks (and the bias).

        On the non-zero blocks the objective is twice differentiable (for the
        smoothed loss, piecewise): the gradient is
        :math:`L_A^\top\ell'(z) + \tilde g_C'(x_m)\beta_m/x_m` and the Hessian
        :math:`L_A^\top\mathrm{diag}(\ell'')L_A` plus, per block,
        :math:`\frac{\tilde g'}{x}(I - \hat\beta\hat\beta^\top) + \tilde g''\hat\beta\hat\beta^\top`
        (:meth:`reg_derivatives`).  The direction solves the Newton system
        (Cholesky; the pseudo-inverse of its eigendecomposition when it is not
        positive definite, leaving directions of no curvature to coordinate
        descent); an Armijo line search keeps the
        objective decreasing.  Coordinate descent cannot reach a tight gap on a
        smoothed non-smooth loss, whose curvature is :math:`1/\mu` on the
        samples in the smoothing band and 0 elsewhere; these steps do, since
        the objective is piecewise quadratic there.  When a step would take a
        block through the origin (:meth:`_Support.crossing`), the step with
        that block held where it is is tried too, and the better one kept (the
        block then stays held; coordinate descent's prox can zero it).
        Returns the bias and the number of steps taken; ``beta`` is updated in
        place.
        """
        sup = self.support(beta)
        if sup is None:
            return b, 0
        bA, z, F, u, h, x = sup.state(beta, b, mu)
        steps = 0
        held = np.zeros(0, dtype=np.int64)
        for _ in range(int(self.engine.max_polish)):
            if not (math.isfinite(F) and np.all(x > 0.0)):
                break
            step, slope = sup.newton_step(bA, u, h, x)
            if step is None or not slope < -1e-15 * abs(F):
                break
            new = self._search(sup, bA, b, z, F, step, slope, mu)
            crossing = sup.crossing(bA, step, x)
            if crossing.any() and not crossing.all():
                # a block the step would take through the origin: the smooth model has no
                # curvature there (its norm's minimum is the kink at 0, coordinate descent's
                # prox reaches it), so its Newton step is huge and the line search shrinks
                # every block's step with it.  The step on the others with it held is taken
                # instead when it lowers the objective more.
                beta[sup.rows] = bA
                keep = np.concatenate([held, sup.blocks[crossing]])
                hsup = self.support(beta, keep)
                if hsup is not None:
                    hA, hz, hF, hu, hh, hx = hsup.state(beta, b, mu)
                    hstep, hslope = hsup.newton_step(hA, hu, hh, hx)
                    hnew = (self._search(hsup, hA, b, hz, hF, hstep, hslope, mu)
                            if hstep is not None and hslope < -1e-15 * abs(hF) else None)
                    # hF leaves out the held blocks' regularizer: compare on the same terms
                    if hnew is not None and (new is None or hnew[3] + (F - hF) < new[3]):
                        sup, held, new, bA, z, F = hsup, keep, hnew, hA, hz, hF
            if new is None:
                break
            steps += 1
            decrease = F - new[3]
            bA, b, z, F, u, h, x = new
            if decrease <= 1e-15 * abs(F):
                break
        beta[sup.rows] = bA
        return b, steps

    def _search(self, sup: "_Support", bA: np.ndarray, b: float, z: np.ndarray, F: float,
                step: np.ndarray, slope: float, mu: float) -> tuple | None:
        """Armijo backtracking from the full ``step``: the new blocks, bias, predictions,
        objective, derivatives, curvatures and norms, or None (no decrease in 40 halvings)."""
        nA = sup.rows.size
        # the predictions are linear along the step: one product, then every trial costs
        # O(N + r_A)
        dz = sup.direction(step[:nA], step[-1] if self.bias else 0.0)
        t = 1.0
        for _ in range(40):
            bt = bA + t * step[:nA]
            btb = b + t * step[-1] if self.bias else b
            zt = z + t * dz
            Ft, ut, ht, xt = sup.objective(bt, zt, mu)
            if Ft <= F + 1e-4 * t * slope + 1e-15 * abs(F):
                return bt, btb, zt, Ft, ut, ht, xt
            t *= 0.5
        return None

    def band_shift(self, beta: np.ndarray, b: float, mu: float, factor: float
                   ) -> tuple[np.ndarray, float] | None:
        r"""The point whose predictions move by :math:`-(1 - \text{factor})\mu u_i` on the samples
        of the smoothing band, by the smallest change of the non-zero blocks and the bias.

        On a sample where the envelope's curvature is :math:`1/\mu` (the
        conjugate is linear there, the loss has a kink), the smoothed
        solution puts the prediction at :math:`z_i = p_i + \mu u_i` with
        :math:`p_i = \mathrm{prox}_{\mu\ell}(z_i) = z_i - \mu u_i` the kink (with weights
        too: the envelope of :math:`w_i\ell` is :math:`w_i` times that of smoothing
        :math:`\mu w_i`, so the curvature is :math:`1/\mu` and the shift :math:`\mu w_iv_i =
        \mu u_i`); along the path of solutions :math:`u_i` stays nearly constant.
        ``factor = 0`` moves the band onto the kinks: a primal point whose
        objective differs from the optimum at second order in :math:`\mu`
        instead of first (the loss of each band sample drops by
        :math:`\mu|u_i|`, the stationarity of the smoothed problem makes the
        first-order change elsewhere :math:`\mu u_i^2`).  ``factor =
        \mu'/\mu`` predicts the solution for the smaller smoothing
        :math:`\mu'`.  None when there is no band or no non-zero block.
        """
        sup = self.support(beta)
        if sup is None:
            return None
        bA = beta[sup.rows]
        z = sup.predictions(bA, b)
        _, u, h = sup.terms(z, mu)
        band = np.flatnonzero(h * mu > 0.5)
        if band.size == 0:
            return None
        nA = sup.rows.size
        cols = nA + int(self.bias)
        if float(band.size) * band.size * cols > POLISH_MAX_FLOPS:
            return None
        target = -(1.0 - factor) * mu * u[band]
        LB = sup.LA[:, band]
        LB = LB.toarray() if sp.issparse(LB) else LB
        if band.size < cols:
            # the minimum-norm solution M^T (M M^T)^+ target from the band's Gram matrix
            G = LB.T @ LB + (1.0 if self.bias else 0.0)
            w = sla.lstsq(G, target, lapack_driver="gelsy", check_finite=False)[0]
            delta = np.concatenate([LB @ w, [float(np.sum(w))] if self.bias else []])
        else:
            Mx = LB.T
            if self.bias:
                Mx = np.hstack([Mx, np.ones((band.size, 1))])
            delta = np.linalg.lstsq(Mx, target, rcond=None)[0]
        new = beta.copy()
        new[sup.rows] = bA + delta[:nA]
        return new, (b + float(delta[-1]) if self.bias else b)

    def offer_kinks(self, inc: common.Incumbents, beta: np.ndarray, b: float, mu: float,
                    it: int) -> None:
        """Offer the point with the smoothing band moved onto the kinks (:meth:`band_shift`)."""
        moved = self.band_shift(beta, b, mu, 0.0)
        if moved is None:
            return
        nb, bb = moved
        z = self.bank.expand(nb) + (bb if self.bias else 0.0)
        norms = _segment_norms(nb, self.f.starts)
        P = common.loss_value(self.loss, self.y, z, self.sl.w) + common.regularizer_value(
            self.reg, norms, self.C)
        inc.offer_primal(P, it, beta=nb, bias=bb, norms=norms)

    def predict(self, beta: np.ndarray, b: float, mu: float, mu_new: float
                ) -> tuple[np.ndarray, float, np.ndarray]:
        """The start for the smoothing ``mu_new``: the predictor of :meth:`band_shift` when it
        lowers the smoothed objective, else the point itself; with its predictions."""
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        moved = self.band_shift(beta, b, mu, mu_new / mu)
        if moved is None:
            return beta, b, z
        nb, bb = moved
        zn = self.bank.expand(nb) + (bb if self.bias else 0.0)

        def smoothed(bt: np.ndarray, zt: np.ndarray) -> float:
            v, _ = self.loss_terms(zt, mu_new, value=True)
            return float(np.sum(v)) + common.regularizer_value(
                self.reg, _segment_norms(bt, self.f.starts), self.C)

        if smoothed(nb, zn) < smoothed(beta, z):
            return nb, bb, zn
        return beta, b, z

    def next_mu(self, mu: float, cert: dict[str, Any], tol: float) -> float:
        r"""The next smoothing: smaller once the smoothed problem is solved to within its
        smoothing error :math:`E = P - P_\mu + \tfrac\mu2\|\rho\|^2` (module docstring)."""
        err = cert["smoothing_error"]
        if not (cert["gap_smoothed"] <= err and err > 0.0):
            return mu
        target = 0.5 * tol * abs(cert["P"]) / err
        return mu * max(float(self.engine.mu_factor), min(target, 1.0))


class _Support:
    """The non-zero blocks as one dense factor ``LA`` (rows ``rows`` of :math:`L^\\top`)."""

    def __init__(self, run: _BcdRun, blocks: np.ndarray, rows: np.ndarray, LA: np.ndarray,
                 seg: np.ndarray, offset: np.ndarray | None = None) -> None:
        self.run = run
        self.blocks = blocks
        self.rows = rows
        self.LA = LA
        self.seg = seg
        self.offset = offset

    def terms(self, z: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values, derivatives and curvatures of the loss in use at ``z``."""
        run = self.run
        return run.kb.eval_loss(run.kind, run.y, common.as_vector(z), run.lp, mu, run.lo,
                                run.hi, run.sw, *run.fns, True, True)

    def state(self, beta: np.ndarray, b: float, mu: float) -> tuple:
        """The support's blocks of ``beta`` (a copy), the predictions, and :meth:`objective`
        there: where the Newton steps of :meth:`_BcdRun.polish` start."""
        bA = beta[self.rows].copy()
        z = self.predictions(bA, b)
        return (bA, z, *self.objective(bA, z, mu))

    def predictions(self, bA: np.ndarray, b: float) -> np.ndarray:
        r""":math:`L_A^\top\beta_A + b` plus the held blocks' predictions."""
        z = self.direction(bA, b)
        return z if self.offset is None else z + self.offset

    def direction(self, dA: np.ndarray, db: float) -> np.ndarray:
        r"""The change of the predictions along a step: :math:`L_A^\top d_A + d_b`."""
        return self.LA.T @ dA + (db if self.run.bias else 0.0)

    def crossing(self, bA: np.ndarray, step: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Per block: does the full step take its norm, to first order, through zero?"""
        radial = np.add.reduceat(bA * step[:bA.size], self.seg[:-1]) / x
        return x + radial <= 0.0

    def objective(self, bA: np.ndarray, z: np.ndarray, mu: float
                  ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Objective in use, derivatives, curvatures and block norms at ``bA`` with
        predictions ``z`` (:meth:`predictions`)."""
        run = self.run
        v, u, h = self.terms(z, mu)
        x = _segment_norms(bA, self.seg)
        val = float(np.sum(v)) + common.regularizer_value(run.reg, x, run.C)
        return val, u, h, x

    def newton_step(self, bA: np.ndarray, u: np.ndarray, h: np.ndarray, x: np.ndarray
                    ) -> tuple[np.ndarray | None, float]:
        r"""The Newton direction of :meth:`_BcdRun.polish` and its slope.

        The Hessian on the non-zero blocks is
        :math:`A = D + L_A\,\mathrm{diag}(\ell'')L_A^\top` with the regularizer's
        part :math:`D` block-diagonal (:meth:`_BcdRun.polish`).  When the loss has
        curvature on few samples (a smoothed hinge: the samples of the smoothing
        band), far fewer than the total rank, the system is solved through them
        (:meth:`_band_solve`); otherwise the dense Hessian is formed and factored.
        """
        run = self.run
        nA = self.rows.size
        n = nA + int(run.bias)
        LA, seg = self.LA, self.seg
        g1, g2 = run.reg_derivatives(x)
        sizes = np.diff(seg)
        units = bA / np.repeat(x, sizes)                # the blocks' directions, stacked
        grad = np.empty(n)
        grad[:nA] = LA @ u + np.repeat(g1, sizes) * units
        if run.bias:
            grad[-1] = float(np.sum(u))
        if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(g1))
                and np.all(np.isfinite(g2)) and np.all(np.isfinite(h))):
            return None, 0.0
        band = np.flatnonzero(h > 0.0)
        width = band.size + seg.size - 1
        if width <= nA // 2 and nA * width * width <= POLISH_MAX_FLOPS:
            step = self._band_solve(units, h, x, g1, g2, grad, band)
        elif nA <= POLISH_MAX_RANK and hessian_flops(LA, band) + nA ** 3 / 3.0 <= POLISH_MAX_FLOPS:
            step = self._dense_solve(units, h, x, g1, g2, grad, band)
        else:
            step = None
        if step is None or not np.all(np.isfinite(step)):
            return None, 0.0
        return step, float(grad @ step)

    def _dense_solve(self, units: np.ndarray, h: np.ndarray, x: np.ndarray, g1: np.ndarray,
                     g2: np.ndarray, grad: np.ndarray, band: np.ndarray) -> np.ndarray | None:
        """The Newton direction from the dense Hessian (Cholesky, else its pseudo-inverse);
        ``units``: each block divided by its norm."""
        run = self.run
        nA = self.rows.size
        n = grad.size
        LA, seg = self.LA, self.seg
        H = np.zeros((n, n))
        LB = LA[:, band] if band.size < LA.shape[1] else LA
        if sp.issparse(LB):
            H[:nA, :nA] = (LB @ sp.diags(h[band]) @ LB.T).toarray()
        else:
            H[:nA, :nA] = (LB * h[band]) @ LB.T
        for k in range(seg.size - 1):
            s, e = seg[k], seg[k + 1]
            bh = units[s:e]
            c = g1[k] / x[k]
            H[s:e, s:e] += c * np.eye(e - s) + (g2[k] - c) * np.outer(bh, bh)
        if run.bias:
            cross = LA @ h
            H[:-1, -1] = cross
            H[-1, :-1] = cross
            H[-1, -1] = float(np.sum(h))
        if not np.all(np.isfinite(H)):
            return None
        H = 0.5 * (H + H.T)
        top = float(np.max(np.diag(H))) if n else 0.0
        if not top > 0.0:
            return None
        try:
            factor = sla.cho_factor(H + (1e-12 * top) * np.eye(n), check_finite=False)
            return -sla.cho_solve(factor, grad, check_finite=False)
        except np.linalg.LinAlgError:
            # not positive definite: the pseudo-inverse (directions of no curvature are
            # left to coordinate descent)
            w, V = np.linalg.eigh(H)
            keep = w > 1e-13 * max(float(w[-1]), 0.0)
            if not np.any(keep):
                return None
            return -(V[:, keep] @ ((V[:, keep].T @ grad) / w[keep]))

    def _band_solve(self, units: np.ndarray, h: np.ndarray, x: np.ndarray, g1: np.ndarray,
                    g2: np.ndarray, grad: np.ndarray, band: np.ndarray) -> np.ndarray | None:
        r"""The Newton direction through the samples with curvature (Woodbury).

        Per block :math:`k` the regularizer's Hessian is
        :math:`c_kI + (\tilde g''_k - c_k)\hat\beta_k\hat\beta_k^\top` with
        :math:`c_k = \tilde g'_k/x_k > 0`, so
        :math:`A = D_c + ZSZ^\top`: :math:`D_c = \mathrm{diag}(c_k I)`,
        :math:`Z = [L_A[:, \mathcal B],\ \hat B]` (the band's columns and one
        column :math:`\hat\beta_k` per block), :math:`S = \mathrm{diag}(\ell''_{\mathcal B},
        \tilde g''_k - c_k)`.  Then :math:`A^{-1} = D_c^{-1} - D_c^{-1}Z(S^{-1} +
        Z^\top D_c^{-1}Z)^{-1}Z^\top D_c^{-1}`: one system of the size of the band
        plus the number of blocks, :math:`O(r_A(|\mathcal B| + K)^2)` instead of
        :math:`O(r_A^2N + r_A^3)`.  The bias is eliminated by its Schur complement.
        """
        run = self.run
        nA = self.rows.size
        LA, seg = self.LA, self.seg
        cinv = np.repeat(x / g1, np.diff(seg))         # D_c^{-1}, diagonal
        if not (np.all(np.isfinite(cinv)) and np.all(cinv > 0.0)):
            return None
        radial = g2 - g1 / x
        keep = np.flatnonzero(radial != 0.0)
        if band.size + keep.size == 0:
            return None
        Bh = np.zeros((nA, keep.size))
        for j, k in enumerate(keep):
            s, e = seg[k], seg[k + 1]
            Bh[s:e, j] = units[s:e]
        LB = LA[:, band]
        Z = np.hstack([LB.toarray() if sp.issparse(LB) else LB, Bh])
        Sinv = np.concatenate([1.0 / h[band], 1.0 / radial[keep]])
        CZ = cinv[:, None] * Z
        T = Z.T @ CZ
        T[np.diag_indices_from(T)] += Sinv
        rhs = [grad[:nA]]
        if run.bias:
            rhs.append(LA @ h)                          # the bias column of the Hessian
        R = np.column_stack(rhs)
        CR = cinv[:, None] * R
        try:
            W = np.linalg.solve(T, Z.T @ CR)
        except np.linalg.LinAlgError:
            return None
        AinvR = CR - CZ @ W                            # A^{-1} [g, c]
        step = np.empty(grad.size)
        if not run.bias:
            step[:] = -AinvR[:, 0]
            return step
        c = R[:, 1]
        schur = float(np.sum(h)) - float(c @ AinvR[:, 1])
        q = 0.0
        if schur > 1e-12 * max(float(np.sum(h)), 1e-300):
            q = (-grad[-1] + float(c @ AinvR[:, 0])) / schur
        step[:nA] = -AinvR[:, 0] - q * AinvR[:, 1]
        step[-1] = q
        return step


BCD_ENGINES = (BCD,)
