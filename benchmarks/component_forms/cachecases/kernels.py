"""A kernel in a class body, a jitted closure made by a factory, and a generic loop that
takes the kernel as a dispatcher argument."""

import math

import numpy as np
from numba import njit


class Logistic:
    @staticmethod
    @njit(cache=True)
    def deriv(y, z, params):  # pragma: no cover - jitted
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = -y[i] / (1.0 + math.exp(y[i] * z[i]))
        return out


@njit(cache=True)
def logistic_deriv_scalar(y, z, params):  # pragma: no cover - jitted
    return -y / (1.0 + math.exp(y * z))


def vectorized(f):
    """The array form of a scalar kernel, as a jitted closure."""

    @njit(cache=True)
    def vec(y, z, params):  # pragma: no cover - jitted
        out = np.empty(y.shape[0])
        for i in range(y.shape[0]):
            out[i] = f(y[i], z[i], params)
        return out

    return vec


logistic_deriv_closure = vectorized(logistic_deriv_scalar)


@njit(cache=True)
def map_kernel(f, y, z, params):  # pragma: no cover - jitted
    """The array form of any scalar kernel given as an argument."""
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        out[i] = f(y[i], z[i], params)
    return out
