"""The certificate checks that the engine tests share.

An engine that reports ``converged`` claims a certificate: a primal point
``(alpha, b)`` with objective ``P``, a feasible dual point ``rho`` with
objective ``D``, and their relative gap ``(P - D)/|P| <= tol``.  These
helpers check that claim without trusting the engine:

- :func:`assert_dual_feasible`: ``rho`` lies in the *closed* domain of the
  conjugates (the box of the loss conjugate, ``1'rho = 0`` with a bias, the
  regularizer's dual ball, up to rounding in its block norms), where
  ``D(rho)``, recomputed, is finite.  The ends of the box belong to it: the logistic conjugate
  ``u log u + (1 - u) log(1 - u)`` is ``0`` at ``u = 0`` and ``u = 1``
  (``0 log 0 = 0``), so a coordinate ``y rho = 0`` (``-0.0`` included) is
  feasible.
- :func:`assert_certified`: the certificate against the conic reference.
  Clarabel's point, evaluated exactly, is a primal point, so
  ``P* <= P_ref``: weak duality gives ``D <= P_ref`` (up to rounding) and
  the claimed gap gives ``P <= D + tol |P| <= P_ref + tol |P|``.  Both
  hold however loosely Clarabel itself converged; the agreement of ``P``
  with Clarabel's own objective (``rel``, 1e-4 by default) is checked on
  top.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pytest

from mklkit.engines import common
from mklkit.result import Status

try:
    from tests.conic_reference import primal_objective_numpy
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import primal_objective_numpy

#: Agreement of the engine's objective with the conic reference's own.
REL = 1e-4
#: Rounding allowed in weak duality (``D <= P_ref``).
ROUNDING = 1e-9
#: Relative rounding allowed in the dual point's distance to the edge of its domain.
SHRINK = 1e-12


def assert_dual_feasible(problem: Any, rho: np.ndarray, dual_objective: float | None = None) -> float:
    """``rho`` is a feasible dual point of ``problem``; returns ``D(rho)``, recomputed.

    Checks the closed box of the loss conjugate's domain
    (:func:`mklkit.engines.common.dual_box`), ``1'rho = 0`` when the problem
    has a bias, and that ``D(rho)`` (:func:`mklkit.engines.common.dual_objective`,
    no projection) is finite and equals ``dual_objective`` when given.
    """
    __tracebackhide__ = True
    rho = np.asarray(rho, dtype=np.float64)
    assert np.all(np.isfinite(rho)), "the dual point has non-finite coordinates"
    lo, hi = common.dual_box(problem)
    outside = np.flatnonzero((rho < lo) | (rho > hi))
    assert outside.size == 0, (
        f"dual coordinates {outside[:5].tolist()} are outside the loss conjugate's domain: "
        f"rho={rho[outside[:5]].tolist()}, allowed [{lo[outside[:5]].tolist()}, "
        f"{hi[outside[:5]].tolist()}]"
    )
    if problem.bias:
        assert abs(float(np.sum(rho))) <= 1e-12 * max(1.0, float(np.sum(np.abs(rho)))), (
            f"1'rho = {float(np.sum(rho))!r}; a problem with a bias needs 1'rho = 0"
        )
    D = common.dual_objective(problem, rho)
    if not np.isfinite(D):
        # on the boundary of a bounded dual ball (l1: ||rho||_{K_m} <= C), block norms
        # recomputed in another summation order may exceed it by rounding; the point
        # (1 - SHRINK) rho lies between rho and 0, which every conjugate's domain holds
        # (the losses are bounded below, the regularizers' balls are centred at 0)
        D = common.dual_objective(problem, (1.0 - SHRINK) * rho)
    assert np.isfinite(D), (
        f"D(rho) = {D!r}: the dual point is outside the conjugates' domain by more than "
        f"rounding (block norms / C up to "
        f"{float(np.max(common.dual_block_norms(problem.bank, rho))) / problem.C!r})"
    )
    if dual_objective is not None:
        assert D == pytest.approx(dual_objective, rel=1e-10, abs=1e-12)
    return D


def assert_certified(
    res: Any,
    K: np.ndarray,
    y: np.ndarray,
    ref: Any,
    loss: str,
    reg: str,
    C: float,
    params: Mapping[str, Any] | None = None,
    *,
    tol: float,
    rel: float = REL,
    problem: Any = None,
) -> float:
    """``res`` converged with a gap ``<= tol`` that weak duality against ``ref`` confirms.

    Parameters
    ----------
    res : SolveResult
    K, y : the bank (array) and targets the problem was solved on
    ref : ReferenceSolution
        The conic reference (:func:`tests.conic_reference.solve_reference`)
        of the same problem.
    loss, reg : str
        Names understood by :func:`tests.conic_reference.primal_objective_numpy`.
    C : float
    params : mapping, optional
        The loss's and the regularizer's parameters (``lam``, ``q``, ``eps``, ...).
    tol : float
        The tolerance the engine was given.
    rel : float
        Agreement of ``res.objective`` with Clarabel's objective.
    problem : Problem, optional
        When given, ``res.dual`` is also checked to be feasible with
        ``D(res.dual) == res.dual_objective`` (:func:`assert_dual_feasible`).

    Returns
    -------
    float
        ``P_ref``, the primal objective at Clarabel's point, evaluated exactly.
    """
    __tracebackhide__ = True
    params = dict(params or {})
    assert res.status == Status.CONVERGED, res.message
    assert -1e-12 <= res.gap <= tol, f"gap {res.gap!r}; allowed [0, {tol!r}]"
    assert res.gap == pytest.approx(common.relative_gap(res.objective, res.dual_objective), rel=1e-9, abs=1e-15)
    # the reported objective is the primal at the returned (alpha, b), recomputed
    P = primal_objective_numpy(K, y, res.alpha, res.bias, loss, reg, C, **params)
    assert P == pytest.approx(res.objective, rel=1e-10)
    # Clarabel's point, evaluated exactly, is a primal point: P* <= P_ref
    P_ref = primal_objective_numpy(K, y, ref.alpha, ref.bias, loss, reg, C, **params)
    assert res.dual_objective <= P_ref + ROUNDING * abs(P_ref), (
        f"weak duality fails: D = {res.dual_objective!r} > P_ref = {P_ref!r}"
    )
    assert res.objective <= P_ref + 2 * tol * abs(P_ref), (
        f"the claimed gap {res.gap!r} fails: P = {res.objective!r}, P_ref = {P_ref!r}"
    )
    assert res.objective == pytest.approx(ref.objective, rel=rel)
    if problem is not None:
        assert_dual_feasible(problem, res.dual, res.dual_objective)
    return P_ref
