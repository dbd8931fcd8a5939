r"""The proximal-gradient engine's passes over the bank, on a dense array or on factors.

:class:`ArrayPasses` runs the jitted loops of :mod:`mklkit._jit.proximal`
on an (M, N, N) array; :class:`FactorPasses` runs the same passes on a
:class:`~mklkit.kernels.factor.FactorBank` through its O(N R) operations,
with no N x N array: the Lipschitz estimate (power iteration on
:math:`\sum_m K_m + \omega^{-1}\mathbf 1\mathbf 1^\top`), the Frobenius
norms of the screening bounds, the products :math:`K_mr` of a gradient step
and the certificate pass (:math:`K_m\alpha_m` and :math:`\|\rho\|_{K_m}`).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from .._jit import blocks
from .._jit import proximal as kprox
from ..kernels.factor import FactorBank
from . import common

__all__ = ["ArrayPasses", "FactorPasses", "passes_for", "lipschitz_estimate", "power_iteration", "PARALLEL_MIN_WORK"]

#: Reads of the bank smaller than this many multiply-adds (about a millisecond
#: on one core) run without threads: starting and synchronising a parallel
#: region costs more than the work.
PARALLEL_MIN_WORK = 1 << 21


def _parallel(n_blocks: int, N: int) -> bool:
    return n_blocks * N * N >= PARALLEL_MIN_WORK and numba.get_num_threads() > 1


def matvecs(K: np.ndarray, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:math:`K_m v` for ``m`` in ``idx`` (rows), threaded only for large reads."""
    if idx.size == 0:
        return np.zeros((0, K.shape[1]))
    if _parallel(idx.size, K.shape[1]):
        return blocks.matvecs_subset(K, v, idx)
    return blocks.matvecs_subset_serial(K, v, idx)


def certificate_pass(
    K: np.ndarray, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`mklkit._jit.proximal.certificate_pass`, threaded only for large reads."""
    fn = kprox.certificate_pass if _parallel(idx.size, K.shape[1]) else kprox.certificate_pass_serial
    return fn(K, idx, common.as_vector(A), arow, common.as_vector(rho), want)


def power_iteration(A: np.ndarray, n_iter: int = 50, rtol: float = 1e-6) -> float:
    r"""Largest eigenvalue of a symmetric positive semidefinite matrix, from below.

    Power iteration from the all-ones vector plus a small deterministic
    perturbation (the Perron vector of a kernel with positive entries is
    close to it); stops when the Rayleigh quotient changes by less than
    ``rtol`` relatively.  The Rayleigh quotient never exceeds
    :math:`\lambda_{\max}`; callers multiply by a safety factor.
    """
    n = A.shape[0]
    if n == 0:
        return 0.0
    x = np.ones(n) + 1e-3 * np.cos(np.arange(n) * 1.7)
    x /= np.linalg.norm(x)
    lam = 0.0
    for _ in range(max(1, int(n_iter))):
        y = A @ x
        new = float(x @ y)
        ny = float(np.linalg.norm(y))
        if not (ny > 0.0 and math.isfinite(ny)):
            return max(new, 0.0)
        x = y / ny
        if abs(new - lam) <= rtol * abs(new):
            lam = new
            break
        lam = new
    return max(lam, 0.0)


def lipschitz_estimate(S: Any, bias: bool, n_iter: int = 50) -> tuple[float, float]:
    r""":math:`\lambda_{\max}(S + \omega^{-1}\mathbf 1\mathbf 1^\top)` and the bias metric :math:`\omega`.

    ``S`` is :math:`\sum_m K_m` (an array, or an operator with ``shape``, ``@`` and
    ``+ c`` for :math:`+ c\mathbf 1\mathbf 1^\top`, e.g. through factors).  Without a bias, :math:`\omega = 1` and the
    value is :math:`\lambda_{\max}(S)`.  With a bias,
    :math:`\omega = N/\lambda_{\max}(S)`, so that the bias direction alone has
    curvature :math:`\lambda_{\max}(S)`; the result is at most
    :math:`2\lambda_{\max}(S)`.
    """
    n = S.shape[0]
    lam_s = power_iteration(S, n_iter)
    if not (lam_s > 0.0 and math.isfinite(lam_s)):
        lam_s = 1.0  # all kernels vanish: any positive scale will do
    if not bias:
        return lam_s, 1.0
    omega = n / lam_s
    A = S + (1.0 / omega)
    lam = power_iteration(A, n_iter)
    return max(lam, lam_s), omega


class SumOperator:
    r""":math:`\sum_m K_m + c\,\mathbf 1\mathbf 1^\top` of a factor bank as an operator:
    ``A @ x`` through the factors (:math:`O(NR)`), ``A + c`` adds :math:`c\mathbf 1\mathbf 1^\top`
    (what :func:`lipschitz_estimate` does with the dense sum)."""

    def __init__(self, bank: FactorBank, c: float = 0.0) -> None:
        self.bank = bank
        self.c = c
        self.shape = (bank.n_samples, bank.n_samples)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        out = self.bank.sum_matvec(x)
        return out + self.c * float(np.sum(x)) if self.c else out

    def __add__(self, c: float) -> "SumOperator":
        return SumOperator(self.bank, self.c + float(c))


class ArrayPasses:
    """The passes of the proximal engine over an (M, N, N) array: the jitted loops."""

    def __init__(self, K: np.ndarray) -> None:
        self.K = K

    def summary(self, bias: bool, n_iter: int) -> tuple[float, float, np.ndarray]:
        r""":math:`\lambda_{\max}`, :math:`\omega` (:func:`lipschitz_estimate`) and :math:`\|K_m\|_F`."""
        S, frob = kprox.bank_summary(self.K)
        lam, omega = lipschitz_estimate(S, bias, n_iter)
        return lam, omega, frob

    def matvecs(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return matvecs(self.K, v, idx)

    def certificate_pass(
        self, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return certificate_pass(self.K, idx, A, arow, rho, want)


class FactorPasses:
    r"""The same passes on a :class:`~mklkit.kernels.factor.FactorBank`, each :math:`O(NR)`
    or less (the Frobenius norms, once: :math:`O(N\sum_m r_m^2)`); no N x N array."""

    def __init__(self, bank: FactorBank) -> None:
        self.bank = bank

    def summary(self, bias: bool, n_iter: int) -> tuple[float, float, np.ndarray]:
        lam, omega = lipschitz_estimate(SumOperator(self.bank), bias, n_iter)
        return lam, omega, self.bank.frobenius_norms()

    def matvecs(self, v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.bank.matvecs_subset(v, idx)

    def certificate_pass(
        self, idx: np.ndarray, A: np.ndarray, arow: np.ndarray, rho: np.ndarray, want: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        KA = np.zeros((A.shape[0], self.bank.n_samples))
        has = arow >= 0
        if np.any(has):
            KA[arow[has]] = self.bank.matvecs_rows(common.as_vector(A[arow[has]]), idx[has])
        norms = np.zeros(idx.size)
        if np.any(want):
            norms[want] = self.bank.dual_block_norms_subset(rho, idx[want])
        return KA, norms


def passes_for(problem: Any) -> ArrayPasses | FactorPasses:
    """The passes for ``problem``'s bank: through the factors of a FactorBank, else on ``problem.K``."""
    bank = problem.bank
    return FactorPasses(bank) if isinstance(bank, FactorBank) else ArrayPasses(problem.K)
