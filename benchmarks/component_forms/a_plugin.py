"""A plugin loss for (a), in another module: the smoothed (Huberized) hinge."""

import numpy as np
from numba import njit

from .a_current import LOSS_FN, Component


@njit(cache=True)
def smooth_hinge_value(y, z, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        m = 1.0 - y[i] * z[i]
        if m <= 0.0:
            out[i] = 0.0
        elif m <= delta:
            out[i] = 0.5 * m * m / delta
        else:
            out[i] = m - 0.5 * delta
    return out


@njit(cache=True)
def smooth_hinge_deriv(y, z, params):
    delta = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = -y[i] * min(max((1.0 - y[i] * z[i]) / delta, 0.0), 1.0)
    return out


def make(delta=0.5):
    return Component([(smooth_hinge_value, LOSS_FN), (smooth_hinge_deriv, LOSS_FN)], [delta], 1.0 / delta)
