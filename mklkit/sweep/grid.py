"""The sweep spec: the grid of problems (:class:`Sweep`, :class:`Config`), its tasks and cross-validation folds."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..io import to_jsonable
from ..pipeline import CVSettings, Data, PipelineError, make_folds
from ..spec import (
    SWEEP_SECTION,
    Spec,
    SpecError,
    apply_overrides,
    mark_override,
    read_spec_file,
    spec_stem,
    sweep_lists,
    validate_model,
    validate_spec,
)
from .results import KEY_COLUMNS

__all__ = ["CV_KEYS", "CVSpec", "Config", "Task", "Sweep", "load_sweep", "parse_sweep"]

CV_KEYS: tuple[str, ...] = ("folds", "splits", "test_size", "seed")

# ---------------------------------------------------------------------------
# The sweep spec
# ---------------------------------------------------------------------------
#: The ``cv:`` section (:class:`mklkit.pipeline.CVSettings`).
CVSpec = CVSettings


@dataclass(frozen=True)
class Config:
    """One grid point without C.

    Attributes
    ----------
    index : int
        Position in the grid (data set, loss, regularizer, bias, engine; the
        last varies fastest).
    raw : dict
        The concrete spec mapping (``problem.C`` = the largest C).
    spec : Spec
        ``raw`` validated.
    labels : dict
        ``dataset``, ``loss``, ``regularizer``, ``engine``, ``bias`` as
        written to ``results.csv``.
    data_index : int
        Which value of the data axis.
    """

    index: int
    raw: dict
    spec: Spec
    labels: dict
    data_index: int


@dataclass(frozen=True)
class Task:
    """One unit of work: a grid point without C on one fold; a row per C.

    Picklable and small (the fold is given by row indices); :func:`solve_task`
    runs it in any process that can import mklkit and read the data.
    """

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
        return f"{lab['dataset']}, {lab['loss']}, {lab['regularizer']}, {lab['engine']}, split {self.split}"


@dataclass
class Sweep:
    """A validated sweep spec: the grid, the cross-validation and the C values.

    Attributes
    ----------
    file, folder, overridden
        As in :class:`~mklkit.spec.Spec`.
    raw : dict
        The spec mapping after ``--set``, without ``cv``.
    cv : CVSpec
    axes : list of (key path, list)
        The lists found (:func:`mklkit.spec.sweep_lists`).
    Cs : tuple of float
        Descending (the order of the warm-started path).
    configs : list of Config
    data_values : list of str
        The data axis (builtin names or training files as written).
    output_dir : Path
    """

    file: str
    folder: Path
    overridden: tuple[str, ...]
    raw: dict
    cv: CVSpec
    axes: list[tuple[str, Any]]
    Cs: tuple[float, ...]
    configs: list[Config]
    data_values: list[str]
    output_dir: Path
    _folds: dict[Any, list[tuple[Any, Any]]] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return spec_stem(self.file)

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
        return SpecError(self.file, key, mark_override(problem, key, self.overridden), value, allowed)

    def summary(self) -> str:
        """One line: grid size, cross-validation, tasks and rows."""
        axes = ", ".join(f"{k} ({len(_flat(v))})" for k, v in self.axes) or "no lists"
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

    # -- data and folds ---------------------------------------------------------
    def folds(self, config: Config) -> list[tuple[Any, Any]]:
        """``[(train rows, validation rows), ...]`` of the config's training part (or its Gram matrices)."""
        key = (config.data_index, config.spec.problem.loss.task)
        if key not in self._folds:
            data = raw_data(config.spec)
            try:
                self._folds[key] = make_folds(self.cv, data)
            except PipelineError as exc:
                raise self.error(exc.key, exc.problem, exc.value, exc.allowed) from None
        return self._folds[key]

    def tasks(self, threads: int | None = None) -> list[Task]:
        """Every task, in grid order (config, then split)."""
        out = []
        for c in self.configs:
            for s, (tr, va) in enumerate(self.folds(c)):
                out.append(
                    Task(
                        index=len(out),
                        config=c.index,
                        split=s,
                        file=self.file,
                        folder=str(self.folder),
                        overridden=self.overridden,
                        raw=c.raw,
                        Cs=self.Cs,
                        train=tr,
                        val=va,
                        labels=dict(c.labels),
                        threads=threads,
                    )
                )
        return out

    def check(self) -> None:
        """Stage-2 validation of every grid point (data, labels, bank, memory, engine) and the folds.

        What :func:`mklkit.api.check` does for a run spec: the data loaded,
        the bank resolved (not built), the engine's support checked.
        """
        seen = set()
        for c in self.configs:
            key = json.dumps(
                {k: v for k, v in c.raw.items() if k in ("data", "kernels", "problem", "engine")},
                sort_keys=True,
                default=str,
            )
            if key in seen:  # pragma: no cover - duplicates are refused earlier
                continue
            seen.add(key)
            c.spec.prepare(build=False)
            self.folds(c)


def _flat(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


_MISSING: Any = object()


def load_sweep(path: str | os.PathLike[str], overrides: Sequence[str] | Mapping[str, Any] = ()) -> Sweep:
    """Read a sweep spec file, apply ``--set`` overrides and validate every grid point.

    Raises
    ------
    SpecError
        As :func:`mklkit.spec.load_spec`, naming the key of the offending
        list or list entry.
    """
    file = str(path)
    raw = read_spec_file(path, "data, kernels, problem, engine, cv, output")
    return parse_sweep(raw, file=file, folder=Path(path).resolve().parent, overrides=overrides)


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

    def err(key: str, problem: str, value: Any = SpecError.NO_VALUE, allowed: str | None = None) -> SpecError:
        return SpecError(file, key, mark_override(problem, key, overridden), value, allowed)

    def parse(r: dict) -> Spec:
        return validate_spec(r, file, folder, overridden)

    data_key, data_values = _data_axis(err, raw)
    losses, regs, biases, Cs_raw = _problem_axes(err, raw)
    solvers = _expand_component(err, "engine", raw["engine"]) if "engine" in raw else [_MISSING]
    point = functools.partial(_grid_point, raw, data_key)
    first = (data_values[0], losses[0], regs[0], biases[0], solvers[0])
    Cs_sorted = _sorted_Cs(err, lambda C: parse(point(*first, C)), Cs_raw, raw)
    configs = _configs(err, parse, point, axes, data_values, (losses, regs, biases, solvers), Cs_sorted[0])
    _check_one_score(err, configs)
    spec0 = configs[0].spec
    return Sweep(
        file=file,
        folder=folder,
        overridden=tuple(overridden),
        raw=raw,
        cv=cv,
        axes=axes,
        Cs=Cs_sorted,
        configs=configs,
        data_values=[
            next(c.labels["dataset"] for c in configs if c.data_index == di) for di in range(len(data_values))
        ],
        output_dir=spec0.output.dir,
    )


def _data_axis(err: Callable[..., SpecError], raw: dict) -> tuple[str | None, list[Any]]:
    """The data axis: the key listing the data sets (``builtin`` or ``train``) and its values (``[None]``: none)."""
    data = raw.get("data") if isinstance(raw.get("data"), dict) else None
    data_key = None
    data_values: list[Any] = [None]
    if data is not None:
        for k in ("builtin", "train"):
            if isinstance(data.get(k), list):
                data_key = k
                data_values = _nonempty(err, f"data.{k}", data[k])
    return data_key, data_values


def _problem_axes(err: Callable[..., SpecError], raw: dict) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The values of ``problem.loss``, ``regularizer``, ``bias`` and ``C`` (``[_MISSING]``: not given)."""
    problem = raw.get("problem") if isinstance(raw.get("problem"), dict) else None
    losses: list[Any] = [_MISSING]
    regs: list[Any] = [_MISSING]
    biases: list[Any] = [_MISSING]
    Cs_raw: list[Any] = [_MISSING]
    if problem is not None:
        if "loss" in problem:
            losses = _expand_component(err, "problem.loss", problem["loss"])
        if "regularizer" in problem:
            regs = _expand_component(err, "problem.regularizer", problem["regularizer"])
        if "bias" in problem:
            biases = (
                _nonempty(err, "problem.bias", problem["bias"])
                if isinstance(problem["bias"], list)
                else [problem["bias"]]
            )
        if "C" in problem:
            Cs_raw = _nonempty(err, "problem.C", problem["C"]) if isinstance(problem["C"], list) else [problem["C"]]
    return losses, regs, biases, Cs_raw


def _grid_point(raw: dict, data_key: str | None, d: Any, loss: Any, reg: Any, bias: Any, solver: Any, C: Any) -> dict:
    """A copy of the spec with one value of every axis (``_MISSING``: the spec's own)."""
    r = copy.deepcopy(raw)
    if data_key is not None:
        r["data"][data_key] = d
    for sec, key, v in (
        ("problem", "loss", loss),
        ("problem", "regularizer", reg),
        ("problem", "bias", bias),
        ("problem", "C", C),
    ):
        if v is not _MISSING:
            r[sec][key] = copy.deepcopy(v)
    if solver is not _MISSING:
        r["engine"] = copy.deepcopy(solver)
    return r


def _sorted_Cs(
    err: Callable[..., SpecError], spec_at: Callable[[Any], Spec], Cs_raw: list[Any], raw: dict
) -> tuple[float, ...]:
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
    err: Callable[..., SpecError],
    parse: Callable[[dict], Spec],
    point: Callable[..., dict],
    axes: list[tuple[str, Any]],
    data_values: list[Any],
    lists: tuple[list[Any], ...],
    C: float,
) -> list[Config]:
    """Every grid point without C (validated at ``C``), data set by data set; no two the same problem."""
    configs: list[Config] = []
    seen: dict[tuple, int] = {}
    for di, d in enumerate(data_values):
        for loss, reg, bias, solver in itertools.product(*lists):
            r = point(d, loss, reg, bias, solver, C)
            spec = parse(r)
            labels = _labels(spec, r)
            key = tuple(labels[k] for k in KEY_COLUMNS[:5])
            if key in seen:
                raise err(
                    _axis_of(axes),
                    "two grid points are the same problem",
                    ", ".join(key),
                    "distinct values in every list",
                )
            seen[key] = len(configs)
            configs.append(Config(index=len(configs), raw=r, spec=spec, labels=labels, data_index=di))
    return configs


def _check_one_score(err: Callable[..., SpecError], configs: list[Config]) -> None:
    """The grid's losses are all classification losses or all regression losses (one kind of score)."""
    tasks = {c.spec.problem.loss.task for c in configs}
    if len(tasks) > 1:
        names = sorted({f"{c.spec.problem.loss.name} ({c.spec.problem.loss.task})" for c in configs})
        raise err(
            "problem.loss",
            "a sweep compares one kind of score; the list mixes classification and regression losses",
            ", ".join(names),
            "only classification losses (accuracy) or only regression losses (RMSE)",
        )


def _nonempty(err: Callable[..., SpecError], key: str, values: list) -> list:
    if not values:
        raise err(key, "an empty list gives no grid points", values, "a non-empty list of values")
    for v in values:
        if isinstance(v, (list, dict)) and key in ("problem.C", "problem.bias", "data.builtin", "data.train"):
            raise err(key, "a list entry must be a single value", v, "a list of single values")
    return list(values)


def _expand_component(err: Callable[..., SpecError], key: str, value: Any) -> list[Any]:
    """A component given as a list and/or with list-valued parameters -> concrete specs."""
    if isinstance(value, list):
        _nonempty(err, key, value)
        out: list[Any] = []
        for v in value:
            if isinstance(v, list):
                raise err(key, "a list inside a list", v, "one list of components, e.g. [hinge, logistic]")
            out.extend(_expand_component(err, key, v))
        return out
    if isinstance(value, dict):
        lists = [(k, v) for k, v in value.items() if isinstance(v, list)]
        for k, v in lists:
            _nonempty(err, f"{key}.{k}", v)
        if not lists:
            return [value]
        names = [k for k, _ in lists]
        return [{**value, **dict(zip(names, combo))} for combo in itertools.product(*(v for _, v in lists))]
    return [value]


def _axis_of(axes: list[tuple[str, Any]]) -> str:
    return axes[0][0] if axes else "problem"


def _component_label(comp: Any, given: Any) -> str:
    """``name(param=value, ...)`` with the parameters written in the spec (validated values)."""
    keys = [k for k in given if k != "name"] if isinstance(given, dict) else []
    params = comp.get_params()
    shown = [k for k in params if k in keys]
    if not shown:
        return comp.name
    return f"{comp.name}(" + ", ".join(f"{k}={params[k]!r}" for k in shown) + ")"


def _data_label(spec: Spec, raw: dict) -> str:
    d = raw.get("data") or {}
    if d.get("builtin") is not None:
        return str(d["builtin"])
    if d.get("train") is not None:
        return str(d["train"])
    precomputed = (raw.get("kernels") or {}).get("precomputed")
    return str(precomputed) if precomputed is not None else spec.name


def _labels(spec: Spec, raw: dict) -> dict[str, str]:
    problem = raw.get("problem") or {}
    return {
        "dataset": _data_label(spec, raw),
        "loss": _component_label(spec.problem.loss, problem.get("loss")),
        "regularizer": _component_label(spec.problem.regularizer, problem.get("regularizer")),
        "engine": _component_label(spec.engine.engine, raw.get("engine")),
        "bias": "true" if spec.problem.bias else "false",
    }


# ---------------------------------------------------------------------------
# Data and folds
# ---------------------------------------------------------------------------
def raw_data(spec: Spec) -> Data:
    """The training (and test) part of the spec's data, not standardized."""
    assert spec.data is not None
    return spec.model_copy(update={"data": spec.data.model_copy(update={"standardize": False})}).load_data()
