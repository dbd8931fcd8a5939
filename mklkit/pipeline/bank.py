"""The kernel bank of the pipeline: memory check, building in its representation, the test side."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .data import Data
from .errors import _MISSING, PipelineError, _bank_error, _one_line
from .settings import _NPZ_ALLOWED, BankSettings, Representation, _strip

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


# ---------------------------------------------------------------------------
# Checks before anything is built
# ---------------------------------------------------------------------------
def check_memory(M: int, N: int, n_test: int, bank: BankSettings) -> dict[str, int]:
    """Refuse a bank and its test kernels larger than ``kernels.memory_budget`` before building.

    The run holds the training bank while it computes the test kernels: the
    budget is compared with that peak (:func:`~mklkit.kernels.estimate_peak_bytes`).
    A factor bank is checked by :func:`~mklkit.kernels.build_factor_bank`
    itself; a sharded bank per worker by :meth:`ShardedBank.build`.
    """
    from ..kernels import DEFAULT_MEMORY_BUDGET, estimate_bytes, estimate_peak_bytes, format_bytes

    need = {"train": estimate_bytes(M, N), "test": estimate_bytes(M, N, n_test) if n_test else 0,
            "peak": estimate_peak_bytes(M, N, n_test)}
    if bank.representation.kind != "array":
        return need
    budget = bank.budget or DEFAULT_MEMORY_BUDGET
    if need["peak"] > budget:
        test = f", held while its test kernels ({M} x {n_test} x {N}) are computed" if n_test else ""
        given = bank.memory_budget
        raise PipelineError(
            "kernels.memory_budget",
            f"the kernel bank needs about {format_bytes(need['peak'])} ({M} kernels x {N} x {N} float64{test}, "
            f"plus working space), more than the budget of {format_bytes(budget)}",
            given if given is not None else _MISSING,
            "a larger memory budget, fewer kernels, or fewer samples",
            shown=None if given is not None else format_bytes(budget) + " (default)",
        )
    return need


def kernel_resolver() -> Callable[[str], type]:
    """Kernel functions are looked up in the plugin registry (with the names it knows in errors)."""
    from ..kernels.bank import UnknownName
    from ..plugins import UnknownComponentError, get_registry

    reg = get_registry()

    def resolve(name: str) -> type:
        try:
            return reg.get("kernel", name)
        except UnknownComponentError as exc:
            raise UnknownName(exc.args[0] if exc.args else str(exc), reg.names("kernel")) from None

    return resolve


# ---------------------------------------------------------------------------
# Prepared problem
# ---------------------------------------------------------------------------
@dataclass
class TestSide:
    """What predictions on the test part need: test kernels or the factor map's test rows.

    ``K`` (M, N_test, N) normalised like the training bank (``array`` and
    ``sharded`` banks, precomputed kernels); or, for a factor bank, ``X``
    (the test points) — predictions then go through
    :meth:`FactorBank.decision_function` with no N_test x N matrix.
    """

    K: np.ndarray | None = None
    X: Any = None

    def decision_function(self, result: Any, bank: Any) -> np.ndarray:
        """Test predictions of a solve result."""
        if self.K is not None:
            return result.decision_function(self.K)
        return bank.decision_function(self.X, result.alpha, result.bias)


def _expand(bank: BankSettings, d: Data) -> list[Any]:
    from ..kernels import BankError, expand_bank

    try:
        return expand_bank(bank.entries, d.n_features, d.feature_names, resolve=kernel_resolver(), root=bank.key)
    except BankError as exc:
        raise _bank_error(exc, bank.key) from None


def _client(rep: Representation) -> Any:
    if rep.scheduler is not None and not isinstance(rep.scheduler, str):
        return rep.scheduler
    from .._dask import connect

    def error(key: str, problem: str, value: Any, allowed: str) -> PipelineError:
        return PipelineError("kernels.sharded.scheduler", problem, value, allowed)

    return connect(str(rep.scheduler), error)


def _build_bank(d: Data, bank: BankSettings, progress: Callable[[dict[str, Any]], Any] | None) -> tuple[Any, TestSide | None]:
    """The training bank in its representation, and the test side."""
    import numpy as np

    from ..kernels import BankError, KernelBank

    rep = bank.representation
    budget = bank.budget
    try:
        if rep.kind == "factor":
            from ..kernels import build_factor_bank

            fb = build_factor_bank(bank.entries, d.X_train, rank=rep.rank, tol=rep.tol, method=rep.method,
                                   seed=rep.seed, normalize=bank.normalize, memory_budget=budget,
                                   resolve=kernel_resolver(), feature_names=d.feature_names,
                                   root="kernels.factor")
            return fb, (TestSide(X=d.X_test) if d.X_test is not None else None)
        if rep.kind == "sharded":
            from ..kernels.sharded import ShardedBank

            sb = ShardedBank.build(_client(rep), d.X_train, bank.entries, normalize=bank.normalize,
                                   resolve=kernel_resolver(), feature_names=d.feature_names, root=bank.key)
            K_test = sb.cross(d.X_test, memory_budget_bytes=budget) if d.X_test is not None else None
            return sb, (TestSide(K=K_test) if K_test is not None else None)
        kb = KernelBank.build(d.X_train, bank.entries, normalize=bank.normalize, memory_budget_bytes=budget,
                              progress=progress, resolve=kernel_resolver(), feature_names=d.feature_names,
                              root=bank.key)
        K_test = kb.cross(d.X_test, memory_budget_bytes=budget, progress=progress) if d.X_test is not None else None
        return kb, (TestSide(K=np.ascontiguousarray(K_test, dtype=np.float64)) if K_test is not None else None)
    except BankError as exc:
        raise _bank_error(exc, "kernels.factor" if rep.kind == "factor" and isinstance(exc, _factor_error()) else bank.key) from None


def _factor_error() -> type:
    from ..kernels import FactorError

    return FactorError


def _precomputed_bank(d: Data, bank: BankSettings) -> tuple[Any, TestSide | None]:
    """Normalise raw precomputed kernels on the training part; the test kernels the same way."""
    from ..kernels import BankError, KernelBank

    key = "kernels.precomputed"
    shown = bank.shown(key)
    try:
        kb = KernelBank.from_precomputed(d.K_train, names=d.kernel_names, normalize=bank.normalize,
                                         check_psd=False, source=shown, copy=False)
        K_test = d.K_test
        if K_test is not None:
            if bank.normalize == "diagonal" and d.test_diag is None:
                raise PipelineError("kernels.normalize", "unit-diagonal normalisation of test kernels needs "
                                    "the test points' own k(x, x)", bank.normalize,
                                    "trace or none (or add K_test_diag to the NPZ)")
            kb.normalize_cross(K_test, d.test_diag)
    except BankError as exc:
        raise PipelineError(key, _strip(_one_line(str(exc)), shown), shown=repr(shown), allowed=_NPZ_ALLOWED) from None
    return kb, (TestSide(K=K_test) if K_test is not None else None)
