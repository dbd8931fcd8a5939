r"""The smoothing continuation of the bcd engine for non-smooth losses.

A loss with ``smooth_primal = False`` is replaced by its Moreau envelope of
smoothing :math:`\mu` (module :mod:`mklkit.engines.bcd`).  The smoothing
starts at :meth:`Continuation.initial_smoothing` and decreases once the
smoothed problem is solved to within its smoothing error
(:meth:`Continuation.next_smoothing`); the solve for the smaller smoothing
starts from the predicted solution (:meth:`Continuation.smoothing_start`),
and after every working-set solve the point with the smoothing band moved
onto the kinks is offered as a primal candidate
(:meth:`Continuation.offer_kinks`).  Both move the band by
:meth:`Continuation.band_shift`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ...kernels.factor_arrays import segment_norms
from .. import common
from .support import POLISH_MAX_FLOPS

__all__ = ["Continuation"]


class Continuation:
    r"""The smoothing continuation of a solve, mixed into its state
    (:class:`~mklkit.engines.bcd.loop._BcdRun`), whose problem, ``loss_terms`` and
    ``support`` (:class:`~mklkit.engines.bcd.polish.SupportPolish`) it uses.  ``smoothing``
    is the :math:`\mu` of the formulas."""

    def initial_smoothing(self) -> float:
        r"""``mu0``, or by default a tenth of the zero solution's objective per unit of
        :math:`\sum_i u_{\max,i}^2/2` over the (weighted) conjugate's domain; 0 for a smooth
        loss."""
        if self.smooth:
            return 0.0
        if self.engine.mu0 is not None:
            return float(self.engine.mu0)
        umax = np.maximum(np.abs(self.lo), np.abs(self.hi))
        umax = np.where(np.isfinite(umax), umax, 1.0)
        if self.sl.w is not None:
            umax = self.sl.w * umax  # the domain of (w l)^*
        denom = 0.5 * float(np.sum(umax * umax))
        p0 = abs(self.zero.objective)
        return 0.1 * p0 / denom if (p0 > 0.0 and denom > 0.0) else 1.0

    def band_shift(
        self, beta: np.ndarray, b: float, smoothing: float, factor: float
    ) -> tuple[np.ndarray, float] | None:
        r"""The point whose predictions move by :math:`-(1 - \text{factor})\mu u_i` on the samples
        of the smoothing band, by the smallest change of the non-zero blocks and the bias.

        On a sample where the envelope's curvature is :math:`1/\mu` (the
        conjugate is linear there, the loss has a kink), the smoothed
        solution puts the prediction at :math:`z_i = p_i + \mu u_i` with
        :math:`p_i = \mathrm{prox}_{\mu\ell}(z_i) = z_i - \mu u_i` the kink (with weights
        too: the envelope of :math:`w_i\ell` is :math:`w_i` times that of smoothing
        :math:`\mu w_i`, so the curvature is :math:`1/\mu` and the shift :math:`\mu w_iv_i =
        \mu u_i`); along the path of solutions :math:`u_i` stays nearly constant.
        ``factor = 0`` moves the band onto the kinks: a primal point whose
        objective differs from the optimum at second order in :math:`\mu`
        instead of first (the loss of each band sample drops by
        :math:`\mu|u_i|`, the stationarity of the smoothed problem makes the
        first-order change elsewhere :math:`\mu u_i^2`).  ``factor =
        \mu'/\mu`` predicts the solution for the smaller smoothing
        :math:`\mu'`.  None when there is no band or no non-zero block.
        """
        sup = self.support(beta)
        if sup is None:
            return None
        bA = beta[sup.rows]
        z = sup.predictions(bA, b)
        _, u, h = sup.terms(z, smoothing)
        band = np.flatnonzero(h * smoothing > 0.5)
        if band.size == 0:
            return None
        nA = sup.rows.size
        cols = nA + int(self.bias)
        if float(band.size) * band.size * cols > POLISH_MAX_FLOPS:
            return None
        target = -(1.0 - factor) * smoothing * u[band]
        LB = sup.LA[:, band]
        LB = LB.toarray() if sp.issparse(LB) else LB
        if band.size < cols:
            # the minimum-norm solution M^T (M M^T)^+ target from the band's Gram matrix
            G = LB.T @ LB + (1.0 if self.bias else 0.0)
            w = sla.lstsq(G, target, lapack_driver="gelsy", check_finite=False)[0]
            delta = np.concatenate([LB @ w, [float(np.sum(w))] if self.bias else []])
        else:
            Mx = LB.T
            if self.bias:
                Mx = np.hstack([Mx, np.ones((band.size, 1))])
            delta = np.linalg.lstsq(Mx, target, rcond=None)[0]
        new = beta.copy()
        new[sup.rows] = bA + delta[:nA]
        return new, (b + float(delta[-1]) if self.bias else b)

    def offer_kinks(self, inc: common.Incumbents, beta: np.ndarray, b: float, smoothing: float, it: int) -> None:
        """Offer the point with the smoothing band moved onto the kinks (:meth:`band_shift`)."""
        moved = self.band_shift(beta, b, smoothing, 0.0)
        if moved is None:
            return
        nb, bb = moved
        z = self.bank.expand(nb) + (bb if self.bias else 0.0)
        norms = segment_norms(nb, self.f.starts)
        P = common.loss_value(self.loss, self.y, z, self.sl.w) + common.regularizer_value(self.reg, norms, self.C)
        inc.offer_primal(P, it, beta=nb, bias=bb, norms=norms)

    def smoothing_start(
        self, beta: np.ndarray, b: float, smoothing: float, new_smoothing: float
    ) -> tuple[np.ndarray, float, np.ndarray]:
        """The start for the smaller smoothing ``new_smoothing``: the predictor of
        :meth:`band_shift` when it lowers the smoothed objective, else the point itself; with
        its predictions."""
        z = self.bank.expand(beta) + (b if self.bias else 0.0)
        moved = self.band_shift(beta, b, smoothing, new_smoothing / smoothing)
        if moved is None:
            return beta, b, z
        nb, bb = moved
        zn = self.bank.expand(nb) + (bb if self.bias else 0.0)

        def smoothed(bt: np.ndarray, zt: np.ndarray) -> float:
            v, _ = self.loss_terms(zt, new_smoothing, value=True)
            return float(np.sum(v)) + common.regularizer_value(self.reg, segment_norms(bt, self.f.starts), self.C)

        if smoothed(nb, zn) < smoothed(beta, z):
            return nb, bb, zn
        return beta, b, z

    def next_smoothing(self, smoothing: float, cert: dict[str, Any], tol: float) -> float:
        r"""The next smoothing: smaller once the smoothed problem is solved to within its
        smoothing error :math:`E = P - P_\mu + \tfrac\mu2\|\rho\|^2` (module docstring)."""
        err = cert.extra["smoothing_error"]
        if not (cert.extra["gap_smoothed"] <= err and err > 0.0):
            return smoothing
        target = 0.5 * tol * abs(cert.primal) / err
        return smoothing * max(float(self.engine.mu_factor), min(target, 1.0))
