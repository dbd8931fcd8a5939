"""One ``skm_smo`` solve: the continuation over kappa (:mod:`mklkit_smo.skm`) around the
SMO state of ``smo_mkl`` with the SKM's regularizer form."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from mklkit.engines.base import Run
from mklkit.engines.objectives import relative_gap
from mklkit.problem import Problem
from mklkit.result import SolveResult, Status

from .loop import _SmoRun
from .merge import _MERGE_FRACTION, MergedPoints
from .skm_conditions import _lp_weights, opt3, sparsify_weights
from .skm_steps import extrapolate, newton_step
from .state import _Reg

if TYPE_CHECKING:
    from .skm import SkmSMO

logger = logging.getLogger(__name__)

#: Newton steps at the start of a stage.
_NEWTON_STEPS = 3
#: (OPT4) tolerance of the first stage, the SVM on the sum of the kernels (see ``_stage_tol``).
_SVM_STAGE_TOL = 1e-2


class _Options:
    """The option set :class:`~mklkit_smo.state._SmoState` (smo_mkl's state) reads, from
    the SKM engine's options."""

    def __init__(self, engine: SkmSMO) -> None:
        self.name = engine.name
        p = dict(engine.get_params())
        p.update(kkt_tol=p["eps2"], analytic=False)
        self._p = p

    def get_params(self) -> dict[str, Any]:
        return self._p


class _SkmRun(_SmoRun):
    """smo_mkl's SMO state with the SKM's regularizer form (``REG_SKM``)."""

    def _reg_form(self, reg: Any) -> _Reg:
        src = self.problem.extra.get("kernel_source") if self.problem.extra else None
        M = src.n_kernels if src is not None else self.problem.n_kernels
        bpar = np.concatenate([np.ones(M), np.zeros(M)])  # kappa = 1: a = d = 1, d(kappa) = 0
        return _Reg(self.smo.REG_SKM, 2.0, 0.5, 0.0, 0.0, 0.0, bpar, self.smo.no_function, None, reg)


class _Skm:
    """One SKM solve: continuation over kappa around the SMO state."""

    def __init__(self, engine: SkmSMO, problem: Problem, outer: Run | None = None) -> None:
        self.engine = engine
        self.problem = problem
        # the solve's clock, history, callback and ending
        self.outer = outer if outer is not None else Run(engine, problem)
        p = engine.get_params()
        self.tol = float(p["tol"])
        self.max_iter = int(p["max_iter"])
        self.eps2 = float(p["eps2"])
        self.eps1 = float(p["eps1"]) * problem.n_samples
        self.mu = float(p["mu"])
        self.max_stages = int(p["max_stages"])
        self.sparsify = bool(p["sparsify"])
        # the line search needs the bank (K_j D(y) d for the direction d)
        on_the_fly = bool(problem.extra and problem.extra.get("kernel_source") is not None)
        self.extrapolate = bool(p["extrapolate"]) and not on_the_fly
        self.newton = bool(p["newton"]) and not on_the_fly
        self.C = float(problem.C)
        self.U = 1.0 / self.C
        src = problem.extra.get("kernel_source") if problem.extra else None
        self.M = src.n_kernels if src is not None else problem.n_kernels
        self.remove = bool(p["remove_kernels"]) and src is None  # needs the bank K[kept]
        self.dt = np.ones(self.M)  # the SKM's d_j (l1_squared: unweighted)
        self.steps = 0
        self.merged: MergedPoints | None = None
        if bool(p["merge_identical"]) and src is None:
            self.merged = MergedPoints.find(problem.K, problem.y, max_fraction=_MERGE_FRACTION)
            if self.merged is not None:
                logger.info("skm_smo: %d points, %d distinct", problem.n_samples, self.merged.rep.size)

    # -- one stage ---------------------------------------------------------------
    def _new_run(self, kept: np.ndarray, beta: np.ndarray | None) -> _SkmRun:
        pb = self.problem
        mp = self.merged
        K, y = (mp.K, mp.y) if mp is not None else (pb.K, pb.y)
        if kept.size < self.M or mp is not None:
            pb = Problem(
                K=K[kept] if kept.size < self.M else K,
                y=y,
                loss=pb.loss,
                regularizer=pb.regularizer,
                C=pb.C,
                bias=pb.bias,
            )
        run = _SkmRun(_Options(self.engine), pb, self.outer)
        if mp is not None:
            run.ub[:] = self.U * mp.count
        if beta is not None and np.any(beta):
            run.beta[:] = beta
            run.gamma[:] = run.z * beta
            run._sync(np.arange(run.N, dtype=np.int64))
            run._refresh()
        return run

    def _set_kappa(self, run: _SkmRun, kappa: float, kept: np.ndarray) -> None:
        rho = math.hypot(1.0 - kappa, kappa)
        d = self.dt[kept]
        m = kept.size
        run.reg.bpar[:m] = kappa * d / rho
        run.reg.bpar[m:] = (1.0 - kappa) * d / rho
        if run.shrunk:
            run._writeback()
            with np.errstate(all="ignore"):
                run._unshrink()
        else:
            with np.errstate(all="ignore"):
                run._refresh()

    def _inner(self, run: _SkmRun) -> int:
        """SMO on G until the pair conditions hold on the full problem; the smo stop code."""
        smo = run.smo
        while True:
            budget = min(run.refresh_every, self.max_iter - self.steps)
            if budget <= 0:
                return smo.STOP_CHUNK
            done, stop, viol = run._chunk(budget)
            self.steps += done
            numerical = stop == smo.STOP_NUMERICAL or not np.all(np.isfinite(run.c))
            if run.shrunk:
                run._writeback()
            if numerical:
                return smo.STOP_NUMERICAL
            if stop in (smo.STOP_KKT, smo.STOP_STALLED) or self.steps >= self.max_iter:
                if run.shrunk:
                    with np.errstate(all="ignore"):
                        run._unshrink()
                    if stop == smo.STOP_KKT and run._violation() > run.eps:
                        continue  # met only on the shrunk problem
                else:
                    with np.errstate(all="ignore"):
                        run._refresh()
                if self.steps >= self.max_iter and stop != smo.STOP_KKT:
                    return smo.STOP_CHUNK
                return stop
            if not run.shrunk:
                with np.errstate(all="ignore"):
                    run._refresh()
            if run.shrinking:
                run._shrink()

    # -- checks --------------------------------------------------------------------
    def _weights(self, run: _SkmRun, kept: np.ndarray) -> np.ndarray:
        """eta~(alpha) rescaled to sum_j d_j^2 eta_j = 1 for the target d (full length M)."""
        from ._skm import skm_eta_tilde

        et = np.empty(kept.size)
        skm_eta_tilde(np.ascontiguousarray(run.c), run.reg.bpar, et)
        eta = np.zeros(self.M)
        if not np.all(np.isfinite(et)):
            return np.full(self.M, np.nan)
        eta[kept] = et
        s = float(np.sum(self.dt**2 * eta))
        return eta / s if s > 0 else np.full(self.M, np.nan)

    def _full_state(self, run: _SkmRun, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v = K_j D(y) alpha and c_j for every kernel (also the ones left out)."""
        if kept.size == self.M:
            return run.v, run.c
        v = np.zeros((self.M, run.N))
        v[kept] = run.v
        out = np.setdiff1d(np.arange(self.M), kept)
        g = run.gamma
        sv = np.flatnonzero(g)
        bank = self.merged.K if self.merged is not None else self.problem.K
        for j in out:
            v[j] = g[sv] @ bank[j][sv]
        c = np.maximum(np.einsum("mi,i->m", v, g), 0.0)
        return v, c

    def _on_points(self, v: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """v and the dual variables on the original points (from the merged ones)."""
        mp = self.merged
        if mp is None:
            return v, beta
        return np.ascontiguousarray(v[:, mp.of]), mp.expand(beta, self.U)

    def _evaluate(self, v: np.ndarray, c: np.ndarray, beta: np.ndarray, eta: np.ndarray) -> dict[str, float]:
        """(OPT3) reached, primal P, dual D (paper scale) and the bias at (alpha, eta)."""
        y = self.problem.y
        e1, e2 = opt3(v, c, beta, y, self.U, eta, self.dt)
        F = eta @ v
        bp = y - F
        k = min(max(int(np.sum(y > 0)) - 1, 0), bp.size - 1)
        b = float(np.partition(bp, k)[k])
        hinge = float(np.sum(np.maximum(0.0, 1.0 - y * (F + b))))
        norms = eta * np.sqrt(np.maximum(c, 0.0))
        P = 0.5 * float(np.sum(self.dt * norms)) ** 2 + self.U * hinge
        D = float(np.sum(beta)) - 0.5 * float(np.max(c / self.dt**2))
        gap = relative_gap(P, D) if math.isfinite(P) else math.nan
        return {"e1": e1, "e2": e2, "P": P, "D": D, "gap": gap, "bias": b}

    def _record(
        self,
        stage: int,
        kappa: float,
        run: _SkmRun,
        ev: dict[str, float],
        eta: np.ndarray,
        viol: float,
        m_active: int,
        beta: np.ndarray,
        callback: bool = True,
        **more: Any,
    ) -> dict[str, Any]:
        """A history record of a stage (:meth:`mklkit.engines.base.Run.record`)."""
        n = self.problem.n_samples
        return self.outer.record(
            stage,
            self.C * ev["P"],
            self.C * ev["D"],
            ev["gap"],
            int(np.sum(eta > 0)),
            callback=callback,
            kappa=kappa,
            smo_steps=int(self.steps),
            eps1_per_n=ev["e1"] / n,
            eps2=ev["e2"],
            kkt_violation=viol,
            n_sv=int(np.sum(beta > 0.0)),
            n_bound=int(np.sum(beta >= self.U)),
            n_points_in_loop=int(run.N),
            n_kernels_in_loop=int(m_active),
            bias=ev["bias"],
            objective_skm=ev["P"],
            dual_objective_skm=ev["D"],
            newton_evaluations=int(run.istate[run.smo.IS_NEWTON]),
            **more,
        )

    def _certify_by_lp(
        self, v: np.ndarray, c: np.ndarray, beta: np.ndarray
    ) -> tuple[np.ndarray, dict[str, float]] | None:
        """Weights from the LP of (OPT3) on the eps1-active kernels, with their evaluation,
        when they meet (OPT3) and the gap; else None."""
        Jj = 0.5 * c / self.dt**2 - float(np.sum(beta))
        allowed = Jj >= np.max(Jj) - self.eps1
        eta, t = _lp_weights(v, beta, self.problem.y, self.U, self.dt, allowed)
        if eta is None or not t <= self.eps2:
            return None
        ev = self._evaluate(v, c, beta, eta)  # (OPT3) checked again, not taken from the LP
        return (eta, ev) if self._met(ev) else None

    def _stage_tol(self, kappa: float, kept: np.ndarray) -> float:
        """The (OPT4) tolerance of a stage on max_up S - min_low S (2 eps = eps2, §4.4).

        The first stage (kappa = 1) is the SVM on the sum of the kernels; with more than
        one kernel it has no kernel weights to certify and only starts the
        continuation, so it is solved to ``_SVM_STAGE_TOL`` (the scores are of order one).
        """
        if kappa == 1.0 and kept.size > 1:
            return max(self.eps2, _SVM_STAGE_TOL)
        return self.eps2

    def _met(self, ev: dict[str, float]) -> bool:
        return ev["e1"] <= self.eps1 and ev["e2"] <= self.eps2 and ev["gap"] <= self.tol

    # -- main loop -------------------------------------------------------------------
    def run_loop(self) -> SolveResult:
        outer = self.outer
        kept = np.arange(self.M)
        run = self._new_run(kept, None)
        smo = run.smo
        kappa = 1.0
        stage = 0
        zero_before = np.zeros(self.M, dtype=bool)
        ends: list[np.ndarray] = []
        eta = np.full(self.M, np.nan)
        eta_ev = np.zeros(self.M)
        ev: dict[str, float] = {}
        while True:
            stage += 1
            self._set_kappa(run, kappa, kept)
            run.eps = self._stage_tol(kappa, kept)
            if self.extrapolate and kappa < 1.0 and len(ends) >= 2:
                extrapolate(run, ends[-1] - ends[-2])
            if self.newton and kappa < 1.0 and ends:  # not when repeating a stage on all points
                for _ in range(_NEWTON_STEPS):
                    if run._violation() <= run.eps or not newton_step(run) > 0.0:
                        break
            stop = self._inner(run)
            ends = [*ends[-1:], self._beta_full(run)]  # the last two stages' solutions
            viol = run._violation()
            v, c = self._full_state(run, kept)
            v, beta = self._on_points(v, run.beta.copy())
            eta = self._weights(run, kept) if kappa < 1.0 else np.full(self.M, np.nan)
            source = "eta_tilde"
            e2_tilde = math.nan
            if kappa < 1.0 and np.all(np.isfinite(eta)):
                ev = self._evaluate(v, c, beta, eta)
                eta_ev = eta
                if (
                    not self._met(ev)
                    and ev["e1"] <= self.eps1
                    and ev["e2"] <= 2.0 * self.eps2
                    and stop != smo.STOP_NUMERICAL
                ):
                    # eta~ just misses (OPT3): the best weights for this alpha may not (§3.3)
                    lp = self._certify_by_lp(v, c, beta)
                    if lp is not None:
                        e2_tilde = ev["e2"]
                        eta, ev = lp
                        eta_ev = eta
                        source = "lp"
            else:
                eta_svm = np.zeros(self.M)
                eta_svm[kept] = 1.0 / max(kept.size, 1)  # the SVM on the sum of kernels
                eta_ev = eta_svm / np.sum(self.dt**2 * eta_svm)
                ev = self._evaluate(v, c, beta, eta_ev)
                ev["e1"] = math.inf if kappa < 1.0 or self.M > 1 else ev["e1"]
            more = {"weights_from": source}
            if source == "lp":
                more["eps2_eta_tilde"] = e2_tilde
            self._record(stage, kappa, run, ev, np.nan_to_num(eta), viol, kept.size, beta, **more)
            at = f"at kappa = {kappa:.3g}, stage {stage}"
            if stop == smo.STOP_NUMERICAL or not (math.isfinite(ev["P"]) and math.isfinite(ev["D"])):
                outer.end(Status.NUMERICAL_ERROR, self.steps, f"non-finite values {at}", gap=ev["gap"])
                break
            if outer.stop_requested:
                outer.end(Status.STOPPED, self.steps, at, gap=ev["gap"])
                break
            ok = self._met(ev)
            if kept.size < self.M:
                # kernels left out must stay eps1-inactive with the full bank: checked at the
                # end, and whenever one of them is the most active kernel (then eps1 of (OPT3)
                # cannot be met without it)
                Jj = 0.5 * c / self.dt**2 - float(np.sum(beta))
                out = np.setdiff1d(np.arange(self.M), kept)
                top = np.max(Jj[kept])
                back = out[Jj[out] > top - self.eps1]
                if back.size and (ok or np.max(Jj[out]) > top):
                    logger.info("skm_smo: %d kernels left out are active again; put back", back.size)
                    kept = np.union1d(kept, back)
                    full = self._beta_full(run)
                    run = self._new_run(kept, full)
                    zero_before[:] = False
                    continue  # same kappa with the kernels back
            if ok and self.merged is not None:
                # the merged problem is solved: the same stage again on all points, where
                # (OPT3) and the gap are checked once more (with every kernel back)
                full = self.merged.expand(self._beta_full(run), self.U)
                self.merged = None
                kept = np.arange(self.M)
                zero_before[:] = False
                ends = []
                run = self._new_run(kept, full)
                continue
            if ok:
                outer.end(Status.CONVERGED, self.steps, gap=ev["gap"])
                break
            if stop == smo.STOP_CHUNK or self.steps >= self.max_iter:
                outer.end(Status.MAX_ITER, self.steps, at, gap=ev["gap"])
                break
            if stop == smo.STOP_STALLED:
                outer.end(Status.STALLED, self.steps, f"the SMO steps stopped making progress {at}", gap=ev["gap"])
                break
            if stage >= self.max_stages:
                outer.end(
                    Status.STALLED,
                    self.steps,
                    f"max_stages={self.max_stages} continuation stages reached",
                    gap=ev["gap"],
                )
                break
            if self.remove and kappa < 1.0 and np.all(np.isfinite(eta)):
                zero = eta == 0.0
                drop = zero & zero_before
                zero_before = zero
                n_drop = int(np.sum(drop[kept]))
                # a smaller loop is a new state (a copy of the kept bank, v synced from
                # scratch): worth it only when it at least halves the work of a step
                if 2 * n_drop >= kept.size and n_drop < kept.size:
                    keep_now = kept[~drop[kept]]
                    run = self._new_run(keep_now, self._beta_full(run))
                    kept = keep_now
            kappa *= self.mu
        if outer.status == Status.CONVERGED and self.sparsify:
            v, c = self._full_state(run, kept)
            v, beta = self._on_points(v, run.beta.copy())
            sparse = sparsify_weights(v, c, beta, self.problem.y, self.U, eta, self.dt, self.eps1, self.eps2)
            if np.sum(sparse > 0) < np.sum(eta > 0):
                ev2 = self._evaluate(v, c, beta, sparse)
                logger.info("skm_smo: §3.4 removed %d kernels", int(np.sum(eta > 0) - np.sum(sparse > 0)))
                eta, ev = sparse, ev2
                eta_ev = eta
                self._record(stage, kappa, run, ev, eta, viol, kept.size, beta, callback=False, sparsified=True)
        n = self.problem.n_samples
        outer.message += (
            f"; (eps1, eps2)-optimality (OPT3) reached: eps1/n = "
            f"{ev['e1'] / n:.3g}, eps2 = {ev['e2']:.3g}; kappa = {kappa:.3g} "
            f"after {stage} stages"
        )
        if outer.status == Status.CONVERGED:
            outer.message += f" (targets eps1/n = {self.eps1 / n:g}, eps2 = {self.eps2:g}, tol = {self.tol:g})"
        # the point whose objective ev holds (the SVM on the sum of the kernels at kappa = 1)
        return self._result(run, kept, eta_ev, ev)

    def _beta_full(self, run: _SkmRun) -> np.ndarray:
        if run.shrunk:
            run._writeback()
            run._unshrink()
        return run.beta.copy()

    def _result(self, run: _SkmRun, kept: np.ndarray, eta: np.ndarray, ev: dict[str, float]) -> SolveResult:
        r"""The result at the weights ``eta``: blocks :math:`\eta_j K_jD(y)\alpha`."""
        eta = np.nan_to_num(np.asarray(eta, dtype=np.float64))
        v, c = self._full_state(run, kept)
        gamma = self.problem.y * self._on_points(v, run.beta)[1]  # D(y) alpha, paper scale
        norms = eta * np.sqrt(np.maximum(c, 0.0))
        total = float(np.sum(eta))
        weights = eta / total if total > 0.0 else np.zeros_like(eta)
        return self.outer.result(
            int(self.steps),
            alpha=eta[:, None] * gamma[None, :],
            bias=float(ev.get("bias", 0.0)),
            primal=float(self.C * ev.get("P", math.nan)),
            dual=float(self.C * ev.get("D", math.nan)),
            rho=self.C * gamma,
            norms=norms,
            weights=weights,
        )
