r"""Factor banks built on a device: Nyström with landmarks shared by every kernel
(``docs/factor_banks.md``, "On a device").

For every kernel of a bank description, at ``n`` landmarks :math:`S` drawn once from ``seed``:
the columns :math:`C_m = k_m(X, X_S)` (N, n), the eigendecomposition :math:`K_{SS} = U\Lambda U^\top`
(eigenvalues below :data:`EIG_CUTOFF` of the largest cut) and :math:`L_m = C_m U\Lambda^{-1/2}`, so that
:math:`L_mL_m^\top = C_mK_{SS}^+C_m^\top`.  One base matrix (squared distances or inner products,
:attr:`~mklkit.kernels.functions.KernelFunction.uses`) per feature group serves all its kernels, and
each kernel maps it by :meth:`~mklkit.kernels.functions.KernelFunction.array_values`; everything runs
through the array API on the library's device.  :class:`DeviceNystroemMap` gives new points' decision
values through the same landmarks without their factor rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..description import BankKernel, Resolver, expand_bank
from ..device import ArrayLibrary, DeviceFactorBank
from ..errors import BankError
from ..memory import format_bytes

__all__ = ["EIG_CUTOFF", "DeviceNystroemMap", "nystroem_on_device"]

#: Eigenvalues of :math:`K_{SS}` below this fraction of the largest are cut (as the host's Nyström).
EIG_CUTOFF = 1e-8
NORMALIZE = ("trace", "diagonal", "none")


def _base(kind: str, X: Any, Z: Any, xp: Any) -> Any:
    """Squared distances (clipped at 0) or inner products of the rows of ``X`` and ``Z``."""
    G = X @ xp.matrix_transpose(Z)
    if kind == "inner":
        return G
    sx = xp.sum(X * X, axis=1)
    sz = xp.sum(Z * Z, axis=1)
    return xp.clip(sx[:, None] + sz[None, :] - 2.0 * G, 0.0, None)


def _diag_base(kind: str, X: Any, xp: Any) -> Any:
    return xp.sum(X * X, axis=1) if kind == "inner" else xp.zeros(X.shape[0], dtype=X.dtype, device=X.device)


@dataclass
class _Kernel:
    """One kernel's map: its function, group, projection :math:`U\\Lambda^{-1/2}` (n, r) and trace scale."""

    function: Any
    group: int
    W: Any
    scale: float


class DeviceNystroemMap:
    """New points through the landmarks of :func:`nystroem_on_device`: their decision values
    (:meth:`decision_x`, no factor rows kept) or factor rows (:meth:`transform`)."""

    def __init__(
        self,
        lib: ArrayLibrary,
        groups: list[tuple[tuple[int, ...], str, Any]],
        kernels: list[_Kernel],
        starts: np.ndarray,
        normalize: str,
    ) -> None:
        self.lib, self.groups, self.kernels, self.starts, self.normalize = lib, groups, kernels, starts, normalize

    def _points(self, X_new: Any) -> Any:
        X = X_new.toarray() if sp.issparse(X_new) else np.asarray(X_new, dtype=np.float64)
        return self.lib.asarray(X, self.kernels[0].W.dtype if self.kernels else None)

    def _columns(self, Xd: Any, k: _Kernel) -> Any:
        """:math:`k_m(x, X_S)` of the new points, normalised like the training factors."""
        xp = self.lib.xp
        cols, kind, Z = self.groups[k.group]
        Xg = xp.take(Xd, self.lib.asarray(np.asarray(cols), xp.int64), axis=1)
        C = k.function.array_values(_base(kind, Xg, Z, xp), xp) * k.scale
        if self.normalize == "diagonal":
            d = k.function.array_values(_diag_base(kind, Xg, xp), xp)
            C = C / xp.sqrt(d)[:, None]
        return C

    def decision_x(self, beta: Any, bias: float, X_new: Any) -> Any:
        r""":math:`\sum_m C_m(x)W_m\beta_m + b` of the new points (device array); kernels of
        :math:`\beta_m = 0` skipped."""
        xp = self.lib.xp
        Xd = self._points(X_new)
        beta = xp.astype(beta, Xd.dtype)  # the map's precision (a float32 bank's map is float32)
        beta_h = self.lib.host(beta)
        z = xp.zeros(Xd.shape[0], dtype=Xd.dtype, device=self.lib.device) + bias
        for m, k in enumerate(self.kernels):
            s, e = int(self.starts[m]), int(self.starts[m + 1])
            if e == s or not np.any(beta_h[s:e] != 0.0):
                continue
            z = z + self._columns(Xd, k) @ (k.W @ beta[s:e])
        return z

    def transform(self, X_new: Any) -> np.ndarray:
        """The factor rows (R, n_new) of new points, numpy."""
        xp = self.lib.xp
        Xd = self._points(X_new)
        parts = [xp.matrix_transpose(self._columns(Xd, k) @ k.W) for k in self.kernels]
        return self.lib.host(xp.concat(parts, axis=0))


def nystroem_on_device(
    bank: Any,
    X: Any,
    lib: ArrayLibrary,
    *,
    landmarks: int = 1000,
    seed: int = 0,
    normalize: str = "trace",
    precision: str = "float64",
    resolve: Resolver | Mapping[str, type] | None = None,
    feature_names: Sequence[str] | None = None,
) -> DeviceFactorBank:
    r"""Factor every kernel of a bank description on the training points ``X`` (N, d) by Nyström at
    ``landmarks`` points shared by all kernels, on ``lib``'s device (:func:`~mklkit.kernels.device.array_library`).

    ``normalize``: ``"trace"`` (:math:`K_m/\mathrm{tr}K_m`, the exact trace), ``"diagonal"`` (unit
    diagonal) or ``"none"``.  Returns the :class:`~mklkit.kernels.device.DeviceFactorBank` (its
    ``factor_map`` a :class:`DeviceNystroemMap`, its ``trace_error`` :math:`\mathrm{tr}(K_m - L_mL_m^\top)`
    normalised).  A :class:`~mklkit.kernels.errors.BankError` when the points and one kernel's columns
    would not fit in the device's free memory, or for a kernel function without ``array_values``.
    """
    if normalize not in NORMALIZE:
        raise BankError(f"normalize must be one of {', '.join(map(repr, NORMALIZE))}; got {normalize!r}")
    xp = lib.xp
    dtype = getattr(xp, precision)
    Xh = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    N, d = Xh.shape
    kernels: list[BankKernel] = expand_bank(bank, d, feature_names=feature_names, resolve=resolve)
    n = min(int(landmarks), N)
    item = 8 if precision == "float64" else 4
    need = item * (N * d + 3 * N * n + len(kernels) * n * (n + N))
    free = lib.free_bytes()
    if free is not None and need > free:
        raise BankError(
            f"Nyström at {n} landmarks on {lib.name} needs about {format_bytes(need)} for {len(kernels)} kernels on "
            f"{N} points but {format_bytes(free)} is free there; use fewer landmarks or kernels, or precision float32",
            "landmarks",
            problem="not enough free memory",
            value=n,
            allowed=f"at most {format_bytes(free)} on {lib.name}",
        )
    S = np.sort(np.random.default_rng(seed).permutation(N)[:n])
    Xd = lib.asarray(Xh, dtype)
    Sx = lib.asarray(S, xp.int64)
    groups: list[tuple[tuple[int, ...], str, Any]] = []
    index: dict[tuple[tuple[int, ...], str], int] = {}
    blocks, maps, errors = [], [], []
    current, bases = -1, None  # the base matrices of one group at a time: consecutive kernels share them
    for bk in kernels:
        fn = bk.function
        kind = fn.uses
        if kind not in ("sqdist", "inner"):
            raise BankError(
                f"kernel {bk.label} does not map a base matrix (uses={kind!r}): it is not factored on a device",
                "bank",
                problem="no base matrix",
                value=bk.label,
                allowed="kernel functions with uses 'sqdist' or 'inner' and array_values",
            )
        key = (tuple(bk.features), kind)
        Xg = None
        if key not in index:
            index[key] = len(groups)
            Xg = xp.take(Xd, lib.asarray(np.asarray(bk.features), xp.int64), axis=1)
            groups.append((key[0], kind, xp.take(Xg, Sx, axis=0)))
        g = index[key]
        if g != current:
            Z = groups[g][2]
            if Xg is None:
                Xg = xp.take(Xd, lib.asarray(np.asarray(bk.features), xp.int64), axis=1)
            current, bases = g, (_base(kind, Xg, Z, xp), _base(kind, Z, Z, xp), _diag_base(kind, Xg, xp))
        B, Bss, Bdiag = bases
        try:
            C = fn.array_values(B, xp)
            Kss = fn.array_values(Bss, xp)
            diag = fn.array_values(Bdiag, xp)
        except NotImplementedError as exc:
            raise BankError(
                str(exc),
                "bank",
                problem="no array_values",
                value=bk.label,
                allowed="kernel functions with array_values",
            ) from None
        if normalize == "diagonal":
            dS = xp.take(diag, Sx)
            C = C / (xp.sqrt(diag)[:, None] * xp.sqrt(dS)[None, :])
            Kss = Kss / (xp.sqrt(dS)[:, None] * xp.sqrt(dS)[None, :])
            diag = diag / diag
        Kss = 0.5 * (Kss + xp.matrix_transpose(Kss))
        lam, U = xp.linalg.eigh(Kss)
        lam_h = lib.host(lam)
        keep = np.flatnonzero(lam_h > EIG_CUTOFF * max(float(lam_h[-1]), 0.0))
        W = (
            xp.take(U, lib.asarray(keep, xp.int64), axis=1)
            / xp.sqrt(xp.take(lam, lib.asarray(keep, xp.int64)))[None, :]
        )
        tr = float(lib.host(xp.sum(diag)))
        scale = 1.0 / tr if normalize == "trace" and tr > 0.0 else 1.0
        # W^T C^T, not (C W)^T: a product's result is laid out row by row, as the passes read it
        LmT = (xp.matrix_transpose(W) @ xp.matrix_transpose(C)) * (scale**0.5)
        blocks.append(LmT)
        held = float(lib.host(xp.sum(LmT * LmT)))
        errors.append(max(tr * scale - held, 0.0))
        if normalize == "diagonal":
            # new points: C(x, S) / sqrt(k(x,x) k(s,s)); the landmarks' part goes into W
            W = W / xp.sqrt(xp.take(fn.array_values(Bdiag, xp), Sx))[:, None]
        maps.append(_Kernel(fn, g, W, scale**0.5))
    ranks = [int(b.shape[0]) for b in blocks]
    starts = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    LT = xp.concat(blocks, axis=0)
    fmap = DeviceNystroemMap(lib, groups, maps, starts, normalize)
    return DeviceFactorBank(LT, starts, lib, precision, trace_error=np.asarray(errors), factor_map=fmap)
