"""The random points of the regularizer identities, grouped by ``C``, and the group-wise evaluation
of a kernel ``fn(values, C, params)`` and of its central differences."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from ._common import _FD, _arr, _central, _f64


class _RegView:
    """Rows with a value of ``C`` each, over the values ``Cs`` of the points ``P``."""

    C: np.ndarray
    Cs: list[float]
    p: np.ndarray

    def __init__(self, P: _RegView, C: np.ndarray):
        self.C = C
        self.Cs = P.Cs
        self.p = P.p

    def groups(self) -> list[tuple[float, np.ndarray]]:
        return [(c, np.flatnonzero(self.C == c)) for c in self.Cs]


class _RegPoints(_RegView):
    """Random points for a regularizer, grouped by ``C``."""

    def __init__(self, reg: Any, rng: np.random.Generator, n: int, C: Any):
        self.p = _f64(reg.param_vector)
        n = max(int(n), 8)
        if C is None:
            Cs = 10.0 ** rng.uniform(math.log10(0.05), math.log10(5.0), 3)
        else:
            Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
        if Cs.size == 0 or not np.all(Cs > 0) or not np.all(np.isfinite(Cs)):
            raise ValueError(f"C must be positive and finite; got {Cs!r}")
        Cs = np.array(list(dict.fromkeys(float(c) for c in Cs)))
        self.Cs = [float(c) for c in Cs]
        per = max(n // len(self.Cs), 6)
        self.C = np.repeat(Cs, per)
        m = self.C.size

        def draw() -> np.ndarray:
            half = m // 2
            a = np.empty(m)
            a[:half] = self.C[:half] * 10.0 ** rng.uniform(-2.0, 1.3, half)
            a[half:] = 10.0 ** rng.uniform(-2.0, 1.0, m - half)
            return a

        self.x, self.v, self.y = draw(), draw(), draw()
        self.radius = np.array([float(reg.conj_radius(c)) for c in self.C])
        fin = np.isfinite(self.radius)
        t = rng.uniform(0.02, 0.98, m)
        self.y_in = np.where(fin, self.radius * t, self.y)
        self.y_out = np.where(fin, self.radius * (1.0 + rng.uniform(0.05, 1.0, m)), np.nan)
        self.out_mask = fin
        self.d = 10.0 ** rng.uniform(-2.0, 2.0, m)


def _by_C(P: _RegView, fn: Callable[..., Any], a: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``fn(values, C, params)`` group-wise; rows outside ``mask`` are NaN."""
    a = np.asarray(a, dtype=np.float64)
    out = np.full(a.shape, np.nan)
    for c, idx in P.groups():
        if mask is not None:
            idx = idx[mask[idx]]
        if idx.size:
            out[idx] = _arr(fn(_f64(a[idx]), c, P.p))
    return out


def _central_by_C(P: _RegView, fn: Callable[..., Any], x: np.ndarray, h: np.ndarray) -> _FD:
    """Central differences of ``fn(values, C, params)`` group-wise."""
    groups = [(c, idx) for c, idx in P.groups() if idx.size]
    parts = [_central(lambda a, c=c: fn(a, c, P.p), _f64(x[idx]), h[idx]) for c, idx in groups]
    idx = np.concatenate([idx for _, idx in groups])
    inv = np.empty_like(idx)
    inv[idx] = np.arange(idx.size)
    return _FD(*(np.concatenate([getattr(pt, f.name) for pt in parts])[inv] for f in dataclasses.fields(_FD)))
