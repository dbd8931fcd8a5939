"""Sweeps: a grid of problems, cross-validated, locally or on a Dask cluster (``mklkit sweep``).

A sweep spec is a run spec (``docs/specs.md``) in which some keys hold a
list of values, one grid axis each, plus a ``cv`` section::

    data:    {builtin: [liver, sonar], test_size: 0}
    kernels: {preset: simplemkl}
    problem: {loss: [hinge, logistic], regularizer: {name: elasticnet, lam: [0.2, 0.5]},
              C: [0.005, 0.05, 0.5]}
    solver:  {name: spicy, tol: 1.0e-2}
    cv:      {splits: 10, test_size: 0.2, seed: 0}     # or {folds: 5, seed: 0}

The keys that may hold lists are :data:`mklkit.spec.SWEEP_KEYS`; the grid is
their Cartesian product.  The cross-validation works inside the training part
of ``data`` (``data.test_size: 0``: all rows); a held-out test part is only
used by the final refit.

Unit of work
    One *task* is one grid point without C (data set, loss, regularizer,
    bias, solver options) on one fold: the task builds the fold's kernel bank
    once and solves every C on it, from the largest C (the most regularized,
    sparsest solution) to the smallest, each solve warm-started from the
    previous one when the engine supports it (``engine.supports_warm_start``;
    the order of :meth:`mklkit.MKLClassifier.fit_path`).  A task gives one
    row per C.  Tasks are independent and deterministic, so the rows are the
    same whichever backend runs them: this process (``workers=1``), a local
    process pool (``workers=N``) or a ``dask.distributed`` cluster
    (``scheduler=ADDRESS``).

Results
    ``OUT/results.csv`` gets the rows of every finished task appended and
    flushed to disk at once (one write per task), so an interrupted sweep
    (Ctrl-C, a lost worker) keeps every finished row; ``resume=True`` keeps
    them and solves only the missing tasks.  When the grid is complete the
    file is rewritten in grid order, the best configuration of every data set
    (highest mean validation accuracy, or lowest mean validation RMSE) is
    refitted on the whole training part and written like ``mklkit run`` does
    (``OUT/best`` or ``OUT/best/<data set>``), and ``OUT/sweep.json``
    records the grid and the choice.
"""
from __future__ import annotations

import copy
import csv
import datetime as _dt
import io
import itertools
import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from .components.params import Param
from .pipeline import CVSettings, Data, PipelineError, fold, make_folds
from .spec import (
    SWEEP_SECTION,
    TOP_KEYS,
    Spec,
    SpecError,
    SpecParser,
    apply_overrides,
    read_spec_file,
    spec_stem,
    sweep_lists,
)

if TYPE_CHECKING:  # pragma: no cover
    from .api import RunResult

__all__ = [
    "CV_KEYS",
    "COLUMNS",
    "KEY_COLUMNS",
    "RESULTS",
    "SWEEP_JSON",
    "CVSpec",
    "Config",
    "Task",
    "Sweep",
    "Best",
    "SweepResult",
    "load_sweep",
    "parse_sweep",
    "run_sweep",
    "select_best",
    "solve_task",
    "SweepTaskError",
    "read_results",
]

logger = logging.getLogger(__name__)

CV_KEYS: tuple[str, ...] = ("folds", "splits", "test_size", "seed")
RESULTS = "results.csv"
SWEEP_JSON = "sweep.json"
BEST_DIR = "best"

#: Columns of ``results.csv``; the first seven identify a row.
COLUMNS: tuple[str, ...] = (
    "dataset", "loss", "regularizer", "solver", "bias", "C", "split",
    "status", "converged", "objective", "dual_objective", "gap", "iterations",
    "n_active", "n_kernels", "n_train", "n_val",
    "train_accuracy", "val_accuracy", "train_rmse", "val_rmse",
    "time_s", "bank_s", "warm_start",
)
KEY_COLUMNS: tuple[str, ...] = COLUMNS[:7]
#: Columns that depend on the machine, not on the problem.
TIMING_COLUMNS: tuple[str, ...] = ("time_s", "bank_s")

_P_FOLDS = Param("folds", None, type=int, low=2, nullable=True)
_P_SPLITS = Param("splits", None, type=int, low=1, nullable=True)
_P_SEED = Param("seed", 0, type=int, low=0)


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
        Position in the grid (data set, loss, regularizer, bias, solver; the
        last varies fastest).
    raw : dict
        The concrete spec mapping (``problem.C`` = the largest C).
    spec : Spec
        ``raw`` validated.
    labels : dict
        ``dataset``, ``loss``, ``regularizer``, ``solver``, ``bias`` as
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
        return f"{lab['dataset']}, {lab['loss']}, {lab['regularizer']}, {lab['solver']}, split {self.split}"


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
        return SpecParser(self.file, self.folder, self.overridden).err(key, problem, value, allowed)

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
        from .io import to_jsonable

        configs = []
        for c in self.configs:
            r = c.spec.resolved()
            r.pop("output", None)
            r.pop("description", None)
            r["problem"].pop("C", None)
            configs.append(r)
        fp = {"cv": self.cv.to_dict(), "C": list(self.Cs), "configs": configs}
        return json.loads(json.dumps(to_jsonable(fp)))

    # -- data and folds ---------------------------------------------------------
    def folds(self, config: Config) -> list[tuple[Any, Any]]:
        """``[(train rows, validation rows), ...]`` of the config's training part (or its Gram matrices)."""
        key = (config.data_index, config.spec.problem.loss.task)
        if key not in self._folds:
            data = _raw_data(config.spec)
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
                out.append(Task(
                    index=len(out), config=c.index, split=s, file=self.file, folder=str(self.folder),
                    overridden=self.overridden, raw=c.raw, Cs=self.Cs, train=tr, val=va,
                    labels=dict(c.labels), threads=threads,
                ))
        return out

    def check(self) -> None:
        """Stage-2 validation of every grid point (data, labels, bank, memory, engine) and the folds."""
        from .api import check

        seen = set()
        for c in self.configs:
            key = json.dumps({k: v for k, v in c.raw.items() if k in ("data", "kernels", "problem", "engine", "solver")},
                             sort_keys=True, default=str)
            if key in seen:  # pragma: no cover - duplicates are refused earlier
                continue
            seen.add(key)
            check(c.spec)
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
    raw: Any,
    file: str = "<spec>",
    folder: str | Path | None = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> Sweep:
    """Validate an already-loaded sweep spec mapping (see :func:`load_sweep`)."""
    folder = Path(folder) if folder is not None else Path.cwd()
    keys = TOP_KEYS + (SWEEP_SECTION,)
    if not isinstance(raw, dict):
        raise SpecError(file, "", "the spec must be a mapping of sections", raw, "a mapping with keys " + ", ".join(keys))
    raw, overridden = apply_overrides(raw, overrides, file)
    parser = SpecParser(file, folder, overridden)
    parser.check_keys(raw, "", keys)
    cv = _parse_cv(parser, raw.pop(SWEEP_SECTION, None))
    axes = sweep_lists(raw)
    err = parser.err

    # -- the axes ---------------------------------------------------------------
    data = raw.get("data") if isinstance(raw.get("data"), dict) else None
    data_key = None
    data_values: list[Any] = [None]
    if data is not None:
        for k in ("builtin", "train"):
            if isinstance(data.get(k), list):
                data_key = k
                data_values = _nonempty(err, f"data.{k}", data[k])
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
            biases = _nonempty(err, "problem.bias", problem["bias"]) if isinstance(problem["bias"], list) else [problem["bias"]]
        if "C" in problem:
            Cs_raw = _nonempty(err, "problem.C", problem["C"]) if isinstance(problem["C"], list) else [problem["C"]]
    solvers: list[Any] = [_MISSING]
    engine_section = "solver" if "solver" in raw and "engine" not in raw else "engine"
    if engine_section in raw:
        solvers = _expand_component(err, engine_section, raw[engine_section])

    def point(d: Any, loss: Any, reg: Any, bias: Any, solver: Any, C: Any) -> dict:
        r = copy.deepcopy(raw)
        if data_key is not None:
            r["data"][data_key] = d
        for sec, key, v in (("problem", "loss", loss), ("problem", "regularizer", reg), ("problem", "bias", bias), ("problem", "C", C)):
            if v is not _MISSING:
                r[sec][key] = copy.deepcopy(v)
        if solver is not _MISSING:
            r[engine_section] = copy.deepcopy(solver)
        return r

    # -- C: every value valid, distinct; sorted descending ----------------------
    first = (data_values[0], losses[0], regs[0], biases[0], solvers[0])
    Cs: list[float] = []
    for C in Cs_raw:
        spec = parser.parse(point(*first, C))
        if spec.problem.C in Cs:
            raise err("problem.C", "the same value twice in the list", raw["problem"]["C"], "distinct numbers > 0")
        Cs.append(spec.problem.C)
    Cs_sorted = tuple(sorted(Cs, reverse=True))

    # -- every grid point without C ---------------------------------------------
    configs: list[Config] = []
    seen: dict[tuple, int] = {}
    for di, d in enumerate(data_values):
        for loss, reg, bias, solver in itertools.product(losses, regs, biases, solvers):
            r = point(d, loss, reg, bias, solver, Cs_sorted[0])
            spec = parser.parse(r)
            labels = _labels(spec, r)
            key = tuple(labels[k] for k in KEY_COLUMNS[:5])
            if key in seen:
                raise err(
                    _axis_of(axes), "two grid points are the same problem", ", ".join(key),
                    "distinct values in every list",
                )
            seen[key] = len(configs)
            configs.append(Config(index=len(configs), raw=r, spec=spec, labels=labels, data_index=di))
    tasks = {c.spec.problem.loss.task for c in configs}
    if len(tasks) > 1:
        names = sorted({f"{c.spec.problem.loss.name} ({c.spec.problem.loss.task})" for c in configs})
        raise err(
            "problem.loss", "a sweep compares one kind of score; the list mixes classification and regression losses",
            ", ".join(names), "only classification losses (accuracy) or only regression losses (RMSE)",
        )
    spec0 = configs[0].spec
    return Sweep(
        file=file, folder=folder, overridden=tuple(overridden), raw=raw, cv=cv, axes=axes, Cs=Cs_sorted,
        configs=configs,
        data_values=[next(c.labels["dataset"] for c in configs if c.data_index == di) for di in range(len(data_values))],
        output_dir=spec0.output.dir,
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


def _parse_cv(parser: SpecParser, sec: Any) -> CVSpec:
    allowed = "{folds: k, seed: s} (k-fold) or {splits: n, test_size: 0.2, seed: s} (random splits)"
    if sec is None:
        return CVSpec()
    if not isinstance(sec, dict):
        raise parser.err(SWEEP_SECTION, "must be a mapping", sec, allowed)
    parser.check_keys(sec, SWEEP_SECTION, CV_KEYS)
    folds = parser.param(sec, SWEEP_SECTION, _P_FOLDS)
    splits = parser.param(sec, SWEEP_SECTION, _P_SPLITS)
    seed = parser.param(sec, SWEEP_SECTION, _P_SEED)
    if folds is not None and splits is not None:
        raise parser.err("cv.splits", "cv.folds and cv.splits are exclusive", splits, allowed)
    if folds is not None:
        if sec.get("test_size") is not None:
            raise parser.err("cv.test_size", "only used with cv.splits (k folds hold out 1/k each)", sec["test_size"], allowed)
        return CVSpec("folds", folds, None, seed)
    if splits is None:
        if sec.get("test_size") is not None:
            raise parser.err("cv.splits", "cv.test_size needs the number of splits", allowed=allowed)
        return CVSpec("folds", 5, None, seed)
    test_size = 0.2
    if sec.get("test_size") is not None:
        v = sec["test_size"]
        what = "a fraction in (0, 1) or a row count >= 1"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise parser.err("cv.test_size", "invalid value", v, what)
        if isinstance(v, float) and v.is_integer() and v >= 1:
            v = int(v)
        if (isinstance(v, float) and not 0.0 < v < 1.0) or (isinstance(v, int) and v < 1):
            raise parser.err("cv.test_size", "out of range", v, what)
        test_size = v
    return CVSpec("splits", splits, test_size, seed)


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
        "solver": _component_label(spec.engine.engine, raw.get(spec.engine.section)),
        "bias": "true" if spec.problem.bias else "false",
    }


# ---------------------------------------------------------------------------
# Data and folds
# ---------------------------------------------------------------------------
def _raw_data(spec: Spec) -> Data:
    """The training (and test) part of the spec's data, not standardized."""
    return replace(spec, data=replace(spec.data, standardize=False)).load_data()


# ---------------------------------------------------------------------------
# One task (runs in a worker)
# ---------------------------------------------------------------------------
_DATA_CACHE: dict[str, Data] = {}


def _limit_threads(n: int | None) -> None:
    if n is None:
        return
    try:
        import numba

        numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    except Exception:  # noqa: BLE001 - a thread limit is an optimisation only  # pragma: no cover
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(n))
    except Exception:  # noqa: BLE001  # pragma: no cover
        pass


def solve_task(task: Task) -> list[dict[str, Any]]:
    """Solve one task: build the fold's bank once, solve every C (descending, warm-started).

    Returns one row (a mapping of :data:`COLUMNS`) per C.  Deterministic:
    the same task gives the same rows in any process.
    """
    from .api import solve_prepared

    _limit_threads(task.threads)
    spec = SpecParser(task.file, Path(task.folder), task.overridden).parse(task.raw)
    key = json.dumps([task.file, task.raw.get("data"), spec.problem.loss.task], sort_keys=True, default=str)
    data = _DATA_CACHE.get(key)
    if data is None:
        data = _raw_data(spec)
        _DATA_CACHE.clear()
        _DATA_CACHE[key] = data
    part = fold(data, task.train, task.val, standardized=spec.data.standardize)
    t0 = time.perf_counter()
    prepared = spec.prepare(progress=False, data=part)
    bank_s = time.perf_counter() - t0
    assert prepared.problem is not None
    warm = bool(getattr(spec.engine.engine, "supports_warm_start", False))
    rows = []
    previous = None
    for C in task.Cs:
        spec_c = replace(spec, problem=replace(spec.problem, C=C))
        prep_c = replace(prepared, spec=spec_c, problem=replace(prepared.problem, C=C))
        run = solve_prepared(prep_c, None, warm_start=previous if warm else None)
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


# ---------------------------------------------------------------------------
# results.csv
# ---------------------------------------------------------------------------
def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    return str(v)


def _csv_text(rows: Sequence[Mapping[str, Any]], header: bool = False) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(COLUMNS)
    for row in rows:
        w.writerow([_cell(row.get(c)) for c in COLUMNS])
    return buf.getvalue()


def _row_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(_cell(row.get(c)) if not isinstance(row.get(c), str) else row[c] for c in KEY_COLUMNS)


def read_results(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of a ``results.csv`` as strings; a last line cut off by an interruption is dropped."""
    from .io import OutputError

    text = Path(path).read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is not None and tuple(reader.fieldnames) != COLUMNS:
        raise OutputError(path, f"is not a results.csv of this mklkit version (columns {', '.join(reader.fieldnames)})",
                          "--force to start over, or a new --out")
    return [dict(r) for r in reader if len(r) == len(COLUMNS) and None not in r.values()]


def _atomic_text(path: Path, text: str) -> None:
    from .io import _atomic_write

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    _atomic_write(path, write)


def _append(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append one task's rows in a single write, flushed to disk."""
    text = _csv_text(rows)
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------
class _Serial:
    name = "serial"

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        for t in tasks:
            try:
                out = fn(t)
            except Exception as exc:  # noqa: BLE001 - reported per task
                yield t, None, exc
            else:
                yield t, out, None

    def close(self, cancel: bool = False) -> None:
        pass


def _pool_worker_init() -> None:
    """Set up a local pool worker: the warnings its parent reports itself are not repeated.

    The parent loaded the same plugin entry points (to read the sweep) and shows a
    broken plugin once; a solve that does not converge is reported by the status
    of its row and the sweep's summary.  A spawned worker would print each on the
    terminal again, once per worker, whatever the command line's ``--quiet``.
    """
    import warnings

    from .plugins import PluginWarning
    from .result import ConvergenceWarning

    warnings.filterwarnings("ignore", category=PluginWarning)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)


class _Pool:
    """A local process pool (``concurrent.futures``, spawned processes)."""

    def __init__(self, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.name = f"local pool of {workers} processes"
        self.ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_pool_worker_init)

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from concurrent.futures import as_completed

        futures = {self.ex.submit(fn, t): t for t in tasks}
        for f in as_completed(futures):
            t = futures[f]
            try:
                yield t, f.result(), None
            except Exception as exc:  # noqa: BLE001 - reported per task (BrokenProcessPool too)
                yield t, None, exc

    def close(self, cancel: bool = False) -> None:
        self.ex.shutdown(wait=not cancel, cancel_futures=True)


class _Dask:
    """A ``dask.distributed`` cluster reached through its scheduler address."""

    def __init__(self, sweep: Sweep, address: str):
        from ._dask import connect

        self.client = connect(address, sweep.error)
        self.name = f"Dask cluster at {address} ({len(self.client.scheduler_info().get('workers', {}))} workers)"
        self.futures: list[Any] = []

    def map(self, fn: Callable[[Task], Any], tasks: Sequence[Task]) -> Iterator[tuple[Task, Any, BaseException | None]]:
        from distributed import as_completed

        token = f"{os.getpid()}-{time.time_ns()}"
        by_key = {}
        for t in tasks:
            f = self.client.submit(fn, t, key=f"mklkit-sweep-{token}-{t.index}", pure=False)
            by_key[f.key] = t
            self.futures.append(f)
        with self.client.as_current():
            for f in as_completed(self.futures):
                t = by_key[f.key]
                try:
                    yield t, f.result(), None
                except Exception as exc:  # noqa: BLE001 - reported per task (KilledWorker too)
                    yield t, None, exc

    def close(self, cancel: bool = False) -> None:
        try:
            if cancel and self.futures:
                self.client.cancel(self.futures)
        finally:
            self.client.close()


# ---------------------------------------------------------------------------
# Running a sweep
# ---------------------------------------------------------------------------
@dataclass
class Best:
    """The best configuration of one data set, refitted on its whole training part.

    Attributes
    ----------
    dataset : str
    labels : dict
        ``loss``, ``regularizer``, ``solver``, ``bias`` of the configuration.
    C : float
    score : str
        ``val_accuracy`` (higher is better) or ``val_rmse`` (lower is better).
    mean, std : float
        Over the folds/splits.
    n_splits : int
    run : RunResult
        The refit (``run.write`` was called on ``dir``).
    dir : Path
    """

    dataset: str
    labels: dict
    C: float
    score: str
    mean: float
    std: float
    n_splits: int
    run: Any
    dir: Path

    def to_dict(self) -> dict[str, Any]:
        out = {"dataset": self.dataset, **{k: v for k, v in self.labels.items() if k != "dataset"}, "C": self.C,
               "score": self.score, "mean": self.mean, "std": self.std, "n_splits": self.n_splits, "dir": str(self.dir)}
        r = self.run
        out["refit"] = {"status": r.status, "objective": float(r.result.objective), "gap": float(r.result.gap),
                        "n_active_kernels": r.n_active, **r.metrics}
        return out


@dataclass
class SweepResult:
    """A finished sweep.

    Attributes
    ----------
    sweep : Sweep
    out_dir : Path
    rows : list of dict
        Every row of ``results.csv`` (strings, as written), in grid order.
    n_run, n_skipped : int
        Tasks solved now, and tasks kept from an earlier run (``resume``).
    best : list of Best
        One per data set.
    backend : str
    time_s : float
    files : dict
        ``results``, ``sweep`` (``sweep.json``) and one entry per refit.
    """

    sweep: Sweep
    out_dir: Path
    rows: list[dict[str, str]]
    n_run: int
    n_skipped: int
    best: list[Best]
    backend: str
    time_s: float
    files: dict[str, Path]

    @property
    def n_not_converged(self) -> int:
        return sum(1 for r in self.rows if r["converged"] != "true")


class SweepTaskError(RuntimeError):
    """Some tasks raised; their rows are missing from ``results.csv`` (``resume`` retries them)."""


def _check_out(sweep: Sweep, out: Path, resume: bool, force: bool, key: str) -> None:
    from .io import OutputError, check_output_dir

    if out.exists() and not out.is_dir():
        raise sweep.error(key, "exists and is not a directory", str(out), "a new or existing directory")
    if resume or force:
        return
    held = [n for n in (RESULTS, SWEEP_JSON) if (out / n).exists()]
    if held:
        raise sweep.error(
            key, f"already holds a sweep ({', '.join(held)}); nothing was overwritten", str(out),
            "--resume to finish it, --force to start over, or a new directory (--out DIR)",
        )
    for d in _best_dirs(sweep, out).values():
        try:
            check_output_dir(d, force=False)
        except OutputError as exc:
            raise sweep.error(key, exc.problem, str(d), exc.allowed) from None


def _best_dirs(sweep: Sweep, out: Path) -> dict[int, Path]:
    """Where the refit of each data set goes: ``OUT/best`` (one data set) or ``OUT/best/<name>``."""
    if len(sweep.data_values) == 1:
        return {0: out / BEST_DIR}
    dirs: dict[int, Path] = {}
    used: set[str] = set()
    for i, v in enumerate(sweep.data_values):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(v)).name.split(".")[0]) or f"data{i}"
        if name in used:
            name = f"{name}-{i}"
        used.add(name)
        dirs[i] = out / BEST_DIR / name
    return dirs


def _default_threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _is_main_guard(test: Any) -> bool:
    """``__name__ == "__main__"`` (either operand order), alone or in an ``and``."""
    import ast

    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_is_main_guard(v) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


def _unguarded_main_line() -> tuple[str, int] | None:
    """The main script and line that is running this call at import time, outside a main guard.

    A local pool spawns its worker processes, which import the main module
    again (as ``__mp_main__``): a statement at its top level that is not under
    ``if __name__ == "__main__":`` runs again in every worker, and a sweep started
    there kills the worker before it takes a task.  ``None`` when the call does
    not come from the main module's top level, when that line is guarded, or
    when there is no main file (an interactive session, ``python -c``).
    """
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None
    line = None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
            if node.body[0].lineno <= line <= (node.body[-1].end_lineno or node.body[-1].lineno):
                return None
    return str(path), int(line)


def check_backend(sweep: Sweep, workers: int, scheduler: str | None) -> None:
    """Reject a bad ``--workers``, or ``--workers`` beside ``--scheduler`` (:class:`SpecError`)."""
    if scheduler is not None and workers != 1:
        raise sweep.error("--workers", "a Dask scheduler runs the tasks on its own workers", workers,
                          "--scheduler ADDRESS or --workers N, not both")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise sweep.error("--workers", "invalid value", workers, "an integer >= 1")
    where = _unguarded_main_line() if workers > 1 else None
    if where is not None:
        raise SpecError(
            where[0], "workers",
            f"line {where[1]} starts the sweep whenever the script is imported, and the local pool's "
            "spawned worker processes import it again (each would die before solving: BrokenProcessPool)",
            workers, 'the call under \'if __name__ == "__main__":\' (docs/sweeps.md), or workers=1',
        )


def run_sweep(
    sweep: Sweep,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    workers: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    force: bool = False,
    progress: Callable[[dict[str, Any]], Any] | None = None,
    out_key: str | None = None,
) -> SweepResult:
    """Run every task of a sweep, append its rows to ``results.csv``, refit the best.

    Parameters
    ----------
    sweep : Sweep
        From :func:`load_sweep`.
    out_dir : path-like, optional
        Default ``sweep.output_dir``.
    workers : int
        1: solve in this process; N > 1: a local pool of N spawned processes
        (each limited to ``cpu_count // N`` numba/BLAS threads).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address (``tcp://host:8786``); each
        task is one Dask task running single-threaded (start workers with
        ``--nthreads 1`` and as many processes as cores).  Exclusive with
        ``workers > 1``.
    resume : bool
        Keep the complete tasks of an earlier run in ``out_dir`` (same grid)
        and solve the others.
    force : bool
        Start over in a directory holding an earlier sweep.
    progress : callable, optional
        ``progress(event)`` with ``event["event"]`` one of ``start``
        (``n_tasks``, ``n_skipped``, ``backend``), ``task`` (``done``,
        ``total``, ``task``, ``failed``, ``error``, ``time_s``,
        ``elapsed_s``, ``eta_s``) and ``refit`` (``dataset``, ``dir``).  An
        exception it raises stops the sweep after the task's rows were saved.
    out_key : str, optional
        How errors name the output directory (``--out`` or ``output.dir``).

    Returns
    -------
    SweepResult

    Raises
    ------
    SpecError
        Invalid grid, data, folds, or output directory (before any solve).
    SweepTaskError
        Some tasks raised; the other rows are saved, ``resume`` retries them.
    """
    from .io import OutputError, write_json

    t_start = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else sweep.output_dir
    key = out_key or ("--out" if out_dir is not None else "output.dir")
    check_backend(sweep, workers, scheduler)
    _check_out(sweep, out, resume, force, key)
    sweep.check()
    threads = 1 if scheduler is not None else (_default_threads(workers) if workers > 1 else None)
    tasks = sweep.tasks(threads=threads)
    fingerprint = sweep.fingerprint()
    results_path = out / RESULTS
    sweep_path = out / SWEEP_JSON

    # -- what an earlier run left ---------------------------------------------
    done: dict[int, list[dict[str, str]]] = {}
    if resume and results_path.exists():
        try:
            previous = json.loads(sweep_path.read_text(encoding="utf-8")) if sweep_path.exists() else None
        except (OSError, ValueError):
            previous = None
        if previous is None or previous.get("grid") != fingerprint:
            what = "the grid or the cross-validation differs" if previous is not None else f"{SWEEP_JSON} is missing or unreadable"
            raise sweep.error(
                "--resume", f"{results_path} was written by another sweep ({what})", str(out),
                "the same spec and --set values, --force to start over, or a new --out",
            )
        try:
            old = read_results(results_path)
        except OutputError as exc:
            raise sweep.error("--resume", f"{RESULTS}: {exc.problem}", str(results_path), exc.allowed) from None
        by_key: dict[tuple, dict[str, str]] = {tuple(r[c] for c in KEY_COLUMNS): r for r in old}
        for t in tasks:
            rows = [by_key.get(_row_key({**t.labels, "C": C, "split": t.split})) for C in sweep.Cs]
            if all(r is not None for r in rows):
                done[t.index] = rows  # type: ignore[assignment]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise sweep.error(key, f"cannot create the directory ({exc.strerror or exc})", str(out), "a writable path") from None
    from . import __version__

    meta: dict[str, Any] = {
        "spec_file": sweep.file, "grid": fingerprint, "axes": [k for k, _ in sweep.axes],
        "n_configs": len(sweep.configs), "n_tasks": len(tasks), "n_rows": sweep.n_rows,
        "columns": list(COLUMNS), "mklkit_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "complete": False,
    }
    write_json(sweep_path, meta)
    # the file holds exactly the complete tasks kept (a cut-off line or a partial task is dropped)
    _atomic_text(results_path, _csv_text([r for t in tasks if t.index in done for r in done[t.index]], header=True))

    # -- run the rest ----------------------------------------------------------
    todo = [t for t in tasks if t.index not in done]
    backend: Any
    if not todo:
        backend = None
    elif scheduler is not None:
        backend = _Dask(sweep, scheduler)
    elif workers > 1 and len(todo) > 1:
        backend = _Pool(min(workers, len(todo)))
    else:
        backend = _Serial()
    backend_name = backend.name if backend is not None else "none (nothing left to solve)"
    new: dict[int, list[dict[str, Any]]] = {}
    errors: list[tuple[Task, BaseException]] = []
    _emit(progress, {"event": "start", "n_tasks": len(tasks), "n_skipped": len(done), "backend": backend_name,
                     "n_rows": sweep.n_rows})
    t_run = time.perf_counter()
    finished = False
    try:
        if backend is not None and todo:
            for i, (task, rows, exc) in enumerate(backend.map(solve_task, todo), start=1):
                if exc is None:
                    _append(results_path, rows)
                    new[task.index] = rows
                else:
                    errors.append((task, exc))
                    logger.warning("task %d (%s) failed: %s", task.index, task.describe(), exc)
                elapsed = time.perf_counter() - t_run
                _emit(progress, {
                    "event": "task", "done": i, "total": len(todo), "task": task.describe(),
                    "failed": exc is not None, "error": None if exc is None else f"{type(exc).__name__}: {exc}",
                    "time_s": sum(float(r["time_s"]) for r in rows) if rows else None,
                    "elapsed_s": elapsed, "eta_s": elapsed / i * (len(todo) - i),
                })
        finished = True
    finally:
        if backend is not None:
            backend.close(cancel=not finished)
    if errors:
        task, exc = errors[0]
        if isinstance(exc, (SpecError, OutputError)):
            raise exc
        raise SweepTaskError(
            f"{len(errors)} of {len(todo)} task(s) failed; their rows are missing from {results_path} "
            f"('mklkit sweep --resume' retries them); first: task {task.index} ({task.describe()}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc

    # -- complete: grid order, best refit, sweep.json ---------------------------
    rows_all: list[dict[str, str]] = []
    for t in tasks:
        part = done.get(t.index) or new[t.index]
        rows_all.extend({c: (r[c] if isinstance(r.get(c), str) else _cell(r.get(c))) for c in COLUMNS} for r in part)
    _atomic_text(results_path, _csv_text(rows_all, header=True))
    best = _refit_best(sweep, out, rows_all, progress)
    files = {"results": results_path, "sweep": sweep_path}
    files.update({f"best:{b.dataset}": b.dir for b in best})
    meta.update({
        "complete": True, "backend": backend_name, "n_run": len(new), "n_skipped": len(done),
        "time_s": time.perf_counter() - t_start, "best": [b.to_dict() for b in best],
    })
    write_json(sweep_path, meta)
    return SweepResult(
        sweep=sweep, out_dir=out, rows=rows_all, n_run=len(new), n_skipped=len(done), best=best,
        backend=backend_name, time_s=time.perf_counter() - t_start, files=files,
    )


def _emit(progress: Callable[[dict[str, Any]], Any] | None, event: dict[str, Any]) -> None:
    if progress is not None:
        progress(event)


def _score(task: str) -> tuple[str, float]:
    """The validation column and its sign (+1: higher is better)."""
    return ("val_accuracy", 1.0) if task == "classification" else ("val_rmse", -1.0)


def select_best(sweep: Sweep, rows: Sequence[Mapping[str, str]]) -> list[tuple[int, Config, float, float, float, int]]:
    """Per data set: ``(data index, config, C, mean, std, n)`` of the best mean validation score.

    Ties go to the earlier grid point (for C: the larger, more regularized value).
    """
    import numpy as np

    column, sign = _score(sweep.task_kind)
    scores: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get(column) in (None, ""):
            continue
        scores.setdefault(tuple(r[c] for c in KEY_COLUMNS[:6]), []).append(float(r[column]))
    out = []
    for di in range(len(sweep.data_values)):
        best = None
        for c in sweep.configs:
            if c.data_index != di:
                continue
            for C in sweep.Cs:
                vals = scores.get(tuple(c.labels[k] for k in KEY_COLUMNS[:5]) + (_cell(C),))
                if not vals:
                    continue
                a = np.asarray(vals)
                mean = float(np.mean(a))
                if not math.isfinite(mean):
                    continue
                if best is None or sign * mean > sign * best[3]:
                    best = (di, c, C, mean, float(np.std(a)), len(vals))
        if best is not None:
            out.append(best)
    return out


def _refit_best(sweep: Sweep, out: Path, rows: Sequence[Mapping[str, str]],
                progress: Callable[[dict[str, Any]], Any] | None) -> list[Best]:
    from .api import run

    column, _ = _score(sweep.task_kind)
    dirs = _best_dirs(sweep, out)
    result = []
    for di, config, C, mean, std, n in select_best(sweep, rows):
        spec = SpecParser(sweep.file, sweep.folder, sweep.overridden).parse(
            {**config.raw, "problem": {**config.raw["problem"], "C": C}}
        )
        refit = run(spec, progress=False)
        refit.write(dirs[di], force=True)
        labels = {k: v for k, v in config.labels.items()}
        b = Best(dataset=config.labels["dataset"], labels=labels, C=C, score=column, mean=mean, std=std,
                 n_splits=n, run=refit, dir=dirs[di])
        result.append(b)
        _emit(progress, {"event": "refit", "dataset": b.dataset, "dir": str(b.dir)})
    return result
