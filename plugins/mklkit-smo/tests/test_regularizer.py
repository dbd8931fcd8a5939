"""The pnorm_squared regularizer: its one-kernel form (conformance kit) and its full,
non-separable value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from mklkit.components.params import ParamError
from mklkit.testing import assert_conforms
from mklkit_smo import PnormSquared

VARIANTS = [PnormSquared(), PnormSquared(p=1.33, lam=0.5), PnormSquared(p=3.0, lam=2.0), PnormSquared(p=1.1, lam=1.0)]
IDS = [repr(r) for r in VARIANTS]


@pytest.mark.parametrize("reg", VARIANTS, ids=IDS)
def test_one_kernel_form_passes_the_conformance_kit(reg: PnormSquared) -> None:
    # On a bank of one kernel the regularizer is separable (trivially) and every
    # identity of the kit must hold: C (3/4) (2 lam)^(1/3) x^(4/3).
    assert_conforms(reg)


def test_declares_itself_non_separable_unless_p_is_2() -> None:
    reg = PnormSquared(p=1.5, lam=1.0)
    assert reg.separable is False
    assert reg.smooth_conjugate is False
    assert reg.sparse is False
    assert reg.q == pytest.approx(3.0)
    assert reg.block_exponent == pytest.approx(1.2)
    two = PnormSquared(p=2.0, lam=1.0)
    assert two.separable is True and two.smooth_conjugate is True


def _numerical_value(x: np.ndarray, p: float, lam: float) -> tuple[float, np.ndarray]:
    """min_d 1/2 sum x^2/d + lam/2 ||d||_p^2 over d > 0 (in log d)."""

    def obj(u: np.ndarray) -> float:
        d = np.exp(u)
        return 0.5 * np.sum(x * x / d) + 0.5 * lam * np.sum(d**p) ** (2.0 / p)

    best = None
    for start in (np.zeros_like(x), np.log(np.maximum(x, 1e-3))):
        r = minimize(obj, start, method="BFGS", options={"gtol": 1e-12, "maxiter": 10_000})
        if best is None or r.fun < best.fun:
            best = r
    return float(best.fun), np.exp(best.x)


@pytest.mark.parametrize("p, lam", [(1.33, 1.0), (2.0, 0.3), (3.0, 2.5)])
def test_full_value_is_the_minimum_over_kernel_weights(p: float, lam: float) -> None:
    rng = np.random.default_rng(7)
    reg = PnormSquared(p=p, lam=lam)
    for _ in range(3):
        x = rng.uniform(0.1, 2.0, size=5)
        num, d_num = _numerical_value(x, p, lam)
        assert reg.weight_norm.value(x, 1.0) == pytest.approx(num, rel=1e-7)
        assert reg.weight_norm.value(x, 2.5) == pytest.approx(2.5 * num, rel=1e-7)
        np.testing.assert_allclose(reg.weights(x), d_num, rtol=1e-4)


def test_full_value_is_a_sum_over_kernels_only_for_p_2() -> None:
    x = np.array([1.0, 0.3, 2.0])
    for p, separable in ((1.33, False), (3.0, False), (2.0, True)):
        reg = PnormSquared(p=p, lam=0.7)
        blocks = float(np.sum(reg.jit.value(x, 1.3, reg.param_vector)))
        full = reg.weight_norm.value(x, 1.3)
        if separable:
            assert full == pytest.approx(blocks, rel=1e-13)
        else:
            assert abs(full - blocks) > 1e-3 * full
        # on one kernel they always agree
        one = x[:1]
        assert reg.weight_norm.value(one, 1.3) == pytest.approx(
            float(reg.jit.value(one, 1.3, reg.param_vector)[0]), rel=1e-13
        )


def test_parameters_are_validated() -> None:
    with pytest.raises(ParamError, match=r"p must be a number > 1; got 1"):
        PnormSquared(p=1)
    with pytest.raises(ParamError, match=r"lam must be a number > 0; got 0"):
        PnormSquared(lam=0)
    with pytest.raises(ParamError, match=r"unknown parameter 'q'"):
        PnormSquared(q=2.0)
