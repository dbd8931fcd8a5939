"""The memory of a dense kernel bank, estimated and checked before anything is allocated."""

from __future__ import annotations

from .description import DEFAULT_MEMORY_BUDGET, BankError


def estimate_bytes(M: int, N: int, n_rows: int | None = None) -> int:
    """Bytes needed to build ``M`` kernels on ``N`` training points: ``8·M·n_rows·N`` (``n_rows``: N, or the
    test points of :meth:`KernelBank.cross`) plus two ``n_rows × N`` matrices and the diagonals."""
    rows = N if n_rows is None else n_rows
    return int(8 * (M * rows * N + 2 * rows * N + M * (rows + N)))


def estimate_peak_bytes(M: int, N: int, n_test: int = 0) -> int:
    """Peak bytes of building ``M`` kernels on ``N`` training points, then the test kernels of ``n_test``
    points while the bank is held."""
    train = estimate_bytes(M, N)
    if n_test <= 0:
        return train
    return max(train, 8 * M * N * N + estimate_bytes(M, N, n_test))


class MemoryBudgetError(BankError):
    """A bank (``what``: ``"kernel bank"`` or ``"cross-kernel bank"``) of ``shape`` (M, rows, N) whose
    estimated bytes ``need`` exceed ``budget``, refused before allocating."""

    def __init__(
        self, what: str, need: float, budget: float, shape: tuple[int, int, int], key: str = "memory_budget_bytes"
    ) -> None:
        self.what, self.need, self.budget, self.shape = what, need, budget, shape
        super().__init__(self.describe(key), key=key)

    def describe(self, key: str) -> str:
        """The message, naming the budget parameter ``key`` (a caller's name for it)."""
        M, rows, N = self.shape
        return (
            f"{self.what} needs about {format_bytes(self.need)} ({M} kernels x {rows} x {N} float64 "
            f"= {format_bytes(8 * M * rows * N)}, plus working space) but {key} is "
            f"{format_bytes(self.budget)}; use fewer kernels or samples, or raise {key}"
        )


def format_bytes(n: float) -> str:
    """``512.0 MiB``, ``3.2 GiB``."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _check_budget(M: int, N: int, rows: int, budget: float | None, what: str) -> None:
    if budget is None:
        budget = DEFAULT_MEMORY_BUDGET
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise BankError(f"memory_budget_bytes must be a number of bytes > 0; got {budget!r}")
    need = estimate_bytes(M, N, rows)
    if need > budget:
        raise MemoryBudgetError(what, need, budget, (M, rows, N))
