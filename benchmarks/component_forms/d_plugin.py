"""A plugin loss for (d), in another module: the smoothed (Huberized) hinge."""

from numba import njit

from .a_plugin import smooth_hinge_deriv as vec_deriv
from .a_plugin import smooth_hinge_value as vec_value
from .d_record import loss_record


@njit(cache=True)
def smooth_hinge_value(y, z, params):
    delta = params[0]
    m = 1.0 - y * z
    if m <= 0.0:
        return 0.0
    if m <= delta:
        return 0.5 * m * m / delta
    return m - 0.5 * delta


@njit(cache=True)
def smooth_hinge_deriv(y, z, params):
    return -y * min(max((1.0 - y * z) / params[0], 0.0), 1.0)


def make(delta=0.5, scalar=False):
    if scalar:
        return loss_record(smooth_hinge_value, smooth_hinge_deriv, [delta], 1.0 / delta, True)
    return loss_record(vec_value, vec_deriv, [delta], 1.0 / delta, False)
