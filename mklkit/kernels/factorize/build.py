"""Building a :class:`~mklkit.kernels.factor.FactorBank` from a bank description and data, within a memory budget."""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..._jit.factor import gather_columns
from ..build import _training_points
from ..memory import format_bytes
from ..description import DEFAULT_MEMORY_BUDGET, BankKernel, Resolver, expand_bank
from ..factor import FactorBank
from ..functions import KernelFunction, Linear, Poly
from .algorithms import FactorMap, KernelFactor, _exact_dim
from .per_kernel import _BATCH, _Approx, _Budget, _factor_one, _Factorization
from .points import _as_points, _Groups
from .settings import (
    APPROX_METHODS,
    DEFAULT_TOL,
    MAX_EXACT_DIM,
    FactorError,
    RankCapWarning,
    _budget_key,
    _check_settings,
    _key,
)

logger = logging.getLogger(__name__)


def exact_rank(spec: BankKernel, max_exact_dim: int = MAX_EXACT_DIM) -> int | None:
    """Rank of the exact factor ``method="auto"`` gives a kernel (``linear``, a small enough ``poly``), or ``None``."""
    dim = _exact_dim(spec)
    if dim is None or (type(spec.function) is not Linear and dim > max_exact_dim):
        return None
    return int(dim)


def _working_bytes(N: int, approx: Sequence[BankKernel]) -> int:
    """Working space of the approximated kernels: a batch of kernel rows and the widest group."""
    widest = max((len(s.features) for s in approx), default=0)
    return 8 * N * (2 * _BATCH + 2 * widest) if approx else 0


def rank_that_fits(specs: Sequence[BankKernel], N: int, budget: float, max_exact_dim: int = MAX_EXACT_DIM) -> int:
    """The largest rank per approximated kernel (``method="auto"``) that fits ``budget`` bytes; 0 when none."""
    approx = [s for s in specs if exact_rank(s, max_exact_dim) is None]
    exact = 8 * N * sum(exact_rank(s, max_exact_dim) or 0 for s in specs)
    return _fair_rank(budget - exact - _working_bytes(N, approx), N, len(approx))


def _fair_rank(free: float, N: int, n_approx: int) -> int:
    """The rank each of ``n_approx`` approximated kernels gets of ``free`` bytes."""
    return max(0, int(free // (8 * N * max(n_approx, 1))))


def _explicit_map(spec: BankKernel, groups: _Groups, method: str) -> Any:
    """The kernel function's own feature map on the training points (``None``: it has none, or it is not
    asked for); ``linear`` and ``poly`` have theirs here (:func:`~.algorithms._exact_dim`)."""
    func = spec.function
    if method in APPROX_METHODS or type(func).explicit_map is KernelFunction.explicit_map:
        return None
    return func.explicit_map(groups.dense(spec.features))


def _choose_method(
    spec: BankKernel, m: int, method: str, rank: int | None, max_exact_dim: int, root: str, explicit: Any = None
) -> str:
    dim = _exact_dim(spec) if explicit is None else int(explicit.dim)
    if method in APPROX_METHODS:
        return method
    f = spec.function
    exact = "linear" if type(f) is Linear else "poly_map" if type(f) is Poly else "feature_map"
    what = "monomial map" if exact == "poly_map" else "feature map"
    small = dim is not None and (exact == "linear" or dim <= max_exact_dim)
    within = dim is not None and (rank is None or dim <= rank)
    if method == "exact":
        where = f"{_key(root, 'method')}: kernel {m} {spec.label!r}"
        if dim is None:
            why = (
                " has no explicit feature map (exact factors exist for linear, poly and the kernel functions "
                "with an explicit_map, such as spectrum and conjunctive); use method 'auto', 'pivoted_cholesky' "
                "or 'nystrom'"
            )
        elif not small:
            why = (
                f": its {what} has {dim} dimensions > max_exact_dim = {max_exact_dim}; use method 'auto' "
                "(pivoted Cholesky for it) or raise max_exact_dim"
            )
        elif not within:
            why = f": its exact factor has rank {dim} > {_key(root, 'rank')} = {rank}; raise rank or use method 'auto'"
        else:
            return exact
        raise FactorError(f"{where}{why}", key=_key(root, "method"))
    if small and within:
        return exact
    if dim is not None:
        why = (
            f"{what} of {dim} dimensions > max_exact_dim = {max_exact_dim}"
            if not small
            else f"exact rank {dim} > rank = {rank}"
        )
        logger.info("kernel %d %r: %s; pivoted Cholesky instead", m, spec.label, why)
    return "pivoted_cholesky"


def _exact_bytes(spec: BankKernel, X: Any, N: int, sparse_bank: bool, explicit: Any = None) -> int:
    if sparse_bank:
        nnz = int(X[:, np.asarray(spec.features, dtype=np.intp)].nnz)
        return 16 * nnz + 8 * (len(spec.features) + 1)
    return 8 * N * int((_exact_dim(spec) if explicit is None else explicit.dim) or 0)


def build_factor_bank(
    bank: Any,
    X: Any,
    *,
    rank: int | None = None,
    tol: float = DEFAULT_TOL,
    method: str = "auto",
    seed: int = 0,
    normalize: str = "trace",
    memory_budget: float | None = None,
    max_exact_dim: int = MAX_EXACT_DIM,
    resolve: Resolver | Mapping[str, type] | None = None,
    feature_names: Sequence[str] | None = None,
    root: str = "",
    sample_weight: np.ndarray | None = None,
) -> FactorBank:
    r"""Factor every kernel of a bank description on the training points ``X`` (``docs/factor_banks.md``).

    Parameters
    ----------
    bank : list of entries, preset name, or list of BankKernel
    X : ndarray (N, d), scipy.sparse matrix or Dataset
    rank : int, optional
        Largest rank per approximated kernel (an exact factor above it: pivoted Cholesky in ``"auto"``);
        ``None``: as large as ``tol`` needs.  Nyström: the number of landmarks.
    tol : float in [0, 1)
        Stop when :math:`\mathrm{tr}(K_m - L_mL_m^\top) \le` ``tol`` :math:`\cdot\,\mathrm{tr}K_m`.
    method : {"auto", "exact", "pivoted_cholesky", "nystrom"}
        ``"auto"``: exact factors where the feature map is exact and small, else pivoted Cholesky.
    seed : int >= 0
        Nyström landmarks.
    normalize : {"trace", "diagonal", "none"}
        As :meth:`KernelBank.build <mklkit.kernels.build.KernelBank.build>`; with ``sample_weight`` (N,),
        ``"trace"`` divides by :math:`\sum_i w_i k_m(x_i, x_i)`.
    memory_budget : float, optional
        Bytes for the factors and the working space (default 4 GiB).
    max_exact_dim : int
        Largest explicit polynomial map (default 256).
    resolve, feature_names, root
        As :func:`~mklkit.kernels.description.expand_bank` (``root``: prefix of the keys in errors).

    Returns
    -------
    FactorBank
        With ``trace_error`` per kernel and ``factor_map`` (:class:`FactorMap`).  Raises
        :class:`FactorError` for a bad setting or factors over ``memory_budget``, ``BankError`` for bad data.
    """
    limit = _check_settings(rank, tol, method, seed, normalize, memory_budget, max_exact_dim, root)
    X, specs = _points_and_specs(bank, X, feature_names, resolve)
    groups = _Groups(X)
    maps = [_explicit_map(s, groups, method) for s in specs]
    kinds = [_choose_method(s, m, method, rank, max_exact_dim, root, maps[m]) for m, s in enumerate(specs)]
    maps = [mp if kinds[m] == "feature_map" else None for m, mp in enumerate(maps)]
    sparse_bank = sp.issparse(X) and all(k == "linear" for k in kinds)
    rank, exact_bytes, working, fair_rank = _fit_budget(specs, kinds, X, sparse_bank, rank, limit, root, maps)
    N, d = X.shape
    t0 = time.perf_counter()
    budget = _Budget(limit, N, exact_bytes)
    run = _Factorization(normalize, rank, float(tol), seed, budget, working, fair_rank, root, sample_weight)
    factors: list[KernelFactor] = []
    blocks: list[Any] = []
    for m, spec in enumerate(specs):
        kf, blk = _factor_one(m, spec, kinds[m], groups, run, maps[m])
        factors.append(kf)
        blocks.append(blk)
        run.rank_so_far += kf.rank
    out = _bank(factors, blocks, N, normalize, d, sparse_bank)
    logger.info(
        "factored %d kernels on %d samples in %.2f s: total rank %d (%s), %s; residual trace %.3g of the total",
        len(specs),
        N,
        time.perf_counter() - t0,
        out.total_rank,
        ", ".join(f"{k} {kinds.count(k)}" for k in dict.fromkeys(kinds)),
        format_bytes(out.nbytes),
        out.overall_trace_error,
    )
    return out


def _points_and_specs(bank: Any, X: Any, feature_names: Any, resolve: Any) -> tuple[Any, list[BankKernel]]:
    """The checked training points (unwrapped from a :class:`Dataset`) and the expanded kernels of ``bank``."""
    X, _, _, feature_names = _training_points(X, feature_names)
    X = _as_points(X, "X")
    if isinstance(bank, (list, tuple)) and bank and all(isinstance(s, BankKernel) for s in bank):
        return X, list(bank)
    return X, expand_bank(bank, X.shape[1], feature_names, resolve)


def _bank(factors: list[KernelFactor], blocks: list, N: int, normalize: str, d: int, sparse: bool) -> FactorBank:
    """The bank of the kernels' factors and rows, with their :class:`FactorMap`."""
    starts = np.concatenate([[0], np.cumsum([kf.rank for kf in factors])]).astype(np.int64)
    fmap = FactorMap(factors, starts, normalize, d, sparse)
    err = [kf.trace_error for kf in factors]
    return FactorBank(_assemble(blocks, starts, N, sparse), starts, trace_error=err, factor_map=fmap)


def _fit_budget(
    specs: Sequence[BankKernel],
    kinds: list[str],
    X: Any,
    sparse_bank: bool,
    rank: int | None,
    limit: float,
    root: str,
    maps: Sequence[Any] | None = None,
) -> tuple[int | None, int, int, int]:
    """``(rank, exact_bytes, working, fair_rank)``: the bytes of the exact factors and of the working
    space, checked against ``limit``, and ``rank`` capped (with a :class:`RankCapWarning`) to N and to what fits."""
    N = X.shape[0]
    approx = [m for m in range(len(specs)) if kinds[m] in APPROX_METHODS]
    maps = maps or [None] * len(specs)
    exact_bytes = sum(_exact_bytes(specs[m], X, N, sparse_bank, maps[m]) for m in range(len(specs)) if m not in approx)
    working = _working_bytes(N, [specs[m] for m in approx])
    if rank is not None and rank > N:
        problem = f"more than the N = {N} training points; capped to rank {N}"
        warnings.warn(RankCapWarning(_key(root, "rank"), rank, problem), stacklevel=3)
        rank = N
    if exact_bytes + working > limit:
        if exact_bytes:
            plus = f" (plus {format_bytes(working)} of working space)" if working else ""
            what = (
                f"the exact factors need {format_bytes(exact_bytes)}{plus} but memory_budget "
                f"is {format_bytes(limit)}; raise memory_budget or use method 'pivoted_cholesky' with a rank"
            )
        else:
            what = (
                f"factoring {len(approx)} kernels on {N} points needs {format_bytes(working)} of working space "
                f"but memory_budget is {format_bytes(limit)}; raise memory_budget"
            )
        raise FactorError(f"{_budget_key(root)}: {what}", key=_budget_key(root), problem=what)
    fair_rank = _fair_rank(limit - exact_bytes - working, N, len(approx))
    if rank is not None and approx:
        rank = _rank_within_budget(rank, len(approx), N, exact_bytes + working, fair_rank, limit, root)
    return rank, exact_bytes, working, fair_rank


def _rank_within_budget(rank: int, n_approx: int, N: int, fixed: int, fair_rank: int, limit: float, root: str) -> int:
    """``rank``, or ``fair_rank`` (with a :class:`RankCapWarning`) when ``n_approx`` kernels at ``rank``
    do not fit ``limit`` besides the ``fixed`` bytes; a :class:`FactorError` when not even rank 1 fits."""
    per_kernel = 8 * N * rank
    if fixed + n_approx * per_kernel <= limit:
        return rank
    what = (
        f"{n_approx} approximated kernels x rank {rank} x {N} points need {format_bytes(n_approx * per_kernel)} "
        f"(plus {format_bytes(fixed)} for exact factors and working space) but memory_budget is "
        f"{format_bytes(limit)}; rank <= {fair_rank} fits"
    )
    if fair_rank < 1:
        raise FactorError(f"{_key(root, 'rank')} = {rank}: {what}", key=_key(root, "rank"), problem=what, value=rank)
    warnings.warn(RankCapWarning(_key(root, "rank"), rank, f"{what}; capped to rank {fair_rank}"), stacklevel=4)
    return fair_rank


def _assemble(blocks: list[Any], starts: np.ndarray, N: int, sparse_bank: bool) -> Any:
    """One (R, N) array (or CSR matrix) from the kernels' rows; each block freed once moved."""
    if sparse_bank:
        return sp.vstack(blocks, format="csr")
    LT = np.empty((int(starts[-1]), N))
    for m in range(len(blocks)):
        blk, blocks[m] = blocks[m], None
        r = int(starts[m])
        parts = blk.blocks if isinstance(blk, _Approx) else [blk]
        columns = blk.columns if isinstance(blk, _Approx) else None
        if columns is not None:
            columns = np.ascontiguousarray(columns, dtype=np.int64)  # once for all parts
        while parts:
            b = parts.pop(0)
            b = b.toarray() if sp.issparse(b) else b
            if columns is None:
                LT[r : r + b.shape[0]] = b
            else:
                gather_columns(np.ascontiguousarray(b, dtype=np.float64), columns, LT[r : r + b.shape[0]])
            r += b.shape[0]
            del b
    return LT


def refactor_kernels(
    bank: FactorBank,
    X: Any,
    kernels: Sequence[int],
    rank: int | Sequence[int],
    *,
    tol: float = DEFAULT_TOL,
    seed: int = 0,
    memory_budget: float | None = None,
    sample_weight: np.ndarray | None = None,
) -> FactorBank:
    """``bank`` with the approximated kernels ``kernels`` factored again at ``rank`` (per kernel).

    Each kernel keeps its method and normalisation, the others their rows.  Pivoted Cholesky is
    deterministic and Nyström takes the first landmarks of the same ``seed``'s order, so a larger
    rank continues the same factorization.  ``X`` (and ``sample_weight``) must be the points the
    bank was built on.  Raises ``ValueError`` for a bank without a :class:`FactorMap`, points of
    another shape or a kernel that is not approximated; :class:`FactorError` when the new factors
    do not fit ``memory_budget``.
    """
    fmap = bank.factor_map
    if not isinstance(fmap, FactorMap) or sp.issparse(bank.LT):
        raise ValueError(
            "refactor_kernels needs a dense bank made by build_factor_bank (it has the kernels' factorizations)"
        )
    X = _as_points(X, "X")
    M, N, _ = bank.shape
    if X.shape != (N, fmap.n_features):
        raise ValueError(f"X has shape {X.shape}; the bank was built on ({N}, {fmap.n_features})")
    which = [int(m) for m in kernels]
    ranks = np.broadcast_to(np.asarray(rank, dtype=np.int64), (len(which),))
    for m in which:
        if not 0 <= m < M or fmap.kernels[m].method not in APPROX_METHODS:
            raise ValueError(f"kernel {m} is not an approximated kernel of this bank")
    limit = float(memory_budget if memory_budget is not None else DEFAULT_MEMORY_BUDGET)
    old = bank.ranks
    kept = 8 * N * int(old.sum() - old[which].sum())
    working = _working_bytes(N, [fmap.kernels[m].spec for m in which])
    fair_rank = _fair_rank(limit - kept - working, N, len(which))
    budget = _Budget(limit, N, kept)
    run = _Factorization(fmap.normalize, None, float(tol), seed, budget, working, fair_rank, "", sample_weight)
    groups = _Groups(X)
    factors = list(fmap.kernels)
    blocks: list[Any] = [bank.LT[bank.starts[m] : bank.starts[m + 1]] for m in range(M)]
    t0 = time.perf_counter()
    for m, r in zip(which, ranks):
        run.rank = min(int(r), N)
        kf, blk = _factor_one(m, factors[m].spec, factors[m].method, groups, run)
        factors[m], blocks[m] = kf, blk
    out = _bank(factors, blocks, N, fmap.normalize, fmap.n_features, False)
    logger.info(
        "factored %d kernels again in %.2f s: total rank %d -> %d, residual trace %.3g of the total",
        len(which),
        time.perf_counter() - t0,
        int(old.sum()),
        out.total_rank,
        out.overall_trace_error,
    )
    return out
