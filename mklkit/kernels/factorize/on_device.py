r"""Factor banks built on a device: Nyström with landmarks shared by every kernel, or greedy pivoted
Cholesky per kernel (``docs/factor_banks.md``, "On a device").

For every kernel of a bank description, at ``n`` landmarks :math:`S` drawn once from ``seed``:
the columns :math:`C_m = k_m(X, X_S)` (N, n), the eigendecomposition :math:`K_{SS} = U\Lambda U^\top`
(eigenvalues below :data:`EIG_CUTOFF` of the largest cut) and :math:`L_m = C_m U\Lambda^{-1/2}`, so that
:math:`L_mL_m^\top = C_mK_{SS}^+C_m^\top`.  One base matrix (squared distances or inner products,
:attr:`~mklkit.kernels.functions.KernelFunction.uses`) per feature group serves all its kernels, and
each kernel maps it by :meth:`~mklkit.kernels.functions.KernelFunction.array_values`; everything runs
through the array API on the library's device.  :class:`DeviceFactorMap` gives new points' decision
values through the same landmarks without their factor rows.

:func:`pivoted_cholesky_on_device` factors each kernel by greedy block pivoted Cholesky (Harbrecht,
Peters & Schneider 2012, Alg. 1, in batches as the host's): each round the kernel rows of the ``batch``
points of largest residual diagonal, less the factor's contribution so far (one product), and the pivots
taken among them by a small pivoted Cholesky of their (b, b) residual block on the host; new points go
through :math:`k(x, X_P)L_P^{-\top}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp


from ..description import BankKernel, Resolver, _check_normalizable, expand_bank
from ..device import PRECISIONS, ArrayLibrary, DeviceFactorBank, check_free
from ..errors import BankError
from ..memory import format_bytes
from .algorithms import _exact_dim
from .per_kernel import _ACCEPT, _BATCH, _FLOOR

__all__ = ["EIG_CUTOFF", "DeviceFactorMap", "DeviceNystroemMap", "nystroem_on_device", "pivoted_cholesky_on_device"]

#: Eigenvalues of :math:`K_{SS}` below this fraction of the largest are cut (as the host's Nyström).
EIG_CUTOFF = 1e-8
NORMALIZE = ("trace", "diagonal", "none")


def _host_points(X: Any) -> np.ndarray:
    """The points as a dense float64 numpy array (a sparse matrix densified), before they go to the device."""
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def _base(kind: str, X: Any, Z: Any, xp: Any, sz: Any = None) -> Any:
    """Squared distances (clipped at 0) or inner products of the rows of ``X`` and ``Z`` (``sz``: the
    squared norms of ``Z``'s rows when known)."""
    G = X @ xp.matrix_transpose(Z)
    if kind == "inner":
        return G
    sx = xp.sum(X * X, axis=1)
    if sz is None:
        sz = xp.sum(Z * Z, axis=1)
    return xp.clip(sx[:, None] + sz[None, :] - 2.0 * G, 0.0, None)


def _diag_base(kind: str, X: Any, xp: Any) -> Any:
    return xp.sum(X * X, axis=1) if kind == "inner" else xp.zeros(X.shape[0], dtype=X.dtype, device=X.device)


def _base_kind(bk: BankKernel) -> str:
    """The base matrix kernel ``bk`` maps (``"sqdist"`` or ``"inner"``), or a :class:`BankError`."""
    kind = bk.function.uses
    if kind not in ("sqdist", "inner"):
        raise BankError(
            f"kernel {bk.label} does not map a base matrix (uses={kind!r}): it is not factored on a device",
            "bank",
            problem="no base matrix",
            value=bk.label,
            allowed="kernel functions with uses 'sqdist' or 'inner' and array_values",
        )
    return kind


def _values(bk: BankKernel, B: Any, xp: Any) -> Any:
    """Kernel ``bk``'s values of the base matrix ``B`` (its ``array_values``), or a :class:`BankError`."""
    try:
        return bk.function.array_values(B, xp)
    except NotImplementedError as exc:
        raise BankError(
            str(exc), "bank", problem="no array_values", value=bk.label, allowed="kernel functions with array_values"
        ) from None


@dataclass
class _Kernel:
    """One kernel's map: its function, group, projection ``W`` (n, r: :math:`U\\Lambda^{-1/2}` of Nyström,
    :math:`L_P^{-\\top}` of pivoted Cholesky), the square root of its trace scale and its own ``points``
    (the pivots' columns of the group, (n, d_g); None: the group's shared landmarks)."""

    function: Any
    group: int
    W: Any
    scale: float
    points: Any = None


class DeviceFactorMap:
    r"""New points through the points of a factorization on the device: their decision values
    (:meth:`decision_x`, no factor rows kept) or factor rows (:meth:`transform`).  Kernel :math:`m`'s rows
    are :math:`s_m k_m(x, Z_m)W_m` with :math:`Z_m` the landmarks of :func:`nystroem_on_device` (shared by
    the kernels of a feature group) or the pivots of :func:`pivoted_cholesky_on_device` (its own)."""

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
        return self.lib.asarray(_host_points(X_new), self.kernels[0].W.dtype if self.kernels else None)

    def _columns(self, Xd: Any, k: _Kernel) -> Any:
        """:math:`k_m(x, Z_m)` of the new points, normalised like the training factors."""
        xp = self.lib.xp
        cols, kind, Z = self.groups[k.group]
        if k.points is not None:
            Z = k.points
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


#: The map of :func:`nystroem_on_device` (the same class as :class:`DeviceFactorMap`).
DeviceNystroemMap = DeviceFactorMap


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
    Xh = _host_points(X)
    N, d = Xh.shape
    kernels: list[BankKernel] = expand_bank(bank, d, feature_names=feature_names, resolve=resolve)
    n = min(int(landmarks), N)
    item = 8 if precision == "float64" else 4
    need = item * (N * d + 3 * N * n + len(kernels) * n * (n + N))
    check_free(
        lib,
        need,
        f"Nyström at {n} landmarks on {lib.name} needs about {format_bytes(need)} for {len(kernels)} kernels on "
        f"{N} points",
        "use fewer landmarks or kernels, or precision float32",
        "landmarks",
        n,
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
        kind = _base_kind(bk)
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
        C = _values(bk, B, xp)
        Kss = _values(bk, Bss, xp)
        diag = _values(bk, Bdiag, xp)
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


def _block_pivots(A: np.ndarray, r: np.ndarray, floor: float, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Greedy pivoted Cholesky of one round's residual block ``A`` (b, b) of the candidates, whose residual
    diagonal is ``r`` (b,), while the best residual left is above ``floor``, at most ``limit`` pivots: the
    candidates taken in order, their residuals when taken, and the lower-triangular :math:`C` (k, k) of
    :math:`A_{PP} = CC^\top`."""
    S = A.copy()
    r = r.copy()
    used = np.zeros(r.size, dtype=bool)
    taken: list[int] = []
    when: list[float] = []
    cols: list[np.ndarray] = []
    while len(taken) < limit:
        i = int(np.argmax(np.where(used, -np.inf, r)))
        if used[i] or not (r[i] > floor and S[i, i] > floor):
            break
        col = S[:, i] / np.sqrt(S[i, i])
        S -= np.outer(col, col)
        taken.append(i)
        when.append(float(r[i]))
        cols.append(col)
        r = np.maximum(r - col * col, 0.0)
        used[i] = True
    P = np.asarray(taken, dtype=np.int64)
    C = np.tril(np.stack(cols, axis=1)[P]) if taken else np.zeros((0, 0))
    return P, np.asarray(when), C


def _greedy_rows(
    rows: Any, d: Any, LT: Any, off: int, cap: int, tol: float, floor: float, batch: int, lib: ArrayLibrary
) -> tuple[int, np.ndarray]:
    r"""Greedy block pivoted Cholesky of one kernel, its kernel rows ``rows(idx)`` (b, N) and its diagonal
    ``d`` (N,) on the device: the rows of :math:`L^\top` written to ``LT[off:off + j]``; returns ``j`` and
    the pivots (host).

    A round pivots among its candidates in their residual block in the host's order; with the rows of all
    of them, the residual's largest entry and trace after each pivot (a cumulative sum on the device) keep
    those the host's ``pivot_batch`` takes: while the trace is above ``tol`` of the kernel's, the largest
    residual above ``floor`` and the next candidate's residual at least ``_ACCEPT`` of the largest."""
    xp = lib.xp
    N = int(d.shape[0])
    iota = xp.arange(N, device=lib.device)
    pivots: list[np.ndarray] = []
    stop_sum = None
    j = 0
    while j < cap:
        dh = lib.host(d)
        left = float(dh.sum())
        if stop_sum is None:
            stop_sum = tol * left
        if left <= stop_sum or float(dh.max()) <= floor:
            break
        live = np.flatnonzero(dh > floor)
        b = min(batch, live.size)
        cand = live[np.argpartition(-dh[live], b - 1)[:b]] if b < live.size else live  # as the host's batch
        cd = lib.asarray(cand, xp.int64)
        G = rows(cd)  # (b, N): k(x_cand, X)
        if j:
            Lj = LT[off : off + j, :]
            G = G - xp.matrix_transpose(xp.take(Lj, cd, axis=1)) @ Lj  # less the factor so far
        A = lib.host(xp.take(G, cd, axis=1))
        P, when, C = _block_pivots(0.5 * (A + A.T), dh[cand], floor, cap - j)
        k = P.size
        if not k:
            break
        # the new rows C^{-1} G_P, solved on the device (numpy's LAPACK on the host: no second BLAS)
        R = xp.linalg.solve(lib.asarray(C, G.dtype), xp.take(G, lib.asarray(P, xp.int64), axis=0))  # (k, N)
        R2 = R * R
        if k > 1:  # the residual after each pivot: its largest entry and its trace
            largest = lib.host(xp.max(d[None, :] - xp.cumulative_sum(R2[: k - 1, :], axis=0), axis=1))
            trace = left - np.cumsum(lib.host(xp.sum(R2[: k - 1, :], axis=1)))
            ok = (trace > stop_sum) & (largest > floor) & (when[1:] >= _ACCEPT * largest)
            k = 1 + (int(np.argmin(ok)) if not ok.all() else k - 1)
            R, R2, P = R[:k, :], R2[:k, :], P[:k]
        LT[off + j : off + j + k, :] = R
        piv = cand[P]
        hit = xp.any(iota[None, :] == lib.asarray(piv, xp.int64)[:, None], axis=0)
        d = xp.where(hit, 0.0, xp.clip(d - xp.sum(R2, axis=0), 0.0, None))
        pivots.append(piv)
        j += k
    return j, (np.concatenate(pivots) if pivots else np.zeros(0, dtype=np.int64))


def pivoted_cholesky_on_device(
    bank: Any,
    X: Any,
    lib: ArrayLibrary,
    *,
    rank: int = 1000,
    tol: float = 0.0,
    normalize: str = "trace",
    precision: str = "float64",
    resolve: Resolver | Mapping[str, type] | None = None,
    feature_names: Sequence[str] | None = None,
    batch: int = _BATCH,
) -> DeviceFactorBank:
    r"""Factor every kernel of a bank description on the training points ``X`` (N, d) by greedy pivoted
    Cholesky, on ``lib``'s device (:func:`~mklkit.kernels.device.array_library`).

    Each kernel to ``rank`` rows at most (or the dimension of its exact feature map, ``linear`` and
    ``poly``, where smaller), or until :math:`\mathrm{tr}(K_m - L_mL_m^\top) \le`
    ``tol`` :math:`\cdot\,\mathrm{tr}K_m`, or until the largest residual diagonal entry is at most
    ``1e-13`` of the largest :math:`k_m(x, x)`.  A round takes the ``batch`` points of largest residual
    diagonal :math:`d`, forms their kernel rows (b, N) on the device less the factor's contribution so far
    (one product :math:`L_{:,c}^\top L^\top`), pivots among them on the host in their (b, b) residual block
    (a candidate is taken while its residual is at least half of every other, as the host's
    ``_pivoted_cholesky``) and gets the new rows of :math:`L^\top` by a solve with the pivots' triangular
    block; :math:`d` stays on the device.

    ``normalize``: ``"trace"`` (:math:`K_m/\mathrm{tr}K_m`, the exact trace), ``"diagonal"`` (unit
    diagonal) or ``"none"``.  Returns the :class:`~mklkit.kernels.device.DeviceFactorBank` (its
    ``factor_map`` a :class:`DeviceFactorMap` through the pivots, :math:`k(x, X_P)L_P^{-\top}`; its
    ``trace_error`` :math:`\mathrm{tr}(K_m - L_mL_m^\top)` normalised).  A
    :class:`~mklkit.kernels.errors.BankError` for a bad setting, when the points, the factors at those ranks
    and a round's rows would not fit in the device's free memory, or for a kernel function without
    ``array_values``.
    """
    if normalize not in NORMALIZE:
        raise BankError(f"normalize must be one of {', '.join(map(repr, NORMALIZE))}; got {normalize!r}")
    for key, value, ok, allowed in (
        ("rank", rank, isinstance(rank, (int, np.integer)) and rank >= 1, "an integer >= 1"),
        ("tol", tol, isinstance(tol, (int, float)) and 0.0 <= tol < 1.0, "a number in [0, 1)"),
        ("batch", batch, isinstance(batch, (int, np.integer)) and batch >= 1, "an integer >= 1"),
        ("precision", precision, precision in PRECISIONS, ", ".join(PRECISIONS)),
    ):
        if not ok:
            raise BankError(
                f"{key} must be {allowed}; got {value!r}", key, problem="is not allowed", value=value, allowed=allowed
            )
    xp = lib.xp
    dtype = getattr(xp, precision)
    Xh = _host_points(X)
    N, d = Xh.shape
    kernels: list[BankKernel] = expand_bank(bank, d, feature_names=feature_names, resolve=resolve)
    cap, b = min(int(rank), N), min(int(batch), N)
    # rows per kernel at most: the rank, or the dimension of an exact feature map (linear, poly) when smaller
    caps = [min(cap, _exact_dim(bk) or cap) for bk in kernels]
    item = 8 if precision == "float64" else 4
    need = item * (2 * N * d + sum(caps) * N + 6 * b * N + 6 * N)
    check_free(
        lib,
        need,
        f"pivoted Cholesky to rank {cap} on {lib.name} needs about {format_bytes(need)} for {len(kernels)} "
        f"kernels on {N} points",
        "use a smaller rank or fewer kernels, or precision float32",
        "rank",
        cap,
    )
    Xd = lib.asarray(Xh, dtype)
    LT = xp.empty((sum(caps), N), dtype=dtype, device=lib.device)
    groups: list[tuple[tuple[int, ...], str, Any]] = []
    index: dict[tuple[tuple[int, ...], str], int] = {}
    maps, errors, ranks = [], [], []
    current, Xg, sq = -1, None, None  # the columns of one group at a time: consecutive kernels share them
    off = 0
    for m, bk in enumerate(kernels):
        fn, kind = bk.function, _base_kind(bk)
        key = (tuple(bk.features), kind)
        if key not in index:
            index[key] = len(groups)
            groups.append((key[0], kind, None))
        g = index[key]
        if g != current:
            Xg = xp.take(Xd, lib.asarray(np.asarray(bk.features), xp.int64), axis=1)
            current, sq = g, xp.sum(Xg * Xg, axis=1)
        diag = _values(bk, _diag_base(kind, Xg, xp), xp)
        tr = float(lib.host(xp.sum(diag)))
        _check_normalizable(
            f"kernel {m} {bk.label!r}", normalize, tr, lib.host(diag) if normalize == "diagonal" else None, True
        )
        root = xp.sqrt(diag) if normalize == "diagonal" else None

        def rows(idx: Any, fn: Any = fn, kind: str = kind, Xg: Any = Xg, sq: Any = sq, root: Any = root) -> Any:
            G = fn.array_values(_base(kind, xp.take(Xg, idx, axis=0), Xg, xp, sq), xp)
            return G if root is None else G / (xp.take(root, idx)[:, None] * root[None, :])

        d0 = diag if root is None else xp.ones(N, dtype=dtype, device=lib.device)
        tr_n = float(lib.host(xp.sum(d0)))
        floor = _FLOOR * max(float(lib.host(xp.max(d0))), 0.0) if N else 0.0
        j, piv = _greedy_rows(rows, d0, LT, off, caps[m], float(tol), floor, b, lib)
        Lm = LT[off : off + j, :]
        # L_P: the factor's rows at the pivots (lower triangular); new points' rows k(x, X_P) L_P^{-T}
        LP = np.tril(lib.host(xp.take(Lm, lib.asarray(piv, xp.int64), axis=1)).T) if j else np.zeros((0, 0))
        W = np.linalg.solve(LP.T, np.eye(j)) if j else LP  # L_P^{-T}
        scale = 1.0 / tr if normalize == "trace" and tr > 0.0 else 1.0
        if scale != 1.0 and j:
            LT[off : off + j, :] = Lm * (scale**0.5)
            Lm = LT[off : off + j, :]
        held = float(lib.host(xp.sum(Lm * Lm))) if j else 0.0
        errors.append(max(tr_n * scale - held, 0.0))
        if root is not None:  # new points: k(x, X_P) / sqrt(k(x,x) k(p,p)); the pivots' part goes into W
            W = W / lib.host(xp.take(root, lib.asarray(piv, xp.int64)))[:, None]
        points = xp.take(Xg, lib.asarray(piv, xp.int64), axis=0)
        maps.append(_Kernel(fn, g, lib.asarray(W, dtype), scale**0.5, points))
        ranks.append(j)
        off += j
    if off < LT.shape[0]:  # kernels stopped below rank: the factors without the rows left over
        LT = xp.asarray(LT[:off, :], copy=True)
    starts = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int64)
    fmap = DeviceFactorMap(lib, groups, maps, starts, normalize)
    return DeviceFactorBank(LT, starts, lib, precision, trace_error=np.asarray(errors), factor_map=fmap)
