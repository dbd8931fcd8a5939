"""Running specs from Python: the same pipeline and result as ``mklkit run``.

>>> from mklkit.api import load_spec, run
>>> spec = load_spec("specs/quickstart.yaml", overrides=["problem.C=0.1"])
>>> result = run(spec)                       # RunResult
>>> result.status, result.metrics["test_accuracy"]
>>> result.write("runs/quickstart", force=True)   # summary.json, history.json, solution.npz

Every problem with the spec or its data raises :class:`~mklkit.spec.SpecError`
(one line naming file, key path and value) before the solve starts.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ._interrupts import interrupt_guard
from .pipeline import Prepared
from .spec import Spec, SpecError, load_spec as _load_spec

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .result import SolveResult

__all__ = ["load_spec", "check", "run", "sweep", "solve_prepared", "solve_multiclass", "RunResult",
           "MulticlassRunResult", "Validation", "SpecError"]


def load_spec(
    path: str | os.PathLike[str],
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> Spec:
    """Read and validate a spec file (see :func:`mklkit.spec.load_spec`).

    Parameters
    ----------
    path : path-like
        The YAML spec.
    overrides : sequence of ``"key.path=value"`` strings, or a mapping
        Applied before validation, exactly like ``--set``.

    Raises
    ------
    SpecError
    """
    return _load_spec(path, overrides)


def _as_spec(spec: Spec | str | os.PathLike[str]) -> Spec:
    return spec if isinstance(spec, Spec) else _load_spec(spec)


# ---------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------
@dataclass
class Validation:
    """What ``mklkit validate`` found: the spec is runnable.

    Attributes
    ----------
    spec : Spec
    prepared : Prepared
        Data loaded and checked, bank resolved (not built), engine support checked.
    """

    spec: Spec
    prepared: Prepared

    def summary(self) -> str:
        """One line: data, kernels, problem, solver."""
        p, s = self.prepared, self.spec
        d = p.data
        test = f"{d.n_test} test" if d.n_test else "no test part"
        feats = (f", {d.n_features} factor columns" if d.factor_starts is not None
                 else f", {d.n_features} features" if d.n_features else "")
        k = s.kernels
        source = (
            f"preset {k.preset}" if k.preset is not None
            else f"{len(k.bank or ())} bank entries" if k.bank is not None
            else f"precomputed {Path(str(k.precomputed)).name}" if k.precomputed is not None
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
    """``, classes 0, 1 (positive 1)`` or ``, 3 classes one-vs-rest: ...`` (or one-vs-one)."""
    from .pipeline.data import label_text

    if d.classes is None:
        return ""
    shown = ", ".join(label_text(c) for c in d.classes[:10]) + (", ..." if len(d.classes) > 10 else "")
    if d.positive is None:
        return f", {len(d.classes)} classes {_MULTICLASS_WORDS[multiclass]}: {shown}"
    return f", classes {shown} (positive {label_text(d.classes[d.positive])})"


def _representation(k: Any, chosen: Any = None) -> str:
    rep = chosen if chosen is not None else k.representation
    picked = " chosen for its size" if k.representation.kind == "auto" else ""
    if rep.kind == "factor" and picked:
        what = "exact" if rep.rank is None else f"approximate, rank <= {rep.rank}, tol {rep.tol:g}"
        return f" on a factor bank ({what};{picked}: kernels.factor)"
    if rep.kind == "sharded":
        return f" on a sharded bank ({rep.scheduler})"
    if rep.kind == "factor" and rep.settings is None:
        return " on a factor bank (as given)"
    if rep.kind == "factor":
        return f" on a factor bank (rank {rep.rank}, tol {rep.tol:g}, method {rep.method})"
    return ""


def _label(comp: Any) -> str:
    params = comp.get_params()
    if not params:
        return comp.name
    return f"{comp.name}(" + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()) + ")"


def check(spec: Spec | str | os.PathLike[str]) -> Validation:
    """Full validation without building the bank or solving (``mklkit validate``).

    Loads the data (labels, NaN/inf, shapes), resolves the kernel bank against
    the columns and checks its memory estimate, and asks the engine whether it
    supports the problem.  Raises :class:`SpecError`.
    """
    spec = _as_spec(spec)
    return Validation(spec, spec.prepare(build=False))


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------
@dataclass
class RunResult:
    """One finished run: what ``mklkit run`` prints and writes.

    Attributes
    ----------
    spec : Spec
    result : SolveResult
        The engine's result.
    kernel_names : list of str
        One per kernel of the bank (M).
    task : {"classification", "regression"}
    dataset : str
    n_train, n_test, n_features : int
    metrics : dict
        ``train_accuracy``/``test_accuracy`` or ``train_rmse``/``test_rmse``
        (test values ``None`` without a test part).
    timings : dict
        Seconds: ``data_s``, ``bank_s``, ``solve_s``, ``total_s``.
    factor : dict or None
        On a factor bank (``kernels.factor``), what the factors leave out
        (:meth:`mklkit.kernels.factor.FactorBank.approximation`); None otherwise.
    created : str
        ISO 8601 UTC time stamp of the run's end.
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
    #: the classes in the data's own labels (``classes``, ``positive_class``; one-vs-rest: ``class``), or None
    labels: dict[str, Any] | None = None
    #: ``problem.C: path``: the held-out path and its choice (:class:`mklkit.pipeline.heldout.HeldoutPath`)
    C_selection: Any = None
    #: factors grown for the kernels in use (:class:`mklkit.pipeline.refine.FactorRefinement`), or None
    factor_refinement: Any = None

    # -- convenience ----------------------------------------------------------
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
        from .io import to_jsonable

        return to_jsonable(list(self.result.history))

    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json`` (see ``docs/specs.md``)."""
        import numpy as np
        import scipy
        import sklearn

        from . import __version__

        r = self.result
        engine = self.spec.engine.engine
        top = sorted(self.kernel_weights(), key=lambda k: -k["weight"])
        out: dict[str, Any] = {
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
            # the engine that produced the answer (auto's delegate, after any fallback)
            "solved_by": r.solved_by or engine.name,
            "engine_params": engine.get_params(),
            "loss": self.spec.problem.loss.name,
            "regularizer": self.spec.problem.regularizer.name,
            "C": self.spec.problem.C,
            # problem.C: path: the values tried on held-out rows and the one chosen (else null)
            "C_selection": None if self.C_selection is None else self.C_selection.as_dict(),
            # factors grown for the kernels the solution uses (kernels.factor.refine), or null
            "factor_refinement": None if self.factor_refinement is None else self.factor_refinement.as_dict(),
            # every kernel is off for C >= C_max (null: not computed, or no finite one)
            "C_max": r.C_max,
            # every kernel off: the model predicts a constant (a TrivialModelWarning was emitted)
            "trivial": bool(r.trivial),
            **(self.labels or {}),
            # on a factor bank: ranks and the relative trace the factors leave out (else null)
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
            },
            "created": self.created,
        }
        try:
            import numba

            out["versions"]["numba"] = numba.__version__
        except ImportError:  # pragma: no cover
            pass
        return out

    def write(self, out_dir: str | os.PathLike[str] | None = None, force: bool = False) -> dict[str, Path]:
        """Write the run files into ``out_dir`` (default: the spec's ``output.dir``).

        Raises :class:`mklkit.io.OutputError` if run files exist and ``force`` is false.
        """
        from .io import write_run

        return write_run(self, self.spec.output.dir if out_dir is None else out_dir, force=force)


def _metrics(task: str, y: np.ndarray, f: np.ndarray, part: str) -> dict[str, float | None]:
    import numpy as np

    if task == "classification":
        pred = np.where(f >= 0, 1.0, -1.0)
        return {f"{part}_accuracy": float(np.mean(pred == y))}
    return {f"{part}_rmse": float(np.sqrt(np.mean((f - y) ** 2)))}


def solve_prepared(
    prepared: Prepared,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    warm_start: SolveResult | None = None,
    warn_trivial: bool = True,
    warn_compilation: bool = False,
) -> RunResult:
    """Solve an already prepared spec and evaluate it on the training and test parts.

    ``warm_start`` (a result on the same bank, e.g. at the previous C of a
    path) is passed to engines that use it (``engine.supports_warm_start``)
    and ignored by the others.  With ``warn_trivial``, a model with every
    kernel off emits :class:`mklkit.result.TrivialModelWarning` naming C and C_max.
    Numba compiling on first use is logged (INFO, ``mklkit.compilation``);
    with ``warn_compilation`` (:func:`run`) the first compilation of the
    process also emits one :class:`mklkit.CompilationWarning`, as the
    estimators do.
    """
    spec = prepared.spec
    problem = prepared.problem
    if problem is None or spec is None:
        raise ValueError("solve_prepared needs a Prepared built by Spec.prepare(build=True)")
    if prepared.tasks is not None:
        raise ValueError("solve_prepared solves one problem; a target of more than two classes needs solve_multiclass")
    from .compilation import announce_compilation
    from .engines.base import solve_from
    from .kernels import DEFAULT_MEMORY_BUDGET
    from .pipeline.refine import refine_prepared, rounds_of

    engine = spec.engine.engine
    what = (f"loss {problem.loss.name!r}, regularizer {problem.regularizer.name!r} "
            f"and engine {engine.name!r}")
    t0 = time.perf_counter()
    selection = refinement = None
    refine_s = 0.0
    with announce_compilation(what, warn=warn_compilation):
        from .pipeline.heldout import path_decides, path_engine, select_C

        if spec.problem.C == "path" or (spec.problem.C == "auto" and path_decides(problem)):
            # C chosen on held-out rows; the run then solves all rows at it
            from .pipeline import problem_at
            from .pipeline.settings import auto_C

            step = None if callback is None else (lambda rec: callback({"stage": "C path", **rec}))
            on_path = path_engine(engine)
            selection = select_C(problem, lambda p, warm: solve_from(on_path, p, None, warm), auto_C,
                                 progress=step)
            problem = problem_at(problem, C=selection.C)
            warm_start = warm_start if selection.start is None else selection.start
            selection.start = None
        result = solve_from(engine, problem, callback, warm_start)
        asked = spec.problem.C == "path"   # refine "auto": with C: path as asked for (not auto's path)
        if rounds_of(prepared, asked):   # more rank for the kernels in use (pipeline.refine)
            t_refine = time.perf_counter()
            step = None if callback is None else (lambda rec: callback({"stage": "refine", **rec}))
            prepared, (result,), refinement = refine_prepared(
                prepared.with_C(problem.C), [result],
                lambda p, warm: [solve_from(engine, p.problem, None, warm[0])],
                spec.kernels.budget or DEFAULT_MEMORY_BUDGET, asked, progress=step)
            problem = prepared.problem
            refine_s = time.perf_counter() - t_refine
    solve_s = time.perf_counter() - t0
    given_C = spec.problem.C
    if isinstance(given_C, str):  # the run records the C that 'auto' or 'path' gave
        spec = spec.model_copy(update={"problem": spec.problem.model_copy(update={"C": float(problem.C)})})
    if warn_trivial:
        from .result import warn_if_trivial

        warn_if_trivial(result, problem.C, where=f"{spec.file or 'spec'}: problem.C", auto=given_C in ("auto", "scale"))
    data = prepared.data
    task = data.task
    metrics = _metrics(task, problem.y, prepared.train_decision(result), "train")
    f_test = prepared.test_decision(result)
    if f_test is not None and data.y_test is not None:
        metrics.update(_metrics(task, data.y_test, f_test, "test"))
    else:
        metrics.update({("test_accuracy" if task == "classification" else "test_rmse"): None})
    timings = {**prepared.timings, "solve_s": solve_s}
    timings["total_s"] = sum(timings.values())
    if selection is not None:  # the part of solve_s that the held-out path took
        timings["path_s"] = float(selection.time_s)
    if refinement is not None:  # the part of solve_s that refining the factors took
        timings["refine_s"] = refine_s
    return RunResult(
        spec=spec,
        result=result,
        kernel_names=list(prepared.kernel_names),
        task=task,
        dataset=data.name,
        n_train=data.n_train,
        n_test=data.n_test,
        n_features=data.n_features,
        metrics=metrics,
        timings={k: float(v) for k, v in timings.items()},
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        factor=problem.bank.approximation() if problem.representation == "factor" else None,
        labels=_class_labels(data),
        C_selection=selection,
        factor_refinement=refinement,
    )


def _class_labels(data: Any) -> dict[str, Any] | None:
    """``classes`` and ``positive_class`` of a binary target, in the data's own labels (None otherwise),
    and ``class_weights`` (``{label: weight}``) when ``data.class_weight`` was given."""
    if data.classes is None or data.positive is None:
        return None
    out = {"classes": data.class_labels, "positive_class": data.label_of(1.0)}
    if data.class_weights is not None:
        out["class_weights"] = {str(c): float(w) for c, w in zip(data.class_labels, data.class_weights)}
    return out


_MULTICLASS_WORDS = {"ovr": "one-vs-rest", "ovo": "one-vs-one"}


@dataclass
class MulticlassRunResult:
    """A run on a target of more than two classes: one binary problem per class (class k against the rest),
    or per pair of classes (``problem.multiclass: ovo``).

    Attributes
    ----------
    spec : Spec
    classes : list
        The classes in the data's own labels, sorted.
    runs : list of RunResult
        One-vs-rest: ``runs[k]``, the problem of ``classes[k]`` against the rest (its labels +1/-1);
        one-vs-one: one per pair ``i < j`` in scikit-learn's order, ``classes[j]`` (+1) against
        ``classes[i]``, on their rows.
    metrics : dict
        ``train_accuracy``, ``test_accuracy`` of the predicted class (one-vs-rest: the class whose
        problem gives the largest decision value; one-vs-one: the most votes); ``test_accuracy`` is
        ``None`` without a test part.
    pairs : list of (int, int)
        One-vs-one: the class indices ``(i, j)`` of each problem; empty for one-vs-rest.
    timings : dict
        ``data_s``, ``bank_s``, ``solve_s`` (all problems), ``total_s``.
    """

    spec: Spec
    classes: list[Any]
    runs: list[RunResult]
    metrics: dict[str, float | None]
    timings: dict[str, float] = field(default_factory=dict)
    created: str = ""
    pairs: list[tuple[int, int]] = field(default_factory=list)

    @property
    def task(self) -> str:
        return "classification"

    @property
    def multiclass(self) -> str:
        """``ovo`` (the problems are pairs of classes) or ``ovr``."""
        return "ovo" if self.pairs else "ovr"

    @property
    def converged(self) -> bool:
        return all(r.converged for r in self.runs)

    @property
    def status(self) -> str:
        """``converged`` when every problem converged, else the status of the first that did not."""
        return next((r.status for r in self.runs if not r.converged), "converged")

    @property
    def kernel_names(self) -> list[str]:
        return self.runs[0].kernel_names

    @property
    def n_kernels(self) -> int:
        return len(self.kernel_names)

    @property
    def n_active(self) -> int:
        """Kernels active in at least one problem."""
        import numpy as np

        return int(np.unique(np.concatenate([np.asarray(r.result.active_set) for r in self.runs])).size)

    @property
    def n_test(self) -> int:
        return self.runs[0].n_test

    def problem_dir(self, k: int) -> str:
        """The folder of problem ``k`` inside the run directory: ``class_<k>`` (one-vs-rest) or
        ``pair_<i>_<j>`` (one-vs-one, classes i and j)."""
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
        import numpy as np

        first = self.runs[0].summary()
        weights = np.mean([np.asarray(r.result.kernel_weights, dtype=np.float64) for r in self.runs], axis=0)
        records = [{"index": m, "name": n, "weight": float(w)}
                   for m, (n, w) in enumerate(zip(self.kernel_names, weights))]
        top = sorted(records, key=lambda k: -k["weight"])
        problems = []
        for k, r in enumerate(self.runs):
            res = r.result
            i, j = self.pairs[k] if self.pairs else (None, k)
            problems.append({
                "class": self.classes[j], "versus": "rest" if i is None else self.classes[i],
                "dir": self.problem_dir(k), "status": r.status, "converged": r.converged,
                "objective": float(res.objective), "duality_gap": float(res.gap), "iterations": int(res.iterations),
                "n_active_kernels": r.n_active, **r.metrics,
            })
        n_ok = sum(r.converged for r in self.runs)
        out = {
            "status": self.status,
            "converged": self.converged,
            "message": f"{len(self.runs)} {_MULTICLASS_WORDS[self.multiclass]} problems, {n_ok} converged",
            "multiclass": self.multiclass,
            "classes": list(self.classes),
            "n_classes": len(self.classes),
            "problems": problems,
            "duality_gap": max(float(r.result.gap) for r in self.runs),
            "tol": first["tol"],
            "iterations": sum(int(r.result.iterations) for r in self.runs),
            "time_s": float(self.timings.get("solve_s", 0.0)),
            "timings": dict(self.timings),
            "n_kernels": self.n_kernels,
            "n_active_kernels": self.n_active,
            **self.metrics,
            "top_kernels": [k["name"] for k in top[: min(10, self.n_active)]],
            "kernel_weights": records,
        }
        for key in ("task", "dataset", "n_train", "n_test", "n_features", "engine", "engine_params", "loss",
                    "regularizer", "C", "spec_file", "spec", "mklkit_version", "versions"):
            out[key] = first[key]
        out["created"] = self.created
        return out

    def write(self, out_dir: str | os.PathLike[str] | None = None, force: bool = False) -> dict[str, Path]:
        """Write a run directory per class and the top-level ``summary.json`` (:func:`mklkit.io.write_multiclass_run`)."""
        from .io import write_multiclass_run

        return write_multiclass_run(self, self.spec.output.dir if out_dir is None else out_dir, force=force)


def solve_multiclass(
    prepared: Prepared,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    warn_compilation: bool = False,
) -> MulticlassRunResult:
    """Solve every binary problem of a prepared multiclass target (:attr:`Prepared.tasks`) on its one bank.

    Each problem is evaluated like :func:`solve_prepared` (its accuracies are
    those of class k against the rest); the predicted class of a row is the
    one whose problem gives it the largest decision value.
    """
    import numpy as np

    tasks = prepared.tasks
    data = prepared.data
    if tasks is None or data.classes is None:
        raise ValueError("solve_multiclass needs a Prepared of a target with more than two classes")
    runs = []
    for t, task in enumerate(tasks):
        run_t = solve_prepared(prepared.task(t), callback, warn_compilation=warn_compilation)
        run_t.labels = {"class": data.label_of(float(task.positive)),
                        "versus": "rest" if task.rows is None else data.label_of(float(task.negative))}
        runs.append(run_t)
    pred_train, pred_test = prepared.class_index([r.result for r in runs])
    metrics: dict[str, float | None] = {"train_accuracy": float(np.mean(pred_train == data.y_train))}
    metrics["test_accuracy"] = (None if pred_test is None or data.y_test is None
                                else float(np.mean(pred_test == data.y_test)))
    solve_s = sum(r.timings.get("solve_s", 0.0) for r in runs)
    timings = {**{k: float(v) for k, v in prepared.timings.items()}, "solve_s": solve_s}
    timings["total_s"] = sum(timings.values())
    return MulticlassRunResult(
        spec=runs[0].spec, classes=data.class_labels or [], runs=runs,
        metrics=metrics, timings=timings,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        pairs=[(t.negative, t.positive) for t in tasks if t.rows is not None],
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
        A validated spec (:func:`load_spec`) or a spec file.
    callback : callable, optional
        ``callback(state)`` after every outer iteration of the engine
        (``state`` is the history record); a truthy return stops the solve.
        With ``problem.C: path`` it is also called after each value of C on
        the held-out rows, with ``{"stage": "C path", "C", "ratio", "loss",
        "metric", "n_active"}`` (its return is not used there).
    progress : bool, optional
        Progress bar of the kernel-bank build on stderr (default: only for
        large banks on a terminal).

    Returns
    -------
    RunResult or MulticlassRunResult
        ``.write(dir)`` writes it; ``mklkit run`` does exactly this.  The first
        solve in a process that compiles numba code emits one
        :class:`mklkit.CompilationWarning` (``mklkit run`` says it in a line of its own).  A target of
        more than two classes gives a :class:`MulticlassRunResult` (one problem per class).

    Raises
    ------
    SpecError
        Anything wrong with the spec or its data, before the solve starts.
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


# ---------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------
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
    """Run a sweep spec: the whole grid, cross-validated, then the best refit (``mklkit sweep``).

    Parameters
    ----------
    spec : path-like
        A sweep spec: lists at ``problem.C``, component parameters, ``solver``
        options, ``problem.loss``, ``data.builtin`` ...; a ``cv`` section
        (see ``docs/sweeps.md``).
    overrides : sequence of ``"key.path=value"``, or a mapping
        Like ``--set``.
    out_dir : path-like, optional
        Default: the spec's ``output.dir`` (``runs/<spec name>``).
    workers : int
        Local worker processes (1: in this process).  They are spawned and
        import the main script again: from a script, call ``sweep`` with
        ``workers > 1`` under ``if __name__ == "__main__":`` (else
        :class:`~mklkit.spec.SpecError`, before anything is written).
    scheduler : str, optional
        Address of a ``dask.distributed`` scheduler (needs ``mklkit[dask]``).
    resume : bool
        Keep the rows of an earlier, interrupted run of the same sweep and
        solve only the missing ones.
    force : bool
        Start over in an output directory that holds an earlier sweep.
    progress : callable, optional
        Called with one event mapping per finished task (see
        :func:`mklkit.sweep.run_sweep`).

    Returns
    -------
    mklkit.sweep.SweepResult
    """
    from .sweep import load_sweep, run_sweep

    sw = load_sweep(spec, overrides)
    with interrupt_guard():
        return run_sweep(sw, out_dir, workers=workers, scheduler=scheduler, resume=resume, force=force,
                         progress=progress)
