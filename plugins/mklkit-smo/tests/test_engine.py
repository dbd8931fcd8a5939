"""The smo_mkl engine: optima against cvxpy + Clarabel, steps, statuses, options."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from numba import njit

import smo_reference as ref
from smo_banks import ENTRIES
from mklkit.components.kl import KL
from mklkit.engines import common
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, SolveResult, Status
from mklkit_smo import FeatureKernels, PnormSquared, SmoMKL, kl_from_paper
from mklkit_smo import _rows, _smo

C = 0.01  # the paper's C = 100
PS = [1.33, 2.0, 3.0]


def _solve(problem: Problem, **params) -> object:
    params.setdefault("tol", 1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return SmoMKL(**params).solve(problem)


# ---------------------------------------------------------------------------
# supports
# ---------------------------------------------------------------------------
def test_supports_the_smo_mkl_problems(registry, sonar_small, liver_regression) -> None:
    _, y, bank = sonar_small
    eng = SmoMKL()
    hinge = registry.create("loss", "hinge")
    for reg in (PnormSquared(p=1.33), registry.create("regularizer", "kl")):
        assert eng.supports(Problem(K=bank.K, y=y, loss=hinge, regularizer=reg, C=C)) is None
    _, yr, bankr = liver_regression
    eps = registry.create("loss", {"name": "eps_insensitive", "eps": 0.1})
    assert eng.supports(Problem(K=bankr.K, y=yr, loss=eps, regularizer=PnormSquared(), C=C)) is None


def test_declines_other_problems_with_a_reason(registry, sonar_small) -> None:
    _, y, bank = sonar_small
    eng = SmoMKL()
    hinge = registry.create("loss", "hinge")
    logistic = registry.create("loss", "logistic")
    p = Problem(K=bank.K, y=y, loss=logistic, regularizer=PnormSquared(), C=C)
    assert "logistic" in eng.supports(p) and "hinge" in eng.supports(p)
    p = Problem(K=bank.K, y=y, loss=hinge, regularizer=registry.create("regularizer", "l1"), C=C)
    assert "neither the squared p-norm form" in eng.supports(p)
    p = Problem(K=bank.K, y=y, loss=hinge, regularizer=PnormSquared(), C=C, bias=False)
    assert "no bias" in eng.supports(p)
    p = Problem(K=np.empty((0, y.size, y.size)), y=y, loss=hinge, regularizer=PnormSquared(), C=C)
    assert "no kernels" in eng.supports(p)
    with pytest.raises(ValueError, match=r"engine 'smo_mkl' cannot solve this problem: .*logistic") as err:
        eng.solve(Problem(K=bank.K, y=y, loss=logistic, regularizer=PnormSquared(), C=C))
    # the reason is said once (spec errors prefix the engine's name themselves)
    assert str(err.value).count("cannot solve") == 1


# ---------------------------------------------------------------------------
# optima against the conic reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", PS)
def test_classification_dual_matches_clarabel(sonar_small, registry, p: float) -> None:
    _, y, bank = sonar_small
    lam = 0.7
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=p, lam=lam), C=C)
    r = _solve(prob)
    assert r.status == Status.CONVERGED and r.gap <= 1e-9
    value, _ = ref.dual_pnorm(bank.K, y, p, lam, 1.0 / C)
    # the engine reports C times the paper-scale dual (9)
    assert r.dual_objective / C == pytest.approx(value, rel=1e-5)
    assert r.history[-1]["dual_objective_smo"] == pytest.approx(value, rel=1e-5)
    # the primal at the returned blocks and bias, computed independently
    primal = ref.pnorm_primal(bank.K, y, r.alpha, r.bias, p, lam, C)
    assert primal == pytest.approx(r.objective, rel=1e-10)
    assert primal / C == pytest.approx(value, rel=1e-5)
    # the squared p-norm has no threshold at 0: no C makes alpha = 0 optimal
    assert r.C_max == math.inf


@pytest.mark.parametrize("p", PS)
def test_regression_dual_matches_clarabel(liver_regression, registry, p: float) -> None:
    _, y, bank = liver_regression
    eps = 0.1
    Cr = 0.1
    prob = Problem(
        K=bank.K,
        y=y,
        loss=registry.create("loss", {"name": "eps_insensitive", "eps": eps}),
        regularizer=PnormSquared(p=p, lam=1.0),
        C=Cr,
    )
    r = _solve(prob)
    assert r.status == Status.CONVERGED
    value, _ = ref.dual_pnorm(bank.K, y, p, 1.0, 1.0 / Cr, task="regression", eps=eps)
    assert r.dual_objective / Cr == pytest.approx(value, rel=1e-5)
    primal = ref.pnorm_primal(bank.K, y, r.alpha, r.bias, p, 1.0, Cr, task="regression", eps=eps)
    assert primal == pytest.approx(r.objective, rel=1e-10)
    assert primal / Cr == pytest.approx(value, rel=1e-5)


@pytest.mark.parametrize("d0, Ck", [(1.0, 0.01), (0.5, 0.2)])
def test_kl_dual_matches_clarabel_and_the_core_primal(sonar_small, registry, d0: float, Ck: float) -> None:
    _, y, bank = sonar_small
    kl = registry.create("regularizer", {"name": "kl", "d0": d0})
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=kl, C=Ck)
    r = _solve(prob)
    assert r.status == Status.CONVERGED and r.gap <= 1e-9
    # the core's kl at C is the paper's KL problem with C_paper = 1/C and lambda = 1/2 (eq. 23)
    value = ref.dual_kl(bank.K, y, d0, 0.5, 1.0 / Ck)
    assert r.dual_objective / Ck == pytest.approx(value, rel=1e-5)
    # the primal as the core defines it (Lambert-W form of g) and by a scalar search
    assert common.primal_objective(prob, r.alpha, r.bias) == pytest.approx(r.objective, rel=1e-9)
    assert ref.kl_primal(bank.K, y, r.alpha, r.bias, d0, Ck) == pytest.approx(r.objective, rel=1e-7)


def test_kl_from_paper_maps_lambda_and_d0(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    lam, d0, Cp = 2.0, 0.5, 1.0
    spec, Ck = kl_from_paper(lam, d0, Cp)
    prob = Problem(
        K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=registry.create("regularizer", spec), C=Ck
    )
    r = _solve(prob)
    # the objective is the paper's (lam, d0, C_paper) optimum divided by C_paper
    assert r.dual_objective * Cp == pytest.approx(ref.dual_kl(bank.K, y, d0, lam, Cp), rel=1e-5)
    with pytest.raises(ValueError, match="must be > 0"):
        kl_from_paper(0.0, 1.0, 1.0)


def test_p2_matches_spicy_on_the_equivalent_block_lq(sonar_small, registry) -> None:
    # p = 2: lam/2 ||d||_2^2 is the block l_{4/3} norm with C' = C (2 lam)^(1/3)
    _, y, bank = sonar_small
    hinge = registry.create("loss", "hinge")
    lam = 1.0
    r = _solve(Problem(K=bank.K, y=y, loss=hinge, regularizer=PnormSquared(p=2.0, lam=lam), C=C))
    spicy = registry.create("engine", {"name": "spicy", "tol": 1e-9})
    lq = Problem(
        K=bank.K,
        y=y,
        loss=hinge,
        regularizer=registry.create("regularizer", {"name": "lq", "q": 4 / 3}),
        C=C * (2 * lam) ** (1 / 3),
    )
    if spicy.supports(lq) is not None:
        pytest.skip(f"spicy does not solve hinge + lq here: {spicy.supports(lq)}")
    r2 = spicy.solve(lq)
    assert r2.objective == pytest.approx(r.objective, rel=1e-7)
    np.testing.assert_allclose(r.alpha, r2.alpha, atol=1e-6 * np.abs(r.alpha).max())


# ---------------------------------------------------------------------------
# the reduced problem and the kernel weights
# ---------------------------------------------------------------------------
def _pair_inputs(rng: np.random.Generator, M: int):
    G = rng.normal(size=(M, 3, 6))
    # a_k = |phi_k(i) - phi_k(j)|^2, w_k, c_k from actual Gram forms (Cauchy-Schwarz holds)
    u = G[:, 0]
    vv = G[:, 1]
    a = np.ascontiguousarray(np.sum(u * u, axis=1))
    c = np.ascontiguousarray(np.sum(vv * vv, axis=1))
    w = np.ascontiguousarray(np.sum(u * vv, axis=1))
    return a, w, c


def _pnorm_step(
    analytic: bool, q: float, lam: float, lin: float, a: np.ndarray, w: np.ndarray, c: np.ndarray, thi: float
) -> float:
    """The p-norm form's step of the reduced problem (``solve_pair``)."""
    from mklkit_smo._records import SmoOptions, SmoWork, bregman_fns

    opts = SmoOptions(
        reg_mode=_smo.REG_PNORM,
        rows_mode=_smo.ROWS_PRECOMPUTED,
        max_steps=0,
        analytic=analytic,
        parallel=False,
        nblocks=1,
        eps=0.0,
        q=q,
        lam=lam,
        fd0=0.0,
        tau=1e-12,
    )
    M = c.size
    d, u1, u2 = np.zeros(M), np.zeros(M), np.zeros(M)
    counter = np.zeros(1, dtype=np.int64)
    return _smo.solve_pair(
        opts, bregman_fns(None, np.zeros(1)), lin, SmoWork(a, w, np.zeros(M)), c, thi, d, u1, u2, counter
    )


def test_analytic_p2_step_equals_the_newton_step() -> None:
    rng = np.random.default_rng(3)
    M = 7
    checked = 0
    for _ in range(200):
        a, w, c = _pair_inputs(rng, M)
        lam = float(rng.uniform(0.2, 3.0))
        lin = float(rng.uniform(0.0, 2.0))
        thi = float(rng.uniform(0.01, 5.0))
        t_cubic = _pnorm_step(True, 2.0, lam, lin, a, w, c, thi)
        t_newton = _pnorm_step(False, 2.0, lam, lin, a, w, c, thi)
        assert 0.0 <= t_cubic <= thi
        assert t_cubic == pytest.approx(t_newton, rel=1e-9, abs=1e-12)
        if 0.0 < t_cubic < thi:
            checked += 1
            # interior optimum: the derivative of the reduced objective (16) vanishes
            ct = c + 2 * t_cubic * w + t_cubic**2 * a
            slope = lin - np.sum(ct * (w + t_cubic * a)) / (2 * lam)
            assert abs(slope) <= 1e-9 * (abs(lin) + np.sum(np.abs(ct * (w + t_cubic * a))) / lam)
    assert checked > 50


@pytest.mark.parametrize("p", [1.33, 3.0])
def test_newton_step_solves_the_reduced_problem(p: float) -> None:
    rng = np.random.default_rng(4)
    q = p / (p - 1)
    M = 5
    for _ in range(100):
        a, w, c = _pair_inputs(rng, M)
        lam, lin, thi = 0.8, float(rng.uniform(0.0, 2.0)), float(rng.uniform(0.01, 5.0))
        t = _pnorm_step(True, q, lam, lin, a, w, c, thi)
        grid = np.linspace(0.0, thi, 20001)
        ct = c[None, :] + 2 * grid[:, None] * w[None, :] + grid[:, None] ** 2 * a[None, :]
        phi = lin * grid - np.sum(np.maximum(ct, 0) ** q, axis=1) ** (2 / q) / (8 * lam)
        ctt = np.maximum(c + 2 * t * w + t * t * a, 0)
        phit = lin * t - np.sum(ctt**q) ** (2 / q) / (8 * lam)
        assert phit >= phi.max() - 1e-12 * (1 + abs(phi.max()))


@pytest.mark.parametrize("p", PS)
def test_kernel_weights_are_eq_10_and_minimize_the_primal(sonar_small, registry, p: float) -> None:
    _, y, bank = sonar_small
    reg = PnormSquared(p=p, lam=1.0)
    r = _solve(Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=reg, C=C))
    # eq. (10): d_k proportional to (alpha^T H_k alpha)^(q/p) = c_k^(q-1)
    gamma = r.dual / C
    ck = np.einsum("i,mij,j->m", gamma, bank.K, gamma)
    d10 = ck ** (reg.q - 1.0)
    np.testing.assert_allclose(r.kernel_weights, d10 / d10.sum(), rtol=1e-6)
    # and at the optimum they are the weights that minimize the primal for the blocks
    dstar = reg.weights(r.block_norms)
    np.testing.assert_allclose(r.kernel_weights, dstar / dstar.sum(), rtol=1e-4)
    assert r.kernel_weights.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------
# options and statuses
# ---------------------------------------------------------------------------
def test_options_reach_the_same_optimum(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=2.0, lam=1.0), C=C)
    base = _solve(prob)
    for params in ({"analytic": False}, {"shrinking": False}, {"check_every": 7}, {"parallel": "on"}):
        r = _solve(prob, **params)
        assert r.objective == pytest.approx(base.objective, rel=1e-8), params
        np.testing.assert_allclose(r.kernel_weights, base.kernel_weights, atol=1e-6)


def test_max_iter_gives_a_status_and_a_warning_not_an_exception(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=1.33), C=C)
    with pytest.warns(ConvergenceWarning, match="max_iter=20"):
        r = SmoMKL(tol=1e-9, max_iter=20).solve(prob)
    assert r.status == Status.MAX_ITER and not r.converged
    assert r.iterations == 20
    assert np.isfinite(r.objective) and r.objective >= r.dual_objective


def test_callback_stops_the_solve(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=1.33), C=C)
    seen = []
    r = SmoMKL(tol=1e-12, check_every=10).solve(prob, callback=lambda rec: seen.append(rec) or len(seen) >= 3)
    assert r.status == Status.STOPPED
    assert len(seen) == 3 and 0 < seen[-1]["iteration"] <= 30
    assert r.iterations == seen[-1]["iteration"]
    assert {"objective", "dual_objective", "gap", "kkt_violation", "objective_smo"} <= set(seen[0])


def test_warm_start_reaches_the_optimum_in_fewer_steps(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    hinge = registry.create("loss", "hinge")
    first = _solve(Problem(K=bank.K, y=y, loss=hinge, regularizer=PnormSquared(p=1.33), C=C))
    near = Problem(K=bank.K, y=y, loss=hinge, regularizer=PnormSquared(p=1.33), C=1.2 * C)
    cold = _solve(near)
    warm = SmoMKL(tol=1e-9).solve(near, warm_start=first)
    assert warm.objective == pytest.approx(cold.objective, rel=1e-8)
    assert warm.iterations < cold.iterations


def test_history_is_certified_at_the_end(sonar_small, registry) -> None:
    _, y, bank = sonar_small
    r = _solve(
        Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=3.0), C=C),
        check_every=25,
    )
    last = r.history[-1]
    assert last["certified"] and last["gap"] == r.gap
    assert [h["iteration"] for h in r.history] == sorted(h["iteration"] for h in r.history)
    for h in r.history:
        if h["certified"]:
            assert h["objective"] >= h["dual_objective"] - 1e-12 * abs(h["objective"])


@pytest.mark.parametrize("C_", [C, 1.0])
def test_history_records_the_progress_at_regular_intervals(sonar_small, registry, C_: float) -> None:
    # a solve of about one pass over the variables used to leave one record: one dot in
    # the gap and active-kernel plots of 'mklkit report'
    _, y, bank = sonar_small
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=PnormSquared(p=1.33), C=C_)
    r = SmoMKL().solve(prob)
    assert r.status == Status.CONVERGED
    steps = [h["iteration"] for h in r.history]
    assert len(steps) >= 5 and steps[-1] == r.iterations
    assert max(np.diff([0, *steps])) <= max(1, y.size // 20)  # the documented automatic interval
    times = [h["time_s"] for h in r.history]
    assert times == sorted(times)
    for h in r.history:
        assert 0 < h["n_active"] <= bank.K.shape[0]
        if h["certified"]:
            assert np.isfinite(h["gap"]) and np.isfinite(h["objective"])
    assert sum(h["certified"] for h in r.history) >= 5
    assert r.history[-1]["gap"] == r.gap <= 1e-3
    # the callback sees every record and may stop the solve
    seen: list[dict] = []
    stopped = SmoMKL().solve(prob, callback=lambda rec: seen.append(rec) or len(seen) >= 3)
    assert stopped.status == Status.STOPPED and len(seen) == 3 and stopped.iterations == seen[-1]["iteration"]


# ---------------------------------------------------------------------------
# kernels computed on the fly
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1.33, 2.0])
def test_kernels_on_the_fly_give_the_precomputed_optimum(sonar_small, registry, p: float) -> None:
    X, y, bank = sonar_small
    hinge = registry.create("loss", "hinge")
    reg = PnormSquared(p=p)
    pre = _solve(Problem(K=bank.K, y=y, loss=hinge, regularizer=reg, C=C))
    src = FeatureKernels(X, ENTRIES, normalize="trace")
    tiny = 2 * src.row_bytes / 2**20  # room for exactly two rows: constant eviction
    fly = _solve(src.problem(y, hinge, reg, C), cache_mb=tiny)
    assert fly.objective == pytest.approx(pre.objective, rel=1e-8)
    np.testing.assert_allclose(fly.kernel_weights, pre.kernel_weights, atol=1e-6)
    last = fly.history[-1]
    assert last["cache_misses"] > 0 and last["cache_hits"] + last["cache_misses"] >= fly.iterations
    roomy = _solve(src.problem(y, hinge, reg, C), cache_mb=64.0)
    assert roomy.history[-1]["cache_misses"] <= y.size  # every row computed at most once
    assert roomy.objective == pytest.approx(pre.objective, rel=1e-8)


# ---------------------------------------------------------------------------
# a Bregman form from a plugin: the Euclidean generator F(d) = d^2 / 2
# ---------------------------------------------------------------------------
@njit(cache=True)
def _euc_F(d, params):
    return 0.5 * d * d


@njit(cache=True)
def _euc_f(d, params):
    return d.copy()


@njit(cache=True)
def _euc_finv(theta, params):
    return theta.copy()


@njit(cache=True)
def _euc_d0(params):
    return params[0]


@njit(cache=True)
def _euc_penalty(d, params):
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        out[i] = 0.5 * (d[i] - params[0]) ** 2 if d[i] >= 0.0 else np.inf
    return out


class _Euclidean(KL):
    """h(d) = (d - d0)^2 / 2 as a Bregman divergence.  The engine reads only ``bregman`` and
    ``penalty``; the other kernels (KL's) are not used here."""

    name = "euclidean_bregman_test"
    bregman_F, bregman_f = staticmethod(_euc_F), staticmethod(_euc_f)
    bregman_finv, bregman_d0 = staticmethod(_euc_finv), staticmethod(_euc_d0)
    penalty = staticmethod(_euc_penalty)


def test_any_bregman_form_is_solved(sonar_small, registry) -> None:
    import cvxpy as cp

    _, y, bank = sonar_small
    Ck, d0 = 0.05, 0.5
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=_Euclidean(d0=d0), C=Ck)
    r = _solve(prob)
    assert r.status == Status.CONVERGED
    # dual (21) with lam = 1/2: max 1^T a - (1/4) sum_k ((d0 + t_k)^2 - d0^2)
    Ls = ref.factor(bank.K)
    a = cp.Variable(y.size)
    t = cp.hstack([cp.sum_squares(L.T @ cp.multiply(y, a)) for L in Ls])
    obj = cp.sum(a) - 0.25 * cp.sum(cp.square(d0 + t) - d0**2)
    value = cp.Problem(cp.Maximize(obj), [a >= 0, a <= 1 / Ck, y @ a == 0]).solve(solver=cp.CLARABEL)
    assert r.dual_objective / Ck == pytest.approx(value, rel=1e-5)


def test_a_bregman_form_that_is_not_the_penalty_is_declined(sonar_small, registry) -> None:
    class Wrong(_Euclidean):
        name = "wrong_bregman_test"
        penalty = KL.__dict__["penalty"]  # d log(d/d0) - d + d0 is not (d - d0)^2 / 2

    _, y, bank = sonar_small
    prob = Problem(K=bank.K, y=y, loss=registry.create("loss", "hinge"), regularizer=Wrong(), C=C)
    assert "is not its kernel-weight penalty" in SmoMKL().supports(prob)


def test_fast_exponential_is_accurate() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([-rng.uniform(0, 700, 10_000), -rng.uniform(0, 1, 1000), [0.0, -1e-300]])
    y = x.copy()
    _rows.vexp_inplace(y, y.size, 1.0)
    ref_ = np.exp(x)
    big = ref_ >= 1e-300  # smaller values are flushed to 0
    np.testing.assert_allclose(y[big], ref_[big], rtol=4.5e-16, atol=0)
    assert np.all(y[~big] == 0.0)
    z = np.array([-800.0, -1e6, -691.0])
    _rows.vexp_inplace(z, z.size, 2.0)
    assert np.all(z == 0.0)


# ---------------------------------------------------------------------------
# shrinking: compact sub-problems, then a synchronization before the certificate
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def web_small():
    from mklkit.data import load_builtin

    ds = load_builtin("w8a")
    idx = np.sort(np.random.default_rng(0).choice(ds.n_samples, 400, replace=False))
    bank = [
        {"function": "rbf", "width": [2.0, 5.0], "features": "all"},
        {"function": "rbf", "width": 3.0, "features": {"random_subsets": 2, "size": 0.2, "seed": 0}},
    ]
    src = FeatureKernels(ds.X[idx], bank, normalize="none")
    return src, ds.y[idx]


@pytest.mark.parametrize("where", ["precomputed", "on the fly"])
def test_shrinking_reaches_the_same_optimum(web_small, registry, where: str) -> None:
    src, y = web_small
    hinge = registry.create("loss", "hinge")
    reg = PnormSquared(p=1.33)
    prob = (
        Problem(K=src.gram(), y=y, loss=hinge, regularizer=reg, C=1.0)
        if where == "precomputed"
        else src.problem(y, hinge, reg, 1.0)
    )
    plain = _solve(prob, shrinking=False, check_every=50)
    shrunk = _solve(prob, shrinking=True, check_every=50)
    assert min(h["n_active_variables"] for h in shrunk.history) < 0.8 * y.size
    assert shrunk.history[-1]["syncs"] >= 1 and shrunk.history[-1]["certified"]
    assert any(not h["certified"] and np.isnan(h["gap"]) for h in shrunk.history)
    assert shrunk.objective == pytest.approx(plain.objective, rel=1e-8)
    assert shrunk.gap <= 1e-9
    np.testing.assert_allclose(shrunk.kernel_weights, plain.kernel_weights, atol=1e-6)


def test_the_row_cache_stays_inside_its_budget_while_shrinking(web_small, registry) -> None:
    """The compact views of shrinking reuse the row cache's storage: a solve allocates
    about ``cache_mb`` more than one with a two-row cache (the budget is just short of
    101 full rows, which the shorter rows of a compact view fill further)."""
    import tracemalloc

    src, y = web_small
    prob = src.problem(y, registry.create("loss", "hinge"), PnormSquared(p=1.33), 1.0)

    def peak(rows: float) -> tuple[int, SolveResult]:
        tracemalloc.start()
        try:
            r = _solve(prob, shrinking=True, check_every=50, cache_mb=rows * src.row_bytes / 2**20)
            return tracemalloc.get_traced_memory()[1], r
        finally:
            tracemalloc.stop()

    _solve(prob, shrinking=True, check_every=50)  # first-call allocations, not traced
    small, _ = peak(2.0)
    large, r = peak(100.999)
    assert min(h["n_active_variables"] for h in r.history) < 0.8 * y.size
    assert r.history[-1]["cache_misses"] > 101  # the cache was full
    assert large - small < 1.25 * 100.999 * src.row_bytes
