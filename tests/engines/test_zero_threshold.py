"""The zero solution and ``C_max``: every engine around the threshold, against Clarabel.

At :math:`\\alpha = 0` with the optimal offset :math:`b_0`, the dual point
:math:`\\rho^0 = -\\partial_z\\ell(y, b_0)` certifies :math:`\\alpha = 0` for every
:math:`C \\ge C_{max} = \\max_m\\|\\rho^0\\|_{K_m}/t_1`.  Engines return that
solution at once; just below the threshold they must still converge to the
conic optimum, and never return a point worse than :math:`\\alpha = 0`.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

from mklkit.components.losses import EpsInsensitive, Hinge, Logistic, Squared
from mklkit.components.elasticnet import ElasticNet, L1, Uniform
from mklkit.components.kl import KL
from mklkit.components.lq import Lq
from mklkit.engines import common
from mklkit.engines.proximal import Proximal
from mklkit.engines.spicy import Spicy
from mklkit.problem import Problem
from mklkit.result import ConvergenceWarning, Status

try:
    from tests.conic_reference import solve_reference
    from tests.engines.pinball import Pinball
    from tests.engines.shared import liver, sonar
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from conic_reference import solve_reference
    from engines.pinball import Pinball
    from engines.shared import liver, sonar

TOL = 1e-6  # engine tolerance on the relative duality gap
REL = 1e-4  # agreement with the conic reference
FACTORS = (0.5, 0.99, 1.01, 100.0)

LOSSES = {
    "hinge": (Hinge(), {}),
    "logistic": (Logistic(), {}),
    "squared": (Squared(), {}),
    "eps_insensitive": (EpsInsensitive(eps=0.1), {"eps": 0.1}),
    # a third-party loss, from the contract alone
    "pinball": (Pinball(tau=0.9), {"tau": 0.9}),
}
REGULARIZERS = {"l1": (L1(), "l1", {}), "elasticnet": (ElasticNet(lam=0.5), "elasticnet", {"lam": 0.5})}
ENGINES = {"spicy": Spicy(tol=TOL, max_iter=200), "proximal": Proximal(tol=TOL, max_iter=20000)}


def data_for(loss):
    return sonar(80) if loss.task == "classification" else liver(80)


def problem(loss_name: str, reg_name: str, C: float = 1.0) -> Problem:
    loss, _ = LOSSES[loss_name]
    reg = REGULARIZERS[reg_name][0]
    K, y = data_for(loss)
    return Problem(K=K, y=y, loss=loss, regularizer=reg, C=C)


@functools.lru_cache(maxsize=None)
def c_max(loss_name: str, reg_name: str) -> float:
    return common.zero_solution(problem(loss_name, reg_name)).C_max


@functools.lru_cache(maxsize=None)
def reference(loss_name: str, reg_name: str, factor: float):
    loss, lp = LOSSES[loss_name]
    _, rname, rp = REGULARIZERS[reg_name]
    K, y = data_for(loss)
    return solve_reference(K, y, loss_name, rname, factor * c_max(loss_name, reg_name), **lp, **rp)


CASES = [
    (e, lo, rg, f)
    for e in ENGINES
    for lo in LOSSES
    for rg in REGULARIZERS
    for f in FACTORS
    if e == "spicy" or LOSSES[lo][0].smooth_primal
]


@pytest.mark.parametrize(
    "engine,loss_name,reg_name,factor",
    [
        # the default suite keeps both sides of the threshold (0.99, 1.01); far from it, -m slow
        pytest.param(*c, marks=pytest.mark.slow if c[3] in (0.5, 100.0) else ())
        for c in CASES
    ],
    ids=[f"{e}-{lo}-{rg}-{f:g}Cmax" for e, lo, rg, f in CASES],
)
def test_around_c_max_every_engine_reaches_the_conic_optimum(engine, loss_name, reg_name, factor):
    C_max = c_max(loss_name, reg_name)
    pb = problem(loss_name, reg_name, factor * C_max)
    zero = common.zero_solution(pb)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = ENGINES[engine].solve(pb)
    ref = reference(loss_name, reg_name, factor)
    assert res.status == Status.CONVERGED and res.gap <= TOL, res.message
    assert res.objective == pytest.approx(ref.objective, rel=REL)
    # never worse than alpha = 0 with the optimal offset
    assert res.objective <= zero.objective * (1 + 1e-12)
    assert res.C_max == pytest.approx(C_max, rel=1e-12)
    if factor > 1:
        # returned at once, certified: every kernel off, the gap at rounding level
        assert res.iterations == 0 and res.active_set.size == 0
        assert abs(res.gap) <= 1e-12
        assert res.objective == zero.objective
        assert np.max(np.sqrt(np.einsum("mi,mij,mj->m", ref.alpha, pb.K, ref.alpha))) <= 1e-4 * max(
            1.0, float(np.max(zero.dual_norms))
        )


@pytest.mark.parametrize("loss_name", ["logistic", "squared"])
@pytest.mark.parametrize("reg_name", list(REGULARIZERS))
def test_c_max_is_the_exact_threshold_for_a_differentiable_loss(loss_name, reg_name):
    # below C_max the conic optimum has a non-zero block and is better than alpha = 0
    C_max = c_max(loss_name, reg_name)
    zero = common.zero_solution(problem(loss_name, reg_name, 0.99 * C_max))
    ref = reference(loss_name, reg_name, 0.99)
    assert ref.objective < zero.objective - 1e-9 * abs(zero.objective)
    assert not zero.optimal(TOL)
    assert common.zero_solution(problem(loss_name, reg_name, C_max)).optimal(TOL)


def test_c_max_scales_with_the_regularizer_threshold():
    # elastic net: the prox threshold is C (1 - lam), so C_max is that of l1 / (1 - lam)
    for loss_name in LOSSES:
        assert c_max(loss_name, "elasticnet") == pytest.approx(c_max(loss_name, "l1") / 0.5, rel=1e-12)


@pytest.mark.parametrize("reg", [Lq(q=1.5), Uniform(), KL()], ids=lambda r: r.name)
def test_non_sparse_regularizers_have_no_finite_c_max(reg):
    K, y = sonar(80)
    pb = Problem(K=K, y=y, loss=Logistic(), regularizer=reg, C=1e6)
    zero = common.zero_solution(pb)
    assert zero.C_max == math.inf and not zero.optimal(1.0)
    res = Spicy(tol=1e-4).solve(pb)
    assert res.C_max == math.inf and res.active_set.size == pb.n_kernels


def test_zero_dual_point_is_a_subgradient_selection_with_zero_sum():
    # the eps-insensitive loss has kinks; on liver's discrete target the optimal offset
    # sits on one, where the selection must still sum to zero inside the subdifferential
    pb = problem("eps_insensitive", "l1")
    zero = common.zero_solution(pb)
    assert abs(float(np.sum(zero.rho))) <= 1e-12 * float(np.sum(np.abs(zero.rho)))
    r = pb.y - zero.bias
    u = -zero.rho
    eps = 0.1
    inside, above, below = np.abs(r) < eps - 1e-9, r > eps + 1e-9, r < -eps - 1e-9
    assert np.all(u[inside] == 0.0) and np.all(u[above] == -1.0) and np.all(u[below] == 1.0)
    assert np.all((-1.0 <= u) & (u <= 1.0))


def test_the_iterative_method_no_longer_degrades_far_above_the_threshold():
    # eps-insensitive + l1 at C >> C_max (the SVR case that used to wander off to
    # objectives far above alpha = 0): skipping the certificate at the start, the
    # iterative method started at the zero solution converges and stays at alpha = 0
    pb = problem("eps_insensitive", "l1")
    pb.C = 100.0 * c_max("eps_insensitive", "l1")
    zero = common.zero_solution(pb)
    runner_zero = common.ZeroSolution(
        bias=zero.bias,
        objective=zero.objective,
        dual_objective=-math.inf,
        rho=zero.rho,
        dual_norms=zero.dual_norms,
        C_max=math.inf,
        C=pb.C,
    )
    from mklkit.engines.base import Run
    from mklkit.engines.spicy import _Iterative

    eng = Spicy(tol=TOL, max_iter=50)
    run = Run(eng, pb)
    run.set_zero(runner_zero)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = _Iterative(eng, pb, run, None).run_loop()
    assert res.status == Status.CONVERGED and res.gap <= TOL
    assert res.iterations <= 3
    assert res.objective == pytest.approx(zero.objective, rel=1e-10)


def test_an_unconverged_solve_never_returns_a_point_worse_than_alpha_zero():
    # one outer iteration only, just below the threshold: whatever the iterate,
    # the result is no worse than the zero solution and its gap is certified
    pb = problem("eps_insensitive", "l1")
    pb.C = 0.9 * c_max("eps_insensitive", "l1")
    zero = common.zero_solution(pb)
    with pytest.warns(ConvergenceWarning):
        res = Spicy(tol=1e-12, max_iter=1).solve(pb)
    assert res.status == Status.MAX_ITER
    assert res.objective <= zero.objective
    P = common.primal_objective(pb, res.alpha, res.bias)
    assert P == pytest.approx(res.objective, rel=1e-12)
    assert res.dual_objective <= res.objective
