r"""Scalar roots shared by the built-in regularizers' kernels (compiled with numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["INF", "solve_power_eq", "lambertw0"]

INF = np.inf


@njit(cache=True)
def solve_power_eq(v, c, k):
    r"""Root :math:`t \in [0, v]` of :math:`t + c t^k = v` for ``v >= 0``, ``c > 0``, ``k >= 1``.

    The left side is convex and increasing, so Newton's method started at a
    point where it is non-negative decreases monotonically to the root.
    The start :math:`\min(v, (v/c)^{1/k})` already satisfies that and is
    close to the root when the power term dominates.
    """
    if v <= 0.0:
        return 0.0
    t = min(v, (v / c) ** (1.0 / k))
    for _ in range(200):
        f = t + c * t**k - v
        if f <= 0.0:
            break
        fp = 1.0 + c * k * t ** (k - 1.0)
        step = f / fp
        t_new = t - step
        if t_new <= 0.0:
            t_new = 0.5 * t
        if abs(t - t_new) <= 1e-15 * max(t, 1e-300):
            t = t_new
            break
        t = t_new
    return t


@njit(cache=True)
def lambertw0(z):
    r"""Principal branch :math:`W_0(z)` for ``z >= 0`` (Halley's iteration)."""
    if z == 0.0:
        return 0.0
    if z < 3.0:
        w = np.log1p(z)
    else:
        lz = np.log(z)
        w = lz - np.log(lz)
    for _ in range(60):
        ew = np.exp(w)
        f = w * ew - z
        wp1 = w + 1.0
        denom = ew * wp1 - (w + 2.0) * f / (2.0 * wp1)
        dw = f / denom
        w -= dw
        if abs(dw) <= 1e-15 * (1.0 + abs(w)):
            break
    return w
