"""The cvxpy + Clarabel reference of the test suite: :mod:`mklkit.testing.conic`."""
from mklkit.testing.conic import (  # noqa: F401 - re-exported for the tests
    LOSSES,
    REGULARIZERS,
    ReferenceError,
    ReferenceSolution,
    factor_bank,
    formulation,
    primal_objective_numpy,
    solve_reference,
)
