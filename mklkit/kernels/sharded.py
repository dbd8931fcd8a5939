"""A Gram bank whose kernels are built and kept on Dask workers, one contiguous shard per worker.

Each worker builds its shard (a Dask actor) from the training points and its kernels'
entries (resolved on the client, so χ² widths and random subsets are those of the whole description);
every :class:`~mklkit.kernels.ops.GramBank` operation runs on the shards (SpicyMKL §3.5.2, eqs.
49–50) and only vectors, per-kernel scalars and Hessian pieces travel.  ``dask.distributed`` (the
``mklkit[dask]`` extra) is imported only when a bank is built; see ``docs/sweeps.md``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .build import KernelBank, _training_points
from .description import DEFAULT_MEMORY_BUDGET, BankError, Resolver, expand_bank
from .memory import estimate_bytes, format_bytes
from .ops import ArrayBank, GramBank, _vec

__all__ = ["ShardedBank", "ShardLostError", "CommStats"]

logger = logging.getLogger(__name__)


class ShardLostError(RuntimeError):
    """The worker holding a shard of a :class:`ShardedBank` is gone (e.g. killed for memory)."""


@dataclass
class CommStats:
    """Bytes of arrays shipped to (``sent``) and from (``received``) the shards, and shard ``calls``
    (payloads only; a Python scalar counts 8 bytes)."""

    sent: int = 0
    received: int = 0
    calls: int = 0

    def copy(self) -> "CommStats":
        return CommStats(self.sent, self.received, self.calls)

    def __sub__(self, other: "CommStats") -> "CommStats":
        return CommStats(self.sent - other.sent, self.received - other.received, self.calls - other.calls)


def _nbytes(x: Any) -> int:
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (tuple, list, dict)):
        return sum(_nbytes(v) for v in (x.values() if isinstance(x, dict) else x))
    return 0 if x is None else 8


#: Default share of a worker's ``memory_limit`` its process may reach (Dask pauses at 0.8).
WORKER_MEMORY_FRACTION = 0.75


def _worker_budget(info: Mapping[str, Any]) -> float:
    """Bytes a new shard may take on a worker described by ``scheduler_info()``."""
    limit = float(info.get("memory_limit") or 0)
    if limit <= 0:
        return float(DEFAULT_MEMORY_BUDGET)
    used = float((info.get("metrics") or {}).get("memory") or 0)
    return max(WORKER_MEMORY_FRACTION * limit - used, 1.0)


def _chosen_workers(info: Mapping[str, Any], workers: Sequence[str] | None, M: int) -> list[str]:
    """The workers that get a shard: those asked for (default: all, sorted), at most one per kernel."""
    if workers is None:
        workers = sorted(info)
    workers = [str(w) for w in workers]
    unknown = [w for w in workers if w not in info]
    if unknown:
        raise ValueError(
            f"workers: {unknown[0]!r} is not a worker of this client; workers: {', '.join(sorted(info)) or 'none'}"
        )
    if not workers:
        raise ValueError("a ShardedBank needs at least one Dask worker; the client has none")
    return workers[: min(len(workers), M)]


def _shard_budgets(
    info: Mapping[str, Any], workers: list[str], bounds: np.ndarray, N: int, memory_budget_bytes: float | None
) -> list[float]:
    """The bytes each shard may take on its worker; a :class:`BankError` for a shard that needs more."""
    budgets = []
    for w, addr in enumerate(workers):
        Mw = int(bounds[w + 1] - bounds[w])
        limit = _worker_budget(info[addr]) if memory_budget_bytes is None else memory_budget_bytes
        need = estimate_bytes(Mw, N)
        if need > limit:
            raise BankError(
                f"shard {w} (kernels {bounds[w]}..{bounds[w + 1] - 1}, {Mw} x {N} x {N} float64) "
                f"needs about {format_bytes(need)} but worker {addr} allows "
                f"{format_bytes(limit)}; use more workers, fewer kernels or samples, or "
                "workers with a larger memory_limit"
            )
        budgets.append(limit)
    return budgets


class _Shard(ArrayBank):
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
        super().__init__(bank.K)
        self.lo = int(lo)
        self.raw_traces = np.asarray(bank.traces, dtype=np.float64)
        self.raw_diag = bank.train_diag

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

    def constants(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The shard's traces and (``"diagonal"``) diagonals before normalisation."""
        return self.raw_traces, self.raw_diag

    def direction_products(self, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r""":math:`K_m d` and :math:`d^\top K_m d` (the forms with ρ are made by the client)."""
        KD = self.matvecs(d)
        return KD, KD @ d

    def hessian(self, s: np.ndarray, KR: np.ndarray, t: np.ndarray, idx: np.ndarray, block: int) -> np.ndarray:
        N = self.K.shape[1]
        H = np.zeros((N, N))
        self.accumulate_hessian(H, idx, s, KR, t, block)
        return H

    def _rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        full = np.zeros((self.K.shape[0], self.K.shape[1]))
        full[idx] = A
        return full

    def rows_block_norms(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.block_norms(self._rows(A, idx))

    def rows_combine(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self.combine(self._rows(A, idx), idx)


class ShardedBank(GramBank):
    """A Gram bank spread over Dask workers, one contiguous shard of kernels per worker.

    Build one with :meth:`build`; release the workers' memory with :meth:`close` (or a ``with``
    block).  Shard ``w`` on ``workers[w]`` holds kernels ``bounds[w] .. bounds[w + 1] - 1``; ``comm``
    counts the bytes the operations ship (:class:`CommStats`).
    """

    representation = "sharded"

    def __init__(
        self,
        client: Any,
        futures: list[Any],
        actors: list[Any],
        bounds: np.ndarray,
        N: int,
        workers: list[str],
        names: list[str],
        normalize: str,
    ) -> None:
        self.client = client
        self._futures = futures
        self._actors = actors
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.shape = (int(self.bounds[-1]), int(N), int(N))
        self.workers = list(workers)
        self.names = list(names)
        self.normalize = normalize
        self.comm = CommStats()
        self._cross_source: tuple[Any, Any, Any] = (None, None, None)
        self._trace: np.ndarray | None = None
        self._closed = False

    # -- building ----------------------------------------------------------------
    @classmethod
    def build(
        cls,
        client: Any,
        X: Any,
        entries_or_preset: Any,
        normalize: str = "trace",
        workers: Sequence[str] | None = None,
        memory_budget_bytes: float | None = None,
        resolve: Resolver | Mapping[str, type] | None = None,
        feature_names: Sequence[str] | None = None,
        root: str = "bank",
    ) -> "ShardedBank":
        """Build the bank of a description on the workers of ``client``, one shard per worker.

        ``X`` is sent once to every worker; ``normalize``, ``resolve`` (picklable), ``feature_names``
        and ``root`` are as for :meth:`KernelBank.build`.  ``workers``: the addresses to use (default:
        all).  ``memory_budget_bytes``: bytes a shard may take (default
        :data:`WORKER_MEMORY_FRACTION` of the worker's ``memory_limit`` less what its process uses,
        or :data:`DEFAULT_MEMORY_BUDGET` without a limit).  Raises :class:`BankError` for a bad
        description or a shard over its budget, ``ValueError`` without workers.
        """
        X, N, d, feature_names = _training_points(X, feature_names)
        specs = expand_bank(entries_or_preset, d, feature_names, resolve, root=root)
        M = len(specs)
        info = client.scheduler_info()["workers"]
        workers = _chosen_workers(info, workers, M)
        W = len(workers)
        bounds = np.array([(M * w) // W for w in range(W + 1)], dtype=np.int64)
        budgets = _shard_budgets(info, workers, bounds, N, memory_budget_bytes)
        X_future = client.scatter(X, workers=workers, broadcast=True, hash=False)
        futures = []
        try:  # each shard built in an actor on its worker; all cancelled if one fails
            for w, addr in enumerate(workers):
                lo, hi = int(bounds[w]), int(bounds[w + 1])
                args = (X_future, [s.to_dict() for s in specs[lo:hi]], normalize, lo, budgets[w], resolve)
                futures.append(
                    client.submit(_Shard, *args, workers=[addr], allow_other_workers=False, actor=True, pure=False)
                )
            actors = [f.result() for f in futures]
        except Exception:
            client.cancel(futures)
            raise
        finally:
            del X_future
        bank = cls(client, futures, actors, bounds, N, workers, [s.label for s in specs], normalize)
        bank._cross_source = (X, specs, feature_names)
        logger.info("built %d kernels on %d samples over %d workers (%s in all)", M, N, W, format_bytes(8 * M * N * N))
        return bank

    def close(self) -> None:
        """Drop the shards (the workers free their memory)."""
        if self._closed:
            return
        self._closed = True
        futures, self._futures, self._actors = self._futures, [], []
        try:
            self.client.cancel(futures)
        except Exception:  # the client may be gone already
            pass

    def __enter__(self) -> "ShardedBank":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        M, N = self.shape[0], self.shape[1]
        return f"ShardedBank(n_kernels={M}, n_samples={N}, shards={len(self.workers)}, {format_bytes(8 * M * N * N)})"

    def _no_array_message(self) -> str:
        M, N = self.shape[0], self.shape[1]
        return (
            f"the Gram bank is a ShardedBank ({M} kernels on {N} points, kept in "
            f"{len(self.workers)} shards on Dask workers) and is never gathered into one "
            f"({M}, {N}, {N}) array"
        )

    @property
    def nbytes(self) -> int:
        """Bytes of all shards together (:math:`8MN^2`)."""
        return 8 * self.shape[0] * self.shape[1] * self.shape[2]

    def _call(self, method: str, args: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """Run ``method`` on the shards in ``args`` (concurrently); their results by shard."""
        if self._closed:
            raise ShardLostError("this ShardedBank has been closed")
        pending = {}
        for w, a in args.items():
            self.comm.sent += _nbytes(a)
            self.comm.calls += 1
            try:
                pending[w] = getattr(self._actors[w], method)(*a)
            except RuntimeError as exc:
                raise self._lost(w, exc) from None
        out = {}
        for w, fut in pending.items():
            try:
                res = fut.result()
            except (RuntimeError, OSError) as exc:
                raise self._lost(w, exc) from None
            self.comm.received += _nbytes(res)
            out[w] = res
        return out

    def _lost(self, w: int, exc: BaseException) -> ShardLostError:
        return ShardLostError(
            f"shard {w} of the ShardedBank (kernels {self.bounds[w]}..{self.bounds[w + 1] - 1}) "
            f"on worker {self.workers[w]} is lost ({type(exc).__name__}: {exc}); a worker killed "
            "for exceeding its memory_limit takes its shard with it: rebuild the bank with more "
            "workers or a larger memory_limit"
        )

    def _all(self, method: str, *a: Any) -> list[Any]:
        res = self._call(method, {w: a for w in range(len(self._actors))})
        return [res[w] for w in range(len(self._actors))]

    def _split(self, idx: np.ndarray) -> dict[int, np.ndarray]:
        """Positions into ``idx`` of the kernels of each shard (shards with none left out)."""
        shard = np.searchsorted(self.bounds, np.asarray(idx, dtype=np.int64), side="right") - 1
        return {int(w): np.flatnonzero(shard == w) for w in np.unique(shard)}

    def gather(self) -> np.ndarray:
        """The whole (M, N, N) array, fetched from the workers (for tests and small banks)."""
        return np.concatenate(self._all("as_array"), axis=0)

    def cross_bank(self) -> KernelBank:
        """A :class:`KernelBank` without Gram matrices that computes this bank's test kernels locally."""
        X, specs, feature_names = self._cross_source
        parts = self._all("constants")
        traces = np.concatenate([p[0] for p in parts])
        diag = None if parts[0][1] is None else np.concatenate([p[1] for p in parts], axis=0)
        return KernelBank.for_cross(X, specs, self.normalize, traces, diag, feature_names)

    def cross(self, X_new: Any, memory_budget_bytes: float | None = None) -> np.ndarray:
        """Test-versus-training kernels (M, N_new, N) normalised like the shards, built in this process."""
        return self.cross_bank().cross(X_new, memory_budget_bytes=memory_budget_bytes)

    def shard_info(self) -> list[dict[str, Any]]:
        """Per shard: first kernel ``lo``, ``n_kernels``, ``nbytes``, the worker's ``pid`` and address."""
        return self._all("info")

    def trace(self) -> np.ndarray:
        if self._trace is None:
            self._trace = np.concatenate(self._all("trace"))
        return self._trace.copy()

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        return np.concatenate(self._all("matvecs", _vec(v)), axis=0)

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = self._all("matvecs_and_norms", _vec(v), _vec(w))
        return (np.concatenate([p[0] for p in parts], axis=0), np.concatenate([p[1] for p in parts]))

    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = self._all("direction_products", _vec(d))
        KD = np.concatenate([p[0] for p in parts], axis=0)
        e = np.concatenate([p[1] for p in parts])
        return KD, KR @ d, e

    def _on_shards(self, method: str, idx: np.ndarray, *arrays: Any, extra: tuple = ()) -> tuple[dict, dict]:
        """Run ``method(rows of arrays..., local idx, *extra)`` on the shards holding the kernels ``idx``;
        the positions into ``idx`` of each shard's kernels, and the results by shard."""
        groups = self._split(idx)
        args = {
            w: (*(np.ascontiguousarray(a[p]) for a in arrays), np.ascontiguousarray(idx[p] - self.bounds[w]), *extra)
            for w, p in groups.items()
        }
        return groups, self._call(method, args)

    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        _, pieces = self._on_shards("hessian", idx, s, KR, t, extra=(int(block),))
        for w, piece in sorted(pieces.items()):
            H += piece

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = np.empty((idx.size, self.shape[1]))
        groups, res = self._on_shards("matvecs_rows", idx, A)
        for w, rows in res.items():
            out[groups[w]] = rows
        return out

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        idx = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
        out = np.zeros(self.shape[0])
        for w, norms in self._on_shards("rows_block_norms", idx, alpha[idx])[1].items():
            out[self.bounds[w] : self.bounds[w + 1]] = norms
        return out

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return np.concatenate(self._all("dual_block_norms", _vec(rho)))

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        out = np.zeros(self.shape[1])
        for w, part in sorted(self._on_shards("rows_combine", idx, _vec(alpha)[idx])[1].items()):
            out += part
        return out
