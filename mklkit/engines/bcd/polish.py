r"""Newton steps of the bcd engine on the non-zero blocks (the support polish).

On the non-zero blocks the objective in use is twice differentiable (for a
smoothed non-smooth loss, piecewise quadratic): after a working-set solve a
few Newton steps on them and the bias (:meth:`SupportPolish.polish`, the
system solved by :class:`~mklkit.engines.bcd.support.Support`) reach the
optimum there, which coordinate descent approaches slowly.  Whether a
working set is polished: :meth:`SupportPolish.polishes`.
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels.factor_arrays import segment_norms
from .. import common
from .support import POLISH_MAX_FLOPS, POLISH_MAX_RANK, Support

__all__ = ["SupportPolish", "SMOOTH_POLISH_GAP"]

#: A smooth loss's support is polished (``polish: auto``) once the relative gap is
#: below this: farther from the optimum the support still changes and the steps
#: are wasted (w8a, 1,000 points, logistic + l1: 8 steps at gap 0.75 doubled the time).
SMOOTH_POLISH_GAP = 1e-2


class SupportPolish:
    """The support polish of a solve, mixed into its state
    (:class:`~mklkit.engines.bcd.loop._BcdRun`), whose problem, factor arrays ``f``,
    options and ``polish_on``/``polish_cheap`` it reads."""

    def polishes(self, ws: np.ndarray) -> bool:
        r"""Newton steps on the non-zero blocks after the solve of ``ws``: always for a smoothed
        non-smooth loss ('auto'), and for a smooth loss when the Newton system of the
        working set's blocks costs at most ``POLISH_MAX_FLOPS``: :math:`r_W^2(N + r_W/3)`
        for a dense factor, the squared numbers of entries per sample (plus
        :math:`r_W^3/3`) for a sparse one (the loss has curvature on every sample, so the
        step is not solved through a band).  Near the optimum coordinate descent on the quadratic model
        converges slowly when the blocks are correlated (w8a, 4,000 points, 28 groups of 10
        features, logistic + l1 at 0.01 C_max to gap 1e-8: 1,000 epochs); these steps
        converge quadratically once the support is found."""
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

    def reg_derivatives(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""First and second derivatives of :math:`\tilde g_C` at block norms ``x > 0``.

        :math:`\tilde g_C'(x) = Cx/d(x)` from the kernel weight
        :math:`d = 1/(2g'(x^2))` of the contract (SpicyMKL §4.1), and, with
        :math:`v = x + \tilde g_C'(x)` (so that :math:`\mathrm{prox}(v) = x`),
        :math:`\tilde g_C''(x) = 1/\mathrm{prox}'(v) - 1`.
        """
        rk = self.reg.jit
        x = common.as_vector(x)
        d = np.asarray(rk.weight(x, self.rp), dtype=np.float64)
        g1 = self.C * x / d
        pd = np.asarray(rk.prox_deriv(common.as_vector(x + g1), self.C, self.rp), dtype=np.float64)
        with np.errstate(divide="ignore"):
            g2 = np.where(pd > 0.0, 1.0 / pd - 1.0, np.inf)
        return g1, np.maximum(g2, 0.0)

    def support(self, beta: np.ndarray, held: np.ndarray | None = None) -> "Support | None":
        """The non-zero blocks of ``beta`` as one dense factor, or None (none, or too large).

        ``held``: non-zero blocks left out and kept where they are; their
        predictions become the support's constant offset.
        """
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
            # consecutive blocks of a dense factor: a view, whatever their rank (the Newton
            # system is then solved through the smoothing band, Support.newton_step)
            return Support(self, act, rows, LT[rows[0] : rows[-1] + 1], seg, offset)
        if rows.size > POLISH_MAX_RANK:
            return None
        # a sparse factor's rows stay sparse: its Newton system costs the products of the
        # entries each sample has, not r_A^2 N
        LA = LT[rows].tocsr() if self.f.sparse else np.ascontiguousarray(LT[rows])
        return Support(self, act, rows, LA, seg, offset)

    def polish(self, beta: np.ndarray, b: float, smoothing: float) -> tuple[float, int]:
        r"""Newton steps on the objective in use restricted to the non-zero blocks (and the bias).

        On the non-zero blocks the objective is twice differentiable (for the
        smoothed loss, piecewise): the gradient is
        :math:`L_A^\top\ell'(z) + \tilde g_C'(x_m)\beta_m/x_m` and the Hessian
        :math:`L_A^\top\mathrm{diag}(\ell'')L_A` plus, per block,
        :math:`\frac{\tilde g'}{x}(I - \hat\beta\hat\beta^\top) + \tilde g''\hat\beta\hat\beta^\top`
        (:meth:`reg_derivatives`).  The direction solves the Newton system
        (Cholesky; the pseudo-inverse of its eigendecomposition when it is not
        positive definite, leaving directions of no curvature to coordinate
        descent); an Armijo line search keeps the
        objective decreasing.  Coordinate descent cannot reach a tight gap on a
        smoothed non-smooth loss, whose curvature is :math:`1/\mu` on the
        samples in the smoothing band and 0 elsewhere; these steps do, since
        the objective is piecewise quadratic there.  When a step would take a
        block through the origin (:meth:`Support.crossing`), the step with
        that block held where it is is tried too, and the better one kept (the
        block then stays held; coordinate descent's prox can zero it).
        Returns the bias and the number of steps taken; ``beta`` is updated in
        place.
        """
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
                # a block the step would take through the origin: the smooth model has no
                # curvature there (its norm's minimum is the kink at 0, coordinate descent's
                # prox reaches it), so its Newton step is huge and the line search shrinks
                # every block's step with it.  The step on the others with it held is taken
                # instead when it lowers the objective more.
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

    def _search(
        self,
        sup: Support,
        bA: np.ndarray,
        b: float,
        z: np.ndarray,
        F: float,
        step: np.ndarray,
        slope: float,
        smoothing: float,
    ) -> tuple | None:
        """Armijo backtracking from the full ``step``: the new blocks, bias, predictions,
        objective, derivatives, curvatures and norms, or None (no decrease in 40 halvings)."""
        nA = sup.rows.size
        # the predictions are linear along the step: one product, then every trial costs
        # O(N + r_A)
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
