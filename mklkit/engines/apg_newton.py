r"""Newton steps of the apg engine on the non-zero blocks (docs/engines.md, apg).

Once the accelerated steps have found the support (the same non-zero blocks at two gap checks in a
row), the objective restricted to it is smooth: :math:`\Phi(\beta_A, b) = \sum_i\ell(y_i, z_i) +
\sum_{m\in A}\tilde g_C(\|\beta_m\|)`.  Its Newton direction solves :math:`H d = -\nabla\Phi` with
:math:`H = L_A^\top\mathrm{diag}(\ell'')L_A + \bigoplus_m\big(\tilde g_C''\hat\beta_m\hat\beta_m^\top +
\tfrac{\tilde g_C'}{\|\beta_m\|}(I - \hat\beta_m\hat\beta_m^\top)\big)` by conjugate gradients preconditioned
by its diagonal, each product :math:`Hv` two passes over the support's rows of the bank (copied once per
step on the device), then an Armijo search
along it (Nocedal & Wright 2006, Alg. 7.1; the regularizer's derivatives as bcd takes them,
:meth:`~mklkit.engines.smoothing.SmoothedLoss.reg_derivatives`).  Conjugate gradients use the decay of
the kernels' spectra that the accelerated steps cannot.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import numpy as np

from ..kernels.device import HEADROOM, DeviceFactorBank

__all__ = ["Point", "SupportNewton"]

logger = logging.getLogger("mklkit.engines.apg")

#: Sufficient decrease of the Armijo search, and its halvings before the direction is given up.
ARMIJO = 1e-4
MAX_HALVINGS = 30


@dataclasses.dataclass
class Point:
    """A point of the iteration: coordinates ``beta`` (device), bias ``b``, predictions ``z``
    (device) and the objective of the loss in use (``F``, with the regularizer ``obj``)."""

    beta: Any
    b: float
    z: Any
    F: float = math.nan
    obj: float = math.nan
    #: at an extrapolated point: the host predictions, the loss's derivatives, the gradient and its bias part
    zh: Any = None
    u: Any = None
    g: Any = None
    g_b: float = 0.0


class SupportNewton:
    """A mixin of the apg run: :meth:`newton_step` from a point on its non-zero blocks."""

    def support_bank(self, act: np.ndarray) -> tuple[DeviceFactorBank, Any] | None:
        """The rows of the non-zero blocks ``act`` as a bank of their own on the device (a copy: the
        Newton steps read those rows only) and their indices, or None where the copy does not fit."""
        dev = self.dev
        blocks = np.flatnonzero(act)
        rows = np.concatenate([np.arange(dev.starts[m], dev.starts[m + 1]) for m in blocks])
        free = dev.lib.free_bytes()
        need = rows.size * dev.shape[1] * (8 if dev.precision == "float64" else 4)
        if dev.lib.library != "numpy" and free is not None and need * HEADROOM > free:
            logger.debug(
                "apg: no Newton steps: the %d rows of the non-zero blocks need %d bytes, %d free", rows.size, need, free
            )
            return None
        rows_x = dev.lib.asarray(rows, dev.xp.int64)
        starts = np.concatenate([[0], np.cumsum(dev.ranks[blocks])])
        return DeviceFactorBank(dev.xp.take(dev.LT, rows_x, axis=0), starts, dev.lib, dev.precision), rows_x

    def scatter(self, act: np.ndarray, d_A: Any) -> Any:
        """The support's coordinates ``d_A`` in the whole bank's (zero on the other blocks)."""
        dev, xp = self.dev, self.xp
        parts, k = [], 0
        for m, r in enumerate(dev.ranks):
            if act[m]:
                parts.append(d_A[k : k + int(r)])
                k += int(r)
            else:
                parts.append(xp.zeros(int(r), dtype=dev.dtype, device=dev.lib.device))
        return xp.concat(parts)

    def newton_step(self, x: Point, smoothing: float) -> Point | None:
        """One Newton-CG step with its Armijo search from ``x`` on its non-zero blocks; the new point,
        or None (no support, a non-finite value, no decrease, or no memory for the support's rows)."""
        xp = self.xp
        norms = self.dev.block_norms_of(x.beta)
        act = norms > 0.0
        if not np.any(act):
            return None
        zh = self.host(x.z)
        vals, u, h = self.eval_loss(zh, smoothing, True, True)
        phi0 = float(np.sum(vals)) + self.reg_value(norms)
        x_A = norms[act]
        g1, g2 = self.reg_derivatives(x_A)
        if not (math.isfinite(phi0) and np.all(np.isfinite(g1)) and np.all(np.isfinite(g2)) and np.all(np.isfinite(h))):
            return None
        made = self.support_bank(act)
        if made is None:
            return None
        sub, rows_x = made
        beta_A = xp.take(x.beta, rows_x)
        unit = beta_A / sub.spread_x(sub.to_x(x_A))
        radial = sub.spread_x(sub.to_x(g2 - g1 / x_A))
        tangential = sub.spread_x(sub.to_x(g1 / x_A))
        h_x = sub.to_x(h)
        grad = sub.project_x(sub.to_x(u)) + sub.spread_x(sub.to_x(g1)) * unit
        grad_b = float(np.sum(u)) if self.bias else 0.0
        # the diagonal of H: sum_i l''_i L_ji^2 and the regularizer's part
        diag = sub.weighted_row_squares_x(h_x) + radial * unit * unit + tangential
        diag = xp.where(diag > 0.0, diag, 1.0)  # coordinates of no curvature
        diag_b = float(np.sum(h))
        diag_b = diag_b if diag_b > 0.0 else 1.0
        self.counts["n_passes"] += 2

        def hess(v: Any, vb: float) -> tuple[Any, float]:
            w = h_x * (sub.expand_x(v) + vb) if self.bias else h_x * sub.expand_x(v)
            along = sub.spread_x(sub.block_sums_x(unit * v))
            out = sub.project_x(w) + radial * unit * along + tangential * v
            self.counts["n_passes"] += 2
            return out, (float(self.host(xp.sum(w))) if self.bias else 0.0)

        d_A, d_b = self.conjugate_gradients(hess, grad, grad_b, diag, diag_b)
        slope = float(self.host(xp.sum(grad * d_A))) + grad_b * d_b
        if not (slope < 0.0 and math.isfinite(slope)):
            return None
        Ld = self.host(sub.expand_x(d_A)) + d_b
        d = self.scatter(act, d_A)
        self.counts["n_passes"] += 1
        t = 1.0
        for _ in range(MAX_HALVINGS):
            beta = x.beta + t * d
            nt = self.dev.block_norms_of(beta)
            z_t = zh + t * Ld
            F, _ = self.loss_at(z_t, smoothing)
            obj = F + self.reg_value(nt)
            if math.isfinite(obj) and obj <= phi0 + ARMIJO * t * slope:
                b = x.b + t * d_b if self.bias else 0.0
                return Point(beta, b, self.dev.to_x(z_t), F, obj)
            t *= 0.5
        return None

    def conjugate_gradients(self, hess: Any, grad: Any, grad_b: float, diag: Any, diag_b: float) -> tuple[Any, float]:
        """Preconditioned conjugate gradients on :math:`Hd = -\\nabla\\Phi` (the bias its last
        coordinate) to a relative residual of ``cg_tol``, at most ``max_cg`` products."""
        xp = self.xp
        eng = self.engine

        def dot(a: Any, ab: float, c: Any, cb: float) -> float:
            return float(self.host(xp.sum(a * c))) + ab * cb

        d, d_b = xp.zeros_like(grad), 0.0
        r, r_b = -grad, -grad_b
        s, s_b = r / diag, r_b / diag_b
        p, p_b = s, s_b
        rs = dot(r, r_b, s, s_b)
        stop = float(eng.cg_tol) ** 2 * dot(r, r_b, r, r_b)
        for _ in range(int(eng.max_cg)):
            Hp, Hp_b = hess(p, p_b)
            curv = dot(p, p_b, Hp, Hp_b)
            if not (curv > 0.0 and math.isfinite(curv)):
                break
            a = rs / curv
            d, d_b = d + a * p, d_b + a * p_b
            r, r_b = r - a * Hp, r_b - a * Hp_b
            if dot(r, r_b, r, r_b) <= stop:
                break
            s, s_b = r / diag, r_b / diag_b
            rs_new = dot(r, r_b, s, s_b)
            p, p_b = s + (rs_new / rs) * p, s_b + (rs_new / rs) * p_b
            rs = rs_new
        if not self.bias:
            d_b = 0.0
        return d, d_b
