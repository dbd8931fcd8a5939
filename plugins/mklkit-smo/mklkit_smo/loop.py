"""The SMO-MKL solve on its state (:class:`mklkit_smo.state._SmoState`): chunks of SMO
steps between history records, the duality gap, the stopping rules and the result."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mklkit.engines.objectives import relative_gap
from mklkit.result import SolveResult, Status

from .state import _SmoState

#: Smallest KKT tolerance the inner loop is driven to before a solve is declared stalled.
_EPS_FLOOR = 1e-15


class _SmoRun(_SmoState):
    """One SMO-MKL solve: the state and the loop that drives it."""

    # -- duality gap -------------------------------------------------------------
    def _bias(self) -> tuple[float, float]:
        r"""The exact minimizer of the (piecewise-linear) loss in the bias, and the loss there.

        :math:`\sum_i -l_i(s_{-,i} - F_i - b)_+ + u_i(F_i + b - s_{+,i})_+` is convex
        and piecewise linear in ``b`` with slope :math:`\sum_i l_i` at
        :math:`-\infty`; every breakpoint :math:`s_{\mp,i} - F_i` raises it by its
        weight :math:`-l_i` or :math:`u_i`.  The minimizer is the smallest breakpoint
        at which the slope is no longer negative (a weighted median).
        """
        lo, hi, s_lo, s_hi = self.pieces
        F = self.F
        down, up = lo < 0.0, hi > 0.0
        bp = np.concatenate([s_lo[down] - F[down], s_hi[up] - F[up]])
        w = np.concatenate([-lo[down], hi[up]])
        order = np.argsort(bp, kind="stable")
        k = int(np.searchsorted(np.cumsum(w[order]), float(np.sum(-lo[down])), side="left"))
        b = float(bp[order[min(k, bp.size - 1)]])
        return b, self._loss(b)

    def _loss(self, b: float) -> float:
        loss = self.problem.loss
        z = np.ascontiguousarray(self.F + b)
        return float(np.sum(loss.jit.value(self.problem.y, z, loss.param_vector)))

    def _gap(self) -> dict[str, float]:
        b, L = self._bias()
        dual_p = float(self.e @ self.beta) - self.reg.phi(self.c)
        primal_p = self.U * L + self.reg.omega(self.c, self.d)
        P = self.C * primal_p
        D = self.C * dual_p
        # the SMO-MKL dual (9)/(23) is feasible at every iterate: no projection, only the gap
        gap = relative_gap(P, D) if math.isfinite(P) and math.isfinite(D) else math.nan
        return {
            "objective": P,
            "dual_objective": D,
            "gap": gap,
            "bias": b,
            "objective_smo": primal_p,
            "dual_objective_smo": dual_p,
        }

    # -- main loop ---------------------------------------------------------------
    def _chunk(self, budget: int) -> tuple[int, int, float]:
        smo = self.smo
        w = self.view
        self.opts = self.opts._replace(rows_mode=w.rows_mode, max_steps=int(budget), eps=float(self.eps))
        with np.errstate(all="ignore"):
            smo.smo_chunk(self.opts, self.fns, w.bank, self.rows, w.row_cache, w.state, self.work)
        return (int(self.istate[smo.IS_STEPS]), int(self.istate[smo.IS_STOP]), float(self.fout[smo.FO_VIOL]))

    def run_loop(self) -> SolveResult:
        smo, run = self.smo, self.run
        max_iter = int(run.max_iter)
        steps = 0
        next_shrink = self.refresh_every
        while True:
            done, stop, viol = self._chunk(min(self.record_every, max_iter - steps))
            steps += done
            numerical = stop == smo.STOP_NUMERICAL or not np.all(np.isfinite(self.c))
            final = stop in (smo.STOP_KKT, smo.STOP_STALLED) or steps >= max_iter or numerical
            if self.shrunk:
                self._writeback()
            if self.shrunk and final and not numerical:
                with np.errstate(all="ignore"):
                    self._unshrink()
                if stop == smo.STOP_KKT:
                    # KKT met on the shrunk problem: check the full one before anything else
                    viol = self._violation()
                    rec = self._record(steps, viol, certified=True)
                    floor = viol <= self.eps and self.eps <= _EPS_FLOOR
                    if run.check(steps, rec["gap"], stalled=self._kkt_floor(viol) if floor else None):
                        break
                    if viol <= self.eps:
                        self.eps = max(self.eps * 0.1, _EPS_FLOOR)
                    if self.shrinking:
                        self._shrink()
                        next_shrink = steps + self.refresh_every
                    continue
            elif not self.shrunk:
                with np.errstate(all="ignore"):
                    self._refresh()
            rec = self._record(steps, viol, certified=not self.shrunk)
            gap = rec["gap"]
            finite = math.isfinite(rec["dual_objective"]) and (self.shrunk or math.isfinite(rec["objective"]))
            if numerical or not finite or not np.all(np.isfinite(self.d)):
                run.end(
                    Status.NUMERICAL_ERROR,
                    steps,
                    f"non-finite values (objective {rec['objective']!r}, dual {rec['dual_objective']!r})",
                    gap=gap,
                )
                break
            stalled = None
            if stop == smo.STOP_STALLED:
                stalled = "the SMO steps stopped making progress"
            elif stop == smo.STOP_KKT and self.eps <= _EPS_FLOOR:
                stalled = self._kkt_floor(viol)
            if run.check(steps, math.nan if self.shrunk else gap, stalled=stalled):
                break
            if stop == smo.STOP_KKT:
                self.eps = max(self.eps * 0.1, _EPS_FLOOR)
            if self.shrinking and steps >= next_shrink:
                self._shrink()
                next_shrink = steps + self.refresh_every
        if self.shrunk:  # never report from a shrunk state
            with np.errstate(all="ignore"):
                self._unshrink()
            self._record(steps, float(self.fout[smo.FO_VIOL]), certified=True, callback=False)
        return self._result(steps)

    @staticmethod
    def _kkt_floor(viol: float) -> str:
        return (
            f"the KKT conditions hold to {viol:.3g} but rounding limits the gap (KKT tolerance {_EPS_FLOOR:g} reached)"
        )

    def _record(self, steps: int, viol: float, certified: bool, callback: bool = True) -> dict[str, Any]:
        """A history record (:meth:`mklkit.engines.base.Run.record`); the primal (and gap)
        only when nothing is shrunk."""
        smo = self.smo
        with np.errstate(all="ignore"):
            if certified:
                g = self._gap()
            else:
                dual_p = float(self.e @ self.beta) - self.reg.phi(self.c)
                g = {
                    "objective": math.nan,
                    "dual_objective": self.C * dual_p,
                    "gap": math.nan,
                    "bias": math.nan,
                    "objective_smo": math.nan,
                    "dual_objective_smo": dual_p,
                }
        return self.run.record(
            steps,
            g["objective"],
            g["dual_objective"],
            g["gap"],
            int(np.sum(self.d > 0.0)),
            callback=callback,
            certified=bool(certified),
            kkt_violation=viol,
            kkt_tol=self.eps,
            n_sv=int(np.sum(self.beta > 0.0)),
            n_bound=int(np.sum(self.beta >= self.ub)),
            n_active_variables=int(self.view.avar.size),
            bias=g["bias"],
            objective_smo=g["objective_smo"],
            dual_objective_smo=g["dual_objective_smo"],
            cache_hits=int(self.istate[smo.IS_HITS]),
            cache_misses=int(self.istate[smo.IS_MISSES]),
            newton_evaluations=int(self.istate[smo.IS_NEWTON]),
            syncs=int(self.n_syncs),
        )

    def _result(self, steps: int) -> SolveResult:
        r"""The result at the last record: blocks :math:`d_k K_k\gamma`, weights :math:`d/\sum d`."""
        last = self.run.history[-1]
        d = self.d.copy()
        norms = d * np.sqrt(np.maximum(self.c, 0.0))
        alpha = d[:, None] * self.gamma[None, :]
        total = float(np.sum(d))
        weights = d / total if total > 0.0 and math.isfinite(total) else np.zeros_like(d)
        return self.run.result(
            steps,
            alpha=alpha,
            bias=float(last["bias"]),
            primal=float(last["objective"]),
            dual=float(last["dual_objective"]),
            rho=self.C * self.gamma,
            norms=norms,
            weights=weights,
        )
