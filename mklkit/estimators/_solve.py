"""Solving the prepared tasks: each C warm-started from the last, ``C="path"`` and ``C="scale"``, refined factors."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import sys
from typing import Any, Iterator, Sequence

from ..pipeline import PipelineError, problem_at
from ..components.params import ParamError
from ..pipeline.heldout import HeldoutChoice, held_out_C, path_decides, uses_path
from ..pipeline.joint import JOINT_MAX_ITER, class_codes, fit_joint, joint_base, joint_loss
from ..pipeline.kernel_subset import all_features_subset, restrict_result, subset_problem, widen_result
from ..pipeline.refine import refine_prepared
from ..pipeline.weighting import second_stage_C, weight_problem
from ..pipeline.bank_settings import kernel_resolver
from ..pipeline.problem_settings import AUTO_C_SCALE, auto_C
from ._checks import check_budget, multiclass_mode, spec_name
from ._prepare import FitState

logger = logging.getLogger("mklkit.estimators")


@contextlib.contextmanager
def verbosity(verbose: int) -> Iterator[None]:
    """mklkit's log records at INFO (``verbose=1``) or DEBUG (``>=2``) while the block runs: to the application's
    handlers where it configured logging, else to stderr."""
    if not verbose:
        yield
        return
    lg = logging.getLogger("mklkit")
    old_level = lg.level
    handler = None
    if not lg.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        lg.addHandler(handler)
    lg.setLevel(logging.INFO if int(verbose) <= 1 else logging.DEBUG)
    try:
        yield
    finally:
        lg.setLevel(old_level)
        if handler is not None:
            lg.removeHandler(handler)


def _log_iteration(where: str, rec: dict[str, Any]) -> bool:
    """The engines' callback with ``verbose``: one log record per outer iteration."""
    logger.info(
        "%s it=%d objective=%.6g gap=%.3e active=%d",
        where,
        rec.get("iteration", -1),
        rec.get("objective", math.nan),
        rec.get("gap", math.nan),
        rec.get("n_active", -1),
    )
    return False


class Solving:
    """The solves of a fit or a path (a base of :class:`~mklkit.estimators._base.BaseMKL`)."""

    def _run_task(self, prep: FitState, t: int, Cs: Sequence[float], warm: Any = None) -> list[Any]:
        """Solve task ``t`` for every C in ``Cs`` in turn, each warm-started from the previous (the first from
        ``warm``, a result of the task on the same rows)."""
        from ..engines.base import solve_from

        task = prep.tasks[t]
        base = prep.prepared.subproblem(task.y, task.rows)  # the task's rows of the shared bank, once
        weighted = stage = None
        if prep.weighting is not None:  # a two-stage method: the uniform problem on the weighted bank
            weighted = self._stage(prep.weighting, None, None, base)
            stage = functools.partial(self._stage, prep.weighting, base, weighted)
            unweighted, base, warm = base, weighted.problem, weighted.start(warm)
        where = f"{self._owner}: problem {t + 1}/{len(prep.tasks)}"
        if prep.classes is not None and len(prep.tasks) > 1:
            where += f" ({task.describe(prep.classes)})"
        results: list[Any] = []
        keep = prep.subset.get(t)  # the kernels the held-out rows kept (pipeline.kernel_subset)
        work = base if keep is None else subset_problem(base, keep)
        previous = warm if keep is None else restrict_result(warm, keep)
        for C in Cs:
            if weighted is not None:
                C = second_stage_C(C)
            if uses_path(C, base):  # "path", or "auto" where there are enough rows to hold some out
                # a two-stage method's path learns the weights of its fitting rows (stage)
                choice = self._path_C(prep, t, base if stage is None else unweighted, where, stage)
                C, work, keep, previous = choice.path.C, choice.problem, choice.keep, choice.start
            elif isinstance(C, str):  # "scale", or "auto" on fewer rows
                C = self._auto_C(base)
                scale = AUTO_C_SCALE.get(self._task, 1.0)
                logger.info(f"{where}: C='{self.C}' is {C:.6g} (the root mean diagonal of the kernels, x {scale:g})")
            problem = problem_at(work, C=C)
            self._check_support(prep.engine, problem)
            callback = functools.partial(_log_iteration, f"{where} C={C:g}") if self.verbose else None
            result = solve_from(prep.engine, problem, callback, previous)
            prep.task_C[t] = float(C)  # the last C of the task (C="auto" resolves per task)
            logger.info(f"{where} C={C:g}: {result.message or result.status}")
            whole = result if keep is None else widen_result(result, keep, base.n_kernels)
            results.append(whole if weighted is None else weighted.result(whole))
            previous = result
        return results

    def _run_all(
        self, prep: FitState, Cs: Sequence[float] | None = None, warm: Sequence[Any] | None = None
    ) -> list[list[Any]]:
        """``out[t][c]``: the result of task t at ``Cs[c]`` (``None``: each task's own last C, warm-started from
        ``warm[t]``); tasks in parallel threads (``n_jobs``)."""
        if self._joint(prep):
            return self._run_joint(prep, Cs)
        n_jobs = getattr(self, "n_jobs", None)

        def args(t: int) -> tuple[Any, ...]:
            return (prep, t, [prep.task_C[t]] if Cs is None else Cs, None if warm is None else warm[t])

        if len(prep.tasks) > 1 and n_jobs not in (None, 1):
            from joblib import Parallel, delayed

            tasks = (delayed(self._run_task)(*args(t)) for t in range(len(prep.tasks)))
            return list(Parallel(n_jobs=n_jobs, prefer="threads")(tasks))
        return [self._run_task(*args(t)) for t in range(len(prep.tasks))]

    def _joint(self, prep: FitState) -> bool:
        """Whether the fit is one joint multiclass problem (``multiclass="joint"`` and more than two classes)."""
        return multiclass_mode(self) == "joint" and prep.classes is not None and len(prep.classes) > 2

    def _run_joint(self, prep: FitState, Cs: Sequence[Any] | None) -> list[list[Any]]:
        """The joint multiclass problem (:mod:`mklkit.engines.joint`) at every C in turn, each warm-started from the
        last; ``out[k][c]``: class k's column of the solution at ``Cs[c]``
        (:meth:`~mklkit.engines.joint.JointResult.class_result`)."""
        owner = self._owner
        if spec_name(self.engine) != "auto":
            raise ParamError(
                "engine",
                spec_name(self.engine) or self.engine,
                "'auto' with multiclass='joint' on more than two classes (one problem for all classes, solved by "
                "the joint engine)",
                owner=owner,
            )
        if prep.weighting is not None:
            raise ParamError(
                "weighting",
                prep.weighting.name,
                "None with multiclass='joint' (a weighting learns the weights of each binary problem: use "
                "multiclass='ovr' or 'ovo')",
                owner=owner,
            )
        loss = joint_loss(self.loss, owner)
        opts = dict(self.engine_params or {})
        tol = self.tol if self.tol is not None else opts.get("tol")  # None: fit_joint's default (joint_tol)
        max_iter = int(self.max_iter if self.max_iter is not None else opts.get("max_iter", JOINT_MAX_ITER))
        base, how = joint_base(prep.prepared.subproblem(prep.tasks[0].y))
        codes, n = class_codes(prep.tasks), len(prep.classes)
        where = f"{owner}: joint problem of {n} classes"
        if how:
            logger.info(f"{where}: {how}")
        prep.joint_loss = loss

        def progress(rec: dict[str, Any]) -> None:
            logger.info(
                f"{where}: C={rec['C']:.4g} held-out log-loss {rec['loss']:.5f}, accuracy {rec['metric']:.4f}, "
                f"{rec['n_active']:d} active kernels"
            )

        results: list[Any] = []
        previous = None
        for C in [prep.task_C.get(0, self.C)] if Cs is None else Cs:
            given = C
            callback = None
            if self.verbose:  # C='path'/'scale' named as given: the fit's C is logged below
                callback = functools.partial(_log_iteration, f"{where} C={C if isinstance(C, str) else format(C, 'g')}")
            result, path, C = fit_joint(
                base,
                codes,
                n,
                loss,
                C,
                self._auto_C,
                tol=tol,
                max_iter=max_iter,
                warm_start=previous,
                callback=callback,
                progress=progress,
            )
            if path is not None:
                logger.info(f"{where}: C='path' chose {path.C:.6g} in {path.time_s:.2f} s\n{path.summary()}")
                prep.selection[0] = path
            elif isinstance(given, str):
                logger.info(f"{where}: C='{self.C}' is {C:.6g} (the root mean diagonal of the kernels)")
            logger.info(f"{where} C={C:g}: {result.message}")
            for t in range(len(prep.tasks)):
                prep.task_C[t] = float(C)
            results.append(result)
            previous = result
        return [[r.class_result(k) for r in results] for k in range(len(prep.tasks))]

    def _refine(self, prep: FitState, results: list[Any]) -> list[Any]:
        """Factors that follow the solution (:mod:`mklkit.pipeline.refine`) when the bank's factor settings ask for
        it (``{"refine": ...}``; by default with ``C="path"``); not with a weighting, whose weights were learnt on
        the factors, nor for a joint multiclass fit."""
        if prep.weighting is not None or self._joint(prep):
            return results

        def resolve(prepared: Any, warm: list[Any]) -> list[Any]:
            prep.prepared = prepared
            return [r[0] for r in self._run_all(prep, None, warm)]

        def progress(rec: dict[str, Any]) -> None:
            logger.info(
                f"{self._owner}: factors refined for {len(rec['kernels'])} kernels (rank {rec['ranks_before']} -> "
                f"{rec['ranks_after']}): total rank {rec['total_rank']}, {rec['time_s']:.2f} s"
            )

        budget = check_budget(self.memory_budget, self._owner)
        prepared, results, info = refine_prepared(prep.prepared, results, resolve, budget, self.C, progress=progress)
        if info is not None:
            prep.prepared, prep.bank = prepared, prepared.bank
            prep.approximation = prepared.bank.approximation()
            prep.refinement = info
        return results

    def _compiling(self) -> Any:
        """The once-per-process note that numba compiles (:func:`mklkit.compilation.announce_compilation`)."""
        from ..compilation import announce_compilation, components

        what = components(spec_name(self.loss), spec_name(self.regularizer), spec_name(self.engine))
        return announce_compilation(what, warn=True)

    def _stage(self, weighting: Any, whole: Any, weighted: Any, problem: Any) -> Any:
        """The second stage of ``weighting`` on ``problem`` (:func:`~mklkit.pipeline.weighting.weight_problem`):
        ``weighted`` when ``problem`` is the task's problem ``whole``, whose stage it is."""
        if problem is whole and weighted is not None:
            return weighted
        try:
            return weight_problem(problem, weighting, key="weighting")
        except PipelineError as exc:
            raise self._error(exc) from None

    def _path_C(self, prep: FitState, t: int, problem: Any, where: str, stage: Any = None) -> HeldoutChoice:
        """``C="path"``: C chosen on held-out rows of the task's problem (:func:`mklkit.pipeline.heldout.held_out_C`);
        with the default bank (``kernels="auto"``, a single problem) also of its kernels on all features alone
        (:func:`mklkit.pipeline.kernel_subset.all_features_subset`), kept unless the whole bank does better.
        ``stage``: a two-stage method's second stage (``problem`` is then the weighting's)."""
        from ..kernels import expand_bank

        def progress(rec: dict[str, Any]) -> None:
            logger.info(
                f"{where}: C={rec['C']:.4g} ({rec['ratio']:.3g} of the reference) held-out loss {rec['loss']:.5f}, "
                f"metric {rec['metric']:.4f}, {rec['n_active']:d} active kernels"
            )

        def report(sel: Any, info: dict[str, Any] | None) -> None:
            if info is None:
                logger.info(f"{where}: C='path' chose {sel.C:.6g} in {sel.time_s:.2f} s\n{sel.summary()}")
                return
            logger.info(
                f"{where}: the {len(info['kernels'])} kernels on all features alone: held-out {info['criterion']} "
                f"{info['difference']:+.5f} +- {info['difference_se']:.5f} against the whole bank of "
                f"{problem.n_kernels} -> {info['kept']} (path {sel.time_s:.2f} s)\n{sel.summary()}"
            )

        self._check_support(prep.engine, problem if stage is None else stage(problem).problem)  # the path's kind
        keep = None
        default_bank = isinstance(self.kernels, str) and self.kernels == "auto"
        # a weighting chooses its kernels; cross-validation on fewer rows compares the whole bank alone
        if default_bank and len(prep.tasks) == 1 and prep.weighting is None and path_decides(problem):
            specs = expand_bank(prep.kernels, prep.n_features_in, resolve=kernel_resolver())
            keep = all_features_subset(problem, specs, prep.n_features_in)
        try:
            choice = held_out_C(problem, prep.engine, self._auto_C, progress, keep, report, stage)
        except ValueError as exc:
            raise ValueError(f"{self._owner}: {exc}") from None
        prep.selection[t] = choice.path
        if choice.keep is not None:
            prep.subset[t] = choice.keep
        if choice.bank_choice is not None:
            prep.bank_choice[t] = choice.bank_choice
        return choice

    def _auto_C(self, problem: Any) -> float:
        """``C="scale"`` on a task's training kernels (:func:`mklkit.pipeline.problem_settings.auto_C`)."""
        try:
            return auto_C(problem, key="C")
        except PipelineError as exc:
            raise self._error(exc) from None
