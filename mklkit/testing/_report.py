"""Reports of the conformance kits (components and engines): one :class:`CheckResult` per identity."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one identity: whether it held at every point, the absolute error and the
    tolerance at the worst point (largest ratio; ``inf`` for a structural failure), that point
    (arguments, ``C``, the component's ``params``) and what was compared."""

    identity: str
    passed: bool
    worst_error: float
    tolerance: float
    point: dict[str, Any] | None
    detail: str


@dataclass
class ConformanceReport:
    """The :class:`CheckResult` of each identity of one component, in the order checked, the
    seed of the random points and the ``origin`` of the parameter point (set by
    :func:`check_parameter_points`)."""

    component: Any
    checks: list[CheckResult] = field(default_factory=list)
    seed: int | None = None
    origin: str = ""

    @property
    def ok(self) -> bool:
        """True when every identity passed."""
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        """The identities that failed."""
        return [c for c in self.checks if not c.passed]

    def __getitem__(self, identity: str) -> CheckResult:
        for c in self.checks:
            if c.identity == identity:
                return c
        raise KeyError(identity)

    def __str__(self) -> str:
        comp = self.component
        kind = getattr(comp, "kind", "component") or "component"
        name = getattr(comp, "name", "") or type(comp).__name__
        nfail = len(self.failures)
        verdict = "OK" if nfail == 0 else f"{nfail} of {len(self.checks)} identities FAILED"
        if nfail and self.seed is not None:
            verdict += f" (seed {self.seed})"
        at = f" at {self.origin}" if self.origin else ""
        lines = [f"conformance of {kind} {name!r} ({comp!r}){at}: {verdict}"]
        width = max((len(c.identity) for c in self.checks), default=0)
        for c in self.checks:
            lines.append(f"  {'PASS' if c.passed else 'FAIL'}  {c.identity:<{width}}  {c.detail}")
            if not c.passed:
                if c.point is not None:
                    lines.append(f"        {'':<{width}}  at {_fmt_point(c.point)}")
                lines.append(f"        {'':<{width}}  |error| = {_fmt(c.worst_error)} > tolerance {_fmt(c.tolerance)}")
        return "\n".join(lines)


def _fmt(x: float) -> str:
    x = float(x)
    return f"{x:.3e}" if math.isfinite(x) else str(x)


def _assert_ok(report: ConformanceReport) -> ConformanceReport:
    """``report``, or ``AssertionError(str(report))`` when it failed."""
    if not report.ok:
        raise AssertionError(str(report))
    return report


def _fmt_val(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.10g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt_val(w)}" for k, w in v.items()) + "}"
    return repr(v)


def _fmt_point(point: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt_val(v)}" for k, v in point.items())


class _Identity:
    """Accumulates comparisons for one identity and keeps the worst point."""

    def __init__(self, name: str, params: dict[str, Any]):
        self.name = name
        self.params = params
        self.n = 0
        self.nfail = 0
        self.worst_ratio = -math.inf
        self.worst: tuple[float, float, dict | None, str] | None = None
        self.hard: list[tuple[str, dict | None]] = []

    def _record(self, err, tol, points, describe) -> None:
        """Count the points where ``err <= tol`` and keep the worst one."""
        err = np.asarray(err, dtype=np.float64).reshape(-1)
        tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), err.shape).reshape(-1)
        # an infinite or NaN tolerance would accept anything: demand an exact match
        bad_tol = ~np.isfinite(tol)
        ok = (err <= tol) & ~(bad_tol & (err > 0))
        tol = np.where(bad_tol, 0.0, tol)
        self.n += err.size
        self.nfail += int(np.count_nonzero(~ok))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ok, err / np.maximum(tol, 1e-300), np.inf)
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        if err.size == 0:
            return
        i = int(np.argmax(ratio))
        if ratio[i] > self.worst_ratio or self.worst is None:
            self.worst_ratio = float(ratio[i])
            point = {**{k: float(np.asarray(v).reshape(-1)[i]) for k, v in points.items()}, "params": dict(self.params)}
            self.worst = (float(err[i]), float(tol[i]), point, describe(i))

    @staticmethod
    def _lead(a: Any, shape: tuple[int, ...]) -> np.ndarray:
        """Broadcast an array indexed by point (leading axis) to ``shape``."""
        a = np.asarray(a)
        if a.dtype != bool:
            a = a.astype(np.float64, copy=False)
        return np.broadcast_to(a.reshape(a.shape + (1,) * (len(shape) - a.ndim)), shape)

    def _select(
        self, arrays: list[Any], points: dict[str, Any], mask: Any, shape: tuple[int, ...]
    ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        m = np.ones(shape, dtype=bool) if mask is None else self._lead(np.asarray(mask, dtype=bool), shape)
        out = [self._lead(a, shape)[m] for a in arrays]
        pts = {k: self._lead(v, shape)[m] for k, v in points.items()}
        return out, pts

    def compare(self, got, expected, tol, points: dict[str, Any], what: str, mask=None) -> None:
        """Require ``|got - expected| <= tol`` elementwise (inf == inf allowed)."""
        got, expected = np.broadcast_arrays(np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64))
        (got, expected, tol), pts = self._select([got, expected, tol], points, mask, got.shape)
        with np.errstate(invalid="ignore"):
            same_inf = np.isinf(got) & np.isinf(expected) & (np.sign(got) == np.sign(expected))
            err = np.where(same_inf, 0.0, np.abs(got - expected))
        err = np.where(np.isnan(err), np.inf, err)

        def describe(i: int) -> str:
            sc = np.maximum(np.abs(got[i]), np.abs(expected[i]))
            rel = err[i] / sc if sc > 0 and math.isfinite(sc) else math.inf
            return f"{what}: got {got[i]:.12g}, expected {expected[i]:.12g} (relative error {_fmt(rel)})"

        self._record(err, tol, pts, describe)

    def at_least(self, lhs, rhs, tol, points: dict[str, Any], what: str, mask=None) -> None:
        """Require ``lhs >= rhs - tol`` elementwise."""
        lhs, rhs = np.broadcast_arrays(np.asarray(lhs, dtype=np.float64), np.asarray(rhs, dtype=np.float64))
        (lhs, rhs, tol), pts = self._select([lhs, rhs, tol], points, mask, lhs.shape)
        with np.errstate(invalid="ignore"):
            gap = rhs - lhs
            err = np.where(np.isnan(gap), np.inf, np.maximum(gap, 0.0))

        def describe(i: int) -> str:
            scale = max(abs(lhs[i]), abs(rhs[i]))
            rel = err[i] / scale if scale > 0 and math.isfinite(scale) else math.inf
            return f"{what}: {lhs[i]:.12g} < {rhs[i]:.12g} (relative violation {_fmt(rel)})"

        self._record(err, tol, pts, describe)

    def require(self, ok, points: dict[str, Any], what: Callable[[int], str] | str) -> None:
        """Require a boolean property elementwise (no error size)."""
        ok = np.asarray(ok, dtype=bool)
        (ok,), pts = self._select([ok], points, None, ok.shape)
        err = np.where(ok, 0.0, np.inf)
        describe = what if callable(what) else (lambda i: what)
        self._record(err, np.zeros_like(err), pts, describe)

    def fail(self, message: str, point: dict[str, Any] | None = None) -> None:
        """Record a structural failure."""
        self.n += 1
        self.nfail += 1
        if point is not None:
            point = {**point, "params": dict(self.params)}
        self.hard.append((message, point))

    def verdict(self, problems: Sequence[str] | str | None, label: str | None = None) -> bool:
        """Fail with ``problems`` (a list, or one message or None; prefixed by the problem ``label``), or
        count a pass; whether it passed."""
        if isinstance(problems, str):
            problems = [problems]
        if not problems:
            self.note()
            return True
        message = "; ".join(problems)
        self.fail(message if label is None else f"{label}: {message}", None if label is None else {"problem": label})
        return False

    def note(self, count: int = 1) -> None:
        """Count points that passed a check without an error size."""
        self.n += count

    def result(self) -> CheckResult:
        if self.hard:
            msg, pt = self.hard[0]
            more = f" (and {len(self.hard) - 1} more problems)" if len(self.hard) > 1 else ""
            return CheckResult(self.name, False, math.inf, 0.0, pt, msg + more)
        if self.worst is None:
            return CheckResult(self.name, True, 0.0, 0.0, None, f"{self.n} check{'s' if self.n != 1 else ''}")
        err, tol, pt, desc = self.worst
        if self.nfail:
            return CheckResult(self.name, False, err, tol, pt, f"{desc}; fails at {self.nfail} of {self.n} points")
        return CheckResult(
            self.name, True, err, tol, None, f"{self.n} points, worst |error| {_fmt(err)} (tolerance {_fmt(tol)})"
        )


class _Runner:
    """Runs identity checks, turning exceptions into failures."""

    def __init__(self, component: Any):
        self.component = component
        try:
            self.params = dict(component.get_params())
        except Exception:  # pragma: no cover - a broken get_params is reported by declaration
            self.params = {}
        self.results: dict[str, _Identity] = {}  # in report order
        self.current = ""

    def identity(self, name: str) -> _Identity:
        """The accumulator of ``name``; it becomes the one being checked."""
        if name not in self.results:
            self.results[name] = _Identity(name, self.params)
        self.current = name
        return self.results[name]

    def run(self, names: str | Sequence[str], fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn``, which checks ``names``; an exception fails the identity being checked."""
        names = [names] if isinstance(names, str) else list(names)
        for n in names:
            self.identity(n)
        self.current = names[0]
        try:
            with np.errstate(all="ignore"):
                fn(*args)
        except Exception as exc:  # a kernel that raises fails its identity
            where = self.current
            self.results[where].fail(f"raised {type(exc).__name__}: {exc}")
            for n in names:
                ident = self.results[n]
                if ident.n == 0 and not ident.hard:
                    ident.fail(f"not checked: {where} raised {type(exc).__name__} first")

    def report(self, seed: int | None = None) -> ConformanceReport:
        return ConformanceReport(self.component, [ident.result() for ident in self.results.values()], seed=seed)
