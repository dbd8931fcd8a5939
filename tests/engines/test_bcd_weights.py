"""Per-sample weights in the ``bcd`` engine.

The weighted problem has the loss term :math:`\\sum_i w_i\\ell(y_i, z_i)`
(``docs/contracts.md``, "Sample weights").  ``bcd`` solves it in its jitted
loops with the weights next to the conjugate's domain: the smooth terms
times :math:`w_i`, and for a non-smooth loss the Moreau envelope of
:math:`w_i\\ell`, :math:`(w\\ell)_\\mu(z) = w\\,\\ell_{\\mu w}(z)`.  Checked
here: that identity (from its definition, by central differences, and
against the repeated rows), integer weights against the rows repeated
:math:`w_i` times on exact factors (dense and sparse), weak duality against
the conic reference, and ``auto``'s route to ``bcd``.  The weights are
non-uniform (in {1, 2, 3}), so the weighted arithmetic is exercised.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import mklkit
from mklkit.components.losses import Logistic
from mklkit.engines.common import certify, dual_objective
from mklkit.engines.objectives import dual_block_norms, primal_objective
from mklkit.kernels.factor import FactorBank
from mklkit.plugins import get_registry
from mklkit.problem import Problem

try:  # the weighted rows and the Gram bank of the core's weight tests (``small`` is a fixture)
    from tests.test_sample_weight import _gram, small  # noqa: F401
except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
    from test_sample_weight import _gram, small  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-9  # smooth losses: bcd's gap
#: The hinge (through the envelope): on these problems bcd stalls at a relative gap of about
#: 2e-9 on the exact factors (newton; 4e-10 with method bcd) and 1e-8 to 3e-7 on the sparse
#: bank, weighted or not (the rows repeated, unweighted, stall alike).
TOL_HINGE = 1e-7
TOL_HINGE_SPARSE = 1e-6


class LogisticNoBound(Logistic):
    """The logistic loss without its curvature bound: ``method: bcd`` then checks every block
    step on the (weighted) loss itself, on the block's samples."""

    name = "logistic_no_bound"

    def deriv_lipschitz(self) -> float:
        return math.inf


def _eigen_blocks(K: np.ndarray) -> list[np.ndarray]:
    """Exact factors of every Gram matrix (eigenvalues above 1e-12 of the largest)."""
    out = []
    for Km in K:
        lam, V = np.linalg.eigh(Km)
        keep = lam > 1e-12 * lam[-1]
        out.append(V[:, keep] * np.sqrt(lam[keep]))
    return out


def _factored(small, loss: str, reg: str, C: float):
    """The weighted problem on exact factors, the same factors with the rows repeated
    :math:`w_i` times (unweighted), the dense weighted problem, and the repetition index."""
    X, y, w = small
    r = get_registry()
    lo, rg = r.create("loss", loss), r.create("regularizer", reg)
    K = _gram(X)
    blocks = _eigen_blocks(K)
    rep = np.repeat(np.arange(y.size), w.astype(int))
    weighted = Problem(K=FactorBank.from_blocks(blocks), y=y, loss=lo, regularizer=rg, C=C, sample_weight=w)
    repeated = Problem(K=FactorBank.from_blocks([B[rep] for B in blocks]), y=y[rep], loss=lo, regularizer=rg, C=C)
    dense = Problem(K=K, y=y, loss=lo, regularizer=rg, C=C, sample_weight=w)
    return weighted, repeated, dense, rep


def _solve(engine: dict, pb: Problem):
    with warnings.catch_warnings():
        warnings.simplefilter("error", mklkit.ConvergenceWarning)
        return get_registry().create("engine", engine).solve(pb)


# ---------------------------------------------------------------------------
# the weighted loss in the jitted loops
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["hinge", "eps_insensitive"])
def test_weighted_envelope(loss):
    r""":math:`(w\ell)_\mu(z) = \sup_u uz - w\ell^*(u/w) - \mu u^2/2 = w\,\ell_{\mu w}(z)`:
    the value against its definition (brute force on a grid of :math:`w` times the domain),
    the derivative :math:`u` against central differences of the value, the curvature against
    central differences of :math:`u`, and all three against the envelope of the rows
    repeated :math:`w_i` times (each of smoothing :math:`\mu w_i`)."""
    from mklkit._jit import bcd as kb

    obj = get_registry().create("loss", loss)
    k, lp = obj.jit, np.ascontiguousarray(obj.param_vector, dtype=np.float64)
    fns = kb.loss_fns(obj)
    rng = np.random.default_rng(3)
    n = 60
    y = np.where(rng.random(n) > 0.5, 1.0, -1.0) if obj.task == "classification" else rng.standard_normal(n)
    z = y + rng.standard_normal(n) * 0.6
    w = rng.integers(1, 4, size=n).astype(np.float64)
    lo = np.ascontiguousarray(k.conj_lower(y, lp), dtype=np.float64)
    hi = np.ascontiguousarray(k.conj_upper(y, lp), dtype=np.float64)
    mu = 0.3
    empty = np.zeros(0)

    def env(zz, ww, m=mu, yy=y, lw=lo, hw=hi):
        return kb.eval_loss(kb.samples(yy, lw, hw, ww, kb.KIND_ENVELOPE, m), np.ascontiguousarray(zz), fns, True, True)

    v, u, h = env(z, w)
    # the definition, over u in w [lo, hi]
    for i in range(n):
        grid = w[i] * np.linspace(lo[i], hi[i], 200001)
        f = grid * z[i] - w[i] * k.conj(np.full_like(grid, y[i]), grid / w[i], lp) - mu / 2 * grid**2
        assert v[i] == pytest.approx(f.max(), abs=1e-8 * w[i])
        assert u[i] == pytest.approx(grid[np.argmax(f)], abs=2e-5 * w[i])
        assert w[i] * lo[i] <= u[i] <= w[i] * hi[i]
    # central differences: value -> u, u -> curvature (away from the kinks of u)
    eps = 1e-6
    vp, up, hp = env(z + eps, w)
    vm, um, hm = env(z - eps, w)
    np.testing.assert_allclose((vp - vm) / (2 * eps), u, rtol=1e-6, atol=1e-7)
    smooth = (hp == h) & (hm == h)  # the same piece of u on both sides
    assert smooth.sum() >= n // 2
    np.testing.assert_allclose(((up - um) / (2 * eps))[smooth], h[smooth], rtol=1e-6, atol=1e-7)
    inside = (h > 0) & smooth
    assert inside.any() and (h == 0).any()
    np.testing.assert_allclose(h[inside], 1.0 / mu, rtol=1e-9)  # w / (mu w) in the band
    # the repeated rows: w_i copies of the loss's own envelope of smoothing mu w_i
    for c in (1.0, 2.0, 3.0):
        rows = np.flatnonzero(w == c)
        rep = np.repeat(rows, int(c))
        vr, ur, hr = env(z[rep], empty, mu * c, y[rep], lo[rep], hi[rep])
        np.testing.assert_allclose(v[rows], vr.reshape(-1, int(c)).sum(1), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(u[rows], ur.reshape(-1, int(c)).sum(1), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(h[rows], hr.reshape(-1, int(c)).sum(1), rtol=1e-12)
    # weights all 1 are the unweighted arithmetic, bit for bit
    for a, b in zip(env(z, np.ones(n)), env(z, empty)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_weighted_smooth_terms(loss):
    """A smooth loss: value, derivative and curvature are :math:`w_i` times the loss's."""
    from mklkit._jit import bcd as kb

    obj = get_registry().create("loss", loss)
    k, lp = obj.jit, np.ascontiguousarray(obj.param_vector, dtype=np.float64)
    rng = np.random.default_rng(4)
    y = np.where(rng.random(30) > 0.5, 1.0, -1.0)
    z = rng.standard_normal(30)
    w = rng.uniform(0.5, 3.0, 30)
    lo = np.ascontiguousarray(k.conj_lower(y, lp), dtype=np.float64)
    hi = np.ascontiguousarray(k.conj_upper(y, lp), dtype=np.float64)
    fns = kb.loss_fns(obj)
    a = kb.eval_loss(kb.samples(y, lo, hi, w, kb.KIND_SMOOTH, 0.0), z, fns, True, True)
    b = kb.eval_loss(kb.samples(y, lo, hi, None, kb.KIND_SMOOTH, 0.0), z, fns, True, True)
    for p, q in zip(a, b):
        np.testing.assert_allclose(p, w * q, rtol=1e-15)


# ---------------------------------------------------------------------------
# integer weights = repeated rows, on exact factors
# ---------------------------------------------------------------------------
CASES = [
    ("logistic", "elasticnet", 0.5, "newton"),
    ("logistic", "elasticnet", 0.5, "bcd"),
    ("squared", "l1", 2.0, "newton"),
    ("squared", "l1", 2.0, "bcd"),
    ("hinge", "l1", 1.0, "newton"),
    ("hinge", "l1", 1.0, "bcd"),
]


@pytest.mark.parametrize("loss,reg,C,method", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_bcd_weights_equal_repeated_rows(small, loss, reg, C, method):
    """bcd on the exact factors: the weighted problem has the optimum of the rows repeated
    :math:`w_i` times (objective to 1e-7 relative, predictions to 1e-4), both certified;
    its primal and dual objectives recomputed on the dense weighted bank (the dual point in
    :math:`w_i` times the conjugate's domain, centred), and for a smooth loss the whole
    certificate from the primal point."""
    weighted, repeated, dense, rep = _factored(small, loss, reg, C)
    tol = TOL_HINGE if loss == "hinge" else TOL
    eng = {"name": "bcd", "tol": tol, "max_iter": 100000, "method": method}
    a, b = _solve(eng, weighted), _solve(eng, repeated)
    assert a.solved_by == "bcd" and a.converged
    assert a.gap <= tol and b.gap <= tol
    assert primal_objective(dense, a.alpha, a.bias) == pytest.approx(a.objective, rel=1e-9)
    # the block norms recomputed on the dense bank carry a few ulps of round-off against the
    # factors' (a dual point on the l1 ball's boundary may land 1 ulp outside): the dual
    # point's domain is judged to 1e-12 relative
    norms = dual_block_norms(dense.bank, a.dual) * (1.0 - 1e-12)
    assert dual_objective(dense, a.dual, norms=norms) == pytest.approx(a.dual_objective, rel=1e-9)
    assert abs(np.sum(a.dual)) <= 1e-9 * np.sum(np.abs(a.dual))
    if loss != "hinge":  # the hinge's subgradient at the primal point is no dual point
        assert certify(dense, a.alpha, a.bias).gap <= 10 * tol
    else:  # the hinge's dual box is [0, w_i] (times y_i): some rho_i > 1
        assert np.max(np.abs(a.dual)) > 1.0
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    za = np.einsum("mij,mj->i", dense.K, a.alpha) + a.bias
    Kr = repeated.bank.to_array()
    zb = np.einsum("mij,mj->i", Kr, b.alpha) + b.bias
    first = np.unique(rep, return_index=True)[1]
    np.testing.assert_allclose(za, zb[first], atol=1e-4)


# ---------------------------------------------------------------------------
# weak duality against the conic reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loss,reg,C", [("logistic", "elasticnet", 0.5), ("hinge", "l1", 1.0)], ids=["logistic-elasticnet", "hinge-l1"]
)
def test_bcd_weighted_against_conic_reference(small, loss, reg, C):
    r"""The reference writes :math:`\sum_i w_i\ell` directly: bcd's dual is below its optimum
    (weak duality) and bcd's primal above it by at most the gap."""
    conic = pytest.importorskip("mklkit.testing.conic")
    weighted, _, dense, _ = _factored(small, loss, reg, C)
    tol = 1e-8
    ref = conic.solve_reference(
        dense.K,
        dense.y,
        loss,
        reg,
        C,
        **({"lam": 0.5} if reg == "elasticnet" else {}),
        sample_weight=dense.sample_weight,
    )
    res = _solve({"name": "bcd", "tol": tol, "max_iter": 100000}, weighted)
    assert res.gap <= tol
    P_ref = ref.objective
    assert res.dual_objective <= P_ref * (1 + 1e-9)
    assert res.objective <= P_ref + 2 * tol * abs(P_ref)
    assert res.objective == pytest.approx(P_ref, rel=1e-5)


# ---------------------------------------------------------------------------
# auto delegates a weighted factor-bank problem to bcd
# ---------------------------------------------------------------------------
def test_auto_delegates_a_weighted_factor_bank_to_bcd(small):
    weighted, _, _, _ = _factored(small, "logistic", "elasticnet", 0.5)
    auto = get_registry().create("engine", {"name": "auto", "tol": 1e-8})
    engine, why = auto.choose(weighted)
    assert engine is not None and engine.name == "bcd", why
    res = auto.solve(weighted)
    assert res.solved_by == "bcd"
    assert res.gap <= 1e-8


# ---------------------------------------------------------------------------
# a sparse factor bank (CSR): the loops' sparse path gathers the weights per block
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loss,method",
    [("logistic", "bcd"), ("logistic", "newton"), ("logistic_no_bound", "bcd"), ("hinge", "bcd"), ("hinge", "newton")],
)
def test_weights_on_a_sparse_factor_bank(small, loss, method):
    """Linear kernels on groups of sparsified features, as CSR factors: the weighted problem
    equals the rows repeated (sparse) and the weighted problem on the dense copy.  The
    sparse path gathers the weights on each block's samples."""
    X, y, w = small
    Xs = np.where(np.abs(X) > 0.5, X, 0.0)
    groups = np.array_split(np.arange(X.shape[1]), 3)
    blocks = [sp.csr_matrix(Xs[:, g]) for g in groups]
    rep = np.repeat(np.arange(y.size), w.astype(int))
    r = get_registry()
    lo = LogisticNoBound() if loss == "logistic_no_bound" else r.create("loss", loss)
    rg = r.create("regularizer", "l1")
    sparse = FactorBank.from_blocks(blocks)
    assert sparse.sparse
    weighted = Problem(K=sparse, y=y, loss=lo, regularizer=rg, C=1.0, sample_weight=w)
    repeated = Problem(K=FactorBank.from_blocks([B[rep] for B in blocks]), y=y[rep], loss=lo, regularizer=rg, C=1.0)
    dense = Problem(
        K=FactorBank(sparse.LT.toarray(), sparse.starts), y=y, loss=lo, regularizer=rg, C=1.0, sample_weight=w
    )
    tol = TOL_HINGE_SPARSE if loss == "hinge" else TOL
    eng = {"name": "bcd", "tol": tol, "max_iter": 100000, "method": method}
    a, b, c = _solve(eng, weighted), _solve(eng, repeated), _solve(eng, dense)
    assert a.gap <= tol and b.gap <= tol and c.gap <= tol
    assert a.objective == pytest.approx(b.objective, rel=max(tol, 1e-7))
    assert a.objective == pytest.approx(c.objective, rel=max(tol, 1e-7))
    assert 0 < a.active_set.size


# ---------------------------------------------------------------------------
# a warm start: the optimal bias of the start is the weighted one
# ---------------------------------------------------------------------------
def test_warm_start_of_a_weighted_problem(small):
    """A warm start from the solution at a neighbouring C reaches the cold solve's optimum."""
    weighted, _, _, _ = _factored(small, "logistic", "elasticnet", 0.5)
    near = Problem(
        K=weighted.bank,
        y=weighted.y,
        loss=weighted.loss,
        regularizer=weighted.regularizer,
        C=0.4,
        sample_weight=weighted.sample_weight,
    )
    eng = get_registry().create("engine", {"name": "bcd", "tol": TOL, "max_iter": 100000})
    cold = eng.solve(weighted)
    warm = eng.solve(weighted, warm_start=eng.solve(near))
    assert cold.gap <= TOL and warm.gap <= TOL
    assert warm.objective == pytest.approx(cold.objective, rel=1e-8)
