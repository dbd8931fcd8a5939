"""The sweep spec: the grid of problems (:class:`Sweep`, :class:`Config`), its cross-validation folds and
its tasks (:class:`Task`, solved by :func:`solve_task` in whichever process runs it)."""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..io import to_jsonable
from ..pipeline import CVSettings, Data, PipelineError, fold, make_folds
from ..solving import RunResult, solve_prepared
from ..spec import SWEEP_SECTION, Spec, SpecError, apply_overrides, read_spec_file
from ..spec import sweep_lists, validate_model, validate_spec
from .results import CONFIG_COLUMNS

_Error = Callable[..., SpecError]


@dataclass(frozen=True)
class Config:
    """One grid point without C: its concrete spec mapping ``raw`` (``problem.C`` the largest C) and
    ``spec``, its ``labels`` in ``results.csv`` and which value of the data axis it uses."""

    index: int
    raw: dict
    spec: Spec
    labels: dict
    data_index: int


@dataclass(frozen=True)
class Task:
    """One unit of work, picklable and small: a grid point without C on one fold (row indices); a row per C."""

    index: int
    config: int
    split: int
    file: str
    folder: str
    overridden: tuple[str, ...]
    raw: dict
    Cs: tuple[float, ...]
    train: Any
    val: Any
    labels: dict
    threads: int | None = None

    def describe(self) -> str:
        lab = self.labels
        weighting = "" if lab["weighting"] == "none" else f", weighting {lab['weighting']}"
        return f"{lab['dataset']}, {lab['loss']}, {lab['regularizer']}{weighting}, {lab['engine']}, split {self.split}"


@dataclass
class Sweep:
    """A validated sweep spec: the grid (``axes``: the lists found, ``configs``), the cross-validation
    ``cv``, the C values ``Cs`` (descending, the order of the warm-started path) and the data axis
    ``data_values``; ``raw`` is the spec mapping after ``--set``, without ``cv``."""

    file: str
    folder: Path
    overridden: tuple[str, ...]
    raw: dict
    cv: CVSettings
    axes: list[tuple[str, Any]]
    Cs: tuple[float, ...]
    configs: list[Config]
    data_values: list[str]
    output_dir: Path
    _folds: dict[Any, list[tuple[Any, Any]]] = field(default_factory=dict, repr=False)

    @property
    def task_kind(self) -> str:
        """``classification`` or ``regression`` (one kind per sweep)."""
        return self.configs[0].spec.problem.loss.task

    @property
    def n_tasks(self) -> int:
        return len(self.configs) * self.cv.n

    @property
    def n_rows(self) -> int:
        return self.n_tasks * len(self.Cs)

    def error(self, key: str, problem: str, value: Any = SpecError.NO_VALUE, allowed: str | None = None) -> SpecError:
        return SpecError(self.file, key, problem, value, allowed, overridden=self.overridden)

    def summary(self) -> str:
        """One line: grid size, cross-validation, tasks and rows."""
        axes = ", ".join(f"{k} ({len(v) if isinstance(v, list) else 1})" for k, v in self.axes) or "no lists"
        return (
            f"{self.file}: {len(self.configs)} grid point(s) x {len(self.Cs)} C value(s) "
            f"[{axes}]; {self.cv.describe()}; {self.n_tasks} tasks, {self.n_rows} rows; "
            f"output {self.output_dir}"
        )

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the grid (compared on ``resume``)."""
        configs = []
        for c in self.configs:
            r = c.spec.resolved()
            r.pop("output", None)
            r.pop("description", None)
            r["problem"].pop("C", None)
            configs.append(r)
        fp = {"cv": self.cv.model_dump(exclude_none=True), "C": list(self.Cs), "configs": configs}
        return json.loads(json.dumps(to_jsonable(fp)))

    def folds(self, config: Config) -> list[tuple[Any, Any]]:
        """``[(train rows, validation rows), ...]`` of the config's training part (or its Gram matrices)."""
        key = (config.data_index, config.spec.problem.loss.task)
        if key not in self._folds:
            try:
                self._folds[key] = make_folds(self.cv, raw_data(config.spec))
            except PipelineError as exc:
                raise self.error(exc.key, exc.problem, exc.value, exc.allowed) from None
        return self._folds[key]

    def tasks(self, threads: int | None = None) -> list[Task]:
        """Every task, in grid order (config, then split)."""
        out: list[Task] = []
        for c in self.configs:
            common = dict(config=c.index, file=self.file, folder=str(self.folder), overridden=self.overridden)
            common.update(raw=c.raw, Cs=self.Cs, threads=threads)
            out += [
                Task(index=len(out) + s, split=s, train=tr, val=va, labels=dict(c.labels), **common)
                for s, (tr, va) in enumerate(self.folds(c))
            ]
        return out

    def check(self) -> None:
        """Every distinct grid point checked as :func:`mklkit.api.check` checks a spec, and its folds."""
        seen = set()
        for c in self.configs:
            sections = {k: v for k, v in c.raw.items() if k in ("data", "kernels", "problem", "engine")}
            key = json.dumps(sections, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                c.spec.prepare(build=False)
                self.folds(c)


_MISSING: Any = object()


def load_sweep(path: str | os.PathLike[str], overrides: Sequence[str] | Mapping[str, Any] = ()) -> Sweep:
    """Read a sweep spec file, apply ``--set`` overrides and validate every grid point.

    Raises
    ------
    SpecError
        As :func:`mklkit.spec.load_spec`, naming the key of the offending list or list entry.
    """
    raw = read_spec_file(path, "data, kernels, problem, engine, cv, output")
    return parse_sweep(raw, file=str(path), folder=Path(path).resolve().parent, overrides=overrides)


def parse_sweep(
    raw: Any, file: str = "<spec>", folder: str | Path | None = None, overrides: Sequence[str] | Mapping[str, Any] = ()
) -> Sweep:
    """Validate an already-loaded sweep spec mapping (see :func:`load_sweep`)."""
    folder = Path(folder) if folder is not None else Path.cwd()
    if not isinstance(raw, dict):
        raise SpecError(
            file, "", "the spec must be a mapping of sections", raw, "a mapping with the sections of a spec and cv"
        )
    raw, overridden = apply_overrides(raw, overrides, file)
    cv_raw = raw.pop(SWEEP_SECTION, None)
    cv = validate_model(CVSettings, {} if cv_raw is None else cv_raw, file, overridden, root=(SWEEP_SECTION,))
    axes = sweep_lists(raw)
    err = functools.partial(SpecError, file, overridden=overridden)

    def parse(r: dict) -> Spec:
        return validate_spec(r, file, folder, overridden)

    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    data_key, data_values = None, [None]
    for k in ("builtin", "train"):
        if isinstance(data.get(k), list):
            data_key, data_values = k, _nonempty(err, f"data.{k}", data[k])
    problem = raw.get("problem") if isinstance(raw.get("problem"), dict) else {}

    def axis(key: str, expand: Callable[..., list[Any]]) -> list[Any]:
        return expand(err, f"problem.{key}", problem[key]) if key in problem else [_MISSING]

    losses, regs = axis("loss", _expand_component), axis("regularizer", _expand_component)
    weightings = axis("weighting", _expand_component)
    biases, Cs_raw = axis("bias", _values), axis("C", _values)
    solvers = _expand_component(err, "engine", raw["engine"]) if "engine" in raw else [_MISSING]
    point = functools.partial(_grid_point, raw, data_key)
    first = (data_values[0], losses[0], regs[0], weightings[0], biases[0], solvers[0])
    Cs_sorted = _sorted_Cs(err, lambda C: parse(point(*first, C)), Cs_raw, raw)
    configs = _configs(err, parse, point, axes, data_values, (losses, regs, weightings, biases, solvers), Cs_sorted[0])
    if any(c.spec.problem.loss.name == "one_class" for c in configs):
        raise err(
            "problem.loss",
            "a sweep scores held-out folds of the training part, and a one-class problem's training part holds "
            "inliers only: no fold can rank its settings",
            "one_class",
            "a classification or regression loss (choose a one-class problem's settings on labelled outliers: "
            "docs/one_class.md)",
        )
    tasks = {c.spec.problem.loss.task for c in configs}
    if len(tasks) > 1:
        raise err(
            "problem.loss",
            "a sweep compares one kind of score; the list mixes classification and regression losses",
            ", ".join(sorted({f"{c.spec.problem.loss.name} ({c.spec.problem.loss.task})" for c in configs})),
            "only classification losses (accuracy) or only regression losses (RMSE)",
        )
    names = [next(c.labels["dataset"] for c in configs if c.data_index == di) for di in range(len(data_values))]
    output_dir = configs[0].spec.output.dir
    return Sweep(file, folder, tuple(overridden), raw, cv, axes, Cs_sorted, configs, names, output_dir)


def _grid_point(
    raw: dict, data_key: str | None, d: Any, loss: Any, reg: Any, weighting: Any, bias: Any, solver: Any, C: Any
) -> dict:
    """A copy of the spec with one value of every axis (``_MISSING``: the spec's own)."""
    r = copy.deepcopy(raw)
    if data_key is not None:
        r["data"][data_key] = d
    for key, v in (("loss", loss), ("regularizer", reg), ("weighting", weighting), ("bias", bias), ("C", C)):
        if v is not _MISSING:
            r["problem"][key] = copy.deepcopy(v)
    if solver is not _MISSING:
        r["engine"] = copy.deepcopy(solver)
    return r


def _sorted_Cs(err: _Error, spec_at: Callable[[Any], Spec], Cs_raw: list[Any], raw: dict) -> tuple[float, ...]:
    """The values of C, each valid at the first grid point (``spec_at(C)``) and distinct; sorted descending."""
    Cs: list[float] = []
    for C in Cs_raw:
        spec = spec_at(C)
        if isinstance(spec.problem.C, str):  # auto (the default): a sweep selects C by validation
            raise err(
                "problem.C",
                "a sweep needs numbers at problem.C",
                "auto" if C is _MISSING else C,
                "a number > 0 or a list of numbers > 0",
            )
        if spec.problem.C in Cs:
            raise err("problem.C", "the same value twice in the list", raw["problem"]["C"], "distinct numbers > 0")
        Cs.append(spec.problem.C)
    return tuple(sorted(Cs, reverse=True))


def _configs(
    err: _Error,
    parse: Callable[[dict], Spec],
    point: Callable[..., dict],
    axes: list[tuple[str, Any]],
    data_values: list[Any],
    lists: tuple[list[Any], ...],
    C: float,
) -> list[Config]:
    """Every grid point without C (validated at ``C``), data set by data set; no two the same problem."""
    configs: list[Config] = []
    seen: set[tuple] = set()
    for di, d in enumerate(data_values):
        for loss, reg, weighting, bias, solver in itertools.product(*lists):
            r = point(d, loss, reg, weighting, bias, solver, C)
            spec = parse(r)
            labels = _labels(spec, r)
            key = tuple(labels[k] for k in CONFIG_COLUMNS)
            if key in seen:
                raise err(
                    axes[0][0] if axes else "problem",
                    "two grid points are the same problem",
                    ", ".join(key),
                    "distinct values in every list",
                )
            seen.add(key)
            configs.append(Config(index=len(configs), raw=r, spec=spec, labels=labels, data_index=di))
    return configs


def _nonempty(err: _Error, key: str, values: list) -> list:
    if not values:
        raise err(key, "an empty list gives no grid points", values, "a non-empty list of values")
    for v in values:
        if isinstance(v, (list, dict)) and key in ("problem.C", "problem.bias", "data.builtin", "data.train"):
            raise err(key, "a list entry must be a single value", v, "a list of single values")
    return list(values)


def _values(err: _Error, key: str, value: Any) -> list[Any]:
    return _nonempty(err, key, value) if isinstance(value, list) else [value]


def _expand_component(err: _Error, key: str, value: Any) -> list[Any]:
    """A component given as a list and/or with list-valued parameters -> concrete specs."""
    if isinstance(value, list):
        _nonempty(err, key, value)
        out: list[Any] = []
        for v in value:
            if isinstance(v, list):
                raise err(key, "a list inside a list", v, "one list of components, e.g. [hinge, logistic]")
            out.extend(_expand_component(err, key, v))
        return out
    if not isinstance(value, dict):
        return [value]
    lists = [(k, v) for k, v in value.items() if isinstance(v, list)]
    for k, v in lists:
        _nonempty(err, f"{key}.{k}", v)
    names = [k for k, _ in lists]
    return [{**value, **dict(zip(names, combo))} for combo in itertools.product(*(v for _, v in lists))]


def _component_label(comp: Any, given: Any) -> str:
    """``name(param=value, ...)`` with the parameters written in the spec (validated values)."""
    keys = [k for k in given if k != "name"] if isinstance(given, dict) else []
    params = comp.get_params()
    shown = [k for k in params if k in keys]
    if not shown:
        return comp.name
    return f"{comp.name}(" + ", ".join(f"{k}={params[k]!r}" for k in shown) + ")"


def _labels(spec: Spec, raw: dict) -> dict[str, str]:
    d, problem = raw.get("data") or {}, raw.get("problem") or {}
    given = (d.get("builtin"), d.get("train"), (raw.get("kernels") or {}).get("precomputed"))
    return {
        "dataset": next((str(v) for v in given if v is not None), spec.name),
        "loss": _component_label(spec.problem.loss, problem.get("loss")),
        "regularizer": _component_label(spec.problem.regularizer, problem.get("regularizer")),
        "weighting": "none"
        if spec.problem.weighting is None
        else _component_label(spec.problem.weighting, problem.get("weighting")),
        "engine": _component_label(spec.engine.engine, raw.get("engine")),
        "bias": "true" if spec.problem.bias else "false",
    }


def raw_data(spec: Spec) -> Data:
    """The training (and test) part of the spec's data, not standardized."""
    assert spec.data is not None
    return spec.model_copy(update={"data": spec.data.model_copy(update={"standardize": False})}).load_data()


_DATA_CACHE: dict[str, Data] = {}


def _limit_threads(n: int | None) -> None:
    if n is None:
        return
    with contextlib.suppress(Exception):  # a thread limit is an optimisation only
        import numba

        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    with contextlib.suppress(Exception):
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(n))


def solve_task(task: Task) -> list[dict[str, Any]]:
    """One row (a mapping of :data:`COLUMNS`) per C: the fold's bank built once, every C solved in
    descending order, warm-started; the same rows in any process."""
    _limit_threads(task.threads)
    spec = validate_spec(task.raw, task.file, Path(task.folder), task.overridden)
    key = json.dumps([task.file, task.raw.get("data"), spec.problem.loss.task], sort_keys=True, default=str)
    data = _DATA_CACHE.get(key)
    if data is None:
        data = raw_data(spec)
        _DATA_CACHE.clear()
        _DATA_CACHE[key] = data
    part = fold(data, task.train, task.val, standardized=spec.data.standardize)
    t0 = time.perf_counter()
    prepared = spec.prepare(progress=False, data=part)
    bank_s = time.perf_counter() - t0
    assert prepared.problem is not None
    warm = bool(getattr(spec.engine.engine, "supports_warm_start", False))
    rows, previous = [], None
    for C in task.Cs:
        spec_c = spec.model_copy(update={"problem": spec.problem.model_copy(update={"C": C})})
        prep_c = replace(prepared.with_C(C), spec=spec_c)
        run = solve_prepared(prep_c, None, warm_start=previous if warm else None, warn_trivial=False)
        rows.append(_row(task, C, run, bank_s, warm and previous is not None))
        previous = run.result
    return rows


def _row(task: Task, C: float, run: RunResult, bank_s: float, warm: bool) -> dict[str, Any]:
    r = run.result
    m = run.metrics
    return {
        **task.labels,
        "C": C,
        "split": task.split,
        "status": str(r.status),
        "converged": bool(r.converged),
        "objective": float(r.objective),
        "dual_objective": float(r.dual_objective),
        "gap": float(r.gap),
        "iterations": int(r.iterations),
        "n_active": run.n_active,
        "n_kernels": run.n_kernels,
        "n_train": run.n_train,
        "n_val": run.n_test,
        "train_accuracy": m.get("train_accuracy"),
        "val_accuracy": m.get("test_accuracy"),
        "train_rmse": m.get("train_rmse"),
        "val_rmse": m.get("test_rmse"),
        "time_s": float(run.timings.get("solve_s", r.time_s)),
        "bank_s": float(bank_s),
        "warm_start": warm,
    }
