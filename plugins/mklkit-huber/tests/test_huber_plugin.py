"""Tests of the mklkit-huber plugin: the conformance kit plus its own formula checks."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit.components.base import Loss
from mklkit.components.params import ParamError
from mklkit.plugins import Registry
from mklkit_huber import Huber, SquaredHinge
from mklkit_huber import plugin as huber_plugin

LOSSES = [Huber(), Huber(delta=0.3), Huber(delta=2.5), SquaredHinge()]
IDS = [repr(loss) for loss in LOSSES]


def _labels(loss: Loss, n: int, rng: np.random.Generator) -> np.ndarray:
    if loss.task == "classification":
        return rng.choice([-1.0, 1.0], size=n)
    return rng.normal(scale=2.0, size=n)


def _interior_points(loss: Loss, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Points strictly inside the conjugate's domain, away from its ends."""
    lo = loss.jit.conj_lower(y, loss.param_vector)
    hi = loss.jit.conj_upper(y, loss.param_vector)
    lo_f = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi - 4.0, -4.0))
    hi_f = np.where(np.isfinite(hi), hi, lo_f + 4.0)
    return lo_f + (hi_f - lo_f) * rng.uniform(0.05, 0.95, size=y.shape[0])


# -- the public conformance kit (mklkit.testing) ------------------------------
@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_conformance_kit(loss: Loss) -> None:
    testing = pytest.importorskip("mklkit.testing")
    testing.assert_conforms(loss)


@pytest.mark.parametrize("cls", [Huber, SquaredHinge], ids=lambda cls: cls.name)
def test_conformance_kit_at_random_parameter_points(cls: type) -> None:
    testing = pytest.importorskip("mklkit.testing")
    for report in testing.check_parameter_points(cls, n_random=5, seed=0):
        assert report.ok, str(report)


# -- own checks of the formulas ------------------------------------------------
@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_derivatives_match_central_differences(loss: Loss) -> None:
    rng = np.random.default_rng(0)
    k, p = loss.jit, loss.param_vector
    y = _labels(loss, 200, rng)
    z = rng.normal(scale=3.0, size=200)
    h = 1e-6
    # stay away from the kinks of the second derivative
    r = z - y if loss.task == "regression" else 1.0 - y * z
    kink = np.abs(np.abs(r) - (p[0] if p.size else 0.0)) if loss.task == "regression" else np.abs(r)
    ok = kink > 1e-3
    y, z = y[ok], z[ok]
    fd1 = (k.value(y, z + h, p) - k.value(y, z - h, p)) / (2 * h)
    np.testing.assert_allclose(k.deriv(y, z, p), fd1, atol=1e-6)
    fd2 = (k.deriv(y, z + h, p) - k.deriv(y, z - h, p)) / (2 * h)
    np.testing.assert_allclose(k.deriv2(y, z, p), fd2, atol=1e-5)

    u = _interior_points(loss, y, rng)
    fd1 = (k.conj(y, u + h, p) - k.conj(y, u - h, p)) / (2 * h)
    np.testing.assert_allclose(k.conj_grad(y, u, p), fd1, atol=1e-6)
    fd2 = (k.conj_grad(y, u + h, p) - k.conj_grad(y, u - h, p)) / (2 * h)
    np.testing.assert_allclose(k.conj_hess(y, u, p), fd2, atol=1e-5)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_fenchel_young_equality_at_the_derivative(loss: Loss) -> None:
    rng = np.random.default_rng(1)
    k, p = loss.jit, loss.param_vector
    y = _labels(loss, 300, rng)
    z = rng.normal(scale=3.0, size=300)
    u = k.deriv(y, z, p)
    np.testing.assert_allclose(k.value(y, z, p) + k.conj(y, u, p), u * z, atol=1e-10)
    # and the Fenchel-Young inequality everywhere on the domain
    v = _interior_points(loss, y, rng)
    assert np.all(k.value(y, z, p) + k.conj(y, v, p) >= v * z - 1e-10)


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_conjugate_is_the_supremum(loss: Loss) -> None:
    """ell*(y, u) = sup_z uz - ell(y, z) on a fine grid of z, inf outside the domain."""
    rng = np.random.default_rng(2)
    k, p = loss.jit, loss.param_vector
    y = _labels(loss, 20, rng)
    u = _interior_points(loss, y, rng)
    grid = np.linspace(-40.0, 40.0, 80001)
    for yi, ui in zip(y, u):
        yy = np.full(grid.shape, yi)
        sup = np.max(ui * grid - k.value(yy, grid, p))
        assert k.conj(np.array([yi]), np.array([ui]), p)[0] == pytest.approx(sup, abs=1e-6)
    lo, hi = k.conj_lower(y, p), k.conj_upper(y, p)
    outside = np.where(np.isfinite(hi), hi + 0.5, lo - 0.5)
    assert np.all(np.isinf(k.conj(y, outside, p)))


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_constrained_form_matches_the_conjugate(loss: Loss) -> None:
    rng = np.random.default_rng(3)
    c, k, p = loss.constrained, loss.jit, loss.param_vector
    n = 50
    y = _labels(loss, n, rng)
    u = _interior_points(loss, y, rng)
    ut = np.empty((n, loss.n_aux))
    np.testing.assert_allclose(c.l0(y, u, ut, p), k.conj(y, u, p))
    cons = c.cons(y, u, ut, p)
    assert cons.shape == (n, loss.n_cons)
    assert np.all(cons <= 0.0)
    # outside the domain some constraint is violated
    lo, hi = k.conj_lower(y, p), k.conj_upper(y, p)
    outside = np.where(np.isfinite(hi), hi + 0.5, lo - 0.5)
    assert np.all(c.cons(y, outside, ut, p).max(axis=1) > 0.0)
    # gradients and Hessians by central differences
    h = 1e-6
    fd = (c.l0(y, u + h, ut, p) - c.l0(y, u - h, ut, p)) / (2 * h)
    np.testing.assert_allclose(c.l0_grad(y, u, ut, p)[:, 0], fd, atol=1e-6)
    fd = (c.l0_grad(y, u + h, ut, p) - c.l0_grad(y, u - h, ut, p)) / (2 * h)
    np.testing.assert_allclose(c.l0_hess(y, u, ut, p)[:, :, 0], fd, atol=1e-5)
    fd = (c.cons(y, u + h, ut, p) - c.cons(y, u - h, ut, p)) / (2 * h)
    np.testing.assert_allclose(c.cons_grad(y, u, ut, p)[:, :, 0], fd, atol=1e-6)
    assert c.cons_hess(y, u, ut, p).shape == (n, loss.n_cons, 1, 1)
    assert not np.any(c.cons_hess(y, u, ut, p))


@pytest.mark.parametrize("loss", LOSSES, ids=IDS)
def test_deriv_lipschitz_bounds_the_second_derivative(loss: Loss) -> None:
    rng = np.random.default_rng(4)
    y = _labels(loss, 500, rng)
    z = rng.normal(scale=3.0, size=500)
    d = loss.jit.deriv(y, z, loss.param_vector)
    order = np.argsort(z)
    # for a fixed label the derivative is L-Lipschitz in z
    for label in np.unique(y):
        sel = order[y[order] == label] if loss.task == "classification" else order
        zz = z[sel]
        dd = loss.jit.deriv(np.full(zz.shape, label), zz, loss.param_vector)
        slopes = np.abs(np.diff(dd)) / np.maximum(np.diff(zz), 1e-12)
        assert np.all(slopes <= loss.deriv_lipschitz() + 1e-9)
        if loss.task == "regression":
            break
    assert d.shape == y.shape


def test_huber_delta_must_be_positive() -> None:
    with pytest.raises(ParamError, match=r"delta must be a number > 0; got 0"):
        Huber(delta=0)
    with pytest.raises(ParamError, match=r"delta must be a number > 0; got 'x'"):
        Huber(delta="x")


def test_huber_tends_to_squared_loss_for_large_delta() -> None:
    y = np.array([0.0, 1.0, -2.0])
    z = np.array([3.0, -1.0, 0.5])
    loss = Huber(delta=100.0)
    np.testing.assert_allclose(loss.jit.value(y, z, loss.param_vector), 0.5 * (z - y) ** 2)


def test_plugin_module_registers_both_losses() -> None:
    reg = Registry()
    reg.register_plugin(huber_plugin, "mklkit-huber", "0.1.0", name="huber")
    assert reg.names("loss") == ["huber", "squared_hinge"]
    record = reg.registration("loss", "huber")
    assert (record.dist, record.version, record.cls) == ("mklkit-huber", "0.1.0", Huber)
    assert reg.create("loss", {"name": "huber", "delta": 0.5}) == Huber(delta=0.5)


# -- the conic reference from the plugin's own cvxpy expression ---------------
def _small_problem(loss: Loss, seed: int = 0):
    from mklkit.components.elasticnet import ElasticNet
    from mklkit.problem import Problem

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 3))
    K = np.array([np.exp(-g * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)) for g in (0.2, 1.0)])
    y = np.where(X[:, 0] > 0, 1.0, -1.0) if loss.task == "classification" else X[:, 0] + X[:, 1]
    return Problem(K=K, y=y, loss=loss, regularizer=ElasticNet(lam=0.5), C=0.3)


@pytest.mark.parametrize("loss", [Huber(delta=0.5), SquaredHinge()], ids=repr)
def test_the_conic_reference_solves_the_plugin_loss(loss: Loss) -> None:
    conic = pytest.importorskip("mklkit.testing.conic")
    from mklkit.engines.spicy import Spicy

    pb = _small_problem(loss)
    spec = conic.formulation(pb)
    assert spec is not None and spec["loss"] is loss
    ref = conic.solve_reference(np.asarray(pb.K), pb.y, spec["loss"], spec["reg"], pb.C)
    ours = Spicy(tol=1e-8).solve(pb)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-5)
    assert conic.primal_objective_numpy(
        np.asarray(pb.K), pb.y, ref.alpha, ref.bias, loss, spec["reg"], pb.C
    ) == pytest.approx(ref.objective, rel=1e-6)


class _TwiceHuber(Huber):
    """A Huber loss whose cvxpy expression is cvxpy's huber, twice the loss."""

    def cvxpy_expr(self, y, z, w=None):
        import cvxpy as cp

        return cp.sum(cp.huber(z - y, self.delta))


def test_a_cvxpy_expression_that_disagrees_with_the_kernels_gives_no_reference() -> None:
    conic = pytest.importorskip("mklkit.testing.conic")
    assert conic.formulation(_small_problem(Huber(delta=0.5))) is not None
    assert conic.formulation(_small_problem(_TwiceHuber(delta=0.5))) is None
