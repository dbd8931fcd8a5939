r"""The operations on a Gram bank that SpicyMKL and the duality-gap code need (:class:`GramBank`).

Each is a sum or a concatenation over kernels, so it decomposes over any partition of the kernels
(Suzuki & Tomioka 2011, §3.5.2, eqs. 49–50).  :class:`ArrayBank` holds one (M, N, N) array and calls
the jitted loops of :mod:`mklkit._jit`; engines that read the array itself get a
:class:`BankAccessError` for other banks.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from .._jit import blocks
from .._jit import spicy as kspicy

__all__ = ["GramBank", "ArrayBank", "BankAccessError"]


class BankAccessError(TypeError):
    """An engine asked for the whole (M, N, N) array of a bank that is not kept as one."""


def _vec(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


class GramBank(abc.ABC):
    """A bank of ``M`` symmetric positive semidefinite Gram matrices on ``N`` points (arrays C-contiguous
    float64, indices int64)."""

    #: ``(M, N, N)``
    shape: tuple[int, int, int]
    #: Where the kernels are held: ``"array"``, ``"sharded"`` (Dask workers) or ``"factor"`` (factors L_m).
    representation: str = "array"

    @property
    def n_kernels(self) -> int:
        """M."""
        return int(self.shape[0])

    @property
    def n_samples(self) -> int:
        """N."""
        return int(self.shape[1])

    def as_array(self) -> np.ndarray:
        """The whole (M, N, N) array; banks that never hold it raise :class:`BankAccessError`."""
        raise BankAccessError(self._no_array_message())

    def _no_array_message(self) -> str:
        return f"{type(self).__name__} does not keep its kernels as one (M, N, N) array"

    @abc.abstractmethod
    def trace(self) -> np.ndarray:
        r""":math:`\mathrm{tr}\,K_m` for every kernel, (M,)."""

    @abc.abstractmethod
    def matvecs(self, v: np.ndarray) -> np.ndarray:
        r"""All products :math:`K_m v`, (M, N)."""

    def matmats(self, V: np.ndarray) -> np.ndarray:
        r"""All products :math:`K_mV` of the columns of ``V`` (N, K), (M, N, K); one
        :meth:`matvecs` per column unless a bank does better."""
        V = _vec(V)
        out = np.empty((self.shape[0], self.shape[1], V.shape[1]))
        for k in range(V.shape[1]):
            out[:, :, k] = self.matvecs(V[:, k])
        return out

    @abc.abstractmethod
    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""All :math:`K_m v` (M, N) and all :math:`\|w\|_{K_m}` (M,), in one pass."""

    @abc.abstractmethod
    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r""":math:`K_m d` (M, N), :math:`d^\top K_m\rho` and :math:`d^\top K_m d` (M,), with
        ``KR`` the rows :math:`K_m\rho` (SpicyMKL §3.5.1)."""

    @abc.abstractmethod
    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        r""":math:`H \mathrel{+}= \sum_p s_pK_{idx_p} + t_p r_pr_p^\top` in place (SpicyMKL eq. 50);
        ``KR`` (P, N) holds :math:`r_p`, ``block`` the rows per parallel task."""

    @abc.abstractmethod
    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`K_{idx_p}\alpha_p` for the rows ``A`` (P, N), (P, N)."""

    @abc.abstractmethod
    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        r""":math:`\|\alpha_m\|_{K_m}` of the rows of ``alpha`` (M, N), zero rows skipped, (M,)."""

    @abc.abstractmethod
    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        r""":math:`\|\rho\|_{K_m}` for every kernel (SpicyMKL eq. 45), (M,)."""

    @abc.abstractmethod
    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        r""":math:`\sum_{m\in idx}K_m\alpha_m` with ``alpha`` (M, N) (SpicyMKL eq. 7), (N,)."""


class ArrayBank(GramBank):
    """An in-memory bank: one C-contiguous (M, N, N) float64 array; the single-threaded loops below
    :data:`mklkit._jit.spicy.PARALLEL_WORK` entries read."""

    __slots__ = ("K", "shape", "_par", "_all")

    def __init__(self, K: np.ndarray) -> None:
        self.K = K
        self.shape = (int(K.shape[0]), int(K.shape[1]), int(K.shape[2]))
        self._par = K.shape[0] * K.shape[1] * K.shape[1] >= kspicy.PARALLEL_WORK
        self._all = np.arange(self.shape[0], dtype=np.int64)

    def __repr__(self) -> str:
        return f"ArrayBank(n_kernels={self.shape[0]}, n_samples={self.shape[1]})"

    def as_array(self) -> np.ndarray:
        return self.K

    def subset(self, keep: np.ndarray) -> "ArrayBank":
        """The bank of the kernels ``keep`` only (their Gram matrices copied)."""
        return ArrayBank(np.ascontiguousarray(self.K[keep]))

    def scaled(self, eta: np.ndarray) -> "ArrayBank":
        r"""The bank :math:`\eta_m K_m` (a new array), for weights :math:`\eta_m \ge 0`."""
        eta = np.asarray(eta, dtype=np.float64)
        return ArrayBank(np.ascontiguousarray(self.K * eta[:, None, None]))

    def trace(self) -> np.ndarray:
        return np.einsum("mii->m", self.K)

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        return blocks.matvecs_rows(self.K, _vec(v)[None, :], self._all)

    def matmats(self, V: np.ndarray) -> np.ndarray:
        """:math:`K_mV` for every kernel by one matrix product per kernel (BLAS)."""
        return np.matmul(self.K, _vec(V))

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fn = kspicy.matvecs_and_norms if self._par else kspicy.matvecs_and_norms_serial
        return fn(self.K, v, w)

    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fn = kspicy.direction_forms if self._par else kspicy.direction_forms_serial
        return fn(self.K, d, KR)

    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        N = self.shape[1]
        fn = kspicy.accumulate_hessian if idx.size * N * N >= kspicy.PARALLEL_WORK else kspicy.accumulate_hessian_serial
        fn(H, self.K, idx, s, KR, t, block)

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        N = self.shape[1]
        fn = blocks.matvecs_rows if idx.size * N * N >= kspicy.PARALLEL_WORK else blocks.matvecs_rows_serial
        return fn(self.K, A, idx)

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        return blocks.block_norms(self.K, _vec(alpha))

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return blocks.block_norms(self.K, _vec(rho)[None, :])

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return blocks.combine(self.K, _vec(alpha), idx)
