"""The checks of the engine kit: one solve against what it claims (its objectives recomputed from the
returned points, the optimum from cvxpy + Clarabel, :mod:`mklkit.testing.conic`, else another engine),
and the behaviour checks."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines import common
from ..engines.common import UNCONVERGED
from ..engines.objectives import relative_gap
from ..plugins import get_registry
from ..result import ConvergenceWarning, SolveResult, Status
from ._engine_problems import KitProblem, with_C
from ._report import _Runner

_SOLVE_CHECKS = ["status", "result_fields", "honest_primal", "honest_dual", "gap_consistent", "gap_bounds_optimum"]
_RECORD_KEYS = ("iteration", "objective", "dual_objective", "gap", "n_active", "time_s")


def _weight_norm(problem: Any) -> Any:
    """The ``weight_norm`` of a regularizer that is not separable."""
    reg = problem.regularizer
    wn = getattr(reg, "weight_norm", None)
    if wn is None:
        raise ValueError(
            f"the regularizer {reg.describe()} is not separable and declares no "
            "weight_norm: its objective cannot be recomputed"
        )
    return wn


def primal_value(problem: Any, alpha: np.ndarray, bias: float) -> float:
    r""":math:`P(\alpha, b)` of ``problem`` from the components' jitted functions."""
    if getattr(problem.regularizer, "separable", True):
        return common.primal_objective(problem, alpha, bias)
    wn = _weight_norm(problem)
    b = float(bias) if problem.bias else 0.0
    norms = common.block_norms(problem.bank, alpha)
    z = common.predict(problem.bank, alpha, b)
    return common.loss_value(problem.loss, problem.y, z, problem.sample_weight) + wn.value(norms, problem.C)


def dual_value(problem: Any, rho: np.ndarray) -> float:
    r""":math:`D` at ``rho`` made feasible the standard way (SpicyMKL §6.1)."""
    if getattr(problem.regularizer, "separable", True):
        return common.projected_dual_objective(problem, rho)[0]
    wn = _weight_norm(problem)
    lo, hi = common.dual_box(problem)
    r = common.centre_dual(rho, lo, hi, problem.bias)
    norms = common.dual_block_norms(problem.bank, r)
    return -(common.loss_conjugate(problem.loss, problem.y, r, problem.sample_weight) + wn.conj(norms, problem.C))


@dataclass(frozen=True)
class Reference:
    """A reference optimum: a primal value attained, its relative accuracy and its source."""

    objective: float
    rtol: float
    source: str


def _conic_reference(problem: Any) -> Reference | None:
    try:
        from . import conic
    except ImportError:  # cvxpy is not installed
        return None
    spec = conic.formulation(problem)
    if spec is None:
        return None
    try:
        to_array = getattr(problem.bank, "to_array", None)  # a FactorBank's dense bank
        K = to_array() if to_array is not None else np.asarray(problem.K)
        sol = conic.solve_reference(
            K,
            problem.y,
            spec["loss"],
            spec["reg"],
            problem.C,
            bias=problem.bias,
            sample_weight=problem.sample_weight,
            **spec["params"],
        )
    except Exception:  # noqa: BLE001 - no reference then; another one is tried
        return None
    return Reference(float(sol.objective), max(10.0 * sol.tol, 1e-7), "cvxpy + Clarabel")


def _engine_reference(engine: Any, problem: Any) -> Reference | None:
    for reg in get_registry().registrations("engine"):
        if reg.name in ("auto", engine.name) or isinstance(engine, reg.cls):
            continue
        try:
            other = reg.cls(tol=1e-9)
            if other.supports(problem) is not None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                res = other.solve(problem)
        except Exception:  # noqa: BLE001 - try the next engine
            continue
        if res.status == Status.CONVERGED and math.isfinite(res.objective):
            return Reference(
                float(res.objective), max(float(res.gap), 1e-9), f"engine {reg.name!r} (gap {res.gap:.1e})"
            )
    return None


def find_reference(engine: Any, problem: Any, how: str) -> Reference | None:
    if how in ("auto", "conic"):
        ref = _conic_reference(problem)
        if ref is not None or how == "conic":
            return ref
    if how in ("auto", "engine"):
        return _engine_reference(engine, problem)
    return None


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

    def verdict(self, check: str, label: str, bad: list[str]) -> bool:
        """Fail ``check`` at the problem ``label`` with the messages in ``bad``, or count a pass; whether it passed."""
        return self.r.identity(check).verdict(bad, label)

    def honest(self, kp: KitProblem, res: SolveResult, ref: Reference | None = None) -> None:
        """honest_primal, honest_dual, gap_consistent and (with ``ref``) gap_bounds_optimum."""
        pb, label, rtol = kp.problem, kp.label, self.rtol
        P, D, gap = float(res.objective), float(res.dual_objective), float(res.gap)
        try:
            P_rec = primal_value(pb, res.alpha, res.bias)
        except Exception as exc:  # noqa: BLE001 - reported
            self.verdict("honest_primal", label, [f"P(alpha, b) could not be recomputed ({type(exc).__name__}: {exc})"])
            return
        wrong = f"reported objective {P:.12g} but P(alpha, b) at the returned point is {P_rec:.12g}"
        self.verdict("honest_primal", label, [] if _close(P, P_rec, rtol) else [wrong])
        if res.dual is None:
            D_rec = -math.inf
            no_dual = "the result has no dual point (SolveResult.dual): its gap cannot be certified"
            self.verdict("honest_dual", label, [no_dual])
        else:
            D_rec = float(dual_value(pb, res.dual))
            wrong = f"reported dual objective {D:.12g} but the returned dual point, made feasible, gives {D_rec:.12g}"
            self.verdict("honest_dual", label, [] if D <= D_rec + rtol * max(abs(D), abs(D_rec), 1.0) else [wrong])
        own = relative_gap(P, D)
        rec = relative_gap(P_rec, D_rec)
        bad = []
        if not (gap == own or _close(gap, own, rtol) or (math.isnan(gap) and math.isnan(own))):
            bad.append(f"reported gap {gap:.6e} but (P - D)/|P| of the reported values is {own:.6e}")
        elif gap < -rtol:
            bad.append(
                f"reported gap {gap:.6e} < 0: the dual value {D:.12g} exceeds the primal one {P:.12g}, which "
                "weak duality forbids (a wrong conjugate?)"
            )
        elif not (gap >= rec - rtol * max(1.0, abs(rec) if math.isfinite(rec) else 1.0)):
            bad.append(f"reported gap {gap:.6e} but the gap recomputed at the returned points is {rec:.6e}")
        self.verdict("gap_consistent", label, bad)
        if ref is not None and math.isfinite(P_rec):
            true_lower = (P_rec - ref.objective) / max(abs(P_rec), 1e-300)
            slack = ref.rtol * max(1.0, abs(ref.objective)) / max(abs(P_rec), 1e-300) + rtol
            wrong = (
                f"reported gap {gap:.6e}, but P(alpha, b) = {P_rec:.12g} is {true_lower:.6e} above the optimum "
                f"{ref.objective:.12g} ({ref.source})"
            )
            self.verdict("gap_bounds_optimum", label, [] if true_lower <= gap + slack else [wrong])

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
        self.verdict("status", label, bad)

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
        self.verdict("result_fields", label, bad)

    def check(self, problems: list[KitProblem]) -> None:
        """Solve and check every problem, then the behaviour checks."""
        first = None
        for kp in problems:
            solved: list = []
            self.r.run(_SOLVE_CHECKS, lambda kp=kp, solved=solved: solved.append(self.solve_and_check(kp)))
            if first is None and solved:
                first = (kp, solved[0])
        # a classification problem where there is one (a squared loss may be solved in one Newton step)
        kp0 = next((kp for kp in problems if kp.problem.loss.task == "classification"), problems[0])
        self.r.run("callback_stop", self.callback_stop, kp0)
        self.r.run("max_iter", self.max_iter, kp0)
        if first is not None:
            self.r.run("warm_start", self.warm_start, *first)

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
            self.verdict("callback_stop", label, [])  # converged before the callback asked
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
        if self.verdict("callback_stop", label, bad):
            self.honest(kp, res)

    def max_iter(self, kp: KitProblem) -> None:
        eng = self.variant(max_iter=1, tol=1e-12)
        label = kp.label
        if eng is None:
            self.r.identity("max_iter").note()
            return
        res, warned = _solve(eng, kp.problem)
        if res.status == Status.CONVERGED and res.gap <= 1e-12 and not warned:
            bad = []  # solved within one iteration, certified
        elif res.status != Status.MAX_ITER:
            bad = [f"max_iter = 1 gave status {res.status} ({res.message[:120]})"]
        else:
            bad = [f"status max_iter with {len(warned)} ConvergenceWarnings, not 1"] if len(warned) != 1 else []
        self.verdict("max_iter", label, bad)
        self.honest(kp, res)

    def warm_start(self, kp: KitProblem, first: SolveResult) -> None:
        eng = self.engine
        pb = kp.problem
        near = with_C(pb, pb.C * 0.8)
        label = f"{kp.label} -> C = {near.C:.4g}"
        cold, _ = _solve(eng, near)
        warm, _ = _solve(eng, near, warm_start=first)
        self.honest(KitProblem(label, near), warm)
        if not getattr(eng, "supports_warm_start", False):
            self.verdict("warm_start", label, [])
            return
        bad = []
        slack = (max(warm.gap, cold.gap) + self.rtol) * max(abs(cold.objective), 1.0)  # their gaps
        if cold.converged and not warm.converged:
            bad.append(f"warm-started solve ended {warm.status} where the cold one converged")
        elif warm.converged and cold.converged and not (warm.objective - cold.objective <= slack):
            bad.append(
                f"warm-started objective {warm.objective:.12g} above the cold one {cold.objective:.12g} by more "
                "than their gaps"
            )
        self.verdict("warm_start", label, bad)
        wrong = dataclasses.replace(first, alpha=np.zeros((pb.n_kernels + 1, pb.n_samples)))
        try:
            _solve(eng, near, warm_start=wrong)
            bad = ["a warm start of the wrong shape was accepted (supports_warm_start is True: expected ValueError)"]
        except ValueError:
            bad = []
        self.verdict("warm_start", label, bad)
