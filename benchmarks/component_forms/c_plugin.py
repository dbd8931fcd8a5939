"""A plugin loss for (c), in another module: the smoothed (Huberized) hinge."""

from numba import float64
from numba.experimental import jitclass


@jitclass([("delta", float64)])
class SmoothHinge:
    def __init__(self, delta):
        self.delta = delta

    def value(self, y, z):
        m = 1.0 - y * z
        if m <= 0.0:
            return 0.0
        if m <= self.delta:
            return 0.5 * m * m / self.delta
        return m - 0.5 * self.delta

    def deriv(self, y, z):
        return -y * min(max((1.0 - y * z) / self.delta, 0.0), 1.0)

    def lipschitz(self):
        return 1.0 / self.delta


def make(delta=0.5):
    return SmoothHinge(delta)
