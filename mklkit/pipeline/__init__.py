"""The one pipeline from data to a :class:`~mklkit.problem.Problem`, for specs, sweeps, the API and the estimators.

:func:`load_data` (or :func:`array_data`, :func:`gram_data`, :func:`fold`) gives :class:`Data`;
:func:`prepare` checks the memory budget and the engine on a tiny probe problem before any kernel is
built, then builds the bank in its representation, the test side and the problem (:class:`Prepared`).
Every problem is a :class:`PipelineError` whose ``key`` is the spec key path and whose ``problem``,
``value`` and ``allowed`` are data.  Defaults: :data:`DEFAULTS` (``docs/specs.md``).
"""

from __future__ import annotations

from .assemble import Prepared, check_support, prepare, probe_problem, problem_at
from .bank import check_memory, choose_representation, new_points
from .bank_settings import BankSettings, Representation, kernel_resolver
from .data import Data, array_data, fold, gram_data, make_folds, standardize
from .errors import PipelineError
from .loading import load_data
from .problem_settings import ProblemSettings
from .settings import DEFAULTS, CVSettings, DataSettings, parse_bytes

PipelineError.__module__ = __name__  # its public name: mklkit.pipeline.PipelineError

__all__ = ["DEFAULTS", "parse_bytes", "PipelineError", "DataSettings", "Representation", "BankSettings"]
__all__ += ["ProblemSettings", "CVSettings", "Data", "new_points", "Prepared", "load_data", "array_data", "gram_data"]
__all__ += ["make_folds", "fold", "standardize", "check_memory", "choose_representation", "check_support"]
__all__ += ["probe_problem", "problem_at", "prepare", "kernel_resolver"]
