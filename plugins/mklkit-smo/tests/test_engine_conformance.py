"""smo_mkl and skm_smo pass mklkit's engine conformance kit (``mklkit.testing.check_engine``).

The kit solves every small real problem of its grid that the engine supports
(the built-in hinge and eps-insensitive losses; the plugin's regularizers
given as extra ones) and checks the reported objective, dual objective and
gap against the returned points and against a cvxpy + Clarabel optimum,
the status semantics, a callback stop, ``max_iter`` and warm starts.
"""

from __future__ import annotations

import pytest

from mklkit.plugins import get_registry
from mklkit.testing import assert_engine_conforms, check_engine

pytest.importorskip("cvxpy")


@pytest.mark.parametrize("engine, regularizer", [("smo_mkl", "pnorm_squared"), ("skm_smo", "l1_squared")])
def test_the_smo_engines_pass_the_engine_conformance_kit(engine, regularizer):
    reg = get_registry()
    report = assert_engine_conforms(
        reg.create("engine", engine), extra_regularizers=[reg.create("regularizer", regularizer)]
    )
    assert report.ok, str(report)
    # it solved problems, and each gap was held against the conic reference's optimum
    solved = int(report["problems"].detail.split()[0])
    assert solved >= 1
    assert report["gap_bounds_optimum"].detail == report["problems"].detail


def test_the_kit_sees_when_skm_smo_has_no_problem_it_supports():
    """Without its regularizer the SKM engine supports none of the kit's problems: the kit says so."""
    report = check_engine(get_registry().create("engine", "skm_smo"))
    assert not report["problems"].passed
    assert "supports none of the kit's problems" in report["problems"].detail
