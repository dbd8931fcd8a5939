r"""Which inner solver of the bcd engine solves the next working set.

With ``method: newton`` a working set that differs from the last one gets
:data:`NEW_SET_NEWTON` Newton steps (its solution changes the scores that
choose the next one).  After a stall of proximal Newton the next working set
is solved by plain coordinate descent (:class:`MethodSwitch`): two outer
iterations in a row that each left the gap within 10 % of where it was at
the same smoothing, or one whose Newton steps took :data:`STALL_HALVINGS`
line-search halvings each; after the latter below a gap of
:data:`ROUNDING_GAP` the run stays with coordinate descent.  Proximal Newton
can stall a little above the optimum, where the objective's decrease
reaches its rounding (w8a, squared loss, N = 16,000: a relative gap of
1.1e-7 for ever, plain descent 5.9e-9).  Slow early progress is no stall:
on a smoothed hinge (a9a, N = 3,000) plain descent there took 1,900 epochs.
"""

from __future__ import annotations

__all__ = ["MethodSwitch", "NEW_SET_NEWTON", "STALL_RATIO", "STALL_SLOW", "STALL_HALVINGS", "ROUNDING_GAP"]

#: With ``method: newton``, ``STALL_SLOW`` outer iterations in a row that each leave
#: the gap above this fraction of the one before (at the same smoothing) send the next
#: working set to plain coordinate descent ...
STALL_RATIO = 0.9

#: ... (one such iteration is no stall: warm-started from the solution at a larger C,
#: the first Newton steps on the old support move the gap by a few percent, and plain
#: descent from there took 50-60 s to a gap of 2e-6 where Newton needs 2-5 s for 1e-3:
#: w8a, 8,000 points, the 50 kernels of bench_large_n, logistic + elastic net at
#: C = 1e-5..1e-4) ...
STALL_SLOW = 2

#: ... or whose Newton steps took this many halvings of the line search each on
#: average (the jitted loop ends a call after one such step, ``LS_STALL``).
STALL_HALVINGS = 10

#: After that last kind of stall with a relative gap below this (where the
#: objective's decrease nears its rounding), the run stays with coordinate
#: descent.
ROUNDING_GAP = 1e-6

#: With ``method: newton``, Newton steps on a working set that differs from the
#: previous outer iteration's (``max_newton`` on one that does not): w8a with
#: 50 kernels, 39,799 points, logistic + elastic net to gap 1e-3: 9.4 s instead
#: of 20.9 s, the working set growing 10 -> 48 blocks in one step each.
NEW_SET_NEWTON = 1


class MethodSwitch:
    """The inner solver of the next working set: the run's ``method``, or ``bcd`` after a
    stall of proximal Newton (module docstring)."""

    def __init__(self, method: str, gap: float) -> None:
        #: the run's method
        self.base = method
        #: the method of the next working set
        self.method = method
        #: the gap after the last outer iteration
        self.gap_before = gap
        #: the last Newton iteration's steps took STALL_HALVINGS line-search halvings each
        self.stuck = False
        #: outer iterations in a row that moved the gap by less than STALL_RATIO
        self.slow = 0

    def update(self, halvings: float, gap: float, same_smoothing: bool) -> bool:
        """After an outer iteration solved by :attr:`method` (``halvings``: its line-search
        halvings per Newton step; ``gap``: the gap it left; ``same_smoothing``: whether the
        smoothing stayed): whether it stalled, which sends the next working set to ``bcd``."""
        if self.method == "bcd":
            # back to Newton, unless its line search failed near the rounding level,
            # where it would fail again
            stalled = self.stuck and self.base != "bcd" and gap <= ROUNDING_GAP
            self.slow = 0
        else:
            self.stuck = halvings >= STALL_HALVINGS
            slower = same_smoothing and gap > STALL_RATIO * self.gap_before
            self.slow = self.slow + 1 if slower else 0
            stalled = same_smoothing and (self.slow >= STALL_SLOW or self.stuck)
        self.method = "bcd" if stalled else self.base
        self.gap_before = gap
        return stalled
