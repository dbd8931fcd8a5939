r"""Reference solutions of the MKL primal with cvxpy + Clarabel (the ``test`` extra).

Independent of mklkit's component code: losses and regularizers are written
here directly as cvxpy expressions, by name; :func:`formulation` maps a
problem's components to them and checks the mapping against the component
kernels before it is trusted (the engine kit, :mod:`mklkit.testing.engines`,
uses it).  Importing this module imports cvxpy.  Each Gram matrix is factored,
:math:`K_m \approx L_m L_m^\top` (eigendecomposition, eigenvalues below
``eig_tol`` times the largest dropped), and the problem is solved in
:math:`\beta_m = L_m^\top\alpha_m`, for which :math:`K_m\alpha_m = L_m\beta_m`
and :math:`\|\alpha_m\|_{K_m} = \|\beta_m\|_2`:

.. math::
    \min_{\beta, b}\ \sum_i \ell\big(y_i, \textstyle\sum_m (L_m\beta_m)_i + b\big)
        + \sum_m \tilde g_C(\|\beta_m\|_2).

Losses: ``logistic`` :math:`\log(1+e^{-yz})`, ``squared`` :math:`(y-z)^2`,
``hinge`` :math:`\max(0, 1-yz)`, ``eps_insensitive`` :math:`\max(0, |y-z|-\varepsilon)`,
the two losses of the ``mklkit-huber`` example plugin, ``huber``
(:math:`\tfrac12 r^2` for :math:`|r| \le \delta`, :math:`\delta(|r| - \tfrac\delta2)` beyond)
and ``squared_hinge`` :math:`\tfrac12\max(0, 1-yz)^2`, and the test suite's
third-party ``pinball`` :math:`\tau(y-z)_+ + (1-\tau)(z-y)_+`.
Regularizers :math:`\tilde g_C(x)`: ``l1`` :math:`Cx`, ``elasticnet``
:math:`C((1-\lambda)x + \tfrac{\lambda}{2}x^2)`, ``lq`` :math:`\tfrac{C}{q}x^q`,
``uniform`` :math:`\tfrac{C}{2}x^2`, ``kl`` :math:`C\,g(x^2)` through its
Tikhonov form :math:`g(x^2) = \min_{d>0} \frac{x^2}{2d} + \frac12(d\log\frac d{d_0} - d + d_0)`
(``docs/kl_regularizer.md``; an exponential cone per kernel), and
``squared_l1`` :math:`\tfrac{C}{2}(\sum_m x_m)^2`, the squared block 1-norm of
SimpleMKL (SpicyMKL eq. 5), which is not separable over kernels, and
``weight_pnorm`` :math:`C\tfrac34(2\lambda)^{1/3}\|x\|_s^{4/3}`, :math:`s = 2p/(p+1)`,
the squared p-norm penalty of the kernel weights (SMO-MKL eq. 1;
:class:`~mklkit.components.base.WeightNorm`).

Clarabel is asked for gap and feasibility tolerances ``tol``; when it stops
at "optimal_inaccurate", the solve is repeated with 10x and 100x looser
tolerances (a few of these small, badly scaled problems need it).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from ..engines import common

__all__ = ["ReferenceSolution", "ReferenceError", "factor_bank", "solve_reference",
           "primal_objective_numpy", "formulation", "LOSSES", "REGULARIZERS"]

LOSSES = ("logistic", "squared", "hinge", "eps_insensitive", "huber", "squared_hinge", "pinball")
REGULARIZERS = ("l1", "elasticnet", "lq", "uniform", "kl", "squared_l1", "weight_pnorm")


class ReferenceError(RuntimeError):
    """Clarabel did not report an optimal solution."""


@dataclass(frozen=True)
class ReferenceSolution:
    """Solution of the reference problem.

    ``objective`` is Clarabel's optimal value; ``alpha`` (M, N) and ``bias``
    the primal solution mapped back from β; ``status`` Clarabel's status
    through cvxpy; ``ranks`` the factor ranks.
    """

    objective: float
    alpha: np.ndarray
    bias: float
    status: str
    ranks: tuple[int, ...]
    tol: float = 0.0

    def __iter__(self):
        # allows ``objective, alpha, b = solve_reference(...)``
        return iter((self.objective, self.alpha, self.bias))


def factor_bank(K: np.ndarray, eig_tol: float = 1e-10):
    r"""Factors :math:`K_m \approx L_m L_m^\top` and the maps back to α.

    Returns a list of ``(L, back)`` with ``L`` of shape (N, r_m) and
    ``back`` (N, r_m) such that :math:`\alpha_m = back\,\beta_m` satisfies
    :math:`L_m^\top\alpha_m = \beta_m`.
    """
    out = []
    for Km in np.asarray(K, dtype=np.float64):
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        keep = w > eig_tol * max(float(w[-1]), 0.0)
        if not np.any(keep):
            keep = w >= w[-1]
        w, V = w[keep], V[:, keep]
        sw = np.sqrt(w)
        out.append((V * sw, V / sw))
    return out


def _loss_expr(name: str, y: np.ndarray, z, eps: float | None, delta: float | None = None,
               tau: float | None = None, w: np.ndarray | None = None):
    """The loss :math:`\\sum_i w_i\\ell(y_i, z_i)` (``w`` None: all 1) as a cvxpy expression."""
    def total(terms):
        return cp.sum(terms) if w is None else cp.sum(cp.multiply(w, terms))

    if name == "logistic":
        return total(cp.logistic(-cp.multiply(y, z)))
    if name == "squared":
        return cp.sum_squares(y - z) if w is None else total(cp.square(y - z))
    if name == "hinge":
        return total(cp.pos(1 - cp.multiply(y, z)))
    if name == "eps_insensitive":
        if eps is None:
            raise ValueError("eps_insensitive needs eps")
        return total(cp.pos(cp.abs(y - z) - eps))
    if name == "huber":
        if delta is None:
            raise ValueError("huber needs delta")
        return 0.5 * total(cp.huber(z - y, delta))      # cvxpy's huber is twice ours
    if name == "squared_hinge":
        r = cp.pos(1 - cp.multiply(y, z))
        return 0.5 * (cp.sum_squares(r) if w is None else total(cp.square(r)))
    if name == "pinball":
        if tau is None:
            raise ValueError("pinball needs tau")
        return total(tau * cp.pos(y - z) + (1 - tau) * cp.pos(z - y))
    raise ValueError(f"unknown loss {name!r}; known: {', '.join(LOSSES)}")


def _reg_expr(name: str, norms, squares, C: float, lam: float | None, q: float | None,
              betas=None, d0: float | None = None, p: float | None = None):
    if name == "l1":
        return C * cp.sum(cp.hstack(norms))
    if name == "elasticnet":
        if lam is None:
            raise ValueError("elasticnet needs lam")
        return C * ((1 - lam) * cp.sum(cp.hstack(norms)) + lam / 2 * cp.sum(cp.hstack(squares)))
    if name == "lq":
        if q is None or q < 1:
            raise ValueError("lq needs q >= 1")
        if q == 2:
            return C / 2 * cp.sum(cp.hstack(squares))
        return C / q * cp.sum(cp.hstack([cp.power(n, q) for n in norms]))
    if name == "uniform":
        return C / 2 * cp.sum(cp.hstack(squares))
    if name == "squared_l1":
        return C / 2 * cp.square(cp.sum(cp.hstack(norms)))
    if name == "weight_pnorm":
        if p is None or lam is None or p <= 1:
            raise ValueError("weight_pnorm needs p > 1 and lam")
        s = 2 * p / (p + 1)
        return C * 0.75 * (2 * lam) ** (1 / 3) * cp.power(cp.pnorm(cp.hstack(norms), s), 4 / 3)
    if name == "kl":
        if d0 is None:
            raise ValueError("kl needs d0")
        d = cp.Variable(len(betas), pos=True)
        terms = [cp.quad_over_lin(beta, d[m]) / 2 for m, beta in enumerate(betas)]
        return C * (cp.sum(cp.hstack(terms))
                    + 0.5 * cp.sum(cp.rel_entr(d, d0 * np.ones(len(betas))) - d + d0))
    raise ValueError(f"unknown regularizer {name!r}; known: {', '.join(REGULARIZERS)}")


def _reference_problem(factors, y: np.ndarray, loss_name: str, reg_name: str, C: float, *,
                       lam: float | None, q: float | None, eps: float | None, delta: float | None,
                       d0: float | None, tau: float | None, p: float | None, bias: bool,
                       sample_weight: np.ndarray | None):
    r"""The cvxpy problem of the MKL primal on the factors :math:`K_m \approx L_m L_m^\top`, with its
    block variables :math:`\beta_m` and its bias variable (``None`` without a bias)."""
    betas = [cp.Variable(L.shape[1]) for L, _ in factors]
    b = cp.Variable() if bias else None
    z = sum(L @ beta for (L, _), beta in zip(factors, betas))
    if bias:
        z = z + b
    norms = [cp.norm(beta, 2) for beta in betas]
    squares = [cp.sum_squares(beta) for beta in betas]
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    objective = _loss_expr(loss_name, y, z, eps, delta, tau, w) + _reg_expr(
        reg_name, norms, squares, C, lam, q, betas, d0, p)
    return cp.Problem(cp.Minimize(objective)), betas, b


def _solve_with_retries(prob, tol: float) -> float:
    """Solve ``prob`` with Clarabel at ``tol``, then 10 and 100 times looser until its status is
    optimal; the tolerance of the last attempt."""
    used = tol
    for used in (tol, 10 * tol, 100 * tol):
        with warnings.catch_warnings():
            # "Solution may be inaccurate": the status says so and the loop retries
            warnings.simplefilter("ignore", UserWarning)
            try:
                prob.solve(
                    solver=cp.CLARABEL,
                    tol_gap_abs=used,
                    tol_gap_rel=used,
                    tol_feas=used,
                    tol_ktratio=1e-8,
                    max_iter=500,
                )
            except cp.error.SolverError:   # a numerical failure: retry at the next tolerance
                continue
        if prob.status == cp.OPTIMAL:
            break
    return used


def solve_reference(
    K: np.ndarray,
    y: np.ndarray,
    loss_name: str,
    reg_name: str,
    C: float,
    *,
    lam: float | None = None,
    q: float | None = None,
    eps: float | None = None,
    delta: float | None = None,
    d0: float | None = None,
    tau: float | None = None,
    p: float | None = None,
    bias: bool = True,
    eig_tol: float = 1e-9,
    tol: float = 1e-9,
    sample_weight: np.ndarray | None = None,
) -> ReferenceSolution:
    r"""Solve the MKL primal with cvxpy + Clarabel.

    Parameters
    ----------
    K : ndarray (M, N, N)
        Symmetric positive semidefinite Gram bank.
    y : ndarray (N,)
    loss_name : ``"logistic"``, ``"squared"``, ``"hinge"`` or ``"eps_insensitive"``
    reg_name : ``"l1"``, ``"elasticnet"``, ``"lq"`` or ``"uniform"``
    C : float
    lam, q, eps, delta, d0, tau, p : float, optional
        Elastic-net mixing λ (and the λ of ``weight_pnorm``), block-norm
        exponent q, ε of the ε-insensitive loss, δ of the Huber loss, reference
        weight :math:`d_0` of ``kl``, quantile τ of the pinball loss, the p of
        ``weight_pnorm``.
    bias : bool
    eig_tol : float
        Relative eigenvalue cut-off of the factorization.
    tol : float
        Clarabel's gap and feasibility tolerances.
    sample_weight : ndarray (N,), optional
        Weights :math:`w_i > 0` of the loss terms, :math:`\\sum_i w_i\\ell(y_i, z_i)`
        (written here directly, not through the scaling of the conjugate).

    Raises
    ------
    ReferenceError
        When Clarabel's status is not optimal.
    """
    y = np.asarray(y, dtype=np.float64)
    factors = factor_bank(K, eig_tol)
    prob, betas, b = _reference_problem(factors, y, loss_name, reg_name, C, lam=lam, q=q, eps=eps,
                                        delta=delta, d0=d0, tau=tau, p=p, bias=bias,
                                        sample_weight=sample_weight)
    used = _solve_with_retries(prob, tol)
    if prob.status != cp.OPTIMAL:
        raise ReferenceError(
            f"Clarabel status {prob.status!r} (not optimal) for {loss_name} x {reg_name}, "
            f"C={C}, lam={lam}, q={q}, eps={eps}, delta={delta}, d0={d0}, p={p}")
    alpha = np.array([back @ beta.value for (_, back), beta in zip(factors, betas)])
    return ReferenceSolution(
        objective=float(prob.value),
        alpha=alpha,
        bias=float(b.value) if bias else 0.0,
        status=str(prob.status),
        ranks=tuple(L.shape[1] for L, _ in factors),
        tol=used,
    )


def primal_objective_numpy(
    K: np.ndarray,
    y: np.ndarray,
    alpha: np.ndarray,
    b: float,
    loss_name: str,
    reg_name: str,
    C: float,
    *,
    lam: float | None = None,
    q: float | None = None,
    eps: float | None = None,
    delta: float | None = None,
    d0: float | None = None,
    tau: float | None = None,
    p: float | None = None,
    sample_weight: np.ndarray | None = None,
) -> float:
    """The same primal objective in plain numpy (for checking any solution); ``sample_weight``
    weights the loss terms."""
    K = np.asarray(K, dtype=np.float64)
    z = np.einsum("mij,mj->i", K, alpha) + b
    x = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)

    def wsum(terms):
        return float(np.sum(terms if w is None else w * terms))

    if loss_name == "logistic":
        loss = wsum(np.logaddexp(0.0, -y * z))
    elif loss_name == "squared":
        loss = wsum((y - z) ** 2)
    elif loss_name == "hinge":
        loss = wsum(np.maximum(0.0, 1 - y * z))
    elif loss_name == "eps_insensitive":
        loss = wsum(np.maximum(0.0, np.abs(y - z) - eps))
    elif loss_name == "huber":
        r = np.abs(z - y)
        loss = wsum(np.where(r <= delta, 0.5 * r**2, delta * (r - 0.5 * delta)))
    elif loss_name == "squared_hinge":
        loss = 0.5 * wsum(np.maximum(0.0, 1 - y * z) ** 2)
    elif loss_name == "pinball":
        loss = wsum(np.maximum(tau * (y - z), (tau - 1) * (y - z)))
    else:
        raise ValueError(f"unknown loss {loss_name!r}")
    if reg_name == "l1":
        reg = C * np.sum(x)
    elif reg_name == "elasticnet":
        reg = C * np.sum((1 - lam) * x + lam / 2 * x**2)
    elif reg_name == "lq":
        reg = C / q * np.sum(x**q)
    elif reg_name == "uniform":
        reg = C / 2 * np.sum(x**2)
    elif reg_name == "squared_l1":
        reg = C / 2 * np.sum(x) ** 2
    elif reg_name == "weight_pnorm":
        s = 2 * p / (p + 1)
        reg = C * 0.75 * (2 * lam) ** (1 / 3) * np.sum(x ** s) ** (4 / (3 * s))
    elif reg_name == "kl":
        from scipy.special import lambertw

        t = x**2
        d = d0 * np.exp(np.real(lambertw(2 * t / d0**2)) / 2)
        reg = C * np.sum(t / d - (d - d0) / 2)
    else:
        raise ValueError(f"unknown regularizer {reg_name!r}")
    return float(loss + reg)


#: The parameters each named formulation takes from the component.
_LOSS_PARAMS = {"eps_insensitive": ("eps",), "huber": ("delta",), "pinball": ("tau",)}
_REG_PARAMS = {"elasticnet": ("lam",), "lq": ("q",), "kl": ("d0",)}


def formulation(problem) -> dict | None:
    """The named formulation of ``problem``'s loss and regularizer, or ``None``.

    The names and parameters of the components pick the cvxpy expressions
    (a regularizer that couples the blocks by its ``weight_norm``); the
    mapping is used only if :func:`primal_objective_numpy` with it agrees
    with the components' own jitted functions at a random point (so a third-party
    component that shares a name but not the mathematics gets no conic
    reference).

    Returns
    -------
    dict or None
        ``{"loss": name, "reg": name, "params": {...}}`` for
        :func:`solve_reference`.
    """
    loss, reg = problem.loss, problem.regularizer
    if loss.name not in LOSSES:
        return None
    params = {k: float(v) for k, v in loss.get_params().items()
              if k in _LOSS_PARAMS.get(loss.name, ())}
    wn = getattr(reg, "weight_norm", None)
    if getattr(reg, "separable", True) and reg.name in REGULARIZERS:
        reg_name = reg.name
        params.update({k: float(v) for k, v in reg.get_params().items()
                       if k in _REG_PARAMS.get(reg.name, ())})
    elif wn is not None and wn.lam is None and float(wn.p) == 1.0:
        reg_name = "squared_l1"
    elif wn is not None and wn.lam is not None and float(wn.p) > 1.0:
        reg_name = "weight_pnorm"
        params.update(p=float(wn.p), lam=float(wn.lam))
    else:
        return None
    rng = np.random.default_rng(0)
    alpha = rng.normal(0.0, 0.3, (problem.n_kernels, problem.n_samples))
    b = 0.1 if problem.bias else 0.0
    try:
        K = np.asarray(problem.K)
        ours = common.loss_value(loss, problem.y, common.predict(problem.bank, alpha, b))
        norms = common.block_norms(problem.bank, alpha)
        ours += (common.regularizer_value(reg, norms, problem.C) if reg_name in _SEPARABLE
                 else wn.value(norms, problem.C))
        theirs = primal_objective_numpy(K, problem.y, alpha, b, loss.name, reg_name, problem.C,
                                        **params)
    except Exception:  # noqa: BLE001 - no formulation then
        return None
    if not abs(ours - theirs) <= 1e-9 * max(abs(ours), abs(theirs), 1.0):
        return None
    return {"loss": loss.name, "reg": reg_name, "params": params}


_SEPARABLE = ("l1", "elasticnet", "lq", "uniform", "kl")
