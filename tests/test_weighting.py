"""Two-stage methods: the weightings against independent computations (Clarabel's QPs, direct formulas,
scikit-learn), the second stage on the scaled bank, the estimators and specs with a weighting."""

from __future__ import annotations

import numpy as np
import pytest

from mklkit import metrics
from mklkit.kernels.factor import FactorBank
from mklkit.kernels.ops import ArrayBank
from mklkit.weighting import PWMK, AlignF, Average, EasyMKL, FHeuristic, alignf_qp, easymkl_margin, nonnegative_qp

cp = pytest.importorskip("cvxpy")


def _banks(N: int = 50, M: int = 6, seed: int = 0) -> tuple[ArrayBank, FactorBank, np.ndarray]:
    """A bank of polynomial-feature kernels on nested column sets (exact factors) and ±1 labels."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 4))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(N) > 0, 1.0, -1.0)
    blocks = []
    for m in range(M):
        Z = X[:, : (m % 4) + 1] * (m + 1)
        blocks.append(np.hstack([Z, Z**2]))
    fb = FactorBank.from_blocks(blocks)
    return ArrayBank(fb.to_array()), fb, y


def _centered(K: np.ndarray) -> np.ndarray:
    N = K.shape[-1]
    H = np.eye(N) - 1.0 / N
    return np.array([H @ k @ H for k in K])


def test_alignf_matrix_matches_the_definition_on_gram_and_factor_banks():
    ab, fb, _ = _banks()
    Kc = _centered(ab.as_array())
    ref = np.einsum("kij,lij->kl", Kc, Kc)
    for bank in (ab, fb):
        got = metrics.alignment_matrix(bank, centered=True, normalized=False)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9 * np.abs(ref).max())


def _clarabel_alignf(Mm: np.ndarray, a: np.ndarray) -> np.ndarray:
    v = cp.Variable(a.size)
    cp.Problem(cp.Minimize(cp.quad_form(v, cp.psd_wrap(Mm)) - 2 * a @ v), [v >= 0]).solve(
        solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    return v.value


def test_alignf_is_clarabels_qp_with_nonnegative_weights_where_the_unconstrained_one_is_negative():
    ab, fb, y = _banks()
    sol, Mm, a = alignf_qp(ab, y)
    assert np.any(np.linalg.solve(Mm, a) < 0.0)  # MKLpy's CKA would return these negative weights
    ref = _clarabel_alignf(Mm, a)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * scale)
    assert sol.converged and sol.gap <= 1e-9 and np.all(sol.x >= 0.0)
    eta = AlignF().weights(ab, y)
    np.testing.assert_allclose(eta, sol.x / np.linalg.norm(sol.x), atol=1e-12)
    np.testing.assert_allclose(AlignF().weights(fb, y), eta, atol=1e-9)


def test_alignf_with_several_positive_weights_and_a_real_target():
    rng = np.random.default_rng(3)
    N = 40
    X = rng.standard_normal((N, 3))
    t = X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.standard_normal(N)
    K = np.array([np.outer(X[:, j], X[:, j]) for j in range(3)] + [np.outer(X[:, 1] ** 2, X[:, 1] ** 2)])
    sol, Mm, a = alignf_qp(ArrayBank(K), t)
    ref = _clarabel_alignf(Mm, a)
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * np.abs(ref).max())
    assert np.count_nonzero(sol.x > 1e-8 * sol.x.max()) >= 2


def test_nonnegative_qp_kkt_on_a_random_problem():
    rng = np.random.default_rng(1)
    B = rng.standard_normal((8, 5))
    Mm = B.T @ B
    a = Mm @ rng.standard_normal(5)
    sol = nonnegative_qp(Mm, a)
    ref = _clarabel_alignf(Mm, a)
    np.testing.assert_allclose(sol.x, ref, atol=1e-6 * max(1.0, np.abs(ref).max()))
    g = Mm @ sol.x - a
    assert np.all(g >= -1e-9 * np.abs(a).max()) and np.all(np.abs(g[sol.x > 0]) <= 1e-9 * np.abs(a).max())


@pytest.mark.parametrize("lam", [0.1, 0.5])
def test_easymkl_gamma_is_clarabels_and_eta_follows_from_gamma(lam):
    ab, fb, y = _banks()
    sol, s = easymkl_margin(ab, y, lam, tol=1e-12)
    K = ab.as_array()
    N = y.size
    np.testing.assert_allclose(s, N / np.einsum("mii->m", K))
    Kbar = np.einsum("m,mij->ij", s, K)
    Q = (1 - lam) * np.outer(y, y) * Kbar + lam * np.eye(N)
    g = cp.Variable(N)
    pos = y > 0
    cons = [g >= 0, cp.sum(g[pos]) == 1, cp.sum(g[~pos]) == 1]
    cp.Problem(cp.Minimize(cp.quad_form(g, cp.psd_wrap(Q))), cons).solve(
        solver="CLARABEL", tol_gap_abs=1e-13, tol_gap_rel=1e-13, tol_feas=1e-13
    )
    np.testing.assert_allclose(sol.x, g.value, atol=1e-6)
    assert sol.converged and sol.objective <= float(g.value @ Q @ g.value) + 1e-9
    # eta directly from gamma: eta_hat_m = gamma'Y K_hat_m Y gamma / sum, eta_m ∝ eta_hat_m N / tr(K_m)
    yg = y * sol.x
    hat = np.array([yg @ (s[m] * K[m]) @ yg for m in range(K.shape[0])])
    hat /= hat.sum()
    want = hat * s / np.sum(hat * s)
    eta = EasyMKL(lam=lam, tol=1e-12).weights(ab, y)
    np.testing.assert_allclose(eta, want, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(EasyMKL(lam=lam, tol=1e-12).weights(fb, y), eta, rtol=1e-6, atol=1e-9)


def test_fheuristic_is_each_kernels_alignment_normalised():
    ab, fb, y = _banks()
    K = ab.as_array()
    A = np.array([np.sum(k * np.outer(y, y)) / np.sqrt(np.sum(k * k) * np.sum(np.outer(y, y) ** 2)) for k in K])
    want = A / A.sum()
    np.testing.assert_allclose(FHeuristic().weights(ab, y), want, rtol=1e-10)
    np.testing.assert_allclose(FHeuristic().weights(fb, y), want, rtol=1e-10)


@pytest.mark.parametrize("delta", [0.0, 0.5, 1.0])
def test_pwmk_is_each_kernels_cv_accuracy_less_delta_times_the_lowest(delta):
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    ab, fb, y = _banks(N=60)
    K = ab.as_array()
    acc = []
    for k in K:
        scores = []
        for tr, te in StratifiedKFold(n_splits=3).split(np.zeros(y.size), y):
            svc = SVC(kernel="precomputed", C=10.0).fit(k[np.ix_(tr, tr)], y[tr])
            scores.append(np.mean(svc.predict(k[np.ix_(te, tr)]) == y[te]))
        acc.append(np.mean(scores))
    acc = np.array(acc)
    w = acc - delta * acc.min()
    want = w / w.sum() if w.sum() > 0 else np.full(acc.size, 1.0 / acc.size)
    np.testing.assert_allclose(PWMK(delta=delta, C=10.0).weights(ab, y), want, rtol=1e-12)
    np.testing.assert_allclose(PWMK(delta=delta, C=10.0).weights(fb, y), want, rtol=1e-12)


def test_average_is_one_over_m():
    ab, fb, y = _banks(M=5)
    np.testing.assert_array_equal(Average().weights(ab, y), np.full(5, 0.2))
    np.testing.assert_array_equal(Average().weights(fb, y), np.full(5, 0.2))


# --- the second stage, the estimators and specs ---------------------------------------------------------------------


def _precomputed(N: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gram matrices (N, N, M) of three Gaussian widths and a linear kernel on breast cancer rows, their labels
    and the real target ``mean radius``."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    rows = np.random.default_rng(seed).permutation(X.shape[0])[:N]
    X, y = X[rows], y[rows]
    t = X[:, 0].copy()
    X = (X - X.mean(0)) / X.std(0)
    X = X[:, 1:]
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    Ks = [np.exp(-g * D) for g in (0.002, 0.02, 0.2)] + [X @ X.T / X.shape[1]]
    return np.stack(Ks, axis=-1), y, t


WEIGHTINGS = ["average", "alignf", "easymkl", "fheuristic", {"name": "pwmk", "C": 10.0}]


@pytest.mark.parametrize("weighting", WEIGHTINGS, ids=lambda w: w if isinstance(w, str) else w["name"])
def test_classifier_with_a_weighting_is_the_single_kernel_fit_on_the_combined_kernel(weighting):
    from mklkit import MKLClassifier
    from mklkit.plugins import get_registry
    from mklkit.weighting import checked_weights

    Ks, y, _ = _precomputed()
    est = MKLClassifier(kernels="precomputed", weighting=weighting, C=1.0, tol=1e-8).fit(Ks, y)
    labels = np.where(y == 1, 1.0, -1.0)
    eta = (
        get_registry()
        .create("weighting", weighting)
        .weights(ArrayBank(np.ascontiguousarray(np.moveaxis(Ks, 2, 0))), labels)
    )
    np.testing.assert_allclose(est.kernel_weights_, checked_weights(eta, 4, "test"), rtol=1e-8, atol=1e-12)
    assert est.dual_gap_ <= 1e-8 and est.regularizer_.name == "uniform"
    Kc = np.einsum("ijm,m->ij", Ks, est.kernel_weights_)[:, :, None]
    ref = MKLClassifier(kernels="precomputed", regularizer="uniform", C=1.0, tol=1e-8).fit(Kc, y)
    np.testing.assert_allclose(est.decision_function(Ks), ref.decision_function(Kc), atol=1e-6)


def test_the_default_C_of_a_weighting_is_chosen_on_held_out_rows_at_any_size():
    from mklkit import MKLClassifier

    Ks, y, _ = _precomputed()  # 120 rows: without a weighting, C="auto" cross-validates around "scale" here
    plain = MKLClassifier(kernels="precomputed").fit(Ks, y)
    assert plain.C_selection_.folds == 3
    est = MKLClassifier(kernels="precomputed", weighting="average").fit(Ks, y)
    assert est.C_selection_ is not None and est.C_ == est.C_selection_.C
    assert est.C_selection_.folds == 1 and est.C_selection_.reference == "prior"  # the whole path, one part
    scale = MKLClassifier(kernels="precomputed", weighting="average", C="scale").fit(Ks, y)
    assert getattr(scale, "C_selection_", None) is None and scale.C_ != est.C_


def test_a_weighting_with_joint_multiclass_is_refused():
    from sklearn.datasets import load_wine

    from mklkit import MKLClassifier
    from mklkit.components.params import ParamError

    X, y = load_wine(return_X_y=True)
    with pytest.raises(ParamError) as err:
        MKLClassifier(kernels=[{"function": "rbf", "width": [1.0, 3.0]}], multiclass="joint", weighting="average").fit(
            X, y
        )
    assert err.value.key == "weighting" and "joint" in str(err.value)


@pytest.mark.parametrize("multiclass", ["ovr", "ovo"])
def test_multiclass_weights_are_those_of_each_binary_problem(multiclass):
    from sklearn.datasets import load_wine

    from mklkit import MKLClassifier

    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    groups = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    Ks = np.stack([np.exp(-((X[:, None, g] - X[None, :, g]) ** 2).sum(-1) / len(g)) for g in groups], axis=-1)
    est = MKLClassifier(kernels="precomputed", weighting="alignf", multiclass=multiclass, C=0.1).fit(Ks, y)
    K = np.ascontiguousarray(np.moveaxis(Ks, 2, 0))
    assert est.kernel_weights_.shape == (3, 4)
    pairs = [(0, None), (1, None), (2, None)] if multiclass == "ovr" else [(1, 0), (2, 0), (2, 1)]
    for t, (pos, neg) in enumerate(pairs):
        rows = np.arange(y.size) if neg is None else np.flatnonzero((y == pos) | (y == neg))
        yt = np.where(y[rows] == pos, 1.0, -1.0)
        want = AlignF().weights(ArrayBank(np.ascontiguousarray(K[:, rows][:, :, rows])), yt)
        np.testing.assert_allclose(est.kernel_weights_[t], want, rtol=1e-8, atol=1e-12)
    assert est.score(Ks, y) > 0.9


def test_a_factor_bank_with_the_held_out_C_and_the_default_bank_kept_whole():
    from sklearn.datasets import load_wine

    from mklkit import MKLClassifier

    X, y = load_wine(return_X_y=True)
    X, y = X[y < 2], y[y < 2]
    fac = MKLClassifier(weighting="fheuristic", C="path", factor={"rank": 30}).fit(X, y)
    assert fac.factor_approximation_ is not None and fac.bank_choice_ is None
    assert np.isclose(fac.kernel_weights_.sum(), 1.0) and fac.C_selection_ is not None
    assert fac.score(X, y) > 0.9


def test_regressor_with_alignf_on_a_real_target():
    from mklkit import MKLRegressor

    Ks, _, t = _precomputed()
    est = MKLRegressor(kernels="precomputed", weighting="alignf", C=0.1, tol=1e-8).fit(Ks, t)
    assert np.all(est.kernel_weights_ >= 0) and est.dual_gap_ <= 1e-8
    Kc = np.einsum("ijm,m->ij", Ks, est.kernel_weights_)[:, :, None]
    ref = MKLRegressor(kernels="precomputed", regularizer="uniform", C=0.1, tol=1e-8).fit(Kc, t)
    np.testing.assert_allclose(est.predict(Ks), ref.predict(Kc), atol=1e-6 * np.abs(t).max())


def test_estimator_errors_name_the_parameter_the_value_and_what_is_allowed():
    from mklkit import MKLClassifier, MKLRegressor
    from mklkit.components.params import ParamError

    Ks, y, t = _precomputed(N=40)
    with pytest.raises(ParamError) as exc:
        MKLClassifier(kernels="precomputed", weighting="alignf", regularizer="l1").fit(Ks, y)
    assert exc.value.key == "regularizer" and exc.value.value == "l1"
    assert "uniform" in exc.value.allowed and "weighting='alignf'" in exc.value.allowed
    with pytest.raises(ParamError) as exc:
        MKLRegressor(kernels="precomputed", weighting="easymkl").fit(Ks, t)
    assert exc.value.key == "weighting" and exc.value.value == "easymkl"
    assert "alignf" in exc.value.allowed and "easymkl" not in exc.value.allowed
    with pytest.raises(ParamError) as exc:
        MKLClassifier(kernels="precomputed", weighting={"name": "easymkl", "lam": 1.5}).fit(Ks, y)
    assert exc.value.key == "lam" and exc.value.value == 1.5 and exc.value.allowed == "a number in [0, 1]"
    with pytest.raises(KeyError, match="did you mean 'alignf'"):
        MKLClassifier(kernels="precomputed", weighting="alignff").fit(Ks, y)
    # 'uniform' given explicitly is the second stage itself
    est = MKLClassifier(kernels="precomputed", weighting="average", regularizer="uniform", C=1.0).fit(Ks, y)
    np.testing.assert_allclose(est.kernel_weights_, 0.25)


_SPEC = {
    "data": {"builtin": "sonar", "test_size": 0.3, "seed": 0, "standardize": True},
    "kernels": {"bank": [{"function": "rbf", "width": [5, 10, 20], "features": "all"}, {"function": "linear"}]},
    "problem": {"loss": "hinge", "weighting": {"name": "easymkl", "lam": 0.2}, "C": "scale"},
    "engine": {"tol": 1e-6},
}


def test_a_spec_with_a_weighting_runs_and_reports_the_weights():
    from mklkit import api
    from mklkit.spec.models import parse_spec

    spec = parse_spec(_SPEC)
    assert spec.problem.regularizer.name == "uniform" and spec.problem.weighting.lam == 0.2
    run = api.run(spec)
    weights = np.array([k["weight"] for k in run.kernel_weights()])
    assert weights.shape == (4,) and np.isclose(weights.sum(), 1.0) and np.all(weights >= 0)
    assert run.summary()["regularizer"] == "uniform" and run.result.gap <= 1e-6
    assert run.metrics["test_accuracy"] > 0.7
    assert spec.resolved()["problem"]["weighting"]["name"] == "easymkl"


@pytest.mark.parametrize(
    "problem, key, value, allowed",
    [
        ({"loss": "hinge", "weighting": "alignff"}, "problem.weighting", "'alignff'", "did you mean 'alignf'"),
        ({"loss": "hinge", "weighting": {"name": "pwmk", "cv": 1}}, "problem.weighting.cv", "1", "an integer >= 2"),
        ({"loss": "hinge", "weighting": "alignf", "regularizer": "l1"}, "problem.regularizer", "'l1'", "'uniform'"),
        ({"loss": "squared", "weighting": "easymkl"}, "problem.weighting", "'easymkl'", "alignf, average"),
    ],
)
def test_spec_errors_with_a_weighting(problem, key, value, allowed):
    from mklkit.pipeline import PipelineError
    from mklkit.spec.models import parse_spec

    with pytest.raises(PipelineError) as exc:
        parse_spec({**_SPEC, "problem": problem})
    text = str(exc.value)
    assert f"{key}:" in text and f"got {value}" in text and allowed in text


def test_the_second_stage_passes_the_engine_kit_with_every_builtin_engine():
    """A two-stage problem is an ordinary problem: every built-in engine that takes it certifies its gap
    against the conic reference (check_engine)."""
    from mklkit.components.losses import Hinge, Logistic
    from mklkit.components.elasticnet import L1
    from mklkit.pipeline.weighting import weight_problem
    from mklkit.plugins import get_registry
    from mklkit.problem import Problem
    from mklkit.testing import KitProblem, check_engine, exact_factors, sample_bank, sample_points

    X, y = sample_points("sonar", 40, 0)
    K = sample_bank(X)
    reg = get_registry()
    checked = []
    for representation, bank in (("array", K), ("factor", exact_factors(K))):
        for loss in (Hinge(), Logistic()):
            base = Problem(K=bank, y=y, loss=loss, regularizer=L1(), C=0.1)
            second = weight_problem(base, EasyMKL()).problem
            assert second.regularizer.name == "uniform" and second.representation == representation
            for name in ("spicy", "proximal", "bcd", "dualcd"):
                engine = reg.create("engine", name)
                if engine.supports(second) is not None:
                    continue
                label = f"sonar {loss.name} easymkl second stage ({representation})"
                report = check_engine(engine, problems=[KitProblem(label, second)], reference="conic")
                assert report.ok, str(report)
                checked.append((name, representation, loss.name))
    assert {c[0] for c in checked} == {"spicy", "proximal", "bcd", "dualcd"}


@pytest.mark.parametrize("cls", [Average, AlignF, EasyMKL, FHeuristic])
def test_the_builtin_weightings_pass_the_component_kit(cls):
    from mklkit.testing import WEIGHTING_IDENTITIES, check_component

    report = check_component(cls)
    assert report.ok, str(report)
    assert [c.identity for c in report.checks] == list(WEIGHTING_IDENTITIES)


def test_the_component_kit_finds_a_wrong_scale_claim_and_negative_weights():
    from mklkit.testing import check_component, registered
    from mklkit.weighting import Weighting

    class TraceWeights(Weighting):
        name = "trace_weights"
        description = "weights proportional to the traces (a wrong 'invariant' claim)"
        scale = "invariant"

        def weights(self, bank, y):
            return np.asarray(bank.trace(), dtype=np.float64)

    class Signed(TraceWeights):
        name = "signed"
        description = "weights of both signs"
        scale = "none"

        def weights(self, bank, y):
            w = np.asarray(bank.trace(), dtype=np.float64)
            return w - w.mean()

    report = check_component(TraceWeights)
    assert not report["scale"].passed and report["kernel_order"].passed and report["factor_bank"].passed
    assert not check_component(Signed)["weights"].passed
    with registered(TraceWeights):  # a plugin's weighting: the registry and the estimators take it by name
        from mklkit import MKLClassifier

        Ks, y, _ = _precomputed(N=40)
        est = MKLClassifier(kernels="precomputed", weighting="trace_weights", C=1.0).fit(Ks, y)
        np.testing.assert_allclose(est.kernel_weights_, np.trace(np.moveaxis(Ks, 2, 0), axis1=1, axis2=2))


def test_check_plugin_runs_the_kit_on_a_weighting(capsys):
    from mklkit.cli import main

    assert main(["check-plugin", "weighting:fheuristic", "--random", "1"]) == 0
    out = capsys.readouterr().out
    assert "conformance of weighting 'fheuristic'" in out and "PASS  factor_bank" in out


def test_weight_problem_refuses_a_sharded_bank_and_a_weighting_without_weights():
    from mklkit.components.elasticnet import L1
    from mklkit.components.losses import Hinge
    from mklkit.pipeline import PipelineError
    from mklkit.pipeline.weighting import weight_problem
    from mklkit.problem import Problem

    ab, _, y = _banks()
    probe = Problem(K=ab, y=y, loss=Hinge(), regularizer=L1(), C=1.0, extra={"representation": "sharded"})
    with pytest.raises(PipelineError) as exc:
        weight_problem(probe, AlignF())
    assert exc.value.key == "problem.weighting" and exc.value.value == "sharded" and "factor" in exc.value.allowed
    flat = Problem(K=np.ones((3, 6, 6)), y=np.array([1.0, -1, 1, -1, 1, -1]), loss=Hinge(), regularizer=L1(), C=1.0)
    with pytest.raises(PipelineError) as exc:  # constant kernels: nothing is aligned with the target
        weight_problem(flat, AlignF())
    assert exc.value.key == "problem.weighting" and "no kernel is aligned" in exc.value.problem


def test_a_plugin_weighting_with_invalid_weights_is_refused_by_the_estimator():
    from mklkit import MKLClassifier
    from mklkit.testing import registered
    from mklkit.weighting import Weighting

    class NaNWeights(Weighting):
        name = "nan_weights"
        description = "weights that are not numbers"

        def weights(self, bank, y):
            return np.full(bank.shape[0], np.nan)

    Ks, y, _ = _precomputed(N=40)
    with registered(NaNWeights), pytest.raises(ValueError, match=r"MKLClassifier: weighting: .*finite"):
        MKLClassifier(kernels="precomputed", weighting="nan_weights").fit(Ks, y)


def test_fit_path_and_set_params_with_a_weighting():
    from mklkit import MKLClassifier

    Ks, y, _ = _precomputed(N=80)
    est = MKLClassifier(kernels="precomputed", weighting="easymkl", tol=1e-8)
    est.set_params(weighting__lam=0.3)
    assert est.weighting == {"name": "easymkl", "lam": 0.3}
    path = est.fit_path(Ks, y, Cs=[1.0, 0.1, 0.01])
    eta = EasyMKL(lam=0.3).weights(ArrayBank(np.ascontiguousarray(np.moveaxis(Ks, 2, 0))), np.where(y == 1, 1.0, -1.0))
    for i in range(3):
        fitted = path.estimator(i)
        np.testing.assert_allclose(fitted.kernel_weights_, eta, rtol=1e-7)
        assert fitted.dual_gap_ <= 1e-8


def test_alignf_leaves_a_kernel_constant_after_centring_at_zero_and_matches_clarabels_optimum():
    ab, _, y = _banks()
    K = ab.as_array()
    N = y.size
    bank = ArrayBank(np.ascontiguousarray(np.concatenate([np.full((1, N, N), 1.0 / N), K])))  # unit trace, centred 0
    sol, Mm, a = alignf_qp(bank, y)
    ref = _clarabel_alignf(Mm, a)
    objective = float(sol.x @ Mm @ sol.x - 2 * a @ sol.x)
    assert sol.x[0] == 0.0 and sol.converged
    assert objective <= float(ref @ Mm @ ref - 2 * a @ ref) + 1e-9 * abs(objective)
    np.testing.assert_allclose(sol.x[1:], alignf_qp(ab, y)[0].x, rtol=1e-9, atol=1e-12)


def test_path_learns_the_weights_of_its_fitting_rows():
    """With ``C="path"`` the weighting is learnt on the path's fitting rows for choosing C (the held-out rows
    never shape the weights they judge), and on all rows for the fit: the estimator and a spec alike."""
    from mklkit import MKLClassifier
    from mklkit.pipeline.heldout import PathSettings
    from mklkit.testing import registered
    from mklkit.weighting import Weighting

    sizes: list[int] = []

    class Recorded(Weighting):
        name = "recorded"
        description = "the traces, recording the rows of each bank weighted"
        scale = "none"

        def weights(self, bank, y):
            sizes.append(int(bank.shape[1]))
            return np.asarray(bank.trace(), dtype=np.float64)

    Ks, y, _ = _precomputed(N=120)
    n_held = int(round(PathSettings().held_out * y.size))
    with registered(Recorded):
        est = MKLClassifier(kernels="precomputed", weighting="recorded", C="path").fit(Ks, y)
    assert sorted(sizes) == [y.size - n_held, y.size]
    assert est.C_selection_.n_fit == y.size - n_held
    np.testing.assert_allclose(est.kernel_weights_, np.trace(np.moveaxis(Ks, 2, 0), axis1=1, axis2=2))
    from mklkit import api
    from mklkit.spec.models import parse_spec

    sizes.clear()
    with registered(Recorded):
        run = api.run(parse_spec({**_SPEC, "problem": {"loss": "hinge", "weighting": "recorded", "C": "path"}}))
    path = run.C_selection
    assert sorted(sizes) == [path.n_fit, path.n_fit + path.n_held] and path.n_held > 0
