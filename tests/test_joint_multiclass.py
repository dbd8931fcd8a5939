"""Joint multiclass MKL: the multinomial loss, the engine against Clarabel, the estimator."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from mklkit.components.elasticnet import L1, ElasticNet, Uniform
from mklkit.components.losses import Logistic
from mklkit.components.multiclass import Multinomial, simplex_transport
from mklkit.components.params import ParamError
from mklkit.engines.joint import JointProblem, certify_joint, joint_zero, solve_joint

cp = pytest.importorskip("cvxpy")


def _bank(N: int = 40, M: int = 3, K: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4))
    y = np.argmax(X[:, :K] + 0.8 * rng.normal(size=(N, K)), axis=1).astype(np.float64)
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    Ks = []
    for g in (0.1, 0.5, 2.0, 5.0)[:M]:
        Km = np.exp(-g * D)
        Ks.append(Km / np.trace(Km) * N)
    return np.stack(Ks), y


def _reference(K, y, reg, C, bias, w=None, n_classes=3):
    """The joint problem in factor coordinates (K_m = L_m L_m^T, F = sum_m L_m B_m) by Clarabel."""
    M, N, _ = K.shape
    Ls = []
    for m in range(M):
        ev, V = np.linalg.eigh(K[m])
        keep = ev > 1e-10 * ev[-1]
        Ls.append(V[:, keep] * np.sqrt(ev[keep]))
    B = [cp.Variable((L.shape[1], n_classes)) for L in Ls]
    F = sum(L @ Bm for L, Bm in zip(Ls, B))
    if bias:
        b = cp.Variable((1, n_classes))
        F = F + np.ones((N, 1)) @ b
    norms = [cp.norm(Bm, "fro") for Bm in B]
    squares = [cp.sum_squares(Bm) for Bm in B]
    obj = Multinomial().cvxpy_expr(y, F, w) + reg.cvxpy_expr(norms, squares, C)
    prob = cp.Problem(cp.Minimize(obj))
    for tol in (1e-10, 1e-9, 1e-8):  # a few weighted problems need a looser tolerance
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            prob.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
        if prob.status == cp.OPTIMAL:
            break
    assert prob.status == cp.OPTIMAL
    return float(prob.value)


CASES = [
    (L1(), 0.3, True, False),
    (L1(), 0.3, False, False),
    (ElasticNet(lam=0.5), 0.5, True, False),
    (ElasticNet(lam=0.5), 0.5, False, True),
    (L1(), 0.2, True, True),
]


@pytest.mark.parametrize("reg, C, bias, weighted", CASES)
def test_joint_matches_clarabel(reg, C, bias, weighted):
    K, y = _bank()
    w = np.random.default_rng(3).uniform(0.5, 2.0, y.size) if weighted else None
    prob = JointProblem(K, y, 3, Multinomial(), reg, C, bias=bias, sample_weight=w)
    res = solve_joint(prob, tol=1e-9, max_iter=20000)
    ref = _reference(K, y, reg, C, bias, w)
    assert res.converged and res.gap <= 1e-9
    assert abs(res.objective - ref) <= 1e-6 * abs(ref)
    # weak duality: the certified dual below the optimum, the primal above it (to Clarabel's 1e-8)
    assert res.dual_objective <= ref + 1e-8 * abs(ref)
    assert res.objective >= ref - 1e-8 * abs(ref)
    # the certificate recomputed from scratch at the returned point
    primal, dual, _ = certify_joint(prob, res.coef, res.bias)
    assert primal == pytest.approx(res.objective, rel=1e-10)
    assert dual <= primal * (1 + 1e-12) and (primal - dual) / primal <= 1e-6
    # one weighting for all classes, summing to 1
    assert res.kernel_weights.shape == (3,) and res.kernel_weights.sum() == pytest.approx(1.0)
    if bias:
        assert np.allclose(res.dual.sum(axis=0), 0.0, atol=1e-10)


def test_gap_at_most_tol_and_warm_start():
    K, y = _bank(seed=1)
    prob = JointProblem(K, y, 3, Multinomial(), ElasticNet(lam=0.5), 0.5)
    cold = solve_joint(prob, tol=1e-6)
    assert cold.converged and 0 <= cold.gap <= 1e-6
    prob2 = JointProblem(K, y, 3, Multinomial(), ElasticNet(lam=0.5), 0.4)
    warm = solve_joint(prob2, tol=1e-6, warm_start=cold)
    again = solve_joint(prob2, tol=1e-6)
    assert warm.converged and warm.iterations < again.iterations
    assert warm.objective == pytest.approx(again.objective, rel=1e-5)


def test_max_iter_warns():
    K, y = _bank(seed=2)
    prob = JointProblem(K, y, 3, Multinomial(), L1(), 0.05)
    with pytest.warns(Warning, match="max_iter"):
        res = solve_joint(prob, tol=1e-12, max_iter=3)
    assert res.status == "max_iter" and res.iterations == 3 and res.gap > 1e-12


def test_zero_solution_above_c_max():
    K, y = _bank(seed=4)
    prob = JointProblem(K, y, 3, Multinomial(), L1(), 1.0)
    cmax = joint_zero(prob).C_max
    assert 0 < cmax < math.inf
    above = solve_joint(JointProblem(K, y, 3, Multinomial(), L1(), 1.01 * cmax), tol=1e-8)
    assert above.trivial and above.iterations == 0 and above.gap <= 1e-8
    counts = np.bincount(y.astype(int), minlength=3) / y.size
    assert np.allclose(Multinomial().proba(np.tile(above.bias, (2, 1))), counts)
    below = solve_joint(JointProblem(K, y, 3, Multinomial(), L1(), 0.9 * cmax), tol=1e-8)
    assert not below.trivial


@pytest.mark.parametrize("reg, factor", [(L1(), 1 / math.sqrt(2)), (Uniform(), 0.5)])
def test_two_classes_is_binary_logistic(reg, factor):
    r"""K = 2: L(y, F) = log(1 + e^{-s z}), z = F_1 - F_0, s = +-1, and the minimum-norm split
    A = (-a/2, a/2) gives ||A_m|| = ||a_m||/sqrt 2: joint(C) is binary logistic at C/sqrt 2 (l1)
    and at C/2 (uniform)."""
    from mklkit.engines.spicy import Spicy
    from mklkit.problem import Problem

    K, y3 = _bank(seed=5, K=2)
    y = y3
    C = 0.3
    joint = solve_joint(JointProblem(K, y, 2, Multinomial(), reg, C), tol=1e-10, max_iter=50000)
    binary = Spicy(tol=1e-10).solve(Problem(K=K, y=2 * y - 1, loss=Logistic(), regularizer=reg, C=C * factor))
    assert joint.objective == pytest.approx(binary.objective, rel=1e-7)
    z_joint = (np.matmul(K, joint.coef).sum(0) + joint.bias) @ np.array([-1.0, 1.0])
    z_bin = np.einsum("mij,mj->i", K, binary.alpha) + binary.bias
    assert np.allclose(z_joint, z_bin, atol=1e-4)


def test_multinomial_kernels_against_numpy():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(7, 4)) * 3
    y = rng.integers(0, 4, 7).astype(np.float64)
    lo = Multinomial()
    p = lo.param_vector
    lse = np.log(np.exp(F).sum(1))
    assert np.allclose(lo.jit.value(y, F, p), lse - F[np.arange(7), y.astype(int)], rtol=1e-13)
    E = np.eye(4)[y.astype(int)]
    soft = np.exp(F) / np.exp(F).sum(1, keepdims=True)
    assert np.allclose(lo.jit.grad(y, F, p), soft - E, atol=1e-14)
    # Fenchel-Young with equality at U = grad: L(F) + L*(U) = <U, F>
    U = soft - E
    lhs = lo.jit.value(y, F, p) + lo.jit.conj(y, U, p)
    assert np.allclose(lhs, (U * F).sum(1), atol=1e-12)
    # outside the shifted simplex the conjugate is +inf
    bad = U.copy()
    bad[0, 0] += 0.1
    assert np.isinf(lo.jit.conj(y, bad, p)[0]) and np.isfinite(lo.jit.conj(y, bad, p)[1:]).all()


def test_simplex_transport_meets_the_counts():
    rng = np.random.default_rng(1)
    Q = rng.dirichlet(np.ones(4), size=30)
    w = rng.uniform(0.5, 2.0, 30)
    target = rng.dirichlet(np.ones(4)) * w.sum()
    out = simplex_transport(Q, w, target)
    assert np.all(out >= 0) and np.allclose(out.sum(1), 1.0)
    assert np.allclose((w[:, None] * out).sum(0), target, atol=1e-12)


def test_problem_errors_name_the_parameter():
    K, y = _bank()
    with pytest.raises(ParamError) as exc:
        JointProblem(K, y, 3, Logistic(), L1(), 1.0)
    assert exc.value.key == "loss"
    with pytest.raises(ParamError) as exc:
        JointProblem(K, y, 3, Multinomial(), L1(), -1.0)
    assert exc.value.key == "C"
