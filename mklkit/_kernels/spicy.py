r"""Jitted loops of the SpicyMKL dual Newton method (Suzuki & Tomioka 2011, §4.3).

The dual objective of the one-step method is

.. math::
    F(\rho) = \sum_i \ell^*(y_i, -\rho_i) + \sum_m G(\|\rho\|_{K_m}),
    \qquad G = \tilde g_C^*,

whose regularizer part has the gradient (49) and Hessian (50)

.. math::
    \nabla = \sum_{m \in M_+} s_m K_m\rho, \qquad
    \nabla^2 = \sum_{m \in M_+} s_m K_m + t_m (K_m\rho)(K_m\rho)^\top,

with :math:`s_m = G'(n_m)/n_m`, :math:`t_m = (G''(n_m) - s_m)/n_m^2` and
:math:`n_m = \|\rho\|_{K_m}`; only the active kernels :math:`M_+` contribute.
Arrays are C-contiguous float64 (indices int64).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["accumulate_hessian", "direction_forms"]

_FM = {"reassoc", "contract"}


@njit(cache=True, parallel=True, fastmath=_FM)
def accumulate_hessian(
    H: np.ndarray,
    K: np.ndarray,
    idx: np.ndarray,
    s: np.ndarray,
    KR: np.ndarray,
    t: np.ndarray,
    block: int,
) -> None:  # pragma: no cover - jitted
    r"""Add the active-set regularizer Hessian (SpicyMKL eq. 50) to ``H`` in place.

    .. math::
        H \mathrel{+}= \sum_{p} s_p K_{idx_p} + t_p\, r_p r_p^\top,
        \qquad r_p = K_{idx_p}\rho

    Parallel over blocks of ``block`` rows of ``H`` (no reduction across
    threads); each thread streams the same rows of every active kernel.

    Parameters
    ----------
    H : ndarray (N, N)
        Accumulator, modified in place.
    K : ndarray (M, N, N)
    idx : ndarray (P,) of int64
        Active kernels.
    s, t : ndarray (P,)
        Coefficients of :math:`K_m` and of the rank-one term.
    KR : ndarray (P, N)
        Row ``p`` is :math:`K_{idx_p}\rho`.
    block : int
        Rows per parallel task (>= 1).
    """
    N = H.shape[0]
    P = idx.shape[0]
    B = max(block, 1)
    nb = (N + B - 1) // B
    for blk in prange(nb):
        i0 = blk * B
        i1 = min(N, i0 + B)
        for p in range(P):
            m = idx[p]
            sp = s[p]
            for i in range(i0, i1):
                ti = t[p] * KR[p, i]
                for j in range(N):
                    H[i, j] += sp * K[m, i, j] + ti * KR[p, j]


@njit(cache=True, parallel=True, fastmath=_FM)
def direction_forms(
    K: np.ndarray, d: np.ndarray, KR: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""Products and quadratic forms for a line search along ``d`` (SpicyMKL §3.5.1).

    For every kernel, :math:`\|\rho + c\,d\|_{K_m}^2 = a_m + 2c\,b_m + c^2 e_m`
    with :math:`a_m = \rho^\top K_m\rho`, :math:`b_m = d^\top K_m\rho` and
    :math:`e_m = d^\top K_m d`; one pass over the bank gives every trial
    norm of the back-tracking in O(M).

    Parameters
    ----------
    K : ndarray (M, N, N)
    d : ndarray (N,)
        Search direction.
    KR : ndarray (M, N)
        Row ``m`` is :math:`K_m\rho`.

    Returns
    -------
    KD : ndarray (M, N)
        Row ``m`` is :math:`K_m d`.
    b, e : ndarray (M,)
    """
    M = K.shape[0]
    N = K.shape[1]
    KD = np.empty((M, N))
    b = np.empty(M)
    e = np.empty(M)
    for m in prange(M):
        bm = 0.0
        em = 0.0
        for i in range(N):
            s = 0.0
            for j in range(N):
                s += K[m, i, j] * d[j]
            KD[m, i] = s
            em += d[i] * s
            bm += d[i] * KR[m, i]
        b[m] = bm
        e[m] = em
    return KD, b, e
