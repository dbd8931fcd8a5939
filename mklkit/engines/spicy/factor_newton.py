r"""SpicyMKL's Newton systems on a factor bank, without an N × N matrix.

On a :class:`~mklkit.kernels.factor.FactorBank` (:math:`K_m = L_mL_m^\top`,
:math:`L_m \in \mathbb{R}^{N\times r_m}`) the generalized Hessians of both
methods (one-step: eq. 50; iterative: eq. 27 summed over the active kernels)
have the form

.. math::
    H = D + \omega\,\mathbf 1\mathbf 1^\top + \sum_{p} \big(s_pK_{m_p} + t_p r_pr_p^\top\big),
    \qquad r_p = K_{m_p}v_p,

with a positive diagonal :math:`D` (the loss part plus the ridge), the bias
term :math:`\omega = \gamma_b` of the iterative method (0 otherwise) and, for
each active kernel, the vector :math:`v_p` whose block norm the regularizer
part differentiates (:math:`\rho` in the one-step method,
:math:`\alpha_m + \gamma\rho` in the iterative method).  Since
:math:`r_p = L_m\beta_p` with :math:`\beta_p = L_m^\top v_p`, each term is
:math:`L_mW_pL_m^\top` with the :math:`r_m\times r_m` matrix
:math:`W_p = s_pI + t_p\beta_p\beta_p^\top`, whose eigenvalues are
:math:`s_p` and :math:`s_p + t_p\|\beta_p\|^2` (the envelope's or the
conjugate's second derivative, :math:`\ge 0`).  With the square root
:math:`W_p^{1/2} = \sqrt{s_p}\,I + (\sqrt{\lambda_p} - \sqrt{s_p})\hat\beta_p\hat\beta_p^\top`
the Hessian is

.. math::
    H = D + VV^\top,\qquad V = \big[L_{m_1}W_1^{1/2}, \dots, L_{m_P}W_P^{1/2},
        \sqrt\omega\,\mathbf 1\big] \in \mathbb{R}^{N\times R'},

:math:`R' = R_{act} (+1)`, :math:`R_{act} = \sum_p r_{m_p}`, and is applied to a
vector in :math:`O(NR')` (:meth:`LowRankHessian.matvec`).  Two solvers:

* **Woodbury** (``"woodbury"``): with :math:`\tilde V = D^{-1/2}V`,
  :math:`H^{-1} = D^{-1/2}\big(I - \tilde V(I + \tilde V^\top\tilde V)^{-1}
  \tilde V^\top\big)D^{-1/2}`; one :math:`R'\times R'` Cholesky factorization
  (always positive definite), :math:`O(NR'^2 + R'^3)`.  Each solve is
  followed by up to :data:`REFINE_STEPS` steps of iterative refinement
  against the factored product (the Woodbury formula loses accuracy when
  :math:`D` is small against :math:`VV^\top`).
* **Preconditioned conjugate gradients** (``"cg"``) with the preconditioner
  :math:`D`: the preconditioned matrix :math:`I + \tilde V\tilde V^\top` has
  at most :math:`R' + 1` distinct eigenvalues, all :math:`\ge 1` (on the
  hinge-loss problems of ``benchmarks/bench_factor_engines.py`` it needed a
  third of the iterations of the Jacobi preconditioner
  :math:`\mathrm{diag}(H)`); every product through the factors,
  :math:`O(NR')` per iteration, until the residual is :data:`CG_RTOL` times
  the right-hand side.  With the equality
  constraint :math:`\mathbf 1^\top\Delta = 0` of the one-step method it is
  the projected PCG (Gould, Hribar & Nocedal 2001): the preconditioned
  residual is projected onto :math:`\mathbf 1^\perp` in the metric of the
  preconditioner, the iterates stay feasible and the multiplier is the
  weighted mean of the final residual.

The choice (:func:`choose_solver`) is an explicit cost estimate:
Woodbury costs about :math:`NR'^2 + R'^3/3` multiply-adds in BLAS-3 (dense
matrix products, :data:`BLAS3_SPEEDUP` times faster per operation than
the memory-bound matrix-vector products of CG), CG about
:data:`CG_ITERATIONS` iterations of :math:`2NR'` multiply-adds each.
Woodbury is used when :math:`R' \le N/2` and

.. math::
    \frac{NR'^2 + R'^3/3}{\mathtt{BLAS3\_SPEEDUP}} \le \mathtt{CG\_ITERATIONS}\cdot 2NR',

i.e. up to :math:`R' \approx 1600` for large N with the defaults; CG otherwise.
:data:`SOLVER` forces one (``"woodbury"`` or ``"cg"``; default ``"auto"``).
Nothing here forms an N × N array.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ...kernels.factor import FactorBank

__all__ = ["LowRankHessian", "choose_solver", "SOLVER", "CG_ITERATIONS", "BLAS3_SPEEDUP", "CG_RTOL", "REFINE_STEPS"]

#: ``"auto"`` (:func:`choose_solver`), ``"woodbury"`` or ``"cg"``.
SOLVER = "auto"

#: Iterations of preconditioned CG assumed by the cost estimate.
CG_ITERATIONS = 50

#: How much faster a multiply-add runs in a dense matrix product (BLAS 3)
#: than in a matrix-vector product (BLAS 2, memory-bound), in the cost estimate.
BLAS3_SPEEDUP = 8.0

#: Relative residual at which CG stops (``||H x - b|| <= CG_RTOL ||b||``).
CG_RTOL = 1e-10

#: Most steps of iterative refinement after a Woodbury solve.
REFINE_STEPS = 3

#: Relative residual below which a Woodbury solve is not refined.
REFINE_RTOL = 1e-12


def choose_solver(N: int, R: int) -> str:
    r"""``"woodbury"`` or ``"cg"`` for a system of order ``N`` with a rank-``R`` part
    (the cost estimate of the module docstring; :data:`SOLVER` overrides it)."""
    if SOLVER != "auto":
        return SOLVER
    if R == 0:
        return "woodbury"
    woodbury = (N * R * R + R**3 / 3.0) / BLAS3_SPEEDUP
    cg = CG_ITERATIONS * 2.0 * N * R
    return "woodbury" if (2 * R <= N and woodbury <= cg) else "cg"


def _rows(bank: FactorBank, m: int) -> np.ndarray:
    """:math:`L_m^\\top` (r_m, N) as a dense array."""
    B = bank.block(int(m))
    return B.toarray() if sp.issparse(B) else np.asarray(B)


class LowRankHessian:
    r""":math:`H = \mathrm{diag}(d) + VV^\top` for SpicyMKL's Newton systems on a factor bank.

    Parameters
    ----------
    bank : FactorBank
    d : ndarray (N,)
        The diagonal :math:`D` before any ridge (loss part), :math:`\ge 0`.
    idx : ndarray (P,) of int
        Active kernels.
    s, t : ndarray (P,)
        Weights of :math:`K_{m_p}` and of :math:`r_pr_p^\top` (SpicyMKL eqs. 27, 50).
    vecs : ndarray (P, N)
        :math:`v_p` with :math:`r_p = K_{m_p}v_p`.
    ones_weight : float
        :math:`\omega` of the term :math:`\omega\mathbf 1\mathbf 1^\top` (0: none).
    """

    def __init__(
        self,
        bank: FactorBank,
        d: np.ndarray,
        idx: np.ndarray,
        s: np.ndarray,
        t: np.ndarray,
        vecs: np.ndarray,
        ones_weight: float = 0.0,
    ) -> None:
        N = bank.n_samples
        self.d = np.asarray(d, dtype=np.float64)
        cols = []
        for p, m in enumerate(np.asarray(idx, dtype=np.int64)):
            sp_, tp = float(s[p]), float(t[p])
            if bank.starts[m + 1] == bank.starts[m] or (sp_ == 0.0 and tp == 0.0):
                continue
            LT = _rows(bank, m)  # (r, N)
            beta = LT @ vecs[p]
            b2 = float(beta @ beta)
            lam = max(sp_ + tp * b2, 0.0)  # eigenvalue along beta
            rs = math.sqrt(max(sp_, 0.0))
            if rs == 0.0:
                if b2 > 0.0 and lam > 0.0:  # rank one: sqrt(t) r
                    cols.append((math.sqrt(lam / b2) * (beta @ LT))[:, None])
                continue
            block = rs * LT.T  # (N, r), a scaled copy
            if b2 > 0.0 and lam != sp_:
                bh = beta / math.sqrt(b2)
                block += np.outer((math.sqrt(lam) - rs) * (bh @ LT), bh)
            cols.append(block)
        if ones_weight > 0.0:
            cols.append(np.full((N, 1), math.sqrt(ones_weight)))
        self.V = np.hstack(cols) if cols else np.zeros((N, 0))
        self.V = np.ascontiguousarray(self.V)
        self.diag = self.d + np.einsum("nk,nk->n", self.V, self.V)
        self.rank = int(self.V.shape[1])
        self.solver = choose_solver(N, self.rank)

    @property
    def finite(self) -> bool:
        """Whether the diagonal and the factor are finite."""
        return bool(np.all(np.isfinite(self.d)) and np.all(np.isfinite(self.V)))

    def matvec(self, x: np.ndarray, ridge: np.ndarray | None = None) -> np.ndarray:
        r""":math:`(H + \mathrm{diag}(\mathrm{ridge}))\,x` for ``x`` (N,) or (N, k), :math:`O(NR')`."""
        dd = self.d if ridge is None else self.d + ridge
        if x.ndim == 1:
            return dd * x + self.V @ (self.V.T @ x)
        return dd[:, None] * x + self.V @ (self.V.T @ x)

    # -- solvers ---------------------------------------------------------------
    def solve(self, rhs: np.ndarray, ridge: np.ndarray) -> np.ndarray | None:
        r""":math:`(H + \mathrm{diag}(\mathrm{ridge}))^{-1}` rhs, rhs (N,) or (N, k), by the
        chosen solver; ``None`` when it gives a non-finite result."""
        if self.solver == "woodbury":
            x = self._woodbury(rhs, ridge)
        else:
            cols = rhs[:, None] if rhs.ndim == 1 else rhs
            x = np.column_stack([self._pcg(cols[:, j], ridge, None)[0] for j in range(cols.shape[1])])
            x = x[:, 0] if rhs.ndim == 1 else x
        return x if np.all(np.isfinite(x)) else None

    def solve_constrained(self, g: np.ndarray, ridge: np.ndarray) -> tuple[np.ndarray, float] | None:
        r"""The KKT system :math:`H\Delta + \nu\mathbf 1 = -g`, :math:`\mathbf 1^\top\Delta = 0`;
        ``(Delta, nu)`` or ``None`` (non-finite)."""
        if self.solver == "woodbury":
            x = self._woodbury(np.column_stack([-g, np.ones(g.size)]), ridge)
            if x is None or not np.all(np.isfinite(x)):
                return None
            den = float(np.sum(x[:, 1]))
            if not den > 0.0:
                return None
            nu = float(np.sum(x[:, 0])) / den
            return x[:, 0] - nu * x[:, 1], nu
        x, nu = self._pcg(-g, ridge, np.ones(g.size))
        if not (np.all(np.isfinite(x)) and math.isfinite(nu)):
            return None
        return x, nu

    def _woodbury(self, rhs: np.ndarray, ridge: np.ndarray) -> np.ndarray | None:
        dd = self.d + ridge
        if not np.all(dd > 0.0):
            return None
        isd = 1.0 / np.sqrt(dd)
        Vt = self.V * isd[:, None]
        G = Vt.T @ Vt
        G[np.diag_indices_from(G)] += 1.0
        try:
            cf = scipy.linalg.cho_factor(G, lower=True, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return None
        col = isd if rhs.ndim == 1 else isd[:, None]

        def apply(b: np.ndarray) -> np.ndarray:
            bt = b * col
            if self.rank:
                bt = bt - Vt @ scipy.linalg.cho_solve(cf, Vt.T @ bt, check_finite=False)
            return bt * col

        x = apply(rhs)
        bnorm = float(np.linalg.norm(rhs))
        for _ in range(REFINE_STEPS):
            res = rhs - self.matvec(x, ridge)
            if not float(np.linalg.norm(res)) > REFINE_RTOL * bnorm:
                break
            x = x + apply(res)
        return x

    def _pcg(self, b: np.ndarray, ridge: np.ndarray, constraint: np.ndarray | None) -> tuple[np.ndarray, float]:
        r"""(Projected) CG from 0 preconditioned by the diagonal :math:`D` (+ ridge); returns
        ``x`` and the multiplier of :math:`c^\top x = 0` (``nan`` without a constraint ``c``).

        The preconditioned matrix :math:`I + \tilde V\tilde V^\top` has at most
        :math:`R' + 1` distinct eigenvalues, so CG ends in at most :math:`R' + 1`
        iterations in exact arithmetic (fewer when the spectrum of the factors
        decays); twice that plus 50 bounds it under rounding.
        """
        N = b.size
        pinv = 1.0 / np.maximum(self.d + ridge, 1e-300)
        pc = None if constraint is None else pinv * constraint
        cpc = 0.0 if constraint is None else float(constraint @ pc)
        nu = 0.0

        def reset(r: np.ndarray) -> float:
            # the residual's component along c in the metric of the preconditioner
            # moves into the multiplier (residual resetting, Gould, Hribar & Nocedal
            # 2001, §6), so that the projected residual is not a small difference of
            # large terms
            return 0.0 if pc is None else float(pc @ r) / cpc

        x = np.zeros(N)
        r = b.copy()
        shift = reset(r)
        if shift:
            r -= shift * constraint
            nu += shift
        z = pinv * r
        p = z.copy()
        rz = float(r @ z)
        target = CG_RTOL * float(np.linalg.norm(b))
        for _ in range(2 * (self.rank + 1) + 50):
            if float(np.linalg.norm(r)) <= target or not rz > 0.0:
                break
            Hp = self.matvec(p, ridge)
            pHp = float(p @ Hp)
            if not pHp > 0.0:
                break
            a = rz / pHp
            x += a * p
            r -= a * Hp
            shift = reset(r)
            if shift:
                r -= shift * constraint
                nu += shift
            z = pinv * r
            rz_new = float(r @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        # now r = b - H x - nu c
        return x, (nu if constraint is not None else math.nan)


def is_factored(bank: object) -> bool:
    """Whether the Newton systems on ``bank`` go through :class:`LowRankHessian`."""
    return isinstance(bank, FactorBank)


def newton_direction(
    H: LowRankHessian, g: np.ndarray, bias: bool, ridge: np.ndarray | None = None
) -> tuple[np.ndarray, float, str]:
    r"""A Newton direction from :math:`H + \mathrm{diag}(\mathrm{ridge})`.

    The one-step method (``ridge=None``, ``bias`` adds :math:`\mathbf 1^\top\Delta = 0`)
    mirrors :func:`~mklkit.engines.spicy.start._newton_direction`: no ridge
    first, then :math:`\tau I` growing from :math:`10^{-12}\max_i H_{ii}` when
    the solve fails (a zero of the diagonal :math:`D`).  The iterative method
    passes its Levenberg–Marquardt ridge, which grows a hundredfold on failure, at
    least to :math:`10^{-12}H_{ii}` on each coordinate
    (:func:`~mklkit.engines.spicy.inner.levenberg_marquardt_direction`).
    The last resort is the (projected) steepest-descent direction.

    Returns
    -------
    delta : ndarray (N,)
    nu : float
        Multiplier of :math:`\mathbf 1^\top\Delta = 0` (``nan`` without it).
    method : str
        ``"woodbury"`` or ``"cg"``, with ``"+ridge"`` when a ridge had to grow;
        ``"gradient"`` for the last resort.
    """
    N = g.size
    diag = np.abs(H.diag)
    scale = max(float(np.max(diag)) if N else 0.0, 1e-300)
    # the Levenberg-Marquardt ridge grows from each coordinate's own diagonal entry
    floor = np.where(diag > 0.0, diag, scale)
    lm = ridge is not None
    mu = np.zeros(N) if ridge is None else np.asarray(ridge, dtype=np.float64)
    for k in range(8 if lm else 6):
        if k > 0:
            mu = np.maximum(mu * 100.0, 1e-12 * floor) if lm else np.full(N, scale * 1e-12 * 100.0 ** (k - 1))
        method = H.solver if k == 0 else H.solver + "+ridge"
        if bias and not lm:
            out = H.solve_constrained(g, mu)
            if out is not None:
                return out[0], out[1], method
            continue
        x = H.solve(-g, mu)
        if x is not None:
            return x, math.nan, method
    if bias and not lm:
        return -(g - np.mean(g)) / scale, math.nan, "gradient"
    return -g / scale, math.nan, "gradient"
