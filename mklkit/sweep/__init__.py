"""Sweeps (``mklkit sweep``): a grid of problems, each on every cross-validation fold, run by joblib in this
process, a local process pool or on a Dask cluster; ``results.csv`` and the best refit (``docs/sweeps.md``)."""

from __future__ import annotations

from .backends import check_backend
from .grid import Config, Sweep, Task, load_sweep, parse_sweep
from .results import COLUMNS, CONFIG_COLUMNS, KEY_COLUMNS, RESULTS, SWEEP_JSON, TIMING_COLUMNS, Best, SweepResult
from .results import read_results, select_best
from .runner import SweepTaskError, run_sweep

__all__ = [
    "COLUMNS",
    "CONFIG_COLUMNS",
    "KEY_COLUMNS",
    "RESULTS",
    "SWEEP_JSON",
    "TIMING_COLUMNS",
    "Config",
    "Task",
    "Sweep",
    "Best",
]
__all__ += ["SweepResult", "load_sweep", "parse_sweep", "run_sweep", "select_best", "SweepTaskError", "read_results"]
__all__ += ["check_backend"]
