"""A plugin loss for (b), in another module: the smoothed (Huberized) hinge."""

import math  # noqa: F401

from .b_structref import compiled, kernel


@compiled
class SmoothHinge:
    fields = ("delta",)

    @kernel
    def value(self, y, z):
        m = 1.0 - y * z
        if m <= 0.0:
            return 0.0
        if m <= self.delta:
            return 0.5 * m * m / self.delta
        return m - 0.5 * self.delta

    @kernel
    def deriv(self, y, z):
        return -y * min(max((1.0 - y * z) / self.delta, 0.0), 1.0)

    @kernel
    def lipschitz(self):
        return 1.0 / self.delta


def make(delta=0.5):
    return SmoothHinge.jit([delta])
