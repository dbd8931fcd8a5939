"""The conic reference asks the components for their cvxpy expressions."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.components.base import Loss, WeightNorm
from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.problem import Problem

conic = pytest.importorskip("mklkit.testing.conic")


def _problem(loss, reg, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    K = np.array([np.exp(-g * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)) for g in (0.2, 1.0, 3.0)])
    y = np.where(X[:, 0] > 0, 1.0, -1.0) if loss.task == "classification" else X[:, 0] - X[:, 2]
    return Problem(K=K, y=y, loss=loss, regularizer=reg, C=0.2)


@pytest.mark.parametrize("loss", [Hinge(), Logistic(), Squared(), EpsInsensitive(eps=0.2)], ids=repr)
@pytest.mark.parametrize("reg", [L1(), ElasticNet(lam=0.3), Lq(q=1.5), Lq(q=2.0), Uniform(), KL(d0=0.7)], ids=repr)
def test_every_builtin_has_a_formulation_that_agrees_with_its_kernels(loss, reg) -> None:
    spec = conic.formulation(_problem(loss, reg))
    assert spec is not None and spec["loss"] is loss and spec["reg"] is reg


class _NoExpression(Squared):
    name = "squared_without_expression"

    def cvxpy_expr(self, y, z, w=None):
        return NotImplemented


class _WrongScale(Logistic):
    name = "logistic_wrong_scale"

    def cvxpy_expr(self, y, z, w=None):
        return 2 * super().cvxpy_expr(y, z, w)


class _WrongRegularizer(ElasticNet):
    name = "elasticnet_wrong"

    def cvxpy_expr(self, norms, squares, C, betas=None):
        return super().cvxpy_expr(norms, squares, 1.5 * C, betas)


@pytest.mark.parametrize(
    "loss, reg",
    [(_NoExpression(), L1()), (_WrongScale(), L1()), (Logistic(), _WrongRegularizer(lam=0.3))],
    ids=["no expression", "wrong loss", "wrong regularizer"],
)
def test_a_missing_or_wrong_expression_gives_no_formulation(loss, reg) -> None:
    assert conic.formulation(_problem(loss, reg)) is None
    assert type(Loss.cvxpy_expr(loss, None, None)) is type(NotImplemented)


def test_names_and_components_give_the_same_reference() -> None:
    pb = _problem(EpsInsensitive(eps=0.2), Lq(q=1.5))
    K = np.asarray(pb.K)
    by_name = conic.solve_reference(K, pb.y, "eps_insensitive", "lq", pb.C, eps=0.2, q=1.5)
    by_component = conic.solve_reference(K, pb.y, pb.loss, pb.regularizer, pb.C)
    assert by_name.objective == by_component.objective
    np.testing.assert_array_equal(by_name.alpha, by_component.alpha)
    sq = conic.solve_reference(K, pb.y, "eps_insensitive", "squared_l1", pb.C, eps=0.2)
    assert sq.objective == conic.solve_reference(K, pb.y, pb.loss, WeightNorm(1.0), pb.C).objective
    with pytest.raises(ValueError, match="weight_pnorm needs p > 1 and lam"):
        conic.solve_reference(K, pb.y, pb.loss, "weight_pnorm", pb.C, p=1.0)
