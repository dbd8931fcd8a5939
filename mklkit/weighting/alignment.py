r"""Frobenius products of a bank's kernels, centred or not, on Gram and factor banks alike: what the alignment
weightings (ALIGNF, FHeuristic) read.

With :math:`H = I - \frac1N \mathbf 1\mathbf 1^\top` the centring matrix and :math:`K^c = HKH`,

.. math::
    M_{kl} = \langle K_k^c, K_l^c\rangle_F, \qquad a_k = \langle K_k^c, tt^\top\rangle_F = (Ht)^\top K_k (Ht).

A Gram bank gives :math:`M` in one matrix product of the flattened centred kernels with the flattened kernels
(:math:`\langle HK_kH, HK_lH\rangle = \langle HK_kH, K_l\rangle`, :math:`H` being a projection); a factor bank
:math:`K_k = L_kL_k^\top` gives it from the small matrix :math:`G = L^\top H L` of all factors,
:math:`M_{kl} = \|L_k^\top H L_l\|_F^2 = \|G_{kl}\|_F^2`, without an :math:`N \times N` matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

#: Flattened centred kernels held at once by :func:`centered_products` on a Gram bank (bytes).
_CHUNK_BYTES = 256 * 1024**2


def _is_factor(bank: Any) -> bool:
    return getattr(bank, "representation", "array") == "factor"


def gram_matrix(bank: Any, m: int) -> np.ndarray:
    r"""The Gram matrix :math:`K_m` (N, N) of one kernel of a Gram or factor bank (:math:`L_mL_m^\top`)."""
    if _is_factor(bank):
        B = bank.block(m)
        B = B.toarray() if sp.issparse(B) else np.asarray(B)
        return B.T @ B
    return np.asarray(bank.as_array()[m])


def frobenius_norms(bank: Any) -> np.ndarray:
    r""":math:`\|K_m\|_F` of every kernel, (M,) (a factor bank: :math:`\|L_m^\top L_m\|_F`)."""
    if _is_factor(bank):
        return np.asarray(bank.frobenius_norms(), dtype=np.float64)
    K = bank.as_array()
    return np.sqrt(np.einsum("mij,mij->m", K, K))


def target_products(bank: Any, t: np.ndarray, centered: bool = True) -> np.ndarray:
    r""":math:`\langle K_m, tt^\top\rangle_F = t^\top K_m t` of every kernel, (M,); ``centered``: of
    :math:`K_m^c`, i.e. :math:`(Ht)^\top K_m (Ht)`."""
    t = np.ascontiguousarray(t, dtype=np.float64)
    if centered:
        t = t - t.mean()
    return np.asarray(bank.dual_block_norms(t), dtype=np.float64) ** 2


def centered_products(bank: Any) -> np.ndarray:
    r"""The matrix :math:`M_{kl} = \langle K_k^c, K_l^c\rangle_F` (M, M) of a Gram or factor bank.

    Parameters
    ----------
    bank : ArrayBank or FactorBank
        The kernels :math:`K_m` (M, N, N), or their factors :math:`K_m = L_mL_m^\top`.

    Returns
    -------
    ndarray (M, M)
        Symmetric positive semi-definite.
    """
    if _is_factor(bank):
        return _factor_products(bank)
    K = bank.as_array()
    M, N = K.shape[0], K.shape[1]
    flat = K.reshape(M, N * N)
    out = np.empty((M, M))
    step = max(1, int(_CHUNK_BYTES // max(1, 8 * N * N)))
    for lo in range(0, M, step):
        hi = min(M, lo + step)
        C = K[lo:hi]
        rows, cols, total = C.mean(axis=2), C.mean(axis=1), C.mean(axis=(1, 2))
        Kc = C - rows[:, :, None] - cols[:, None, :] + total[:, None, None]
        out[lo:hi] = Kc.reshape(hi - lo, N * N) @ flat.T
    return 0.5 * (out + out.T)


def _factor_products(bank: Any) -> np.ndarray:
    LT, starts = bank.LT, np.asarray(bank.starts)
    N = bank.shape[1]
    mu = np.asarray(LT.mean(axis=1)).ravel()
    G = LT @ LT.T
    G = (G.toarray() if sp.issparse(G) else np.asarray(G)) - N * np.outer(mu, mu)
    S = G * G
    M = starts.size - 1
    out = np.zeros((M, M))
    for k in range(M):
        rows = S[starts[k] : starts[k + 1]].sum(axis=0)
        for m in range(M):
            out[k, m] = rows[starts[m] : starts[m + 1]].sum()
    return 0.5 * (out + out.T)
