r"""Conformance kit for engines: is the gap an engine reports honest?

Every engine, built-in or from a plugin, can be checked with

>>> from mklkit.testing import check_engine            # doctest: +SKIP
>>> report = check_engine(MyEngine())                  # doctest: +SKIP
>>> print(report)                                      # doctest: +SKIP

or asserted in a test suite with :func:`assert_engine_conforms`.  The kit
builds small real problems from the bundled data (subsets of ``sonar`` for
classification and ``liver`` for regression, a bank of RBF, polynomial and
rank-one kernels of unit trace, :func:`sample_bank`), for every built-in
loss × regularizer pair the engine :meth:`~mklkit.engines.base.Engine.supports`
(and for the extra components given), solves them and checks the result
against what it claims.  Nothing is taken from the engine: the objectives
are recomputed from the returned points with the components' jitted functions
(:mod:`mklkit.engines.common`), and an optimum comes from a reference --
cvxpy with Clarabel when it is installed and the components have a conic
formulation (:mod:`mklkit.testing.conic`; the ``test`` extra has it),
otherwise a second registered engine that supports the problem, solved to
:math:`10^{-9}`.

Checks (:data:`ENGINE_CHECKS`), each aggregated over the problems:

``declaration``
    the class declaration, by the checker the registry uses
    (:func:`mklkit.declaration.declaration_problems`).
``problems``
    the engine supports at least one problem of the kit.
``honest_primal``
    the reported ``objective`` is :math:`P(\alpha, b)` recomputed at the
    returned :math:`\alpha`, :math:`b`.
``honest_dual``
    the result has a dual point, and the reported ``dual_objective`` is at
    most :math:`D` recomputed at that point after the standard projection
    (:func:`~mklkit.engines.common.projected_dual_objective`, SpicyMKL §6.1):
    a value that no feasible dual point attains certifies nothing.
``gap_consistent``
    the reported ``gap`` is :math:`(P - D)/|P|` of the reported values, not
    negative (weak duality), and at least the gap recomputed at the
    returned points.
``gap_bounds_optimum``
    the reported gap bounds the true one: :math:`(P(\alpha, b) - P^\star)/|P|
    \le` ``gap`` with :math:`P^\star` the reference optimum.
``status``
    ``converged`` exactly when the gap is at most ``tol``; a
    :class:`~mklkit.result.ConvergenceWarning` exactly for the unconverged
    statuses; no exception.
``result_fields``
    shapes and values of ``alpha``, ``bias``, ``kernel_weights`` (summing to
    1, or all 0), ``block_norms``, ``iterations``, ``engine``, and history
    records with ``iteration``, ``objective``, ``dual_objective``, ``gap``,
    ``n_active``, ``time_s``.
``callback_stop``
    a callback that returns True at the second record stops the solve:
    status ``stopped``, no further call, no warning, an honest result.
``max_iter``
    with ``max_iter = 1`` the solve ends ``max_iter`` with a
    ``ConvergenceWarning`` (or converged and certified), never an exception,
    with an honest result.
``warm_start``
    a result at a neighbouring ``C`` as ``warm_start``: used when
    ``supports_warm_start`` (the solve reaches the optimum of the new
    problem; a warm start of the wrong shape is a ``ValueError``), ignored
    otherwise (no exception either way).

Tolerances: recomputed values agree with the reported ones within
``rtol`` relative to their size (rounding of the sums); the reference
optimum is credited with ``ref_rtol`` (Clarabel's accuracy, or the
reference engine's certified gap).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..components.losses import EpsInsensitive, Hinge, Logistic, Squared
from ..components.regularizers import KL, L1, ElasticNet, Lq, Uniform
from ..data import load_builtin
from ..declaration import declaration_problems
from ..engines import common
from ..engines.common import relative_gap
from ..kernels.factor import FactorBank
from ..plugins import get_registry
from ..problem import Problem
from ..result import ConvergenceWarning, SolveResult, Status
from ._report import ConformanceReport, _Runner

__all__ = [
    "ENGINE_CHECKS",
    "KitProblem",
    "sample_bank",
    "sample_points",
    "exact_factors",
    "KIT_REPRESENTATIONS",
    "engine_problems",
    "check_engine",
    "assert_engine_conforms",
]

ENGINE_CHECKS: tuple[str, ...] = (
    "declaration", "problems", "honest_primal", "honest_dual", "gap_consistent",
    "gap_bounds_optimum", "status", "result_fields", "callback_stop", "max_iter", "warm_start",
)
"""Names of the checks of an engine, in report order."""

_RECORD_KEYS = ("iteration", "objective", "dual_objective", "gap", "n_active", "time_s")


# ---------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------
def standardize(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit standard deviation (constant columns centred only)."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def rbf(X: np.ndarray, width: float) -> np.ndarray:
    r"""The Gaussian kernel :math:`\exp(-\|x - x'\|^2/(2w^2))` on the rows of ``X``."""
    sq = np.sum(X ** 2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0)
    return np.exp(-d2 / (2 * width ** 2))


def sample_bank(X: np.ndarray) -> np.ndarray:
    """RBF and polynomial kernels on all features and on single features, and a rank-one
    kernel, each of unit trace: a small bank with active, inactive and degenerate kernels."""
    d = X.shape[1]
    Ks = [rbf(X, w * math.sqrt(d)) for w in (0.5, 1.0, 2.0)]
    Ks += [(X @ X.T / d + 1.0) ** p for p in (1, 2)]
    Ks += [rbf(X[:, [j]], 1.0) for j in range(0, d, max(1, d // 4))][:4]
    Ks += [np.outer(X[:, 0], X[:, 0])]          # rank one
    K = np.array([k / np.trace(k) for k in Ks])
    return np.ascontiguousarray(0.5 * (K + K.transpose(0, 2, 1)))


def sample_points(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random rows of a bundled data set, standardized, and their targets.

    ``sonar``: the 60 features and the ±1 labels; ``liver``: the five blood
    tests and the standardized ``drinks`` column (a regression target).
    """
    ds = load_builtin(name)
    rows = np.random.default_rng(seed).permutation(ds.n_samples)[:n]
    if name == "liver":
        t = ds.X[rows, 5]
        return standardize(ds.X[rows, :5]), (t - t.mean()) / t.std()
    return standardize(ds.X[rows]), ds.y[rows].astype(np.float64)


#: Bank representations the kit builds its problems in (``representation=``).
KIT_REPRESENTATIONS: tuple[str, ...] = ("array", "factor")


def exact_factors(K: np.ndarray, rtol: float = 1e-10) -> Any:
    r"""A :class:`~mklkit.kernels.factor.FactorBank` of the Gram bank ``K`` (M, N, N): block
    ``m`` is :math:`V_m\Lambda_m^{1/2}` of the eigenvalues of :math:`K_m` above ``rtol``
    times its largest, so :math:`L_mL_m^\top = K_m` up to that relative error."""
    blocks = []
    for Km in K:
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        keep = w > rtol * max(float(w[-1]), 0.0)
        blocks.append(np.ascontiguousarray(V[:, keep] * np.sqrt(w[keep])))
    return FactorBank.from_blocks(blocks)


@functools.lru_cache(maxsize=None)
def _data(task: str, n: int, seed: int, representation: str = "array") -> tuple[Any, np.ndarray]:
    X, y = sample_points("sonar", n, seed) if task == "classification" else \
        sample_points("liver", n, seed + 1)
    K = sample_bank(X)
    if representation == "factor":
        # the problem is the factor bank's own (exact to 1e-10), also for the reference
        return exact_factors(K), y
    return K, y


def _representation(engine: Any, representation: str | None) -> str:
    """The kit's representation for ``engine``: the one asked, else ``array`` when the engine
    takes it, else ``factor`` when it takes that (``array`` otherwise)."""
    if representation is not None:
        if representation not in KIT_REPRESENTATIONS:
            raise ValueError(f"representation must be one of {', '.join(KIT_REPRESENTATIONS)}; "
                             f"got {representation!r}")
        return representation
    reps = tuple(getattr(engine, "representations", ("array",)))
    return "factor" if "array" not in reps and "factor" in reps else "array"


@dataclass
class KitProblem:
    """One problem of the kit: a label for reports and the :class:`~mklkit.problem.Problem`."""

    label: str
    problem: Any


def _builtin_components() -> tuple[list[Any], list[Any]]:
    return ([Hinge(), Logistic(), Squared(), EpsInsensitive(eps=0.1)],
            [L1(), ElasticNet(lam=0.5), Lq(q=1.5), Uniform(), KL()])


def _choose_C(problem: Any) -> float:
    """A ``C`` at which α = 0 is not optimal: 0.3 ``C_max`` (0.1 when ``C_max`` is infinite)."""
    c_max = common.zero_solution(problem).C_max
    return 0.3 * c_max if math.isfinite(c_max) and c_max > 0 else 0.1


def engine_problems(engine: Any, *, losses: Sequence[Any] | None = None,
                    regularizers: Sequence[Any] | None = None, extra_losses: Iterable[Any] = (),
                    extra_regularizers: Iterable[Any] = (), n_samples: int = 40,
                    seed: int = 0, representation: str | None = None) -> list[KitProblem]:
    """The kit's problems that ``engine`` supports.

    Every loss × regularizer pair (the built-ins by default, plus the extra
    components) on ``n_samples`` bundled points: ``sonar`` for a
    classification loss, ``liver`` for a regression loss; ``C`` is 0.3
    ``C_max`` (0.1 for a regularizer without a threshold).  The bank is
    :func:`sample_bank`, held as one array (``representation="array"``) or
    as its exact factors (``"factor"``, :func:`exact_factors`); by default
    ``array`` when the engine's ``representations`` have it, else ``factor``
    when they have that.

    An engine that accepts sample weights (``Requires(sample_weight=True)``)
    also gets, for every loss, its first supported pair again with integer
    weights in {1, 2, 3} (``weighted`` in the label).
    """
    representation = _representation(engine, representation)
    b_losses, b_regs = _builtin_components()
    losses = list(b_losses if losses is None else losses) + list(extra_losses)
    regs = list(b_regs if regularizers is None else regularizers) + list(extra_regularizers)
    weighs = bool(getattr(engine.requirements(), "sample_weight", False))
    out = []
    for loss in losses:
        K, y = _data(loss.task, int(n_samples), int(seed), representation)
        data = "sonar" if loss.task == "classification" else "liver"
        w = np.random.default_rng(int(seed) + 1).integers(1, 4, size=y.size).astype(np.float64)
        weighted_left = weighs   # the first supported pair of each loss once more with weights
        for reg in regs:
            kp = _kit_problem(engine, data, K, y, loss, reg)
            if kp is not None:
                out.append(kp)
            if weighted_left and (kw := _kit_problem(engine, data, K, y, loss, reg, w)) is not None:
                out.append(kw)
                weighted_left = False
    return out


def _kit_problem(engine: Any, data: str, K: Any, y: np.ndarray, loss: Any, reg: Any,
                 sample_weight: np.ndarray | None = None) -> KitProblem | None:
    """The kit's problem of ``loss`` x ``reg`` (weighted with ``sample_weight``) at its ``C``, or None
    when ``engine`` does not support it."""
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=1.0, sample_weight=sample_weight)
    try:
        if engine.supports(pb) is not None:
            return None
        pb.C = float(_choose_C(pb))
    except Exception:  # noqa: BLE001 - reported by the checks that use the problem
        pb.C = 0.1
    label = f"{data} {loss.describe()} x {reg.describe()}, C = {pb.C:.4g}"
    return KitProblem(label + (", weighted" if sample_weight is not None else ""), pb)


# ---------------------------------------------------------------------------
# Objectives recomputed from the returned points
# ---------------------------------------------------------------------------
def _reg_terms(problem: Any) -> tuple[Any, Any]:
    """``(value(norms), conj(dual_norms))`` of the problem's regularizer term, over all blocks."""
    reg, C = problem.regularizer, problem.C
    if getattr(reg, "separable", True):
        return (lambda x: common.regularizer_value(reg, x, C),
                lambda y: common.regularizer_conjugate(reg, y, C))
    wn = getattr(reg, "weight_norm", None)
    if wn is None:
        raise ValueError(f"the regularizer {reg.describe()} is not separable and declares no "
                         "weight_norm: its objective cannot be recomputed")
    return (lambda x: wn.value(x, C), lambda y: wn.conj(y, C))


def primal_value(problem: Any, alpha: np.ndarray, bias: float) -> float:
    r""":math:`P(\alpha, b)` of ``problem`` from the components' jitted functions (any regularizer with a
    separable form or a ``weight_norm``)."""
    value, _ = _reg_terms(problem)
    b = float(bias) if problem.bias else 0.0
    norms = common.block_norms(problem.bank, alpha)
    z = common.predict(problem.bank, alpha, b)
    return common.loss_value(problem.loss, problem.y, z, problem.sample_weight) + value(norms)


def dual_value(problem: Any, rho: np.ndarray) -> float:
    r""":math:`D` at ``rho`` made feasible the standard way (SpicyMKL §6.1)."""
    if getattr(problem.regularizer, "separable", True):
        return common.projected_dual_objective(problem, rho)[0]
    _, conj = _reg_terms(problem)
    lo, hi = common.dual_box(problem)
    r = common.centre_dual(rho, lo, hi, problem.bias)
    norms = common.dual_block_norms(problem.bank, r)
    return -(common.loss_conjugate(problem.loss, problem.y, r, problem.sample_weight) + conj(norms))


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Reference:
    objective: float     # a primal value attained (an upper bound of the optimum)
    rtol: float          # its relative accuracy as an estimate of the optimum
    source: str


def _conic_reference(problem: Any) -> _Reference | None:
    try:
        from . import conic
    except ImportError:  # cvxpy is not installed
        return None
    spec = conic.formulation(problem)
    if spec is None:
        return None
    try:
        to_array = getattr(problem.bank, "to_array", None)    # a FactorBank's dense bank
        K = to_array() if to_array is not None else np.asarray(problem.K)
        sol = conic.solve_reference(K, problem.y, spec["loss"], spec["reg"],
                                    problem.C, bias=problem.bias, sample_weight=problem.sample_weight,
                                    **spec["params"])
    except Exception:  # noqa: BLE001 - no reference then; another one is tried
        return None
    return _Reference(float(sol.objective), max(10.0 * sol.tol, 1e-7), "cvxpy + Clarabel")


def _engine_reference(engine: Any, problem: Any) -> _Reference | None:
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
            return _Reference(float(res.objective), max(float(res.gap), 1e-9),
                              f"engine {reg.name!r} (gap {res.gap:.1e})")
    return None


def _reference(engine: Any, problem: Any, how: str) -> _Reference | None:
    if how in ("auto", "conic"):
        ref = _conic_reference(problem)
        if ref is not None or how == "conic":
            return ref
    if how in ("auto", "engine"):
        return _engine_reference(engine, problem)
    return None


# ---------------------------------------------------------------------------
# One solve, checked
# ---------------------------------------------------------------------------
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

    def honest(self, kp: KitProblem, res: SolveResult, ref: _Reference | None = None) -> None:
        """honest_primal, honest_dual, gap_consistent and (with ``ref``) gap_bounds_optimum."""
        pb, label, rtol = kp.problem, kp.label, self.rtol
        P, D, gap = float(res.objective), float(res.dual_objective), float(res.gap)
        try:
            P_rec = primal_value(pb, res.alpha, res.bias)
        except Exception as exc:  # noqa: BLE001 - reported
            self.fail("honest_primal", label, f"P(alpha, b) could not be recomputed "
                                              f"({type(exc).__name__}: {exc})")
            return
        if _close(P, P_rec, rtol):
            self.ok("honest_primal")
        else:
            self.fail("honest_primal", label, f"reported objective {P:.12g} but P(alpha, b) at "
                                              f"the returned point is {P_rec:.12g}")
        if res.dual is None:
            self.fail("honest_dual", label, "the result has no dual point (SolveResult.dual): "
                                            "its gap cannot be certified")
            D_rec = -math.inf
        else:
            D_rec = float(dual_value(pb, res.dual))
            if D <= D_rec + rtol * max(abs(D), abs(D_rec), 1.0):
                self.ok("honest_dual")
            else:
                self.fail("honest_dual", label, f"reported dual objective {D:.12g} but the "
                                                f"returned dual point, made feasible, gives "
                                                f"{D_rec:.12g}")

        own = relative_gap(P, D)
        rec = relative_gap(P_rec, D_rec)
        if not (gap == own or _close(gap, own, rtol) or (math.isnan(gap) and math.isnan(own))):
            self.fail("gap_consistent", label, f"reported gap {gap:.6e} but (P - D)/|P| of the "
                                               f"reported values is {own:.6e}")
        elif gap < -rtol:
            self.fail("gap_consistent", label, f"reported gap {gap:.6e} < 0: the dual value "
                                               f"{D:.12g} exceeds the primal one {P:.12g}, which "
                                               "weak duality forbids (a wrong conjugate?)")
        elif not (gap >= rec - rtol * max(1.0, abs(rec) if math.isfinite(rec) else 1.0)):
            self.fail("gap_consistent", label, f"reported gap {gap:.6e} but the gap recomputed "
                                               f"at the returned points is {rec:.6e}")
        else:
            self.ok("gap_consistent")
        if ref is not None and math.isfinite(P_rec):
            true_lower = (P_rec - ref.objective) / max(abs(P_rec), 1e-300)
            slack = ref.rtol * max(1.0, abs(ref.objective)) / max(abs(P_rec), 1e-300) + rtol
            if true_lower <= gap + slack:
                self.ok("gap_bounds_optimum")
            else:
                self.fail("gap_bounds_optimum", label,
                          f"reported gap {gap:.6e}, but P(alpha, b) = {P_rec:.12g} is "
                          f"{true_lower:.6e} above the optimum {ref.objective:.12g} "
                          f"({ref.source})")

    def status(self, kp: KitProblem, res: SolveResult, warned: list[Any]) -> None:
        label = kp.label
        tol = getattr(self.engine, "tol", None)
        bad = []
        if not isinstance(res.status, Status):
            bad.append(f"status {res.status!r} is not a mklkit.result.Status")
        elif res.converged != (res.status == Status.CONVERGED):
            bad.append("converged disagrees with status")
        if res.status == Status.CONVERGED and tol is not None and not (
                res.gap <= float(tol) * (1.0 + 1e-9) + 1e-15):
            bad.append(f"status converged with gap {res.gap:.3e} > tol {float(tol):g}")
        unconverged = res.status in (Status.MAX_ITER, Status.STALLED, Status.NUMERICAL_ERROR)
        if unconverged and not warned:
            bad.append(f"status {res.status} without a ConvergenceWarning")
        if not unconverged and warned:
            bad.append(f"status {res.status} with a ConvergenceWarning "
                       f"({str(warned[0].message)[:80]})")
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
        if w.shape != (M,) or np.any(w < 0) or not (abs(float(np.sum(w)) - 1.0) <= 1e-9
                                                      or not np.any(w)):
            bad.append(f"kernel_weights must be (M,) = ({M},), >= 0, summing to 1 or all 0; "
                       f"got shape {w.shape}, sum {float(np.sum(w)):.6g}")
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
        if res.status != Status.NUMERICAL_ERROR and not (
                math.isfinite(res.objective) and not math.isnan(res.gap)):
            bad.append(f"objective {res.objective!r} / gap {res.gap!r} not finite without a "
                       "numerical error")
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
        ref = _reference(self.engine, kp.problem, self.reference)
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
            bad.append(f"a callback returning True at the second record gave status "
                       f"{res.status} after {len(seen)} records")
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
            self.fail("max_iter", label, f"max_iter = 1 gave status {res.status} "
                                         f"({res.message[:120]})")
        elif len(warned) != 1:
            self.fail("max_iter", label, f"status max_iter with {len(warned)} "
                                         "ConvergenceWarnings, not 1")
        else:
            self.ok("max_iter")
        self.honest(kp, res)

    def warm_start(self, kp: KitProblem, first: SolveResult) -> None:
        eng = self.engine
        pb = kp.problem
        near = _with_C(pb, pb.C * 0.8)
        label = f"{kp.label} -> C = {near.C:.4g}"
        cold, _ = _solve(eng, near)
        warm, _ = _solve(eng, near, warm_start=first)
        nk = KitProblem(label, near)
        self.honest(nk, warm)
        if getattr(eng, "supports_warm_start", False):
            if cold.converged and not warm.converged:
                self.fail("warm_start", label, f"warm-started solve ended {warm.status} where "
                                               f"the cold one converged")
            elif warm.converged and cold.converged and not (
                    warm.objective - cold.objective
                    <= (max(warm.gap, cold.gap) + self.rtol) * max(abs(cold.objective), 1.0)):
                self.fail("warm_start", label, f"warm-started objective {warm.objective:.12g} "
                                               f"above the cold one {cold.objective:.12g} by more "
                                               "than their gaps")
            else:
                self.ok("warm_start")
            wrong = dataclasses.replace(first, alpha=np.zeros((pb.n_kernels + 1, pb.n_samples)))
            try:
                _solve(eng, near, warm_start=wrong)
            except ValueError:
                self.ok("warm_start")
            else:
                self.fail("warm_start", label, "a warm start of the wrong shape was accepted "
                                               "(supports_warm_start is True: expected ValueError)")
        else:
            self.ok("warm_start")


def _with_C(problem: Any, C: float) -> Any:
    """The same problem at another ``C`` (a new object: engines may keep state on the old one)."""
    return Problem(K=problem.__dict__["_K"], y=problem.y, loss=problem.loss,
                   regularizer=problem.regularizer, C=C, bias=problem.bias,
                   kernel_names=problem.kernel_names, extra=dict(problem.extra),
                   sample_weight=problem.sample_weight)


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------
def check_engine(engine: Any, *, problems: Sequence[KitProblem] | None = None,
                 losses: Sequence[Any] | None = None, regularizers: Sequence[Any] | None = None,
                 extra_losses: Iterable[Any] = (), extra_regularizers: Iterable[Any] = (),
                 max_problems: int | None = None, reference: str = "auto",
                 n_samples: int = 40, seed: int = 0, rtol: float = 1e-7,
                 representation: str | None = None) -> ConformanceReport:
    """Check an engine's results against what it claims (module docstring).

    Parameters
    ----------
    engine : Engine
        The instance to check (its options are used as given; the
        ``callback_stop``, ``max_iter`` checks use copies with ``tol = 1e-12``
        and ``max_iter = 1``).
    problems : sequence of KitProblem, optional
        The problems to solve; by default :func:`engine_problems` with
        ``losses``, ``regularizers``, ``extra_losses``, ``extra_regularizers``,
        ``n_samples`` and ``seed``.
    max_problems : int, optional
        Solve at most this many of them (the first ones).
    reference : {"auto", "conic", "engine", "none"}
        Where the optimum comes from: cvxpy + Clarabel when available, else
        another registered engine (``auto``); only one of them; none.
    rtol : float
        Relative tolerance of recomputed against reported values.
    representation : {"array", "factor"}, optional
        How the default problems hold their bank (:func:`engine_problems`):
        by default as one array when the engine takes it, else as exact
        factors when it takes those.

    Returns
    -------
    ConformanceReport
        One :class:`CheckResult` per check of :data:`ENGINE_CHECKS`;
        ``report.ok`` tells whether all passed, ``str(report)`` names the
        problem where a check failed and what disagreed.
    """
    if getattr(engine, "kind", None) != "engine" or isinstance(engine, type):
        raise TypeError(f"check_engine needs an engine instance (kind 'engine'); got "
                        f"{type(engine).__name__}")
    if reference not in ("auto", "conic", "engine", "none"):
        raise ValueError(f"reference must be 'auto', 'conic', 'engine' or 'none'; got "
                         f"{reference!r}")
    r = _Runner(engine)
    for name in ENGINE_CHECKS:
        r.identity(name)
    decl = r.identity("declaration")
    for msg in declaration_problems(type(engine)):
        decl.fail(msg)
    decl.note()
    if problems is None:
        problems = engine_problems(engine, losses=losses, regularizers=regularizers,
                                   extra_losses=extra_losses,
                                   extra_regularizers=extra_regularizers, n_samples=n_samples,
                                   seed=seed, representation=representation)
    problems = list(problems)[:max_problems] if max_problems is not None else list(problems)
    if not problems:
        r.identity("problems").fail("the engine supports none of the kit's problems "
                                    "(give extra_losses / extra_regularizers it supports)")
        return r.report(seed)
    r.identity("problems").note(len(problems))
    ck = _Checker(r, engine, rtol, reference)
    first = None
    for kp in problems:
        res = [None]

        def one(kp: KitProblem = kp, res: list = res) -> None:
            res[0] = ck.solve_and_check(kp)

        r.run(["status", "result_fields", "honest_primal", "honest_dual", "gap_consistent",
               "gap_bounds_optimum"], one)
        if first is None and res[0] is not None:
            first = (kp, res[0])
    kp0 = _behaviour_problem(problems)
    r.run("callback_stop", ck.callback_stop, kp0)
    r.run("max_iter", ck.max_iter, kp0)
    if first is not None:
        r.run("warm_start", ck.warm_start, *first)
    return r.report(seed)


def _behaviour_problem(problems: Sequence[KitProblem]) -> KitProblem:
    """The problem of the behaviour checks: a classification one where there is one (a
    regression loss such as the squared may be solved in one Newton step)."""
    for kp in problems:
        if kp.problem.loss.task == "classification":
            return kp
    return problems[0]


def assert_engine_conforms(engine: Any, **kw: Any) -> ConformanceReport:
    """Run :func:`check_engine` and raise ``AssertionError(str(report))`` on failure."""
    report = check_engine(engine, **kw)
    if not report.ok:
        raise AssertionError(str(report))
    return report
