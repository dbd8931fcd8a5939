r"""One-class problems: the :math:`\nu` of a solution, and the C that reaches a given :math:`\nu`.

With the ``one_class`` loss (levels 1, no bias) and the ``l1`` regularizer the dual is
:math:`\max_\rho \sum_i\rho_i` s.t. :math:`0 \le \rho_i \le w_i`, :math:`\|\rho\|_{K_m} \le C`, and
:math:`\nu(C) = \sum_i\rho^*_i / W = P^*(C)/W` (:math:`W = \sum_i w_i`) is the ν of the ν-one-class MKL dual
solved by :math:`\rho^*/\sum_i\rho^*_i` (``docs/one_class.md``): concave and increasing in C, 0 at 0 and 1 from
``C_max`` on.  With any other regularizer :math:`\nu(C) = \sum_i\rho^*_i/W` is still increasing and still bounds
the fractions of training outliers and support vectors.  :func:`reach_nu` finds C for a target ν; the estimator (``MKLOneClassSVM``) and ``mklkit run``
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


def chord_steps(problem: Any) -> bool:
    r"""Whether :math:`\nu(C)` is :math:`P^*(C)/W` (concave, so that chord steps apply): the ``l1`` regularizer,
    whose conjugate is the indicator of :math:`[0, C]` and leaves :math:`\sum_i\rho_i` as the dual objective."""
    return getattr(problem.regularizer, "name", None) == "l1"


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

    ``l1`` regularizer: chord steps :math:`C \leftarrow C\,\nu/\nu(C)` from ``C_max`` down, the first at
    :math:`\nu\,C_{max}`: :math:`\nu(C)` is concave with :math:`\nu(0) = 0`, so the chord from the origin lies
    below the curve and every step keeps :math:`\nu(C) \ge \nu` while decreasing to it (one or two solves when
    :math:`\nu(C)` is nearly linear); bisection in :math:`\log C` should a step fall below :math:`\nu`
    (rounding in the certificates).

    Any other regularizer: :math:`\nu(C) = \sum_i\rho^*_i/W` of the dual
    :math:`\max_{0 \le \rho \le w} \sum_i\rho_i - \sum_m \tilde g^*_C(\|\rho\|_{K_m})` is increasing but not
    concave; it is bracketed (from ``C_max`` down when it is finite, else by factors of 10 from :math:`C = 1`
    both ways) and the bracket bisected in :math:`\log C`.  Increasing: when
    :math:`\tilde g^*_C = c(C)\,\phi` with :math:`c` decreasing (``lq``: :math:`c = C^{1-r}`; ``uniform``:
    :math:`1/C`), the optima :math:`\rho_1, \rho_2` at :math:`c_1 < c_2` give, adding the two optimality
    inequalities, :math:`(c_2 - c_1)(\Phi(\rho_1) - \Phi(\rho_2)) \ge 0`, hence
    :math:`\sum\rho_1 - \sum\rho_2 \ge c_1(\Phi(\rho_1) - \Phi(\rho_2)) \ge 0`.

    ``solve(C, warm)`` solves at C warm-started from ``warm`` (a result or None), each solve from the nearest
    one before it.

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
    finite = math.isfinite(cmax) and cmax > 0.0
    if chord_steps(problem) and not finite:
        raise ValueError(f"the problem has no finite C_max ({cmax:g}): give C instead of nu")
    if finite and target >= 1.0 - tol:  # every kernel off: nu = 1
        r, nu = run(cmax, None)
        return NuSearch(cmax, r, nu, True, steps)
    hi: tuple[float, Any, float] | None = (cmax, None, 1.0) if finite else None  # nu >= target
    lo: tuple[float, Any, float] | None = None  # nu < target
    C, r, nu = (cmax, None, 1.0) if finite else (1.0, None, float("nan"))
    if chord_steps(problem):
        for _ in range(max_chords):
            C = C * target / nu
            r, nu = run(C, r)
            if abs(nu - target) <= tol:
                return NuSearch(C, r, nu, True, steps)
            if nu < target:
                lo = (C, r, nu)
                break
            hi = (C, r, nu)
    else:  # bracket by factors of 10
        C = cmax / 10.0 if finite else 1.0
        for _ in range(max_chords):
            r, nu = run(C, r)
            if abs(nu - target) <= tol:
                return NuSearch(C, r, nu, True, steps)
            if nu < target:
                lo = (C, r, nu)
            else:
                hi = (C, r, nu)
            if lo is not None and hi is not None:
                break
            C = C * 10.0 if hi is None else C / 10.0
    if lo is not None and hi is not None:
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
