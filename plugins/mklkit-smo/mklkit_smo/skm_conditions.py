"""The optimality conditions of the support kernel machine (Bach, Lanckriet & Jordan
2004, §3.3: (OPT3)) and the sparsity LP of §3.4."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["opt3", "sparsify_weights"]


def _pair_sets(alpha: np.ndarray, y: np.ndarray, U: float) -> tuple[np.ndarray, np.ndarray]:
    """Keerthi et al.'s index sets: ``up`` = I_M u I_0- u I_C+ ... as masks on S = y - F.

    In terms of the scores :math:`S_i = y_i - F_i` the conditions read
    :math:`\\max_{up} S \\le \\min_{low} S + 2\\varepsilon_2`; ``up`` holds the
    points whose :math:`\\alpha_i y_i` may increase, ``low`` those whose may decrease.
    """
    up = np.where(y > 0, alpha < U, alpha > 0)
    low = np.where(y > 0, alpha > 0, alpha < U)
    return up, low


def opt3(
    v: np.ndarray, c: np.ndarray, alpha: np.ndarray, y: np.ndarray, U: float, eta: np.ndarray, d: np.ndarray
) -> tuple[float, float]:
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


def _lp_weights(
    v: np.ndarray, alpha: np.ndarray, y: np.ndarray, U: float, d: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray | None, float]:
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
    A_ub = np.vstack(
        [
            np.hstack([-V[up], np.ones((nu, 1)), -np.ones((nu, 1))]),
            np.hstack([V[low], -np.ones((nl, 1)), -np.ones((nl, 1))]),
        ]
    )
    b_ub = np.concatenate([-y[up], y[low]])
    A_eq = np.concatenate([d[idx] ** 2, [0.0, 0.0]])[None, :]
    cost = np.zeros(idx.size + 2)
    cost[-1] = 1.0
    bounds = [(0.0, None)] * idx.size + [(None, None), (0.0, None)]
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=bounds, method="highs")
    if res.status != 0:
        return None, math.inf
    eta = np.zeros(v.shape[0])
    eta[idx] = np.maximum(res.x[: idx.size], 0.0)
    return eta, float(res.x[-1])


def sparsify_weights(
    v: np.ndarray,
    c: np.ndarray,
    alpha: np.ndarray,
    y: np.ndarray,
    U: float,
    eta: np.ndarray,
    d: np.ndarray,
    eps1: float,
    eps2: float,
) -> np.ndarray:
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
