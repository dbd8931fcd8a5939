r"""Newton steps of the apg engine on the non-zero blocks (docs/engines.md, apg).

Once the accelerated steps have found the support (the same non-zero blocks at two gap checks in a
row), the objective restricted to it is smooth: :math:`\Phi(\beta_A, b) = \sum_i\ell(y_i, z_i) +
\sum_{m\in A}\tilde g_C(\|\beta_m\|)`.  Its Newton direction solves :math:`H d = -\nabla\Phi` with
:math:`H = L_A^\top\mathrm{diag}(\ell'')L_A + \bigoplus_m\big(\tilde g_C''\hat\beta_m\hat\beta_m^\top +
\tfrac{\tilde g_C'}{\|\beta_m\|}(I - \hat\beta_m\hat\beta_m^\top)\big)`, formed from the support's rows of
the bank (copied once per support on the device) and solved directly where that costs at most
``max_hessian_flops``, else by conjugate gradients preconditioned by a Nyström sketch of it and the
diagonal the sketch leaves (each product :math:`Hv` two passes over those rows).  An Armijo search along it follows (Nocedal & Wright 2006,
Alg. 7.1; the regularizer's derivatives as bcd takes them,
:meth:`~mklkit.engines.smoothing.SmoothedLoss.reg_derivatives`), in which a block the direction turns
around is set to zero (:meth:`SupportNewton.crossings`): the norm's kink at zero, which the model does
not see.  The Newton steps use the decay of the kernels' spectra that the accelerated steps cannot.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import numpy as np

from ..kernels.device import HEADROOM, DeviceFactorBank
from . import common
from .smoothing import band_step

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
        """The rows of the blocks ``act`` as a bank of their own on the device (a copy: the steps on
        those blocks read those rows only) and their indices, or None where the copy does not fit.
        The copies of the last two sets of blocks (the working set's and the support's) are kept."""
        key = np.asarray(act, dtype=bool).tobytes()
        if key in self.row_copies:
            return self.row_copies[key]
        made = self._copy_rows(act)
        if made is not None:
            while len(self.row_copies) >= 2:
                del self.row_copies[next(iter(self.row_copies))]
            self.row_copies[key] = made
        return made

    def _copy_rows(self, act: np.ndarray) -> tuple[DeviceFactorBank, Any] | None:
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
        """The support's coordinates ``d_A`` in the whole bank's (zero on the other blocks): one gather
        from ``d_A`` and a trailing zero."""
        dev, xp = self.dev, self.xp
        on = np.repeat(np.asarray(act, dtype=bool), dev.ranks)
        index = np.full(on.size, int(d_A.shape[0]), dtype=np.int64)  # the trailing zero
        index[on] = np.arange(int(d_A.shape[0]))
        padded = xp.concat([d_A, xp.zeros(1, dtype=d_A.dtype, device=dev.lib.device)])
        return xp.take(padded, dev.lib.asarray(index, xp.int64))

    def newton_step(self, x: Point, smoothing: float) -> Point | None:
        """One Newton step with its Armijo search from ``x`` on its non-zero blocks (the system solved
        directly up to ``max_hessian_flops``, else by conjugate gradients); the new point, or None (no
        support, a non-finite value, no decrease, or no memory for the support's rows)."""
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
        grad = self.read(sub).project_x(sub.to_x(u)) + sub.spread_x(sub.to_x(g1)) * unit
        grad_b = float(np.sum(u)) if self.bias else 0.0
        curv = (h, h_x, unit, radial, tangential)
        n_A, N = int(sub.total_rank), int(sub.shape[1])
        solved = None
        if float(N) * n_A * n_A + n_A**3 / 3.0 <= float(self.engine.max_hessian_flops):
            solved = self.direct(sub, curv, grad, grad_b)
        d_A, d_b = solved if solved is not None else self.conjugate_gradients(sub, curv, grad, grad_b)
        slope = float(self.host(xp.sum(grad * d_A))) + grad_b * d_b
        if not (slope < 0.0 and math.isfinite(slope)):
            return None
        return self.search(x, act, sub, (beta_A, x_A), (d_A, d_b), zh, phi0, slope, smoothing)

    def search(
        self,
        x: Point,
        act: np.ndarray,
        sub: DeviceFactorBank,
        at: tuple[Any, np.ndarray],
        step: tuple[Any, float],
        zh: np.ndarray,
        phi0: float,
        slope: float,
        smoothing: float,
    ) -> Point | None:
        """The Armijo search from ``x`` along the support's direction ``step`` (coordinates, bias), the
        blocks it turns around set to zero (:meth:`crossings`); the new point or None."""
        (beta_A, x_A), (d_A, d_b) = at, step
        Ld = self.host(self.read(sub).expand_x(d_A)) + d_b
        d = self.scatter(act, d_A)
        crossing = self.crossings(sub, beta_A, d_A, x_A)
        t, dropped, Lz = 1.0, np.zeros(crossing.size, dtype=bool), (0.0, 0.0)
        for _ in range(MAX_HALVINGS):
            gone = crossing <= t
            if not np.array_equal(gone, dropped):
                dropped = gone
                Lz = self.dropped_predictions(sub, gone, beta_A, d_A) if gone.any() else (0.0, 0.0)
            beta = x.beta + t * d
            if dropped.any():
                beta = beta * self.dev.spread_x(self.dev.to_x(np.where(self.scatter_blocks(act, dropped), 0.0, 1.0)))
            z_t = zh + t * Ld - (Lz[0] + t * Lz[1])
            F, _ = self.loss_at(z_t, smoothing)
            obj = F + self.reg_value(self.dev.block_norms_of(beta))
            if math.isfinite(obj) and obj <= phi0 + ARMIJO * t * slope:
                b = x.b + t * d_b if self.bias else 0.0
                return Point(beta, b, self.dev.to_x(z_t), F, obj)
            t *= 0.5
        return None

    def offer_kinks(self, x: Point, smoothing: float, it: int) -> None:
        r"""Offer the incumbents the point whose smoothing band is moved onto the loss's kinks by the
        smallest change of the non-zero blocks and the bias (:func:`~mklkit.engines.smoothing.band_step`,
        as ``bcd`` does): a primal point off at second order in :math:`\mu` where the smoothed
        solution is off at first.  Skipped where the band is empty or its system dearer than
        ``max_hessian_flops``."""
        norms = self.dev.block_norms_of(x.beta)
        act = norms > 0.0
        if not np.any(act):
            return
        zh = self.host(x.z)
        _, u, h = self.eval_loss(zh, smoothing, True, True)
        band = np.flatnonzero(h * smoothing > 0.5)
        n_A = int(np.sum(self.dev.ranks[act]))
        if band.size == 0 or float(band.size) * band.size * (n_A + 1) > float(self.engine.max_hessian_flops):
            return
        made = self.support_bank(act)
        if made is None:
            return
        sub, _ = made
        LB = self.host(self.xp.take(sub.LT, self.lib.asarray(band, self.xp.int64), axis=1))
        delta = band_step(LB, -smoothing * u[band], self.bias)
        d_A = sub.to_x(delta[:n_A])
        db = float(delta[-1]) if self.bias else 0.0
        z = zh + self.host(self.read(sub).expand_x(d_A)) + db
        beta = x.beta + self.scatter(act, d_A)
        moved = self.dev.block_norms_of(beta)
        primal = common.primal_value(self.problem, z, moved)
        if math.isfinite(primal) and primal < self.run.incumbents.primal:
            self.run.incumbents.offer_primal(primal, it, beta=self.host(beta).copy(), bias=x.b + db, norms=moved)

    def crossings(self, sub: DeviceFactorBank, beta_A: Any, d_A: Any, x_A: np.ndarray) -> np.ndarray:
        r"""Per non-zero block, the step :math:`t_m = -\|\beta_m\|^2/\langle\beta_m, d_m\rangle` at
        which the direction turns the block around (:math:`\langle\beta_m, \beta_m + td_m\rangle \le 0`;
        infinite when it does not): the model's norm has no kink there, the regularizer has, so past
        it the block is set to zero (the group analogue of OWL-QN's orthant projection, Andrew & Gao 2007)."""
        along = self.host(sub.block_sums_x(beta_A * d_A))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(along < 0.0, -(x_A * x_A) / along, np.inf)
        return t

    def scatter_blocks(self, act: np.ndarray, on_support: np.ndarray) -> np.ndarray:
        """A per-block flag of the support's blocks (``on_support``, one per non-zero block) over all blocks."""
        out = np.zeros(act.size, dtype=bool)
        out[np.flatnonzero(act)[on_support]] = True
        return out

    def dropped_predictions(self, sub: DeviceFactorBank, gone: np.ndarray, beta_A: Any, d_A: Any) -> tuple[Any, Any]:
        r""":math:`(L_Z\beta_Z, L_Zd_Z)` on the host for the blocks ``gone`` of the support: what the
        predictions lose when they are set to zero (two passes over the support's rows)."""
        on = sub.spread_x(sub.to_x(gone.astype(np.float64)))
        self.read(sub, 2)
        return self.host(sub.expand_x(beta_A * on)), self.host(sub.expand_x(d_A * on))

    def direct(self, sub: DeviceFactorBank, curv: tuple, grad: Any, grad_b: float) -> tuple[Any, float] | None:
        r"""The Newton system formed and solved: :math:`H = L_A^\top\mathrm{diag}(\ell'')L_A` (one product
        of the support's rows with themselves) plus the regularizer's block-diagonal part, the bias's
        row and column, by the array library's dense solve; None when it is not finite.  ``curv``: the
        loss's curvatures (host, device) and the regularizer's unit vectors, radial and tangential parts."""
        _, h_x, unit, radial, tangential = curv
        xp, dev = self.xp, self.lib.device
        rows = sub.LT
        if self.bias:  # the bias a last coordinate: its row of ones
            rows = xp.concat([rows, xp.ones((1, rows.shape[1]), dtype=rows.dtype, device=dev)], axis=0)
        S = rows * xp.sqrt(h_x)[None, :]
        H = S @ xp.matrix_transpose(S)
        del S, rows
        loss_diag = float(self.host(xp.max(xp.linalg.diagonal(H)))) if H.shape[0] else 0.0
        top = float(self.host(xp.max(tangential))) if tangential.shape[0] else 0.0
        ridge = 1e-12 * max(loss_diag, top)
        if not (math.isfinite(ridge) and ridge > 0.0):
            return None
        H = H + xp.eye(H.shape[0], dtype=H.dtype, device=dev) * ridge
        for s, e in zip(sub.starts[:-1].tolist(), sub.starts[1:].tolist()):  # the regularizer's blocks
            u = unit[s:e]
            H[s:e, s:e] = (
                H[s:e, s:e]
                + radial[s] * (u[:, None] * u[None, :])
                + xp.eye(e - s, dtype=H.dtype, device=dev) * tangential[s]
            )
        rhs = xp.concat([-grad, self.lib.asarray(np.array([-grad_b]), grad.dtype)]) if self.bias else -grad
        self.read(sub, 2)  # the product of the rows with themselves, and the bias's column
        self.counts["n_hessians"] += 1
        d = xp.linalg.solve(H, rhs[:, None])[:, 0]
        if not bool(self.host(xp.all(xp.isfinite(d)))):
            return None
        if self.bias:
            return d[:-1], float(self.host(d[-1]))
        return d, 0.0

    def sketched_preconditioner(self, sub: DeviceFactorBank, curv: tuple, diag: Any, k: int) -> Any | None:
        r"""The inverse of :math:`P = U\Lambda U^\top + D` applied to a vector: :math:`U\Lambda U^\top`
        the Nyström approximation of :math:`H` from a sketch :math:`H\Omega` of ``k`` random orthonormal
        columns (one product of the support's rows with :math:`\Omega` and back, as two matrix products;
        the stable form of Tropp, Yurtsever, Udell & Cevher 2017, Alg. 3), :math:`D` what it leaves of
        :math:`H`'s diagonal ``diag``; by the Woodbury identity, :math:`O(r_Ak)` per application.  Exact on
        the sketch's leading subspace, where the kernels' spectra put most of :math:`H`; Jacobi on the
        rest (Frangella, Tropp & Udell 2023, with a diagonal in place of their multiple of :math:`I`).
        None where the sketch's factorization fails (the diagonal alone then)."""
        xp, lib = self.xp, self.lib
        _, h_x, unit, radial, tangential = curv
        Om, _ = xp.linalg.qr(
            lib.asarray(np.random.default_rng(0).standard_normal((int(sub.total_rank), k)), diag.dtype)
        )
        Y = sub.LT @ (h_x[:, None] * (xp.matrix_transpose(sub.LT) @ Om))  # the loss's part of H Omega
        self.read(sub, 2)
        parts = []  # the regularizer's block-diagonal part of H Omega
        for s, e in zip(sub.starts[:-1].tolist(), sub.starts[1:].tolist()):
            u, V = unit[s:e], Om[s:e, :]
            parts.append(radial[s] * (u[:, None] * (u[None, :] @ V)) + tangential[s] * V)
        Y = Y + xp.concat(parts, axis=0)
        shift = float(np.finfo(np.float64 if diag.dtype == xp.float64 else np.float32).eps)
        shift *= float(self.host(xp.sqrt(xp.sum(Y * Y))))
        Y = Y + shift * Om
        core = xp.matrix_transpose(Om) @ Y
        try:
            C = xp.linalg.cholesky(0.5 * (core + xp.matrix_transpose(core)))
            B = xp.matrix_transpose(xp.linalg.solve(C, xp.matrix_transpose(Y)))  # Y C^{-T}
            U, sig, _ = xp.linalg.svd(B, full_matrices=False)
        except Exception:  # noqa: BLE001 - each library raises its own error for a factorization that fails
            return None
        lam = lib.host(sig * sig) - shift
        keep = np.flatnonzero(lam > 1e-12 * max(float(lam.max(initial=0.0)), 0.0))
        if not (keep.size and np.all(np.isfinite(lam))):
            return None
        U = xp.take(U, lib.asarray(keep, xp.int64), axis=1)
        lam_x = lib.asarray(lam[keep], diag.dtype)
        floor = 1e-12 * float(self.host(xp.max(diag)))
        D = xp.clip(diag - xp.sum(U * U * lam_x[None, :], axis=1), floor, None)
        UD = U / D[:, None]
        inner = xp.linalg.inv(
            xp.eye(keep.size, dtype=U.dtype, device=lib.device) / lam_x[None, :] + xp.matrix_transpose(U) @ UD
        )

        def apply(r: Any) -> Any:
            t = r / D
            return t - UD @ (inner @ (xp.matrix_transpose(U) @ t))

        return apply

    def conjugate_gradients(self, sub: DeviceFactorBank, curv: tuple, grad: Any, grad_b: float) -> tuple[Any, float]:
        """Conjugate gradients on :math:`Hd = -\\nabla\\Phi` (the bias its last coordinate), preconditioned
        by a sketch of :math:`H` (:meth:`sketched_preconditioner`, ``cg_sketch``) or its diagonal, to a
        relative residual of ``cg_tol``, at most ``max_cg`` products :math:`Hv` (two passes over the
        support's rows each)."""
        xp = self.xp
        eng = self.engine
        h, h_x, unit, radial, tangential = curv
        # the diagonal of H: sum_i l''_i L_ji^2 (one pass) and the regularizer's part
        diag = self.read(sub).weighted_row_squares_x(h_x) + radial * unit * unit + tangential
        diag = xp.where(diag > 0.0, diag, 1.0)  # coordinates of no curvature
        diag_b = float(np.sum(h))
        diag_b = diag_b if diag_b > 0.0 else 1.0
        sketch = min(int(eng.cg_sketch), int(sub.total_rank))
        precondition = self.sketched_preconditioner(sub, curv, diag, sketch) if sketch > 0 else None
        if precondition is None:

            def precondition(r: Any) -> Any:
                return r / diag

        def hess(v: Any, vb: float) -> tuple[Any, float]:
            Lv = self.read(sub, 2).expand_x(v)
            w = h_x * (Lv + vb) if self.bias else h_x * Lv
            along = sub.spread_x(sub.block_sums_x(unit * v))
            out = sub.project_x(w) + radial * unit * along + tangential * v
            return out, (float(self.host(xp.sum(w))) if self.bias else 0.0)

        def dot(a: Any, ab: float, c: Any, cb: float) -> float:
            return float(self.host(xp.sum(a * c))) + ab * cb

        d, d_b = xp.zeros_like(grad), 0.0
        r, r_b = -grad, -grad_b
        s, s_b = precondition(r), r_b / diag_b
        p, p_b = s, s_b
        rs = dot(r, r_b, s, s_b)
        stop = float(eng.cg_tol) ** 2 * dot(r, r_b, r, r_b)
        for _ in range(int(eng.max_cg)):
            Hp, Hp_b = hess(p, p_b)
            pHp = dot(p, p_b, Hp, Hp_b)
            if not (pHp > 0.0 and math.isfinite(pHp)):
                break
            a = rs / pHp
            d, d_b = d + a * p, d_b + a * p_b
            r, r_b = r - a * Hp, r_b - a * Hp_b
            if dot(r, r_b, r, r_b) <= stop:
                break
            s, s_b = precondition(r), r_b / diag_b
            rs_new = dot(r, r_b, s, s_b)
            p, p_b = s + (rs_new / rs) * p, s_b + (rs_new / rs) * p_b
            rs = rs_new
        if not self.bias:
            d_b = 0.0
        return d, d_b
