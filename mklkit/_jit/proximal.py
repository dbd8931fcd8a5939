r"""Jitted loops of the proximal-gradient engine (:mod:`mklkit.engines.proximal`) besides the
products :math:`K_mr` (:mod:`mklkit._jit.blocks`): one read of the bank for
:math:`\sum_m K_m` and :math:`\|K_m\|_F`, the certificate pass, and the per-block
arithmetic of a step on the compact iterates (non-zero blocks with :math:`u_m = K_m\alpha_m`).
"""

import numpy as np
from numba import njit, prange

from .blocks import FM, block_norm, matvec_and_norm_into, matvec_into, parallel_and_serial


@njit(cache=True, parallel=True, fastmath=FM)
def bank_summary(K):  # pragma: no cover - jitted
    r""":math:`\sum_m K_m` and :math:`\|K_m\|_F \ge \lambda_{\max}(K_m)` in one read (parallel
    over rows: no reduction crosses threads)."""
    M = K.shape[0]
    N = K.shape[1]
    S = np.zeros((N, N))
    sq = np.zeros((N, M))
    for i in prange(N):
        for m in range(M):
            acc = 0.0
            for j in range(N):
                v = K[m, i, j]
                S[i, j] += v
                acc += v * v
            sq[i, m] = acc
    frob = np.empty(M)
    for m in range(M):
        t = 0.0
        for i in range(N):
            t += sq[i, m]
        frob[m] = np.sqrt(t)
    return S, frob


@njit(cache=True, fastmath=FM)
def _certificate_block(K, m, a, A, rho, want, KA):  # pragma: no cover - jitted
    """One kernel of :func:`certificate_pass`; returns the norm (0 if not wanted)."""
    if a >= 0 and want:
        return matvec_and_norm_into(K, m, A[a], rho, KA[a])
    if a >= 0:
        matvec_into(K, m, A[a], KA[a])
        return 0.0
    if want:
        return block_norm(K, m, rho)
    return 0.0


def certificate_pass(K, idx, A, arow, rho, want_norm):  # pragma: no cover - jitted
    r""":math:`K_m\alpha_m` (row ``arow[p]`` of ``A``, if >= 0) and :math:`\|\rho\|_{K_m}` (if
    ``want_norm[p]``, else 0) for every ``m = idx[p]``, in one read; parallel over kernels."""
    P = idx.shape[0]
    KA = np.zeros((A.shape[0], K.shape[1]))
    norms = np.zeros(P)
    for p in prange(P):
        norms[p] = _certificate_block(K, idx[p], arow[p], A, rho, want_norm[p], KA)
    return KA, norms


certificate_pass, certificate_pass_serial = parallel_and_serial(certificate_pass, fastmath=FM)


@njit(cache=True, fastmath=FM)
def extrapolate(xrow, xA, xU, prow, pA, pU, beta):  # pragma: no cover - jitted
    r"""The FISTA point :math:`v = x + \beta(x - x_{prev})` and :math:`Kv` on a set of blocks,
    whose rows in the compact iterates are ``xrow``, ``prow`` (-1: zero there)."""
    P = xrow.shape[0]
    N = xA.shape[1]
    V = np.zeros((P, N))
    UV = np.zeros((P, N))
    c1 = 1.0 + beta
    for p in range(P):
        a = xrow[p]
        q = prow[p]
        if a >= 0:
            for j in range(N):
                V[p, j] = c1 * xA[a, j]
                UV[p, j] = c1 * xU[a, j]
        if q >= 0 and beta != 0.0:
            for j in range(N):
                V[p, j] -= beta * pA[q, j]
                UV[p, j] -= beta * pU[q, j]
    return V, UV


@njit(cache=True, fastmath=FM)
def gradient_step(V, UV, r, KR, eta):  # pragma: no cover - jitted
    r""":math:`w_m = v_m - \eta r`, :math:`K_mw_m = K_mv_m - \eta K_mr` and :math:`\|w_m\|_{K_m}`."""
    P = V.shape[0]
    N = V.shape[1]
    W = np.empty((P, N))
    KW = np.empty((P, N))
    norms = np.empty(P)
    for p in range(P):
        acc = 0.0
        for j in range(N):
            w = V[p, j] - eta * r[j]
            kw = UV[p, j] - eta * KR[p, j]
            W[p, j] = w
            KW[p, j] = kw
            acc += w * kw
        norms[p] = np.sqrt(acc) if acc > 0.0 else 0.0
    return W, KW, norms


@njit(cache=True, fastmath=FM)
def prox_finish(s, W, KW, V, UV, xrow, xU):  # pragma: no cover - jitted
    r""":math:`\alpha^+_m = s_mw_m`, :math:`u^+_m = s_mK_mw_m`, their sum ``f`` over blocks,
    ``dist2`` :math:`= \|x^+ - v\|^2` and ``ip`` :math:`= \langle v - x^+, x^+ - x\rangle` in
    the product RKHS (``xU``: the current iterate's rows, ``xrow`` -1 where zero)."""
    P = W.shape[0]
    N = W.shape[1]
    A = np.empty((P, N))
    U = np.empty((P, N))
    f = np.zeros(N)
    dist2 = 0.0
    ip = 0.0
    for p in range(P):
        sp = s[p]
        a = xrow[p]
        for j in range(N):
            an = sp * W[p, j]
            un = sp * KW[p, j]
            A[p, j] = an
            U[p, j] = un
            f[j] += un
            dv = an - V[p, j]
            dist2 += dv * (un - UV[p, j])
            if a >= 0:
                ip -= dv * (un - xU[a, j])
            else:
                ip -= dv * un
    return A, U, f, dist2, ip
