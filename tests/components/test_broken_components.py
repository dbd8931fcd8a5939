"""Deliberately wrong components: the conformance kit must name what broke.

Each broken component differs from a correct reference (``conftest.py``) in
one place.  The test asserts that the report fails, that the expected
identity is among the failures, and that the report gives the point and the
size of the error.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from numba import njit

from mklkit.components.base import LabelError
from mklkit.testing import CheckResult, check_component

from .conftest import (
    RefElasticNet,
    RefElasticNetBregman,
    RefEpsInsensitive,
    RefHuberNorm,
    RefLogistic,
    RefPinball,
    RefSquared,
    en_conj,
    en_value,
)

N_POINTS = 24


# ---------------------------------------------------------------------------
# broken kernels
#
# Each is self-contained: numba's on-disk cache of a function does not notice
# edits to jitted functions it calls from another file, so cached kernels
# here never call the ones in conftest.py.
# ---------------------------------------------------------------------------
@njit(cache=True)
def bad_sq_conj_grad(y, u, params):
    return u + y + 0.05  # off by a constant


@njit(cache=True)
def bad_sq_conj_shift(y, u, params):
    return 0.5 * u * u + u * y + 0.1  # conjugate off by a constant


@njit(cache=True)
def bad_sq_deriv(y, z, params):
    return 1.1 * (z - y)  # derivative off by 10 %


@njit(cache=True)
def bad_sq_conj_hess(y, u, params):
    return np.full(y.shape[0], 2.0)  # second derivative is 1


@njit(cache=True)
def bad_lg_conj_x2(y, u, params):  # conjugate off by a factor 2
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        t = -y[i] * u[i]
        if t < 0.0 or t > 1.0:
            out[i] = np.inf
        else:
            a = t * np.log(t) if t > 0.0 else 0.0
            b = (1.0 - t) * np.log1p(-t) if t < 1.0 else 0.0
            out[i] = 2.0 * (a + b)
    return out


@njit(cache=True)
def bad_lg_conj_grad_x2(y, u, params):
    t = -y * u
    return -2.0 * y * (np.log(t) - np.log1p(-t))


@njit(cache=True)
def bad_lg_conj_hess_x2(y, u, params):
    t = -y * u
    return 2.0 / (t * (1.0 - t))


@njit(cache=True)
def bad_cls_lower_small(y, params):
    return np.minimum(0.0, -0.5 * y)  # domain claimed half as wide


@njit(cache=True)
def bad_cls_upper_small(y, params):
    return np.maximum(0.0, -0.5 * y)


@njit(cache=True)
def bad_ei_l0(y, u, ut, params):
    return y * u + params[0] * (u + ut[:, 0])  # eq. (35) has u + 2 ut


@njit(cache=True)
def bad_sq_conj_f32(y, u, params):
    return (0.5 * u * u + u * y).astype(np.float32)


@njit(cache=True)
def bad_en_prox_2C(v, C, params):
    lam = params[0]
    return np.maximum(v - 2.0 * C * (1.0 - lam), 0.0) / (1.0 + C * lam)  # threshold 2C


@njit(cache=True)
def bad_en_env_sq(y, C, params):
    lam = params[0]
    p = np.maximum(y - C * (1.0 - lam), 0.0) / (1.0 + C * lam)
    return p * p  # eq. (22) read as ||prox||^2, 1/2 dropped


@njit(cache=True)
def bad_en_weight_l1(x, params):
    return x.copy()  # the l1 map, not x/(1 - lam + lam x)


@njit(cache=True)
def bad_en_prox_deriv(v, C, params):
    lam = params[0]
    return np.where(v > C * (1.0 - lam), 0.5 / (1.0 + C * lam), 0.0)  # half the slope


@njit(cache=True)
def bad_en_conj_grad(y, C, params):
    lam = params[0]
    return np.maximum(y - C * (1.0 - lam), 0.0) / lam  # C missing in the denominator


@njit(cache=True)
def bad_kl_finv(theta, params):
    return np.exp(theta) + 0.01


@njit(cache=True)
def bad_en_value_raises(x, C, params):
    if x.shape[0] > 0:
        raise ValueError("value kernel failed")
    return x.copy()


@njit(cache=True)
def bad_pb_conj_ends(y, u, params):  # off by 1 % at the ends of the domain
    tau = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if u[i] == -tau or u[i] == 1.0 - tau:
            out[i] = 1.01 * u[i] * y[i]
        else:
            out[i] = u[i] * y[i] if -tau < u[i] < 1.0 - tau else np.inf
    return out


@njit(cache=True)
def bad_hn_conj_radius(y, C, params):  # off by 1 % at the radius C
    d = params[0]
    out = np.empty(y.shape[0])
    for i in range(y.shape[0]):
        if y[i] < C:
            out[i] = d * y[i] * y[i] / (2.0 * C)
        elif y[i] == C:
            out[i] = 1.01 * d * C / 2.0
        else:
            out[i] = np.inf
    return out


@njit(cache=True)
def bad_pb_lower_swapped(y, params):
    return np.full(y.shape[0], params[0] - 1.0)  # [tau - 1, tau]: right only at tau = 0.5


@njit(cache=True)
def bad_pb_upper_swapped(y, params):
    return np.full(y.shape[0], params[0])


def py_sq_conj(y, u, params):
    """A plain Python kernel (not jitted)."""
    return 0.5 * u * u + u * y


# ---------------------------------------------------------------------------
# broken components
# ---------------------------------------------------------------------------
class WrongConjGrad(RefSquared):
    name = "wrong_conj_grad"
    conj_grad = staticmethod(bad_sq_conj_grad)


class ShiftedConj(RefSquared):
    name = "shifted_conj"
    conj = staticmethod(bad_sq_conj_shift)


class WrongDeriv(RefSquared):
    name = "wrong_deriv"
    deriv = staticmethod(bad_sq_deriv)


class WrongConjHess(RefSquared):
    name = "wrong_conj_hess"
    conj_hess = staticmethod(bad_sq_conj_hess)


class ScaledConj(RefLogistic):
    """Conjugate, gradient and Hessian all doubled: internally consistent, wrong."""

    name = "scaled_conj"
    conj = staticmethod(bad_lg_conj_x2)
    conj_grad = staticmethod(bad_lg_conj_grad_x2)
    conj_hess = staticmethod(bad_lg_conj_hess_x2)


class SmallDomain(RefLogistic):
    name = "small_domain"
    conj_lower = staticmethod(bad_cls_lower_small)
    conj_upper = staticmethod(bad_cls_upper_small)


class LooseLipschitz(RefSquared):
    name = "loose_lipschitz"

    def deriv_lipschitz(self) -> float:
        return 0.5


class AcceptsZeroOne(RefLogistic):
    """A classification loss that only checks that labels are finite."""

    name = "accepts_zero_one"

    def validate_labels(self, y):
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise LabelError("labels contain NaN or inf")
        return y


class WrongL0(RefEpsInsensitive):
    name = "wrong_l0"
    l0 = staticmethod(bad_ei_l0)


class ClaimsSmoothConj(RefEpsInsensitive):
    name = "claims_smooth_conj"
    smooth_conjugate = True


class Float32Conj(RefSquared):
    name = "float32_conj"
    conj = staticmethod(bad_sq_conj_f32)


class PythonKernel(RefSquared):
    name = "python_kernel"
    conj = staticmethod(py_sq_conj)


class ProxThreshold2C(RefElasticNet):
    name = "prox_threshold_2c"
    prox = staticmethod(bad_en_prox_2C)
    env_grad = staticmethod(bad_en_prox_2C)


class WrongEnvelope(RefElasticNet):
    name = "wrong_envelope"
    env = staticmethod(bad_en_env_sq)


class WrongWeight(RefElasticNet):
    name = "wrong_weight"
    weight = staticmethod(bad_en_weight_l1)


class WrongProxDeriv(RefElasticNet):
    name = "wrong_prox_deriv"
    prox_deriv = staticmethod(bad_en_prox_deriv)
    env_hess = staticmethod(bad_en_prox_deriv)


class WrongRegConjGrad(RefElasticNet):
    name = "wrong_reg_conj_grad"
    conj_grad = staticmethod(bad_en_conj_grad)


class SmallRadius(RefElasticNet):
    name = "small_radius"

    def conj_radius(self, C: float) -> float:
        return 0.5 * float(C) if self.lam == 0.0 else float("inf")


class ClaimsSparse(RefElasticNet):
    name = "claims_sparse"

    @property
    def sparse(self) -> bool:
        return True


class WrongFinv(RefElasticNetBregman):
    name = "wrong_finv"
    bregman_finv = staticmethod(bad_kl_finv)


class PinballConjOffAtEnds(RefPinball):
    name = "pinball_conj_off_at_ends"
    conj = staticmethod(bad_pb_conj_ends)


class HuberNormConjOffAtRadius(RefHuberNorm):
    name = "huber_norm_conj_off_at_radius"
    conj = staticmethod(bad_hn_conj_radius)


class SwappedPinball(RefPinball):
    """The domain of the conjugate written for the mirrored quantile."""

    name = "swapped_pinball"
    conj_lower = staticmethod(bad_pb_lower_swapped)
    conj_upper = staticmethod(bad_pb_upper_swapped)


class RaisingValue(RefElasticNet):
    name = "raising_value"
    value = staticmethod(bad_en_value_raises)


# (component, identities that must fail, keys of the point reported for the first one)
CASES = [
    (WrongConjGrad(), ["conj_grad_fd", "fenchel_young"], ["y", "u"]),
    (ShiftedConj(), ["conj_sup", "fenchel_young"], ["y", "u"]),
    (WrongDeriv(), ["deriv_fd", "fenchel_young"], ["y", "z"]),
    (WrongConjHess(), ["conj_hess_fd"], ["y", "u"]),
    (ScaledConj(), ["conj_sup", "fenchel_young"], ["y", "u"]),
    (SmallDomain(), ["conj_domain", "conj_unbounded"], ["y", "u"]),
    (LooseLipschitz(), ["deriv_lipschitz"], ["y", "z"]),
    pytest.param(WrongL0(), ["constrained_value"], ["y", "u"], marks=pytest.mark.slow),
    pytest.param(
        ProxThreshold2C(lam=0.0),
        ["prox_optimality", "prox_numeric", "moreau_decomposition"],
        ["v", "C"],
        marks=pytest.mark.slow,
    ),
    (ProxThreshold2C(lam=0.4), ["prox_optimality", "prox_numeric"], ["v", "C"]),
    (WrongEnvelope(lam=0.0), ["moreau_decomposition", "env_min", "env_grad_fd"], ["y", "C"]),
    (WrongWeight(lam=0.5), ["weight_value", "weight_argmin"], ["x"]),
    (WrongProxDeriv(lam=0.5), ["prox_deriv_fd", "env_hess_fd"], ["v", "C"]),
    (WrongRegConjGrad(lam=0.5), ["conj_grad_fd", "fenchel_young"], ["y", "C"]),
    (SmallRadius(lam=0.0), ["conj_domain", "conj_unbounded"], ["y", "C"]),
    (WrongFinv(lam=0.3), ["bregman_finv"], ["d"]),
    (PinballConjOffAtEnds(tau=0.3), ["conj_sup"], ["y", "u"]),
    (HuberNormConjOffAtRadius(delta=0.5), ["conj_sup"], ["y", "C"]),
]


@pytest.mark.parametrize("component, identities, keys", CASES, ids=lambda c: getattr(c, "name", None))
def test_broken_component_fails_with_point_and_error(component, identities, keys):
    report = check_component(component, n_points=N_POINTS, seed=1)
    assert not report.ok
    failed = {c.identity: c for c in report.failures}
    text = str(report)
    for name in identities:
        assert name in failed, f"{name} did not fail:\n{text}"
        res = failed[name]
        assert isinstance(res, CheckResult) and res.passed is False
        # the worst point, its parameters, the error and the tolerance
        assert res.point is not None, res
        if name == identities[0]:
            assert set(keys) <= set(res.point), res.point
        assert res.point["params"] == component.get_params()
        assert res.worst_error > res.tolerance >= 0.0
        assert re.search(rf"FAIL\s+{name}\b", text)
    # every failing identity prints where and by how much
    for res in report.failures:
        line = next(ln for ln in text.splitlines() if re.search(rf"FAIL\s+{res.identity}\b", ln))
        assert res.detail in line
        if res.point is not None:
            assert "at " + ", ".join(f"{k}=" for k in list(res.point)[:1]) in text
    assert "|error| = " in text and "> tolerance" in text
    if any(math.isfinite(res.worst_error) for res in report.failures):
        assert "relative" in text


def test_report_text_of_a_broken_conjugate_gradient():
    report = check_component(WrongConjGrad(), n_points=N_POINTS, seed=1)
    res = report["conj_grad_fd"]
    assert res.worst_error == pytest.approx(0.05, rel=1e-3)
    assert res.tolerance < 1e-4
    text = str(report)
    assert "conj_grad vs central difference of conj" in text
    assert f"u={res.point['u']:.10g}" in text
    assert re.search(r"\|error\| = 5\.0\d\de-02 > tolerance", text)
    assert "relative error" in res.detail and "fails at" in res.detail


def test_loss_accepting_zero_one_labels_fails_labels():
    report = check_component(AcceptsZeroOne(), n_points=N_POINTS, seed=0)
    failed = {c.identity: c for c in report.failures}
    assert set(failed) == {"labels"}, str(report)
    assert "accepted labels {0, 1}" in failed["labels"].detail
    assert failed["labels"].worst_error == math.inf


def test_declared_smooth_conjugate_with_bounded_gradient_fails():
    report = check_component(ClaimsSmoothConj(), n_points=N_POINTS, seed=0)
    res = report["smooth_conjugate_claim"]
    assert not res.passed
    assert "does not grow without bound" in res.detail
    assert res.point is not None and {"y", "u"} <= set(res.point)


def test_float32_output_fails_kernel_shapes():
    report = check_component(Float32Conj(), n_points=N_POINTS, seed=0)
    res = report["kernel_shapes"]
    assert not res.passed
    assert "dtype float32" in res.detail


def test_plain_python_kernel_fails_numba_kernels():
    report = check_component(PythonKernel(), n_points=N_POINTS, seed=0)
    assert [c.identity for c in report.failures] == ["numba_jit"], str(report)
    assert "conj must be numba-jitted functions" in report["numba_jit"].detail
    assert report["numba_jit"].detail.endswith("; got function")


def test_wrong_sparse_claim_fails():
    report = check_component(ClaimsSparse(lam=1.0), n_points=N_POINTS, seed=0)
    res = report["sparse_claim"]
    assert not res.passed
    assert "sparse is True" in res.detail


def test_raising_kernel_fails_its_identity_and_the_rest_still_run():
    report = check_component(RaisingValue(lam=0.5), n_points=N_POINTS, seed=0)
    assert not report.ok
    res = report["kernel_shapes"]
    assert not res.passed
    assert "raised ValueError: value kernel failed" in res.detail
    assert res.worst_error == math.inf
    # identities that never call value are still checked and pass
    assert report["conj_grad_fd"].passed and report["conj_hess_fd"].passed
    # those of a group whose first step raised are reported as not checked
    res = report["env_grad_prox"]
    assert not res.passed
    assert res.detail == "not checked: moreau_decomposition raised ValueError first"


def test_conj_checks_are_not_fooled_by_a_conjugate_of_the_wrong_scale():
    # en_conj evaluated with C/2: a valid convex function but not the conjugate
    @njit(cache=False)
    def half_c_conj(y, C, params):
        return en_conj(y, 0.5 * C, params)

    class HalfC(RefElasticNet):
        name = "half_c"
        conj = staticmethod(half_c_conj)

    report = check_component(HalfC(lam=0.5), n_points=N_POINTS, seed=2)
    failed = {c.identity for c in report.failures}
    assert {"conj_sup", "fenchel_young"} <= failed, str(report)


def test_value_kernel_is_used_consistently():
    # a value off by a factor breaks prox optimality and the weight identity
    @njit(cache=False)
    def double_value(x, C, params):
        return 2.0 * en_value(x, C, params)

    class Doubled(RefElasticNet):
        name = "doubled"
        value = staticmethod(double_value)

    report = check_component(Doubled(lam=0.5), n_points=N_POINTS, seed=3)
    failed = {c.identity for c in report.failures}
    assert {"prox_optimality", "conj_sup", "weight_value", "moreau_decomposition"} <= failed, str(report)
    assert report["env_grad_prox"].passed


@pytest.mark.parametrize(
    "component, end",
    [
        (PinballConjOffAtEnds(tau=0.3), lambda pt: pt["u"] in (-0.3, 0.7)),
        (HuberNormConjOffAtRadius(delta=0.5), lambda pt: pt["y"] == pt["C"]),
    ],
    ids=["loss", "regularizer"],
)
def test_conjugate_off_by_one_percent_where_the_supremum_is_flat_fails_conj_sup(component, end):
    # At the end of the domain the supremum is flat out to |z| ~ 1e8: a tolerance
    # scaled by |u z| there (about 2e+01) let a 1 % error through; it is relative
    # to the conjugate now.
    res = check_component(component, n_points=N_POINTS, seed=1)["conj_sup"]
    assert not res.passed
    assert end(res.point), res.point
    assert "relative error 9.9" in res.detail, res.detail  # 0.01 / 1.01


@pytest.mark.parametrize("component", [RefPinball(tau=0.3), RefHuberNorm(delta=0.5)], ids=repr)
def test_conj_sup_tolerance_is_relative_to_the_values_compared(component):
    # The conjugates are of order 1 here.  The tolerance is rtol (1e-6) times
    # that, plus the rounding of u z - l (64 ulps of each term) where the flat
    # supremum is found at |z| ~ 1e8: about 5e-5 at most, not rtol |u z| (2e+01).
    res = check_component(component, n_points=N_POINTS, seed=1)["conj_sup"]
    assert res.passed, res.detail
    assert res.tolerance < 1e-4, res.detail


class _ThresholdOffByOnePercent(RefElasticNet):
    """A correct elastic net whose own zero_threshold (the engines' C_max) is 1 % high."""

    name = "en_bad_threshold"

    def zero_threshold(self, C: float) -> float:
        return 1.01 * super().zero_threshold(C)


def test_a_zero_threshold_off_by_one_percent_fails():
    report = check_component(_ThresholdOffByOnePercent(), n_points=N_POINTS)
    assert [f.identity for f in report.failures] == ["zero_threshold"], str(report)
    assert "right derivative of value at 0" in report["zero_threshold"].detail
    assert check_component(RefElasticNet(), n_points=N_POINTS)["zero_threshold"].passed
