r"""A Gram bank whose kernels are built and kept on Dask workers.

:class:`ShardedBank` splits the kernel indices :math:`m = 0..M-1` into one
contiguous shard per worker.  Each worker builds its shard itself with
:meth:`KernelBank.build <mklkit.kernels.build.KernelBank.build>` from the
training features and the shard's part of the bank description (one entry
per kernel, resolved on the client, so χ² widths and random feature subsets
are the ones the whole description gives), and keeps it in a Dask actor:
the bank never exists in one process.

Every operation of :class:`~mklkit.kernels.ops.GramBank` is a sum or a
concatenation over kernels (SpicyMKL §3.5.2, eqs. 49–50), so it runs on
each shard with the same jitted loops as the in-memory bank and only these
travel:

* to the workers: N-vectors (:math:`\rho`, a search direction), the rows
  :math:`\alpha_m` and :math:`K_m v_m` of the shard's active kernels, and
  per-kernel scalars;
* back: per-kernel scalars (block norms, quadratic forms, traces), the rows
  :math:`K_m v` (M × N in all for a full pass), and one N × N Hessian piece
  per shard with active kernels, summed over them on the worker.

``problem = Problem(K=ShardedBank.build(client, X, bank), y=..., ...)`` is then
solved by the ``spicy`` engine exactly as with an in-memory bank; engines
that read the whole array ``problem.K`` refuse it
(:class:`~mklkit.kernels.ops.BankAccessError`).

``dask.distributed`` (the optional ``mklkit[dask]`` extra) is imported only
when a bank is built.  What runs on a worker is :mod:`mklkit.kernels.shard`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..data import Dataset
from .build import KernelBank
from .description import DEFAULT_MEMORY_BUDGET, BankError, BankKernel, Resolver, expand_bank
from .memory import estimate_bytes, format_bytes
from .ops import GramBank
from .shard import _Shard

__all__ = ["ShardedBank", "ShardLostError", "CommStats"]

logger = logging.getLogger(__name__)


class ShardLostError(RuntimeError):
    """The worker holding a shard of a :class:`ShardedBank` is gone (e.g. killed for memory)."""


@dataclass
class CommStats:
    """Bytes of arrays shipped between the client and the shards (payloads only).

    ``sent``: client to workers; ``received``: workers to client; ``calls``:
    shard method calls.  Python scalars and indices count 8 bytes each;
    framing and pickling overhead are not counted.
    """

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
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v) for v in x.values())
    if x is None:
        return 0
    return 8


def _vec(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float64)


#: Default share of a worker's ``memory_limit`` that the worker's process,
#: its shard included, may reach (Dask's pause threshold is 0.8).
WORKER_MEMORY_FRACTION = 0.75


def _worker_budget(info: Mapping[str, Any]) -> float:
    """Bytes a new shard may take on a worker described by ``scheduler_info()``."""
    limit = float(info.get("memory_limit") or 0)
    if limit <= 0:
        return float(DEFAULT_MEMORY_BUDGET)
    used = float((info.get("metrics") or {}).get("memory") or 0)
    return max(WORKER_MEMORY_FRACTION * limit - used, 1.0)


def _training_points(X: Any, feature_names: Sequence[str] | None) -> tuple[Any, int, int, Sequence[str] | None]:
    """The points of ``X`` (unwrapped from a :class:`Dataset`, with its feature names unless
    given), checked to be a non-empty 2-d array, and their ``N`` and ``d``."""
    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    shape = tuple(X.shape) if hasattr(X, "shape") else np.shape(X)
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise BankError(f"X must be a non-empty 2-d array (samples x features); got shape {shape}")
    return X, int(shape[0]), int(shape[1]), feature_names


def _chosen_workers(info: Mapping[str, Any], workers: Sequence[str] | None, M: int) -> list[str]:
    """The addresses of the workers that get a shard: those asked for (default: all, sorted), each
    checked to be a worker of the client, at most one per kernel."""
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
    """The bytes each shard may take on its worker; a :class:`BankError` for a shard that needs
    more (naming the worker, before anything is built)."""
    budgets = []
    for w, addr in enumerate(workers):
        Mw = int(bounds[w + 1] - bounds[w])
        limit = memory_budget_bytes
        if limit is None:
            limit = _worker_budget(info[addr])
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


def _start_shards(
    client: Any,
    X: Any,
    specs: Sequence[BankKernel],
    workers: list[str],
    bounds: np.ndarray,
    budgets: list[float],
    normalize: str,
    resolve: Resolver | Mapping[str, type] | None,
) -> tuple[list[Any], list[Any]]:
    """Send ``X`` once to every worker and build each shard in an actor on its worker; the actors'
    futures and the actors (all cancelled if one fails)."""
    X_future = client.scatter(X, workers=workers, broadcast=True, hash=False)
    futures = []
    try:
        for w, addr in enumerate(workers):
            lo, hi = int(bounds[w]), int(bounds[w + 1])
            entries = [s.to_dict() for s in specs[lo:hi]]
            futures.append(
                client.submit(
                    _Shard,
                    X_future,
                    entries,
                    normalize,
                    lo,
                    budgets[w],
                    resolve,
                    workers=[addr],
                    allow_other_workers=False,
                    actor=True,
                    pure=False,
                )
            )
        actors = [f.result() for f in futures]
    except Exception:
        client.cancel(futures)
        raise
    finally:
        del X_future
    return futures, actors


class ShardedBank(GramBank):
    """A Gram bank spread over Dask workers, one contiguous shard of kernels per worker.

    Its :attr:`representation` is ``"sharded"``.

    Build one with :meth:`build`; release the workers' memory with
    :meth:`close` (or use it as a context manager).  The bank is tied to the
    ``client`` it was built with.

    Attributes
    ----------
    shape : tuple
        ``(M, N, N)``.
    names : list of str
        One label per kernel (as :class:`~mklkit.kernels.build.KernelBank` names them).
    bounds : ndarray (W + 1,)
        Shard ``w`` holds kernels ``bounds[w] .. bounds[w + 1] - 1``.
    workers : list of str
        Address of the worker holding each shard.
    comm : CommStats
        Running count of the bytes shipped by the bank operations.
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

        Parameters
        ----------
        client : distributed.Client
        X : ndarray (N, d), scipy.sparse matrix or Dataset
            Training points; sent once to every worker.
        entries_or_preset : list of entries or str
            Bank description (:mod:`mklkit.kernels.description`).
        normalize : {"trace", "diagonal", "none"}
            Per kernel, as :meth:`KernelBank.build`.
        workers : sequence of str, optional
            Worker addresses to use (default: all, sorted); at most one shard
            each, and no more shards than kernels.
        memory_budget_bytes : float, optional
            Bytes a shard may take on its worker (:func:`estimate_bytes`).
            Default: :data:`WORKER_MEMORY_FRACTION` of the worker's
            ``memory_limit`` less the memory its process already uses (Dask
            pauses a worker at 80 % of its limit and restarts it at 95 %), or
            :data:`DEFAULT_MEMORY_BUDGET` for a worker without a limit.
        resolve : callable or mapping, optional
            Kernel-function lookup (default: the built-ins); it is sent to
            the workers, so it must be picklable.
        feature_names : sequence of str, optional
        root : str
            Prefix of key paths in description errors.

        Raises
        ------
        BankError
            For an invalid description, or a shard larger than its worker's
            budget (naming the worker, before anything is built).
        ValueError
            Without workers.
        """
        X, N, d, feature_names = _training_points(X, feature_names)
        specs = expand_bank(entries_or_preset, d, feature_names, resolve, root=root)
        M = len(specs)
        info = client.scheduler_info()["workers"]
        workers = _chosen_workers(info, workers, M)
        W = len(workers)
        bounds = np.array([(M * w) // W for w in range(W + 1)], dtype=np.int64)
        budgets = _shard_budgets(info, workers, bounds, N, memory_budget_bytes)
        futures, actors = _start_shards(client, X, specs, workers, bounds, budgets, normalize, resolve)
        bank = cls(client, futures, actors, bounds, N, workers, [s.label for s in specs], normalize)
        bank._cross_source = (X, specs, feature_names)
        logger.info("built %d kernels on %d samples over %d workers (%s in all)", M, N, W, format_bytes(8 * M * N * N))
        return bank

    # -- life cycle --------------------------------------------------------------
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

    # -- dispatch ----------------------------------------------------------------
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
        idx = np.asarray(idx, dtype=np.int64)
        shard = np.searchsorted(self.bounds, idx, side="right") - 1
        out = {}
        for w in np.unique(shard):
            out[int(w)] = np.flatnonzero(shard == w)
        return out

    # -- GramBank ----------------------------------------------------------------
    def gather(self) -> np.ndarray:
        """The whole (M, N, N) array, fetched from the workers (for tests and small banks)."""
        return np.concatenate(self._all("gather"), axis=0)

    def cross_bank(self) -> KernelBank:
        """A :class:`KernelBank` without Gram matrices that computes this bank's test kernels locally."""
        X, specs, feature_names = self._cross_source
        parts = self._all("constants")
        traces = np.concatenate([p[0] for p in parts])
        diag = None if parts[0][1] is None else np.concatenate([p[1] for p in parts], axis=0)
        return KernelBank.for_cross(X, specs, self.normalize, traces, diag, feature_names)

    def cross(self, X_new: Any, memory_budget_bytes: float | None = None) -> np.ndarray:
        """Test-versus-training kernels (M, N_new, N) normalised like the shards, built in this process.

        The same as :meth:`KernelBank.cross` of the in-memory bank: the kernel
        functions of the description on the training points the bank was
        built from, divided by the shards' traces (or diagonals).
        """
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

    def accumulate_hessian(
        self, H: np.ndarray, idx: np.ndarray, s: np.ndarray, KR: np.ndarray, t: np.ndarray, block: int
    ) -> None:
        groups = self._split(idx)
        args = {
            w: (
                np.ascontiguousarray(idx[p] - self.bounds[w]),
                np.ascontiguousarray(s[p]),
                np.ascontiguousarray(KR[p]),
                np.ascontiguousarray(t[p]),
                int(block),
            )
            for w, p in groups.items()
        }
        for w, piece in sorted(self._call("hessian", args).items()):
            H += piece

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        out = np.empty((idx.size, self.shape[1]))
        groups = self._split(idx)
        args = {
            w: (np.ascontiguousarray(A[p]), np.ascontiguousarray(idx[p] - self.bounds[w])) for w, p in groups.items()
        }
        for w, rows in self._call("matvecs_rows", args).items():
            out[groups[w]] = rows
        return out

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        idx = np.flatnonzero(np.any(alpha != 0.0, axis=1)).astype(np.int64)
        out = np.zeros(self.shape[0])
        groups = self._split(idx)
        args = {w: (np.ascontiguousarray(alpha[idx[p]]), idx[p] - self.bounds[w]) for w, p in groups.items()}
        for w, norms in self._call("block_norms", args).items():
            out[self.bounds[w] : self.bounds[w + 1]] = norms
        return out

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return np.concatenate(self._all("dual_block_norms", _vec(rho)))

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        alpha = _vec(alpha)
        idx = np.asarray(idx, dtype=np.int64)
        out = np.zeros(self.shape[1])
        groups = self._split(idx)
        args = {w: (np.ascontiguousarray(alpha[idx[p]]), idx[p] - self.bounds[w]) for w, p in groups.items()}
        for w, part in sorted(self._call("combine", args).items()):
            out += part
        return out
