r"""Conformance kit of a weighting (:class:`~mklkit.weighting.base.Weighting`): the identities of
:data:`WEIGHTING_IDENTITIES` on a random bank of Gaussian kernels, held as Gram matrices and as exact factors
:math:`K_m = L_mL_m^\top` of the same kernels, for each target the weighting declares (``tasks``):

* ``declaration``: what the class declares (:func:`mklkit.declaration.declaration_problems`);
* ``weights``: :math:`\eta` finite, :math:`\ge 0`, of shape (M,), not all 0;
* ``kernel_order``: the weights of the kernels in another order are the same weights in that order;
* ``scale``: one kernel multiplied by :math:`c = 3` changes the weights as ``scale`` declares (``"invariant"``:
  :math:`\eta` up to a common factor; ``"inverse"``: :math:`\eta_1/c, \eta_2, \dots` up to a common factor;
  ``"none"``: no claim, not checked);
* ``factor_bank``: the weights of the factor bank are those of the Gram bank.

Weights are compared normalised to sum 1, to the relative tolerance ``wtol`` (the accuracy credited to a weighting
computed by an iterative solver).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..components.base import CLASSIFICATION
from ..declaration import declaration_problems
from ..kernels.factor import FactorBank
from ..kernels.ops import ArrayBank
from ._report import ConformanceReport, _Runner

#: The identities of a weighting.
WEIGHTING_IDENTITIES: tuple[str, ...] = ("declaration", "weights", "kernel_order", "scale", "factor_bank")

#: The factor a kernel is multiplied by in the ``scale`` identity.
SCALE_FACTOR = 3.0


def _problem(rng: np.random.Generator, task: str, n: int, m: int) -> tuple[np.ndarray, Any, np.ndarray]:
    """Gaussian kernels (m, n, n) of random widths on random feature subsets, unit trace; the factor bank of the
    same kernels; a target of ``task`` that depends on the first features."""
    X = rng.standard_normal((n, 6))
    K = np.empty((m, n, n))
    blocks = []
    for j in range(m):
        cols = rng.choice(6, size=int(rng.integers(1, 4)), replace=False)
        D = ((X[:, None, cols] - X[None, :, cols]) ** 2).sum(-1)
        G = np.exp(-D / (2.0 * cols.size * rng.uniform(0.3, 3.0)))
        G /= np.trace(G)
        lam, V = np.linalg.eigh(G)
        keep = lam > 1e-13 * lam[-1]
        L = V[:, keep] * np.sqrt(lam[keep])
        K[j] = L @ L.T
        blocks.append(L)
    f = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.standard_normal(n)
    y = np.where(f > np.median(f), 1.0, -1.0) if task == CLASSIFICATION else f
    return K, FactorBank.from_blocks(blocks), y


def _normalised(w: np.ndarray) -> np.ndarray:
    return w / w.sum()


def check_weighting(
    weighting: Any, *, n_samples: int = 40, n_kernels: int = 5, seed: int = 0, wtol: float = 1e-6
) -> ConformanceReport:
    """Check a weighting against its contract (:data:`WEIGHTING_IDENTITIES`).

    Parameters
    ----------
    weighting : Weighting, instance or class
        A class is instantiated with its default parameters.
    n_samples, n_kernels : int
        The size of the random bank.
    seed : int
        Seed of the random bank; the same seed gives the same report.
    wtol : float
        Relative tolerance of the weights compared (normalised to sum 1).
    """
    if isinstance(weighting, type):
        weighting = weighting()
    rng = np.random.default_rng(seed)
    r = _Runner(weighting)
    r.run("declaration", lambda: r.identity("declaration").verdict(declaration_problems(weighting, kind="weighting")))
    tasks = tuple(getattr(weighting, "tasks", ()) or ())
    for task in tasks:
        K, fb, y = _problem(rng, task, n_samples, n_kernels)
        r.run(list(WEIGHTING_IDENTITIES[1:]), _check_task, r, weighting, task, K, fb, y, rng, wtol)
    if not tasks:
        r.identity("weights").fail("declares no task (tasks: 'classification' and/or 'regression')")
    return r.report(seed)


def _check_task(
    r: _Runner, w: Any, task: str, K: np.ndarray, fb: Any, y: np.ndarray, rng: np.random.Generator, wtol: float
) -> None:
    M = K.shape[0]
    at = {"task": 0.0 if task == CLASSIFICATION else 1.0}
    ident = r.identity("weights")
    eta = np.asarray(w.weights(ArrayBank(K), y), dtype=np.float64)
    if eta.shape != (M,):
        ident.fail(f"weights(bank, y) has shape {eta.shape}; expected ({M},) for a {task} target")
        return
    ident.require(np.isfinite(eta), at, f"the weights of a {task} target are finite")
    ident.at_least(eta, 0.0, 0.0, at, f"the weights of a {task} target are >= 0")
    ident.require(bool(np.any(eta > 0)), at, f"some weight of a {task} target is > 0")
    if not (np.all(np.isfinite(eta)) and np.all(eta >= 0) and np.any(eta > 0)):
        return
    base = _normalised(eta)
    tol = wtol * max(float(base.max()), 1e-300)

    r.identity("kernel_order")
    perm = rng.permutation(M)
    got = _normalised(np.asarray(w.weights(ArrayBank(np.ascontiguousarray(K[perm])), y), dtype=np.float64))
    r.identity("kernel_order").compare(got, base[perm], tol, at, f"weights of the permuted kernels ({task})")

    r.identity("scale")
    claim = getattr(w, "scale", "none")
    if claim in ("invariant", "inverse"):
        s = np.ones(M)
        s[0] = SCALE_FACTOR
        scaled = np.asarray(w.weights(ArrayBank(np.ascontiguousarray(K * s[:, None, None])), y), dtype=np.float64)
        got = _normalised(scaled * (s if claim == "inverse" else 1.0))
        r.identity("scale").compare(got, base, tol, at, f"weights with kernel 0 x {SCALE_FACTOR:g}, scale={claim!r}")
    else:
        r.identity("scale").verdict(None)

    r.identity("factor_bank")
    got = _normalised(np.asarray(w.weights(fb, y), dtype=np.float64))
    r.identity("factor_bank").compare(got, base, tol, at, f"weights on the factor bank ({task})")
