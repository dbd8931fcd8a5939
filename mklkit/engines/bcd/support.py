r"""The Newton system of the bcd engine on the non-zero blocks (its support).

:class:`Support` holds the non-zero blocks of a point as one factor
:math:`L_A` (rows of :math:`L^\top`) with the predictions of the blocks held
where they are, evaluates the objective in use on them, and solves the
Newton system there: through the samples where the loss has curvature
(the smoothing band, by the Woodbury identity) when they are few, else from
the dense Hessian.  The steps themselves are taken by
:mod:`mklkit.engines.bcd.polish`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...kernels.factor_arrays import hessian_flops, segment_norms
from .. import common

__all__ = ["Support", "POLISH_MAX_RANK", "POLISH_MAX_FLOPS"]

#: Largest total rank of the non-zero blocks for the Newton steps on them (a dense
#: Hessian of that size is formed and decomposed).
POLISH_MAX_RANK = 4000

#: Largest cost of one Newton step on the non-zero blocks (total rank :math:`r_A`, K
#: blocks, :math:`\mathcal B` the samples where the loss has curvature):
#: :math:`r_A(|\mathcal B| + K)^2` through the band (:meth:`Support._band_solve`),
#: :math:`r_A^2(|\mathcal B| + r_A/3)` with the dense Hessian.  Dearer steps are left
#: to coordinate descent.
POLISH_MAX_FLOPS = 4e9


class Support:
    """The non-zero blocks as one dense factor ``LA`` (rows ``rows`` of :math:`L^\\top`) of
    the solve ``run`` (:class:`~mklkit.engines.bcd.loop._BcdRun`), whose loss kernels it
    calls; ``offset``: the predictions of the non-zero blocks held where they are."""

    def __init__(
        self,
        run: Any,
        blocks: np.ndarray,
        rows: np.ndarray,
        LA: np.ndarray,
        seg: np.ndarray,
        offset: np.ndarray | None = None,
    ) -> None:
        self.run = run
        self.blocks = blocks
        self.rows = rows
        self.LA = LA
        self.seg = seg
        self.offset = offset

    def terms(self, z: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Values, derivatives and curvatures of the loss in use at ``z``."""
        return self.run.eval_loss(z, smoothing, True, True)

    def state(self, beta: np.ndarray, b: float, smoothing: float) -> tuple:
        """The support's blocks of ``beta`` (a copy), the predictions, and :meth:`objective`
        there: where the Newton steps of
        :meth:`~mklkit.engines.bcd.polish.SupportPolish.polish` start."""
        bA = beta[self.rows].copy()
        z = self.predictions(bA, b)
        return (bA, z, *self.objective(bA, z, smoothing))

    def predictions(self, bA: np.ndarray, b: float) -> np.ndarray:
        r""":math:`L_A^\top\beta_A + b` plus the held blocks' predictions."""
        z = self.direction(bA, b)
        return z if self.offset is None else z + self.offset

    def direction(self, dA: np.ndarray, db: float) -> np.ndarray:
        r"""The change of the predictions along a step: :math:`L_A^\top d_A + d_b`."""
        return self.LA.T @ dA + (db if self.run.bias else 0.0)

    def crossing(self, bA: np.ndarray, step: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Per block: does the full step take its norm, to first order, through zero?"""
        radial = np.add.reduceat(bA * step[: bA.size], self.seg[:-1]) / x
        return x + radial <= 0.0

    def objective(
        self, bA: np.ndarray, z: np.ndarray, smoothing: float
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Objective in use, derivatives, curvatures and block norms at ``bA`` with
        predictions ``z`` (:meth:`predictions`)."""
        run = self.run
        v, u, h = self.terms(z, smoothing)
        x = segment_norms(bA, self.seg)
        val = float(np.sum(v)) + common.regularizer_value(run.reg, x, run.C)
        return val, u, h, x

    def newton_step(
        self, bA: np.ndarray, u: np.ndarray, h: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray | None, float]:
        r"""The Newton direction of :meth:`~mklkit.engines.bcd.polish.SupportPolish.polish` and
        its slope.

        The Hessian on the non-zero blocks is
        :math:`A = D + L_A\,\mathrm{diag}(\ell'')L_A^\top` with the regularizer's
        part :math:`D` block-diagonal (:meth:`~mklkit.engines.bcd.polish.SupportPolish.polish`).
        When the loss has curvature on few samples (a smoothed hinge: the samples of the
        smoothing band), far fewer than the total rank, the system is solved through them
        (:meth:`_band_solve`); otherwise the dense Hessian is formed and factored.
        """
        run = self.run
        nA = self.rows.size
        n = nA + int(run.bias)
        LA, seg = self.LA, self.seg
        g1, g2 = run.reg_derivatives(x)
        sizes = np.diff(seg)
        units = bA / np.repeat(x, sizes)  # the blocks' directions, stacked
        grad = np.empty(n)
        grad[:nA] = LA @ u + np.repeat(g1, sizes) * units
        if run.bias:
            grad[-1] = float(np.sum(u))
        if not (
            np.all(np.isfinite(grad)) and np.all(np.isfinite(g1)) and np.all(np.isfinite(g2)) and np.all(np.isfinite(h))
        ):
            return None, 0.0
        band = np.flatnonzero(h > 0.0)
        width = band.size + seg.size - 1
        if width <= nA // 2 and nA * width * width <= POLISH_MAX_FLOPS:
            step = self._band_solve(units, h, x, g1, g2, grad, band)
        elif nA <= POLISH_MAX_RANK and hessian_flops(LA, band) + nA**3 / 3.0 <= POLISH_MAX_FLOPS:
            step = self._dense_solve(units, h, x, g1, g2, grad, band)
        else:
            step = None
        if step is None or not np.all(np.isfinite(step)):
            return None, 0.0
        return step, float(grad @ step)

    def _dense_solve(
        self,
        units: np.ndarray,
        h: np.ndarray,
        x: np.ndarray,
        g1: np.ndarray,
        g2: np.ndarray,
        grad: np.ndarray,
        band: np.ndarray,
    ) -> np.ndarray | None:
        """The Newton direction from the dense Hessian (Cholesky, else its pseudo-inverse);
        ``units``: each block divided by its norm."""
        run = self.run
        nA = self.rows.size
        n = grad.size
        LA, seg = self.LA, self.seg
        H = np.zeros((n, n))
        LB = LA[:, band] if band.size < LA.shape[1] else LA
        if sp.issparse(LB):
            H[:nA, :nA] = (LB @ sp.diags(h[band]) @ LB.T).toarray()
        else:
            H[:nA, :nA] = (LB * h[band]) @ LB.T
        for k in range(seg.size - 1):
            s, e = seg[k], seg[k + 1]
            bh = units[s:e]
            c = g1[k] / x[k]
            H[s:e, s:e] += c * np.eye(e - s) + (g2[k] - c) * np.outer(bh, bh)
        if run.bias:
            cross = LA @ h
            H[:-1, -1] = cross
            H[-1, :-1] = cross
            H[-1, -1] = float(np.sum(h))
        if not np.all(np.isfinite(H)):
            return None
        H = 0.5 * (H + H.T)
        top = float(np.max(np.diag(H))) if n else 0.0
        if not top > 0.0:
            return None
        try:
            factor = sla.cho_factor(H + (1e-12 * top) * np.eye(n), check_finite=False)
            return -sla.cho_solve(factor, grad, check_finite=False)
        except np.linalg.LinAlgError:
            # not positive definite: the pseudo-inverse (directions of no curvature are
            # left to coordinate descent)
            w, V = np.linalg.eigh(H)
            keep = w > 1e-13 * max(float(w[-1]), 0.0)
            if not np.any(keep):
                return None
            return -(V[:, keep] @ ((V[:, keep].T @ grad) / w[keep]))

    def _band_solve(
        self,
        units: np.ndarray,
        h: np.ndarray,
        x: np.ndarray,
        g1: np.ndarray,
        g2: np.ndarray,
        grad: np.ndarray,
        band: np.ndarray,
    ) -> np.ndarray | None:
        r"""The Newton direction through the samples with curvature (Woodbury).

        Per block :math:`k` the regularizer's Hessian is
        :math:`c_kI + (\tilde g''_k - c_k)\hat\beta_k\hat\beta_k^\top` with
        :math:`c_k = \tilde g'_k/x_k > 0`, so
        :math:`A = D_c + ZSZ^\top`: :math:`D_c = \mathrm{diag}(c_k I)`,
        :math:`Z = [L_A[:, \mathcal B],\ \hat B]` (the band's columns and one
        column :math:`\hat\beta_k` per block), :math:`S = \mathrm{diag}(\ell''_{\mathcal B},
        \tilde g''_k - c_k)`.  Then :math:`A^{-1} = D_c^{-1} - D_c^{-1}Z(S^{-1} +
        Z^\top D_c^{-1}Z)^{-1}Z^\top D_c^{-1}`: one system of the size of the band
        plus the number of blocks, :math:`O(r_A(|\mathcal B| + K)^2)` instead of
        :math:`O(r_A^2N + r_A^3)`.  The bias is eliminated by its Schur complement.
        """
        run = self.run
        nA = self.rows.size
        LA, seg = self.LA, self.seg
        cinv = np.repeat(x / g1, np.diff(seg))  # D_c^{-1}, diagonal
        if not (np.all(np.isfinite(cinv)) and np.all(cinv > 0.0)):
            return None
        radial = g2 - g1 / x
        keep = np.flatnonzero(radial != 0.0)
        if band.size + keep.size == 0:
            return None
        Bh = np.zeros((nA, keep.size))
        for j, k in enumerate(keep):
            s, e = seg[k], seg[k + 1]
            Bh[s:e, j] = units[s:e]
        LB = LA[:, band]
        Z = np.hstack([LB.toarray() if sp.issparse(LB) else LB, Bh])
        Sinv = np.concatenate([1.0 / h[band], 1.0 / radial[keep]])
        CZ = cinv[:, None] * Z
        T = Z.T @ CZ
        T[np.diag_indices_from(T)] += Sinv
        rhs = [grad[:nA]]
        if run.bias:
            rhs.append(LA @ h)  # the bias column of the Hessian
        R = np.column_stack(rhs)
        CR = cinv[:, None] * R
        try:
            W = np.linalg.solve(T, Z.T @ CR)
        except np.linalg.LinAlgError:
            return None
        AinvR = CR - CZ @ W  # A^{-1} [g, c]
        step = np.empty(grad.size)
        if not run.bias:
            step[:] = -AinvR[:, 0]
            return step
        c = R[:, 1]
        schur = float(np.sum(h)) - float(c @ AinvR[:, 1])
        q = 0.0
        if schur > 1e-12 * max(float(np.sum(h)), 1e-300):
            q = (-grad[-1] + float(c @ AinvR[:, 0])) / schur
        step[:nA] = -AinvR[:, 0] - q * AinvR[:, 1]
        step[-1] = q
        return step
