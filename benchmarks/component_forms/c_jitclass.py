"""(c) A component is a numba ``jitclass`` (skglm's representation): parameters are
attributes, the mathematics methods.  The loop is ``loops.epoch`` (the same source as
(b)); a jitclass type cannot be cached, so the loop is compiled in every process."""

from __future__ import annotations

import math

from numba import float64
from numba.experimental import jitclass

from . import loops


@jitclass([])
class Logistic:
    def __init__(self):
        pass

    def value(self, y, z):
        t = -y * z
        return max(t, 0.0) + math.log1p(math.exp(-abs(t)))

    def deriv(self, y, z):
        return -y / (1.0 + math.exp(y * z))

    def lipschitz(self):
        return 0.25


@jitclass([])
class Squared:
    def __init__(self):
        pass

    def value(self, y, z):
        return 0.5 * (z - y) ** 2

    def deriv(self, y, z):
        return z - y

    def lipschitz(self):
        return 1.0


@jitclass([])
class GroupLasso:
    def __init__(self):
        pass

    def value(self, x, C):
        return C * x

    def prox(self, v, C):
        return max(v - C, 0.0)


@jitclass([("l1_ratio", float64)])
class ElasticNet:
    def __init__(self, l1_ratio):
        self.l1_ratio = l1_ratio

    def value(self, x, C):
        a = self.l1_ratio
        return C * (a * x + 0.5 * (1.0 - a) * x * x)

    def prox(self, v, C):
        a = self.l1_ratio
        return max(v - C * a, 0.0) / (1.0 + C * (1.0 - a))


def make_loss(name, **kw):
    return Logistic() if name == "logistic" else Squared()


def make_pen(name, **kw):
    return GroupLasso() if name == "grouplasso" else ElasticNet(kw.get("l1_ratio", 0.5))


fit = loops.fit
