"""The cvxpy + Clarabel reference of the test suite: :mod:`mklkit.testing.conic`.

``solve_reference`` and ``primal_objective_numpy`` also take the suite's own
third-party loss, ``pinball`` (``tests/engines/pinball.py``, registered
nowhere), by name, with its ``tau``.
"""

from mklkit.testing import conic
from mklkit.testing.conic import (  # noqa: F401 - re-exported for the tests
    LOSSES,
    REGULARIZERS,
    ReferenceError,
    ReferenceSolution,
    factor_bank,
    formulation,
)


def _own(loss, params):
    if loss != "pinball":
        return loss
    try:
        from tests.engines.pinball import Pinball
    except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
        from engines.pinball import Pinball
    return Pinball(tau=params["tau"])


def solve_reference(K, y, loss_name, reg_name, C, **kwargs):
    """:func:`mklkit.testing.conic.solve_reference`, ``pinball`` included."""
    return conic.solve_reference(K, y, _own(loss_name, kwargs), reg_name, C, **kwargs)


def primal_objective_numpy(K, y, alpha, b, loss_name, reg_name, C, **kwargs):
    """:func:`mklkit.testing.conic.primal_objective_numpy`, ``pinball`` included."""
    return conic.primal_objective_numpy(K, y, alpha, b, _own(loss_name, kwargs), reg_name, C, **kwargs)
