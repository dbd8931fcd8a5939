"""Joint multiclass MKL: the multinomial loss, the engine against Clarabel, the estimator."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

from mklkit.components.base import kernel
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


def _reference(K, y, reg, C, bias, w=None, n_classes=3, loss=None):
    """The joint problem in factor coordinates (K_m = L_m L_m^T, F = sum_m L_m B_m) by Clarabel (the multinomial
    loss unless ``loss`` is given)."""
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
    obj = (loss or Multinomial()).cvxpy_expr(y, F, w) + reg.cvxpy_expr(norms, squares, C)
    prob = cp.Problem(cp.Minimize(obj))
    for tol in (1e-10, 1e-9, 1e-8):  # a few weighted problems need a looser tolerance
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                prob.solve(solver=cp.CLARABEL, tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
            except cp.SolverError:  # Clarabel stalls short of the tightest tolerances on some problems
                continue
        if prob.status == cp.OPTIMAL:
            break
    # the smoothed hinge's quadratic-over-simplex form leaves Clarabel "inaccurate" at 1e-8 on some problems,
    # its value then still within 1e-10 of the certified optimum: the comparisons below keep their tolerance
    assert prob.status == cp.OPTIMAL or (loss is not None and prob.status == cp.OPTIMAL_INACCURATE)
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


# --- the estimator ---------------------------------------------------------------------------


def _three_classes(n_per: int = 25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0], [2.5, 0.0, 1.0], [0.0, 2.5, -1.0]])
    X = np.vstack([c + rng.normal(size=(n_per, 3)) for c in centres])
    return X, np.repeat([0, 1, 2], n_per)


def test_estimator_joint_shapes_and_probabilities():
    from mklkit import MKLClassifier

    X, codes = _three_classes()
    labels = np.array(["zeta", "alpha", "mid"])[codes]  # string labels, not in sorted order
    est = MKLClassifier(multiclass="joint", C=0.05, tol=1e-6).fit(X, labels)
    M = len(est.kernel_names_)
    assert est.kernel_weights_.shape == (M,) and est.kernel_weights_.sum() == pytest.approx(1.0)
    assert list(est.classes_) == ["alpha", "mid", "zeta"]
    assert isinstance(est.dual_gap_, float) and 0 <= est.dual_gap_ <= 1e-6 and isinstance(est.n_iter_, int)
    assert est.solved_by_ == "joint" and est.loss_.name == "multinomial"
    D = est.decision_function(X)
    P = est.predict_proba(X)
    assert D.shape == (X.shape[0], 3) and P.shape == (X.shape[0], 3)
    assert np.allclose(P.sum(axis=1), 1.0)
    E = np.exp(D - D.max(axis=1, keepdims=True))
    assert np.allclose(P, E / E.sum(axis=1, keepdims=True))  # the softmax of the outputs
    pred = est.predict(X)
    assert np.array_equal(pred, est.classes_[np.argmax(D, axis=1)])
    assert np.mean(pred == labels) > 0.85
    # pickling keeps the predictions
    again = pickle.loads(pickle.dumps(est))
    assert np.allclose(again.predict_proba(X), P)


def test_estimator_joint_matches_engine_on_precomputed_kernels():
    from mklkit import MKLClassifier

    K, y = _bank(N=40, M=3, seed=6)
    est = MKLClassifier(kernels="precomputed", multiclass="joint", regularizer="l1", C=0.3, tol=1e-8)
    est.fit(np.moveaxis(K, 0, -1), y.astype(int))
    res = solve_joint(JointProblem(K, y, 3, Multinomial(), L1(), 0.3), tol=1e-8)
    assert est.result_[0].objective == pytest.approx(res.objective, rel=1e-6)
    assert np.allclose(est.kernel_weights_, res.kernel_weights, atol=1e-5)
    F = np.matmul(K, res.coef).sum(0) + res.bias
    assert np.allclose(est.decision_function(np.moveaxis(K, 0, -1)), F, atol=1e-4)


def test_joint_sample_weight_is_repetition():
    """Integer weights are the rows repeated (with a bias, the repeated rows' problem)."""
    K, y = _bank(N=30, M=2, seed=7)
    reps = np.random.default_rng(0).integers(1, 3, y.size)
    idx = np.repeat(np.arange(y.size), reps)
    ref = solve_joint(
        JointProblem(K[:, idx][:, :, idx], y[idx], 3, Multinomial(), ElasticNet(lam=0.5), 0.4), tol=1e-9, max_iter=20000
    )
    weighted = solve_joint(
        JointProblem(K, y, 3, Multinomial(), ElasticNet(lam=0.5), 0.4, sample_weight=reps.astype(float)), tol=1e-9
    )
    assert weighted.objective == pytest.approx(ref.objective, rel=1e-7)


def test_estimator_joint_path_chooses_c_on_held_out_rows():
    from mklkit import MKLClassifier

    X, y = _three_classes(n_per=50, seed=2)
    est = MKLClassifier(multiclass="joint", C="path").fit(X, y)
    sel = est.C_selection_
    assert sel.chosen >= 0 and est.C_ == pytest.approx(sel.C) and sel.criterion == "loss"
    assert np.all(np.diff(sel.Cs) < 0)  # warm-started from C_max down
    assert est.kernel_weights_.shape == (len(est.kernel_names_),)


def test_estimator_joint_errors_name_the_parameter():
    from mklkit import MKLClassifier

    X, y = _three_classes()
    with pytest.raises(ParamError) as exc:
        MKLClassifier(multiclass="joint", loss="hinge").fit(X, y)
    assert exc.value.key == "loss" and exc.value.value == "hinge" and "multinomial" in exc.value.allowed
    with pytest.raises(ParamError) as exc:
        MKLClassifier(multiclass="joint", engine="spicy").fit(X, y)
    assert exc.value.key == "engine" and exc.value.value == "spicy" and "'auto'" in exc.value.allowed
    with pytest.raises(ParamError) as exc:
        MKLClassifier(multiclass="both").fit(X, y)
    assert exc.value.key == "multiclass" and "joint" in str(exc.value.allowed)


def test_estimator_auto_is_joint_where_it_applies():
    """``multiclass="auto"`` (the default) fits the joint problem with the logistic loss, engine auto and no
    weighting (the same fit as ``"joint"``), and one-vs-rest otherwise (the same fit as ``"ovr"``)."""
    from mklkit import MKLClassifier

    X, y = _three_classes()
    M = None
    for params, mode in (
        ({}, "joint"),
        ({"loss": "hinge"}, "ovr"),
        ({"engine": "spicy"}, "ovr"),
        ({"weighting": "average"}, "ovr"),
    ):
        auto = MKLClassifier(C=0.05, tol=1e-6, **params).fit(X, y)
        given = MKLClassifier(C=0.05, tol=1e-6, multiclass=mode, **params).fit(X, y)
        M = M or len(auto.kernel_names_)
        assert auto.kernel_weights_.shape == ((M,) if mode == "joint" else (3, M)), params
        # the same problem and solve, up to the rounding of parallel kernel sums and the pivots of exact factors
        np.testing.assert_allclose(auto.kernel_weights_, given.kernel_weights_, rtol=0, atol=1e-7)
        np.testing.assert_allclose(auto.decision_function(X), given.decision_function(X), rtol=0, atol=1e-6)
    assert hasattr(MKLClassifier(), "predict_proba") and not hasattr(MKLClassifier(loss="hinge"), "predict_proba")


def test_default_tol_is_that_of_the_iteration(wine):
    """Without ``tol`` the joint fit stops at its iteration's default gap: block descent on the exact factors of
    the default bank at 1e-2, and its predictions are those of the fit to 1e-8 but for at most one test point."""
    from mklkit import MKLClassifier
    from mklkit.pipeline.joint import JOINT_TOL

    X_tr, X_te, y_tr, y_te = wine
    default = MKLClassifier().fit(X_tr, y_tr)
    tight = MKLClassifier(tol=1e-8).fit(X_tr, y_tr)
    assert 1e-8 < JOINT_TOL["bcd"] and default.dual_gap_ <= JOINT_TOL["bcd"] and tight.dual_gap_ <= 1e-8
    assert default.n_iter_ < tight.n_iter_
    assert np.sum(default.predict(X_te) != tight.predict(X_te)) <= 1


def test_path_stops_at_a_solve_that_does_not_converge(wine):
    """Classes the bank separates: the held-out log-loss keeps falling as C falls, and the solves get harder.  The
    path stops at its first solve that does not converge within ``max_iter``, chooses among those that did, and
    the fit at that C converges without a warning."""
    from mklkit import MKLClassifier
    from mklkit.pipeline.joint import JOINT_PATH_TOL, JOINT_TOL
    from mklkit.result import ConvergenceWarning

    X_tr, _, y_tr, _ = wine
    X = (X_tr - X_tr.mean(0)) / X_tr.std(0)
    bank = [{"function": "linear"}, {"function": "poly", "degree": 2}]
    est = MKLClassifier(
        bank,
        multiclass="joint",
        regularizer={"name": "elasticnet", "lam": 0.5},
        C="path",
        normalize="none",
        standardize=False,
        max_iter=1000,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(X, y_tr)
    path = est.C_selection_
    assert path.iterations[-1] == 1000 and path.gaps[-1] > JOINT_PATH_TOL  # the last solve did not converge
    assert np.all(path.gaps[:-1] <= JOINT_PATH_TOL) and path.chosen < path.Cs.size - 1
    assert path.converged.tolist() == [True] * (path.Cs.size - 1) + [False]
    assert path.losses[-1] < path.losses[path.chosen]  # lower, but no candidate
    assert est.dual_gap_ <= JOINT_TOL["bcd"]


def test_estimator_joint_two_classes_is_the_binary_problem():
    from mklkit import MKLClassifier

    X, y = _three_classes()
    keep = y < 2
    a = MKLClassifier(multiclass="joint", C=0.1).fit(X[keep], y[keep])
    b = MKLClassifier(multiclass="ovr", C=0.1).fit(X[keep], y[keep])
    assert np.array_equal(a.decision_function(X), b.decision_function(X))


def test_doc_examples_run():
    """The examples of docs/multiclass.md run as doctests."""
    import doctest
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "multiclass.md"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        failures, tried = doctest.testfile(
            str(doc), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
    assert tried >= 10 and failures == 0


@pytest.mark.parametrize("method", ["bcd", "fista"])
@pytest.mark.parametrize("bias", [True, False])
def test_factor_bank_same_solution(bias, method):
    """On exact factors of the bank the engine iterates in factor coordinates: the same optimum (Clarabel),
    and coefficients that give the dense problem's outputs and objective."""
    from mklkit.kernels.factorize.dense import exact_factors

    K, y = _bank(seed=8)
    reg = ElasticNet(lam=0.5)
    fac = exact_factors(K)
    assert fac.exact
    res = solve_joint(
        JointProblem(fac.bank, y, 3, Multinomial(), reg, 0.5, bias=bias), tol=1e-9, max_iter=20000, method=method
    )
    ref = _reference(K, y, reg, 0.5, bias)
    assert res.converged and abs(res.objective - ref) <= 1e-6 * abs(ref)
    dense = JointProblem(K, y, 3, Multinomial(), reg, 0.5, bias=bias)
    primal, dual, _ = certify_joint(dense, res.coef, res.bias)
    assert primal == pytest.approx(res.objective, rel=1e-8)
    assert dual <= primal * (1 + 1e-12) and (primal - dual) / primal <= 1e-6
    # warm start from the dense solution's coefficients
    warm = solve_joint(
        JointProblem(fac.bank, y, 3, Multinomial(), reg, 0.45, bias=bias), tol=1e-6, warm_start=res, method=method
    )
    assert warm.converged and warm.iterations < res.iterations


def _factor_bank(sparse: bool, N: int = 36, seed: int = 3):
    """A factor bank of three blocks of ranks 2, 5 and 9 (random factors; half the entries zero when sparse)
    and its Gram matrices."""
    import scipy.sparse as sps

    from mklkit.kernels.factor import FactorBank

    rng = np.random.default_rng(seed)
    ranks = (2, 5, 9)
    LT = rng.normal(size=(sum(ranks), N)) * np.repeat([1.0, 0.5, 0.2], ranks)[:, None]
    if sparse:
        LT[rng.random(LT.shape) < 0.5] = 0.0
    starts = np.concatenate([[0], np.cumsum(ranks)])
    K = np.stack([LT[a:b].T @ LT[a:b] for a, b in zip(starts[:-1], starts[1:])])
    return FactorBank(sps.csr_matrix(LT) if sparse else LT, starts), K


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("reg, C, bias, weighted", CASES)
def test_descent_matches_clarabel(reg, C, bias, weighted, sparse):
    """Block coordinate descent on a factor bank (dense or CSR factors, not from a Gram bank): the optimum
    of Clarabel to 1e-6, weak duality, and the dual at its certified point."""
    bank, K = _factor_bank(sparse)
    rng = np.random.default_rng(5)
    y = rng.integers(0, 3, K.shape[1]).astype(np.float64)
    w = rng.uniform(0.5, 2.0, y.size) if weighted else None
    prob = JointProblem(bank, y, 3, Multinomial(), reg, C, bias=bias, sample_weight=w)
    res = solve_joint(prob, tol=1e-9, max_iter=20000, method="bcd")
    ref = _reference(K, y, reg, C, bias, w)
    assert res.converged and res.gap <= 1e-9
    assert abs(res.objective - ref) <= 1e-6 * abs(ref)
    slack = 1e-8 * abs(ref)  # Clarabel's own gap tolerance is 1e-10 to 1e-8
    assert res.dual_objective <= ref + slack and ref <= res.objective + slack
    assert res.factor_coef is not None and res.factor_coef.shape == (bank.total_rank, 3)
    primal, dual, _ = certify_joint(prob, res.coef, res.bias)
    assert primal == pytest.approx(res.objective, rel=1e-7)


def test_method_is_checked():
    K, y = _bank()
    with pytest.raises(ParamError) as err:
        solve_joint(JointProblem(K, y, 3, Multinomial(), L1(), 0.3), method="bcd")
    assert err.value.key == "method" and "fista" in err.value.allowed
    bank, _ = _factor_bank(False, N=K.shape[1])
    with pytest.raises(ParamError) as err:
        solve_joint(JointProblem(bank, y, 3, Multinomial(), L1(), 0.3), method="newton")
    assert err.value.key == "method" and "bcd" in err.value.allowed


def test_block_spectral_bounds():
    """The blocks' curvature bounds: above the squared spectral norm and within 25 % of it, for small blocks
    (Gram matrix: Gershgorin or the eigenvalue) and large ones (svds), dense and CSR; the block arrays' own
    exact norms when those exist; the exact norm by ``spectral_sq``."""
    import scipy.sparse as sps

    from mklkit.kernels.factor import FactorBank
    from mklkit.kernels.factor_arrays import SPECTRAL_GRAM_WORK, block_spectral_bounds, factor_arrays, spectral_sq

    rng = np.random.default_rng(0)
    N = 150
    big = int(np.sqrt(SPECTRAL_GRAM_WORK / N)) + 10  # past the Gram route: svds
    positive = np.abs(rng.normal(size=(3, N)))  # a near rank-1 Gram: Gershgorin is tight
    LT = np.vstack([positive, rng.normal(size=(20, N)), rng.normal(size=(big, N))])
    starts = np.array([0, 3, 23, 23 + big])
    exact = np.array([np.linalg.norm(LT[a:b], 2) ** 2 for a, b in zip(starts[:-1], starts[1:])])
    for stored in (LT, sps.csr_matrix(LT)):
        bank = FactorBank(stored, starts)
        got = block_spectral_bounds(bank)
        assert np.all(got >= exact) and np.all(got <= 1.25 * exact * (1 + 1e-9))
        assert got[0] > exact[0] * (1 + 1e-6) and got[1] == pytest.approx(exact[1], rel=1e-9)  # Gershgorin; eigh
        assert [spectral_sq(bank.block(m)) for m in range(3)] == pytest.approx(exact, rel=1e-9)
    bank = FactorBank(LT, starts)
    arrays = factor_arrays(bank)
    assert block_spectral_bounds(bank) is arrays.lip


def test_gram_spectral_bounds_of_exact_factors():
    """The bound a kernel gives its exact factors: above the block's squared spectral norm (and the kernel's
    largest eigenvalue) and within 25 % of it where found; found for Gaussian kernels not near the identity; NaN
    for a kernel with a
    zero row, whose block is then bounded from its factor; kept by a subset of the bank and used by
    ``block_spectral_bounds``."""
    from mklkit.kernels.factor_arrays import block_spectral_bounds, gram_spectral_bound
    from mklkit.kernels.factorize.dense import exact_factors

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    gauss = [np.exp(-sq / (2 * w * w)) for w in (0.3, 1.0, 3.0, 30.0)]
    Z = rng.normal(size=(60, 3))
    linear = Z @ Z.T  # mixed signs
    zero_row = gauss[1].copy()
    zero_row[5, :] = zero_row[:, 5] = 0.0
    K = np.stack(gauss + [linear, zero_row])
    fac = exact_factors(K, spectral_bounds=True)
    bank = fac.bank
    norms = np.array([np.linalg.norm(bank.block(m), 2) ** 2 for m in range(K.shape[0])])
    top = np.linalg.eigvalsh(K)[:, -1]
    b = bank.spectral_bounds
    assert np.all(np.isfinite(b[1:4]))  # Gaussian kernels of all but the narrowest width: found in three steps
    assert np.isnan(b[5]) and np.isnan(gram_spectral_bound(zero_row))
    found = np.isfinite(b)
    assert np.all(b[found] >= top[found]) and np.all(b[found] >= norms[found])
    assert np.all(b[found] <= 1.25 * top[found] * (1 + 1e-9))
    got = block_spectral_bounds(bank)
    assert np.all(got >= norms) and np.all(got <= 1.25 * norms * (1 + 1e-9))
    assert np.array_equal(got[found], b[found])
    keep = np.array([5, 1])
    assert np.array_equal(bank.subset(keep).spectral_bounds, b[keep], equal_nan=True)
    assert np.all(np.isnan(exact_factors(K).bank.spectral_bounds))  # only when asked for
    for seed in range(20):  # random symmetric matrices of mixed signs: never below the largest eigenvalue
        A = np.random.default_rng(seed).normal(size=(30, 30))
        A = A + A.T + (seed % 3) * 10 * np.eye(30)
        bound = gram_spectral_bound(A)
        assert np.isnan(bound) or bound >= np.linalg.eigvalsh(A)[-1]


def test_coefficients_of_several_columns_at_once():
    """``alpha_from_beta`` of (R, K) columns is the column-by-column answer, for a bank with its own solve
    (exact factors, all columns of a block in one triangular solve) and for a plain factor bank."""
    from mklkit.kernels.factor import FactorBank
    from mklkit.kernels.factorize.dense import exact_factors

    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.stack([np.exp(-sq / 2), X @ X.T])
    exact = exact_factors(K).bank
    plain = FactorBank(exact.LT.copy(), exact.starts)
    beta = rng.normal(size=(exact.total_rank, 3))
    beta[exact.starts[1] : exact.starts[2], 1] = 0.0  # a zero block of one column
    for bank in (exact, plain):
        together = bank.alpha_from_beta(beta)
        apart = np.stack([bank.alpha_from_beta(np.ascontiguousarray(beta[:, k])) for k in range(3)], -1)
        assert together.shape == (2, 40, 3)
        np.testing.assert_allclose(together, apart, rtol=1e-12, atol=1e-12)
        for k in range(3):  # L_m^T alpha_m = beta_m
            np.testing.assert_allclose(bank.coefficients(together[:, :, k]), beta[:, k], atol=1e-8)


def _checked_gradient(loss, y, F, h=1e-6):
    """``loss``'s gradient at ``F``, asserted against central differences of its value."""
    p = loss.param_vector
    G = loss.jit.grad(y, F, p)
    for k in range(F.shape[1]):
        D = np.zeros_like(F)
        D[:, k] = h
        num = (loss.jit.value(y, F + D, p) - loss.jit.value(y, F - D, p)) / (2 * h)
        assert np.allclose(G[:, k], num, atol=1e-6)
    return G


def test_crammer_singer_kernels():
    """The smoothed multiclass hinge: its value against the dual formula min_t t + sum_k (z_k - t)_+^2 / (2 gamma)
    (scipy), the bounds to the hinge, the gradient against central differences, Fenchel-Young and the domain."""
    from scipy.optimize import minimize_scalar

    from mklkit.components.multiclass import CrammerSinger

    gamma = 0.3
    loss = CrammerSinger(smoothing=gamma)
    p = loss.param_vector
    rng = np.random.default_rng(2)
    N, K = 12, 4
    y = rng.integers(0, K, N).astype(np.float64)
    F = 2.0 * rng.normal(size=(N, K))
    E = np.eye(K)[y.astype(int)]
    v = loss.jit.value(y, F, p)
    for i in range(N):
        z = F[i] + 1.0 - E[i]
        dual = minimize_scalar(lambda t: t + np.sum(np.maximum(z - t, 0.0) ** 2) / (2 * gamma), tol=1e-12)
        assert v[i] == pytest.approx(dual.fun - F[i, int(y[i])], abs=1e-9)
    hinge = np.max(F + 1.0 - E, axis=1) - F[np.arange(N), y.astype(int)]
    assert np.all(v >= hinge - gamma / 2 - 1e-12) and np.all(v <= hinge - gamma / (2 * K) + 1e-12)
    G = _checked_gradient(loss, y, F)
    assert loss.grad_lipschitz(3) == pytest.approx(1 / gamma)
    # Fenchel-Young: equality at the gradient, inequality at another point of the domain
    assert np.allclose(v + loss.jit.conj(y, G, p), np.sum(G * F, axis=1), atol=1e-10)
    Q = rng.dirichlet(np.ones(K), size=N)
    U = Q - E
    assert np.all(v + loss.jit.conj(y, U, p) >= np.sum(U * F, axis=1) - 1e-12)
    assert np.all(np.isinf(loss.jit.conj(y, U + 0.1, p)))  # rows off the simplex


@pytest.mark.parametrize("factor", [False, True])
@pytest.mark.parametrize("reg, C", [(L1(), 0.3), (ElasticNet(lam=0.5), 0.5)])
def test_crammer_singer_joint_matches_clarabel(reg, C, factor):
    """The joint problem with the smoothed multiclass hinge (FISTA on the Gram bank, block descent on its exact
    factors): Clarabel's optimum to 1e-6 relative and weak duality."""
    from mklkit.components.multiclass import CrammerSinger
    from mklkit.kernels.factorize.dense import exact_factors

    K, y = _bank(seed=4)
    loss = CrammerSinger(smoothing=0.2)
    bank = exact_factors(K).bank if factor else K
    res = solve_joint(JointProblem(bank, y, 3, loss, reg, C), tol=1e-9, max_iter=50000)
    ref = _reference(K, y, reg, C, True, loss=loss)
    assert res.converged and abs(res.objective - ref) <= 1e-6 * abs(ref)
    assert res.dual_objective <= ref + 1e-8 * abs(ref)


def test_weston_watkins_kernels():
    """The smoothed Weston-Watkins hinge: its value against the sum of Huber-smoothed hinges, the bounds to the
    hinge, the gradient against central differences, the curvature bound K/gamma attained, Fenchel-Young and
    the conjugate's domain."""
    from mklkit.components.multiclass import WestonWatkins

    gamma = 0.3
    loss = WestonWatkins(smoothing=gamma)
    p = loss.param_vector
    rng = np.random.default_rng(5)
    N, K = 40, 4
    y = rng.integers(0, K, N).astype(np.float64)
    F = rng.normal(size=(N, K))
    E = np.eye(K)[y.astype(int)]
    T = 1.0 + F - F[np.arange(N), y.astype(int)][:, None]
    huber = np.where(T <= 0, 0.0, np.where(T < gamma, T**2 / (2 * gamma), T - gamma / 2))
    v = loss.jit.value(y, F, p)
    assert np.allclose(v, np.sum(huber * (1 - E), axis=1), atol=1e-12)
    hinge = np.sum(np.maximum(T, 0.0) * (1 - E), axis=1)
    assert np.all(v <= hinge + 1e-12) and np.all(v >= hinge - (K - 1) * gamma / 2 - 1e-12)
    G = _checked_gradient(loss, y, F)
    assert np.allclose(G.sum(axis=1), 0.0)
    # the bound K/gamma is attained: every margin inside the quadratic part, F moved along D^T of the all-ones
    assert loss.grad_lipschitz(K) == pytest.approx(K / gamma)
    F0 = np.zeros((1, K))
    F0[0, 1:] = -1.0 + gamma / 2  # y = 0, every t_k = gamma/2
    d = np.full((1, K), 1e-3)
    d[0, 0] = -(K - 1) * 1e-3
    y0 = np.zeros(1)
    ratio = np.linalg.norm(loss.jit.grad(y0, F0 + d, p) - loss.jit.grad(y0, F0, p)) / np.linalg.norm(d)
    assert ratio == pytest.approx(K / gamma, rel=1e-9)
    # Fenchel-Young: equality at the gradient; the domain: entries off the label in [0, 1], rows summing to 0
    assert np.allclose(v + loss.jit.conj(y, G, p), np.sum(G * F, axis=1), atol=1e-10)
    A = rng.uniform(0, 1, (N, K)) * (1 - E)
    U = A - E * A.sum(axis=1, keepdims=True)
    assert np.all(v + loss.jit.conj(y, U, p) >= np.sum(U * F, axis=1) - 1e-12)
    assert np.all(np.isinf(loss.jit.conj(y, U + 0.1 * E, p)))  # rows not summing to 0
    assert np.all(np.isinf(loss.jit.conj(y, 1.5 * U / np.maximum(A.max(axis=1, keepdims=True), 1e-3), p)))


def test_max_circulation():
    """``max_circulation``: within the capacities, every class receives what it sends, no cycle of capacity is
    left unused, and a circulation is kept whole."""
    from mklkit.components.multiclass import max_circulation

    rng = np.random.default_rng(6)
    for K in (2, 3, 5, 8):
        for _ in range(20):
            F = rng.uniform(0, 1, (K, K)) * (rng.uniform(size=(K, K)) < 0.7)
            f = max_circulation(F)
            assert np.all(f >= 0) and np.all(f <= F + 1e-15) and np.all(np.diag(f) == 0)
            assert np.allclose(f.sum(axis=0), f.sum(axis=1), atol=1e-12)
            # what is left has no cycle: it has a topological order
            left = (F - f > 1e-12) & ~np.eye(K, dtype=bool)
            alive = list(range(K))
            while alive:
                sinks = [a for a in alive if not any(left[a, b] for b in alive)]
                assert sinks, "a cycle of unused capacity is left"
                alive = [a for a in alive if a not in sinks]
            # a circulation (f itself) is kept whole
            assert np.allclose(max_circulation(f), f, atol=1e-12)


@pytest.mark.parametrize("factor, reg, C", [(False, L1(), 0.3), (True, ElasticNet(lam=0.5), 0.5)])
def test_weston_watkins_joint_matches_clarabel(factor, reg, C):
    """The joint problem with the smoothed Weston-Watkins hinge (FISTA on the Gram bank, block descent on its
    exact factors), with a bias and sample weights: Clarabel's optimum to 1e-6 relative, weak duality, and the
    certified dual a circulation (its columns sum to 0)."""
    from mklkit.components.multiclass import WestonWatkins
    from mklkit.kernels.factorize.dense import exact_factors

    K, y = _bank(seed=7)
    w = np.random.default_rng(8).uniform(0.5, 2.0, y.size)
    loss = WestonWatkins(smoothing=0.2)
    bank = exact_factors(K).bank if factor else K
    res = solve_joint(JointProblem(bank, y, 3, loss, reg, C, sample_weight=w), tol=1e-9, max_iter=50000)
    ref = _reference(K, y, reg, C, True, w, loss=loss)
    assert res.converged and res.gap <= 1e-9 and abs(res.objective - ref) <= 1e-6 * abs(ref)
    assert res.dual_objective <= ref + 1e-8 * abs(ref)
    assert np.allclose(res.dual.sum(axis=0), 0.0, atol=1e-10)


def test_estimator_weston_watkins():
    """``loss="weston_watkins"`` fits the joint problem: one weighting, certified, no probabilities."""
    from mklkit import MKLClassifier

    X, y = _three_classes()
    est = MKLClassifier(loss="weston_watkins", C=0.05, tol=1e-6).fit(X, y)
    assert est.kernel_weights_.shape == (len(est.kernel_names_),) and est.solved_by_ == "joint"
    assert est.loss_.name == "weston_watkins" and est.dual_gap_ <= 1e-6
    assert not hasattr(est, "predict_proba") and np.mean(est.predict(X) == y) > 0.85


def test_estimator_crammer_singer():
    """``loss="crammer_singer"`` (with its smoothing as a mapping) fits the joint problem: one weighting, no
    probabilities; an unknown multiclass loss is an error naming ``loss``."""
    from mklkit import MKLClassifier

    X, y = _three_classes()
    est = MKLClassifier(loss={"name": "crammer_singer", "smoothing": 0.2}, C=0.05, tol=1e-6).fit(X, y)
    assert est.kernel_weights_.shape == (len(est.kernel_names_),) and est.solved_by_ == "joint"
    assert est.loss_.name == "crammer_singer" and est.dual_gap_ <= 1e-6
    assert not hasattr(est, "predict_proba") and np.mean(est.predict(X) == y) > 0.85
    with pytest.raises(ParamError) as exc:
        MKLClassifier(multiclass="joint", loss="squared").fit(X, y)
    assert exc.value.key == "loss" and "crammer_singer" in exc.value.allowed and "weston_watkins" in exc.value.allowed


class _HalfGradient(Multinomial):
    """The multinomial loss with half its gradient (a wrong kernel)."""

    name = "half_gradient"

    @kernel
    def grad(y, F, params):
        N, K = F.shape
        out = np.empty((N, K))
        for i in range(N):
            s = 0.0
            for k in range(K):
                s += np.exp(F[i, k])
            for k in range(K):
                out[i, k] = 0.5 * np.exp(F[i, k]) / s
            out[i, int(y[i])] -= 0.5
        return out


class _Understated(Multinomial):
    """The multinomial loss claiming a curvature bound below its own."""

    name = "understated"

    def grad_lipschitz(self, n_classes):
        return 0.01


class _WrongOffset(Multinomial):
    """The multinomial loss with a wrong optimal offset."""

    name = "wrong_offset"

    def optimal_offset(self, y, w, n_classes):
        return np.arange(n_classes, dtype=np.float64)


def test_the_multiclass_loss_kit_passes_the_built_ins_and_finds_broken_ones():
    """``check_component`` on a multiclass loss: the built-ins pass; a wrong gradient, an understated curvature
    bound and a wrong optimal offset each fail their identity (a wrong gradient also breaks Fenchel-Young)."""
    from mklkit.components.multiclass import BUILTIN_MULTICLASS_LOSSES
    from mklkit.testing import check_component

    assert {c.name for c in BUILTIN_MULTICLASS_LOSSES} >= {"multinomial", "crammer_singer", "weston_watkins"}
    for cls in BUILTIN_MULTICLASS_LOSSES:
        report = check_component(cls)
        assert report.ok, str(report)
    for cls, identities in (
        (_HalfGradient, {"gradient", "fenchel_young"}),
        (_Understated, {"lipschitz"}),
        (_WrongOffset, {"offset"}),
    ):
        report = check_component(cls)
        assert {c.identity for c in report.failures} == identities, str(report)


def test_a_plugin_multiclass_loss_is_used_by_name():
    """A multiclass loss registered by a plugin is named like a built-in (the estimator's ``loss``)."""
    from mklkit import MKLClassifier
    from mklkit.components.multiclass import CrammerSinger
    from mklkit.testing import registered

    class Wide(CrammerSinger):
        name = "wide_hinge"
        description = "the smoothed multiclass hinge at a wide smoothing"

    X, y = _three_classes()
    with registered(Wide):
        est = MKLClassifier(loss={"name": "wide_hinge", "smoothing": 1.0}, C=0.05, tol=1e-6).fit(X, y)
    assert est.loss_.name == "wide_hinge" and est.loss_.param_vector[0] == 1.0
    assert est.kernel_weights_.shape == (len(est.kernel_names_),) and est.dual_gap_ <= 1e-6
