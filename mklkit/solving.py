"""Solving one prepared spec and evaluating it (:class:`RunResult`, :func:`solve_prepared`), for
:mod:`mklkit.api` and :mod:`mklkit.sweep` alike."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .io import to_jsonable, write_run
from .pipeline import Prepared
from .spec import Spec

if TYPE_CHECKING:  # pragma: no cover
    from .result import SolveResult


@dataclass
class RunResult:
    """One finished run: what ``mklkit run`` prints and writes (``summary.json``'s fields, ``docs/specs.md``).

    ``metrics``: ``train_accuracy``/``test_accuracy`` or ``train_rmse``/``test_rmse`` (test values
    ``None`` without a test part); ``timings``: seconds ``data_s``, ``bank_s``, ``solve_s``, ``total_s``.
    """

    spec: Spec
    result: SolveResult
    kernel_names: list[str]
    task: str
    dataset: str
    n_train: int
    n_test: int
    n_features: int
    metrics: dict[str, float | None]
    timings: dict[str, float] = field(default_factory=dict)
    created: str = ""
    factor: dict[str, Any] | None = None
    labels: dict[str, Any] | None = None
    C_selection: Any = None
    factor_refinement: Any = None

    @property
    def status(self) -> str:
        return str(self.result.status)

    @property
    def converged(self) -> bool:
        return bool(self.result.converged)

    @property
    def n_kernels(self) -> int:
        return len(self.kernel_names)

    @property
    def n_active(self) -> int:
        return int(self.result.active_set.size)

    def kernel_weights(self) -> list[dict[str, Any]]:
        """``[{"index", "name", "weight", "block_norm"}]`` for every kernel, in bank order."""
        r = self.result
        return [
            {"index": m, "name": name, "weight": float(w), "block_norm": float(b)}
            for m, (name, w, b) in enumerate(zip(self.kernel_names, r.kernel_weights, r.block_norms))
        ]

    def history(self) -> list[dict[str, Any]]:
        """The engine's per-iteration records (JSON-able)."""
        return to_jsonable(list(self.result.history))

    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json`` (see ``docs/specs.md``)."""
        import numba
        import scipy
        import sklearn

        from . import __version__

        r = self.result
        engine = self.spec.engine.engine
        top = sorted(self.kernel_weights(), key=lambda k: -k["weight"])
        return {
            "status": self.status,
            "converged": self.converged,
            "message": r.message,
            "objective": float(r.objective),
            "dual_objective": float(r.dual_objective),
            "duality_gap": float(r.gap),
            "tol": engine.get_params().get("tol"),
            "iterations": int(r.iterations),
            "time_s": float(self.timings.get("solve_s", r.time_s)),
            "timings": dict(self.timings),
            "n_kernels": self.n_kernels,
            "n_active_kernels": self.n_active,
            "bias": float(r.bias),
            "task": self.task,
            "dataset": self.dataset,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "n_features": self.n_features,
            **self.metrics,
            "engine": engine.name,
            "solved_by": r.solved_by or engine.name,
            "engine_params": engine.get_params(),
            "loss": self.spec.problem.loss.name,
            "regularizer": self.spec.problem.regularizer.name,
            "C": self.spec.problem.C,
            "C_selection": None if self.C_selection is None else self.C_selection.as_dict(),
            "factor_refinement": None if self.factor_refinement is None else self.factor_refinement.as_dict(),
            "C_max": r.C_max,
            "trivial": bool(r.trivial),
            **(self.labels or {}),
            "factor": self.factor,
            "top_kernels": [k["name"] for k in top[: min(10, self.n_active)]],
            "kernel_weights": self.kernel_weights(),
            "spec_file": self.spec.file,
            "spec": self.spec.resolved(),
            "mklkit_version": __version__,
            "versions": {
                "mklkit": __version__,
                "python": platform.python_version(),
                "numpy": np.__version__,
                "scipy": scipy.__version__,
                "scikit-learn": sklearn.__version__,
                "numba": numba.__version__,
            },
            "created": self.created,
        }

    def write(self, out_dir: str | os.PathLike[str] | None = None, force: bool = False) -> dict[str, Path]:
        """Write the run files into ``out_dir`` (default: the spec's ``output.dir``; :func:`mklkit.io.write_run`)."""
        return write_run(self, self.spec.output.dir if out_dir is None else out_dir, force=force)


#: The tolerance on nu of ``problem.nu`` (as ``MKLOneClassSVM``'s default ``nu_tol``).
NU_TOL = 0.01


def solve_prepared(
    prepared: Prepared,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    warm_start: SolveResult | None = None,
    warn_trivial: bool = True,
    warn_compilation: bool = False,
) -> RunResult:
    """Solve an already prepared spec and evaluate it on the training and test parts.

    ``warm_start``: a result on the same bank, for engines that use one.  ``warn_trivial``: a
    :class:`mklkit.result.TrivialModelWarning` when every kernel is off.  ``warn_compilation``: the
    first numba compilation of the process emits one :class:`mklkit.CompilationWarning` (it is logged
    in any case).
    """
    spec, problem = prepared.spec, prepared.problem
    if problem is None or spec is None:
        raise ValueError("solve_prepared needs a Prepared built by Spec.prepare(build=True)")
    if prepared.tasks is not None:
        raise ValueError("solve_prepared solves one problem; a target of more than two classes needs solve_multiclass")
    from .compilation import announce_compilation, components
    from .engines.base import solve_from
    from .pipeline import problem_at
    from .pipeline.heldout import held_out_C, uses_path
    from .pipeline.problem_settings import auto_C
    from .pipeline.refine import refine_prepared
    from .pipeline.weighting import second_stage_C, weight_problem

    weighted, stage, C_rule = None, None, spec.problem.C
    if spec.problem.weighting is not None:  # a two-stage method: the uniform problem on the weighted bank
        weighted, unweighted = weight_problem(problem, spec.problem.weighting), problem

        def stage(p: Any) -> Any:  # the path's fitting rows learn their own weights
            return weighted if p is unweighted else weight_problem(p, spec.problem.weighting)

        problem, warm_start = weighted.problem, weighted.start(warm_start)
        C_rule = second_stage_C(C_rule)
        if isinstance(C_rule, str):  # 'scale' (and 'auto' without a path) of the weighted kernels
            problem = problem_at(problem, C=auto_C(problem))
    engine = spec.engine.engine
    what = components(problem.loss.name, problem.regularizer.name, engine.name)
    t0 = time.perf_counter()
    with announce_compilation(what, warn=warn_compilation):
        selection, result = None, None
        if spec.problem.nu is not None:  # one-class: C found for nu (pipeline/one_class.py)
            problem, result = _reach_nu(problem, engine, spec, callback, warm_start)
        elif uses_path(C_rule, problem):
            on = problem if stage is None else unweighted
            choice = held_out_C(on, engine, auto_C, progress=_staged(callback, "C path"), stage=stage)
            selection, problem = choice.path, problem_at(problem, C=choice.path.C)
            warm_start = warm_start if choice.start is None else choice.start
        if result is None:
            result = solve_from(engine, problem, callback, warm_start)
        t_refine = time.perf_counter()
        refinement = refine_s = None
        if weighted is None:  # the weights were learnt on these factors: they are not refined
            refined, (result,), refinement = refine_prepared(
                prepared.with_C(problem.C),
                [result],
                lambda p, warm: [solve_from(engine, p.problem, None, warm[0])],
                spec.kernels.budget,
                spec.problem.C,
                progress=_staged(callback, "refine"),
            )
            refine_s = None if refinement is None else time.perf_counter() - t_refine
        else:
            result, problem = weighted.result(result), problem_at(prepared.problem, C=problem.C)
    if refinement is not None:
        prepared, problem = refined, refined.problem
    solve_s = time.perf_counter() - t0
    given_C = spec.problem.C
    if isinstance(given_C, str):  # the run records the C that 'auto' or 'path' gave
        spec = spec.model_copy(update={"problem": spec.problem.model_copy(update={"C": float(problem.C)})})
    if warn_trivial:
        from .result import warn_if_trivial

        warn_if_trivial(result, problem.C, where=f"{spec.file or 'spec'}: problem.C", auto=given_C in ("auto", "scale"))
    return run_result(
        prepared,
        spec,
        result,
        metrics=_evaluate(prepared, problem, result),
        timings=timings(prepared, solve_s, selection, refine_s),
        created=created_now(),
        factor=problem.bank.approximation() if problem.representation == "factor" else None,
        labels=_class_labels(prepared.data),
        C_selection=selection,
        factor_refinement=refinement,
    )


def created_now() -> str:
    """The time a run is recorded, UTC to the second (``created`` of a run)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_result(prepared: Prepared, spec: Any, result: Any, **fields: Any) -> RunResult:
    """The :class:`RunResult` of ``result`` on ``prepared``'s data and kernels (its kernel names, task, data set
    and sizes); ``fields``: the rest (metrics, timings, created, ...)."""
    data = prepared.data
    return RunResult(
        spec=spec,
        result=result,
        kernel_names=list(prepared.kernel_names),
        task=data.task,
        dataset=data.name,
        n_train=data.n_train,
        n_test=data.n_test,
        n_features=data.n_features,
        **fields,
    )


def _reach_nu(problem: Any, engine: Any, spec: Any, callback: Any, warm_start: Any) -> tuple[Any, SolveResult]:
    """``problem.nu``: C found by :func:`mklkit.pipeline.one_class.reach_nu` (within 0.01 of nu, each solve
    warm-started from the last); a :class:`mklkit.ConvergenceWarning` when not reached.  The problem at that C
    and its result."""
    import warnings

    from .engines.base import solve_from
    from .pipeline import problem_at
    from .pipeline.one_class import reach_nu
    from .result import ConvergenceWarning

    nu = float(spec.problem.nu)

    def solve(C: float, warm: Any) -> SolveResult:
        return solve_from(engine, problem_at(problem, C=C), callback, warm if warm is not None else warm_start)

    found = reach_nu(problem, solve, nu, NU_TOL)
    if not found.reached:
        warnings.warn(
            f"{spec.file or 'spec'}: problem.nu = {nu:g} not reached within {NU_TOL:g} after {len(found.steps)} "
            f"solves: the closest is nu = {found.nu:.4g} at C = {found.C:.6g}; a smaller engine.tol may help",
            ConvergenceWarning,
            stacklevel=3,
        )
    return problem_at(problem, C=found.C), found.result


def _staged(callback: Callable[[dict[str, Any]], Any] | None, stage: str) -> Callable[[dict[str, Any]], Any] | None:
    """``callback`` for the records of a stage before the solve (``{"stage": stage, ...}``)."""
    return None if callback is None else (lambda rec: callback({"stage": stage, **rec}))


def _evaluate(prepared: Prepared, problem: Any, result: SolveResult) -> dict[str, float | None]:
    """The accuracy (classification) or RMSE (regression) on the training part and on the test part (None: none)."""
    if getattr(problem.loss, "name", None) == "one_class":
        return _one_class_metrics(prepared, result)
    classification = prepared.data.task == "classification"

    def score(y: Any, f: Any) -> float | None:
        if f is None or y is None:
            return None
        if classification:
            return float(np.mean(np.where(f >= 0, 1.0, -1.0) == y))
        return float(np.sqrt(np.mean((f - y) ** 2)))

    name = "accuracy" if classification else "rmse"
    train = score(problem.y, prepared.train_decision(result))
    return {f"train_{name}": train, f"test_{name}": score(prepared.data.y_test, prepared.test_decision(result))}


def _one_class_metrics(prepared: Prepared, result: SolveResult) -> dict[str, float | None]:
    """One-class runs: the fraction of points outside the margin (:math:`f < 1`) on the training part and on the
    test part, the dual mass per training row ``nu``, and the test ROC AUC of :math:`f` against the test labels
    (+1 inliers, -1 outliers; None with one kind only)."""
    from sklearn.metrics import roc_auc_score

    f_train, f_test = prepared.train_decision(result), prepared.test_decision(result)
    out: dict[str, float | None] = {
        "train_outlier_fraction": float(np.mean(f_train < 1.0)),
        "test_outlier_fraction": None,
    }
    out["test_auc"] = None
    # nu: the dual mass per training row, sum(rho) / N (the one-class SVM's nu with the l1 regularizer)
    out["nu"] = None if result.dual is None else float(np.sum(result.dual)) / float(f_train.shape[0])
    if f_test is not None:
        y = np.asarray(prepared.data.y_test)
        out["test_outlier_fraction"] = float(np.mean(f_test < 1.0))
        if np.unique(y).size == 2:
            out["test_auc"] = float(roc_auc_score(y > 0, f_test))
    return out


def timings(
    prepared: Prepared, solve_s: float, selection: Any = None, refine_s: float | None = None
) -> dict[str, float]:
    """The preparation's timings with ``solve_s``, ``total_s`` and the parts of ``solve_s`` that the
    held-out path (``path_s``) and refining the factors (``refine_s``) took."""
    out = {**prepared.timings, "solve_s": solve_s}
    out["total_s"] = sum(out.values())
    if selection is not None:
        out["path_s"] = float(selection.time_s)
    if refine_s is not None:
        out["refine_s"] = refine_s
    return {k: float(v) for k, v in out.items()}


def _class_labels(data: Any) -> dict[str, Any] | None:
    """``classes`` and ``positive_class`` of a binary target, in the data's own labels (None otherwise),
    and ``class_weights`` (``{label: weight}``) when ``data.class_weight`` was given."""
    if data.classes is None or data.positive is None:
        return None
    out = {"classes": data.class_labels, "positive_class": data.label_of(1.0)}
    if data.class_weights is not None:
        out["class_weights"] = {str(c): float(w) for c, w in zip(data.class_labels, data.class_weights)}
    return out
