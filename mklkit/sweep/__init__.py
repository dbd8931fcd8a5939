"""Sweeps: a grid of problems, cross-validated, locally or on a Dask cluster (``mklkit sweep``).

A sweep spec is a run spec (``docs/specs.md``) in which some keys hold a
list of values, one grid axis each, plus a ``cv`` section::

    data:    {builtin: [liver, sonar], test_size: 0}
    kernels: {preset: simplemkl}
    problem: {loss: [hinge, logistic], regularizer: {name: elasticnet, lam: [0.2, 0.5]},
              C: [0.005, 0.05, 0.5]}
    engine:  {name: spicy, tol: 1.0e-2}
    cv:      {splits: 10, test_size: 0.2, seed: 0}     # or {folds: 5, seed: 0}

The keys that may hold lists are :data:`mklkit.spec.SWEEP_KEYS`; the grid is
their Cartesian product.  The cross-validation works inside the training part
of ``data`` (``data.test_size: 0``: all rows); a held-out test part is only
used by the final refit.

Unit of work
    One *task* is one grid point without C (data set, loss, regularizer,
    bias, engine options) on one fold: the task builds the fold's kernel bank
    once and solves every C on it, from the largest C (the most regularized,
    sparsest solution) to the smallest, each solve warm-started from the
    previous one when the engine supports it (``engine.supports_warm_start``;
    the order of :meth:`mklkit.MKLClassifier.fit_path`).  A task gives one
    row per C.  Tasks are independent and deterministic, so the rows are the
    same whichever backend runs them (joblib in all three): this process
    (``workers=1``), a local process pool (``workers=N``) or a
    ``dask.distributed`` cluster (``scheduler=ADDRESS``).

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

from .backends import check_backend
from .grid import CV_KEYS, Config, CVSpec, Sweep, Task, load_sweep, parse_sweep
from .results import (
    COLUMNS,
    KEY_COLUMNS,
    RESULTS,
    SWEEP_JSON,
    TIMING_COLUMNS,
    Best,
    SweepResult,
    read_results,
    select_best,
)
from .runner import SweepTaskError, run_sweep
from .task import solve_task

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
    "check_backend",
    "TIMING_COLUMNS",
]
