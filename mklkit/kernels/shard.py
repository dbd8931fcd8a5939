"""One shard of a :class:`~mklkit.kernels.sharded.ShardedBank`: kernels built and held on one Dask worker."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .build import KernelBank
from .ops import ArrayBank


class _Shard:
    """The kernels ``lo .. lo + M_w - 1`` of a bank, built and held on one worker (a Dask actor)."""

    def __init__(
        self,
        X: Any,
        entries: list[dict[str, Any]],
        normalize: str,
        lo: int,
        memory_budget_bytes: float | None,
        resolve: Any,
    ) -> None:
        bank = KernelBank.build(
            X, entries, normalize=normalize, progress=False, memory_budget_bytes=memory_budget_bytes, resolve=resolve
        )
        self.K = bank.K
        self.lo = int(lo)
        self.raw_traces = np.asarray(bank.traces, dtype=np.float64)
        self.raw_diag = bank.train_diag
        self.ops = ArrayBank(self.K)
        del bank

    def info(self) -> dict[str, Any]:
        from distributed import get_worker

        try:
            address = get_worker().address
        except ValueError:
            address = ""
        return {
            "lo": self.lo,
            "n_kernels": int(self.K.shape[0]),
            "nbytes": int(self.K.nbytes),
            "pid": os.getpid(),
            "worker": address,
        }

    def gather(self) -> np.ndarray:
        return self.K

    def constants(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The shard's traces and (``"diagonal"``) diagonals before normalisation."""
        return self.raw_traces, self.raw_diag

    def trace(self) -> np.ndarray:
        return self.ops.trace()

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        return self.ops.matvecs(v)

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.ops.matvecs_and_norms(v, w)

    def direction_products(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`K_m d` and :math:`d^\top K_m d` (the forms with ρ are made by the client)."""
        KD = self.ops.matvecs(d)
        return KD, KD @ d

    def hessian(self, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int) -> np.ndarray:
        N = self.K.shape[1]
        H = np.zeros((N, N))
        self.ops.accumulate_hessian(H, idx, s, KR, t, block)
        return H

    def matvecs_rows(self, idx: np.ndarray, A: np.ndarray) -> np.ndarray:
        return self.ops.matvecs_rows(A, idx)

    def _rows(self, idx: np.ndarray, A: np.ndarray) -> np.ndarray:
        full = np.zeros((self.K.shape[0], self.K.shape[1]))
        full[idx] = A
        return full

    def block_norms(self, idx: np.ndarray, A: np.ndarray) -> np.ndarray:
        return self.ops.block_norms(self._rows(idx, A))

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return self.ops.dual_block_norms(rho)

    def combine(self, idx: np.ndarray, A: np.ndarray) -> np.ndarray:
        return self.ops.combine(self._rows(idx, A), idx)
