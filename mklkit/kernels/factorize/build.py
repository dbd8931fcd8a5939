r"""Building a :class:`~mklkit.kernels.factor.FactorBank` from a bank description and data.

:func:`build_factor_bank` checks its settings (:func:`check_settings`) and
the memory the factors need before it allocates anything, chooses a method
per kernel, factors each kernel with :mod:`mklkit.kernels.factorize.algorithms`
and assembles the bank; see :mod:`mklkit.kernels.factorize`.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..._jit.factor import gather_columns
from ...components.params import did_you_mean
from ...data import Dataset
from ..build import format_bytes
from ..description import DEFAULT_MEMORY_BUDGET, NORMALIZATIONS, BankError, BankKernel, Resolver, expand_bank
from ..factor import FactorBank
from ..functions import Linear
from .algorithms import (
    _BATCH,
    FactorMap,
    KernelFactor,
    _Approx,
    _as_points,
    _Budget,
    _diag,
    _exact_dim,
    _exact_rows,
    _Groups,
    _kernel_rows,
    _nystrom,
    _pivoted_cholesky,
    _scale_columns,
)

__all__ = ["METHODS", "DEFAULT_TOL", "MAX_EXACT_DIM", "FactorError", "RankCapWarning", "build_factor_bank",
           "check_settings", "exact_rank", "rank_that_fits", "refactor_kernels", "warning_names"]

logger = logging.getLogger(__name__)

#: The factorization methods of :func:`build_factor_bank`.
METHODS = ("auto", "exact", "pivoted_cholesky", "nystrom")
#: The methods that approximate a kernel (the others are exact factors).
APPROX_METHODS = ("pivoted_cholesky", "nystrom")
#: Default relative residual trace.
DEFAULT_TOL = 1e-3
#: Largest dimension of an explicit polynomial feature map (``max_exact_dim``).
MAX_EXACT_DIM = 256


class FactorError(BankError):
    """An invalid factorization setting, or a factorization that does not fit the memory budget.

    ``key`` names the setting (``rank``, ``tol``, ``method``, ... with the
    ``root`` prefix given to :func:`build_factor_bank`).
    """


class RankCapWarning(UserWarning):
    """A factor ``rank`` above what can be used (the N training points, or what ``memory_budget``
    holds) was capped; the message names the requested and the used rank.

    ``key`` (the setting, with the ``root`` prefix: ``kernels.factor.rank``),
    ``value`` (the requested rank) and ``problem`` are data, as in
    :class:`~mklkit.pipeline.PipelineError`; the text is ``<key> = <value>:
    <problem>``, or what the renderer set by :func:`warning_names` makes of
    it (the estimators name their own parameter: ``MKLClassifier:
    factor.rank = ...``).
    """

    def __init__(self, key: str, value: Any, problem: str) -> None:
        self.key, self.value, self.problem = key, value, problem
        render = _WARNING_NAMES.get()
        super().__init__(self.message() if render is None else render(self))

    def message(self, key: str | None = None) -> str:
        """The one-line text, with ``key`` in place of the own one."""
        return f"{self.key if key is None else key} = {self.value}: {self.problem}"

    def __reduce__(self) -> Any:  # the text as rendered, not rendered again where it is unpickled
        return _rank_cap_warning, (self.key, self.value, self.problem, str(self))


def _rank_cap_warning(key: str, value: Any, problem: str, text: str) -> RankCapWarning:
    w = RankCapWarning.__new__(RankCapWarning)
    w.key, w.value, w.problem = key, value, problem
    UserWarning.__init__(w, text)
    return w


_WARNING_NAMES: ContextVar[Callable[[RankCapWarning], str] | None] = ContextVar("mklkit_warning_names", default=None)


@contextmanager
def warning_names(render: Callable[[RankCapWarning], str]) -> Iterator[None]:
    """Inside the block (this thread or task), a :class:`RankCapWarning` reads ``render(warning)``.

    How the estimators name their parameter in the warning, as they do in
    their errors (the warning is emitted once, with the caller's text, and
    the warning filters see that text).
    """
    token = _WARNING_NAMES.set(render)
    try:
        yield
    finally:
        _WARNING_NAMES.reset(token)


# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------
def _key(root: str, name: str) -> str:
    return f"{root}.{name}" if root else name


def _budget_key(root: str) -> str:
    """The memory budget's key: a sibling of the factor settings (``kernels.factor`` ->
    ``kernels.memory_budget``)."""
    return _key(root.rpartition(".")[0], "memory_budget")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _bad(root: str, name: str, allowed: str, value: Any, hint: str = "") -> FactorError:
    key = _key(root, name)
    return FactorError(f"{key} must be {allowed}; got {value!r}{hint}", key=key,
                       problem="invalid value" + hint, value=value, allowed=allowed)


def check_settings(rank: Any = None, tol: Any = DEFAULT_TOL, method: Any = "auto", seed: Any = 0,
                   root: str = "") -> None:
    """Validate ``rank``, ``tol``, ``method`` and ``seed`` of :func:`build_factor_bank` (no data needed).

    Raises
    ------
    FactorError
        With ``key`` (``<root>.rank`` ...), ``value`` and ``allowed`` as data.
    """
    if rank is not None and not (_is_int(rank) and rank >= 1):
        raise _bad(root, "rank", "an integer >= 1 or None (as needed for tol)", rank)
    if not (_is_real(tol) and 0.0 <= float(tol) < 1.0):
        raise _bad(root, "tol", "a number in [0, 1) (the relative residual trace)", tol)
    if method not in METHODS:
        raise _bad(root, "method", f"one of {', '.join(map(repr, METHODS))}", method,
                   did_you_mean(str(method), list(METHODS)))
    if not (_is_int(seed) and seed >= 0):
        raise _bad(root, "seed", "an integer >= 0", seed)


def _check_settings(rank: Any, tol: Any, method: Any, seed: Any, normalize: Any, memory_budget: Any,
                    max_exact_dim: Any, root: str) -> float:
    """Validate the settings of :func:`build_factor_bank`; returns the budget in bytes."""
    check_settings(rank, tol, method, seed, root)
    if normalize not in NORMALIZATIONS:
        raise _bad(root, "normalize", f"one of {', '.join(map(repr, NORMALIZATIONS))}", normalize,
                   did_you_mean(str(normalize), list(NORMALIZATIONS)))
    if not (_is_int(max_exact_dim) and max_exact_dim >= 1):
        raise _bad(root, "max_exact_dim", "an integer >= 1", max_exact_dim)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if not (_is_real(budget) and math.isfinite(budget) and budget > 0):
        raise _bad(root, "memory_budget", "a number of bytes > 0 or None", memory_budget)
    return float(budget)


# ---------------------------------------------------------------------------
# The bank
# ---------------------------------------------------------------------------
def exact_rank(spec: BankKernel, max_exact_dim: int = MAX_EXACT_DIM) -> int | None:
    """Rank of the exact factor that ``method="auto"`` gives a kernel (its explicit feature map), or ``None``.

    ``linear``: the number of its features; ``poly``: the dimension of its
    monomial map when it is at most ``max_exact_dim``; other kernels have no
    exact factor here (they are approximated).
    """
    dim = _exact_dim(spec)
    if dim is None or (type(spec.function) is not Linear and dim > max_exact_dim):
        return None
    return int(dim)


def _working_bytes(N: int, approx: Sequence[BankKernel]) -> int:
    """Working space of the approximated kernels: a batch of kernel rows and the widest group."""
    widest = max((len(s.features) for s in approx), default=0)
    return 8 * N * (2 * _BATCH + 2 * widest) if approx else 0


def rank_that_fits(specs: Sequence[BankKernel], N: int, budget: float, max_exact_dim: int = MAX_EXACT_DIM) -> int:
    """The largest rank per approximated kernel (``method="auto"``) whose factors fit ``budget``
    bytes with the exact factors (dense) and the working space; 0 when none fits."""
    approx = [s for s in specs if exact_rank(s, max_exact_dim) is None]
    exact = 8 * N * sum(exact_rank(s, max_exact_dim) or 0 for s in specs)
    free = budget - exact - _working_bytes(N, approx)
    return max(0, int(free // (8 * N * max(len(approx), 1))))


def _choose_method(spec: BankKernel, m: int, method: str, rank: int | None, max_exact_dim: int,
                   root: str) -> str:
    dim = _exact_dim(spec)
    if method in APPROX_METHODS:
        return method
    exact = "linear" if type(spec.function) is Linear else "poly_map"
    small = dim is not None and (exact == "linear" or dim <= max_exact_dim)
    within = dim is not None and (rank is None or dim <= rank)
    if method == "exact":
        where = f"{_key(root, 'method')}: kernel {m} {spec.label!r}"
        if dim is None:
            raise FactorError(f"{where} has no explicit feature map (exact factors exist for the "
                              "built-in linear and poly kernels); use method 'auto', "
                              "'pivoted_cholesky' or 'nystrom'", key=_key(root, "method"))
        if not small:
            raise FactorError(f"{where}: its monomial map has {dim} dimensions > max_exact_dim = "
                              f"{max_exact_dim}; use method 'auto' (pivoted Cholesky for it) or "
                              "raise max_exact_dim", key=_key(root, "method"))
        if not within:
            raise FactorError(f"{where}: its exact factor has rank {dim} > {_key(root, 'rank')} = "
                              f"{rank}; raise rank or use method 'auto'", key=_key(root, "method"))
        return exact
    if small and within:
        return exact
    if dim is not None:
        why = (f"monomial map of {dim} dimensions > max_exact_dim = {max_exact_dim}" if not small
               else f"exact rank {dim} > rank = {rank}")
        logger.info("kernel %d %r: %s; pivoted Cholesky instead", m, spec.label, why)
    return "pivoted_cholesky"


@dataclass
class _Factorization:
    """The settings and state of one :func:`build_factor_bank` call that every kernel reads."""

    normalize: str
    rank: int | None
    tol: float
    order: np.ndarray
    budget: _Budget
    working: int
    fair_rank: int
    root: str
    rank_so_far: int = 0
    weights: np.ndarray | None = None


def _exact_bytes(spec: BankKernel, kind: str, X: Any, N: int, sparse_bank: bool) -> int:
    if sparse_bank:
        nnz = int(X[:, np.asarray(spec.features, dtype=np.intp)].nnz)
        return 16 * nnz + 8 * (len(spec.features) + 1)
    return 8 * N * int(_exact_dim(spec) or 0)


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
    r"""Factor every kernel of a bank description on the training points ``X``.

    ``sample_weight`` (N,), optional: with ``normalize="trace"`` the divisor is the
    weighted trace :math:`\sum_i w_i k_m(x_i, x_i)` (the trace of the kernel on the
    rows repeated by integer weights), as :meth:`KernelBank.weight_traces` does.

    Parameters
    ----------
    bank : list of entries, preset name, or list of BankKernel
        The kernels (the vocabulary of :func:`~mklkit.kernels.description.expand_bank`).
    X : ndarray (N, d), scipy.sparse matrix or Dataset
        Training points (NaN and inf refused).
    rank : int, optional
        Largest rank per approximated kernel (and per exact factor, which
        otherwise falls back to pivoted Cholesky in ``"auto"``); ``None``:
        as large as ``tol`` needs (at most N).  For Nyström: the number of
        landmarks.
    tol : float in [0, 1)
        Stop when :math:`\mathrm{tr}(K_m - L_mL_m^\top) \le` ``tol``
        :math:`\cdot\,\mathrm{tr}K_m` (0: until numerically exhausted).
    method : {"auto", "exact", "pivoted_cholesky", "nystrom"}
        ``"auto"``: exact factors where the feature map is exact and small,
        pivoted Cholesky otherwise.  ``"exact"`` refuses kernels without one.
    seed : int >= 0
        Nyström landmarks (pivoted Cholesky is deterministic).
    normalize : {"trace", "diagonal", "none"}
        As :meth:`KernelBank.build <mklkit.kernels.build.KernelBank.build>`.
    memory_budget : float, optional
        Bytes for the factors and the working space (default 4 GiB); see
        :mod:`mklkit.kernels.factorize`.
    max_exact_dim : int
        Largest explicit polynomial map (default 256).
    resolve, feature_names
        As :func:`~mklkit.kernels.description.expand_bank`.
    root : str
        Prefix of the keys named in errors (``"kernels.factor"`` gives
        ``kernels.factor.tol``).

    Returns
    -------
    FactorBank
        With ``trace_error`` per kernel and ``factor_map``
        (:class:`FactorMap`: ``transform(X_new)``, the per-kernel methods,
        ranks and errors).

    Raises
    ------
    FactorError
        A bad setting, or factors that do not fit ``memory_budget`` (one
        line naming the key and what fits).
    BankError
        A bad bank description, bad data, or a kernel that cannot be
        normalised.
    """
    limit = _check_settings(rank, tol, method, seed, normalize, memory_budget, max_exact_dim, root)
    tol = float(tol)
    if isinstance(X, Dataset):
        if feature_names is None:
            feature_names = X.feature_names
        X = X.X
    X = _as_points(X, "X")
    N, d = X.shape
    if isinstance(bank, (list, tuple)) and bank and all(isinstance(s, BankKernel) for s in bank):
        specs = list(bank)
    else:
        specs = expand_bank(bank, d, feature_names, resolve)
    M = len(specs)
    kinds = [_choose_method(s, m, method, rank, max_exact_dim, root) for m, s in enumerate(specs)]
    approx = [m for m in range(M) if kinds[m] in APPROX_METHODS]
    sparse_bank = sp.issparse(X) and all(k == "linear" for k in kinds)
    budget = _Budget(limit, N, root)

    # -- what is known before anything is allocated -------------------------
    exact_bytes = sum(_exact_bytes(specs[m], kinds[m], X, N, sparse_bank)
                      for m in range(M) if m not in approx)
    working = _working_bytes(N, [specs[m] for m in approx])
    if rank is not None and rank > N:
        warnings.warn(RankCapWarning(_key(root, "rank"), rank, f"more than the N = {N} training points; capped "
                                     f"to rank {N}"), stacklevel=2)
        rank = N
    per_kernel = 8 * N * rank if rank is not None else 0
    if exact_bytes + working > limit:
        if exact_bytes:
            plus = f" (plus {format_bytes(working)} of working space)" if working else ""
            what = (f"the exact factors need {format_bytes(exact_bytes)}{plus} but memory_budget "
                    f"is {format_bytes(limit)}; raise memory_budget or use method "
                    "'pivoted_cholesky' with a rank")
        else:
            # nothing exact: the rows of the kernels that pivoted Cholesky / Nystrom work on
            what = (f"factoring {len(approx)} kernels on {N} points needs "
                    f"{format_bytes(working)} of working space but memory_budget is "
                    f"{format_bytes(limit)}; raise memory_budget")
        raise FactorError(f"{_budget_key(root)}: {what}", key=_budget_key(root), problem=what)
    fair_rank = int((limit - exact_bytes - working) // (8 * N * max(len(approx), 1)))
    if rank is not None and approx and exact_bytes + working + len(approx) * per_kernel > limit:
        what = (f"{len(approx)} approximated kernels x rank {rank} x {N} points need "
                f"{format_bytes(len(approx) * per_kernel)} (plus "
                f"{format_bytes(exact_bytes + working)} for exact factors and working space) but "
                f"memory_budget is {format_bytes(limit)}; rank <= {fair_rank} fits")
        if fair_rank < 1:
            raise FactorError(f"{_key(root, 'rank')} = {rank}: {what}", key=_key(root, "rank"),
                              problem=what, value=rank)
        warnings.warn(RankCapWarning(_key(root, "rank"), rank, f"{what}; capped to rank {fair_rank}"), stacklevel=2)
        rank = fair_rank

    t0 = time.perf_counter()
    groups = _Groups(X)
    order = np.random.default_rng(np.random.SeedSequence(int(seed))).permutation(N)
    factors: list[KernelFactor] = []
    blocks: list[Any] = []
    budget.take(exact_bytes)
    run = _Factorization(normalize, rank, tol, order, budget, working, fair_rank, root,
                         weights=None if sample_weight is None
                         else np.asarray(sample_weight, dtype=np.float64))
    for m, spec in enumerate(specs):
        kf, blk = _factor_one(m, spec, kinds[m], groups, run)
        factors.append(kf)
        blocks.append(blk)
        run.rank_so_far += kf.rank
    starts = np.concatenate([[0], np.cumsum([kf.rank for kf in factors])]).astype(np.int64)
    LT = _assemble(blocks, starts, N, sparse_bank)
    fmap = FactorMap(factors, starts, normalize, d, sparse_bank)
    out = FactorBank(LT, starts, trace_error=[kf.trace_error for kf in factors], factor_map=fmap)
    logger.info(
        "factored %d kernels on %d samples in %.2f s: total rank %d (%s), %s; residual trace "
        "%.3g of the total", M, N, time.perf_counter() - t0, out.total_rank,
        ", ".join(f"{k} {kinds.count(k)}" for k in dict.fromkeys(kinds)), format_bytes(out.nbytes),
        out.overall_trace_error)
    return out


def _factor_one(m: int, spec: BankKernel, kind: str, groups: _Groups, run: _Factorization
                ) -> tuple[KernelFactor, Any]:
    """Kernel ``m``: its :class:`KernelFactor` and its rows of :math:`L^\\top` (an array, a CSR
    matrix, or an :class:`_Approx`)."""
    func, label = spec.function, spec.label
    normalize, rank, tol, budget, root = run.normalize, run.rank, run.tol, run.budget, run.root
    N = groups.X.shape[0]
    kf = KernelFactor(spec, kind, 0, 1.0, 0.0)
    if kind in ("linear", "poly_map"):
        blk, diag = _exact_rows(kf, groups, False, "X")
    else:
        A = np.ascontiguousarray(groups.dense(spec.features))
        diag = _diag(func, A, label, "X")
    tr_raw = float(diag.sum()) if run.weights is None else float(np.asarray(diag) @ run.weights)
    where = f"kernel {m} {label!r}"
    if normalize == "trace" and not (tr_raw > 0.0 and math.isfinite(tr_raw)):
        raise BankError(f"{where} has trace {tr_raw!r}; unit-trace normalisation needs a positive "
                        "trace (a constant-zero feature?); drop the feature or use "
                        "normalize='diagonal' or 'none'")
    if normalize == "diagonal" and not np.all(diag > 0.0):
        i = int(np.argmin(diag))
        raise BankError(f"{where} has k(x, x) = {float(diag[i])!r} at sample {i}; unit-diagonal "
                        "normalisation needs k(x, x) > 0 for every training point; use "
                        "normalize='trace' or 'none'")
    scale = kf.scale = 1.0 / math.sqrt(tr_raw) if normalize == "trace" else 1.0
    trace = kf.trace = ((1.0 if run.weights is None else float(diag.sum()) / tr_raw)
                        if normalize == "trace" else
                        float(N) if normalize == "diagonal" else tr_raw)
    if kind in ("linear", "poly_map"):
        if normalize == "diagonal":
            blk = _scale_columns(blk, diag)
        kf.rank = int(blk.shape[0])
    else:
        dn = diag if normalize == "diagonal" else None
        # Pivoted Cholesky on the distinct points, each weighted by how often it occurs:
        # K = P K_u P^T with P the (N, u) indicator of the points' copies; with c the counts,
        # the factor of C^(1/2) K_u C^(1/2) has the residual trace of K itself (so the same
        # tolerance and the greedy choice weighted by multiplicity), and L = P C^(-1/2) L~.
        dup = None
        if kind == "pivoted_cholesky":
            U, inverse, counts = groups.unique(spec.features)
            if U.shape[0] < N:
                dup = (inverse, counts)
        if dup is None:
            P, w, dP, dk = A, None, dn, diag
        else:
            copy = np.empty(U.shape[0], dtype=np.intp)
            copy[dup[0]] = np.arange(N)          # one copy of each distinct point (all are equal)
            P, w, dk = U, dup[1], diag[copy]
            dP = None if dn is None else dn[copy]
        # rows of the weighted kernel: k(p_i, p_j) sqrt(c_i c_j) / sqrt(dn_i dn_j)
        dw = dP if w is None else (1.0 / w if dP is None else dP / w)
        d0 = np.ones(P.shape[0]) if dP is not None else dk.copy()
        if w is not None:
            d0 *= w

        base = groups.base_rows(spec.features, func.uses, dup is not None) if func.uses is not None else None

        def rows(idx: np.ndarray) -> np.ndarray:
            return _kernel_rows(func, np.ascontiguousarray(P[idx]), P,
                                None if dw is None else dw[idx], dw, label,
                                None if base is None else base(idx))

        def on_full(r: int, rel: float) -> None:
            what = (f"not reached within {_budget_key(root)} = {format_bytes(budget.limit)}: "
                    f"{where} has relative residual trace {rel:.3g} at rank {r}, and no more rows "
                    f"of {N} points fit (total rank so far {run.rank_so_far + r}); loosen "
                    f"{_key(root, 'tol')}, set {_key(root, 'rank')} <= {run.fair_rank} (fits for "
                    f"every approximated kernel) or raise {_budget_key(root)}")
            raise FactorError(f"{_key(root, 'tol')} = {tol:g} is {what}", key=_key(root, "tol"),
                              problem=what, value=tol)

        budget.take(run.working)
        cap = N if rank is None else min(rank, N)
        if kind == "pivoted_cholesky":
            blk, piv = _pivoted_cholesky(rows, d0, min(cap, P.shape[0]), tol, budget, on_full)
            if w is not None:   # back to the unweighted factor of the distinct points
                for b in blk.blocks:
                    b /= np.sqrt(w)
            # L_P = L[P, :]; row j of L^T is zero at the pivots before j: L_P is lower triangular
            LPt = np.vstack([b[:, piv] for b in blk.blocks]) if blk.blocks else np.zeros((0, 0))
            kf.basis = np.ascontiguousarray(LPt.T)
            kf.points = np.ascontiguousarray(P[piv])
            kf.point_diag = None if dP is None else dP[piv].copy()
            if dup is not None:   # every copy of a distinct point gets its column when assembled
                blk.columns, blk.counts = dup
        else:
            blk, S, W = _nystrom(rows, d0, rank, tol, run.order, budget, on_full)
            kf.basis, kf.points = W, np.ascontiguousarray(A[S])
            kf.point_diag = None if dn is None else dn[S].copy()
        budget.release(run.working)
        kf.rank = blk.rank
    sq = _squared_norm(blk) * scale * scale
    kf.trace_error = max(trace - sq, 0.0)
    if kind in ("linear", "poly_map") and scale != 1.0:
        blk = blk * scale
    elif isinstance(blk, _Approx) and scale != 1.0:
        for b in blk.blocks:
            b *= scale
    return kf, blk


def _squared_norm(blk: Any) -> float:
    if isinstance(blk, _Approx):
        if blk.counts is not None:   # columns of distinct points, each standing for its copies
            return float(sum(np.einsum("rn,rn,n->", b, b, blk.counts) for b in blk.blocks))
        return float(sum(np.einsum("rn,rn->", b, b) for b in blk.blocks))
    if sp.issparse(blk):
        return float(blk.multiply(blk).sum())
    return float(np.einsum("rn,rn->", blk, blk))


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
            columns = np.ascontiguousarray(columns, dtype=np.int64)   # once for all parts
        while parts:
            b = parts.pop(0)
            b = b.toarray() if sp.issparse(b) else b
            if columns is None:
                LT[r:r + b.shape[0]] = b
            else:
                gather_columns(np.ascontiguousarray(b, dtype=np.float64), columns,
                               LT[r:r + b.shape[0]])
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
    r"""``bank`` with the approximated kernels ``kernels`` factored again at ``rank`` (per kernel).

    Each kernel keeps its method (pivoted Cholesky or Nyström) and its
    normalisation; the other kernels keep their rows unchanged.  Pivoted
    Cholesky is deterministic and Nyström takes the first landmarks of the
    same ``seed``'s order, so a larger rank continues the same
    factorization (the same first pivots, nested landmarks) and the residual
    trace can only shrink.  ``X`` (and ``sample_weight``) must be the points
    the bank was built on (:func:`build_factor_bank`).

    Raises
    ------
    ValueError
        A bank without a :class:`FactorMap`, points of another shape, or a
        kernel that is not approximated.
    FactorError
        The new factors (with the unchanged rows) do not fit ``memory_budget``.
    """
    fmap = bank.factor_map
    if not isinstance(fmap, FactorMap) or sp.issparse(bank.LT):
        raise ValueError("refactor_kernels needs a dense bank made by build_factor_bank (it has the kernels' "
                         "factorizations)")
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
    budget = _Budget(limit, N, "")
    budget.take(kept)
    order = np.random.default_rng(np.random.SeedSequence(int(seed))).permutation(N)
    run = _Factorization(fmap.normalize, None, float(tol), order, budget, working,
                         max(0, int((limit - kept - working) // (8 * N * max(len(which), 1)))), "",
                         weights=None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64))
    groups = _Groups(X)
    factors = list(fmap.kernels)
    blocks: list[Any] = [bank.LT[bank.starts[m]:bank.starts[m + 1]] for m in range(M)]
    errors = np.asarray(bank.trace_error, dtype=np.float64).copy()
    t0 = time.perf_counter()
    for m, r in zip(which, ranks):
        run.rank = min(int(r), N)
        kf, blk = _factor_one(m, factors[m].spec, factors[m].method, groups, run)
        factors[m], blocks[m], errors[m] = kf, blk, kf.trace_error
    starts = np.concatenate([[0], np.cumsum([kf.rank for kf in factors])]).astype(np.int64)
    LT = _assemble(blocks, starts, N, False)
    out = FactorBank(LT, starts, trace_error=errors,
                     factor_map=FactorMap(factors, starts, fmap.normalize, fmap.n_features, False))
    logger.info("factored %d kernels again in %.2f s: total rank %d -> %d, residual trace %.3g of the total",
                len(which), time.perf_counter() - t0, int(old.sum()), out.total_rank, out.overall_trace_error)
    return out
