r"""A factor bank held by an array library on its device (``docs/factor_banks.md``, "On a device").

:class:`DeviceFactorBank` keeps the stacked transposed factors :math:`L^\top` (R, N) of a
:class:`~mklkit.kernels.factor.FactorBank` as one array of numpy, PyTorch, CuPy or
array-api-strict, and makes its passes through the array API standard (``array-api-compat``): the
same functions run on every library, so the suite (no GPU) runs every line that a GPU runs.  Each
pass is one matrix product over the bank, :math:`L^\top v` (:meth:`~DeviceFactorBank.project_x`) or
:math:`L\beta` (:meth:`~DeviceFactorBank.expand_x`); block sums of squares are one product with the
(M, R) indicator of the blocks.  The host-side :class:`~mklkit.kernels.ops.GramBank` methods take
and return numpy float64 arrays; those an engine on the device does not make run on the host bank.

:func:`device_bank` makes the copy once per bank, library, device and precision and keeps it while
the bank lives; before allocating it checks the bytes against the device's free memory.
"""

from __future__ import annotations

import importlib
import importlib.util
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import BankError
from .factor import FactorBank
from .memory import format_bytes
from .ops import BankAccessError, GramBank

__all__ = ["DEVICES", "LIBRARIES", "PRECISIONS", "ArrayLibrary", "DeviceFactorBank", "array_library", "device_bank"]

#: The array libraries a factor bank can be held by (``auto``: numpy on ``cpu``, else PyTorch, else CuPy).
LIBRARIES = ("auto", "numpy", "torch", "cupy", "array_api_strict")
#: The precisions of a bank on a device: float64 (the default), or float32 chosen explicitly.
PRECISIONS = ("float64", "float32")

#: Largest indicator (M x R entries) of the blocks kept for their sums of squares; beyond it, a loop over blocks.
INDICATOR_MAX = 1 << 24
#: Entries of the bank read at a time where a pass forms a temporary of the same size.
ROW_CHUNK = 1 << 24
#: Memory left free on the device beyond the bank: the vectors of a solve and the library's own.
HEADROOM = 1.10


@dataclass(frozen=True)
class ArrayLibrary:
    """An array library on one device: its array-API namespace ``xp``, the ``device`` object, the
    user's ``name`` for it, the bytes free there (None: not known) and a synchronisation (timing)."""

    library: str
    name: str
    xp: Any
    device: Any
    free_bytes: Callable[[], int | None]
    synchronize: Callable[[], None]
    to_host: Callable[[Any], np.ndarray]

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        """``a`` (numpy or the library's) on the device, in ``dtype`` (default the bank's float64)."""
        xp = self.xp
        return xp.asarray(a, dtype=xp.float64 if dtype is None else dtype, device=self.device)

    def host(self, x: Any) -> np.ndarray:
        """A numpy float64 copy of ``x`` (or the array itself for numpy float64)."""
        return np.asarray(self.to_host(x), dtype=np.float64)


def _host_available() -> int | None:
    """The memory available on this machine (``MemAvailable`` of ``/proc/meminfo``), or None."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _no_sync() -> None:
    return None


def _error(key: str, problem: str, value: Any, allowed: str) -> BankError:
    return BankError(
        f"{key} {problem}; got {value!r} (allowed: {allowed})", key, problem=problem, value=value, allowed=allowed
    )


def _import(name: str, device: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise _error(
            "device", f"needs {name}, which is not installed", device, f"'cpu', or install {name} for a GPU"
        ) from None


#: The devices, in words.
DEVICES = "'cpu', 'cuda' or 'cuda:K'"


def parse_device(device: Any) -> str | None:
    """``device`` in lower case when it names a device (``cpu``, ``cuda``, ``cuda:K``), else None."""
    if not isinstance(device, str):
        return None
    dev = device.strip().lower()
    return dev if dev in ("cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit()) else None


def array_library(device: str = "cpu", library: str = "auto") -> ArrayLibrary:
    """The library and device a bank is held by: ``device`` ``"cpu"``, ``"cuda"`` or ``"cuda:K"``
    (``library`` ``auto``: numpy on the CPU, PyTorch else, CuPy without PyTorch).

    Raises :class:`~mklkit.kernels.errors.BankError` (key ``device`` or ``array_library``) for an
    unknown name, a missing library or a device the library does not see.
    """
    if library not in LIBRARIES:
        raise _error("array_library", "is not a known array library", library, ", ".join(LIBRARIES))
    dev = parse_device(device)
    if dev is None:
        raise _error("device", "is not a device", device, DEVICES)
    cuda = dev != "cpu"
    if library == "auto":
        if not cuda:
            library = "numpy"
        elif importlib.util.find_spec("torch"):
            library = "torch"
        elif importlib.util.find_spec("cupy"):
            library = "cupy"
        else:
            raise _error(
                "device", "needs PyTorch or CuPy, and neither is installed", device, "'cpu', or install torch or cupy"
            )
    if library in ("numpy", "array_api_strict") and cuda:
        raise _error("device", f"is not a device of {library}", device, "'cpu' (or array_library torch or cupy)")
    if library == "numpy":
        return ArrayLibrary(
            "numpy",
            "cpu",
            importlib.import_module("array_api_compat.numpy"),
            "cpu",
            _host_available,
            _no_sync,
            np.asarray,
        )
    if library == "array_api_strict":
        xp = _import("array_api_strict", dev)
        return ArrayLibrary(
            library, "cpu", xp, xp.Device("CPU_DEVICE"), _host_available, _no_sync, lambda x: np.from_dlpack(x)
        )
    if library == "torch":
        torch = _import("torch", dev)
        if cuda and not torch.cuda.is_available():
            raise _error("device", "is not available to torch (torch.cuda.is_available() is False)", device, "'cpu'")
        tdev = torch.device(dev)
        if cuda:
            if tdev.index is not None and tdev.index >= torch.cuda.device_count():
                raise _error(
                    "device", "is not a device torch sees", device, f"cuda:0 to cuda:{torch.cuda.device_count() - 1}"
                )

            def free() -> int:
                return int(torch.cuda.mem_get_info(tdev)[0])

            def sync() -> None:
                torch.cuda.synchronize(tdev)
        else:
            free, sync = _host_available, _no_sync
        return ArrayLibrary(
            library,
            str(tdev),
            importlib.import_module("array_api_compat.torch"),
            tdev,
            free,
            sync,
            lambda x: x.detach().cpu().numpy(),
        )
    cupy = _import("cupy", dev)
    if not cuda:
        raise _error("device", "is not a device of cupy", device, "'cuda' or 'cuda:K'")
    index = int(dev[5:]) if ":" in dev else 0
    if index >= cupy.cuda.runtime.getDeviceCount():
        raise _error(
            "device", "is not a device cupy sees", device, f"cuda:0 to cuda:{cupy.cuda.runtime.getDeviceCount() - 1}"
        )
    cdev = cupy.cuda.Device(index)

    def cupy_free() -> int:
        with cdev:
            return int(cupy.cuda.runtime.memGetInfo()[0])

    def cupy_sync() -> None:
        cdev.synchronize()

    xp = importlib.import_module("array_api_compat.cupy")
    return ArrayLibrary(library, f"cuda:{index}", xp, cdev, cupy_free, cupy_sync, cupy.asnumpy)


class DeviceFactorBank(GramBank):
    r"""A factor bank whose stacked transposed factors :math:`L^\top` (R, N) an array library holds on a device.

    Made by :func:`device_bank` from a :class:`~mklkit.kernels.factor.FactorBank` (``host``, whose factor
    map predicts new points), or built there (:func:`~mklkit.kernels.factorize.on_device.nystroem_on_device`,
    :func:`~mklkit.kernels.factorize.on_device.pivoted_cholesky_on_device`: ``host`` None, ``factor_map`` its own).  ``lib`` the :class:`ArrayLibrary`, ``LT`` the factors on the
    device in ``precision``.  The ``*_x`` methods take and return the library's arrays; the others numpy float64.
    """

    representation = "factor"

    def __init__(
        self,
        LT: Any,
        starts: Any,
        lib: ArrayLibrary,
        precision: str = "float64",
        *,
        host: FactorBank | None = None,
        trace_error: np.ndarray | None = None,
        factor_map: Any = None,
    ) -> None:
        xp = lib.xp
        self.host, self.lib, self.xp = host, lib, xp
        self.precision = precision
        self.dtype = getattr(xp, precision)
        self.LT = LT
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ranks = np.diff(self.starts)
        M, R, N = self.ranks.size, int(self.starts[-1]), int(LT.shape[1])
        if LT.shape[0] != R:
            raise ValueError(f"LT has {LT.shape[0]} rows but starts end at {R}")
        self.shape = (M, N, N)
        self.factor_map = factor_map
        self.trace_error = np.zeros(M) if trace_error is None else np.asarray(trace_error, dtype=np.float64)
        #: the common rank of every block (0: ranks differ); the blocks are then one (M, r, N) array
        self.even_rank = int(self.ranks[0]) if M and self.ranks[0] > 0 and np.all(self.ranks == self.ranks[0]) else 0
        block_of = np.repeat(np.arange(M), self.ranks)
        self._block_of = lib.asarray(block_of, xp.int64)
        ind = None
        if not self.even_rank and M * R <= INDICATOR_MAX:
            ind = np.zeros((M, R))
            ind[block_of, np.arange(R)] = 1.0
            ind = lib.asarray(ind, self.dtype)
        self._indicator = ind
        self._gram_eig: dict[int, tuple[Any, Any]] = {}
        self._trace: np.ndarray | None = None
        #: what an engine computes once per bank and keeps (apg's block scales, by its key)
        self.kept: dict[Any, Any] = {}

    @classmethod
    def of(cls, host: FactorBank, lib: ArrayLibrary, precision: str = "float64") -> "DeviceFactorBank":
        """A copy of ``host`` on the device (none for numpy float64: the same array)."""
        LT = host.LT.toarray() if host.sparse else host.LT
        return cls(
            lib.asarray(LT, getattr(lib.xp, precision)),
            host.starts,
            lib,
            precision,
            host=host,
            trace_error=host.trace_error,
            factor_map=host.factor_map,
        )

    def __repr__(self) -> str:
        M, N, _ = self.shape
        return (
            f"DeviceFactorBank(M={M}, N={N}, R={self.total_rank}, {self.lib.library} on {self.lib.name}, "
            f"{self.precision})"
        )

    @property
    def total_rank(self) -> int:
        return int(self.starts[-1])

    @property
    def nbytes(self) -> int:
        """Bytes of the factors on the device."""
        return int(self.total_rank * self.shape[1] * (8 if self.precision == "float64" else 4))

    @staticmethod
    def bytes_needed(host: FactorBank, itemsize: int) -> int:
        """Bytes of the device copy: the factors and the blocks' indicator (at most)."""
        M, N, _ = host.shape
        R = int(host.starts[-1])
        return itemsize * (R * N + (M * R if M * R <= INDICATOR_MAX else 0))

    # -- passes on the device ----------------------------------------------------
    def to_x(self, a: Any) -> Any:
        """A host array on the device in the bank's precision."""
        return self.lib.asarray(np.ascontiguousarray(a, dtype=np.float64), self.dtype)

    def project_x(self, v: Any) -> Any:
        r""":math:`L^\top v` (R,): one pass."""
        return self.LT @ v

    def expand_x(self, beta: Any) -> Any:
        r""":math:`L\beta` (N,): one pass."""
        return beta @ self.LT

    def block_sums_x(self, g: Any) -> Any:
        r""":math:`\sum_{j \in m} g_j` (M,) of stacked coordinates ``g`` (R,)."""
        xp = self.xp
        if self.even_rank:
            return xp.sum(xp.reshape(g, (self.shape[0], self.even_rank)), axis=1)
        if self._indicator is not None:
            return self._indicator @ g
        return xp.stack([xp.sum(g[int(s) : int(e)]) for s, e in zip(self.starts[:-1], self.starts[1:])])

    def block_squares_x(self, g: Any) -> Any:
        r""":math:`\|g_m\|^2` (M,) of stacked coordinates ``g`` (R,)."""
        return self.block_sums_x(g * g)

    def block_norms_of(self, g: Any) -> np.ndarray:
        r""":math:`\|g_m\|` (M,) on the host of stacked coordinates ``g`` (R,) on the device."""
        return np.sqrt(np.maximum(self.lib.host(self.block_squares_x(g)), 0.0))

    def weighted_row_squares_x(self, h: Any) -> Any:
        r""":math:`\sum_i h_i L_{ji}^2` (R,) for weights ``h`` (N,): one pass, by chunks of rows
        (no copy of the bank)."""
        xp = self.xp
        R, N = self.total_rank, self.shape[1]
        step = max(1, ROW_CHUNK // max(N, 1))
        parts = [(self.LT[i : min(i + step, R), :] * self.LT[i : min(i + step, R), :]) @ h for i in range(0, R, step)]
        return xp.concat(parts) if parts else xp.zeros(0, dtype=self.dtype, device=self.lib.device)

    def spread_x(self, c: Any) -> Any:
        """Per-block values ``c`` (M,) repeated over each block's coordinates (R,)."""
        return self.xp.take(c, self._block_of)

    def blocks_x(self) -> Any:
        """The factors as one (M, r, N) array (a view) when every block has rank r, else None."""
        if not self.even_rank:
            return None
        return self.xp.reshape(self.LT, (self.shape[0], self.even_rank, self.shape[1]))

    def coefficients_x(self, alpha: np.ndarray) -> Any:
        r""":math:`\beta_m = L_m^\top\alpha_m` (R,) of ``alpha`` (M, N): one pass."""
        xp = self.xp
        B = self.blocks_x()
        if B is not None:
            return xp.reshape(B @ self.to_x(alpha)[:, :, None], (-1,))
        parts = []
        for m, (s, e) in enumerate(zip(self.starts[:-1], self.starts[1:])):
            if e > s:
                parts.append(self.LT[int(s) : int(e), :] @ self.to_x(alpha[m]))
        return xp.concat(parts) if parts else xp.zeros(0, dtype=self.dtype, device=self.lib.device)

    # -- the GramBank operations (numpy in and out) ----------------------------------
    def trace(self) -> np.ndarray:
        r""":math:`\|L_m\|_F^2` (M,)."""
        if self._trace is None:
            ones = self.xp.ones(self.shape[1], dtype=self.dtype, device=self.lib.device)
            self._trace = self.lib.host(self.block_sums_x(self.weighted_row_squares_x(ones)))
        return self._trace.copy()

    def project(self, v: np.ndarray) -> np.ndarray:
        return self.lib.host(self.project_x(self.to_x(v)))

    def expand(self, beta: np.ndarray) -> np.ndarray:
        return self.lib.host(self.expand_x(self.to_x(beta)))

    def dual_block_norms(self, rho: np.ndarray) -> np.ndarray:
        return self.block_norms_of(self.project_x(self.to_x(rho)))

    def coefficients(self, alpha: np.ndarray) -> np.ndarray:
        return self.lib.host(self.coefficients_x(np.asarray(alpha, dtype=np.float64)))

    def block_norms(self, alpha: np.ndarray) -> np.ndarray:
        return self.block_norms_of(self.coefficients_x(np.asarray(alpha, dtype=np.float64)))

    def alpha_from_beta(self, beta: np.ndarray) -> np.ndarray:
        r"""Minimum-norm :math:`\alpha_m = L_m(L_m^\top L_m)^+\beta_m` (M, N) on the device, by the
        eigendecomposition of each non-zero block's Gram matrix (kept; eigenvalues below
        :math:`10^{-12}\lambda_{\max}r_m` dropped, as the host bank does)."""
        xp = self.xp
        beta = np.asarray(beta, dtype=np.float64)
        M, N, _ = self.shape
        alpha = np.zeros((M, N))
        for m, (s, e) in enumerate(zip(self.starts[:-1], self.starts[1:])):
            bm = beta[int(s) : int(e)]
            if e == s or not np.any(bm != 0.0):
                continue
            Lm = self.LT[int(s) : int(e), :]
            if m not in self._gram_eig:
                w, V = xp.linalg.eigh(Lm @ xp.matrix_transpose(Lm))
                w = self.lib.host(w)
                keep = w > 1e-12 * max(float(w[-1]), 0.0) * int(e - s)
                inv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
                self._gram_eig[m] = (V, self.to_x(inv))
            V, inv = self._gram_eig[m]
            coef = V @ (inv * (self.to_x(bm) @ V))
            alpha[m] = self.lib.host(coef @ Lm)
        return alpha

    # the passes of the Gram-bank engines, on the host bank
    def _on_host(self) -> FactorBank:
        if self.host is None:
            raise BankAccessError(
                f"{self!r} was built on its device and has no copy on the host: the engines that read a bank "
                "through its Gram operations cannot solve it; use the engine apg"
            )
        return self.host

    def matvecs(self, v: np.ndarray) -> np.ndarray:
        return self._on_host().matvecs(v)

    def matvecs_and_norms(self, v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._on_host().matvecs_and_norms(v, w)

    def direction_forms(self, d: np.ndarray, KR: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._on_host().direction_forms(d, KR)

    def accumulate_hessian(self, *args: Any, **kwargs: Any) -> Any:
        return self._on_host().accumulate_hessian(*args, **kwargs)

    def matvecs_rows(self, A: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._on_host().matvecs_rows(A, idx)

    def combine(self, alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return self._on_host().combine(alpha, idx)

    def transform(self, X_new: Any) -> Any:
        if self.factor_map is None:
            raise ValueError(f"{self!r} has no map to new points")
        return self.factor_map.transform(X_new)


_COPIES: "weakref.WeakKeyDictionary[FactorBank, dict[tuple[str, str, str], DeviceFactorBank]]" = (
    weakref.WeakKeyDictionary()
)


def device_bank(
    bank: FactorBank, device: str = "cpu", library: str = "auto", precision: str = "float64"
) -> DeviceFactorBank:
    """``bank`` held by ``library`` on ``device`` in ``precision``: made on the first call (its bytes
    checked against the device's free memory) and kept while ``bank`` lives.

    Raises :class:`~mklkit.kernels.errors.BankError` for an unknown device, library or precision,
    and when the copy would not fit in the device's free memory.
    """
    if isinstance(bank, DeviceFactorBank):
        lib = array_library(device, library)
        if (lib.library, lib.name, precision) == (bank.lib.library, bank.lib.name, bank.precision):
            return bank
        if bank.host is None:
            raise _error(
                "device",
                f"is not where this bank is ({bank.lib.library} on {bank.lib.name}, {bank.precision}; it was built there)",
                f"{device} ({library}, {precision})",
                f"device {bank.lib.name!r}, array_library {bank.lib.library!r}, precision {bank.precision!r}",
            )
        bank = bank.host
    if not isinstance(bank, FactorBank):
        raise _error("bank", "is not a factor bank", type(bank).__name__, "a FactorBank (kernels.factor)")
    if precision not in PRECISIONS:
        raise _error("precision", "is not a precision of a device bank", precision, ", ".join(PRECISIONS))
    lib = array_library(device, library)
    copies = _COPIES.setdefault(bank, {})
    key = (lib.library, lib.name, precision)
    if key not in copies:
        itemsize = 8 if precision == "float64" else 4
        shared = lib.library == "numpy" and precision == "float64" and not bank.sparse  # no copy is made
        need = 0 if shared else DeviceFactorBank.bytes_needed(bank, itemsize)
        M, N, _ = bank.shape
        check_free(
            lib,
            need,
            f"the factor bank needs {format_bytes(need)} on {lib.name} ({bank.total_rank} x {N} {precision}, "
            f"{M} kernels)",
            "use smaller ranks, fewer kernels" + (", or precision float32" if precision == "float64" else ""),
            "device",
            lib.name,
            headroom=HEADROOM,
        )
        copies[key] = DeviceFactorBank.of(bank, lib, precision)
    return copies[key]


def check_free(
    lib: ArrayLibrary, need: float, what: str, advice: str, key: str, value: Any, headroom: float = 1.0
) -> None:
    """A :class:`BankError` (``key``, ``value``) when ``need`` bytes, times ``headroom``, would not fit in the
    free memory of ``lib``'s device: ``what`` the allocation and its size, ``advice`` what to change."""
    free = lib.free_bytes() if need else None
    if free is None or need * headroom <= free:
        return
    raise BankError(
        f"{what} but {format_bytes(free)} is free there; {advice}",
        key,
        problem="not enough free memory",
        value=value,
        allowed=f"at most {format_bytes(free / headroom)} on {lib.name}",
    )


def all_finite(x: Any, lib: ArrayLibrary) -> bool:
    """Whether every entry of the library's array ``x`` is finite."""
    return bool(lib.to_host(lib.xp.all(lib.xp.isfinite(x))))
