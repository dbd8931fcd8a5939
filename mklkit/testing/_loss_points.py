"""The random points at which the loss identities are checked."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..components.base import CLASSIFICATION
from ._common import _arr, _f64


class _LossPoints:
    """Random points for a loss."""

    def __init__(self, loss: Any, rng: np.random.Generator, n: int):
        k = loss.jit
        self.p = _f64(loss.param_vector)
        n = max(int(n), 8)
        if loss.task == CLASSIFICATION:
            y = rng.choice(np.array([-1.0, 1.0]), size=n)
            y[0], y[1] = -1.0, 1.0
        else:
            y = np.round(rng.normal(0.0, 2.0, size=n), 3)
            y[0] = 0.0
        self.y = _f64(y)
        third = n // 3
        z = np.empty(n)
        z[:third] = rng.uniform(-4.0, 4.0, third)
        z[third : 2 * third] = y[third : 2 * third] + rng.uniform(-1.5, 1.5, third)
        m = n - 2 * third
        z[2 * third :] = rng.choice([-1.0, 1.0], m) * 10.0 ** rng.uniform(-3.0, 2.5, m)
        self.z = _f64(z)
        lo = _arr(k.conj_lower(self.y, self.p))
        hi = _arr(k.conj_upper(self.y, self.p))
        self.lo, self.hi = lo, hi
        self.u, self.u_out, self.out_mask = self._draw_u(rng, lo, hi)

    def with_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(y, u): the points inside the domain, then the finite lower and upper ends."""
        ys, us = [self.y], [self.u]
        for b in (self.lo, self.hi):
            fb = np.isfinite(b)
            ys.append(self.y[fb])
            us.append(b[fb])
        return np.concatenate(ys), np.concatenate(us)

    def _draw_u(self, rng, lo, hi):
        n = lo.size
        flo, fhi = np.isfinite(lo), np.isfinite(hi)
        both = flo & fhi
        width = np.where(both, hi - lo, 1.0)
        t = rng.uniform(0.02, 0.98, n)
        mag = 10.0 ** rng.uniform(-1.5, 1.5, n)
        u = np.where(
            both,
            lo + width * t,
            np.where(
                flo, lo + mag, np.where(fhi, hi - mag, rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-2.0, 1.5, n))
            ),
        )
        delta = np.maximum(1.0, np.where(both, width, 1.0)) * rng.uniform(0.05, 1.0, n)
        side_hi = rng.random(n) < 0.5
        out = np.where(fhi & (side_hi | ~flo), hi + delta, lo - delta)
        out_mask = flo | fhi
        return _f64(u), _f64(np.where(out_mask, out, 0.0)), out_mask


def _interior(P: _LossPoints, u: np.ndarray, h: np.ndarray, k: int = 4) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return (u - k * h > P.lo) & (u + k * h < P.hi)
