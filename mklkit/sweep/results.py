"""``results.csv`` (columns, reading, appending), the best configuration per data set, and the finished sweep."""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..io import OutputError

if TYPE_CHECKING:  # pragma: no cover
    from .grid import Config, Sweep

RESULTS = "results.csv"
SWEEP_JSON = "sweep.json"
BEST_DIR = "best"

#: Columns of ``results.csv``; the first six name a grid point without C (:data:`CONFIG_COLUMNS`), with ``C`` and
#: ``split`` they identify a row (:data:`KEY_COLUMNS`).
COLUMNS: tuple[str, ...] = tuple(
    "dataset loss regularizer weighting engine bias C split status converged objective dual_objective gap "
    "iterations n_active n_kernels n_train n_val train_accuracy val_accuracy train_rmse val_rmse time_s bank_s "
    "warm_start".split()
)
CONFIG_COLUMNS: tuple[str, ...] = COLUMNS[:6]
KEY_COLUMNS: tuple[str, ...] = COLUMNS[:8]
#: Columns that depend on the machine, not on the problem.
TIMING_COLUMNS: tuple[str, ...] = ("time_s", "bank_s")


def csv_cell(v: Any) -> str:
    """A cell of ``results.csv``: empty for None, ``true``/``false``, else ``str`` (a float's repr, ``inf``, ``nan``)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def csv_text(rows: Sequence[Mapping[str, Any]], header: bool = False) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(COLUMNS)
    w.writerows([csv_cell(row.get(c)) for c in COLUMNS] for row in rows)
    return buf.getvalue()


def row_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(csv_cell(row.get(c)) for c in KEY_COLUMNS)


def read_results(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of a ``results.csv`` as strings; a last line cut off by an interruption is dropped."""
    text = Path(path).read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is not None and tuple(reader.fieldnames) != COLUMNS:
        raise OutputError(
            path,
            f"is not a results.csv of this mklkit version (columns {', '.join(reader.fieldnames)})",
            "--force to start over, or a new --out",
        )
    return [dict(r) for r in reader if len(r) == len(COLUMNS) and None not in r.values()]


@dataclass
class Best:
    """The best configuration of one data set (``labels``: its ``loss``, ``regularizer``, ``engine``,
    ``bias``; ``score``: ``val_accuracy`` or ``val_rmse``, its ``mean`` and ``std`` over ``n_splits``),
    refitted on the whole training part (``run``, written to ``dir``)."""

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
        r = self.run
        refit = {"status": r.status, "objective": float(r.result.objective), "gap": float(r.result.gap)}
        return {
            "dataset": self.dataset,
            **{k: v for k, v in self.labels.items() if k != "dataset"},
            "C": self.C,
            "score": self.score,
            "mean": self.mean,
            "std": self.std,
            "n_splits": self.n_splits,
            "dir": str(self.dir),
            "refit": {**refit, "n_active_kernels": r.n_active, **r.metrics},
        }


@dataclass
class SweepResult:
    """A finished sweep: ``rows`` of ``results.csv`` (strings, in grid order), the tasks solved now
    (``n_run``) and kept from an earlier run (``n_skipped``), the ``best`` of each data set, and the
    ``files`` written (``results``, ``sweep`` and one per refit)."""

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


def score_column(task: str) -> tuple[str, float]:
    """The validation column and its sign (+1: higher is better)."""
    return ("val_accuracy", 1.0) if task == "classification" else ("val_rmse", -1.0)


def select_best(sweep: Sweep, rows: Sequence[Mapping[str, str]]) -> list[tuple[int, Config, float, float, float, int]]:
    """Per data set: ``(data index, config, C, mean, std, n)`` of the best mean validation score.

    Ties go to the earlier grid point (for C: the larger, more regularized value).
    """
    import numpy as np

    column, sign = score_column(sweep.task_kind)
    scores: dict[tuple, list[float]] = {}
    for r in rows:
        if r.get(column) not in (None, ""):
            scores.setdefault(tuple(r[c] for c in CONFIG_COLUMNS + ("C",)), []).append(float(r[column]))
    out = []
    for di in range(len(sweep.data_values)):
        best = None
        for c in (c for c in sweep.configs if c.data_index == di):
            for C in sweep.Cs:
                vals = scores.get(tuple(c.labels[k] for k in CONFIG_COLUMNS) + (csv_cell(C),))
                mean = float(np.mean(np.asarray(vals))) if vals else math.nan
                if math.isfinite(mean) and (best is None or sign * mean > sign * best[3]):
                    best = (di, c, C, mean, float(np.std(np.asarray(vals))), len(vals))
        if best is not None:
            out.append(best)
    return out
