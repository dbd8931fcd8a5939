r"""Jitted loops of the proximal-gradient engine (Mosci et al. 2008; FISTA).

The engine keeps, for every non-zero block, the coefficients
:math:`\alpha_m` and their image :math:`u_m = K_m\alpha_m`; one iteration
then needs a single product :math:`K_m r` per block that is not screened
(``mklkit._jit.blocks.matvecs_subset``).  The loops here are the other
passes over the Gram bank:

* :func:`bank_summary`: :math:`\sum_m K_m` (for the Lipschitz constant) and
  the Frobenius norms :math:`\|K_m\|_F \ge \lambda_{\max}(K_m)` (for the
  screening bounds), in one read of the bank;
* :func:`certificate_pass`: at a duality-gap check, :math:`K_m\alpha_m` for the
  non-zero blocks (exact predictions, no drift) and the dual block norms
  :math:`\|\rho\|_{K_m}` for the blocks that need them, in one read of each
  Gram matrix involved.

All arrays are C-contiguous float64 (indices int64) so that the cached
signatures match.  Norms are ``sqrt(max(q, 0))`` of the quadratic form.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .blocks import block_norm, matvec_and_norm_into, matvec_into
from .twins import parallel_and_serial

__all__ = ["bank_summary", "certificate_pass", "certificate_pass_serial", "extrapolate", "gradient_step", "prox_finish"]

#: Let LLVM reassociate the inner dot products so that they vectorize; no
#: assumption about NaN or inf is made (those flags stay off).
_FM = {"reassoc", "contract"}


@njit(cache=True, parallel=True, fastmath=_FM)
def bank_summary(K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""The sum :math:`\sum_m K_m` and the Frobenius norms :math:`\|K_m\|_F`.

    Parallel over rows, so that no reduction crosses threads; the bank is
    read once.

    Parameters
    ----------
    K : ndarray (M, N, N)

    Returns
    -------
    S : ndarray (N, N)
        :math:`\sum_m K_m`.
    frob : ndarray (M,)
        :math:`\|K_m\|_F`, an upper bound of :math:`\lambda_{\max}(K_m)` for a
        positive semidefinite :math:`K_m`.
    """
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


@njit(cache=True, fastmath=_FM)
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


def certificate_pass(
    K: np.ndarray, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want_norm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""Products :math:`K_m\alpha_m` and dual norms :math:`\|\rho\|_{K_m}` in one read.

    For every ``p``, kernel ``m = idx[p]`` is read once; if ``arow[p] >= 0``
    the product :math:`K_m A_{arow[p]}` is stored in row ``arow[p]`` of the
    first output, and if ``want_norm[p]`` the norm :math:`\|\rho\|_{K_m}` in
    entry ``p`` of the second (0 otherwise).  Parallel over kernels;
    :func:`certificate_pass_serial` is the same loop without threads.

    Parameters
    ----------
    K : ndarray (M, N, N)
    idx : ndarray (P,) of int64
    A : ndarray (Q, N)
        Coefficient rows :math:`\alpha_m`.
    arow : ndarray (P,) of int64
        Row of ``A`` belonging to ``idx[p]``, or -1.
    rho : ndarray (N,)
    want_norm : ndarray (P,) of bool

    Returns
    -------
    KA : ndarray (Q, N)
    norms : ndarray (P,)
    """
    P = idx.shape[0]
    KA = np.zeros((A.shape[0], K.shape[1]))
    norms = np.zeros(P)
    for p in prange(P):
        norms[p] = _certificate_block(K, idx[p], arow[p], A, rho, want_norm[p], KA)
    return KA, norms


certificate_pass, certificate_pass_serial = parallel_and_serial(certificate_pass, fastmath=_FM)


@njit(cache=True, fastmath=_FM)
def extrapolate(
    xrow: np.ndarray, xA: np.ndarray, xU: np.ndarray, prow: np.ndarray, pA: np.ndarray, pU: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""FISTA point :math:`v = x + \beta(x - x_{prev})` and :math:`K v`, on a set of blocks.

    Row ``p`` of the outputs belongs to the ``p``-th block of the set; its
    rows in the compact iterates are ``xrow[p]`` and ``prow[p]`` (-1 where
    the block is zero in that iterate).

    Returns
    -------
    V, UV : ndarray (P, N)
    """
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


@njit(cache=True, fastmath=_FM)
def gradient_step(
    V: np.ndarray, UV: np.ndarray, r: np.ndarray, KR: np.ndarray, eta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - jitted
    r"""The gradient step :math:`w_m = v_m - \eta r` with :math:`K_m w_m` and :math:`\|w_m\|_{K_m}`.

    :math:`K_m w_m = K_m v_m - \eta K_m r` needs no product with :math:`K_m`.

    Returns
    -------
    W, KW : ndarray (P, N)
    norms : ndarray (P,)
    """
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


@njit(cache=True, fastmath=_FM)
def prox_finish(
    s: np.ndarray, W: np.ndarray, KW: np.ndarray, V: np.ndarray, UV: np.ndarray, xrow: np.ndarray, xU: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:  # pragma: no cover - jitted
    r"""Scale the blocks by the prox factors and collect what the step test needs.

    With :math:`\alpha^+_m = s_m w_m` and :math:`u^+_m = s_m K_m w_m`:

    * ``f``: :math:`\sum_m u^+_m` (the new prediction without the bias);
    * ``dist2``: :math:`\sum_m (\alpha^+_m - v_m)^\top(u^+_m - u_{v,m})
      = \|x^+ - v\|^2` in the product RKHS;
    * ``ip``: :math:`\sum_m (v_m - \alpha^+_m)^\top(u^+_m - u_{x,m})
      = \langle v - x^+, x^+ - x\rangle` (gradient restart test), ``xU`` being
      the rows :math:`K_m\alpha_m` of the current iterate (``xrow[p] = -1``
      where it is zero).

    Returns
    -------
    A, U : ndarray (P, N)
    f : ndarray (N,)
    dist2, ip : float
    """
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
