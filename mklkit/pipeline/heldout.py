r"""``C="path"`` and ``C="auto"``: C chosen on held-out rows along a warm-started regularization path.

The problem on a stratified part of the training rows is solved for C from :math:`C_{max}` down,
each solve warm-started from the last, and the held-out rows are scored through the same bank
(:func:`~mklkit.pipeline.heldout_rows.criterion_of`: the problem's own loss, or the error rate for
a non-smooth classification loss).  The path ends once the criterion has turned or flattened past
the prior C (``C="scale"``, :func:`~mklkit.pipeline.problem_settings.auto_C`).  Of the values within
one paired standard error of the least, the one nearest the prior (log scale) is chosen and carried
to all rows as :math:`C = (C_i / C^{fit}_{max})\,C^{all}_{max}` (or the prior's ratio without a
finite :math:`C_{max}`).  With fewer rows than a held-out part of :data:`AUTO_MIN_HELD` needs, every row is
held out once instead (:class:`PathSettings` ``folds``-fold cross-validation over the prior and the values below
it, :func:`select_C_folds`).  Rationale and measurements: ``docs/api.md`` ("C chosen on held-out data").
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from pydantic import Field
from pydantic.dataclasses import dataclass as checked_dataclass

from ..components.base import CLASSIFICATION
from .assemble import problem_at
from .heldout_rows import KEEP_BYTES, HeldoutRows, KeptSolution, criterion_of, effective_size, held_out_scores
from .heldout_rows import fold_rows, paired_excess, split_rows
from .kernel_subset import prefer_subset, subset_problem


@checked_dataclass(frozen=True)
class PathSettings:
    """How ``C="path"`` searches (``docs/api.md``).

    Attributes
    ----------
    held_out : float
        Fraction of the rows held out (stratified by class).
    per_decade : int
        Values of C per decade (2: the choice of 4 in 22 s instead of 35 s on w8a).
    min_ratio : float
        The path ends at ``min_ratio * C_max`` (or times the prior) at the latest.
    patience : int
        Values past the last material minimum (and past the prior) that end the path.
    flat : float
        A new minimum is material when it lowers the criterion by more than this fraction of its
        decrease so far (0.01: on a9a three values and 5.6 s less at the same choice).
    tol_ratio : float
        The path's solves stop at this multiple of the fit's ``tol`` (:func:`path_engine`; 3: the
        default fit in 9.5-10.4 s instead of 15.7 s on ringnorm, 12.0 s instead of 15.0 s on a9a,
        the same choices).
    seed : int
        Seed of the held-out split.
    min_held : int
        Fewest held-out rows (weighted count) worth scoring; below, the prior C.
    folds : int
        Below :data:`AUTO_MIN_HELD` held-out rows: the folds of the cross-validation of :func:`select_C_folds`
        (1: one held-out part at any number of rows).
    fold_values : int
        The values of C it compares: the prior and ``fold_values - 1`` below it, ``per_decade`` apart.
    """

    held_out: float = Field(0.2, gt=0.0, lt=1.0)
    per_decade: int = Field(2, ge=1)
    min_ratio: float = Field(1e-7, gt=0.0, lt=1.0)
    patience: int = Field(3, ge=1)
    flat: float = Field(0.01, ge=0.0, lt=1.0)
    tol_ratio: float = Field(3.0, ge=1.0)
    seed: int = 0
    min_held: int = 20
    folds: int = Field(3, ge=1)
    fold_values: int = Field(3, ge=1)


#: Fields of :class:`HeldoutPath` left out of :meth:`HeldoutPath.as_dict`.
_NOT_SAVED = ("prior_ratio", "settings", "start", "chosen_rows", "held_weights")


@dataclass
class HeldoutPath:
    """The path ``C="path"`` solved and what it chose (an estimator's ``C_selection_``).

    Attributes
    ----------
    C : float
        The C of the fit on all rows.
    Cs, ratios : ndarray
        The values of C solved on the fitting rows, largest first, and over the reference.
    losses, metrics : ndarray
        Per value: mean held-out loss, and accuracy (classification) or :math:`R^2`.
    criterion : str
        What chooses C: ``"loss"`` or ``"error"`` (one minus ``metrics``).
    n_active, iterations, gaps, times : ndarray
        Per value: active kernels, iterations, relative gap, seconds.
    converged : ndarray of bool
        Per value: whether its solve converged (the path stops at the first that did not; it is no candidate).
    chosen, best : int
        Index of the chosen value (-1 when none was scored) and of the least criterion.
    excess, excess_se : ndarray
        Per value: the mean held-out criterion above the least and its paired standard error.
    prior_C, prior_ratio : float
        The prior on all rows, and the fitting rows' prior over their reference.
    reference : str
        ``"C_max"`` or ``"prior"``: what the ratios are relative to.
    stopped : str
        Why the path ended.
    n_fit, n_held : int
        Rows of each part (with ``folds``: the mean fitting rows of a fold, and all rows).
    folds : int
        1 for one held-out part; else the folds of the cross-validation (every row held out once).
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
    converged: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    folds: int = 1
    settings: PathSettings = field(default_factory=PathSettings)
    #: the chosen solution (or the nearest kept one) as a start on all rows; ``None`` once used
    start: Any = field(default=None, repr=False, compare=False)
    #: the criterion per held-out row at the chosen value and the rows' weights
    #: (:func:`mklkit.pipeline.kernel_subset.prefer_subset`); ``None`` once compared
    chosen_rows: Any = field(default=None, repr=False, compare=False)
    held_weights: Any = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers and lists (``summary.json``'s ``C_selection``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name not in _NOT_SAVED:
                v = getattr(self, f.name)
                out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
        return out

    def summary(self) -> str:
        """One line per C (ratio, held-out loss and metric, active kernels, iterations, gap), the choice marked."""
        head = (
            f"{'C':>10}  {'C/ref':>9}  {'loss':>8}  {'excess':>17}  {'metric':>7}  {'active':>6}  "
            f"{'iter':>5}  {'gap':>9}  {'time_s':>7}"
        )
        lines = [head]
        converged = getattr(self, "converged", np.zeros(0, dtype=bool))  # a path pickled before it was kept
        for i in range(self.Cs.size):
            mark = "  <- chosen" if i == self.chosen else (f"  (least {self.criterion})" if i == self.best else "")
            if i < converged.size and not converged[i]:
                mark += "  (not converged)"
            lines.append(
                f"{self.Cs[i]:10.4g}  {self.ratios[i]:9.3g}  {self.losses[i]:8.5f}  "
                f"{self.excess[i]:8.5f}+-{self.excess_se[i]:7.5f}  {self.metrics[i]:7.4f}  "
                f"{self.n_active[i]:6d}  {self.iterations[i]:5d}  {self.gaps[i]:9.2e}  "
                f"{self.times[i]:7.2f}{mark}"
            )
        rows = (
            f"{self.n_fit} fitting and {self.n_held} held-out rows"
            if getattr(self, "folds", 1) == 1  # a path pickled before folds existed
            else f"{self.folds} folds of {self.n_held} rows, about {self.n_fit} fitting rows each"
        )
        lines.append(f"C = {self.C:.6g} ({self.stopped}; {rows}, {self.time_s:.2f} s)")
        return "\n".join(lines)


#: Fewest held-out rows (weighted count) for which ``C="auto"`` chooses C on held-out data
#: (:func:`path_decides`): 2,500 training rows at the default 20 % (``docs/api.md``).
AUTO_MIN_HELD = 500


def in_memory(problem: Any) -> bool:
    """Whether the kernels of ``problem`` are in memory (Gram matrices or factors), as a held-out path needs."""
    return problem.representation in ("array", "factor")


def path_decides(problem: Any, settings: PathSettings | None = None) -> bool:
    """Whether C is chosen on one held-out part of ``problem``'s rows (else by cross-validation,
    :func:`select_C_folds`): at least :data:`AUTO_MIN_HELD` held-out rows (effective number) and the kernels in
    memory."""
    s = settings or PathSettings()
    if not in_memory(problem):
        return False
    if s.folds == 1:
        return True
    w = problem.sample_weight
    n = float(problem.n_samples) if w is None else effective_size(np.asarray(w, dtype=np.float64))
    return s.held_out * n >= AUTO_MIN_HELD


def uses_path(C: Any, problem: Any) -> bool:
    """Whether ``C`` is chosen on held-out rows of ``problem``: ``"path"``; or ``"auto"`` with the kernels in
    memory, on one held-out part where :func:`path_decides`, else by cross-validation for a classification loss
    (a regression loss keeps the ``"scale"`` rule there: on diabetes the values below it lost :math:`R^2`,
    ``docs/api.md``)."""
    if not isinstance(C, str) or C not in ("path", "auto"):
        return False
    return C == "path" or (in_memory(problem) and (path_decides(problem) or problem.loss.task == CLASSIFICATION))


def path_engine(engine: Any, settings: PathSettings | None = None) -> Any:
    """``engine`` with its ``tol`` times ``settings.tol_ratio`` (one without ``tol`` as it is)."""
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


def c_max(problem: Any) -> float:
    """``C_max`` of ``problem`` (:func:`mklkit.engines.common.zero_solution`)."""
    from ..engines.common import zero_solution

    return float(zero_solution(problem_at(problem, C=1.0)).C_max)


def _path_on(part: Any, prior: Callable[[Any], float], s: PathSettings) -> tuple[str, float, float, np.ndarray]:
    """The reference (``"C_max"`` or ``"prior"``), its C and the prior C on the fitting rows, and the
    ratios of the path to the reference, largest first."""
    c_max_fit = c_max(part)
    n = math.floor(-math.log10(s.min_ratio) * s.per_decade + 1e-9)  # values per path below the reference
    prior_fit = float(prior(part))
    if math.isfinite(c_max_fit) and c_max_fit > 0.0:
        reference, ref_fit = "C_max", c_max_fit
        ratios = 10.0 ** (-np.arange(1, n + 1) / s.per_decade)
    else:  # no threshold: a path through the prior, from 100 x down to min_ratio x
        reference, ref_fit = "prior", prior_fit
        ratios = 10.0 ** (np.arange(2 * s.per_decade, -n - 1, -1) / s.per_decade)
    return reference, ref_fit, prior_fit, ratios


#: What :class:`HeldoutPath` records per value of C.
_PER_VALUE = ("Cs", "losses", "metrics", "n_active", "iterations", "gaps", "times")

#: The keys of :func:`select_C`'s progress records after ``C`` and ``ratio``, and their columns of the records.
_PROGRESS = (("loss", "losses"), ("metric", "metrics"), ("n_active", "n_active"))


@dataclass
class _Walk:
    """The values of the path solved so far, their held-out scores and the least."""

    criterion: str
    w_held: np.ndarray
    values: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in _PER_VALUE})
    per_rows: list[np.ndarray] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    kept: list[KeptSolution] = field(default_factory=list)
    converged: list[bool] = field(default_factory=list)
    stopped: str = "the end of the path"
    best: int = -1  # the least criterion (of the solves that converged, unless none has)
    material: int = -1  # the last minimum that lowered it materially

    def record(self, C: float, result: Any, scored: tuple[np.ndarray, np.ndarray, float], t0: float) -> None:
        """One solve at ``C``: its held-out loss, criterion and metric (``scored``: :func:`held_out_scores`), its
        statistics and its time since ``t0``."""
        per_row, wrong, metric = scored
        w_held = self.w_held
        self.per_rows.append(wrong if self.criterion == "error" else per_row)
        self.scores.append(float(self.per_rows[-1] @ w_held) / float(w_held.sum()))
        loss = float(per_row @ w_held) / float(w_held.sum())
        self.converged.append(bool(result.converged))
        n_active = int(np.asarray(result.active_set).size)
        row = (C, loss, metric, n_active, int(result.iterations), float(result.gap), time.perf_counter() - t0)
        for column, v in zip(self.values.values(), row):
            column.append(v)

    def progress_record(self, C: float, ratio: float) -> dict[str, Any]:
        """The progress record of the last value: ``{"C", "ratio", "loss", "metric", "n_active"}``."""
        return {"C": C, "ratio": float(ratio), **{key: self.values[column][-1] for key, column in _PROGRESS}}

    def arrays(self) -> dict[str, np.ndarray]:
        """The records per value as :class:`HeldoutPath`'s arrays."""
        out = {k: np.array(v, dtype=int if k in ("n_active", "iterations") else float) for k, v in self.values.items()}
        return {**out, "converged": np.array(self.converged, dtype=bool)}

    def choose(self, ref_fit: float, prior_fit: float, se: float = 1.0) -> dict[str, Any]:
        """The choice of C on the path: among the values within ``se`` paired standard errors of the least held-out
        criterion (``best``), the nearest the prior; as :class:`HeldoutPath`'s ``ratios`` (C over the reference of
        the fitting rows), ``chosen``, ``best``, ``excess``, ``excess_se`` and ``prior_ratio``."""
        excess, excess_se = paired_excess(np.array(self.per_rows), self.best, self.w_held)
        ratios = np.array(self.values["Cs"]) / ref_fit
        prior_ratio = prior_fit / ref_fit
        within = excess <= se * excess_se
        if any(self.converged):  # a solve that did not converge is no candidate
            within &= np.array(self.converged)
        ok = np.flatnonzero(within)
        chosen = int(ok[np.argmin(np.abs(np.log(ratios[ok] / prior_ratio)))])
        return dict(
            ratios=ratios, chosen=chosen, best=self.best, excess=excess, excess_se=excess_se, prior_ratio=prior_ratio
        )

    def lowest(self, flat: float) -> None:
        """The least criterion, and the last minimum that lowered it by more than ``flat`` of its decrease."""
        scores = self.scores
        if self.best >= 0 and not self.converged[-1]:  # its score is not the problem's at that C
            return
        if self.best < 0 or scores[-1] < scores[self.best]:
            self.best = len(scores) - 1
        if self.material < 0 or scores[self.material] - scores[-1] > flat * (scores[0] - scores[self.material]):
            self.material = len(scores) - 1

    def turned(self, C: float, prior_fit: float, s: PathSettings) -> bool:
        """Whether the path ends after the value at ``C`` (``stopped`` then says why): past the prior, the
        criterion rose past its minimum by more than the paired standard error, or flattened; or at once when the
        solve at ``C`` did not converge (the solves further down would be harder still)."""
        best, last, criterion = self.best, len(self.scores) - 1, self.criterion
        if not self.converged[-1]:
            self.stopped = (
                f"the solve at C = {C:.4g} did not converge (relative gap {self.values['gaps'][-1]:.2g}): the path stops "
                "there and chooses among the solves that did"
            )
            return True
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
    part: Any,
    to_bank: Callable[[Any], Any],
    solve: Callable[[Any, Any], Any],
    ratios: np.ndarray,
    ref_fit: float,
    prior_fit: float,
    y_held: np.ndarray,
    w_held: np.ndarray,
    s: PathSettings,
    progress: Callable[[dict[str, Any]], Any] | None,
) -> _Walk:
    """Solve ``part`` (the fitting rows' problem, or its second stage) down the path, each solve warm-started from
    the last and scored on the held-out rows through ``to_bank`` (its result as one of the fitting rows' bank),
    until the criterion turns or flattens past the prior."""
    walk = _Walk(criterion_of(part.loss), w_held)
    previous = None
    for r in ratios:
        C = float(r * ref_fit)
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # the path's solves are judged on held-out rows; the fit's own solve warns
            warnings.simplefilter("ignore")
            result = solve(problem_at(part, C=C), previous)
        previous = result
        result = to_bank(result)
        walk.kept.append(KeptSolution(result, rows.factor_bank))
        walk.record(C, result, held_out_scores(part.loss, y_held, rows.decision(result), w_held), t0)
        if progress is not None:
            progress(walk.progress_record(C, r))
        walk.lowest(s.flat)
        _drop_kept(walk.kept, walk.best)
        if walk.turned(C, prior_fit, s):
            break
    return walk


def prior_path(
    prior_C: float, w_held: np.ndarray, common: dict[str, Any], t_start: float, why: str | None = None
) -> HeldoutPath:
    """The path of too few held-out rows (``w_held``, their weights; ``why``, if not that they are fewer than
    ``min_held``): the prior C, with no value scored; ``common``: the path's ``prior_C``, ``n_fit``, ``n_held`` and
    ``settings``."""
    e = np.empty(0)
    why = why or f"{w_held.size} held-out rows are fewer than {common['settings'].min_held}"
    return HeldoutPath(
        C=prior_C,
        **_Walk("loss", w_held).arrays(),
        ratios=e,
        excess=e,
        excess_se=e,
        chosen=-1,
        best=-1,
        prior_ratio=math.nan,
        reference="prior",
        stopped=f"the prior C: {why}",
        time_s=time.perf_counter() - t_start,
        **common,
    )


def select_C(
    problem: Any,
    solve: Callable[[Any, Any], Any],
    prior: Callable[[Any], float],
    settings: PathSettings | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
    stage: Callable[[Any], Any] | None = None,
) -> HeldoutPath:
    """Choose C for ``problem`` (all training rows, Gram matrices or factors) on held-out rows.

    ``solve(problem, warm_start)`` gives a SolveResult, ``prior(problem)`` the prior C; ``progress`` is
    called with ``{"C", "ratio", "loss", "metric", "n_active"}`` after each solve.  With ``stage`` (a two-stage
    method: ``stage(problem)`` its :class:`~mklkit.pipeline.weighting.WeightedProblem`) the path solves the
    second stage of the fitting rows, its weights learnt on those rows alone, and C and the warm start are
    the second stage's on all rows (``stage(problem)``).
    """
    s = settings or PathSettings()
    if stage is None and not path_decides(problem, s):  # a second stage's prior is far off: its whole path
        return select_C_folds(problem, solve, prior, s, progress)
    t_start = time.perf_counter()
    task = problem.loss.task
    whole = None if stage is None else stage(problem)
    top = problem if whole is None else whole.problem
    prior_all = float(prior(top))
    y_all = np.asarray(problem.y, dtype=np.float64)
    w_all = problem.sample_weight
    fit, held = split_rows(y_all, s.held_out, s.seed, stratify=task == CLASSIFICATION)
    w_held = np.ones(held.size) if w_all is None else np.asarray(w_all)[held]
    common = dict(prior_C=prior_all, n_fit=int(fit.size), n_held=int(held.size), settings=s)
    if effective_size(w_held) < s.min_held:  # the prior C, with no value scored
        return prior_path(prior_all, w_held, common, t_start)
    rows = HeldoutRows(problem, fit, held)
    part, to_bank = rows.problem, _same
    if stage is not None:  # the weights of the fitting rows, the path on their second stage
        part_stage = stage(rows.problem)
        part, to_bank = part_stage.problem, part_stage.result
    reference, ref_fit, prior_fit, ratios = _path_on(part, prior, s)
    walk = _walk(rows, part, to_bank, solve, ratios, ref_fit, prior_fit, y_all[held], w_held, s, progress)
    choice = walk.choose(ref_fit, prior_fit)
    chosen = choice["chosen"]
    ref_all = c_max(top) if reference == "C_max" else prior_all
    start = walk.start(chosen, fit, problem.n_samples)
    return HeldoutPath(
        start=start if whole is None else whole.start(start),
        C=float(choice["ratios"][chosen] * ref_all),
        **walk.arrays(),
        **choice,
        reference=reference,
        stopped=walk.stopped,
        time_s=time.perf_counter() - t_start,
        criterion=walk.criterion,
        chosen_rows=walk.per_rows[chosen],
        held_weights=w_held,
        **common,
    )


def _same(result: Any) -> Any:
    return result


@dataclass
class _FoldsSolve:
    """The solves of one value of C on every fold, as :meth:`_Walk.record` reads a solve: converged on every
    fold, the kernels active on any fold, the iterations of all folds and the largest relative gap."""

    converged: bool
    active_set: np.ndarray
    iterations: int
    gap: float

    @classmethod
    def of(cls, results: list[Any]) -> "_FoldsSolve":
        active = [np.asarray(r.active_set, dtype=np.intp) for r in results]
        return cls(
            converged=all(bool(r.converged) for r in results),
            active_set=np.unique(np.concatenate(active)),
            iterations=sum(int(r.iterations) for r in results),
            gap=max(float(r.gap) for r in results),
        )


def select_C_folds(
    problem: Any,
    solve: Callable[[Any, Any], Any],
    prior: Callable[[Any], float],
    settings: PathSettings | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> HeldoutPath:
    """C for ``problem`` chosen by ``settings.folds``-fold cross-validation (stratified by class): the prior C and
    the ``fold_values - 1`` values below it, each fold's path solved from the prior down, warm-started from the
    last, and every row scored once, by the fold that held it out; the path ends early where the criterion rose
    past its minimum by more than its paired standard error, or a solve did not converge on some fold.  The least
    mean criterion chooses (ties: the nearest the prior): with every row held out once the scores do not need the
    one-standard-error rule of one held-out part (``docs/api.md``).  Each fold's C is its ratio to the fold's
    prior, carried to all rows as the same ratio to the prior on all rows.  Arguments as for :func:`select_C` (a
    two-stage method's second stage walks its whole path on one held-out part at any size: its prior is the
    elastic net's rule, far from its best C); the path's ``start`` is ``None`` (the folds' solutions are of other
    rows)."""
    s = settings or PathSettings()
    if s.folds < 2:
        raise ValueError(
            f"select_C_folds needs settings.folds >= 2 (every row held out once); got folds={s.folds}: with "
            "folds=1 (one held-out part) call select_C"
        )
    t_start = time.perf_counter()
    task = problem.loss.task
    prior_all = float(prior(problem))
    y_all = np.asarray(problem.y, dtype=np.float64)
    w_all = np.ones(y_all.size) if problem.sample_weight is None else np.asarray(problem.sample_weight, np.float64)
    stratify = task == CLASSIFICATION
    splits = fold_rows(y_all, s.folds, s.seed, stratify)
    n_fit = int(round(np.mean([fit.size for fit, _ in splits])))
    common = dict(prior_C=prior_all, n_fit=n_fit, n_held=int(y_all.size), settings=s, folds=s.folds)
    fewest = min(np.unique(y_all, return_counts=True)[1]) if stratify else y_all.size
    if effective_size(w_all) < s.min_held or fewest < s.folds:
        why = f"{fewest} rows of the smallest class are fewer than the {s.folds} folds" if fewest < s.folds else None
        return prior_path(prior_all, w_all, common, t_start, why)
    folds = []  # per fold: its rows and their prior
    for fit, held in splits:
        rows = HeldoutRows(problem, fit, held)
        folds.append((rows, float(prior(rows.problem))))
    ratios = 10.0 ** (-np.arange(s.fold_values) / s.per_decade)
    prior_fit = float(np.mean([f[1] for f in folds]))
    walk = _Walk(criterion_of(problem.loss), w_all)
    previous: list[Any] = [None] * len(folds)
    f_all = np.zeros(y_all.size)
    for r in ratios:
        t0 = time.perf_counter()
        for k, (rows, prior_k) in enumerate(folds):
            with warnings.catch_warnings():  # judged on held-out rows; the fit's own solve warns
                warnings.simplefilter("ignore")
                previous[k] = solve(problem_at(rows.problem, C=float(r * prior_k)), previous[k])
            f_all[rows.held] = rows.decision(previous[k])
        C = float(r * prior_fit)  # the folds' mean C, as the path records it
        walk.record(C, _FoldsSolve.of(previous), held_out_scores(problem.loss, y_all, f_all, w_all), t0)
        if progress is not None:
            progress(walk.progress_record(C, r))
        walk.lowest(s.flat)
        if walk.turned(C, prior_fit, s):  # risen past its minimum, or a solve did not converge
            break
    choice = walk.choose(prior_fit, prior_fit, se=0.0)
    chosen = choice["chosen"]
    return HeldoutPath(
        C=float(choice["ratios"][chosen] * prior_all),
        **walk.arrays(),
        **choice,
        reference="prior",
        stopped=walk.stopped,
        time_s=time.perf_counter() - t_start,
        criterion=walk.criterion,
        chosen_rows=walk.per_rows[chosen],
        held_weights=w_all,
        **common,
    )


@dataclass
class HeldoutChoice:
    """What :func:`held_out_C` chose: the path kept, the problem to fit at its C, the kernels it keeps (``None``:
    all), the warm start on all rows, and the comparison with a subset of the kernels (an estimator's
    ``bank_choice_``; ``None`` without one)."""

    path: HeldoutPath
    problem: Any
    keep: np.ndarray | None = None
    start: Any = None
    bank_choice: dict[str, Any] | None = None


def held_out_C(
    problem: Any,
    engine: Any,
    prior: Callable[[Any], float],
    progress: Callable[[dict[str, Any]], Any] | None = None,
    subset: np.ndarray | None = None,
    report: Callable[[HeldoutPath, dict[str, Any] | None], Any] | None = None,
    stage: Callable[[Any], Any] | None = None,
) -> HeldoutChoice:
    """C chosen on held-out rows of ``problem`` along a path solved by ``engine`` at :func:`path_engine`'s
    tolerance (``prior``, ``progress``: :func:`select_C`).  With ``subset`` (kernel indices) the path of those
    kernels alone too, kept unless the whole bank does better on the same rows
    (:func:`~mklkit.pipeline.kernel_subset.prefer_subset`).  ``report(path, bank_choice)`` is called after each
    path (``bank_choice``: ``None`` for the whole bank's).  ``stage``: a two-stage method (:func:`select_C`; no
    ``subset`` then), the choice's problem its second stage on all rows."""
    if stage is not None and subset is not None:
        raise ValueError("held_out_C: a two-stage method (stage) chooses its own kernels: give no subset")
    from ..engines.base import solve_from

    on_path = path_engine(engine)

    def walk(p: Any) -> HeldoutPath:
        return select_C(p, lambda q, warm: solve_from(on_path, q, None, warm), prior, progress=progress, stage=stage)

    whole = walk(problem)
    if report is not None:
        report(whole, None)
    choice = HeldoutChoice(whole, problem if stage is None else stage(problem).problem)
    if subset is not None:
        part = subset_problem(problem, subset)
        sub = walk(part)
        kept, diff, se = prefer_subset(whole, sub)
        sub.chosen_rows = sub.held_weights = None
        choice.bank_choice = {
            "kept": "kernels on all features" if kept else "whole bank",
            "kernels": [problem.kernel_names[m] for m in subset] if problem.kernel_names else subset.tolist(),
            "criterion": whole.criterion,
            "difference": diff,
            "difference_se": se,
            "whole_bank_C": whole.C,
            "subset_C": sub.C,
            "whole_bank_path_s": whole.time_s,
            "subset_path_s": sub.time_s,
        }
        if report is not None:
            report(sub, choice.bank_choice)
        if kept:
            choice = HeldoutChoice(sub, part, subset, bank_choice=choice.bank_choice)
    whole.chosen_rows = whole.held_weights = None
    choice.start, choice.path.start = choice.path.start, None
    return choice
