r"""SpicyMKL's Newton systems on a factor bank without an N × N matrix: the Hessian is
:math:`D + VV^\top` (:class:`LowRankHessian`) and is solved by Woodbury with iterative refinement
or by (projected, Gould, Hribar & Nocedal 2001) CG preconditioned by :math:`D`, chosen by a cost
estimate (:func:`choose_solver`); ``docs/factor_banks.md`` ("The engines on a factor bank").
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ...kernels.factor import FactorBank

#: ``"auto"`` (:func:`choose_solver`), ``"woodbury"`` or ``"cg"``.
SOLVER = "auto"
#: The cost estimate: CG iterations, and how much faster a multiply-add runs in BLAS 3 than in
#: the memory-bound BLAS 2 of CG.
CG_ITERATIONS = 50
BLAS3_SPEEDUP = 8.0
#: Relative residual at which CG stops; refinement steps after a Woodbury solve, and the
#: relative residual below which there are none.
CG_RTOL = 1e-10
REFINE_STEPS = 3
REFINE_RTOL = 1e-12


def choose_solver(N: int, R: int) -> str:
    """``"woodbury"`` or ``"cg"`` for order ``N`` and rank ``R`` (:data:`SOLVER` overrides it)."""
    if SOLVER != "auto":
        return SOLVER
    if R == 0:
        return "woodbury"
    woodbury = (N * R * R + R**3 / 3.0) / BLAS3_SPEEDUP
    cg = CG_ITERATIONS * 2.0 * N * R
    return "woodbury" if (2 * R <= N and woodbury <= cg) else "cg"


class LowRankHessian:
    r""":math:`H = \mathrm{diag}(d) + VV^\top` of :math:`D + \omega\mathbf 1\mathbf 1^\top +
    \sum_p s_pK_{m_p} + t_pr_pr_p^\top`, :math:`r_p = K_{m_p}v_p` (eqs. 27, 50) over the kernels
    ``idx`` with ``vecs[p]`` :math:`= v_p`."""

    def __init__(self, bank: FactorBank, d, idx, s, t, vecs, ones_weight: float = 0.0) -> None:
        N = bank.n_samples
        self.d = np.asarray(d, dtype=np.float64)
        cols = []
        for p, m in enumerate(np.asarray(idx, dtype=np.int64)):
            sp_, tp = float(s[p]), float(t[p])
            if bank.starts[m + 1] == bank.starts[m] or (sp_ == 0.0 and tp == 0.0):
                continue
            B = bank.block(int(m))
            LT = B.toarray() if sp.issparse(B) else np.asarray(B)  # (r, N)
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
        self.V = np.ascontiguousarray(np.hstack(cols) if cols else np.zeros((N, 0)))
        self.diag = self.d + np.einsum("nk,nk->n", self.V, self.V)
        self.rank = int(self.V.shape[1])
        self.solver = choose_solver(N, self.rank)

    @property
    def finite(self) -> bool:
        return bool(np.all(np.isfinite(self.d)) and np.all(np.isfinite(self.V)))

    def matvec(self, x: np.ndarray, ridge: np.ndarray | None = None) -> np.ndarray:
        r""":math:`(H + \mathrm{diag}(\mathrm{ridge}))\,x` for ``x`` (N,) or (N, k)."""
        dd = self.d if ridge is None else self.d + ridge
        return (dd if x.ndim == 1 else dd[:, None]) * x + self.V @ (self.V.T @ x)

    def solve(self, rhs: np.ndarray, ridge: np.ndarray) -> np.ndarray | None:
        r""":math:`(H + \mathrm{diag}(\mathrm{ridge}))^{-1}` rhs (N,); ``None`` if not finite."""
        x = self._woodbury(rhs, ridge) if self.solver == "woodbury" else self._pcg(rhs, ridge, None)[0]
        return x if np.all(np.isfinite(x)) else None

    def solve_constrained(self, g: np.ndarray, ridge: np.ndarray) -> tuple[np.ndarray, float] | None:
        r"""``(Delta, nu)`` of :math:`H\Delta + \nu\mathbf 1 = -g`, :math:`\mathbf 1^\top\Delta = 0`, or ``None``."""
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
        r"""``(x, nu)``: (projected) CG from 0 preconditioned by :math:`D` + ridge, ``nu`` the
        multiplier of :math:`c^\top x = 0` (``nan`` without ``constraint``); at most :math:`R' + 1`
        distinct eigenvalues, so ``2 (R' + 1) + 50`` iterations bound it under rounding."""
        N = b.size
        pinv = 1.0 / np.maximum(self.d + ridge, 1e-300)
        pc = None if constraint is None else pinv * constraint
        cpc = 0.0 if constraint is None else float(constraint @ pc)
        nu = 0.0

        def reset(r: np.ndarray) -> None:
            # residual resetting (Gould, Hribar & Nocedal 2001, §6): r's component along c moves
            # into the multiplier
            nonlocal nu
            shift = 0.0 if pc is None else float(pc @ r) / cpc
            if shift:
                r -= shift * constraint
                nu += shift

        x = np.zeros(N)
        r = b.copy()
        reset(r)
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
            reset(r)
            z = pinv * r
            rz_new = float(r @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return x, (nu if constraint is not None else math.nan)


def newton_direction(
    H: LowRankHessian, g: np.ndarray, bias: bool, ridge: np.ndarray | None = None
) -> tuple[np.ndarray, float, str]:
    r"""``(delta, nu, method)`` from :math:`H + \mathrm{diag}(\mathrm{ridge})`.  The one-step method
    (``ridge=None``; ``bias``: :math:`\mathbf 1^\top\Delta = 0`, ``nu`` its multiplier) adds a
    ridge growing from :math:`10^{-12}\max_i H_{ii}` when the solve fails; the iterative method's
    Levenberg–Marquardt ridge grows a hundredfold.  Last resort: steepest descent (``"gradient"``).
    """
    N = g.size
    diag = np.abs(H.diag)
    scale = max(float(np.max(diag)) if N else 0.0, 1e-300)
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
