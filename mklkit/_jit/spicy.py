r"""Jitted loops of the SpicyMKL dual Newton methods (Suzuki & Tomioka 2011, §3–4).

Both methods minimize a function of ρ whose regularizer part is a sum over
kernels of a function of one block norm: :math:`G(\|\rho\|_{K_m})` with
:math:`G = \tilde g_C^*` (one-step method, §4.3) or
:math:`\gamma^{-1}\,\widehat{\tilde g^*_{\gamma C}}(\|\alpha_m + \gamma\rho\|_{K_m})`
(iterative method, eq. 47).  In both cases the gradient and Hessian have the
form (eqs. 26–27, 49–50)

.. math::
    \nabla = \sum_{m \in M_+} w_m r_m, \qquad
    \nabla^2 = \sum_{m \in M_+} s_m K_m + t_m\, r_m r_m^\top,

with per-kernel scalars :math:`s_m, t_m` and vectors :math:`r_m = K_m v_m`;
only the active kernels :math:`M_+` contribute.  The loops here read the
bank once per call: Hessian accumulation over the active kernels, the
products and quadratic forms a line search needs, and the resynchronization
of the running products :math:`K_m\rho` together with the norms of the
projected dual point.  Each parallel loop (over kernels or row blocks) is
also compiled without threads (``<name>_serial``), for small banks
(:data:`PARALLEL_WORK`).
Arrays are C-contiguous float64 (indices int64).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .blocks import matvec_and_norm_into
from .twins import parallel_and_serial

__all__ = [
    "accumulate_hessian",
    "direction_forms",
    "matvecs_and_norms",
    "env_forms",
    "accumulate_hessian_serial",
    "direction_forms_serial",
    "matvecs_and_norms_serial",
    "PARALLEL_WORK",
]

#: Bank size (``M * N * N`` entries read) from which the engines use the
#: multi-threaded loops; below it the start-up of the threads costs more than
#: it saves (and much more when the cores are busy with other work).
PARALLEL_WORK = 4_000_000

_FM = {"reassoc", "contract"}


# -- one block of rows or one kernel: the bodies of the loops below (compiled
# into them, no Python in between)
@njit(cache=True, fastmath=_FM)
def _hessian_rows(
    H: np.ndarray, K: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, i0: int, i1: int
) -> None:  # pragma: no cover - jitted
    """Rows ``i0:i1`` of :func:`accumulate_hessian`, streaming every active kernel."""
    N = H.shape[0]
    for p in range(idx.shape[0]):
        m = idx[p]
        sp = s[p]
        for i in range(i0, i1):
            ti = t[p] * KR[p, i]
            for j in range(N):
                H[i, j] += sp * K[m, i, j] + ti * KR[p, j]


@njit(cache=True, fastmath=_FM)
def _direction_block(
    K: np.ndarray, m: int, d: np.ndarray, KRm: np.ndarray, KDm: np.ndarray
) -> tuple[float, float]:  # pragma: no cover - jitted
    r"""Kernel ``m`` of :func:`direction_forms`: ``KDm`` :math:`\leftarrow K_m d`; returns
    :math:`(d^\top K_m\rho, d^\top K_m d)` with ``KRm`` :math:`= K_m\rho`."""
    N = K.shape[1]
    bm = 0.0
    em = 0.0
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += K[m, i, j] * d[j]
        KDm[i] = s
        em += d[i] * s
        bm += d[i] * KRm[i]
    return bm, em


def accumulate_hessian(
    H: np.ndarray, K: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
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
    B = max(block, 1)
    for blk in prange((N + B - 1) // B):
        _hessian_rows(H, K, idx, s, KR, t, blk * B, min(N, blk * B + B))


accumulate_hessian, accumulate_hessian_serial = parallel_and_serial(accumulate_hessian, fastmath=_FM)


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
    KD = np.empty((M, K.shape[1]))
    b = np.empty(M)
    e = np.empty(M)
    for m in prange(M):
        bm, em = _direction_block(K, m, d, KR[m], KD[m])
        b[m] = bm
        e[m] = em
    return KD, b, e


direction_forms, direction_forms_serial = parallel_and_serial(direction_forms, fastmath=_FM)


def matvecs_and_norms(
    K: np.ndarray, v: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""One pass over the bank: all :math:`K_m v` and all :math:`\|w\|_{K_m}`.

    The iterative method resynchronizes its running products
    :math:`K_m\rho` and evaluates the duality gap at the projected dual
    point :math:`w` (SpicyMKL §6.1) with a single read of every Gram matrix.

    Parameters
    ----------
    K : ndarray (M, N, N)
    v, w : ndarray (N,)

    Returns
    -------
    KV : ndarray (M, N)
        Row ``m`` is :math:`K_m v`.
    norms : ndarray (M,)
        :math:`\sqrt{\max(w^\top K_m w, 0)}`.
    """
    M = K.shape[0]
    KV = np.empty((M, K.shape[1]))
    norms = np.empty(M)
    for m in prange(M):
        norms[m] = matvec_and_norm_into(K, m, v, w, KV[m])
    return KV, norms


matvecs_and_norms, matvecs_and_norms_serial = parallel_and_serial(matvecs_and_norms, fastmath=_FM)


@njit(cache=True, fastmath=_FM)
def env_forms(
    KR: np.ndarray, rho: np.ndarray, idx: np.ndarray, A: np.ndarray, aa: np.ndarray, gamma: float
) -> np.ndarray:  # pragma: no cover - jitted
    r"""Squared norms :math:`\|\alpha_m + \gamma\rho\|_{K_m}^2` from running products.

    .. math::
        \|\alpha_m + \gamma\rho\|_{K_m}^2 = \alpha_m^\top K_m\alpha_m
            + 2\gamma\,\alpha_m^\top K_m\rho + \gamma^2\rho^\top K_m\rho

    (SpicyMKL eq. 47); only the kernels in ``idx`` have :math:`\alpha_m \ne 0`.

    Parameters
    ----------
    KR : ndarray (M, N)
        Row ``m`` is :math:`K_m\rho`.
    rho : ndarray (N,)
    idx : ndarray (P,) of int64
        Kernels with a non-zero block.
    A : ndarray (P, N)
        Their :math:`\alpha_m`.
    aa : ndarray (P,)
        :math:`\alpha_m^\top K_m\alpha_m`.
    gamma : float

    Returns
    -------
    ndarray (M,)
        The squared norms (clipped at 0).
    """
    M = KR.shape[0]
    N = KR.shape[1]
    out = np.empty(M)
    g2 = gamma * gamma
    for m in range(M):
        s = 0.0
        for i in range(N):
            s += KR[m, i] * rho[i]
        out[m] = g2 * s
    for p in range(idx.shape[0]):
        m = idx[p]
        s = 0.0
        for i in range(N):
            s += A[p, i] * KR[m, i]
        v = out[m] + aa[p] + 2.0 * gamma * s
        out[m] = v if v > 0.0 else 0.0
    for m in range(M):
        if out[m] < 0.0:
            out[m] = 0.0
    return out
