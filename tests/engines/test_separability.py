"""Engines of sums over kernels decline regularizers that couple the blocks."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.components.losses import Logistic
from mklkit.components.elasticnet import L1
from mklkit.pipeline.choose import Auto
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.problem import Problem


class CoupledL1(L1):
    """Block 1-norm kernels, but declared as coupling the blocks."""

    name = "coupled_l1"
    separable = False


def problem(reg) -> Problem:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 20, 4))
    K = np.einsum("mik,mjk->mij", X, X)
    y = np.where(rng.standard_normal(20) > 0, 1.0, -1.0)
    return Problem(K=K, y=y, loss=Logistic(), regularizer=reg, C=0.1)


@pytest.mark.parametrize(
    "engine",
    [Spicy(), Spicy(method="iterative"), Proximal(), Auto()],
    ids=["spicy", "spicy-iterative", "proximal", "auto"],
)
def test_non_separable_regularizer_is_declined(engine):
    pb = problem(CoupledL1())
    why = engine.supports(pb)
    assert why is not None and "coupled_l1" in why and "separable" in why
    with pytest.raises(ValueError, match="not separable over kernels"):
        engine.solve(pb)
    # the same kernels declared separable are solved
    assert engine.supports(problem(L1())) is None
