"""auto on dense banks: bcd on exact factors certified on the dense bank, and the installed engines.

The exact-factor route (pivoted Cholesky of every Gram matrix, ``bcd``, the
dense certificate) must give the dense problem's optimum (spicy's and
Clarabel's), report the dense problem's gap for the ``alpha`` it returns, and
fall back honestly when the factors are not exact or the dense gap misses
``tol``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re

import numpy as np
import pytest

import mklkit.pipeline.choose as auto_module
from mklkit.components.losses import Hinge, Logistic
from mklkit.components.elasticnet import ElasticNet, L1
from mklkit.data import load_builtin
from mklkit.engines import common
from mklkit.pipeline.choose import Auto, specificity
from mklkit.engines.bcd import BCD
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.kernels.build import KernelBank
from mklkit.kernels.factorize.dense import ExactFactorBank, exact_factors
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status
from mklkit.testing import check_engine, registered

try:
    from tests.conic_reference import solve_reference
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import solve_reference

LOSSES = {"hinge": Hinge, "logistic": Logistic}
REGS = {"l1": L1, "elasticnet": lambda: ElasticNet(lam=0.5)}
PARAMS = {"l1": {}, "elasticnet": {"lam": 0.5}}
N = 300


@functools.lru_cache(maxsize=None)
def a9a(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random a9a points (seed 0), three Gaussian kernels (widths 5 10 20), unit trace."""
    ds = load_builtin("a9a")
    rows = np.sort(np.random.default_rng(0).permutation(ds.n_samples)[:n])
    K = KernelBank.build(ds.X[rows], [{"function": "rbf", "width": [5.0, 10.0, 20.0]}]).K
    return K, ds.y[rows].astype(np.float64)


def problem(loss: str, reg: str, frac: float = 0.1) -> Problem:
    K, y = a9a()
    C_max = common.zero_solution(Problem(K=K, y=y, loss=LOSSES[loss](), regularizer=REGS[reg](), C=1.0)).C_max
    C = frac * C_max if np.isfinite(C_max) else 1.0
    return Problem(K=K, y=y, loss=LOSSES[loss](), regularizer=REGS[reg](), C=C)


def refuse_proximal(monkeypatch) -> None:
    """auto factors a dense bank only where proximal does not apply (a loss without a
    derivative); with a smooth loss, whose dense predictions are unique, the route is checked
    all the same by making proximal refuse."""
    monkeypatch.setattr(Proximal, "supports", lambda self, problem: "refused in this test")


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


# ---------------------------------------------------------------------------
# exact factors
# ---------------------------------------------------------------------------
def test_exact_factors_are_the_kernels_to_round_off():
    K, _ = a9a()
    fac = exact_factors(K)
    assert fac.exact and fac.reason == ""
    assert isinstance(fac.bank, ExactFactorBank)
    assert np.all(fac.relative_trace_error <= 1e-12)
    assert np.max(np.abs(fac.bank.to_array() - K)) <= 1e-13 * np.max(np.abs(K))
    # a9a has duplicate points: the rank is that of the distinct points, not N
    ds = load_builtin("a9a")
    X = ds.X[np.sort(np.random.default_rng(0).permutation(ds.n_samples)[:N])]
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    n_distinct = np.unique(X, axis=0).shape[0]
    assert n_distinct < N
    assert np.all(fac.ranks == n_distinct)
    # coefficients back: L_m^T alpha_m = beta_m, so K_m alpha_m = L_m beta_m
    rng = np.random.default_rng(1)
    beta = rng.standard_normal(fac.bank.total_rank)
    for m in range(K.shape[0]):
        s, e = fac.bank.starts[m], fac.bank.starts[m + 1]
        a = fac.bank.solve_coefficients(m, beta[s:e])
        assert np.allclose(fac.bank.block(m) @ a, beta[s:e], rtol=0, atol=1e-8 * np.abs(beta).max())
        assert np.allclose(K[m] @ a, fac.bank.block(m).T @ beta[s:e], rtol=0, atol=1e-9)


def test_bcd_maps_coefficients_back_through_the_banks_own_solve():
    """The bank's alpha_from_beta uses the triangular solve of an ExactFactorBank (no LSQR, which
    ran 9,600 iterations on a rank-2,850 factor): the result is supported on the pivots."""
    K, _ = a9a()
    bank = exact_factors(K).bank
    beta = np.random.default_rng(2).standard_normal(bank.total_rank)
    alpha = bank.alpha_from_beta(beta)
    for m in range(K.shape[0]):
        s, e = bank.starts[m], bank.starts[m + 1]
        off = np.setdiff1d(np.arange(K.shape[1]), bank.pivots[m])
        assert np.array_equal(alpha[m], bank.solve_coefficients(m, beta[s:e]))
        assert off.size == 0 or not np.any(alpha[m, off])


def test_a_rank_cap_makes_the_factors_inexact_and_says_so():
    K, _ = a9a()
    fac = exact_factors(K, max_rank=20)
    assert not fac.exact
    assert re.search(r"kernel 0 .*rank 20 of 300.*leaves out", fac.reason), fac.reason
    assert np.all(fac.ranks == 20) and np.all(fac.relative_trace_error > 1e-10)


# ---------------------------------------------------------------------------
# the route: same optimum as spicy and Clarabel, the dense gap
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loss,reg",
    [
        pytest.param("hinge", "l1", marks=pytest.mark.slow),
        ("logistic", "l1"),
        pytest.param("hinge", "elasticnet", marks=pytest.mark.slow),
        ("logistic", "elasticnet"),
    ],
)
def test_auto_on_exact_factors_finds_the_dense_optimum(loss, reg, caplog, monkeypatch):
    pb = problem(loss, reg)
    auto = Auto(tol=1e-8, dense_factor_min_samples=N)
    if loss == "logistic":
        # a smooth loss stays with spicy (its one-step method was 80 times faster; its
        # iterative one 2.5 times faster with ten kernels); the route is checked all the same
        assert auto.choose(pb)[0].name == "spicy"
        refuse_proximal(monkeypatch)
        if reg == "elasticnet":
            monkeypatch.setattr(Spicy, "uses_one_step", lambda self, problem: False)
    assert auto.choose(pb)[0].name == "bcd"
    with caplog.at_level(logging.INFO, logger="mklkit.engines.auto"):
        res = auto.solve(pb)
    monkeypatch.undo()
    assert res.converged and res.engine == "auto"
    assert res.message.startswith("auto -> bcd on exact factors of the dense bank (rank ")
    assert "auto -> bcd on exact factors" in caplog.text
    assert res.alpha.shape == (3, N)
    # the reported values are the dense problem's at the returned point
    P = common.primal_objective(pb, res.alpha, res.bias)
    D = common.projected_dual_objective(pb, res.dual)[0]  # a no-op projection, up to ulps
    assert rel(res.objective, P) <= 1e-12 and rel(res.dual_objective, D) <= 1e-12
    assert common.relative_gap(P, D) <= 1e-8
    assert np.allclose(res.block_norms, common.block_norms(pb.bank, res.alpha), rtol=1e-10)
    spicy = Spicy(tol=1e-8).solve(pb)
    ref = solve_reference(pb.K, pb.y, loss, reg, pb.C, **PARAMS[reg])
    assert rel(res.objective, spicy.objective) <= 1e-6
    assert rel(res.objective, ref.objective) <= 1e-6
    if loss == "logistic":
        # the predictions of the dense coefficients are spicy's (unique for a strictly
        # convex loss)
        z, z_spicy = res.decision_function(pb.K), spicy.decision_function(pb.K)
        assert np.max(np.abs(z - z_spicy)) <= 1e-3 * np.max(np.abs(z_spicy))


def test_the_newton_polish_on_full_rank_factors_is_solved_through_the_band(monkeypatch):
    """Hinge + l1 on exact factors of full-rank kernels (total rank ~ 3N): the Newton steps on
    the non-zero blocks are solved by the Woodbury identity through the samples of the smoothing
    band.  Each step is checked against the explicitly formed Hessian, and bcd alone reaches
    the tight gap (no spicy continuation)."""
    from mklkit.engines.bcd.polish import Support

    residuals: list[tuple[int, int, float]] = []
    band_solve = Support._band_solve

    def checked(self, units, h, x, g1, g2, grad, band):
        step = band_solve(self, units, h, x, g1, g2, grad, band)
        if step is not None:
            nA, LA, seg = self.rows.size, self.LA, self.seg
            H = np.zeros((grad.size, grad.size))
            H[:nA, :nA] = (LA * h) @ LA.T
            for k in range(seg.size - 1):
                a, e = seg[k], seg[k + 1]
                bh = units[a:e]  # the block's direction
                assert abs(np.linalg.norm(bh) - 1.0) <= 1e-12
                c = g1[k] / x[k]
                H[a:e, a:e] += c * np.eye(e - a) + (g2[k] - c) * np.outer(bh, bh)
            if self.run.bias:
                H[:nA, -1] = H[-1, :nA] = LA @ h
                H[-1, -1] = np.sum(h)
            # backward error: the step solves the system to round-off in the size of H and step
            scale = np.linalg.norm(H, 2) * np.linalg.norm(step) + np.linalg.norm(grad)
            residuals.append((nA, band.size, float(np.linalg.norm(H @ step + grad) / scale)))
        return step

    monkeypatch.setattr(Support, "_band_solve", checked)
    pb = problem("hinge", "l1")
    res = Auto(tol=1e-8, dense_factor_min_samples=N).solve(pb)
    assert res.converged and "then spicy" not in res.message
    assert (
        common.relative_gap(
            common.primal_objective(pb, res.alpha, res.bias), common.projected_dual_objective(pb, res.dual)[0]
        )
        <= 1e-8
    )
    assert residuals, "no Newton step went through the band"
    assert all(band < nA // 2 for nA, band, _ in residuals)
    assert max(r for _, _, r in residuals) <= 1e-10


def test_below_the_crossover_auto_keeps_the_dense_engines():
    pb = problem("hinge", "l1")
    assert Auto().choose(pb)[0].name == "spicy"  # N = 300 < 1000
    engine, why = Auto(dense_factor_min_samples=300).choose(pb)
    assert engine.name == "bcd" and "N = 300 >= 300 samples and M = 3 <= 10 kernels" in why
    assert Auto(dense_factor_min_samples=300, dense_factor_max_kernels=2).choose(pb)[0].name == "spicy"


def test_inexact_factors_fall_back_to_spicy_on_the_dense_bank(monkeypatch):
    monkeypatch.setattr(auto_module, "DENSE_FACTOR_MAX_RANK", 20)
    refuse_proximal(monkeypatch)
    pb = problem("logistic", "l1")
    res = Auto(tol=1e-8, dense_factor_min_samples=N).solve(pb)
    assert res.converged and res.engine == "auto"
    assert res.message.startswith("auto -> spicy") and res.solved_by == "spicy"
    assert re.search(
        r"N = 300 >= 300.*M = 3 <= 10.*exact factors.*kernel 0 .*rank 20 of 300.*"
        r"spicy on the dense bank",
        res.message,
    ), res.message
    assert {h["engine"] for h in res.history} == {"spicy"}
    assert rel(res.objective, Spicy(tol=1e-8).solve(pb).objective) <= 1e-6


class HingeWithoutConjugateForm(Hinge):
    """bcd smooths it through its conjugate; spicy and proximal take neither it nor its form."""

    name = "hinge_without_conjugate_form"
    l0 = l0_grad = l0_hess = cons = cons_grad = cons_hess = None


def test_inexact_factors_without_a_dense_engine_are_certified_on_the_dense_bank(monkeypatch):
    K, y = a9a()
    pb = Problem(K=K, y=y, loss=HingeWithoutConjugateForm(), regularizer=L1(), C=0.05)
    assert Spicy().supports(pb) is not None
    auto = Auto(tol=1e-6, dense_factor_min_samples=N)
    assert auto.choose(pb)[0].name == "bcd"
    exact = auto.solve(pb)
    assert exact.message.startswith("auto -> bcd on exact factors") and exact.converged
    P = common.primal_objective(pb, exact.alpha, exact.bias)
    ref = Spicy(tol=1e-8).solve(Problem(K=K, y=y, loss=Hinge(), regularizer=L1(), C=0.05))
    assert rel(P, ref.objective) <= 1e-5
    monkeypatch.setattr(auto_module, "DENSE_FACTOR_MAX_RANK", 20)
    with pytest.warns(ConvergenceWarning):
        res = auto.solve(pb)
    assert res.message.startswith("auto -> bcd") and res.solved_by == "bcd"
    assert re.search(r"inexact factors.*rank 60 of 3 x 300", res.message), res.message
    assert not res.converged and res.gap > 1e-6
    # the values are the dense problem's: a point of rank-20 factors is far from its optimum
    assert rel(res.objective, common.primal_objective(pb, res.alpha, res.bias)) <= 1e-12
    assert res.objective > exact.objective * (1 + 1e-4)


def test_a_dense_gap_above_tol_is_continued_by_spicy(monkeypatch):
    """bcd says converged at a loose gap: the dense certificate misses tol, spicy continues."""

    class Loose(BCD):
        def solve(self, problem, callback=None, warm_start=None):
            res = BCD(tol=0.3).solve(problem)
            return dataclasses.replace(res, status=Status.CONVERGED)

    monkeypatch.setattr(auto_module, "BCD", Loose)
    refuse_proximal(monkeypatch)
    pb = problem("logistic", "l1")
    res = Auto(tol=1e-8, dense_factor_min_samples=N).solve(pb)
    assert res.converged and res.gap <= 1e-8
    assert re.search(r"bcd then spicy.*dense bank", res.message), res.message
    engines = [h["engine"] for h in res.history]
    assert engines[0] == "bcd" and engines[-1] == "spicy"
    # without the fallback the status says that the dense gap missed tol
    with pytest.warns(ConvergenceWarning, match=r"relative duality gap .* > tol 1e-08"):
        res = Auto(tol=1e-8, dense_factor_min_samples=N, fallback=False).solve(pb)
    assert res.status == Status.STALLED and res.gap > 1e-8
    assert rel(res.objective, common.primal_objective(pb, res.alpha, res.bias)) <= 1e-12


def test_the_engine_kit_passes_for_auto_on_exact_factors():
    report = check_engine(Auto(tol=1e-6, dense_factor_min_samples=1), max_problems=2)
    assert report.ok, str(report)


# ---------------------------------------------------------------------------
# every installed engine
# ---------------------------------------------------------------------------
def test_specificity_counts_the_installed_pairs_an_engine_accepts():
    from mklkit.engines.capabilities import SEPARABLE

    reg = get_registry()
    losses = len(reg.registrations("loss"))
    separable = sum(SEPARABLE.holds(r.cls()) for r in reg.registrations("regularizer"))
    # bcd requires nothing of the loss and a separable regularizer
    assert specificity(BCD) == losses * separable
    # spicy: the losses with a conjugate form it can use
    conj = sum(Spicy.requires.loss[0].met(r.cls()) for r in reg.registrations("loss"))
    assert specificity(Spicy) == conj * separable
    if "smo_mkl" in reg.names("engine"):
        assert 0 < specificity(reg.get("engine", "smo_mkl")) < specificity(Spicy)


class _Special(Spicy):
    """A plugin engine for the hinge loss with the block 1-norm only (a narrow class)."""

    name = "special_hinge_l1"
    description = "test engine: spicy restricted to hinge + l1"

    def problem_reasons(self, problem):
        return [] if (problem.loss.name, problem.regularizer.name) == ("hinge", "l1") else ["only hinge + l1"]

    def _solve(self, problem, run, warm_start):
        return super()._solve(problem, run, warm_start)


def test_a_more_specialised_installed_engine_is_preferred(monkeypatch):
    from mklkit.engines.capabilities import HINGE_CONJUGATE, SEPARABLE, needs
    from mklkit.engines.base import Requires

    monkeypatch.setattr(_Special, "requires", Requires(loss=(needs(HINGE_CONJUGATE),), regularizer=(needs(SEPARABLE),)))
    with registered(_Special):
        pb = problem("hinge", "l1")
        engine, why = Auto().choose(pb)
        assert engine.name == "special_hinge_l1"
        assert "more specialised than spicy" in why
        res = Auto(tol=1e-6).solve(pb)
        assert res.converged and res.message.startswith("auto -> special_hinge_l1")
        # a problem it does not take: the general choice
        assert Auto().choose(problem("logistic", "l1"))[0].name == "spicy"
    assert Auto().choose(problem("hinge", "l1"))[0].name == "spicy"


def test_auto_uses_the_smo_plugin_where_it_is_the_specialist():
    pytest.importorskip("mklkit_smo")
    reg = get_registry()
    K, y = a9a()
    pn = Problem(K=K, y=y, loss=Hinge(), regularizer=reg.create("regularizer", "pnorm_squared"), C=0.1)
    engine, why = Auto().choose(pn)
    assert engine.name == "smo_mkl" and "more specialised than spicy" in why
    res = Auto(tol=1e-6).solve(pn)
    assert res.converged and res.message.startswith("auto -> smo_mkl")
    assert rel(res.objective, Spicy(tol=1e-8).solve(pn).objective) <= 1e-5
    # only skm_smo solves the squared block 1-norm: auto finds it
    sq = Problem(K=K, y=y, loss=Hinge(), regularizer=reg.create("regularizer", "l1_squared"), C=0.1)
    assert Auto().choose(sq)[0].name == "skm_smo"
    assert Auto(tol=1e-4).solve(sq).converged


def test_the_newton_polish_holds_a_block_its_step_would_take_through_the_origin(monkeypatch):
    """A non-zero block near the origin has no curvature along its direction in the smooth
    model of hinge + l1 (the minimum of its norm is the kink at 0): its Newton step is huge and,
    taken with the others, the line search shrinks every block's step to nothing.  The polish
    also tries the step with such a block held; here that one is better, and the others reach
    the smoothed optimum on their support (within the small block's own effect on them) in
    the steps allowed."""
    from mklkit.engines.bcd.polish import SupportPolish
    from mklkit.engines.objectives import segment_norms

    pb = problem("hinge", "l1")
    seen: dict = {}
    polish = SupportPolish.polish

    def spy(self, beta, b, mu):
        seen["run"] = self
        seen.setdefault("mu", mu)  # the first smoothing: a wide band
        return polish(self, beta, b, mu)

    monkeypatch.setattr(SupportPolish, "polish", spy)
    res = Auto(tol=1e-8, dense_factor_min_samples=N).solve(pb)
    assert res.converged
    run, mu = seen["run"], seen["mu"]
    starts = run.f.starts
    ref = run.bank.coefficients(np.asarray(res.alpha).reshape(pb.n_kernels, -1))
    norms = segment_norms(ref, starts)
    on, off = np.flatnonzero(norms > 0), np.flatnonzero(norms == 0)
    assert on.size >= 1 and off.size >= 1
    monkeypatch.setattr(run.engine, "max_polish", 200)
    polish(run, ref, res.bias, mu)  # the smoothed optimum on the support
    start = 0.98 * ref
    j = off[0]
    small = np.random.default_rng(1).standard_normal(starts[j + 1] - starts[j])
    start[starts[j] : starts[j + 1]] = 1e-3 * norms[on[0]] * small / np.linalg.norm(small)
    monkeypatch.setattr(run.engine, "max_polish", 8)
    moved = start.copy()
    polish(run, moved, res.bias, mu)
    assert np.array_equal(moved[starts[j] : starts[j + 1]], start[starts[j] : starts[j + 1]])
    rows = np.concatenate([np.arange(starts[m], starts[m + 1]) for m in on])
    err = np.linalg.norm(moved[rows] - ref[rows]) / np.linalg.norm(ref[rows])
    assert err <= 2e-3, err  # without the hold: 2e-2, no move
