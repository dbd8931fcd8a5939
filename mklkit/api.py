"""Running specs from Python: the same pipeline and result as ``mklkit run`` and ``mklkit sweep``.

>>> result = run(load_spec("specs/quickstart.yaml", overrides=["problem.C=0.1"]))   # RunResult
>>> result.write("runs/quickstart", force=True)   # summary.json, history.json, solution.npz
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ._interrupts import interrupt_guard
from .io import write_multiclass_run
from .pipeline import Prepared
from .result import active_union
from .solving import RunResult, _staged, created_now, run_result, solve_prepared, timings
from .compilation import announce_compilation, components
from .pipeline.joint import JOINT_MAX_ITER, class_codes, fit_joint, joint_base, joint_loss, joint_tol
from .pipeline.problem_settings import auto_C
from .spec import Spec, SpecError, load_spec

__all__ = [
    "load_spec",
    "check",
    "run",
    "sweep",
    "solve_prepared",
    "solve_multiclass",
    "RunResult",
    "MulticlassRunResult",
    "Validation",
    "SpecError",
]


def _as_spec(spec: Spec | str | os.PathLike[str]) -> Spec:
    return spec if isinstance(spec, Spec) else load_spec(spec)


@dataclass
class Validation:
    """What ``mklkit validate`` found: the spec is runnable (``prepared``: data loaded and checked,
    bank resolved but not built, engine support checked)."""

    spec: Spec
    prepared: Prepared

    def summary(self) -> str:
        """One line: data, kernels, problem, solver."""
        p, s, d, k = self.prepared, self.spec, self.prepared.data, self.spec.kernels
        test = f"{d.n_test} test" if d.n_test else "no test part"
        feats = f", {d.n_features} features" if d.n_features else ""
        if d.factor_starts is not None:
            feats = f", {d.n_features} factor columns"
        source = (
            f"preset {k.preset}"
            if k.preset is not None
            else f"{len(k.bank or ())} bank entries"
            if k.bank is not None
            else f"precomputed {Path(str(k.precomputed)).name}"
            if k.precomputed is not None
            else f"precomputed factors {Path(str(k.precomputed_factors)).name}"
        )
        mem = ""
        if p.memory and p.representation == "array":
            from .kernels import format_bytes

            mem = f", ~{format_bytes(p.memory['peak'])}"
        return (
            f"{s.file}: {d.name} ({d.task}{_classes_note(d, s.problem.multiclass)}): {d.n_train} train / {test} rows{feats}; "
            f"{p.n_kernels} kernels ({source}, normalize={k.normalize}{mem}); "
            f"loss {_label(s.problem.loss)}, regularizer {_label(s.problem.regularizer)}, "
            f"C={s.problem.C if isinstance(s.problem.C, str) else format(s.problem.C, 'g')}, bias={'on' if s.problem.bias else 'off'}; "
            f"engine {_label(s.engine.engine)}{_representation(k, p.chosen)}; output {s.output.dir}"
        )


def _classes_note(d: Any, multiclass: str = "ovr") -> str:
    """``, classes 0, 1 (positive 1)`` or ``, 3 classes one-vs-rest: ...``."""
    from .pipeline.data import label_text

    if d.classes is None:
        return ""
    shown = ", ".join(label_text(c) for c in d.classes[:10]) + (", ..." if len(d.classes) > 10 else "")
    if d.positive is None:
        return f", {len(d.classes)} classes {_MULTICLASS_WORDS[multiclass]}: {shown}"
    return f", classes {shown} (positive {label_text(d.classes[d.positive])})"


def _representation(k: Any, chosen: Any = None) -> str:
    rep = chosen if chosen is not None else k.representation
    if rep.kind == "sharded":
        return f" on a sharded bank ({rep.scheduler})"
    if rep.kind != "factor":
        return ""
    if k.representation.kind == "auto":
        what = "exact" if rep.rank is None else f"approximate, rank <= {rep.rank}, tol {rep.tol:g}"
        return f" on a factor bank ({what}; chosen for its size: kernels.factor)"
    if rep.settings is None:
        return " on a factor bank (as given)"
    return f" on a factor bank (rank {rep.rank}, tol {rep.tol:g}, method {rep.method})"


def _label(comp: Any) -> str:
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in comp.get_params().items())
    return f"{comp.name}({params})" if params else comp.name


def check(spec: Spec | str | os.PathLike[str]) -> Validation:
    """Full validation without building the bank or solving (``mklkit validate``): the data loaded and
    checked, the bank resolved and its memory estimated, the engine asked whether it supports the
    problem.  Raises :class:`SpecError`."""
    spec = _as_spec(spec)
    return Validation(spec, spec.prepare(build=False))


_MULTICLASS_WORDS = {"ovr": "one-vs-rest", "ovo": "one-vs-one", "joint": "joint"}
#: The keys of each binary problem's ``summary.json`` that a multiclass summary lists per problem.
_PROBLEM_KEYS = ("status", "converged", "objective", "duality_gap", "iterations", "n_active_kernels")


@dataclass
class MulticlassRunResult:
    """A run on a target of more than two classes: one binary problem per class against the rest
    (``runs[k]``: ``classes[k]``, the sorted classes in the data's own labels), or per pair ``(i, j)``
    in ``pairs`` (``problem.multiclass: ovo``; scikit-learn's order, ``classes[j]`` +1 against
    ``classes[i]`` on their rows).  ``metrics``: the accuracies of the predicted class (largest decision
    value, or most votes); ``timings``: ``data_s``, ``bank_s``, ``solve_s`` (all problems), ``total_s``."""

    spec: Spec
    classes: list[Any]
    runs: list[RunResult]
    metrics: dict[str, float | None]
    timings: dict[str, float] = field(default_factory=dict)
    created: str = ""
    pairs: list[tuple[int, int]] = field(default_factory=list)
    #: ``problem.multiclass: joint``: the :class:`~mklkit.engines.joint.JointResult` of the one problem
    #: (``runs[k]`` then holds class k's column of it), else ``None``
    joint: Any = None
    #: the held-out choice of C of the joint problem (``problem.C: path``), else ``None``
    C_selection: Any = None

    @property
    def task(self) -> str:
        return "classification"

    @property
    def multiclass(self) -> str:
        """``joint`` (one problem for all classes), ``ovo`` (the problems are pairs of classes) or ``ovr``."""
        return "joint" if self.joint is not None else "ovo" if self.pairs else "ovr"

    @property
    def converged(self) -> bool:
        return all(r.converged for r in self.runs)

    @property
    def status(self) -> str:
        """``converged``, or the status of the first problem that did not converge."""
        return next((r.status for r in self.runs if not r.converged), "converged")

    @property
    def kernel_names(self) -> list[str]:
        return self.runs[0].kernel_names

    @property
    def n_kernels(self) -> int:
        return self.runs[0].n_kernels

    @property
    def n_active(self) -> int:
        """Kernels active in at least one problem."""
        return int(active_union([r.result for r in self.runs]).size)

    @property
    def n_test(self) -> int:
        return self.runs[0].n_test

    def problem_dir(self, k: int) -> str:
        """The folder of problem ``k`` in the run directory: ``class_<k>`` or ``pair_<i>_<j>``."""
        if self.pairs:
            i, j = self.pairs[k]
            return f"pair_{i}_{j}"
        return f"class_{k}"

    def problem_label(self, k: int) -> str:
        """Problem ``k`` in words: ``class 'a' vs rest`` or ``class 'b' vs 'a'``."""
        if self.pairs:
            i, j = self.pairs[k]
            return f"class {self.classes[j]!r} vs {self.classes[i]!r}"
        return f"class {self.classes[k]!r} vs rest"

    def summary(self) -> dict[str, Any]:
        """The top-level ``summary.json`` of a multiclass run (see ``docs/specs.md``)."""
        own = [r.summary() for r in self.runs]
        weights = np.mean([np.asarray(r.result.kernel_weights, dtype=np.float64) for r in self.runs], axis=0)
        records = [
            {"index": m, "name": n, "weight": float(w)} for m, (n, w) in enumerate(zip(self.kernel_names, weights))
        ]
        top = sorted(records, key=lambda k: -k["weight"])
        problems = []
        for k, r in enumerate(self.runs):
            i, j = self.pairs[k] if self.pairs else (None, k)
            versus = "rest" if i is None else self.classes[i]
            problems.append(
                {"class": self.classes[j], "versus": versus, "dir": self.problem_dir(k)}
                | {key: own[k][key] for key in _PROBLEM_KEYS}
                | r.metrics
            )
        n_ok = sum(r.converged for r in self.runs)
        copied = "task dataset n_train n_test n_features engine engine_params loss regularizer C spec_file spec"
        if self.joint is not None:
            return self._joint_summary(own, records, top, problems, copied)
        out = {
            "status": self.status,
            "converged": self.converged,
            "message": f"{len(self.runs)} {_MULTICLASS_WORDS[self.multiclass]} problems, {n_ok} converged",
            "multiclass": self.multiclass,
            "classes": list(self.classes),
            "n_classes": len(self.classes),
            "problems": problems,
            "duality_gap": max(float(r.result.gap) for r in self.runs),
            "tol": own[0]["tol"],
            "iterations": sum(int(r.result.iterations) for r in self.runs),
            "time_s": float(self.timings.get("solve_s", 0.0)),
            "timings": dict(self.timings),
            "n_kernels": self.n_kernels,
            "n_active_kernels": self.n_active,
            **self.metrics,
            "top_kernels": [k["name"] for k in top[: min(10, self.n_active)]],
            "kernel_weights": records,
        }
        return {**out, **{k: own[0][k] for k in f"{copied} mklkit_version versions".split()}, "created": self.created}

    def _joint_summary(
        self, own: list[dict[str, Any]], records: list[dict[str, Any]], top: list[Any], problems: list[Any], copied: str
    ) -> dict[str, Any]:
        """The top-level ``summary.json`` of one joint problem: its status, objective, gap, iterations and C,
        the one kernel weighting, and a folder per class holding its column of the solution."""
        r = self.joint
        out = {
            "status": str(r.status),
            "converged": bool(r.converged),
            "message": f"one joint problem of {len(self.classes)} classes: {r.message}",
            "multiclass": "joint",
            "classes": list(self.classes),
            "n_classes": len(self.classes),
            "problems": [{k: p[k] for k in ("class", "dir")} for p in problems],
            "objective": float(r.objective),
            "dual_objective": float(r.dual_objective),
            "duality_gap": float(r.gap),
            "tol": own[0]["tol"],
            "iterations": int(r.iterations),
            "time_s": float(self.timings.get("solve_s", 0.0)),
            "timings": dict(self.timings),
            "n_kernels": self.n_kernels,
            "n_active_kernels": self.n_active,
            "C_max": float(r.C_max),
            "C_selection": None if self.C_selection is None else self.C_selection.as_dict(),
            **self.metrics,
            "top_kernels": [k["name"] for k in top[: min(10, self.n_active)]],
            "kernel_weights": records,
        }
        shared = {k: own[0][k] for k in f"{copied} mklkit_version versions".split()}
        loss = self.spec.problem.multiclass_loss
        return {**out, **shared, "loss": "multinomial" if loss is None else loss.name, "created": self.created}

    def write(self, out_dir: str | os.PathLike[str] | None = None, force: bool = False) -> dict[str, Path]:
        """Write a run directory per problem and the top-level ``summary.json`` (:func:`mklkit.io.write_multiclass_run`)."""
        return write_multiclass_run(self, self.spec.output.dir if out_dir is None else out_dir, force=force)


def solve_multiclass(
    prepared: Prepared, callback: Callable[[dict[str, Any]], Any] | None = None, warn_compilation: bool = False
) -> MulticlassRunResult:
    """Solve and evaluate (:func:`solve_prepared`) every binary problem of a prepared multiclass target
    (:attr:`Prepared.tasks`) on its one bank, and the accuracies of the predicted class."""
    tasks, data = prepared.tasks, prepared.data
    if tasks is None or data.classes is None:
        raise ValueError("solve_multiclass needs a Prepared of a target with more than two classes")
    if prepared.spec is not None and prepared.spec.problem.multiclass == "joint":
        return _solve_joint(prepared, callback, warn_compilation)
    runs = []
    for t, task in enumerate(tasks):
        run_t = solve_prepared(prepared.task(t), callback, warn_compilation=warn_compilation)
        run_t.labels = {
            "class": data.label_of(float(task.positive)),
            "versus": "rest" if task.rows is None else data.label_of(float(task.negative)),
        }
        runs.append(run_t)
    pred_train, pred_test = prepared.class_index([r.result for r in runs])
    test = None if pred_test is None or data.y_test is None else float(np.mean(pred_test == data.y_test))
    metrics = {"train_accuracy": float(np.mean(pred_train == data.y_train)), "test_accuracy": test}
    return MulticlassRunResult(
        spec=runs[0].spec,
        classes=data.class_labels or [],
        runs=runs,
        metrics=metrics,
        timings=timings(prepared, sum(r.timings.get("solve_s", 0.0) for r in runs)),
        created=created_now(),
        pairs=[(t.negative, t.positive) for t in tasks if t.rows is not None],
    )


def _joint_engine(spec: Spec, base: Any) -> tuple[Spec, float | None, int]:
    """The spec with the engine options of the joint problem on ``base`` (``engine.tol`` and ``engine.max_iter`` as
    given, else :func:`~mklkit.pipeline.joint.joint_tol` and :data:`~mklkit.pipeline.joint.JOINT_MAX_ITER` in
    place of the defaults of ``auto``, as the estimators' joint fit), the tol given (``None``: the defaults of
    :func:`~mklkit.pipeline.joint.fit_joint`) and the most steps."""
    engine = spec.engine.engine
    params = engine.get_params()
    default = {p.name: p.default for p in engine.params}
    given = None if params.get("tol") == default.get("tol") else float(params["tol"])
    max_iter = JOINT_MAX_ITER if params.get("max_iter") is None else int(params["max_iter"])
    tol = joint_tol(base) if given is None else given
    section = {"name": engine.name, **params, "tol": tol, "max_iter": max_iter}
    return spec.model_copy(update={"engine": type(spec.engine)(section)}), given, max_iter


def _solve_joint(
    prepared: Prepared, callback: Callable[[dict[str, Any]], Any] | None, warn_compilation: bool
) -> MulticlassRunResult:
    """``problem.multiclass: joint``: one problem on all training rows with the multinomial loss and one kernel
    weighting for all classes (:func:`mklkit.pipeline.joint.fit_joint`, as ``MKLClassifier(multiclass="joint")``);
    the predicted class is the largest of the K decision values."""
    spec, data, tasks = prepared.spec, prepared.data, prepared.tasks
    assert spec is not None and tasks is not None and prepared.problem is not None and data.classes is not None
    base, _ = joint_base(prepared.problem)
    spec, tol, max_iter = _joint_engine(spec, base)
    loss = joint_loss(spec.problem.multiclass_loss or spec.problem.loss)
    codes, n = class_codes(tasks), len(data.classes)
    t0 = time.perf_counter()
    with announce_compilation(components(loss.name, spec.problem.regularizer.name, "joint"), warn=warn_compilation):
        result, path, C = fit_joint(
            base,
            codes,
            n,
            loss,
            spec.problem.C,
            auto_C,
            tol=tol,
            max_iter=max_iter,
            callback=callback,
            progress=_staged(callback, "C path"),
        )
    solve_s = time.perf_counter() - t0
    if isinstance(spec.problem.C, str):  # the run records the C that 'auto', 'path' or 'scale' gave
        spec = spec.model_copy(update={"problem": spec.problem.model_copy(update={"C": C})})
    columns = [result.class_result(k) for k in range(n)]
    created = created_now()
    runs = [
        run_result(
            prepared,
            spec,
            col,
            metrics={},
            timings=timings(prepared, solve_s, path),
            created=created,
            labels={"class": data.label_of(float(k))},
            C_selection=path,
        )
        for k, col in enumerate(columns)
    ]
    pred_train, pred_test = prepared.class_index(columns)
    test = None if pred_test is None or data.y_test is None else float(np.mean(pred_test == data.y_test))
    return MulticlassRunResult(
        spec=spec,
        classes=data.class_labels or [],
        runs=runs,
        metrics={"train_accuracy": float(np.mean(pred_train == data.y_train)), "test_accuracy": test},
        timings=timings(prepared, solve_s, path),
        created=created,
        joint=result,
        C_selection=path,
    )


def run(
    spec: Spec | str | os.PathLike[str],
    callback: Callable[[dict[str, Any]], Any] | None = None,
    progress: bool | None = None,
) -> RunResult | MulticlassRunResult:
    """Load the data, build the kernels, solve and evaluate; nothing is written.

    Parameters
    ----------
    spec : Spec or path
        A validated spec (:func:`load_spec`) or a spec file; :class:`SpecError` for anything wrong with
        it or its data, before the solve starts.
    callback : callable, optional
        ``callback(state)`` with the history record after every outer iteration; a truthy return
        stops the solve.  With ``problem.C: path`` also after each C on the held-out rows, with
        ``{"stage": "C path", "C", "ratio", "loss", "metric", "n_active"}`` (its return unused).
    progress : bool, optional
        Progress bar of the bank build on stderr (default: large banks on a terminal).

    Returns
    -------
    RunResult or MulticlassRunResult
        ``.write(dir)`` writes it, as ``mklkit run`` does.  The first numba compilation of a process
        emits one :class:`mklkit.CompilationWarning`.
    """
    spec = _as_spec(spec)
    with interrupt_guard():
        prepared = spec.prepare(progress=progress)
        try:
            if prepared.tasks is not None:  # more than two classes: one problem per class
                return solve_multiclass(prepared, callback, warn_compilation=True)
            return solve_prepared(prepared, callback, warn_compilation=True)
        finally:
            prepared.close()


def sweep(
    spec: str | os.PathLike[str],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    out_dir: str | os.PathLike[str] | None = None,
    *,
    workers: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: Callable[[dict[str, Any]], Any] | None = None,
) -> Any:
    """Run a sweep spec (``docs/sweeps.md``): the whole grid, cross-validated, then the best refit, as
    ``mklkit sweep`` does; ``overrides`` like ``--set``, the other arguments as
    :func:`mklkit.sweep.run_sweep` (``out_dir`` defaults to the spec's ``output.dir``).

    Returns
    -------
    mklkit.sweep.SweepResult
    """
    from .sweep import load_sweep, run_sweep

    sw = load_sweep(spec, overrides)
    with interrupt_guard():
        return run_sweep(
            sw, out_dir, workers=workers, scheduler=scheduler, resume=resume, force=force, progress=progress
        )
