r"""Jitted passes over a Gram bank for SpicyMKL's Newton methods (Suzuki & Tomioka 2011, §3-4):
the Hessian over the active kernels (eqs. 27, 50), the forms of a line search and the
resynchronization of :math:`K_m\rho`; ``<name>_serial`` twins for small banks.
"""

import numpy as np
from numba import njit, prange

from .blocks import FM, matvec_and_norm_into, parallel_and_serial


#: Entries read (``M * N * N``) from which the multi-threaded loops pay for their start-up.
PARALLEL_WORK = 4_000_000


@njit(cache=True, fastmath=FM)
def _hessian_rows(H, K, idx, s, KR, t, i0, i1):  # pragma: no cover - jitted
    """Rows ``i0:i1`` of :func:`accumulate_hessian`, streaming every active kernel."""
    N = H.shape[0]
    for p in range(idx.shape[0]):
        m = idx[p]
        sp = s[p]
        for i in range(i0, i1):
            ti = t[p] * KR[p, i]
            for j in range(N):
                H[i, j] += sp * K[m, i, j] + ti * KR[p, j]


@njit(cache=True, fastmath=FM)
def _direction_block(K, m, d, KRm, KDm):  # pragma: no cover - jitted
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


def accumulate_hessian(H, K, idx, s, KR, t, block):  # pragma: no cover - jitted
    r"""``H += sum_p s_p K_{idx_p} + t_p r_p r_p^T`` in place, ``r_p = KR[p]`` (SpicyMKL eq. 50),
    parallel over blocks of ``block`` rows."""
    N = H.shape[0]
    B = max(block, 1)
    for blk in prange((N + B - 1) // B):
        _hessian_rows(H, K, idx, s, KR, t, blk * B, min(N, blk * B + B))


accumulate_hessian, accumulate_hessian_serial = parallel_and_serial(accumulate_hessian, fastmath=FM)


def direction_forms(K, d, KR):  # pragma: no cover - jitted
    r"""``(KD, b, e)``: :math:`K_md`, :math:`d^\top K_m\rho` and :math:`d^\top K_md` for every
    kernel (``KR[m]`` :math:`= K_m\rho`), so every trial norm of a line search costs O(1)."""
    M = K.shape[0]
    KD = np.empty((M, K.shape[1]))
    b = np.empty(M)
    e = np.empty(M)
    for m in prange(M):
        bm, em = _direction_block(K, m, d, KR[m], KD[m])
        b[m] = bm
        e[m] = em
    return KD, b, e


direction_forms, direction_forms_serial = parallel_and_serial(direction_forms, fastmath=FM)


def matvecs_and_norms(K, v, w):  # pragma: no cover - jitted
    r"""``(KV, norms)``: every :math:`K_mv` and :math:`\|w\|_{K_m}` in one pass over the bank."""
    M = K.shape[0]
    KV = np.empty((M, K.shape[1]))
    norms = np.empty(M)
    for m in prange(M):
        norms[m] = matvec_and_norm_into(K, m, v, w, KV[m])
    return KV, norms


matvecs_and_norms, matvecs_and_norms_serial = parallel_and_serial(matvecs_and_norms, fastmath=FM)


@njit(cache=True, fastmath=FM)
def env_forms(KR, rho, idx, A, aa, gamma):  # pragma: no cover - jitted
    r""":math:`\|\alpha_m + \gamma\rho\|_{K_m}^2` (clipped at 0) from ``KR[m]`` :math:`= K_m\rho`;
    the blocks ``idx`` have :math:`\alpha_m` = ``A`` with ``aa`` :math:`= \alpha_m^\top K_m\alpha_m` (eq. 47)."""
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
