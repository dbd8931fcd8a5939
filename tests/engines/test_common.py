"""Shared engine quantities (``mklkit.engines.common``) and the jitted block loops,
checked against direct numpy on small random PSD kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mklkit._jit import blocks
from mklkit._jit import spicy as kspicy
from mklkit.components.losses import Hinge, Logistic, Squared
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.problem import Problem
from mklkit.result import Status

M, N = 5, 14


def random_bank(seed: int, M: int = M, N: int = N) -> np.ndarray:
    """PSD kernels of varying rank (one rank-1), unit trace."""
    rng = np.random.default_rng(seed)
    K = np.empty((M, N, N))
    for m in range(M):
        r = 1 if m == 0 else int(rng.integers(2, N + 1))
        A = rng.standard_normal((N, r))
        Km = A @ A.T
        K[m] = Km / np.trace(Km)
    return K


def labels(seed: int, n: int = N) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[0], y[1] = 1.0, -1.0
    return y


def np_norms(K, V):
    """||v_m||_{K_m} for rows v_m of V (or one vector for all m)."""
    V = np.broadcast_to(V, (K.shape[0], K.shape[1]))
    return np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", V, K, V), 0.0))


# ---------------------------------------------------------------------------
# jitted loops
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_loops_match_numpy(seed):
    K = random_bank(seed)
    rng = np.random.default_rng(100 + seed)
    v = rng.standard_normal(N)
    A = rng.standard_normal((M, N))
    A[2] = 0.0
    idx = np.array([3, 0, 4], dtype=np.int64)
    KV = np.einsum("mij,j->mi", K, v)
    np.testing.assert_allclose(blocks.block_norms(K, v[None, :]), np_norms(K, v), rtol=1e-12)
    np.testing.assert_allclose(blocks.block_norms(K, A), np_norms(K, A), rtol=1e-12)
    assert blocks.block_norms(K, A)[2] == 0.0
    np.testing.assert_allclose(blocks.matvecs_rows(K, v[None, :], idx), KV[idx], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        blocks.combine(K, A, idx), np.einsum("mij,mj->i", K[idx], A[idx]), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("block", [1, 3, 64])
def test_hessian_and_direction_forms_match_numpy(block):
    K = random_bank(7)
    rng = np.random.default_rng(8)
    rho, d = rng.standard_normal(N), rng.standard_normal(N)
    KR = np.ascontiguousarray(np.einsum("mij,j->mi", K, rho))
    idx = np.array([1, 4], dtype=np.int64)
    s, t = np.array([0.3, 2.0]), np.array([-0.1, 0.5])
    H = np.eye(N)
    kspicy.accumulate_hessian(H, K, idx, s, np.ascontiguousarray(KR[idx]), t, block)
    expect = np.eye(N) + sum(s[p] * K[m] + t[p] * np.outer(KR[m], KR[m]) for p, m in enumerate(idx))
    np.testing.assert_allclose(H, expect, rtol=1e-12, atol=1e-14)

    KD, b, e = kspicy.direction_forms(K, d, KR)
    np.testing.assert_allclose(KD, np.einsum("mij,j->mi", K, d), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(b, np.einsum("i,mij,j->m", d, K, rho), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(e, np.einsum("i,mij,j->m", d, K, d), rtol=1e-10, atol=1e-14)
    c = 0.37
    a = np.einsum("i,mij,j->m", rho, K, rho)
    np.testing.assert_allclose(np.sqrt(a + 2 * c * b + c * c * e), np_norms(K, rho + c * d), rtol=1e-10)


def _twin_calls():
    """(name, call(fn) -> outputs) for every loop compiled with and without threads."""
    K = random_bank(21)
    rng = np.random.default_rng(22)
    v, w = rng.standard_normal(N), rng.standard_normal(N)
    idx = np.array([4, 1, 2], dtype=np.int64)
    A = rng.standard_normal((idx.size, N))
    KR = np.ascontiguousarray(np.einsum("mij,j->mi", K, v))
    s, t = rng.standard_normal(idx.size), rng.standard_normal(idx.size)
    R = 9
    D = rng.standard_normal((R, N))
    starts = np.array([0, 1, 3, 6, 8, 9], dtype=np.int64)
    kern = np.array([0, 3, 3, 4], dtype=np.int64)
    V, W = rng.standard_normal((2, N)), rng.standard_normal((2, N))
    sel, none, inone = np.array([0, 1, 1, 0], dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64)

    def hessian(fn):
        H = np.eye(N)
        fn(H, K, idx, s, np.ascontiguousarray(KR[idx]), t, 3)
        return (H,)

    def products(fn):
        out = np.zeros((kern.size, N))
        return (*fn(D, none, inone, inone, starts, kern, V, sel, W, sel[::-1].copy(), True, out, True), out)

    return [
        ("blocks.matvecs_rows", lambda fn: (fn(K, A, idx), fn(K, v[None, :], idx))),
        (
            "proximal.certificate_pass",
            lambda fn: fn(K, idx, A, np.array([0, -1, 2], dtype=np.int64), w, np.array([True, True, False])),
        ),
        ("spicy.accumulate_hessian", hessian),
        ("spicy.direction_forms", lambda fn: fn(K, w, KR)),
        ("spicy.matvecs_and_norms", lambda fn: fn(K, v, w)),
        ("factor.block_products", products),
    ]


@pytest.mark.parametrize("name, call", _twin_calls(), ids=[n for n, _ in _twin_calls()])
def test_serial_loops_equal_their_parallel_twins(name, call):
    """Each loop compiled without threads (``<name>_serial``) gives the threaded one's
    results bit for bit (one Python body, compiled twice)."""
    import importlib

    module, fn = name.split(".")
    mod = importlib.import_module(f"mklkit._jit.{module}")
    par, ser = call(getattr(mod, fn)), call(getattr(mod, fn + "_serial"))
    assert len(par) == len(ser)
    for a, b in zip(par, ser):
        assert np.array_equal(a, b)
    assert np.any(np.asarray(par[0]) != 0.0)


@pytest.mark.parametrize("reg", [ElasticNet(lam=0.4), Lq(q=1.5), Lq(q=3.0), Uniform()], ids=repr)
def test_dual_hessian_eq50_is_derivative_of_gradient_eq49(reg):
    """The active-set Hessian (50) is the Jacobian of the gradient (49)."""
    K = random_bank(11)
    C = 0.05
    rng = np.random.default_rng(12)
    rho = rng.standard_normal(N) * 0.3
    rk, pr = reg.jit, reg.param_vector

    def grad(r):
        n = np_norms(K, r)
        G1 = rk.conj_grad(n, C, pr)
        return np.einsum("m,mi->i", G1 / n, np.einsum("mij,j->mi", K, r))

    n = np_norms(K, rho)
    G1, G2 = rk.conj_grad(n, C, pr), rk.conj_hess(n, C, pr)
    assert np.any(G1 > 0)
    idx = np.flatnonzero((G1 > 0) | (G2 > 0)).astype(np.int64)
    s = G1[idx] / n[idx]
    t = (G2[idx] - s) / n[idx] ** 2
    KR = np.ascontiguousarray(np.einsum("mij,j->mi", K[idx], rho))
    H = np.zeros((N, N))
    kspicy.accumulate_hessian(H, K, idx, s, KR, t, 4)
    h = 1e-6
    J = np.array([(grad(rho + h * e) - grad(rho - h * e)) / (2 * h) for e in np.eye(N)]).T
    np.testing.assert_allclose(H, J, rtol=1e-5, atol=1e-6 * np.max(np.abs(J)))


# ---------------------------------------------------------------------------
# objectives
# ---------------------------------------------------------------------------
def np_loss(name, y, z):
    if name == "logistic":
        return np.sum(np.log1p(np.exp(-y * z)))
    if name == "squared":
        return np.sum((y - z) ** 2)
    if name == "hinge":
        return np.sum(np.maximum(0.0, 1 - y * z))
    raise AssertionError(name)


def np_loss_conj(name, y, rho):
    """sum_i l*(y_i, -rho_i), written out (SpicyMKL eqs. 16, 17)."""
    if name == "logistic":
        t = y * rho
        if np.any(t < 0) or np.any(t > 1):
            return math.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(t > 0, t * np.log(t), 0.0) + np.where(t < 1, (1 - t) * np.log1p(-t), 0.0)
        return float(np.sum(v))
    if name == "squared":
        return float(np.sum(-rho * y + rho**2 / 4))
    if name == "hinge":
        t = y * rho
        if np.any(t < 0) or np.any(t > 1):
            return math.inf
        return float(np.sum(-t))
    raise AssertionError(name)


def np_reg(reg, x, C):
    if isinstance(reg, ElasticNet):
        return C * np.sum((1 - reg.lam) * x + reg.lam / 2 * x**2)
    if isinstance(reg, Lq):
        return C / reg.q * np.sum(x**reg.q)
    if isinstance(reg, Uniform):
        return C / 2 * np.sum(x**2)
    if isinstance(reg, L1):
        return C * np.sum(x)
    raise AssertionError(reg)


def np_reg_conj(reg, x, C):
    """sum_m g~*_C(x_m) (SpicyMKL eqs. 21, 46, §4.3.2)."""
    if isinstance(reg, ElasticNet):
        return np.sum(np.maximum(x - C * (1 - reg.lam), 0.0) ** 2) / (2 * C * reg.lam)
    if isinstance(reg, Lq):
        r = reg.q / (reg.q - 1)
        return C ** (1 - r) * np.sum(x**r) / r
    if isinstance(reg, Uniform):
        return np.sum(x**2) / (2 * C)
    if isinstance(reg, L1):
        return 0.0 if np.all(x <= C * (1 + 1e-12)) else math.inf
    raise AssertionError(reg)


COMBOS = [
    (Logistic(), ElasticNet(lam=0.3)),
    (Logistic(), Lq(q=1.5)),
    (Squared(), Lq(q=3.0)),
    (Squared(), Uniform()),
    (Hinge(), L1()),
    (Logistic(), L1()),
]
COMBO_IDS = [f"{lo.name}-{rg.name}" for lo, rg in COMBOS]


def feasible_rho(loss, y, rng):
    """A random dual point inside the loss conjugate's domain (not yet centred)."""
    if loss.name in ("logistic", "hinge"):
        return y * rng.uniform(0.05, 0.95, y.size)
    return rng.standard_normal(y.size)


@pytest.mark.parametrize("loss,reg", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("bias", [True, False])
def test_objectives_match_numpy(loss, reg, bias):
    K = random_bank(3)
    y = labels(4)
    C = 0.2
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=C, bias=bias)
    rng = np.random.default_rng(5)
    alpha = rng.standard_normal((M, N))
    alpha[1] = 0.0
    b = 0.4
    x = np_norms(K, alpha)
    z = np.einsum("mij,mj->i", K, alpha) + (b if bias else 0.0)
    np.testing.assert_allclose(common.block_norms(K, alpha), x, rtol=1e-12)
    np.testing.assert_allclose(common.predict(K, alpha, b if bias else 0.0), z, rtol=1e-12)
    expect_p = np_loss(loss.name, y, z) + np_reg(reg, x, C)
    assert common.primal_objective(pb, alpha, b) == pytest.approx(expect_p, rel=1e-12)

    rho = feasible_rho(loss, y, rng) * 0.02
    n = np_norms(K, rho)
    np.testing.assert_allclose(common.dual_block_norms(K, rho), n, rtol=1e-12)
    expect_d = -(np_loss_conj(loss.name, y, rho) + np_reg_conj(reg, n, C))
    assert common.dual_objective(pb, rho) == pytest.approx(expect_d, rel=1e-10)


@pytest.mark.parametrize("loss,reg", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("seed", range(4))
def test_weak_duality_at_random_feasible_points(loss, reg, seed):
    """D(projected rho) <= P(alpha, b) for arbitrary alpha, b and rho (SpicyMKL §6.1)."""
    K = random_bank(20 + seed)
    y = labels(30 + seed)
    rng = np.random.default_rng(seed)
    C = float(rng.choice([0.01, 0.3, 3.0]))
    pb = Problem(K=K, y=y, loss=loss, regularizer=reg, C=C)
    rho = feasible_rho(loss, y, rng)
    if loss.name in ("logistic", "hinge"):
        # centre within the box: equal mass on both classes keeps y*rho in (0, 1)
        pos, neg = y > 0, y < 0
        rho[pos] *= min(1.0, np.sum(rho[neg] * -1) / np.sum(rho[pos]))
        rho[neg] *= min(1.0, np.sum(rho[pos]) / np.sum(-rho[neg]))
    D, rho_f, n_f = common.projected_dual_objective(pb, rho)
    assert abs(np.sum(rho_f)) <= 1e-12 * np.sum(np.abs(rho_f))
    np.testing.assert_allclose(n_f, np_norms(K, rho_f), rtol=1e-10, atol=1e-15)
    assert math.isfinite(D)
    for _ in range(5):
        alpha = rng.standard_normal((M, N)) * rng.choice([0.01, 1.0, 10.0])
        b = rng.standard_normal()
        P = common.primal_objective(pb, alpha, b)
        assert D <= P + 1e-10 * abs(P)
        assert common.relative_gap(P, D) >= -1e-10


def test_project_dual_scales_into_the_l1_ball_and_centres():
    K = random_bank(40)
    y = labels(41)
    C = 0.01
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=C)
    rho = y * 0.5 + 0.01
    rho_f, n_f = common.project_dual(pb, rho)
    centred = rho - rho.mean()
    scale = max(np.max(np_norms(K, centred)) / C, 1.0)
    assert scale > 1.0
    np.testing.assert_allclose(rho_f, centred / scale, rtol=1e-12)
    assert np.max(n_f) == pytest.approx(C, rel=1e-12)
    assert np.sum(rho_f) == pytest.approx(0.0, abs=1e-14)


def test_project_dual_reuses_norms_only_for_centred_points():
    K = random_bank(42)
    y = labels(43)
    # the squared loss has an unbounded conjugate domain: the projection is the centring
    pb = Problem(K=K, y=y, loss=Squared(), regularizer=ElasticNet(lam=0.5), C=1.0)
    rho = np.random.default_rng(0).standard_normal(N)
    wrong = np.full(M, 123.0)
    _, n1 = common.project_dual(pb, rho, norms=wrong)  # not centred: recomputed
    np.testing.assert_allclose(n1, np_norms(K, rho - rho.mean()), rtol=1e-12)
    centred = rho - rho.mean()
    _, n2 = common.project_dual(pb, centred, norms=wrong)  # centred: kept
    np.testing.assert_array_equal(n2, wrong)
    nb = Problem(K=K, y=y, loss=Squared(), regularizer=ElasticNet(lam=0.5), C=1.0, bias=False)
    r3, _ = common.project_dual(nb, rho)
    np.testing.assert_array_equal(r3, rho)  # no bias: no constraint


def brute_force_projection(rho, lo, hi):
    """argmin ||r - rho|| over {sum r = 0, lo <= r <= hi}, by a dense scan of the shift."""
    taus = np.linspace(-5, 5, 200001)
    sums = np.array([np.sum(np.clip(rho - t, lo, hi)) for t in taus[::100]])
    i = int(np.argmin(np.abs(sums)))
    fine = taus[max(0, (i - 1) * 100) : (i + 1) * 100 + 1]
    s = np.array([np.sum(np.clip(rho - t, lo, hi)) for t in fine])
    return np.clip(rho - fine[int(np.argmin(np.abs(s)))], lo, hi)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_project_sum_box_is_the_euclidean_projection(seed):
    rng = np.random.default_rng(seed)
    n = 25
    y = np.where(rng.random(n) < 0.4, -1.0, 1.0)
    lo, hi = np.minimum(0.0, y), np.maximum(0.0, y)  # 0 <= y rho <= 1 (hinge, logistic)
    rho = y * rng.uniform(-0.5, 1.5, n) + 0.3 * rng.standard_normal(n)
    r = common.project_sum_box(rho, lo, hi)
    assert abs(np.sum(r)) <= 1e-12 * np.sum(np.abs(r))
    assert np.all(r >= lo) and np.all(r <= hi)
    np.testing.assert_allclose(r, brute_force_projection(rho, lo, hi), atol=1e-4)
    # optimality (variational inequality): (rho - r)'(x - r) <= 0 for feasible x
    for _ in range(20):
        x = common.project_sum_box(rng.standard_normal(n), lo, hi)
        assert (rho - r) @ (x - r) <= 1e-10
    # plain centring would leave the box here
    c = rho - rho.mean()
    assert np.any((c < lo) | (c > hi))


def sorted_reference_projection(rho, lo, hi):
    r"""The projection from a linear scan of the sorted breakpoints of the shift.

    :math:`S(\tau) = \sum_i \mathrm{clip}(\rho_i - \tau, l_i, u_i)` is linear between
    consecutive breakpoints (and beyond the outer ones, to far sentinels), so
    the root follows exactly by interpolation on the piece where S changes sign.
    """
    bp = np.concatenate([rho - hi, rho - lo])
    bp = np.unique(bp[np.isfinite(bp)])
    finite = np.concatenate([np.abs(rho), np.abs(lo[np.isfinite(lo)]), np.abs(hi[np.isfinite(hi)])])
    span = 10.0 * rho.size * (1.0 + float(np.max(finite)))
    pts = (
        np.concatenate([[-span], bp, [span]]) if bp.size == 0 else np.concatenate([[bp[0] - span], bp, [bp[-1] + span]])
    )
    S = np.array([np.sum(np.clip(rho - t, lo, hi)) for t in pts])
    k = int(np.flatnonzero((S[:-1] >= 0.0) & (S[1:] <= 0.0))[0])
    if S[k] == S[k + 1]:
        tau = pts[k]
    else:
        tau = pts[k] + (pts[k + 1] - pts[k]) * S[k] / (S[k] - S[k + 1])
    return np.clip(rho - tau, lo, hi)


_VALUES = st.one_of(st.floats(-10.0, 10.0), st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]))


@st.composite
def _boxes(draw):
    """``(rho, lower, upper)`` with a non-empty feasible set: mixed infinite ends, ties."""
    n = draw(st.integers(1, 30))
    rho = np.array(draw(st.lists(_VALUES, min_size=n, max_size=n)))
    a = np.array(draw(st.lists(_VALUES, min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.one_of(st.floats(0.0, 5.0), st.just(0.0)), min_size=n, max_size=n)))
    kind = np.array(draw(st.lists(st.sampled_from(["box", "box", "lower", "upper", "free"]), min_size=n, max_size=n)))
    lo = np.where(np.isin(kind, ["box", "lower"]), a, -np.inf)
    hi = np.where(kind == "box", a + w, np.where(kind == "upper", a, np.inf))
    assume(np.sum(lo) < 0.0 < np.sum(hi))  # a feasible set with some room
    return rho, lo, hi


@settings(max_examples=300, deadline=None)
@given(_boxes())
def test_project_sum_box_matches_the_sorted_reference(box):
    rho, lo, hi = box
    r = common.project_sum_box(rho, lo, hi)
    ref = sorted_reference_projection(rho, lo, hi)
    scale = 1.0 + float(np.max(np.abs(ref)))
    assert np.all(r >= lo) and np.all(r <= hi)
    assert abs(np.sum(r)) <= 1e-12 * rho.size * scale
    np.testing.assert_allclose(r, ref, rtol=0, atol=1e-9 * rho.size * scale)


def test_project_sum_box_unbounded_sides_and_infeasible():
    rho = np.array([3.0, -1.0, 0.5])
    lo = np.array([-np.inf, -np.inf, 0.0])
    hi = np.array([np.inf, 0.0, np.inf])
    r = common.project_sum_box(rho, lo, hi)
    assert abs(np.sum(r)) < 1e-14 and r[1] <= 0 and r[2] >= 0
    with pytest.raises(ValueError, match="zero sum"):
        common.project_sum_box(rho, np.array([0.1, 0.0, 0.0]), np.ones(3))


def test_project_dual_keeps_the_hinge_box():
    """Centring alone leaves the hinge conjugate's domain (D = -inf); the box projection does not."""
    K = random_bank(44)
    y = labels(45)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    rho = y * np.linspace(0.0, 1.0, N) + 0.2  # outside the box and not centred
    D, rho_f, n_f = common.projected_dual_objective(pb, rho)
    assert math.isfinite(D)
    assert np.all(y * rho_f >= 0) and np.all(y * rho_f <= 1)
    assert abs(np.sum(rho_f)) <= 1e-12 * np.sum(np.abs(rho_f))
    assert np.max(n_f) <= 0.05 * (1 + 1e-12)
    np.testing.assert_allclose(n_f, np_norms(K, rho_f), rtol=1e-10)
    c = rho - rho.mean()
    assert not math.isfinite(common.dual_objective(pb, c))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_centre_dual_is_the_projection_and_the_shift_inside(seed):
    rng = np.random.default_rng(seed)
    n = 25
    y = np.where(rng.random(n) < 0.4, -1.0, 1.0)
    lo, hi = np.minimum(0.0, y), np.maximum(0.0, y)  # 0 <= y rho <= 1
    # far from the box: the exact projection
    rho = y * rng.uniform(-0.5, 1.5, n) + 0.3 * rng.standard_normal(n)
    r = common.centre_dual(rho, lo, hi)
    np.testing.assert_allclose(r, sorted_reference_projection(rho, lo, hi), atol=1e-12)
    assert np.all(r >= lo) and np.all(r <= hi)
    # inside, with a residue the shift absorbs: the plain centring, which is the projection
    inner = y * rng.uniform(0.2, 0.8, n)
    inner += 1e-3 * rng.standard_normal(n)
    c = common.centre_dual(inner, lo, hi)
    np.testing.assert_array_equal(c, inner - np.sum(inner) / n)
    np.testing.assert_allclose(c, sorted_reference_projection(inner, lo, hi), atol=1e-12)
    assert abs(np.sum(c)) <= 1e-14 * np.sum(np.abs(c))
    # without a bias: the clipping
    np.testing.assert_array_equal(common.centre_dual(rho, lo, hi, bias=False), np.clip(rho, lo, hi))
    with pytest.raises(ValueError, match="zero sum"):
        common.centre_dual(rho, np.abs(lo) + 0.1, np.abs(hi) + 0.2)


def test_certificate_at_projects_and_assembles_the_gap():
    K = random_bank(46)
    y = labels(47)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    rho = y * np.linspace(0.0, 1.0, N) + 0.2  # outside the box and not centred
    norms = np.linspace(0.0, 1.0, M)
    cert = common.Certificate.at(pb, 3.0, rho, norms, bias=0.5)
    D, rho_f, _ = common.projected_dual_objective(pb, rho)
    assert cert.primal == 3.0 and cert.dual == D and math.isfinite(D)
    assert cert.gap == common.relative_gap(3.0, D)
    np.testing.assert_array_equal(cert.rho, rho_f)
    assert cert.norms is norms and cert.extra == {"bias": 0.5}
    other = common.Certificate.of(2.0, -math.inf, rho, norms)
    assert other.gap == math.inf and other.extra == {}


def test_certify_keeps_the_better_dual_point():
    K = random_bank(48)
    y = labels(49)
    pb = Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05)
    alpha = 0.01 * np.random.default_rng(1).standard_normal((M, N))
    own = common.certify(pb, alpha, 0.1)
    assert own.primal == pytest.approx(common.primal_objective(pb, alpha, 0.1), rel=1e-12)
    assert math.isfinite(own.dual) and own.dual <= own.primal
    # a dual point that certifies more is kept, one that certifies less is not
    better = common.zero_solution(Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=1e6)).rho
    D_better = common.projected_dual_objective(pb, better)[0]
    both = common.certify(pb, alpha, 0.1, rho=better)
    assert both.dual == max(own.dual, D_better)
    assert both.gap == common.relative_gap(both.primal, both.dual)
    assert common.certify(pb, alpha, 0.1, rho=np.full(N, np.nan)).dual == own.dual


@pytest.mark.parametrize(
    "P,D,expect", [(10.0, 9.0, 0.1), (-4.0, -5.0, 0.25), (0.0, -1e-3, 1e-3), (2.0, -math.inf, math.inf)]
)
def test_relative_gap(P, D, expect):
    assert common.relative_gap(P, D) == pytest.approx(expect, rel=1e-12)


def test_relative_gap_nan():
    assert math.isnan(common.relative_gap(math.nan, 1.0))


def test_kernel_weights_elasticnet_formula():
    reg = ElasticNet(lam=0.3)
    x = np.array([0.0, 0.5, 2.0, 0.0, 1.0])
    w = common.kernel_weights(reg, x)
    d = np.where(x > 0, x / (1 - 0.3 + 0.3 * x), 0.0)  # SpicyMKL §4.1
    np.testing.assert_allclose(w, d / d.sum(), rtol=1e-12)
    assert w[0] == 0.0 and w[3] == 0.0
    assert np.sum(w) == pytest.approx(1.0)
    assert np.all(common.kernel_weights(reg, np.zeros(3)) == 0.0)


def test_kernel_weights_zero_blocks_stay_zero_for_lq_above_two():
    reg = Lq(q=3.0)
    x = np.array([0.0, 0.5, 2.0])
    w = common.kernel_weights(reg, x)
    d = np.array([0.0, 0.5**-1, 2.0**-1])
    np.testing.assert_allclose(w, d / d.sum(), rtol=1e-12)


@pytest.mark.parametrize("loss", [Logistic(), Squared()], ids=lambda c: c.name)
def test_optimal_bias_is_the_minimizer(loss):
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(3)
    y = labels(9, 40)
    f = rng.standard_normal(40) * 2
    b = common.optimal_bias(loss, y, f, b0=5.0)
    ref = minimize_scalar(lambda t: np_loss(loss.name, y, f + t), bracket=(-3, 3), tol=1e-12).x
    assert b == pytest.approx(ref, abs=1e-6)
    if loss.name == "squared":
        assert b == pytest.approx(np.mean(y - f), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimal_bias_of_piecewise_linear_losses(seed):
    """The hinge sum has zero curvature: bracketing + bisection find its minimum."""
    rng = np.random.default_rng(seed)
    y = labels(20 + seed, 60)
    f = rng.standard_normal(60) * rng.choice([0.1, 1.0, 10.0])
    loss = Hinge()
    b0 = float(rng.normal(0, 5))
    b = common.optimal_bias(loss, y, f, b0=b0)
    grid = np.linspace(-30, 30, 60001)
    vals = np.array([np_loss("hinge", y, f + t) for t in grid])
    assert np_loss("hinge", y, f + b) <= vals.min() + 1e-9
    # a minimizer: no one-sided slope is negative (0 is in the subdifferential)
    h = 1e-7
    phi = np_loss("hinge", y, f + b)
    # (a wrong-side slope is an integer >= 1 here: a drop of >= h = 1e-7)
    assert np_loss("hinge", y, f + b + h) - phi >= -1e-12 * phi
    assert np_loss("hinge", y, f + b - h) - phi >= -1e-12 * phi
    # never worse than the start
    assert np_loss("hinge", y, f + b) <= np_loss("hinge", y, f + b0)


def test_build_result_fills_norms_and_weights():
    K = random_bank(50)
    y = labels(51)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=ElasticNet(lam=0.5), C=1.0)
    alpha = np.zeros((M, N))
    alpha[2] = 1.0
    kw = dict(
        engine="x",
        alpha=alpha,
        bias=0.1,
        primal=2.0,
        dual=1.0,
        iterations=3,
        history=[],
        message="not there yet",
        time_s=0.0,
    )
    r = common.build_result(pb, status=Status.MAX_ITER, **kw)
    assert r.status == Status.MAX_ITER and not r.converged
    assert r.gap == pytest.approx(0.5)
    np.testing.assert_allclose(r.block_norms, np_norms(K, alpha), rtol=1e-12)
    assert r.kernel_weights[2] == pytest.approx(1.0)
    r2 = common.build_result(pb, status=Status.CONVERGED, **kw)
    r3 = common.build_result(pb, status=Status.STOPPED, **kw)
    assert r2.converged and r3.status == Status.STOPPED
