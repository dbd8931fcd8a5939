"""Precomputed kernels: given Gram matrices (or an ``.npz`` file) checked and normalised as a :class:`KernelBank`."""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import scipy.sparse as sp

from .._jit.gram import all_finite, divide_outer_inplace, symmetrize_inplace
from ..components.params import did_you_mean
from .description import BankError, _check_normalizable, _check_normalize

if TYPE_CHECKING:  # pragma: no cover
    from .build import KernelBank

#: A given Gram matrix is refused as indefinite when its smallest eigenvalue is below ``-PSD_RTOL x |trace|``
#: (rounding leaves about ``-1e-15 x trace``; an indefinite kernel makes the problem non-convex).
PSD_RTOL = 1e-6
_KERNEL_AXES = "kernels x rows x columns"


def bank_from_precomputed(
    cls: type[KernelBank],
    K: Any,
    names: Sequence[str] | None = None,
    normalize: str = "none",
    sym_rtol: float = 1e-8,
    check_psd: bool = True,
    source: str = "K",
    copy: bool = True,
) -> "KernelBank":
    """A bank from given Gram matrices (M, N, N), checked (finite, ``max|K - Kᵀ| <= sym_rtol · max|K|``, then
    symmetrised; :func:`check_psd`) and normalised; errors name ``source``.  ``copy=False`` works in place."""
    normalize = _check_normalize(normalize)
    K = _dense_array(K, source, 3, _KERNEL_AXES, copy=copy)
    if K.shape[1] != K.shape[2]:
        raise BankError(f"{source} must have shape (M, N, N); got {K.shape}")
    M = K.shape[0]
    labels = _names(names, M, source)
    _check_kernels(K, source, sym_rtol=sym_rtol, check_psd=check_psd, square=True, names=names)
    traces, train_diag = _normalize_bank(K, [f"{source}[{m}]" for m in range(M)], normalize)
    return cls(K, labels, None, normalize, traces, train_diag, source=source)


def _normalize_bank(
    K: np.ndarray, where: Sequence[str], normalize: str, built: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Normalise ``K`` in place; the traces and (``"diagonal"``) diagonals before (``built``: errors name features)."""
    M, N = K.shape[0], K.shape[1]
    traces = np.empty(M)
    train_diag = np.empty((M, N)) if normalize == "diagonal" else None
    for m in range(M):
        Km = K[m]
        t = float(np.trace(Km))
        traces[m] = t
        dg = np.diagonal(Km).copy() if normalize == "diagonal" else None
        _check_normalizable(where[m], normalize, t, dg, built)
        if normalize == "trace":
            Km /= t
        elif normalize == "diagonal":
            train_diag[m] = dg  # type: ignore[index]
            s = np.sqrt(dg)
            divide_outer_inplace(Km, s, s)
            np.fill_diagonal(Km, 1.0)
    return traces, train_diag


def precomputed_from_npz(
    cls: type[KernelBank],
    path: str | os.PathLike[str],
    normalize: str = "none",
    sym_rtol: float = 1e-8,
    check_psd: bool = True,
) -> "PrecomputedKernels":
    """Load precomputed kernels from an ``.npz`` file (:class:`PrecomputedKernels`).

    Arrays: ``K_train`` (M, N, N) and ``y_train`` (N,); optional ``K_test`` (M, N_test, N), normalised
    like ``K_train``, ``y_test``, ``names`` (M,) and ``K_test_diag`` (M, N_test), the test points'
    :math:`k_m(x, x)` (needed for ``"diagonal"``).  A :class:`BankError` names the file and the array.
    """
    p = os.fspath(path)
    heads = _npz_headers(p, "kernel", "np.savez(path, K_train=..., y_train=...)")
    _check_arrays(p, heads, ("K_train", "y_train"), KERNEL_ARRAYS, KERNEL_PAIRS)
    with np.load(p, allow_pickle=False) as z:
        arrays = {k: z[k] for k in heads}
    K_train = _dense_array(arrays["K_train"], f"{p}: K_train", 3, _KERNEL_AXES)
    if K_train.shape[1] != K_train.shape[2]:
        raise BankError(f"{p}: K_train must have shape (M, N, N); got {K_train.shape}")
    M, N = K_train.shape[0], K_train.shape[1]
    y_train = _labels(arrays["y_train"], f"{p}: y_train", N)
    names = _names(arrays["names"], M, p) if "names" in arrays else None
    bank = cls.from_precomputed(K_train, names, normalize, sym_rtol, check_psd, source=f"{p}: K_train", copy=False)
    bank.source = p
    K_test, y_test, test_diag = _npz_test(arrays, p, bank, normalize)
    return PrecomputedKernels(bank=bank, y_train=y_train, K_test=K_test, y_test=y_test, source=p, test_diag=test_diag)


#: The arrays a precomputed-kernel ``.npz`` may hold, those it must, and (array, the one it needs).
KERNEL_ARRAYS = ("K_train", "y_train", "K_test", "y_test", "names", "K_test_diag")
KERNEL_PAIRS = (("y_test", "K_test", ""), ("K_test_diag", "K_test", ""))


def _npz_headers(p: str, what: str, example: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{array name: (shape, dtype)}`` of the ``.npz`` file ``p``, read from the ``.npy`` headers only."""
    from numpy.lib import format as npy

    if not os.path.isfile(p):
        raise BankError(f"{p}: precomputed {what} file not found")
    if not zipfile.is_zipfile(p):
        with open(p, "rb") as f:
            kind = "a single .npy array" if f.read(6) == b"\x93NUMPY" else "not a zip archive"
        raise BankError(f"{p}: cannot read as NPZ ({kind}); save the arrays with {example}")
    out = {}
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as f:
                    version = npy.read_magic(f)
                    read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                    shape, _, dtype = read(f)
                out[info.filename[:-4]] = (tuple(int(n) for n in shape), dtype)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise BankError(f"{p}: cannot read as NPZ ({exc})") from None
    return out


def _check_arrays(
    p: str,
    heads: dict[str, tuple[tuple[int, ...], np.dtype]],
    required: tuple[str, ...],
    allowed: tuple[str, ...],
    pairs: tuple[tuple[str, str, str], ...],
) -> None:
    """Refuse missing, unknown or non-numeric arrays (from the headers), and a ``pairs`` array without its partner."""
    keys = list(heads)
    missing = [k for k in required if k not in keys]
    if missing:
        raise BankError(
            f"{p}: missing array{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
            f"the file has: {', '.join(keys) or 'no arrays'}"
        )
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        raise BankError(
            f"{p}: unknown array {unknown[0]!r}{did_you_mean(unknown[0], list(allowed))}; allowed: {', '.join(allowed)}"
        )
    for name, (shape, dtype) in heads.items():
        if dtype.hasobject and name == "names":
            raise BankError(
                f"{p}: names has dtype object; save the names as a string array (np.array(names, dtype=str))"
            )
        if dtype.hasobject and shape == ():
            raise BankError(
                f"{p}: {name} must be a dense numeric array; got a pickled Python object (a "
                f"scipy.sparse matrix saved with np.savez?); save {name}.toarray() instead"
            )
        if dtype.hasobject:
            raise BankError(f"{p}: {name} must be a dense numeric array; got dtype object of shape {shape}")
        if name != "names" and dtype.kind not in "fiub":
            raise BankError(f"{p}: {name} must be a real numeric array; got dtype {dtype} of shape {shape}")
    for name, needs, note in pairs:
        if name in keys and needs not in keys:
            raise BankError(f"{p}: {name} is given without {needs}{note}")


def _names(names: Any, M: int, where: str) -> list[str]:
    """The kernel names (default ``k0``, ``k1``, ...), one per kernel."""
    if names is None:
        return [f"k{m}" for m in range(M)]
    nm = np.asarray(names)
    if nm.ndim != 1 or nm.shape[0] != M:
        raise BankError(f"{where}: names must have shape ({M},) (one per kernel); got {nm.shape}")
    return [str(v) for v in nm]


def _npz_test(
    arrays: dict[str, np.ndarray], p: str, bank: "KernelBank", normalize: str
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``K_test`` checked and normalised in place like ``bank``, ``y_test`` and ``K_test_diag`` (or ``None``)."""
    if "K_test" not in arrays:
        return None, None, None
    M, N = bank.n_kernels, bank.n_samples
    K_test = _dense_array(arrays["K_test"], f"{p}: K_test", 3, _KERNEL_AXES)
    if K_test.shape[0] != M or K_test.shape[2] != N:
        raise BankError(
            f"{p}: K_test must have shape ({M}, N_test, {N}) to match K_train {bank.K.shape}; got {K_test.shape}"
        )
    _check_kernels(K_test, f"{p}: K_test", square=False)
    y_test = _labels(arrays["y_test"], f"{p}: y_test", K_test.shape[1]) if "y_test" in arrays else None
    test_diag = None
    if "K_test_diag" in arrays:
        test_diag = np.asarray(arrays["K_test_diag"], dtype=np.float64)
        if test_diag.shape != (M, K_test.shape[1]):
            raise BankError(f"{p}: K_test_diag must have shape ({M}, {K_test.shape[1]}); got {test_diag.shape}")
    elif normalize == "diagonal":
        raise BankError(
            f"{p}: normalize='diagonal' needs the array K_test_diag (M, N_test) with the test "
            "points' own k(x, x) to normalise K_test"
        )
    try:
        bank.normalize_cross(K_test, test_diag)
    except BankError as exc:
        raise BankError(f"{p}: K_test: {exc}") from None
    return K_test, y_test, test_diag


@dataclass
class PrecomputedKernels:
    """What :meth:`KernelBank.from_npz` returns: the normalised training ``bank``, ``y_train``, ``K_test``
    (normalised like ``bank.K``) and ``y_test`` (``None`` when absent), the file path ``source`` and its
    ``test_diag`` (the test points' k(x, x), before normalisation)."""

    bank: KernelBank
    y_train: np.ndarray
    K_test: np.ndarray | None
    y_test: np.ndarray | None
    source: str = ""
    test_diag: np.ndarray | None = None


def _dense_array(A: Any, where: str, ndim: int, axes: str, copy: bool = False) -> np.ndarray:
    """``A`` as a non-empty C-contiguous float64 array of ``ndim`` dimensions (``axes``), a copy when ``copy``."""
    if sp.issparse(A):
        raise BankError(
            f"{where} must be a dense array; got a scipy.sparse {A.format} matrix of shape {A.shape}; "
            "convert it with .toarray() (precomputed kernels and factors are held dense)"
        )
    A = np.asarray(A)
    if A.dtype == object:
        raise BankError(
            f"{where} must be a numeric array; got dtype object (a Python object such as a "
            "scipy.sparse matrix? convert it with .toarray())"
        )
    if A.dtype.kind not in "fiu":
        raise BankError(f"{where} must be a real numeric array (float or int); got dtype {A.dtype}")
    if A.ndim != ndim:
        raise BankError(f"{where} must be a {ndim}-d array ({axes}); got shape {A.shape}")
    if A.size == 0:
        raise BankError(f"{where} is empty; got shape {A.shape}")
    if copy:
        return np.array(A, dtype=np.float64, order="C", copy=True)
    return np.ascontiguousarray(A, dtype=np.float64)


def _labels(y: Any, where: str, n: int) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 1 or a.shape[0] != n:
        raise BankError(f"{where} must have shape ({n},); got {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise BankError(f"{where} must be numeric; got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a))[0])
        raise BankError(f"{where}[{i}] is {float(a[i])!r}; NaN and infinite labels are not allowed")
    return a


def check_psd(
    K: Any, where: str, names: Sequence[str] | None = None, index: str = "[{m}]", rtol: float = PSD_RTOL
) -> None:
    r"""Refuse (:class:`BankError`) a Gram matrix of ``K`` (M, N, N) whose smallest eigenvalue is below
    ``-rtol x |trace|`` (or negative with a trace <= 0); ``K`` is not modified.

    The test is a Cholesky factorization of :math:`K_m + \text{rtol}\,|\text{tr}\,K_m|\,I` (a tenth of
    the cost of the eigenvalue, which is computed only when it fails); errors name
    ``where`` + ``index`` formatted with ``m``.
    """
    for m in range(np.shape(K)[0]):
        # a C-ordered copy (the Cholesky overwrites it), made symmetric in place
        Km = np.array(K[m], dtype=np.float64, order="C")
        symmetrize_inplace(Km)
        _psd_or_refuse(Km, where + index.format(m=m), names[m] if names is not None else None, rtol, scratch=True)


def _psd_or_refuse(Km: np.ndarray, what: str, name: Any, rtol: float, scratch: bool = False) -> None:
    """The test of :func:`check_psd` on one symmetric ``Km`` (overwritten when ``scratch``)."""
    from scipy.linalg import eigvalsh
    from scipy.linalg.lapack import dpotrf

    tr = float(np.trace(Km))
    if tr > 0:  # lambda_min > -rtol tr  <=>  Km + rtol tr I is positive definite
        shifted = Km if scratch and Km.flags.c_contiguous else np.array(Km, dtype=np.float64, order="C")
        diagonal = np.diag(shifted).copy()
        shifted[np.diag_indices_from(shifted)] += rtol * tr
        if dpotrf(shifted.T, lower=1, overwrite_a=1, clean=0)[1] == 0:
            return
        if shifted is Km:  # LAPACK overwrote the transpose's lower triangle, Km's upper: back
            lower = np.tril(Km, -1)
            Km[...] = lower + lower.T
            Km[np.diag_indices_from(Km)] = diagonal
        del shifted
    lam = float(eigvalsh(Km, subset_by_index=[0, 0], check_finite=False)[0])
    if not (lam < -rtol * abs(tr) or (tr <= 0 and lam < 0)):
        return
    named = f" ({str(name)!r})" if name is not None else ""
    raise BankError(
        f"{what}{named} is not positive semidefinite: smallest eigenvalue {lam:.6g} < -{rtol:g} x |trace| "
        f"= {-rtol * abs(tr):.3g}; allowed: symmetric positive semidefinite Gram matrices (an indefinite "
        "kernel makes the problem non-convex: add a multiple of the identity or clip negative eigenvalues)"
    )


def _check_kernels(
    K: np.ndarray,
    where: str,
    sym_rtol: float = 1e-8,
    check_psd: bool = True,
    square: bool = True,
    names: Sequence[str] | None = None,
) -> None:
    """NaN/inf, symmetry and PSD checks per kernel; symmetrises square kernels in place."""
    for m in range(K.shape[0]):
        Km = K[m]
        if not all_finite(Km):
            i, j = (int(v) for v in np.argwhere(~np.isfinite(Km))[0])
            raise BankError(f"{where}[{m}] has a NaN or infinite value at [{i}, {j}]: {float(Km[i, j])!r}")
        if not square:
            continue
        scale = float(np.max(np.abs(Km)))
        asym = symmetrize_inplace(Km)
        if asym > sym_rtol * scale:
            raise BankError(
                f"{where}[{m}] is not symmetric: max |K - K^T| = {asym:.3g} > {sym_rtol:g} x max |K| "
                f"= {sym_rtol * scale:.3g}"
            )
        if check_psd:  # Km is symmetric now: check_psd's test without its copy
            _psd_or_refuse(Km, f"{where}[{m}]", names[m] if names is not None else None, PSD_RTOL)
