r"""Reference optima of the SMO-MKL duals with cvxpy + Clarabel.

Independent of the engine: the duals are written here directly as convex
programs (paper scale, box :math:`[0, C_p]`).  Each Gram matrix is factored,
:math:`K_k \approx L_kL_k^\top` (eigendecomposition), so that
:math:`\gamma^\top K_k\gamma = \|L_k^\top\gamma\|^2` is a ``sum_squares``.

* p-norm, classification, SMO-MKL eq. (9) with :math:`q = p/(p-1)`:

  .. math::
      \max_\alpha\ 1^\top\alpha - \frac1{8\lambda}\big\|(t_k)_k\big\|_q^2,\quad
      t_k = \|L_k^\top(y\circ\alpha)\|^2,\quad 0\le\alpha\le C_p,\ y^\top\alpha = 0.

  ``square(pnorm(t, q))`` of the non-negative convex ``t_k`` is DCP (pnorm is
  increasing on the non-negative orthant, the square on its range); Clarabel
  handles the power cones.
* p-norm, ε-regression, eq. (27): :math:`\max\ y^\top\alpha - \varepsilon\|\alpha\|_1
  - \frac1{8\lambda}\|(t_k)\|_q^2` with :math:`t_k = \|L_k^\top\alpha\|^2`,
  :math:`|\alpha|\le C_p`, :math:`1^\top\alpha = 0`.
* KL (Bregman form with :math:`F(d) = d(\log d - 1)`), eq. (23):
  :math:`\max\ 1^\top\alpha - \lambda d_0\sum_k(e^{t_k/(2\lambda)} - 1)` (exponential cones).

The primal of the p-norm problem in mklkit's scale,
:math:`\sum_i\ell(y_i, f_i + b) + C\tfrac34(2\lambda)^{1/3}\|x\|_s^{4/3}` with block
norms :math:`x_k` and :math:`s = 2p/(p+1)`, is :func:`pnorm_primal` (plain numpy).
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np

__all__ = ["factor", "dual_pnorm", "dual_kl", "pnorm_primal", "kl_primal"]


def factor(K: np.ndarray, eig_tol: float = 1e-12) -> list[np.ndarray]:
    """Factors L_k (N, r_k) with K_k = L_k L_k^T up to eigenvalues below eig_tol * max."""
    out = []
    for Km in np.asarray(K, dtype=np.float64):
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        keep = w > eig_tol * max(float(w[-1]), 0.0)
        out.append(V[:, keep] * np.sqrt(w[keep]))
    return out


def _solve(prob: cp.Problem) -> None:
    """Solve with the tightest of a few tolerances at which Clarabel reports 'optimal'."""
    status = None
    for tol in (1e-9, 1e-8, 1e-7):
        try:
            with warnings.catch_warnings():  # an inaccurate attempt is retried, not used
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                prob.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol, max_iter=500)
        except cp.error.SolverError as exc:
            status = f"failed ({exc})"
            continue
        status = prob.status
        if status == cp.OPTIMAL:
            return
    raise RuntimeError(f"Clarabel status {status!r}")


def dual_pnorm(
    K: np.ndarray, y: np.ndarray, p: float, lam: float, C_paper: float, task: str = "classification", eps: float = 0.0
) -> tuple[float, np.ndarray]:
    r"""Optimal value and alpha of the SMO-MKL p-norm dual (paper scale).

    Solved in :math:`\beta = \alpha/C_p \in [0, 1]` (better conditioned for
    Clarabel), i.e. :math:`\max\ C_p(\mathrm{lin}(\beta) - C_p^3\|t(\beta)\|_q^2/(8\lambda))`.
    """
    q = p / (p - 1.0)
    Ls = factor(K)
    N = y.shape[0]
    b = cp.Variable(N)
    if task == "classification":
        g = cp.multiply(y, b)
        lin = cp.sum(b)
        cons = [b >= 0, b <= 1, y @ b == 0]
    else:
        g = b
        lin = y @ b - eps * cp.norm1(b)
        cons = [b >= -1, b <= 1, cp.sum(b) == 0]
    t = cp.hstack([cp.sum_squares(L.T @ g) for L in Ls])
    obj = lin - C_paper**3 * cp.square(cp.pnorm(t, q, approx=False)) / (8.0 * lam)
    prob = cp.Problem(cp.Maximize(obj), cons)
    _solve(prob)
    return C_paper * float(prob.value), C_paper * np.asarray(b.value)


def dual_kl(K: np.ndarray, y: np.ndarray, d0: float, lam: float, C_paper: float) -> float:
    """Optimal value of the KL dual (23) for classification (paper scale)."""
    Ls = factor(K)
    N = y.shape[0]
    a = cp.Variable(N)
    g = cp.multiply(y, a)
    t = cp.hstack([cp.sum_squares(L.T @ g) for L in Ls])
    obj = cp.sum(a) - lam * d0 * cp.sum(cp.exp(t / (2.0 * lam)) - 1.0)
    prob = cp.Problem(cp.Maximize(obj), [a >= 0, a <= C_paper, y @ a == 0])
    _solve(prob)
    return float(prob.value)


def _loss(y: np.ndarray, z: np.ndarray, kind: str, eps: float) -> float:
    if kind == "classification":
        return float(np.sum(np.maximum(0.0, 1.0 - y * z)))
    return float(np.sum(np.maximum(0.0, np.abs(y - z) - eps)))


def pnorm_primal(
    K: np.ndarray,
    y: np.ndarray,
    alpha: np.ndarray,
    b: float,
    p: float,
    lam: float,
    C: float,
    task: str = "classification",
    eps: float = 0.0,
) -> float:
    """mklkit-scale primal of a p-norm solution given its blocks ``alpha`` (M, N) and bias."""
    z = np.einsum("mij,mj->i", K, alpha) + b
    x = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))
    s = 2.0 * p / (p + 1.0)
    reg = 0.75 * (2.0 * lam) ** (1.0 / 3.0) * np.sum(x**s) ** (4.0 / (3.0 * s))
    return _loss(y, z, task, eps) + C * reg


def kl_primal(K: np.ndarray, y: np.ndarray, alpha: np.ndarray, b: float, d0: float, C: float) -> float:
    r"""mklkit-scale primal with the KL regularizer, :math:`g(t) = \min_d t/(2d) + h(d)/2`.

    The minimum over each weight is found numerically (bounded scalar search),
    independently of the engine and of the core's Lambert-W formula.
    """
    from scipy.optimize import minimize_scalar

    z = np.einsum("mij,mj->i", K, alpha) + b
    x2 = np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0)
    reg = 0.0
    for t in x2:

        def obj(logd: float, t: float = t) -> float:
            d = d0 * np.exp(logd)
            return t / (2.0 * d) + 0.5 * (d * np.log(d / d0) - d + d0)

        r = minimize_scalar(obj, bounds=(-30.0, 30.0), method="bounded", options={"xatol": 1e-12})
        reg += min(float(r.fun), obj(0.0))
    return _loss(y, z, "classification", 0.0) + C * reg
