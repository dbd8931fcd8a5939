"""The memory of a dense kernel bank, estimated and checked before anything is allocated.

:func:`estimate_bytes` and :func:`estimate_peak_bytes` for the (M, N, N)
bank of :class:`~mklkit.kernels.build.KernelBank` and its cross kernels;
:class:`MemoryBudgetError` refuses one larger than the budget;
:func:`format_bytes` is how every bank names a size.
"""

from __future__ import annotations

from .description import DEFAULT_MEMORY_BUDGET, BankError

__all__ = ["MemoryBudgetError", "estimate_bytes", "estimate_peak_bytes", "format_bytes"]


def estimate_bytes(M: int, N: int, n_rows: int | None = None) -> int:
    """Bytes needed to build ``M`` kernels on ``N`` training points.

    ``M·n_rows·N·8`` for the bank itself (``n_rows = N`` for the training
    bank, the number of test points for :meth:`KernelBank.cross`) plus working
    space: two ``n_rows × N`` float64 matrices (the shared distance or
    inner-product matrix and one temporary) and the per-kernel diagonals.
    """
    rows = N if n_rows is None else n_rows
    return int(8 * (M * rows * N + 2 * rows * N + M * (rows + N)))


def estimate_peak_bytes(M: int, N: int, n_test: int = 0) -> int:
    """Peak bytes of building ``M`` kernels on ``N`` training points, then their test kernels.

    The training bank (``M·N·N·8`` bytes) stays allocated while the
    test-versus-training kernels of ``n_test`` points (``M·n_test·N·8``) are
    computed, so the peak is the larger of :func:`estimate_bytes` of the bank and
    the bank plus :func:`estimate_bytes` of the test kernels (each with its own
    working space).  ``n_test = 0``: :func:`estimate_bytes` of the bank.
    """
    train = estimate_bytes(M, N)
    if n_test <= 0:
        return train
    return max(train, 8 * M * N * N + estimate_bytes(M, N, n_test))


class MemoryBudgetError(BankError):
    """A bank (or cross-kernel bank) larger than the memory budget, refused before allocating.

    Attributes
    ----------
    what : str
        ``"kernel bank"`` or ``"cross-kernel bank"``.
    need, budget : float
        Estimated bytes (:func:`estimate_bytes`) and the budget.
    shape : tuple of int
        ``(M, rows, N)`` of the refused array.
    """

    def __init__(
        self, what: str, need: float, budget: float, shape: tuple[int, int, int], key: str = "memory_budget_bytes"
    ) -> None:
        self.what = what
        self.need = need
        self.budget = budget
        self.shape = shape
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
    if n >= 1024**3:
        return f"{n / 1024**3:.1f} GiB"
    if n >= 1024**2:
        return f"{n / 1024**2:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{int(n)} B"


def _check_budget(M: int, N: int, rows: int, budget: float | None, what: str) -> None:
    if budget is None:
        budget = DEFAULT_MEMORY_BUDGET
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise BankError(f"memory_budget_bytes must be a number of bytes > 0; got {budget!r}")
    need = estimate_bytes(M, N, rows)
    if need > budget:
        raise MemoryBudgetError(what, need, budget, (M, rows, N))
