r"""Reference solutions of the MKL primal with cvxpy + Clarabel (the ``test`` extra; imports cvxpy).

The components give their cvxpy expressions (``cvxpy_expr``), trusted by :func:`formulation` only
where they agree with their kernels.  With :math:`K_m \approx L_m L_m^\top` (eigenvalues below
``eig_tol`` times the largest dropped) the problem is solved in :math:`\beta_m = L_m^\top\alpha_m`:

.. math::
    \min_{\beta, b}\ \sum_i \ell\big(y_i, \textstyle\sum_m (L_m\beta_m)_i + b\big)
        + \sum_m \tilde g_C(\|\beta_m\|_2).

Components are instances or registered names with keyword parameters (``solve_reference(K, y,
"eps_insensitive", "lq", C, eps=0.1, q=1.5)``); ``squared_l1`` :math:`\tfrac{C}{2}(\sum_m x_m)^2`
(SpicyMKL eq. 5) and ``weight_pnorm`` :math:`C\tfrac34(2\lambda)^{1/3}\|x\|_s^{4/3}`,
:math:`s = 2p/(p+1)` (SMO-MKL eq. 1) name forms of the kernel weights.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from ..components.base import Loss, Regularizer, WeightNorm
from ..engines import common
from ..plugins import get_registry

__all__ = [
    "ReferenceSolution",
    "ReferenceError",
    "factor_bank",
    "solve_reference",
    "primal_objective_numpy",
    "formulation",
]

#: The regularizer names that are forms of the kernel weights, with their parameters.
_WEIGHT_NORM_FORMS = {"squared_l1": (), "weight_pnorm": ("p", "lam")}


def __getattr__(name: str):
    # LOSSES, REGULARIZERS: the names with a conic formulation (registered components
    # with a cvxpy_expr, and the kernel-weight forms)
    if name in ("LOSSES", "REGULARIZERS"):
        kind, base = ("loss", Loss) if name == "LOSSES" else ("regularizer", Regularizer)
        names = [n for n in get_registry().names(kind) if get_registry().get(kind, n).cvxpy_expr is not base.cvxpy_expr]
        return tuple(names) + (tuple(_WEIGHT_NORM_FORMS) if kind == "regularizer" else ())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ReferenceError(RuntimeError):
    """Clarabel did not report an optimal solution."""


@dataclass(frozen=True)
class ReferenceSolution:
    """Solution of the reference problem: Clarabel's optimal value, ``alpha`` (M, N) and ``bias``
    mapped back from β, Clarabel's status, the factor ranks and the tolerance used."""

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
    r"""``(L, back)`` per kernel: :math:`K_m \approx L_m L_m^\top`, and :math:`\alpha_m = back\,\beta_m`
    satisfies :math:`L_m^\top\alpha_m = \beta_m`."""
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


def _resolve(kind: str, spec, params: dict):
    """The component (or kernel-weight form) named ``spec``, with the ``params`` it declares."""
    if not isinstance(spec, str):
        return spec
    given = {k: v for k, v in params.items() if v is not None}
    if kind == "regularizer" and spec in _WEIGHT_NORM_FORMS:
        if spec == "squared_l1":
            return WeightNorm(1.0)
        if given.get("p") is None or given.get("lam") is None or given["p"] <= 1:
            raise ValueError("weight_pnorm needs p > 1 and lam")
        return WeightNorm(float(given["p"]), float(given["lam"]))
    cls = get_registry().get(kind, spec)
    return cls(**{p.name: given[p.name] for p in cls.params if p.name in given})


def _expression(component, *args):
    expr = component.cvxpy_expr(*args)
    if expr is NotImplemented:
        raise ValueError(f"{getattr(component, 'name', component)!r} has no cvxpy expression (cvxpy_expr)")
    return expr


def _solve_with_retries(prob, tol: float) -> float:
    """Solve ``prob`` with Clarabel at ``tol``, then 10 and 100 times looser until optimal (a few
    small, badly scaled problems need it); the tolerance of the last attempt."""
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
            except cp.error.SolverError:  # a numerical failure: retry at the next tolerance
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
    loss_name, reg_name
        Components, or registered names (``"squared_l1"``, ``"weight_pnorm"`` for the kernel weights).
    lam, q, eps, delta, d0, tau, p : float, optional
        The parameters of components given by name, each to the component that declares it.
    eig_tol : float
        Relative eigenvalue cut-off of the factorization.
    tol : float
        Clarabel's gap and feasibility tolerances.
    sample_weight : ndarray (N,), optional
        Weights of the loss terms, :math:`\\sum_i w_i\\ell(y_i, z_i)`.

    Raises
    ------
    ReferenceError
        When Clarabel's status is not optimal.
    """
    y = np.asarray(y, dtype=np.float64)
    params = dict(lam=lam, q=q, eps=eps, delta=delta, d0=d0, tau=tau, p=p)
    loss, reg = _resolve("loss", loss_name, params), _resolve("regularizer", reg_name, params)
    factors = factor_bank(K, eig_tol)
    betas = [cp.Variable(L.shape[1]) for L, _ in factors]
    b = cp.Variable() if bias else None
    z = sum(L @ beta for (L, _), beta in zip(factors, betas))
    if bias:
        z = z + b
    norms = [cp.norm(beta, 2) for beta in betas]
    squares = [cp.sum_squares(beta) for beta in betas]
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    prob = cp.Problem(cp.Minimize(_expression(loss, y, z, w) + _expression(reg, norms, squares, C, betas)))
    used = _solve_with_retries(prob, tol)
    if prob.status != cp.OPTIMAL:
        raise ReferenceError(
            f"Clarabel status {prob.status!r} (not optimal) for {_describe(loss)} x {_describe(reg)}, C={C}"
        )
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
    """The same primal objective from the components' kernels, components as in :func:`solve_reference`."""
    params = dict(lam=lam, q=q, eps=eps, delta=delta, d0=d0, tau=tau, p=p)
    loss, reg = _resolve("loss", loss_name, params), _resolve("regularizer", reg_name, params)
    K = np.asarray(K, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    z = np.ascontiguousarray(np.einsum("mij,mj->i", K, alpha) + b)
    x = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0.0))
    terms = np.asarray(loss.jit.value(y, z, loss.param_vector), dtype=np.float64)
    value = float(np.sum(terms if sample_weight is None else np.asarray(sample_weight, dtype=np.float64) * terms))
    return value + _regularizer_value(reg, x, C)


def _regularizer_value(reg, norms: np.ndarray, C: float) -> float:
    r""":math:`\sum_m \tilde g_C(x_m)` of a regularizer, or the value of its kernel-weight form."""
    wn = reg if isinstance(reg, WeightNorm) else getattr(reg, "weight_norm", None)
    if wn is not None:
        return float(wn.value(norms, C))
    return float(common.regularizer_value(reg, np.ascontiguousarray(norms, dtype=np.float64), C))


def _describe(component) -> str:
    describe = getattr(component, "describe", None)
    return describe() if describe is not None else repr(component)


def _value_of(expr) -> float:
    """The value of a cvxpy expression of constants, minimized over its auxiliary variables if any."""
    if not expr.variables():
        return float(expr.value)
    prob = cp.Problem(cp.Minimize(expr))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value)


def formulation(problem) -> dict | None:
    """The conic formulation of ``problem``'s components, ``{"loss": loss, "reg": regularizer,
    "params": {}}`` for :func:`solve_reference`, or ``None`` when a component's ``cvxpy_expr``
    disagrees with its kernels at a random point."""
    loss, reg = problem.loss, problem.regularizer
    rng = np.random.default_rng(0)
    alpha = rng.normal(0.0, 0.3, (problem.n_kernels, problem.n_samples))
    b = 0.1 if problem.bias else 0.0
    try:
        y = np.asarray(problem.y, dtype=np.float64)
        z = common.predict(problem.bank, alpha, b)
        ours = common.loss_value(loss, y, z)
        theirs = _value_of(_expression(loss, y, np.asarray(z), None))
        if not abs(ours - theirs) <= 1e-9 * max(abs(ours), abs(theirs), 1.0):
            return None
        x = np.asarray(common.block_norms(problem.bank, alpha), dtype=np.float64)
        ours = _regularizer_value(reg, x, problem.C)
        betas = [np.array([xm]) for xm in x]
        expr = _expression(
            reg, [cp.norm(bm, 2) for bm in betas], [cp.sum_squares(bm) for bm in betas], problem.C, betas
        )
        rtol = 1e-9 if not expr.variables() else 1e-7
        theirs = _value_of(expr)
    except Exception:  # noqa: BLE001 - no formulation then
        return None
    if not abs(ours - theirs) <= rtol * max(abs(ours), abs(theirs), 1.0):
        return None
    return {"loss": loss, "reg": reg, "params": {}}
