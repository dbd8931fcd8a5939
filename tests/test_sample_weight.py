"""Per-sample weights: the weighted loss, the engines that accept weights, the estimators.

The weighted problem is :math:`\\sum_i w_i\\ell(y_i, z_i) + C\\sum_m g(\\|\\alpha_m\\|^2_{K_m})`
(``docs/contracts.md``).  Checks independent of the implementation: integer
weights against the rows repeated that many times, the conic reference with
the weights written into the loss directly, the refusal of the engines that
do not accept weights, and ``class_weight``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics import recall_score

import mklkit
from mklkit.data import load_builtin
from mklkit.engines.common import certify, zero_solution
from mklkit.engines.objectives import SampleLoss
from mklkit.estimators import MKLClassifier, MKLRegressor
from mklkit.plugins import get_registry
from mklkit.problem import Problem

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-9
TINY_BANK = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "poly", "degree": 1}]


def _engines(accepting: bool) -> list[str]:
    """Names of the installed engines whose ``requires`` accepts (or refuses) sample weights."""
    reg = get_registry()
    return sorted(
        r.name
        for r in reg.registrations("engine")
        if bool(getattr(r.cls.requires, "sample_weight", False)) == accepting
    )


#: The engines that accept weights (``docs/engines.md``); every other installed engine
#: refuses them.
WEIGHTED = ["apg", "auto", "bcd", "dualcd", "proximal", "spicy"]
UNWEIGHTED = [name for name in _engines(False) if name not in WEIGHTED]
#: The engines that accept weights and take the Gram bank of the tests below (bcd takes factor banks:
#: its weighted problems are in tests/engines/test_bcd_weights.py).
ON_ARRAYS = [name for name in WEIGHTED if name not in ("apg", "bcd", "dualcd")]  # factor banks only


def test_engines_declare_weights():
    """Exactly the documented engines declare ``Requires(sample_weight=True)``."""
    assert _engines(True) == WEIGHTED


def _gram(X: np.ndarray) -> np.ndarray:
    """Three kernels (two Gaussians, linear), each of unit mean diagonal on ``X``."""
    D = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    d = X.shape[1]
    K = np.stack([np.exp(-D / (2.0 * d)), np.exp(-D / (8.0 * d)), X @ X.T / d])
    return K / (np.trace(K, axis1=1, axis2=2) / X.shape[0])[:, None, None]


@pytest.fixture(scope="module")
def small():
    """40 rows of ionosphere (standardized), labels +-1, integer weights in {1, 2, 3}."""
    ds = load_builtin("ionosphere")
    X = np.asarray(ds.X, dtype=np.float64)[:40, 2:8]
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    y = np.where(np.asarray(ds.y)[:40] > 0, 1.0, -1.0)
    w = np.random.default_rng(0).integers(1, 4, size=y.size).astype(np.float64)
    return X, y, w


def _problems(small, loss: str, reg: str, C: float):
    X, y, w = small
    r = get_registry()
    lo, rg = r.create("loss", loss), r.create("regularizer", reg)
    rep = np.repeat(np.arange(y.size), w.astype(int))
    weighted = Problem(K=_gram(X), y=y, loss=lo, regularizer=rg, C=C, sample_weight=w)
    repeated = Problem(K=_gram(X)[:, rep][:, :, rep] * 1.0, y=y[rep], loss=lo, regularizer=rg, C=C)
    return weighted, repeated, rep


# ---------------------------------------------------------------------------
# The weighted loss: the scaling identity
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_sample_loss_scaling(loss):
    r"""Fenchel-Young equality at :math:`u = w\ell'(z)` and :math:`\partial_u (w\ell)^*` by central
    differences, for the weighted loss of :class:`SampleLoss`."""
    lo = get_registry().create("loss", loss)
    rng = np.random.default_rng(1)
    y = np.where(rng.random(8) > 0.5, 1.0, -1.0)
    w = rng.uniform(0.2, 3.0, 8)
    z = rng.normal(size=8) * 0.4 + 0.1
    sl = SampleLoss(lo, y, w)
    u = sl.deriv(z)
    np.testing.assert_allclose(sl.value(z) + sl.conj(u), u * z, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sl.value(z), w * lo.jit.value(y, z, lo.param_vector))
    lower, upper = sl.conj_lower(), sl.conj_upper()
    np.testing.assert_allclose(lower, w * lo.jit.conj_lower(y, lo.param_vector))
    np.testing.assert_allclose(upper, w * lo.jit.conj_upper(y, lo.param_vector))
    if lo.smooth_conjugate:
        v = 0.5 * u  # inside the domain
        h = 1e-6
        num = (sl.conj(v + h) - sl.conj(v - h)) / (2 * h)
        np.testing.assert_allclose(sl.conj_grad(v), num, rtol=1e-5, atol=1e-7)
        num2 = (sl.conj_grad(v + h) - sl.conj_grad(v - h)) / (2 * h)
        np.testing.assert_allclose(sl.conj_hess(v), num2, rtol=1e-4, atol=1e-6)


def test_c_max_accounts_for_weights(small):
    """``C_max`` (and the zero solution) of the weighted problem are those of the repeated rows."""
    weighted, repeated, _ = _problems(small, "logistic", "l1", 1.0)
    zw, zr = zero_solution(weighted), zero_solution(repeated)
    assert zw.C_max == pytest.approx(zr.C_max, rel=1e-10)
    assert zw.bias == pytest.approx(zr.bias, rel=1e-9, abs=1e-12)
    assert zw.objective == pytest.approx(zr.objective, rel=1e-12)


# ---------------------------------------------------------------------------
# (1) integer weights = repeated rows, for every engine that accepts weights
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ON_ARRAYS)
@pytest.mark.parametrize(
    "loss,reg,C", [("logistic", "elasticnet", 0.5), ("squared", "l1", 2.0)], ids=["logistic-elasticnet", "squared-l1"]
)
def test_weights_equal_repeated_rows(small, engine, loss, reg, C):
    """Same optimum as the rows repeated :math:`w_i` times: objective to 1e-7 relative,
    training predictions and kernel weights to 1e-4, both certified to ``TOL``."""
    weighted, repeated, rep = _problems(small, loss, reg, C)
    eng = get_registry().create("engine", {"name": engine, "tol": TOL, "max_iter": 100000})
    with warnings.catch_warnings():
        warnings.simplefilter("error", mklkit.ConvergenceWarning)
        a = eng.solve(weighted)
        b = eng.solve(repeated)
    assert a.gap <= TOL and b.gap <= TOL
    assert certify(weighted, a.alpha, a.bias).gap <= 10 * TOL  # the certificate, recomputed
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    za = np.einsum("mij,mj->i", weighted.K, a.alpha) + a.bias
    zb = np.einsum("mij,mj->i", repeated.K, b.alpha) + b.bias
    first = np.unique(rep, return_index=True)[1]  # one copy of each row
    np.testing.assert_allclose(za, zb[first], atol=1e-4)
    np.testing.assert_allclose(a.kernel_weights, b.kernel_weights, atol=1e-4)


# ---------------------------------------------------------------------------
# (2) weak duality and the objective against the conic reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ON_ARRAYS)
def test_weighted_against_conic_reference(small, engine):
    """The reference writes :math:`\\sum_i w_i\\ell` directly; the engine's dual objective is
    below the reference optimum (weak duality) and its primal agrees to 1e-4 relative."""
    conic = pytest.importorskip("mklkit.testing.conic")
    weighted, _, _ = _problems(small, "logistic", "elasticnet", 0.5)
    ref = conic.solve_reference(
        weighted.K, weighted.y, "logistic", "elasticnet", 0.5, lam=0.5, sample_weight=weighted.sample_weight
    )
    res = get_registry().create("engine", {"name": engine, "tol": 1e-8, "max_iter": 100000}).solve(weighted)
    assert res.gap <= 1e-8
    slack = 1e-6 * abs(ref.objective)
    assert res.dual_objective <= ref.objective + slack
    assert ref.objective <= res.objective + slack
    assert res.objective == pytest.approx(ref.objective, rel=1e-4)
    ours = conic.primal_objective_numpy(
        weighted.K,
        weighted.y,
        res.alpha,
        res.bias,
        "logistic",
        "elasticnet",
        0.5,
        lam=0.5,
        sample_weight=weighted.sample_weight,
    )
    assert ours == pytest.approx(res.objective, rel=1e-10)


# ---------------------------------------------------------------------------
# (3) engines that do not accept weights refuse a weighted problem
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("engine", UNWEIGHTED)
def test_unsupported_engine_refuses_weights(small, engine):
    weighted, _, _ = _problems(small, "logistic", "elasticnet", 0.5)
    eng = get_registry().create("engine", engine)
    reason = eng.supports(weighted)
    assert reason is not None and "sample weights" in reason
    with pytest.raises(
        ValueError,
        match=rf"engine '{engine}' cannot solve this problem: .*"
        "sample weights",
    ):
        eng.solve(weighted)


def test_estimator_names_the_engines_that_accept_weights():
    X, y = make_classification(60, 4, n_informative=3, n_redundant=0, random_state=0)
    est = MKLClassifier(TINY_BANK, engine="smo_mkl", regularizer="kl", loss="hinge")
    with pytest.raises(ValueError, match=r"engine 'smo_mkl'.*sample weights"):
        est.fit(X, y, sample_weight=np.arange(60) % 3 + 1.0)
    est.fit(X, y, sample_weight=np.ones(60))  # weights all 1: the unweighted problem
    assert est.solved_by_ == "smo_mkl"
    # a weighted fit on factors by bcd, which accepts weights
    fac = MKLClassifier(TINY_BANK, engine="bcd", factor=True, class_weight={0: 2.0}).fit(X, y)
    assert fac.solved_by_ == "bcd" and fac.dual_gap_ <= 1e-2


@pytest.mark.parametrize(
    "loss,reg,C",
    [("hinge", "l1", 1.0), ("eps_insensitive", "elasticnet", 0.5)],
    ids=["hinge-l1", "eps_insensitive-elasticnet"],
)
def test_constrained_loss_weights_equal_repeated_rows(small, loss, reg, C):
    """spicy's constrained form (eq. 33) with weights: a loss without a smooth conjugate has the
    optimum of the repeated rows and of the conic reference (weak duality), certified."""
    conic = pytest.importorskip("mklkit.testing.conic")
    weighted, repeated, rep = _problems(small, loss, reg, C)
    eng = get_registry().create("engine", {"name": "spicy", "tol": 1e-8, "max_iter": 100000})
    with warnings.catch_warnings():
        warnings.simplefilter("error", mklkit.ConvergenceWarning)
        a, b = eng.solve(weighted), eng.solve(repeated)
    assert a.gap <= 1e-8 and b.gap <= 1e-8
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    ref = conic.solve_reference(
        weighted.K,
        weighted.y,
        loss,
        reg,
        C,
        sample_weight=weighted.sample_weight,
        lam=getattr(weighted.regularizer, "lam", None),
        eps=getattr(weighted.loss, "eps", None),
    )
    slack = 1e-7 * abs(ref.objective)
    assert a.dual_objective <= ref.objective + slack
    assert ref.objective <= a.objective + slack
    assert a.objective == pytest.approx(ref.objective, rel=1e-5)
    za = np.einsum("mij,mj->i", weighted.K, a.alpha) + a.bias
    zr = np.einsum("mij,mj->i", weighted.K, ref.alpha) + ref.bias
    np.testing.assert_allclose(za, zr, atol=1e-3 * (1 + np.max(np.abs(zr))))


def test_class_weight_with_the_hinge_loss():
    """``class_weight="balanced"`` with the hinge loss: solved (by spicy) and the same model as
    the explicit sample weights."""
    X, y = make_classification(200, 6, n_informative=3, weights=[0.85], flip_y=0.05, class_sep=0.6, random_state=3)
    bal = MKLClassifier(TINY_BANK, loss="hinge", tol=1e-6, class_weight="balanced").fit(X, y)
    assert bal.solved_by_ == "spicy" and bal.dual_gap_ <= 1e-6
    sw = bal.class_weight_[y]
    explicit = MKLClassifier(TINY_BANK, loss="hinge", tol=1e-6).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(bal.decision_function(X), explicit.decision_function(X), rtol=1e-9, atol=1e-10)
    plain = MKLClassifier(TINY_BANK, loss="hinge", tol=1e-6).fit(X, y)
    assert np.mean(bal.predict(X)[y == 1] == 1) > np.mean(plain.predict(X)[y == 1] == 1)


def test_auto_chooses_an_engine_that_accepts_weights(small):
    weighted, repeated, _ = _problems(small, "logistic", "elasticnet", 0.5)
    auto = get_registry().create("engine", {"name": "auto", "tol": 1e-6})
    engine, _ = auto.choose(weighted)
    assert engine is not None and engine.name in WEIGHTED
    assert auto.solve(weighted).solved_by in WEIGHTED


def test_sample_weight_validation():
    X, y = make_classification(30, 4, random_state=0)
    est = MKLClassifier(TINY_BANK)
    with pytest.raises(ValueError, match="sample_weight"):
        est.fit(X, y, sample_weight=np.ones(29))
    with pytest.raises(ValueError, match="[Nn]egative"):
        est.fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="non-zero"):
        est.fit(X, y, sample_weight=np.zeros(30))
    with pytest.raises(ValueError, match="class_weight"):
        MKLClassifier(TINY_BANK, class_weight="bal").fit(X, y)
    with pytest.raises(ValueError, match=r"sample_weight must hold finite numbers > 0"):
        Problem(
            K=np.eye(3)[None],
            y=np.array([1.0, -1.0, 1.0]),
            loss=get_registry().create("loss", "logistic"),
            regularizer=get_registry().create("regularizer", "l1"),
            C=1.0,
            sample_weight=np.array([1.0, 0.0, 1.0]),
        )


# ---------------------------------------------------------------------------
# Estimators: weights = repeated rows, zero weight = dropped row
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: MKLClassifier(TINY_BANK, C="scale", tol=1e-11, max_iter=100000),
        lambda: MKLClassifier(TINY_BANK, C="scale", tol=1e-11, max_iter=100000, multiclass="ovo"),
        lambda: MKLRegressor(TINY_BANK, C="scale", tol=1e-11, max_iter=100000),
    ],
    ids=["ovr", "ovo", "regressor"],
)
def test_estimator_weights_equal_repeated_rows(make):
    """scikit-learn's sample-weight equivalence (integer weights with zeros), at 1e-5:
    the standardization, the unit-trace normalisation, ``C="scale"`` and ``standardize_y``
    are weighted like the repeated rows.  (``C="auto"`` below 2,500 rows cross-validates over
    rows, where a repeated row may sit on both sides of a fold and a weight cannot.)"""
    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mklkit.ConvergenceWarning)
        a = make().fit(X.repeat(sw, axis=0), y.repeat(sw))
        b = make().fit(X, y, sample_weight=sw)
    fa = a.predict(X) if isinstance(a, MKLRegressor) else a.decision_function(X)
    fb = b.predict(X) if isinstance(b, MKLRegressor) else b.decision_function(X)
    np.testing.assert_allclose(fb, fa, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(b.dual_gap_) <= 1e-9)
    if isinstance(a, MKLRegressor):
        assert b.C_ == pytest.approx(a.C_, rel=1e-12)


def test_fit_path_c_max_with_weights():
    X, y = make_classification(50, 4, random_state=1)
    sw = np.random.default_rng(2).integers(1, 4, size=50)
    est = MKLClassifier(TINY_BANK, regularizer="l1", tol=1e-6)
    path_w = est.fit_path(X, y, 3, sample_weight=sw)
    path_r = est.fit_path(X.repeat(sw, axis=0), y.repeat(sw), 3)
    np.testing.assert_allclose(path_w.Cs, path_r.Cs, rtol=1e-9)


# ---------------------------------------------------------------------------
# (4) class_weight
# ---------------------------------------------------------------------------
def test_class_weight_balanced_raises_minority_recall():
    X, y = make_classification(300, 6, n_informative=3, weights=[0.9], flip_y=0.05, class_sep=0.6, random_state=3)
    Xtr, ytr, Xte, yte = X[:200], y[:200], X[200:], y[200:]
    plain = MKLClassifier(TINY_BANK, tol=1e-6).fit(Xtr, ytr)
    balanced = MKLClassifier(TINY_BANK, tol=1e-6, class_weight="balanced").fit(Xtr, ytr)
    r_plain = recall_score(yte, plain.predict(Xte), pos_label=1)
    r_bal = recall_score(yte, balanced.predict(Xte), pos_label=1)
    assert r_bal > r_plain + 0.1, (r_plain, r_bal)
    # the same problem as the sample weights it stands for
    counts = np.bincount(ytr)
    expected = ytr.size / (2 * counts)
    np.testing.assert_allclose(balanced.class_weight_, expected)
    explicit = MKLClassifier(TINY_BANK, tol=1e-6).fit(Xtr, ytr, sample_weight=expected[ytr])
    np.testing.assert_allclose(balanced.decision_function(Xte), explicit.decision_function(Xte), rtol=1e-10, atol=1e-12)
    # a dict multiplies into sample_weight too
    as_dict = MKLClassifier(TINY_BANK, tol=1e-6, class_weight={0: expected[0], 1: expected[1]})
    np.testing.assert_allclose(
        as_dict.fit(Xtr, ytr).decision_function(Xte), explicit.decision_function(Xte), rtol=1e-10, atol=1e-12
    )


# ---------------------------------------------------------------------------
# Weights on a factor bank (K_m = L_m L_m^T held as factors)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ON_ARRAYS)
def test_weights_on_a_factor_bank(small, engine):
    """The weighted problem on exact factors of the kernels has the optimum of the Gram bank."""
    from mklkit.kernels.factor import FactorBank
    from mklkit.pipeline.problem_settings import auto_C

    weighted, _, _ = _problems(small, "logistic", "elasticnet", 0.5)
    blocks = []
    for Km in weighted.K:
        lam, V = np.linalg.eigh(Km)
        keep = lam > 1e-12 * lam[-1]
        blocks.append(V[:, keep] * np.sqrt(lam[keep]))
    factored = Problem(
        K=FactorBank.from_blocks(blocks),
        y=weighted.y,
        loss=weighted.loss,
        regularizer=weighted.regularizer,
        C=0.5,
        sample_weight=weighted.sample_weight,
    )
    eng = get_registry().create("engine", {"name": engine, "tol": 1e-9, "max_iter": 100000})
    a, b = eng.solve(weighted), eng.solve(factored)
    assert a.gap <= 1e-9 and b.gap <= 1e-9
    assert b.objective == pytest.approx(a.objective, rel=1e-7)
    assert auto_C(factored) == pytest.approx(auto_C(weighted), rel=1e-9)


def test_precomputed_kernels_with_weights():
    """Given Gram matrices: integer weights equal the repeated rows and columns (the unit-trace
    normalisation weighted); a zero weight is refused (the test kernels keep every column)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=30) > 0).astype(int)
    sw = rng.integers(1, 4, size=30)
    K = _gram(X)
    rep = np.repeat(np.arange(30), sw)
    kw = dict(kernels="precomputed", normalize="trace", tol=1e-10, max_iter=100000)
    a = MKLClassifier(**kw).fit(np.moveaxis(K[:, rep][:, :, rep], 0, 2), y[rep])
    b = MKLClassifier(**kw).fit(np.moveaxis(K, 0, 2), y, sample_weight=sw)
    fa = a.decision_function(np.moveaxis(K[:, :, rep], 0, 2))
    fb = b.decision_function(np.moveaxis(K, 0, 2))
    np.testing.assert_allclose(fb, fa, atol=1e-6)
    with pytest.raises(ValueError, match=r"kernels='precomputed', sample_weight must be > 0"):
        MKLClassifier(**kw).fit(np.moveaxis(K, 0, 2), y, sample_weight=np.r_[0.0, np.ones(29)])
