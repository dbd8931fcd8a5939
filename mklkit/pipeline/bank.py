"""The kernel bank of the pipeline: memory check, building in its representation, the test side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .._dask import connect
from .data import Data
from .errors import FACTOR_NPZ_ALLOWED, MISSING, NPZ_ALLOWED, PipelineError, bank_error, one_line, strip_prefix
from .bank_settings import BankSettings, FactorSettings, Representation, kernel_resolver
from .settings import parse_bytes

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


def check_memory(M: int, N: int, n_test: int, bank: BankSettings, rep: Representation | None = None) -> dict[str, int]:
    """Refuse a Gram bank whose peak with its test kernels (:func:`~mklkit.kernels.estimate_peak_bytes`) is
    above ``kernels.memory_budget``, before building (factor and sharded banks check their own)."""
    from ..kernels import DEFAULT_MEMORY_BUDGET, estimate_bytes, estimate_peak_bytes, format_bytes

    need = {
        "train": estimate_bytes(M, N),
        "test": estimate_bytes(M, N, n_test) if n_test else 0,
        "peak": estimate_peak_bytes(M, N, n_test),
    }
    if (rep or bank.representation).kind != "array":
        return need
    budget = bank.budget or DEFAULT_MEMORY_BUDGET
    if need["peak"] > budget:
        test = f", held while its test kernels ({M} x {n_test} x {N}) are computed" if n_test else ""
        given = bank.memory_budget
        raise PipelineError(
            "kernels.memory_budget",
            f"the kernel bank needs about {format_bytes(need['peak'])} ({M} kernels x {N} x {N} float64{test}, "
            f"plus working space), more than the budget of {format_bytes(budget)}",
            given if given is not None else MISSING,
            "a larger memory budget, fewer kernels, or fewer samples",
            shown=None if given is not None else format_bytes(budget) + " (default)",
        )
    return need


#: Above this many training points a chosen representation is factors even where the Gram matrices fit.
DENSE_MAX_N = 5000
#: Largest rank per approximated kernel when the representation is chosen.
AUTO_RANK = 256


def choose_representation(
    specs: list[Any], N: int, n_test: int, bank: BankSettings, factor_supported: bool
) -> tuple[Representation, str]:
    """The representation of a bank whose settings leave it open, and one line saying why.

    Exact factors (:func:`factor_representation`) where every kernel has one; else Gram matrices where
    they fit ``memory_budget`` and N <= :data:`DENSE_MAX_N`; else approximate factors.  An engine that
    does not run on factors (``factor_supported`` false) gets Gram matrices.
    """
    from ..kernels import DEFAULT_MEMORY_BUDGET, estimate_peak_bytes, format_bytes

    M = len(specs)
    array = Representation("array")
    if not factor_supported:
        return array, "the engine works on Gram matrices only"
    budget = bank.budget or DEFAULT_MEMORY_BUDGET
    dense = estimate_peak_bytes(M, N, n_test)
    factors, how = factor_representation(specs, N, bank)
    if factors is not None and factors.rank is None:
        return factors, how
    if dense <= budget and N <= DENSE_MAX_N:
        return array, f"Gram matrices ({format_bytes(dense)} within memory_budget {format_bytes(budget)})"
    if factors is None:  # the Gram matrices' memory check says what is needed
        return array, how
    why = (
        f"their Gram matrices need {format_bytes(dense)}, more than memory_budget {format_bytes(budget)}"
        if dense > budget
        else f"N = {N} > {DENSE_MAX_N}: solves on Gram matrices cost O(N^3)"
    )
    return factors, (
        f"{how} because {why}; the residual is reported (factor_approximation_, summary.json "
        "'factor'); set kernels.factor (estimators: factor=) to choose, or false for Gram matrices"
    )


def factor_representation(specs: list[Any], N: int, bank: BankSettings) -> tuple[Representation | None, str]:
    """The factors a bank is held as when it factors (and why): exact (``rank=None``) when every kernel has
    an exact factor of total rank below N within the budget, else approximate with at most :data:`AUTO_RANK`
    columns per kernel or what half the budget allows; ``None`` when not one column fits."""
    from ..kernels import DEFAULT_MEMORY_BUDGET
    from ..kernels.factorize import exact_rank, rank_that_fits

    M = len(specs)
    budget = bank.budget or DEFAULT_MEMORY_BUDGET
    ranks = [exact_rank(s) for s in specs]
    if all(r is not None for r in ranks):
        R = int(sum(ranks))  # type: ignore[arg-type]
        if R < N and 8 * R * N <= budget:
            return (
                Representation("factor", FactorSettings.model_construct(rank=None)),
                f"exact factors (every kernel has an explicit feature map; total rank {R} < N = {N})",
            )
    # the factors get half the budget: the engine and the factor rows of the test points need the rest
    fair = rank_that_fits(specs, N, budget / 2)
    if fair < 1:
        return None, "no factors fit memory_budget either"
    rank = min(AUTO_RANK, fair, N)
    rep = Representation("factor", FactorSettings.model_construct(rank=rank))  # the settings' defaults otherwise
    return rep, (
        f"approximate factors: {M} kernels on {N} points held as K_m ~ L_m L_m^T (pivoted Cholesky, "
        f"relative residual trace {rep.tol:g}, rank <= {rank} per kernel)"
    )


@dataclass
class TestSide:
    """What predictions on new points need: their kernels ``K`` (M_held, n, N) against the training points,
    normalised like the bank, of the bank's kernels ``kernels`` (``None``: all); or, on a factor bank, the
    points ``X`` (their factor rows computed once)."""

    K: np.ndarray | None = None
    X: Any = None
    kernels: np.ndarray | None = None
    _factor_rows: Any = field(default=None, repr=False)

    def decision_function(self, result: Any, bank: Any, rows: np.ndarray | None = None) -> np.ndarray:
        r"""Predictions :math:`\sum_m K_m(X_{new}, X)\alpha_m + b` of a solve result (``rows``: the training rows
        its problem used, ``None``: all)."""
        import numpy as np

        if self.K is None:
            if self._factor_rows is None:
                self._factor_rows = bank.transform(self.X)
            beta = bank.coefficients(np.asarray(result.alpha, dtype=np.float64))
            return np.asarray(self._factor_rows.T @ beta, dtype=np.float64).ravel() + float(result.bias)
        if self.kernels is None and rows is None:
            return result.decision_function(self.K)
        act = np.asarray(result.active_set, dtype=np.intp)
        f = np.full(self.K.shape[1], float(result.bias))
        if act.size:
            held = act if self.kernels is None else np.searchsorted(self.kernels, act)
            Kt = self.K[held] if rows is None else self.K[held][:, :, rows]
            f += np.einsum("mij,mj->i", Kt, np.asarray(result.alpha, dtype=np.float64)[act])
        return f


def new_points(
    bank: Any,
    X: Any = None,
    K: Any = None,
    scaler: Any = None,
    kernels: np.ndarray | None = None,
    memory_budget: Any = None,
) -> TestSide:
    """The test side of new points: features ``X`` standardized with ``scaler``, then their kernels against
    ``bank`` (a factor bank: their factor rows); or raw precomputed ``K`` normalised like the training
    kernels.  ``kernels``: the bank's kernels ``bank`` holds (``None``: all).

    Raises
    ------
    MemoryBudgetError
        When the kernels of ``X`` exceed ``memory_budget``.
    """
    import numpy as np
    import scipy.sparse as sp

    if K is not None:
        K = np.array(K, dtype=np.float64, order="C")
        return TestSide(K=bank.normalize_cross(K) if K.shape[0] else K, kernels=kernels)
    if scaler is not None:
        if sp.issparse(X) and not scaler.sparse_:
            X = X.toarray()
        X = scaler.transform(X)
    if getattr(bank, "representation", "array") == "factor":
        return TestSide(X=X)
    if bank.n_kernels == 0:
        return TestSide(K=np.empty((0, X.shape[0], bank.n_samples)), kernels=kernels)
    budget = None if memory_budget is None else parse_bytes(memory_budget)
    return TestSide(K=bank.cross(X, memory_budget_bytes=budget), kernels=kernels)


def rows_of(K: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``K[:, rows][:, :, rows]`` as one new C-contiguous array (``K`` itself for ``None``), by one parallel
    jitted gather for a C-contiguous float64 bank."""
    import numpy as np

    from .._jit.gram import take_square

    if rows is None:
        return K
    out = np.empty((K.shape[0], rows.size, rows.size), dtype=K.dtype)
    if K.dtype == np.float64 and K.flags.c_contiguous:
        take_square(K, np.ascontiguousarray(rows, dtype=np.int64), out)
        return out
    for m in range(K.shape[0]):
        np.take(np.take(K[m], rows, axis=0), rows, axis=1, out=out[m])
    return out


def expand_entries(bank: BankSettings, d: Data) -> list[Any]:
    from ..kernels import BankError, expand_bank

    try:
        return expand_bank(bank.entries, d.n_features, d.feature_names, resolve=kernel_resolver(), root=bank.key)
    except BankError as exc:
        raise bank_error(exc, bank.key) from None


def _client(rep: Representation) -> Any:
    if rep.scheduler is not None and not isinstance(rep.scheduler, str):
        return rep.scheduler

    def error(key: str, problem: str, value: Any, allowed: str) -> PipelineError:
        return PipelineError("kernels.sharded.scheduler", problem, value, allowed)

    return connect(str(rep.scheduler), error)


def build_bank(
    d: Data, bank: BankSettings, progress: Callable[[dict[str, Any]], Any] | None, rep: Representation | None = None
) -> tuple[Any, TestSide | None]:
    """The training bank in its representation (``rep``, default the settings'), and the test side."""
    import numpy as np

    from ..kernels import BankError, FactorError, KernelBank

    rep = rep or bank.representation
    budget = bank.budget
    common = {"normalize": bank.normalize, "resolve": kernel_resolver(), "feature_names": d.feature_names}
    try:
        if rep.kind == "factor":
            from ..kernels import build_factor_bank

            fb = build_factor_bank(
                bank.entries,
                d.X_train,
                **common,
                rank=rep.rank,
                tol=rep.tol,
                method=rep.method,
                seed=rep.seed,
                memory_budget=budget,
                root="kernels.factor",
                sample_weight=d.w_train,
            )
            return fb, (TestSide(X=d.X_test) if d.X_test is not None else None)
        if rep.kind == "sharded":
            from ..kernels.sharded import ShardedBank

            sb = ShardedBank.build(_client(rep), d.X_train, bank.entries, **common, root=bank.key)
            K_test = sb.cross(d.X_test, memory_budget_bytes=budget) if d.X_test is not None else None
            return sb, (TestSide(K=K_test) if K_test is not None else None)
        kb = KernelBank.build(
            d.X_train, bank.entries, **common, memory_budget_bytes=budget, progress=progress, root=bank.key
        )
        if d.w_train is not None:
            kb.weight_traces(d.w_train)
        K_test = kb.cross(d.X_test, memory_budget_bytes=budget, progress=progress) if d.X_test is not None else None
        return kb, (TestSide(K=np.ascontiguousarray(K_test, dtype=np.float64)) if K_test is not None else None)
    except BankError as exc:
        raise bank_error(
            exc, "kernels.factor" if rep.kind == "factor" and isinstance(exc, FactorError) else bank.key
        ) from None


def given_bank(d: Data, bank: BankSettings) -> tuple[Any, TestSide | None]:
    """The bank of given kernels or factors (the rows ``X_*`` of ``factor_starts``) normalised on the training
    part, and its test side (test kernels normalised alike; test rows through the factors' map)."""
    from ..kernels import BankError, FactorBank, KernelBank

    factors = d.factor_starts is not None
    key = "kernels.precomputed_factors" if factors else "kernels.precomputed"
    shown = bank.shown(key)
    try:
        if factors:
            fb = FactorBank.from_factors(
                d.X_train,
                d.factor_starts,
                names=d.kernel_names,
                normalize=bank.normalize,
                source=f"{shown}: L_train (training rows)",
            )
            return fb, (TestSide(X=d.X_test) if d.X_test is not None else None)
        kb = KernelBank.from_precomputed(
            d.K_train, names=d.kernel_names, normalize=bank.normalize, check_psd=False, source=shown, copy=False
        )
        if d.w_train is not None:
            kb.weight_traces(d.w_train)
        K_test = d.K_test
        if K_test is not None:
            if bank.normalize == "diagonal" and d.test_diag is None:
                raise PipelineError(
                    "kernels.normalize",
                    "unit-diagonal normalisation of test kernels needs the test points' own k(x, x)",
                    bank.normalize,
                    "trace or none (or add K_test_diag to the NPZ)",
                )
            kb.normalize_cross(K_test, d.test_diag)
    except BankError as exc:
        allowed = FACTOR_NPZ_ALLOWED if factors else NPZ_ALLOWED
        raise PipelineError(key, strip_prefix(one_line(str(exc)), shown), shown=repr(shown), allowed=allowed) from None
    return kb, (TestSide(K=K_test) if K_test is not None else None)


def given_factor_memory(d: Data) -> dict[str, int]:
    """Bytes of the bank of precomputed factors (``train``), its test rows (``test``) and their ``peak``."""
    N, R = d.X_train.shape
    need = {"train": 8 * N * R, "test": 8 * d.n_test * R}
    need["peak"] = 2 * need["train"] + need["test"]  # the raw rows and the bank's normalised copy
    return need
