"""The checks of the engine kit (:mod:`mklkit.testing.engines`): one solve checked
against what it claims, and the behaviour checks (callback, ``max_iter``, warm start)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from ..engines.common import UNCONVERGED
from ..engines.objectives import relative_gap
from ..result import ConvergenceWarning, SolveResult, Status
from ._engine_problems import KitProblem, with_C
from ._engine_references import Reference, dual_value, find_reference, primal_value
from ._report import _Runner

_RECORD_KEYS = ("iteration", "objective", "dual_objective", "gap", "n_active", "time_s")


def _solve(engine: Any, problem: Any, **kw: Any) -> tuple[SolveResult, list[Any]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        res = engine.solve(problem, **kw)
    return res, [w for w in caught if issubclass(w.category, ConvergenceWarning)]


def _close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1.0)


class _Checker:
    """The checks of one engine; each solve feeds several of them."""

    def __init__(self, r: _Runner, engine: Any, rtol: float, reference: str) -> None:
        self.r = r
        self.engine = engine
        self.rtol = rtol
        self.reference = reference

    def fail(self, check: str, label: str, message: str) -> None:
        self.r.identity(check).fail(f"{label}: {message}", {"problem": label})

    def ok(self, check: str) -> None:
        self.r.identity(check).note()

    def honest(self, kp: KitProblem, res: SolveResult, ref: Reference | None = None) -> None:
        """honest_primal, honest_dual, gap_consistent and (with ``ref``) gap_bounds_optimum."""
        pb, label, rtol = kp.problem, kp.label, self.rtol
        P, D, gap = float(res.objective), float(res.dual_objective), float(res.gap)
        try:
            P_rec = primal_value(pb, res.alpha, res.bias)
        except Exception as exc:  # noqa: BLE001 - reported
            self.fail("honest_primal", label, f"P(alpha, b) could not be recomputed ({type(exc).__name__}: {exc})")
            return
        if _close(P, P_rec, rtol):
            self.ok("honest_primal")
        else:
            self.fail(
                "honest_primal",
                label,
                f"reported objective {P:.12g} but P(alpha, b) at the returned point is {P_rec:.12g}",
            )
        if res.dual is None:
            self.fail(
                "honest_dual", label, "the result has no dual point (SolveResult.dual): its gap cannot be certified"
            )
            D_rec = -math.inf
        else:
            D_rec = float(dual_value(pb, res.dual))
            if D <= D_rec + rtol * max(abs(D), abs(D_rec), 1.0):
                self.ok("honest_dual")
            else:
                self.fail(
                    "honest_dual",
                    label,
                    f"reported dual objective {D:.12g} but the returned dual point, made feasible, gives {D_rec:.12g}",
                )

        own = relative_gap(P, D)
        rec = relative_gap(P_rec, D_rec)
        if not (gap == own or _close(gap, own, rtol) or (math.isnan(gap) and math.isnan(own))):
            self.fail(
                "gap_consistent", label, f"reported gap {gap:.6e} but (P - D)/|P| of the reported values is {own:.6e}"
            )
        elif gap < -rtol:
            self.fail(
                "gap_consistent",
                label,
                f"reported gap {gap:.6e} < 0: the dual value "
                f"{D:.12g} exceeds the primal one {P:.12g}, which "
                "weak duality forbids (a wrong conjugate?)",
            )
        elif not (gap >= rec - rtol * max(1.0, abs(rec) if math.isfinite(rec) else 1.0)):
            self.fail(
                "gap_consistent",
                label,
                f"reported gap {gap:.6e} but the gap recomputed at the returned points is {rec:.6e}",
            )
        else:
            self.ok("gap_consistent")
        if ref is not None and math.isfinite(P_rec):
            true_lower = (P_rec - ref.objective) / max(abs(P_rec), 1e-300)
            slack = ref.rtol * max(1.0, abs(ref.objective)) / max(abs(P_rec), 1e-300) + rtol
            if true_lower <= gap + slack:
                self.ok("gap_bounds_optimum")
            else:
                self.fail(
                    "gap_bounds_optimum",
                    label,
                    f"reported gap {gap:.6e}, but P(alpha, b) = {P_rec:.12g} is "
                    f"{true_lower:.6e} above the optimum {ref.objective:.12g} "
                    f"({ref.source})",
                )

    def status(self, kp: KitProblem, res: SolveResult, warned: list[Any]) -> None:
        label = kp.label
        tol = getattr(self.engine, "tol", None)
        bad = []
        if not isinstance(res.status, Status):
            bad.append(f"status {res.status!r} is not a mklkit.result.Status")
        elif res.converged != (res.status == Status.CONVERGED):
            bad.append("converged disagrees with status")
        if res.status == Status.CONVERGED and tol is not None and not (res.gap <= float(tol) * (1.0 + 1e-9) + 1e-15):
            bad.append(f"status converged with gap {res.gap:.3e} > tol {float(tol):g}")
        unconverged = res.status in UNCONVERGED
        if unconverged and not warned:
            bad.append(f"status {res.status} without a ConvergenceWarning")
        if not unconverged and warned:
            bad.append(f"status {res.status} with a ConvergenceWarning ({str(warned[0].message)[:80]})")
        if len(warned) > 1:
            bad.append(f"{len(warned)} ConvergenceWarnings for one solve")
        if bad:
            self.fail("status", label, "; ".join(bad))
        else:
            self.ok("status")

    def fields(self, kp: KitProblem, res: SolveResult) -> None:
        pb, label = kp.problem, kp.label
        M, N = pb.n_kernels, pb.n_samples
        bad = []
        alpha = np.asarray(res.alpha)
        if alpha.shape != (M, N) or not np.all(np.isfinite(alpha)):
            bad.append(f"alpha must be a finite ({M}, {N}) array; got shape {alpha.shape}")
        if not math.isfinite(float(res.bias)):
            bad.append(f"bias is {res.bias!r}")
        w = np.asarray(res.kernel_weights, dtype=np.float64)
        if w.shape != (M,) or np.any(w < 0) or not (abs(float(np.sum(w)) - 1.0) <= 1e-9 or not np.any(w)):
            bad.append(
                f"kernel_weights must be (M,) = ({M},), >= 0, summing to 1 or all 0; "
                f"got shape {w.shape}, sum {float(np.sum(w)):.6g}"
            )
        bn = np.asarray(res.block_norms, dtype=np.float64)
        if bn.shape != (M,) or np.any(bn < 0) or not np.all(np.isfinite(bn)):
            bad.append(f"block_norms must be finite, >= 0, of shape ({M},); got {bn.shape}")
        if not (isinstance(res.iterations, int) and res.iterations >= 0):
            bad.append(f"iterations must be an int >= 0; got {res.iterations!r}")
        if res.engine != self.engine.name:
            bad.append(f"engine is {res.engine!r}, not the engine's name {self.engine.name!r}")
        for i, rec in enumerate(res.history):
            missing = [k for k in _RECORD_KEYS if k not in rec]
            if missing:
                bad.append(f"history record {i} lacks {', '.join(missing)}")
                break
        if res.status != Status.NUMERICAL_ERROR and not (math.isfinite(res.objective) and not math.isnan(res.gap)):
            bad.append(f"objective {res.objective!r} / gap {res.gap!r} not finite without a numerical error")
        if bad:
            self.fail("result_fields", label, "; ".join(bad))
        else:
            self.ok("result_fields")

    # -- one problem ---------------------------------------------------------------
    def solve_and_check(self, kp: KitProblem) -> SolveResult | None:
        self.r.current = "status"
        res, warned = _solve(self.engine, kp.problem)
        self.status(kp, res, warned)
        self.fields(kp, res)
        ref = find_reference(self.engine, kp.problem, self.reference)
        if ref is None:
            self.r.identity("gap_bounds_optimum").note()
        self.honest(kp, res, ref)
        return res

    # -- behaviour -------------------------------------------------------------------
    def variant(self, **changes: Any) -> Any | None:
        params = dict(self.engine.get_params())
        declared = {p.name for p in getattr(type(self.engine), "params", ())}
        if not set(changes) <= declared:
            return None
        params.update(changes)
        return type(self.engine)(**params)

    def callback_stop(self, kp: KitProblem) -> None:
        eng = self.variant(tol=1e-12) or self.engine
        seen: list[dict[str, Any]] = []

        def cb(state: dict[str, Any]) -> bool:
            seen.append(dict(state))
            return len(seen) >= 2

        res, warned = _solve(eng, kp.problem, callback=cb)
        label = kp.label
        if res.status == Status.CONVERGED and len(seen) <= 2:
            self.ok("callback_stop")  # converged before the callback asked
            return
        bad = []
        if res.status != Status.STOPPED:
            bad.append(
                f"a callback returning True at the second record gave status {res.status} after {len(seen)} records"
            )
        if len(seen) != 2:
            bad.append(f"the callback was called {len(seen)} times, not 2")
        if warned:
            bad.append("a stopped solve emitted a ConvergenceWarning")
        if bad:
            self.fail("callback_stop", label, "; ".join(bad))
        else:
            self.ok("callback_stop")
            self.honest(kp, res)

    def max_iter(self, kp: KitProblem) -> None:
        eng = self.variant(max_iter=1, tol=1e-12)
        label = kp.label
        if eng is None:
            self.r.identity("max_iter").note()
            return
        res, warned = _solve(eng, kp.problem)
        if res.status == Status.CONVERGED and res.gap <= 1e-12 and not warned:
            self.ok("max_iter")  # solved within one iteration, certified
        elif res.status != Status.MAX_ITER:
            self.fail("max_iter", label, f"max_iter = 1 gave status {res.status} ({res.message[:120]})")
        elif len(warned) != 1:
            self.fail("max_iter", label, f"status max_iter with {len(warned)} ConvergenceWarnings, not 1")
        else:
            self.ok("max_iter")
        self.honest(kp, res)

    def warm_start(self, kp: KitProblem, first: SolveResult) -> None:
        eng = self.engine
        pb = kp.problem
        near = with_C(pb, pb.C * 0.8)
        label = f"{kp.label} -> C = {near.C:.4g}"
        cold, _ = _solve(eng, near)
        warm, _ = _solve(eng, near, warm_start=first)
        nk = KitProblem(label, near)
        self.honest(nk, warm)
        if getattr(eng, "supports_warm_start", False):
            if cold.converged and not warm.converged:
                self.fail("warm_start", label, f"warm-started solve ended {warm.status} where the cold one converged")
            elif (
                warm.converged
                and cold.converged
                and not (
                    warm.objective - cold.objective
                    <= (max(warm.gap, cold.gap) + self.rtol) * max(abs(cold.objective), 1.0)
                )
            ):
                self.fail(
                    "warm_start",
                    label,
                    f"warm-started objective {warm.objective:.12g} "
                    f"above the cold one {cold.objective:.12g} by more "
                    "than their gaps",
                )
            else:
                self.ok("warm_start")
            wrong = dataclasses.replace(first, alpha=np.zeros((pb.n_kernels + 1, pb.n_samples)))
            try:
                _solve(eng, near, warm_start=wrong)
            except ValueError:
                self.ok("warm_start")
            else:
                self.fail(
                    "warm_start",
                    label,
                    "a warm start of the wrong shape was accepted (supports_warm_start is True: expected ValueError)",
                )
        else:
            self.ok("warm_start")
