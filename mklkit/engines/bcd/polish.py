r"""Newton steps of the bcd engine on the non-zero blocks (the support polish) and the
smoothing continuation of a non-smooth loss (docs/engines.md, bcd).

Both are mixins of :class:`~mklkit.engines.bcd.loop._BcdRun`, whose problem, factor arrays
``f``, options and loss calls they use.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .. import common
from ..objectives import segment_norms
from ..smoothing import SmoothedLoss, band_step

#: Largest total rank of the non-zero blocks for their Newton steps (a dense Hessian of that
#: size is formed and decomposed).
POLISH_MAX_RANK = 4000
#: Largest cost of one Newton step on the non-zero blocks: :math:`r_A(|\mathcal B| + K)^2`
#: through the band (:meth:`Support._band_solve`), :math:`r_A^2(|\mathcal B| + r_A/3)` with
#: the dense Hessian.  Dearer steps are left to coordinate descent.
POLISH_MAX_FLOPS = 4e9
#: A smooth loss's support is polished (``polish: auto``) once the relative gap is below
#: this: farther the support still changes (``docs/tuned_constants.md``).
SMOOTH_POLISH_GAP = 1e-2


def hessian_flops(LA: Any, cols: np.ndarray | None = None) -> float:
    r"""Flops of :math:`L_A\,\mathrm{diag}(h)L_A^\top` over the samples ``cols`` (``None``: all)."""
    if sp.issparse(LA):
        per = np.bincount(LA.indices, minlength=LA.shape[1]).astype(np.float64)
        return float(np.sum(per * per if cols is None else per[cols] ** 2))
    n = LA.shape[1] if cols is None else cols.size
    return float(LA.shape[0]) ** 2 * n


@dataclasses.dataclass
class Support:
    """The non-zero ``blocks`` of the solve ``run`` as one dense factor ``LA`` (rows ``rows``
    of :math:`L^\\top`, block offsets ``seg``); ``offset``: the predictions of the non-zero
    blocks held where they are."""

    run: Any
    blocks: np.ndarray
    rows: np.ndarray
    LA: np.ndarray
    seg: np.ndarray
    offset: np.ndarray | None = None

    def state(self, beta: np.ndarray, b: float, smoothing: float) -> tuple:
        """The support's blocks of ``beta`` (a copy), the predictions and :meth:`objective`."""
        bA = beta[self.rows].copy()
        z = self.predictions(bA, b)
        return (bA, z, *self.objective(bA, z, smoothing))

    def predictions(self, bA: np.ndarray, b: float) -> np.ndarray:
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
        """Objective in use, derivatives, curvatures and block norms at ``bA``."""
        run = self.run
        v, u, h = run.eval_loss(z, smoothing, True, True)
        x = segment_norms(bA, self.seg)
        val = float(np.sum(v)) + common.regularizer_value(run.reg, x, run.C)
        return val, u, h, x

    def newton_step(
        self, bA: np.ndarray, u: np.ndarray, h: np.ndarray, x: np.ndarray
    ) -> tuple[np.ndarray | None, float]:
        r"""The Newton direction on the support (Hessian :math:`D + L_A\,\mathrm{diag}(\ell'')
        L_A^\top`, :math:`D` the regularizer's block-diagonal part) and its slope, or None."""
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

    def _dense_solve(self, units, h, x, g1, g2, grad, band) -> np.ndarray | None:
        """The Newton direction from the dense Hessian (Cholesky, else its pseudo-inverse);
        ``units``: the blocks over their norms ``x``, ``g1``, ``g2``: the regularizer's
        derivatives (:meth:`~mklkit.engines.smoothing.SmoothedLoss.reg_derivatives`), ``band``: where ``h > 0``."""
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
        if self.run.bias:
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
            # not positive definite: directions of no curvature are left to coordinate descent
            w, V = np.linalg.eigh(H)
            keep = w > 1e-13 * max(float(w[-1]), 0.0)
            if not np.any(keep):
                return None
            return -(V[:, keep] @ ((V[:, keep].T @ grad) / w[keep]))

    def _band_solve(self, units, h, x, g1, g2, grad, band) -> np.ndarray | None:
        r"""The Newton direction through the samples with curvature (Woodbury).

        :math:`A = D_c + ZSZ^\top` with :math:`D_c = \mathrm{diag}(\tilde g'_k/x_k\,I)`,
        :math:`Z = [L_A[:, \mathcal B],\ \hat B]` (the band's columns, one column
        :math:`\hat\beta_k` per block), :math:`S = \mathrm{diag}(\ell''_{\mathcal B},
        \tilde g''_k - \tilde g'_k/x_k)`: one system of the size of the band plus the number
        of blocks.  The bias is eliminated by its Schur complement.
        """
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
        if self.run.bias:
            rhs.append(LA @ h)  # the bias column of the Hessian
        R = np.column_stack(rhs)
        CR = cinv[:, None] * R
        try:
            W = np.linalg.solve(T, Z.T @ CR)
        except np.linalg.LinAlgError:
            return None
        AinvR = CR - CZ @ W  # A^{-1} [g, c]
        step = np.empty(grad.size)
        if not self.run.bias:
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


class SupportPolish:
    """Newton steps on the non-zero blocks after a working-set solve."""

    def polishes(self, ws: np.ndarray) -> bool:
        r"""Whether the solve of ``ws`` is polished: always for a smoothed non-smooth loss
        (``auto``), for a smooth loss when the Newton system of the working set's blocks costs
        at most ``POLISH_MAX_FLOPS`` (:math:`r_W^2N`, or the squared entries per sample of a
        sparse factor, plus :math:`r_W^3/3`).  Near the optimum coordinate descent on the
        model converges slowly on correlated blocks (w8a, 4,000 points, 28 groups of 10
        features, logistic + l1 at 0.01 C_max to gap 1e-8: 1,000 epochs)."""
        if self.polish_on:
            return True
        if not self.polish_cheap:
            return False
        f = self.f
        r_w = float(np.sum(f.starts[ws + 1] - f.starts[ws]))
        if not 0.0 < r_w <= POLISH_MAX_RANK:
            return False
        if f.sparse:
            groups = np.concatenate([np.arange(f.supp_ptr[m], f.supp_ptr[m + 1]) for m in ws])
            per = np.bincount(f.supp_idx[groups], weights=np.diff(f.tptr)[groups], minlength=self.N)
            cost = float(per @ per)
        else:
            cost = r_w * r_w * self.N
        return cost + r_w**3 / 3.0 <= POLISH_MAX_FLOPS

    def support(self, beta: np.ndarray, held: np.ndarray | None = None) -> Support | None:
        """The non-zero blocks of ``beta`` but the ``held`` ones (their predictions the
        offset) as one factor, or None (none, or too large)."""
        starts = self.f.starts
        nonzero = segment_norms(beta, starts) > 0.0
        offset = None
        if held is not None and held.size:
            fixed = np.zeros_like(beta)
            for m in held:
                fixed[starts[m] : starts[m + 1]] = beta[starts[m] : starts[m + 1]]
            offset = self.bank.expand(fixed)
            nonzero[held] = False
        act = np.flatnonzero(nonzero)
        if act.size == 0:
            return None
        rows = np.concatenate([np.arange(starts[m], starts[m + 1]) for m in act])
        LT = self.bank.LT
        seg = np.concatenate([[0], np.cumsum(np.diff(starts)[act])])
        if not self.f.sparse and act[-1] - act[0] + 1 == act.size:
            # consecutive blocks of a dense factor: a view, whatever their rank
            return Support(self, act, rows, LT[rows[0] : rows[-1] + 1], seg, offset)
        if rows.size > POLISH_MAX_RANK:
            return None
        # a sparse factor's rows stay sparse
        LA = LT[rows].tocsr() if self.f.sparse else np.ascontiguousarray(LT[rows])
        return Support(self, act, rows, LA, seg, offset)

    def polish(self, beta: np.ndarray, b: float, smoothing: float) -> tuple[float, int]:
        r"""Newton steps on the objective in use restricted to the non-zero blocks and the
        bias, with an Armijo line search; ``beta`` is updated in place.  When a step would take
        a block through the origin (:meth:`Support.crossing`) the step with that block held
        is tried too and the better one kept.  Returns the bias and the number of steps."""
        sup = self.support(beta)
        if sup is None:
            return b, 0
        bA, z, F, u, h, x = sup.state(beta, b, smoothing)
        steps = 0
        held = np.zeros(0, dtype=np.int64)
        for _ in range(int(self.engine.max_polish)):
            if not (math.isfinite(F) and np.all(x > 0.0)):
                break
            step, slope = sup.newton_step(bA, u, h, x)
            if step is None or not slope < -1e-15 * abs(F):
                break
            new = self._search(sup, bA, b, z, F, step, slope, smoothing)
            crossing = sup.crossing(bA, step, x)
            if crossing.any() and not crossing.all():
                # the smooth model has no curvature at the kink of a block's norm: its step is
                # huge and the line search shrinks every block's step with it
                beta[sup.rows] = bA
                keep = np.concatenate([held, sup.blocks[crossing]])
                hsup = self.support(beta, keep)
                if hsup is not None:
                    hA, hz, hF, hu, hh, hx = hsup.state(beta, b, smoothing)
                    hstep, hslope = hsup.newton_step(hA, hu, hh, hx)
                    hnew = (
                        self._search(hsup, hA, b, hz, hF, hstep, hslope, smoothing)
                        if hstep is not None and hslope < -1e-15 * abs(hF)
                        else None
                    )
                    # hF leaves out the held blocks' regularizer: compare on the same terms
                    if hnew is not None and (new is None or hnew[3] + (F - hF) < new[3]):
                        sup, held, new, bA, z, F = hsup, keep, hnew, hA, hz, hF
            if new is None:
                break
            steps += 1
            decrease = F - new[3]
            bA, b, z, F, u, h, x = new
            if decrease <= 1e-15 * abs(F):
                break
        beta[sup.rows] = bA
        return b, steps

    def _search(self, sup: Support, bA, b: float, z, F: float, step, slope: float, smoothing: float) -> tuple | None:
        """Armijo backtracking from the full ``step``: the new blocks, bias, predictions,
        objective, derivatives, curvatures and norms, or None (no decrease in 40 halvings)."""
        nA = sup.rows.size
        # the predictions are linear along the step: one product, then O(N + r_A) per trial
        dz = sup.direction(step[:nA], step[-1] if self.bias else 0.0)
        t = 1.0
        for _ in range(40):
            bt = bA + t * step[:nA]
            btb = b + t * step[-1] if self.bias else b
            zt = z + t * dz
            Ft, ut, ht, xt = sup.objective(bt, zt, smoothing)
            if Ft <= F + 1e-4 * t * slope + 1e-15 * abs(F):
                return bt, btb, zt, Ft, ut, ht, xt
            t *= 0.5
        return None


class Continuation(SmoothedLoss):
    r"""The smoothing :math:`\mu` (``smoothing``) of a non-smooth loss's Moreau envelope:
    its start, its decrease and the points it moves to."""

    def band_shift(
        self, beta: np.ndarray, b: float, smoothing: float, factor: float
    ) -> tuple[np.ndarray, float] | None:
        r"""The point whose predictions move by :math:`-(1 - \text{factor})\mu u_i` on the
        smoothing band (where :math:`z_i = p_i + \mu u_i`, :math:`p_i` the kink), by the
        smallest change of the non-zero blocks and the bias, or None.  ``factor = 0`` puts the
        band on the kinks (a primal point off at second order in :math:`\mu`, not first);
        ``factor = mu'/mu`` predicts the solution at :math:`\mu'`."""
        sup = self.support(beta)
        if sup is None:
            return None
        bA = beta[sup.rows]
        z = sup.predictions(bA, b)
        _, u, h = self.eval_loss(z, smoothing, True, True)
        band = np.flatnonzero(h * smoothing > 0.5)
        if band.size == 0:
            return None
        nA = sup.rows.size
        cols = nA + int(self.bias)
        if float(band.size) * band.size * cols > POLISH_MAX_FLOPS:
            return None
        target = -(1.0 - factor) * smoothing * u[band]
        LB = sup.LA[:, band]
        delta = band_step(LB.toarray() if sp.issparse(LB) else np.asarray(LB), target, self.bias)
        new = beta.copy()
        new[sup.rows] = bA + delta[:nA]
        return new, (b + float(delta[-1]) if self.bias else b)

    def offer_kinks(self, inc: common.Incumbents, beta: np.ndarray, b: float, smoothing: float, it: int) -> None:
        """Offer the point with the smoothing band moved onto the kinks."""
        moved = self.band_shift(beta, b, smoothing, 0.0)
        if moved is None:
            return
        nb, bb = moved
        z = self.bank.expand(nb) + (bb if self.bias else 0.0)
        norms = segment_norms(nb, self.f.starts)
        P = common.primal_value(self.problem, z, norms)
        inc.offer_primal(P, it, beta=nb, bias=bb, norms=norms)

    def smoothing_start(
        self, beta: np.ndarray, b: float, smoothing: float, new_smoothing: float
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """The start for ``new_smoothing``, with its predictions: the predictor of
        :meth:`band_shift` when it lowers the smoothed objective, else the point itself."""
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        moved = self.band_shift(beta, b, smoothing, new_smoothing / smoothing)
        if moved is None:
            return beta, b, z
        nb, bb = moved
        zn = self.bank.expand(nb) + (bb if self.bias else 0.0)

        def smoothed(bt: np.ndarray, zt: np.ndarray) -> float:
            v = self.eval_loss(zt, new_smoothing, True, False)[0]
            return float(np.sum(v)) + common.regularizer_value(self.reg, segment_norms(bt, self.f.starts), self.C)

        if smoothed(nb, zn) < smoothed(beta, z):
            return nb, bb, zn
        return beta, b, z
