"""Lanckriet et al.'s problem (L) as an ``l1_squared`` problem (Bach, Lanckriet & Jordan
2004, §2.3), and its kernel coefficients from a solution."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mklkit.problem import Problem
from mklkit.result import SolveResult

from .regularizer import L1Squared

__all__ = ["lanckriet_problem", "lanckriet_weights"]


def lanckriet_problem(
    K: np.ndarray, y: np.ndarray, C_L: float, c: float = 1.0, loss: Any = None
) -> tuple[Problem, np.ndarray]:
    r"""The ``l1_squared`` problem whose solution solves Lanckriet et al.'s (L).

    (L) on the bank :math:`K_j` with trace constant :math:`c` and box
    :math:`0\le\alpha\le C_L` is (D_K) with :math:`d_j = \sqrt{\operatorname{tr}K_j/c}`
    (§2.3); that is (D_K) with unit weights on :math:`\tilde K_j = K_j/d_j^2
    = cK_j/\operatorname{tr}K_j`, i.e. ``l1_squared`` at ``C = 1/C_L``.

    Returns
    -------
    problem : Problem
        On the rescaled bank :math:`\tilde K`.
    d : ndarray (M,)
        The weights :math:`d_j`; pass them to :func:`lanckriet_weights`.
    """
    from mklkit.plugins import get_registry

    K = np.ascontiguousarray(K, dtype=np.float64)
    if not (c > 0 and math.isfinite(c)):
        raise ValueError(f"the trace constant c must be a finite number > 0; got {c!r}")
    tr = np.einsum("mii->m", K)
    if np.any(tr <= 0):
        raise ValueError(f"every kernel needs a positive trace; got traces {tr.tolist()!r}")
    d = np.sqrt(tr / c)
    if loss is None:
        loss = get_registry().create("loss", "hinge")
    Kt = K / (d * d)[:, None, None]
    return Problem(K=Kt, y=y, loss=loss, regularizer=L1Squared(), C=1.0 / C_L), d


def lanckriet_weights(result: SolveResult, d: np.ndarray, c: float = 1.0) -> np.ndarray:
    r"""The coefficients :math:`\mu_j` of :math:`\sum_j\mu_jK_j` in (L), with :math:`\sum_j\mu_j\operatorname{tr}K_j = c`.

    The SKM's weights :math:`\eta` on :math:`\tilde K_j = K_j/d_j^2` give the
    combination :math:`\sum_j(\eta_j/d_j^2)K_j`; they are normalised here so
    that the trace constraint of (L) holds.
    """
    eta = np.asarray(result.kernel_weights, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    mu = eta / (d * d)
    tr = d * d * c
    s = float(np.sum(mu * tr))
    return mu * (c / s) if s > 0 else mu
