r"""C chosen by held-out data: one warm-started regularization path on part of the rows.

``C="path"`` (estimators) solves the problem on a stratified part of the
training rows for a decreasing sequence of C, from :math:`C_{max}` (every
kernel off) down, each solve warm-started from the last; after each solve
the held-out rows are predicted through the same bank (their Gram rows, or
their factor rows: nothing is computed again) and scored.  The path stops
once the held-out *criterion* has *turned* or *flattened*, past the prior C
(below): it rose past its minimum by more than the paired standard error, or
``patience`` values passed without lowering it by more than ``flat`` (1 %)
of its decrease along the path so far (glmnet ends its paths on a relative
change of the training deviance the same way).

The criterion (:func:`criterion_of`) is the mean held-out loss of the problem's
own loss (logistic, squared, ε-insensitive, ...), a proper score of the
predictions; for a classification loss whose primal is not smooth (the hinge)
it is the held-out error rate instead.  The hinge loss keeps falling as C
shrinks long after the accuracy has turned: on a9a (26,049 fitting rows, the
elastic net) its held-out value fell from 0.358 at ``3.16e-3 C_max`` to 0.332
at ``1e-6 C_max`` while the held-out accuracy peaked at ``3.16e-4 C_max``
(0.8569) and fell after, so the path ran to C values where the solves are the
slowest and chose one there.

Which C: among the values whose held-out criterion is within one standard error of
the least (paired over the held-out rows), the one closest (on a log scale) to a *prior* C, the rule of
``C="scale"`` (:func:`~mklkit.pipeline.settings.auto_C`).  A held-out score
of a few dozen points cannot tell neighbouring values of C apart, and there
the prior is the better guess (on the bundled UCI sets the held-out
accuracy's maximum alone was up to 5 points less accurate than the prior); with
thousands of held-out points the standard error is small and the data decide.  The
chosen value is carried to all rows as a fraction of the reference each
part has: :math:`C = (C_i / C^{fit}_{max})\,C^{all}_{max}` (or the prior's
ratio for regularizers without a finite :math:`C_{max}`), which is invariant
under repeating the rows and rescaling the kernels.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..components.base import CLASSIFICATION
from .assemble import problem_at
from .heldout_rows import (
    KEEP_BYTES,
    HeldoutRows,
    KeptSolution,
    criterion_of,
    effective_size,
    held_out_scores,
    paired_excess,
    split_rows,
)


@dataclass(frozen=True)
class PathSettings:
    """How ``C="path"`` searches.

    Attributes
    ----------
    held_out : float
        Fraction of the rows held out (stratified by class).
    per_decade : int
        Values of C per decade of the path (2: on w8a and the 20,000-point
        ``make_classification`` set the same choice and accuracy as 4, with
        the path in 22 s instead of 35 s and 70 s instead of 84 s).
    min_ratio : float
        The path ends at ``min_ratio * C_max`` at the latest (or ``min_ratio``
        times the prior for regularizers without a finite ``C_max``); it
        usually stops before, where the held-out loss turns (on w8a, 31,839
        fitting rows, the least held-out loss lies near ``1e-5 C_max``).
    patience : int
        Values past the last material minimum of the held-out criterion (and
        past the prior) that stop the path when it has not risen
        significantly before.
    flat : float
        A new minimum is material when it lowers the criterion by more than
        this fraction of its decrease from the first value to the last
        material minimum.  On a9a (26,049 fitting rows) the held-out loss
        fell by 0.237 from ``0.316 C_max`` to ``3.16e-4 C_max`` and by 0.004
        over the next eight values; with 0.01 the path stops three values
        earlier (after ``1e-6 C_max``, 5.6 s less) at the same choice.  0: every
        new minimum counts.
    tol_ratio : float
        The path's solves stop at this multiple of the fit's relative
        duality gap (:func:`path_engine`); the fit on all rows at the chosen
        C is solved to the fit's own, warm-started from the path.  Their
        solutions only rank the values of C on held-out rows: with 3
        (relative gap 3e-2 for the default 1e-2) the default fit took 9.5–10.4 s
        instead of 15.7–15.8 s on ringnorm, 16.5 / 19.4 s instead of
        20.6 / 26.9 s on w8a and 12.0 s instead of 15.0 s on a9a, with the same
        choices on twonorm, ringnorm, a9a and 4 of 5 waveform splits (test
        accuracy within 0.0005 on every set).
    seed : int
        Seed of the held-out split.
    min_held : int
        Fewest held-out rows (weighted count) worth scoring; below, the
        prior C is used and ``stopped`` says why.
    """

    held_out: float = 0.2
    per_decade: int = 2
    min_ratio: float = 1e-7
    patience: int = 3
    flat: float = 0.01
    tol_ratio: float = 3.0
    seed: int = 0
    min_held: int = 20

    def __post_init__(self) -> None:
        if not 0.0 < self.held_out < 1.0:
            raise ValueError(f"held_out must be in (0, 1); got {self.held_out!r}")
        if int(self.per_decade) < 1 or int(self.patience) < 1:
            raise ValueError("per_decade and patience must be >= 1")
        if not 0.0 < self.min_ratio < 1.0:
            raise ValueError(f"min_ratio must be in (0, 1); got {self.min_ratio!r}")
        if not 0.0 <= self.flat < 1.0:
            raise ValueError(f"flat must be in [0, 1); got {self.flat!r}")
        if not self.tol_ratio >= 1.0:
            raise ValueError(f"tol_ratio must be >= 1; got {self.tol_ratio!r}")


@dataclass
class HeldoutPath:
    """The path ``C="path"`` solved and what it chose (an estimator's ``C_selection_``).

    Attributes
    ----------
    C : float
        The C of the fit on all rows.
    Cs : ndarray
        The values of C solved on the fitting rows, largest first.
    ratios : ndarray
        ``Cs`` over the reference (``C_max`` of the fitting rows, or the prior).
    losses : ndarray
        Mean loss of the problem (e.g. the logistic loss) on the held-out
        rows per value (weighted by the sample weights).
    metrics : ndarray
        Held-out accuracy (classification) or :math:`R^2` (regression) per value.
    criterion : str
        What chooses C: ``"loss"`` (``losses``) or ``"error"`` (one minus
        ``metrics``, for the hinge and other non-smooth classification losses).
    n_active, iterations, gaps, times : ndarray
        Per value: active kernels, engine iterations, final relative gap,
        seconds.
    chosen : int
        Index of the chosen value in ``Cs`` (-1 when none was scored).
    best : int
        Index of the smallest held-out criterion.
    excess, excess_se : ndarray
        Per value: the mean held-out criterion above the least (at ``best``)
        and its standard error, paired over the held-out rows (the same rows
        under both values of C): values with ``excess <= excess_se`` cannot
        be told from the best.
    prior_C : float
        The prior (``C="scale"``'s rule) on all rows.
    prior_ratio : float
        The prior of the fitting rows over their reference.
    reference : str
        ``"C_max"`` or ``"prior"``: what the ratios are relative to.
    stopped : str
        Why the path ended.
    n_fit, n_held : int
        Rows of each part.
    """

    C: float
    Cs: np.ndarray
    ratios: np.ndarray
    losses: np.ndarray
    metrics: np.ndarray
    n_active: np.ndarray
    iterations: np.ndarray
    gaps: np.ndarray
    times: np.ndarray
    chosen: int
    best: int
    excess: np.ndarray
    excess_se: np.ndarray
    prior_C: float
    prior_ratio: float
    reference: str
    stopped: str
    n_fit: int
    n_held: int
    time_s: float = 0.0
    criterion: str = "loss"
    settings: PathSettings = field(default_factory=PathSettings)
    #: the chosen solution on the fitting rows as a start on all rows (its coefficients zero on
    #: the held-out rows: the same predictor), for the fit at ``C`` (on Gram matrices whose path
    #: solutions outgrew ``KEEP_BYTES``, the kept one nearest it); ``None`` once used
    start: Any = field(default=None, repr=False, compare=False)
    #: the criterion on each held-out row at the chosen value, and the rows' weights (to compare
    #: two paths over the same rows: :func:`mklkit.pipeline.kernel_subset.prefer_subset`); ``None``
    #: once compared
    chosen_rows: Any = field(default=None, repr=False, compare=False)
    held_weights: Any = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers and lists (``summary.json``'s ``C_selection``)."""
        out: dict[str, Any] = {}
        for key in (
            "C",
            "Cs",
            "ratios",
            "losses",
            "metrics",
            "n_active",
            "iterations",
            "gaps",
            "times",
            "chosen",
            "best",
            "excess",
            "excess_se",
            "prior_C",
            "reference",
            "stopped",
            "n_fit",
            "n_held",
            "time_s",
            "criterion",
        ):
            v = getattr(self, key)
            out[key] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def summary(self) -> str:
        """One line per C: ratio, held-out loss and metric, active kernels, iterations, gap; the choice marked."""
        head = (
            f"{'C':>10}  {'C/ref':>9}  {'loss':>8}  {'excess':>17}  {'metric':>7}  {'active':>6}  "
            f"{'iter':>5}  {'gap':>9}  {'time_s':>7}"
        )
        lines = [head]
        for i in range(self.Cs.size):
            mark = "  <- chosen" if i == self.chosen else (f"  (least {self.criterion})" if i == self.best else "")
            lines.append(
                f"{self.Cs[i]:10.4g}  {self.ratios[i]:9.3g}  {self.losses[i]:8.5f}  "
                f"{self.excess[i]:8.5f}+-{self.excess_se[i]:7.5f}  {self.metrics[i]:7.4f}  "
                f"{self.n_active[i]:6d}  {self.iterations[i]:5d}  {self.gaps[i]:9.2e}  "
                f"{self.times[i]:7.2f}{mark}"
            )
        lines.append(
            f"C = {self.C:.6g} ({self.stopped}; {self.n_fit} fitting and {self.n_held} "
            f"held-out rows, {self.time_s:.2f} s)"
        )
        return "\n".join(lines)


#: Fewest held-out rows (weighted count) for which ``C="auto"`` chooses C on held-out data
#: (:func:`path_decides`): 2,500 training rows at the default 20 %.
AUTO_MIN_HELD = 500


def path_decides(problem: Any, settings: PathSettings | None = None) -> bool:
    """Whether ``C="auto"`` chooses C on held-out rows of ``problem`` (else the ``"scale"`` rule).

    The held-out part must have at least :data:`AUTO_MIN_HELD` rows (by their
    effective number under sample weights) and the kernels must be in memory
    (Gram matrices or factors).  Below, a held-out score cannot tell
    neighbouring values of C apart and the rule is as good: on the bundled
    UCI sets (135 to 537 training rows) the path's choice was 0.3 points
    *less* accurate on average than the rule's (``docs/api.md``), at 1 to 6
    times the time of a whole ``SVC`` grid search.
    """
    s = settings or PathSettings()
    if problem.representation not in ("array", "factor"):
        return False
    w = problem.sample_weight
    n = float(problem.n_samples) if w is None else effective_size(np.asarray(w, dtype=np.float64))
    return s.held_out * n >= AUTO_MIN_HELD


def path_engine(engine: Any, settings: PathSettings | None = None) -> Any:
    """The engine of the path's solves: ``engine`` with its ``tol`` times ``settings.tol_ratio``
    (an engine without a ``tol`` parameter as it is)."""
    s = settings or PathSettings()
    params = engine.get_params() if hasattr(engine, "get_params") else {}
    if s.tol_ratio == 1.0 or not isinstance(params.get("tol"), (int, float)):
        return engine
    return type(engine)(**{**params, "tol": float(params["tol"]) * s.tol_ratio})


def _drop_kept(kept: list[KeptSolution], best: int) -> None:
    """Free the kept solutions beyond :data:`KEEP_BYTES`, the largest C first, never ``best``."""
    while sum(k.nbytes for k in kept if k.result is not None) > KEEP_BYTES:
        drop = next((i for i, k in enumerate(kept) if k.result is not None and k.nbytes and i != best), None)
        if drop is None:
            return
        kept[drop].result = None


def _c_max(problem: Any) -> float:
    """:math:`C_{max}` of ``problem`` (every kernel off below it; not finite for some regularizers)."""
    from ..engines.common import zero_solution

    return float(zero_solution(problem_at(problem, C=1.0)).C_max)


def _unscored(
    s: PathSettings, prior_C: float, fit: np.ndarray, held: np.ndarray, t_start: float, why: str
) -> HeldoutPath:
    """The prior C, with no value scored (``why``: too few held-out rows)."""
    e = np.empty(0)
    return HeldoutPath(
        C=prior_C,
        Cs=e,
        ratios=e,
        losses=e,
        metrics=e,
        n_active=np.empty(0, dtype=int),
        iterations=np.empty(0, dtype=int),
        gaps=e,
        times=e,
        chosen=-1,
        best=-1,
        excess=e,
        excess_se=e,
        prior_C=prior_C,
        prior_ratio=math.nan,
        reference="prior",
        stopped=why,
        n_fit=int(fit.size),
        n_held=int(held.size),
        time_s=time.perf_counter() - t_start,
        settings=s,
    )


def _path_on(part: Any, prior: Callable[[Any], float], s: PathSettings) -> tuple[str, float, float, np.ndarray]:
    """The path on the fitting rows: its reference (``"C_max"`` or ``"prior"``), the reference's C, the
    prior C and the ratios to the reference, largest first."""
    c_max_fit = _c_max(part)
    n = math.floor(-math.log10(s.min_ratio) * s.per_decade + 1e-9)  # values per path below the reference
    prior_fit = float(prior(part))
    if math.isfinite(c_max_fit) and c_max_fit > 0.0:
        reference, ref_fit = "C_max", c_max_fit
        ratios = 10.0 ** (-np.arange(1, n + 1) / s.per_decade)
    else:  # no threshold: a path through the prior, from 100 x down to min_ratio x
        reference, ref_fit = "prior", prior_fit
        ratios = 10.0 ** (np.arange(2 * s.per_decade, -n - 1, -1) / s.per_decade)
    return reference, ref_fit, prior_fit, ratios


@dataclass
class _Walk:
    """The values of the path solved so far, with their held-out scores and the index of the least."""

    criterion: str
    w_held: np.ndarray
    Cs: list[float] = field(default_factory=list)
    per_rows: list[np.ndarray] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    metrics: list[float] = field(default_factory=list)
    n_act: list[int] = field(default_factory=list)
    iters: list[int] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    #: the solutions on the fitting rows, to start the fit on all rows from
    kept: list[KeptSolution] = field(default_factory=list)
    stopped: str = "the end of the path"
    best: int = -1  # the least criterion
    material: int = -1  # the last minimum that lowered it materially

    def record(self, C: float, result: Any, scored: tuple[np.ndarray, np.ndarray, float], t0: float) -> None:
        """One solve at ``C``: its held-out loss, criterion and metric (``scored``: :func:`held_out_scores`), its
        statistics and its time since ``t0``."""
        per_row, wrong, metric = scored
        w_held = self.w_held
        self.Cs.append(C)
        self.losses.append(float(per_row @ w_held) / float(w_held.sum()))
        self.per_rows.append(wrong if self.criterion == "error" else per_row)
        self.scores.append(float(self.per_rows[-1] @ w_held) / float(w_held.sum()))
        self.metrics.append(metric)
        self.n_act.append(int(np.asarray(result.active_set).size))
        self.iters.append(int(result.iterations))
        self.gaps.append(float(result.gap))
        self.times.append(time.perf_counter() - t0)

    def lowest(self, flat: float) -> None:
        """The least criterion, and the last minimum that lowered it by more than ``flat`` of its decrease."""
        scores = self.scores
        if self.best < 0 or scores[-1] < scores[self.best]:
            self.best = len(scores) - 1
        if self.material < 0 or scores[self.material] - scores[-1] > flat * (scores[0] - scores[self.material]):
            self.material = len(scores) - 1

    def turned(self, C: float, prior_fit: float, s: PathSettings) -> bool:
        """Whether the path ends after the value at ``C`` (``stopped`` then says why): past the prior, the
        criterion rose past its minimum by more than the paired standard error, or flattened."""
        best, last, criterion = self.best, len(self.scores) - 1, self.criterion
        if C < prior_fit and best < last:
            rise, rise_se = paired_excess(np.array([self.per_rows[-1], self.per_rows[best]]), 1, self.w_held)
            if rise[0] > rise_se[0]:
                self.stopped = (
                    f"the held-out {criterion} turned (it rose past its minimum by more than its paired standard error)"
                )
                return True
        if C < prior_fit and last - self.material >= s.patience:
            self.stopped = (
                f"the held-out {criterion} turned ({s.patience} values past its minimum)"
                if self.material == best
                else f"the held-out {criterion} flattened ({s.patience} values without lowering it "
                f"by more than {s.flat:g} of its decrease so far)"
            )
            return True
        return False

    def start(self, chosen: int, fit: np.ndarray, n: int) -> Any:
        """The kept solution of the value ``chosen`` (or the nearest kept one) on all ``n`` rows, or ``None``."""
        kept = self.kept
        held_on = [i for i, k in enumerate(kept) if k.result is not None]  # the chosen one, or the nearest
        return kept[min(held_on, key=lambda i: (abs(i - chosen), -i))].on_rows(fit, n) if held_on else None


def _walk(
    rows: HeldoutRows,
    solve: Callable[[Any, Any], Any],
    ratios: np.ndarray,
    ref_fit: float,
    prior_fit: float,
    y_held: np.ndarray,
    w_held: np.ndarray,
    s: PathSettings,
    progress: Callable[[dict[str, Any]], Any] | None,
) -> _Walk:
    """Solve the fitting rows' problem down the path, each solve warm-started from the last and scored on
    the held-out rows, until the criterion turns or flattens past the prior."""
    part = rows.problem
    walk = _Walk(criterion_of(part.loss), w_held)
    previous = None
    for r in ratios:
        C = float(r * ref_fit)
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # the path's solves are judged on held-out rows; the fit's own solve warns
            warnings.simplefilter("ignore")
            result = solve(problem_at(part, C=C), previous)
        previous = result
        walk.kept.append(KeptSolution(result, rows.factor_bank))
        walk.record(C, result, held_out_scores(part.loss, y_held, rows.decision(result), w_held), t0)
        if progress is not None:
            progress(
                {
                    "C": C,
                    "ratio": float(r),
                    "loss": walk.losses[-1],
                    "metric": walk.metrics[-1],
                    "n_active": walk.n_act[-1],
                }
            )
        walk.lowest(s.flat)
        _drop_kept(walk.kept, walk.best)
        if walk.turned(C, prior_fit, s):
            break
    return walk


def _closest_to_prior(excess: np.ndarray, excess_se: np.ndarray, ratios: np.ndarray, prior_ratio: float) -> int:
    """Within one standard error of the least held-out criterion: the value closest to the prior (log scale)."""
    ok = np.flatnonzero(excess <= excess_se)
    return int(ok[np.argmin(np.abs(np.log(ratios[ok] / prior_ratio)))])


def select_C(
    problem: Any,
    solve: Callable[[Any, Any], Any],
    prior: Callable[[Any], float],
    settings: PathSettings | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> HeldoutPath:
    """Choose C for ``problem`` (all training rows) on held-out rows (module docstring).

    Parameters
    ----------
    problem : Problem
        On all training rows, Gram matrices or factors; its C is not used.
    solve : callable
        ``solve(problem, warm_start)`` -> SolveResult (``warm_start``: the
        previous result or ``None``).
    prior : callable
        ``prior(problem)`` -> the prior C of a problem (``C="scale"``'s rule).
    settings : PathSettings, optional
    progress : callable, optional
        Called with ``{"C", "ratio", "loss", "metric", "n_active"}`` after each solve.
    """
    s = settings or PathSettings()
    t_start = time.perf_counter()
    task = problem.loss.task
    prior_all = float(prior(problem))
    y_all = np.asarray(problem.y, dtype=np.float64)
    w_all = problem.sample_weight
    fit, held = split_rows(y_all, s.held_out, s.seed, stratify=task == CLASSIFICATION)
    w_held = np.ones(held.size) if w_all is None else np.asarray(w_all)[held]
    if effective_size(w_held) < s.min_held:
        return _unscored(
            s, prior_all, fit, held, t_start, f"the prior C: {held.size} held-out rows are fewer than {s.min_held}"
        )
    rows = HeldoutRows(problem, fit, held)
    reference, ref_fit, prior_fit, ratios = _path_on(rows.problem, prior, s)
    walk = _walk(rows, solve, ratios, ref_fit, prior_fit, y_all[held], w_held, s, progress)
    best = walk.best
    excess, excess_se = paired_excess(np.array(walk.per_rows), best, w_held)
    ratio_arr = np.array(walk.Cs) / ref_fit
    prior_ratio = prior_fit / ref_fit
    chosen = _closest_to_prior(excess, excess_se, ratio_arr, prior_ratio)
    ref_all = _c_max(problem) if reference == "C_max" else prior_all
    return HeldoutPath(
        start=walk.start(chosen, fit, problem.n_samples),
        C=float(ratio_arr[chosen] * ref_all),
        Cs=np.array(walk.Cs),
        ratios=ratio_arr,
        losses=np.array(walk.losses),
        metrics=np.array(walk.metrics),
        n_active=np.array(walk.n_act),
        iterations=np.array(walk.iters),
        gaps=np.array(walk.gaps),
        times=np.array(walk.times),
        chosen=chosen,
        best=best,
        excess=excess,
        excess_se=excess_se,
        prior_C=prior_all,
        prior_ratio=prior_ratio,
        reference=reference,
        stopped=walk.stopped,
        n_fit=int(fit.size),
        n_held=int(held.size),
        time_s=time.perf_counter() - t_start,
        settings=s,
        criterion=walk.criterion,
        chosen_rows=walk.per_rows[chosen],
        held_weights=w_held,
    )
