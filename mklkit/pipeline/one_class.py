r"""One-class problems: the :math:`\nu` of a solution, and the C that reaches a given :math:`\nu`.

With the ``one_class`` loss (levels 1, no bias) and the ``l1`` regularizer the dual is
:math:`\max_\rho \sum_i\rho_i` s.t. :math:`0 \le \rho_i \le w_i`, :math:`\|\rho\|_{K_m} \le C`, and
:math:`\nu(C) = \sum_i\rho^*_i / W = P^*(C)/W` (:math:`W = \sum_i w_i`) is the ν of the ν-one-class MKL dual
solved by :math:`\rho^*/\sum_i\rho^*_i` (``docs/one_class.md``): concave and increasing in C, 0 at 0 and 1 from
``C_max`` on.  :func:`reach_nu` finds C for a target ν; the estimator (``MKLOneClassSVM``) and ``mklkit run``
(``problem.nu``) share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .heldout import c_max

#: Chord steps from ``C_max`` down and bisection steps in log C at most.
MAX_CHORDS = 60
MAX_BISECTIONS = 40


def nu_of(result: Any, total_weight: float) -> float:
    r""":math:`\nu = \sum_i \rho_i / \sum_i w_i` of a solve's dual point :math:`\rho` (``SolveResult.dual``,
    :math:`0 \le \rho_i \le w_i`); without one, :math:`D/\sum_i w_i` (equal for the ``l1`` regularizer, whose
    dual objective is :math:`\sum_i\rho_i`)."""
    if result.dual is not None:
        return float(np.sum(result.dual)) / total_weight
    return float(result.dual_objective) / total_weight


def total_weight(problem: Any) -> float:
    """:math:`W = \\sum_i w_i` of a problem (N without weights)."""
    w = problem.sample_weight
    return float(np.sum(w)) if w is not None else float(problem.y.shape[0])


@dataclass
class NuSearch:
    """The outcome of :func:`reach_nu`: the C chosen, its result and :math:`\\nu`, whether it is within the
    tolerance, and every solve made as ``(C, nu, gap)``."""

    C: float
    result: Any
    nu: float
    reached: bool
    steps: list[tuple[float, float, float]] = field(default_factory=list)


def reach_nu(
    problem: Any,
    solve: Callable[[float, Any], Any],
    target: float,
    tol: float,
    *,
    max_chords: int | None = None,
    max_bisections: int | None = None,
) -> NuSearch:
    r"""C with :math:`|\nu(C) - \nu| \le` ``tol`` for the one-class ``problem``.

    Chord steps :math:`C \leftarrow C\,\nu/\nu(C)` from ``C_max`` down, the first at :math:`\nu\,C_{max}`:
    :math:`\nu(C)` is concave with :math:`\nu(0) = 0`, so the chord from the origin lies below the curve and
    every step keeps :math:`\nu(C) \ge \nu` while decreasing to it (one or two solves when :math:`\nu(C)` is
    nearly linear); bisection in :math:`\log C` should a step fall below :math:`\nu` (rounding in the
    certificates).  ``solve(C, warm)`` solves at C warm-started from ``warm`` (a result or None), each solve
    from the nearest one before it.

    Returns
    -------
    NuSearch
        ``reached`` False (the closest C kept) when the steps ran out.
    """
    max_chords = MAX_CHORDS if max_chords is None else max_chords
    max_bisections = MAX_BISECTIONS if max_bisections is None else max_bisections
    total = total_weight(problem)
    steps: list[tuple[float, float, float]] = []

    def run(C: float, warm: Any) -> tuple[Any, float]:
        r = solve(C, warm)
        nu = nu_of(r, total)
        steps.append((float(C), nu, float(r.gap)))
        return r, nu

    cmax = c_max(problem)
    if not (math.isfinite(cmax) and cmax > 0.0):
        raise ValueError(f"the problem has no finite C_max ({cmax:g}): give C instead of nu")
    if target >= 1.0 - tol:  # every kernel off: nu = 1
        r, nu = run(cmax, None)
        return NuSearch(cmax, r, nu, True, steps)
    C, r, nu = cmax, None, 1.0
    hi: tuple[float, Any, float] = (cmax, None, 1.0)  # nu >= target
    lo: tuple[float, Any, float] | None = None  # nu < target
    for _ in range(max_chords):
        C = C * target / nu
        r, nu = run(C, r)
        if abs(nu - target) <= tol:
            return NuSearch(C, r, nu, True, steps)
        if nu < target:
            lo = (C, r, nu)
            break
        hi = (C, r, nu)
    if lo is not None:
        for _ in range(max_bisections):
            C = math.sqrt(lo[0] * hi[0])
            warm = hi[1] if hi[1] is not None and (hi[2] - target) < (target - lo[2]) else lo[1]
            r, nu = run(C, warm)
            if abs(nu - target) <= tol:
                return NuSearch(C, r, nu, True, steps)
            if nu < target:
                lo = (C, r, nu)
            else:
                hi = (C, r, nu)
    C, r, nu = min(
        (b for b in (lo, hi, (C, r, nu)) if b is not None and b[1] is not None), key=lambda b: abs(b[2] - target)
    )
    return NuSearch(C, r, nu, False, steps)
