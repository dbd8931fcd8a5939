r"""Conformance kit of a multiclass loss (:class:`~mklkit.components.multiclass.MulticlassLoss`): the identities of
:data:`MULTICLASS_LOSS_IDENTITIES` at random labels, weights and outputs (K = 3 and 4 classes):

* ``declaration``: what the class declares (:func:`mklkit.declaration.declaration_problems`);
* ``shapes``: ``value`` (N,), ``grad`` (N, K) and ``conj`` (N,) finite where they should be;
* ``gradient``: ``grad`` against central differences of ``value``;
* ``fenchel_young``: :math:`L(y, F) + L^*(y, U) \ge \langle U, F\rangle` at points :math:`U` of the conjugate's
  domain, with equality at :math:`U = \partial_F L(y, F)`;
* ``lipschitz``: with ``smooth_primal``, :math:`\|\partial_F L(y, F) - \partial_F L(y, F')\| \le \ell\|F - F'\|`,
  :math:`\ell` = ``grad_lipschitz(K)``;
* ``dual_point``: :meth:`~mklkit.components.multiclass.MulticlassLoss.dual_point` gives :math:`P` with
  :math:`-P_i/w_i` in the conjugate's domain, and with a bias :math:`\mathbf 1^\top P = 0`;
* ``offset``: :meth:`~mklkit.components.multiclass.MulticlassLoss.optimal_offset` zeroes the gradient of
  :math:`\sum_iw_iL(y_i, b)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..declaration import declaration_problems
from ._report import ConformanceReport, _Runner

#: The identities of a multiclass loss.
MULTICLASS_LOSS_IDENTITIES: tuple[str, ...] = (
    "declaration",
    "shapes",
    "gradient",
    "fenchel_young",
    "lipschitz",
    "dual_point",
    "offset",
)

#: Step of the central differences.
FD_STEP = 1e-6


def check_multiclass_loss(
    loss: Any, *, n_points: int = 40, seed: int = 0, rtol: float = 1e-6, atol: float = 1e-8
) -> ConformanceReport:
    """Check a multiclass loss against its contract (:data:`MULTICLASS_LOSS_IDENTITIES`).

    Parameters
    ----------
    loss : MulticlassLoss, instance or class
        A class is instantiated with its default parameters.
    n_points : int
        Samples per number of classes.
    seed : int
        Seed of the random points; the same seed gives the same report.
    rtol, atol : float
        Relative and absolute tolerances (central differences get ``100`` times ``rtol``, the offset's gradient
        ``10`` times ``rtol`` times the total weight).
    """
    if isinstance(loss, type):
        loss = loss()
    rng = np.random.default_rng(seed)
    r = _Runner(loss)
    r.run("declaration", lambda: r.identity("declaration").verdict(declaration_problems(loss, kind="multiclass_loss")))
    for K in (3, 4):
        y = rng.integers(0, K, n_points).astype(np.float64)
        y[:K] = np.arange(K)  # every class present
        w = rng.uniform(0.5, 2.0, n_points)
        F = 2.0 * rng.standard_normal((n_points, K))
        r.run(list(MULTICLASS_LOSS_IDENTITIES[1:]), _check, r, loss, y, w, F, rng, rtol, atol)
    return r.report(seed)


def _check(
    r: _Runner,
    loss: Any,
    y: np.ndarray,
    w: np.ndarray,
    F: np.ndarray,
    rng: np.random.Generator,
    rtol: float,
    atol: float,
) -> None:
    N, K = F.shape
    p = loss.param_vector
    jit = loss.jit
    at = {"K": float(K)}

    def values(A: np.ndarray) -> np.ndarray:
        return np.asarray(jit.value(y, np.ascontiguousarray(A), p), dtype=np.float64)

    def grads(A: np.ndarray) -> np.ndarray:
        return np.asarray(jit.grad(y, np.ascontiguousarray(A), p), dtype=np.float64)

    ident = r.identity("shapes")
    v, G = values(F), grads(F)
    if v.shape != (N,) or G.shape != (N, K):
        ident.fail(f"value has shape {v.shape} and grad {G.shape}; expected ({N},) and ({N}, {K})", at)
        return
    ident.require(np.isfinite(v), at, "value is finite")
    ident.require(np.isfinite(G), at, "grad is finite")
    c = np.asarray(jit.conj(y, np.ascontiguousarray(G), p), dtype=np.float64)
    ident.require(np.isfinite(c) if c.shape == (N,) else np.zeros(1, dtype=bool), at, "conj is finite at the gradient")

    ident = r.identity("gradient")
    num = np.empty((N, K))
    for k in range(K):
        D = np.zeros((N, K))
        D[:, k] = FD_STEP
        num[:, k] = (values(F + D) - values(F - D)) / (2.0 * FD_STEP)
    ident.compare(G, num, 1e2 * rtol * (1.0 + np.abs(num)), at, "grad against central differences of value")

    ident = r.identity("fenchel_young")
    inner = np.sum(G * F, axis=1)
    ident.compare(v + c, inner, rtol * (1.0 + np.abs(inner)) + atol, at, "L(F) + L*(grad L(F)) = <grad L(F), F>")
    E = np.zeros((N, K))
    E[np.arange(N), y.astype(np.int64)] = 1.0
    for _ in range(3):  # other points of the domain: dual points of random gradients
        P = np.asarray(loss.dual_point(y, rng.standard_normal((N, K)), np.ones(N), False), dtype=np.float64)
        U = np.ascontiguousarray(-P)
        cu = np.asarray(jit.conj(y, U, p), dtype=np.float64)
        inner = np.sum(U * F, axis=1)
        ident.at_least(v + cu, inner, rtol * (1.0 + np.abs(inner)) + atol, at, "L(F) + L*(U) >= <U, F>")

    ident = r.identity("lipschitz")
    if getattr(loss, "smooth_primal", False):
        ell = float(loss.grad_lipschitz(K))
        if not (np.isfinite(ell) and ell > 0):
            ident.fail(f"smooth_primal is True but grad_lipschitz(K) is {ell!r}; expected a finite number > 0", at)
        else:
            F2 = F + rng.standard_normal((N, K)) * rng.uniform(1e-3, 2.0, (N, 1))
            lhs = np.linalg.norm(grads(F2) - G, axis=1)
            rhs = ell * np.linalg.norm(F2 - F, axis=1)
            ident.at_least(rhs, lhs, rtol * (1.0 + lhs) + atol, at, "grad_lipschitz(K) bounds the change of grad")
    else:
        ident.note()

    ident = r.identity("dual_point")
    for bias in (False, True):
        Gw = w[:, None] * G
        P = np.asarray(loss.dual_point(y, Gw, w, bias), dtype=np.float64)
        if P.shape != (N, K):
            ident.fail(f"dual_point has shape {P.shape}; expected ({N}, {K})", at)
            return
        cu = np.asarray(jit.conj(y, np.ascontiguousarray(-P / w[:, None]), p), dtype=np.float64)
        ident.require(np.isfinite(cu), {**at, "bias": float(bias)}, "-P_i/w_i is in the conjugate's domain")
        if bias:
            sums = P.sum(axis=0)
            ident.compare(sums, 0.0, rtol * float(np.sum(w)) + atol, at, "with a bias, 1^T P = 0")

    ident = r.identity("offset")
    b = np.asarray(loss.optimal_offset(y, w, K), dtype=np.float64)
    if b.shape != (K,):
        ident.fail(f"optimal_offset has shape {b.shape}; expected ({K},)", at)
        return
    g = (w[:, None] * grads(np.tile(b, (N, 1)))).sum(axis=0)
    ident.compare(g, 0.0, 10.0 * rtol * float(np.sum(w)) + atol, at, "the gradient over the offset is 0 there")
