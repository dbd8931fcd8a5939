"""One-class MKL: the ``one_class`` loss and :class:`MKLOneClassSVM` against the ν-form solved by Clarabel and
scikit-learn's ``OneClassSVM``, the ν-property, the outlier-detection API, the engines' conformance kit."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import OneClassSVM
from sklearn.utils.estimator_checks import parametrize_with_checks

import mklkit
from mklkit.components.elasticnet import L1, ElasticNet
from mklkit.components.losses import OneClass
from mklkit.components.params import ParamError
from mklkit.data import load_builtin
from mklkit.engines import common
from mklkit.estimators import MKLOneClassSVM
from mklkit.plugins import get_registry
from mklkit.problem import Problem
from mklkit.testing import KitProblem, check_component, check_engine, exact_factors, sample_bank, sample_points

TINY_BANK = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "poly", "degree": 1}]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def benign():
    """60 benign wdbc rows, standardized."""
    ds = load_builtin("wdbc")
    X = np.asarray(ds.X)[np.asarray(ds.y) == -1][:60]
    return (X - X.mean(0)) / X.std(0)


@pytest.fixture(scope="module")
def grams(benign):
    """Three Gaussian kernels on three groups of columns, samples first (N, N, 3)."""
    groups = (slice(0, 10), slice(10, 20), slice(20, 30))
    return np.stack([rbf_kernel(benign[:, g], gamma=0.1) for g in groups], axis=-1)


def _nu_form(K: np.ndarray, nu: float):
    r"""The ν-one-class MKL dual :math:`\min_a \max_m \|a\|_{K_m}` s.t. :math:`0 \le a \le 1/(\nu N)`,
    :math:`\sum a = 1` by cvxpy + Clarabel: the optimum, its ``a`` and the normalised multipliers of the kernels."""
    cp = pytest.importorskip("cvxpy")
    N = K.shape[1]
    a, t = cp.Variable(N), cp.Variable()
    cons = []
    for Km in K:
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        L = V * np.sqrt(np.clip(w, 0.0, None))
        cons.append(cp.norm(L.T @ a) <= t)
    prob = cp.Problem(cp.Minimize(t), [*cons, a >= 0, a <= 1.0 / (nu * N), cp.sum(a) == 1])
    prob.solve(solver=cp.CLARABEL)
    mu = np.array([float(c.dual_value) for c in cons])
    return float(prob.value), np.asarray(a.value), mu / mu.sum()


# ---------------------------------------------------------------------------
# the mathematics: C-form = ν-form
# ---------------------------------------------------------------------------
def test_nu_form_matches_clarabel(grams):
    """With l1, a = ρ/Σρ of the C-form solves the ν-form at ν = mean(ρ), max_m ‖a‖ = C/Σρ, same kernel weights."""
    m = MKLOneClassSVM("precomputed", nu=0.2, regularizer="l1", tol=1e-7, engine="spicy").fit(grams)
    assert abs(m.nu_ - 0.2) <= m.nu_tol
    rho = m.result_.dual
    s = float(rho.sum())
    assert m.nu_ == pytest.approx(s / rho.size, rel=1e-12)
    K = np.moveaxis(grams, 2, 0)
    opt, a_ref, weights_ref = _nu_form(K, m.nu_)
    a = rho / s
    assert a.max() <= 1.0 / (m.nu_ * rho.size) * (1 + 1e-12) and a.min() >= 0.0
    ours = max(float(np.sqrt(a @ Km @ a)) for Km in K)
    assert ours == pytest.approx(opt, rel=1e-5)  # a reaches the ν-form's optimum
    assert m.C_ / s == pytest.approx(opt, rel=1e-5)  # the active kernels sit on the ball of radius C
    assert np.sum(weights_ref > 1e-3) >= 2  # a mixture: the check compares weights, not a single pick
    np.testing.assert_allclose(m.kernel_weights_, weights_ref, atol=2e-3)
    np.testing.assert_allclose(a, a_ref, atol=1e-4)


def test_single_kernel_matches_sklearn(grams):
    """M = 1: the same outliers and support vectors as ``OneClassSVM(nu=nu_)``, decision values proportional,
    ρ = libsvm's dual coefficients (0 <= ρ_i <= 1, Σρ = νN)."""
    K1 = grams[:, :, 1:2]
    m = MKLOneClassSVM("precomputed", nu=0.25, regularizer="l1", tol=1e-7, engine="spicy").fit(K1)
    sk = OneClassSVM(kernel="precomputed", nu=m.nu_, tol=1e-9).fit(K1[:, :, 0])
    ours, ref = m.decision_function(K1), sk.decision_function(K1[:, :, 0])
    ratio = float(ours @ ref) / float(ref @ ref)
    assert ratio > 0.0
    assert np.max(np.abs(ours - ratio * ref)) <= 1e-3 * np.max(np.abs(ours))
    # outliers strictly outside (margin support vectors have decision values 0 up to rounding in both)
    eps = 1e-4 * np.max(np.abs(ref))
    np.testing.assert_array_equal(np.flatnonzero(ours < -eps * ratio), np.flatnonzero(ref < -eps))
    assert np.flatnonzero(ref < -eps).size >= 3
    np.testing.assert_array_equal(np.flatnonzero(m.result_.dual > 1e-6), np.sort(sk.support_))
    np.testing.assert_allclose(m.result_.dual[sk.support_], sk.dual_coef_.ravel(), atol=1e-4)


@pytest.mark.parametrize("nu", [0.05, 0.3, 0.7])
def test_nu_property(benign, nu):
    """training outliers (f < 1) <= nu_ <= support vectors (f <= 1), |nu_ - nu| <= nu_tol, every solve certified."""
    m = MKLOneClassSVM(TINY_BANK, nu=nu, regularizer="l1").fit(benign)
    assert abs(m.nu_ - nu) <= m.nu_tol
    f = m.score_samples(benign)
    slack = 1e-3  # the certificate's tolerance on the margin
    assert np.mean(f < 1.0 - slack) <= m.nu_ + 1e-9
    assert m.nu_ <= np.mean(f <= 1.0 + slack) + 1e-9
    assert m.dual_gap_ <= 1e-3
    assert np.all(m.C_search_[:, 2] <= 1e-3)
    assert m.C_search_[-1, 0] == m.C_
    assert m.C_search_[0, 0] == pytest.approx(nu * m.C_max_)  # the first chord from C_max
    assert np.all(np.diff(m.C_search_[: np.argmin(m.C_search_[:, 1]) + 1, 0]) < 0)  # a path down from C_max


LQ = {"name": "lq", "q": 1.5}


def _lq_dual(K: np.ndarray, C: float, q: float) -> np.ndarray:
    r"""The one-class dual with the ``lq`` regularizer,
    :math:`\max_{0 \le \rho \le 1} \sum_i\rho_i - \sum_m C^{1-r}\|\rho\|_{K_m}^r/r` (:math:`r = q/(q-1)`), by
    cvxpy + Clarabel: its :math:`\rho`."""
    cp = pytest.importorskip("cvxpy")
    r = q / (q - 1.0)
    rho = cp.Variable(K.shape[1])
    terms = []
    for Km in K:
        w, V = np.linalg.eigh(0.5 * (Km + Km.T))
        terms.append(cp.power(cp.norm(((V * np.sqrt(np.clip(w, 0.0, None))).T) @ rho), r))
    obj = cp.sum(rho) - C ** (1.0 - r) / r * sum(terms)
    cp.Problem(cp.Maximize(obj), [rho >= 0, rho <= 1]).solve(solver=cp.CLARABEL)
    return np.asarray(rho.value)


def test_lq_nu_matches_clarabel(grams):
    """lq at a given C: nu_ = Σρ/N with ρ the dual optimum solved by Clarabel."""
    m = MKLOneClassSVM("precomputed", C=2.0, regularizer=LQ, tol=1e-7, engine="spicy").fit(grams)
    rho = _lq_dual(np.moveaxis(grams, 2, 0), 2.0, 1.5)
    assert 0.05 < m.nu_ < 0.95
    assert m.nu_ == pytest.approx(float(rho.sum()) / rho.size, abs=1e-4)
    np.testing.assert_allclose(m.result_.dual, rho, atol=1e-3)


def test_nu_increasing_in_C_for_lq(grams):
    """ν(C) = Σρ*(C)/N is non-decreasing in C for lq (the conjugate's factor C^(1-r) decreases in C)."""
    Cs = np.geomspace(0.05, 50.0, 7)
    nus = [MKLOneClassSVM("precomputed", C=C, regularizer=LQ, tol=1e-7, engine="spicy").fit(grams).nu_ for C in Cs]
    assert np.all(np.diff(nus) >= -1e-6)
    assert nus[0] < 0.2 and nus[-1] > 0.8


@pytest.mark.parametrize("regularizer", [LQ, "uniform", "elasticnet"])
@pytest.mark.parametrize("nu", [0.1, 0.4])
def test_nu_reached_other_regularizers(benign, regularizer, nu):
    """nu is reached by bracketing and bisection in log C for a non-sparse regularizer; the ν-property holds."""
    m = MKLOneClassSVM(TINY_BANK, nu=nu, regularizer=regularizer).fit(benign)
    assert abs(m.nu_ - nu) <= m.nu_tol
    f = m.score_samples(benign)
    slack = 1e-3
    assert np.mean(f < 1.0 - slack) <= m.nu_ + 1e-9
    assert m.nu_ <= np.mean(f <= 1.0 + slack) + 1e-9
    assert np.all(m.C_search_[:, 2] <= 1e-3) and m.C_search_[-1, 0] == m.C_
    lo, hi = m.C_search_[m.C_search_[:, 1] < nu], m.C_search_[m.C_search_[:, 1] >= nu]
    if lo.size and hi.size:  # the bracket: every C below nu lies under every C above it (monotone)
        assert lo[:, 0].max() < hi[:, 0].min()
    if regularizer != "elasticnet":
        assert np.ptp(m.kernel_weights_) < 1.0  # a mixture, not a single kernel


def test_defaults_are_lq_on_gaussian_widths(benign):
    """kernels="auto": five Gaussian widths s*sqrt(d), s = 0.125 ... 2, on all features; regularizer="auto": lq
    with q = 1.75, a mixture of the widths where l1 keeps the widest alone (the widths are entrywise ordered)."""
    from mklkit.estimators import one_class_kernels
    from mklkit.estimators._oneclass import ONE_CLASS_Q

    m = MKLOneClassSVM(nu=0.2).fit(benign)
    d = benign.shape[1]
    assert m.regularizer_.name == "lq" and m.regularizer_.get_params()["q"] == ONE_CLASS_Q == 1.75
    assert one_class_kernels(d) == [
        {"function": "rbf", "width": [round(s * np.sqrt(d), 6) for s in (0.125, 0.25, 0.5, 1, 2)]}
    ]
    assert len(m.kernel_names_) == 5 and abs(m.nu_ - 0.2) <= m.nu_tol
    assert np.all(m.kernel_weights_ > 0.05)  # every width in the mixture
    l1 = MKLOneClassSVM(nu=0.2, regularizer="l1").fit(benign)
    assert np.argmax(l1.kernel_weights_) == 4 and l1.kernel_weights_[4] > 0.95  # the widest alone
    with pytest.raises(ValueError, match="n_features"):
        one_class_kernels(0)


def test_nu_one_is_every_kernel_off(benign):
    m = MKLOneClassSVM(TINY_BANK, nu=1.0, regularizer="l1").fit(benign)
    assert m.C_ == pytest.approx(m.C_max_) and m.nu_ == pytest.approx(1.0)
    assert np.all(m.predict(benign) == -1)


@pytest.mark.parametrize("regularizer", ["l1", "auto"])
def test_engines_agree(benign, regularizer):
    """spicy on Gram matrices and dualcd, bcd on factors: the same ν and decision values at the same C."""
    ref = MKLOneClassSVM(TINY_BANK, C=0.5, regularizer=regularizer, tol=1e-6, engine="spicy", factor=None).fit(benign)
    for engine in ("dualcd", "bcd"):
        m = MKLOneClassSVM(TINY_BANK, C=0.5, regularizer=regularizer, tol=1e-6, engine=engine, factor=True).fit(benign)
        assert m.nu_ == pytest.approx(ref.nu_, abs=1e-4)
        np.testing.assert_allclose(m.score_samples(benign), ref.score_samples(benign), atol=1e-3)


# ---------------------------------------------------------------------------
# the loss and the conformance kit
# ---------------------------------------------------------------------------
def test_loss_conforms():
    assert check_component(OneClass()).ok
    assert get_registry().create("loss", "one_class").name == "one_class"


@pytest.mark.parametrize("name", ["spicy", "dualcd", "bcd", "auto"])
def test_one_class_problem_through_check_engine(name):
    """The one-class problem (every level 1, no bias) through the engine kit, certified against the conic
    reference, with l1 and the elastic net."""
    X, _ = sample_points("sonar", 40, 0)
    K = sample_bank(X)
    engine = get_registry().create("engine", name)
    bank = exact_factors(K) if "array" not in engine.representations else K
    problems = []
    for reg in (L1(), ElasticNet(lam=0.5)):
        pb = Problem(K=bank, y=np.ones(40), loss=OneClass(), regularizer=reg, C=1.0, bias=False)
        pb.C = 0.3 * common.zero_solution(pb).C_max
        problems.append(KitProblem(f"one-class x {reg.describe()}", pb))
    report = check_engine(engine, problems=problems, reference="conic")
    assert report.ok, str(report)


# ---------------------------------------------------------------------------
# the estimator's API
# ---------------------------------------------------------------------------
def _expected_failures(est):
    """The weighted and the repeated fit each find their C for ``nu`` to ``nu_tol`` with solves certified to a
    relative gap ``tol``: they agree to those tolerances, not to the checks' 1e-7 (at a fixed C and a tight
    ``tol``, :func:`test_sample_weight_is_repetition`)."""
    why = "C is found for nu to nu_tol; the checks compare to rtol 1e-7 (see test_sample_weight_is_repetition)"
    return {"check_sample_weight_equivalence_on_dense_data": why, "check_sample_weight_equivalence_on_sparse_data": why}


@parametrize_with_checks([MKLOneClassSVM(TINY_BANK, nu=0.3)], expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mklkit.ConvergenceWarning)
        warnings.simplefilter("ignore", mklkit.TrivialModelWarning)
        check(estimator)


def test_outlier_api(benign):
    m = MKLOneClassSVM(TINY_BANK, nu=0.2).fit(benign)
    Xn = benign[:20] + 0.5
    np.testing.assert_allclose(m.decision_function(Xn), m.score_samples(Xn) - m.offset_)
    assert m.offset_ == 1.0
    np.testing.assert_array_equal(m.predict(Xn), np.where(m.decision_function(Xn) >= 0, 1, -1))
    np.testing.assert_array_equal(MKLOneClassSVM(TINY_BANK, nu=0.2).fit_predict(benign), m.predict(benign))
    assert m.kernel_weights_.shape == (3,) and m.kernel_weights_.sum() == pytest.approx(1.0)
    far = m.decision_function(benign[:5] * 10.0)
    assert np.all(far < 0)  # points far from the data are outliers


def test_pickle_round_trip(benign):
    m = MKLOneClassSVM(TINY_BANK, nu=0.2).fit(benign)
    back = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(back.decision_function(benign), m.decision_function(benign))
    assert back.nu_ == m.nu_ and back.C_ == m.C_


def test_sample_weight_is_repetition(benign):
    """An integer weight is the row repeated: the same solution and ν."""
    w = np.ones(len(benign))
    w[:10] = 2.0
    Xr = np.vstack([benign, benign[:10]])
    a = MKLOneClassSVM(TINY_BANK, C=0.3, tol=1e-7, standardize=False, normalize="none").fit(benign, sample_weight=w)
    b = MKLOneClassSVM(TINY_BANK, C=0.3, tol=1e-7, standardize=False, normalize="none").fit(Xr)
    assert a.nu_ == pytest.approx(b.nu_, abs=1e-5)
    np.testing.assert_allclose(a.score_samples(benign), b.score_samples(benign), atol=1e-4)


def test_C_with_another_regularizer(benign):
    m = MKLOneClassSVM(TINY_BANK, C=0.3, regularizer="elasticnet").fit(benign)
    f = m.score_samples(benign)
    assert np.mean(f < 1.0 - 1e-3) <= m.nu_ + 1e-9 <= np.mean(f <= 1.0 + 1e-3) + 2e-9
    assert m.C_search_.shape == (1, 3) and m.C_ == 0.3


@pytest.mark.parametrize(
    ("params", "key", "value"),
    [
        ({"nu": 0.0}, "nu", 0.0),
        ({"nu": 1.5}, "nu", 1.5),
        ({"nu": "half"}, "nu", "half"),
        ({"nu": True}, "nu", True),
        ({"nu_tol": 0.0}, "nu_tol", 0.0),
        ({"C": -1.0}, "C", -1.0),
    ],
)
def test_errors_name_parameter(benign, params, key, value):
    with pytest.raises(ParamError) as info:
        MKLOneClassSVM(TINY_BANK, **params).fit(benign)
    assert info.value.key == key and info.value.value == value
    if key == "nu":
        assert "(0, 1]" in info.value.allowed


def test_fit_path_refused(benign):
    with pytest.raises(NotImplementedError):
        MKLOneClassSVM(TINY_BANK).fit_path(benign, Cs=3)


def test_doc_examples():
    """docs/one_class.md's examples run as doctests (no warning)."""
    import doctest

    doc = Path(__file__).resolve().parents[1] / "docs" / "one_class.md"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=mklkit.CompilationWarning)
        failures, tried = doctest.testfile(
            str(doc), module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        )
    assert tried >= 10 and failures == 0


# ---------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------
SPEC = Path(__file__).resolve().parents[1] / "specs" / "oneclass_wdbc.yaml"


def test_spec_runs():
    """specs/oneclass_wdbc.yaml: trained on the benign rows of the training part; the test part's benign rows are
    inliers, its malignant rows outliers; the metrics recomputed from the solution."""
    from sklearn.metrics import roc_auc_score

    from mklkit.api import load_spec, run

    spec = load_spec(SPEC)
    assert spec.problem.bias is False  # the one_class loss has no bias
    res = run(spec)
    assert res.result.gap <= 1e-3
    prepared = spec.prepare()
    d = prepared.data
    assert np.all(d.y_train == 1.0) and set(np.unique(d.y_test)) == {-1.0, 1.0}
    ds = load_builtin("wdbc")
    n_benign = int(np.sum(np.asarray(ds.y) == -1))
    assert d.n_train + int(np.sum(d.y_test == 1.0)) == n_benign  # every benign row in one part, malignant in test
    assert int(np.sum(d.y_test == -1.0)) == int(np.sum(np.asarray(ds.y) == 1))
    f_test = prepared.test_decision(res.result)
    assert res.metrics["test_auc"] == pytest.approx(roc_auc_score(d.y_test > 0, f_test))
    assert res.metrics["test_outlier_fraction"] == pytest.approx(np.mean(f_test < 1.0))
    assert res.metrics["nu"] == pytest.approx(np.sum(res.result.dual) / d.n_train)
    assert abs(res.metrics["nu"] - spec.problem.nu) <= 0.01  # C found for problem.nu
    assert res.spec.problem.C == pytest.approx(res.result.C_max * res.metrics["nu"], rel=0.2)
    f_train = prepared.train_decision(res.result)
    assert res.metrics["train_outlier_fraction"] == pytest.approx(np.mean(f_train < 1.0))
    assert np.mean(f_train < 1.0 - 1e-3) <= res.metrics["nu"] + 1e-9  # the nu-property, up to the certificate
    assert res.metrics["test_auc"] > 0.9


def test_spec_nu_with_lq():
    """problem.nu with the lq regularizer: C found by bisection, nu within 0.01, the ν-property on the training part."""
    from mklkit.api import load_spec, run

    spec = load_spec(SPEC, overrides={"problem.regularizer": {"name": "lq", "q": 1.5}})
    res = run(spec)
    assert abs(res.metrics["nu"] - 0.1) <= 0.01 and res.result.gap <= 1e-3
    f_train = spec.prepare().train_decision(res.result)
    assert np.mean(f_train < 1.0 - 1e-3) <= res.metrics["nu"] + 1e-9


@pytest.mark.parametrize(
    ("override", "key", "value", "allowed"),
    [
        ({"problem.bias": True}, "problem.bias", "True", "false"),
        ({"data.inlier": "benign"}, "data.inlier", "'benign'", "-1"),
        ({"problem.nu": 1.5}, "problem.nu", "1.5", "(0, 1]"),
        ({"problem.C": 1.0}, "problem.C", "1.0", "no problem.C"),
        ({"problem.loss": "hinge"}, "problem.nu", "0.1", "no problem.nu"),
    ],
)
def test_spec_errors(override, key, value, allowed):
    """The key, the value as given and what is allowed."""
    from mklkit.api import load_spec, run
    from mklkit.spec import SpecError

    with pytest.raises(SpecError) as info:
        run(load_spec(SPEC, overrides=override))
    assert info.value.key == key
    assert f"got {value}" in str(info.value)
    assert allowed in info.value.allowed


def test_warns_when_nu_not_reached(benign, monkeypatch):
    """A search cut short (one chord, no bisection) at a tolerance it cannot meet warns and keeps the closest."""
    from mklkit.pipeline import one_class

    monkeypatch.setattr(one_class, "MAX_CHORDS", 1)
    monkeypatch.setattr(one_class, "MAX_BISECTIONS", 0)
    with pytest.warns(mklkit.ConvergenceWarning, match="nu = 0.3 not reached"):
        m = MKLOneClassSVM(TINY_BANK, nu=0.3, nu_tol=1e-9, regularizer="l1").fit(benign)
    assert m.C_search_.shape[0] == 1 and m.nu_ == m.C_search_[0, 1]


def test_spec_C_form():
    """problem.C instead of problem.nu: solved at that C, nu reported."""
    from mklkit.api import run
    from mklkit.spec.models import parse_spec
    from mklkit.spec.yamlio import read_spec_file

    raw = read_spec_file(SPEC, "data, kernels, problem, engine, output")
    raw["problem"] = {"loss": "one_class", "regularizer": "l1", "C": 1.0}
    res = run(parse_spec(raw, file=str(SPEC), folder=SPEC.parent))
    assert res.result.C_max > 1.0 and 0.0 < res.metrics["nu"] < 1.0
    assert res.spec.problem.C == 1.0 and res.spec.problem.nu is None


# ---------------------------------------------------------------------------
# benchmarks/bench_oneclass.py: the choices each side makes
# ---------------------------------------------------------------------------
def _bench_oneclass():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_oneclass.py"
    spec = importlib.util.spec_from_file_location("bench_oneclass", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_inlier_only_widths(benign):
    """The benchmark's inlier-only widths against direct computations: the median heuristic (the median of the
    pairwise distances) and the kernel-variance criterion (variance over mean of the off-diagonal entries of
    scikit-learn's Gaussian kernel, largest over the widths of kernels="auto")."""
    from sklearn.metrics.pairwise import euclidean_distances

    bench = _bench_oneclass()
    n, d = benign.shape
    iu = np.triu_indices(n, 1)
    assert bench.median_width(benign) == pytest.approx(np.median(euclidean_distances(benign)[iu]), rel=1e-12)
    ws = bench.widths(d)
    assert ws == pytest.approx([s * np.sqrt(d) for s in (0.125, 0.25, 0.5, 1, 2)], rel=1e-6)
    crit = [np.var(K[iu]) / (np.mean(K[iu]) + 1e-12) for K in (rbf_kernel(benign, gamma=0.5 / w**2) for w in ws)]
    assert 0 < int(np.argmax(crit)) < len(ws) - 1  # an inner width: the criterion is not monotone here
    assert bench.kernel_variance_width(benign, ws) == ws[int(np.argmax(crit))]
    assert bench.choose(["a", "b", "c"], {"a": 0.5, "b": 0.9, "c": 0.7}.get) == "b"
    D = euclidean_distances(benign)
    np.fill_diagonal(D, np.inf)
    nn, med = np.median(D.min(axis=1)), np.median(D[iu])
    np.testing.assert_allclose(bench.distance_widths(benign, 0.5, 2.0), np.geomspace(nn / 2, 2 * med, 5), rtol=1e-12)


def test_benchmark_splits_keep_outliers_out_of_training():
    """Training and validation-fit rows are inliers only; test and validation share no row and no outlier; each
    fold's fit rows are training rows disjoint from its validation rows, and the folds' validation inliers
    cover the training rows once."""
    bench = _bench_oneclass()
    X, inlier = bench.load("ionosphere")
    assert X.shape[1] == 32 and np.all(X.std(0) > 0)
    train, test, outliers = bench.split(inlier, 3)
    assert inlier[train].all() and not inlier[outliers].any() and outliers.size > 0
    assert not set(train) & set(test) and not set(test) & set(outliers) and (~inlier[test]).sum() > 0
    assert inlier[test].sum() + train.size == inlier.sum()
    for n_folds in (1, 3):
        folds = bench.validation_folds(train, outliers, n_folds)
        assert len(folds) == n_folds
        seen = []
        for fit, val in folds:
            assert inlier[fit].all() and set(fit) <= set(train) and not set(fit) & set(val)
            assert set(outliers) <= set(val) and not set(val) & set(test)
            seen += [r for r in val if inlier[r]]
        assert sorted(seen) == sorted(train) if n_folds > 1 else 0 < len(seen) < train.size
    X, inlier = bench.load("sonar")  # a check set: the majority class as the inliers
    assert X.shape == (208, 60) and inlier.sum() == 111
