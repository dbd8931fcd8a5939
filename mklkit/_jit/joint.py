r"""The jitted sweep of the joint multiclass block coordinate descent (:mod:`mklkit.engines.joint.descent`) on
a dense factor bank: every block in turn takes the prox step of the loss majorized with its own curvature,
with the loss's gradient and the regularizer's prox passed in as compiled functions
(:func:`~mklkit.first_class.first_class`)."""

import math

import numpy as np
from numba import njit, types

from .records import REG_FN

_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
#: A multiclass loss kernel ``grad(y, F, params)`` (N, K) passed into the sweep.
MULTICLASS_GRAD = types.FunctionType(_F2(_F1, _F2, _F1))


@njit(
    types.int64(_F2, types.int64[::1], _F1, _F2, _F2, _F1, _F1, MULTICLASS_GRAD, _F1, REG_FN, types.float64, _F1),
    cache=True,
)
def descent_sweep(LT, starts, lip, beta, F, y, w, grad, lparams, prox, C, rparams):  # pragma: no cover - jitted
    r"""One sweep over the blocks ``LT[starts[m]:starts[m + 1]]`` (:math:`L_m^\top`): with :math:`G` the
    weighted loss gradient at ``F``, :math:`\beta_m \leftarrow \mathrm{prox}_{\tilde g_C/\lambda_m}(\|z\|)
    z/\|z\|`, :math:`z = \beta_m - L_m^\top G/\lambda_m`, and ``F`` moved by :math:`L_m\Delta\beta_m`; ``beta``
    (R, K) and ``F`` (N, K) in place.  Returns the number of blocks that moved."""
    M = starts.shape[0] - 1
    N, K = F.shape
    G = grad(y, F, lparams)
    for i in range(N):
        for k in range(K):
            G[i, k] *= w[i]
    moved = 0
    norm = np.empty(1)
    for m in range(M):
        a, e = starts[m], starts[m + 1]
        if e == a or lip[m] <= 0.0:
            continue
        B = LT[a:e]
        z = beta[a:e] - (B @ G) / lip[m]
        nz = math.sqrt(np.sum(z * z))
        scale = 0.0
        if nz > 0.0:
            norm[0] = nz
            scale = prox(norm, C / lip[m], rparams)[0] / nz
        step = scale * z - beta[a:e]
        if not np.any(step != 0.0):
            continue
        beta[a:e] += step
        F += B.T @ step
        G = grad(y, F, lparams)
        for i in range(N):
            for k in range(K):
                G[i, k] *= w[i]
        moved += 1
    return moved
