r"""The one pipeline from data to a :class:`~mklkit.problem.Problem`.

``mklkit run``/``validate`` (through :class:`mklkit.spec.Spec`), ``mklkit
sweep`` (every fold), :mod:`mklkit.api` and the scikit-learn estimators all
go through this module::

    data source ──load──▶ Data ──fold/standardize──▶ Data
    bank settings ─┐                                   │
    problem settings ┼──── prepare() ◀─────────────────┘
    engine ─────────┘        │ probe: engine.supports on a tiny problem,
                             │        memory budget (train bank + test kernels)
                             ▼        before any kernel is built
                          Prepared: problem (the bank in the chosen
                          representation) + the test side (test kernels, or
                          the factor map of new points)

Every problem is raised as :class:`PipelineError`, whose ``key`` is the spec
key path (``data.target``, ``kernels.memory_budget``,
``kernels.bank[1].width``) and whose ``problem``, ``value`` and ``allowed``
are data: the spec layer prefixes the file, the estimators translate the key
into their parameter name.  No message text is parsed anywhere.

Defaults (one table, :data:`DEFAULTS`; ``docs/specs.md`` and ``docs/api.md``
show it).
"""

from __future__ import annotations

from .assemble import Prepared, check_support, prepare, probe_problem, problem_at
from .bank import TestSide, check_memory, choose_representation, kernel_resolver, new_points, rows_of
from .data import Data, array_data, fold, gram_data, make_folds, standardize
from .loading import load_data
from .errors import PipelineError, one_line_error
from .settings import (
    DEFAULTS,
    REPRESENTATIONS,
    BankSettings,
    CVSettings,
    DataSettings,
    ProblemSettings,
    Representation,
    component_dict,
    parse_bytes,
)

PipelineError.__module__ = __name__  # its public name: mklkit.pipeline.PipelineError

__all__ = [
    "DEFAULTS",
    "REPRESENTATIONS",
    "parse_bytes",
    "PipelineError",
    "one_line_error",
    "DataSettings",
    "Representation",
    "BankSettings",
    "ProblemSettings",
    "CVSettings",
    "component_dict",
    "Data",
    "TestSide",
    "new_points",
    "rows_of",
    "Prepared",
    "load_data",
    "array_data",
    "gram_data",
    "make_folds",
    "fold",
    "standardize",
    "check_memory",
    "choose_representation",
    "check_support",
    "probe_problem",
    "problem_at",
    "prepare",
    "kernel_resolver",
]
