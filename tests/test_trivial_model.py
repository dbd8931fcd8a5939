"""A model with every kernel off (C >= C_max) is reported, not passed off as a success."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import yaml

from mklkit import TrivialModelWarning
from mklkit.data import load_builtin
from mklkit.estimators import MKLClassifier

BANK = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "poly", "degree": 1}]

pytestmark = pytest.mark.usefixtures("one_thread")


def _values(message: str) -> tuple[float, float]:
    m = re.search(r"C = ([0-9.e+-]+) >= C_max = ([0-9.e+-]+)", message)
    assert m is not None, message
    return float(m.group(1)), float(m.group(2))


def test_fit_above_c_max_warns_with_c_and_c_max(sonar_xy):
    X, y = sonar_xy
    with pytest.warns(TrivialModelWarning, match=r"C='auto' or a C below C_max") as rec:
        clf = MKLClassifier(BANK, C=100.0).fit(X, y)
    assert clf.active_kernels_.size == 0
    C, C_max = _values(str(rec[0].message))
    assert C == 100.0 and C_max == pytest.approx(clf.C_max_, rel=1e-5) and C_max < C
    # every prediction is one class: the model is the constant it was warned to be
    assert np.unique(clf.predict(X)).size == 1


def test_fit_below_c_max_is_silent(sonar_xy):
    X, y = sonar_xy
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrivialModelWarning)
        clf = MKLClassifier(BANK, C="auto").fit(X, y)
    assert clf.active_kernels_.size > 0 and clf.C_ < clf.C_max_


def test_fit_path_names_the_values_that_learn_nothing(sonar_xy):
    X, y = sonar_xy
    with pytest.warns(TrivialModelWarning, match=r"all kernels off at 1 of 2 values of Cs: 100\b"):
        path = MKLClassifier(BANK).fit_path(X, y, [100.0, 0.1])
    assert list(path.n_active > 0) == [False, True]
    # a path from C_max starts with every kernel off by construction: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrivialModelWarning)
        MKLClassifier(BANK).fit_path(X, y, 3)


def _spec(tmp_path, C):
    spec = {
        "data": {"builtin": "sonar", "test_size": 0.2, "seed": 0},
        "kernels": {"bank": BANK},
        "problem": {"loss": "logistic", "regularizer": "l1", "C": C},
        "engine": {"name": "spicy", "tol": 1e-4},
        "output": {"dir": str(tmp_path / "out")},
    }
    path = tmp_path / "trivial.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_run_warns_records_and_reports(tmp_path):
    from mklkit import api
    from mklkit.report import TRIVIAL_NOTE, plot_run, trivial_note

    with pytest.warns(TrivialModelWarning, match=r"problem\.C: all kernels are off") as rec:
        res = api.run(_spec(tmp_path, 100.0), progress=False)
    C, C_max = _values(str(rec[0].message))
    assert C == 100.0 and C_max == pytest.approx(res.result.C_max)
    summary = res.summary()
    assert summary["trivial"] is True and summary["n_active_kernels"] == 0
    res.write(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["trivial"] is True
    note = trivial_note(summary)
    assert note is not None and note.startswith(TRIVIAL_NOTE) and "C_max = " in note
    pytest.importorskip("matplotlib")
    assert [p.name for p in plot_run(tmp_path / "out")] == ["gap.png", "active.png", "weights.png"]


def test_run_that_learns_is_not_trivial(tmp_path):
    from mklkit import api
    from mklkit.report import trivial_note

    with warnings.catch_warnings():
        warnings.simplefilter("error", TrivialModelWarning)
        res = api.run(_spec(tmp_path, 0.1), progress=False)
    assert res.summary()["trivial"] is False and trivial_note(res.summary()) is None


def test_cli_prints_one_warning_line(tmp_path, capsys):
    from mklkit.cli import main

    code = main(["run", str(_spec(tmp_path, 100.0)), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0
    lines = [line for line in err.splitlines() if "C_max" in line and line.startswith("warning:")]
    assert len(lines) == 1
    C, C_max = _values(lines[0])
    assert C == 100.0 and C_max < C


def _builtins() -> list[str]:
    from mklkit.data import available

    return [n for n in available() if not n.endswith("_test")]


@pytest.mark.parametrize("name", _builtins())
def test_default_C_learns_on_every_bundled_data_set(tmp_path, name):
    """A spec that leaves problem.C out (C: auto) fits a model that is not a constant."""
    from mklkit import api

    data = {"builtin": name, "test_size": 0.2}
    if 0.8 * load_builtin(name).X.shape[0] > 300:
        data["train_size"] = 300  # a subsample of the training part (a9a at 300 rows: C_max 0.8)
    spec = {
        "data": data,
        "kernels": {"bank": [{"function": "rbf", "width": [0.5, 1.0, 2.0]}, {"function": "linear"}]},
        "problem": {"loss": "logistic"},
        "output": {"dir": str(tmp_path / "out")},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrivialModelWarning)
        res = api.run(path, progress=False)
    r = res.result
    assert res.n_active > 0 and r.C_max is not None and res.spec.problem.C < r.C_max
    sel = res.C_selection  # auto: a multiple of 1/sqrt(N) on unit-trace kernels, by cross-validation
    assert sel.folds == 3 and np.any(np.isclose(sel.ratios[sel.chosen], [1.0, 10**-0.5, 0.1], rtol=1e-12))
    assert res.summary()["C"] == pytest.approx(sel.ratios[sel.chosen] / np.sqrt(res.n_train))


@pytest.mark.parametrize("C", [None, "auto", ["auto", 0.1]])
def test_a_sweep_needs_numbers_at_C(C):
    """problem.C: auto (the default) is the rule of one run; a sweep selects C by validation."""
    from mklkit.spec import SpecError
    from mklkit.sweep import parse_sweep

    problem = {"loss": "logistic", "regularizer": {"name": "l1"}}
    if C is not None:
        problem["C"] = C
    raw = {
        "data": {"builtin": "sonar"},
        "kernels": {"bank": BANK},
        "problem": problem,
        "engine": {"name": "spicy", "tol": [1e-2, 1e-3]},
        "cv": {"folds": 3},
    }
    with pytest.raises(SpecError, match=r"g\.yaml: problem\.C.*sweep needs numbers.*got 'auto'"):
        parse_sweep(raw, file="g.yaml")


# ---------------------------------------------------------------------------
# weights.png: a readable title, and where the weight is when there are many kernels
# ---------------------------------------------------------------------------
def _drawn(monkeypatch):
    """mklkit.report and the list of the figures it saves (each kept when written)."""
    from matplotlib.figure import Figure

    from mklkit import report

    figs = []
    savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: figs.append(fig) or savefig(fig, *a, **k))
    return report, figs


def test_weights_plot_groups_many_kernels_and_keeps_the_title_inside(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    report, figs = _drawn(monkeypatch)
    widths, d = [0.5, 1.0, 2.0, 4.0], 30
    rng = np.random.default_rng(0)
    raw = rng.uniform(0.9, 1.1, size=(len(widths), d)) * np.array([4.0, 3.0, 2.0, 1.0])[:, None]
    raw /= raw.sum()
    weights = [
        {"index": i * d + j, "name": f"rbf(width={w:g})[x{j}]", "weight": float(raw[i, j])}
        for i, w in enumerate(widths)
        for j in range(d)
    ]
    summary = {
        "kernel_weights": weights,
        "n_kernels": len(weights),
        "n_active_kernels": len(weights),
        "dataset": "a-data-set-with-a-rather-long-name-" * 3,
        "loss": "logistic",
        "regularizer": "elasticnet",
        "C": 0.05,
        "engine": "auto",
        "status": "converged",
    }
    report.plot_weights(summary, tmp_path / "weights.png", top_k=10)
    fig = figs[-1]
    assert len(fig.axes) == 2
    groups = fig.axes[1]
    labels = [t.get_text() for t in groups.get_yticklabels()]
    assert labels == [f"rbf(width={w:g}) ({d})" for w in widths]  # by total weight, largest first
    totals = sorted((p.get_width() for p in groups.patches), reverse=True)
    np.testing.assert_allclose(totals, raw.sum(axis=1), rtol=1e-12)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    box = fig._suptitle.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width  # the title is not clipped


def test_plots_of_a_trivial_run_say_so(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    report, figs = _drawn(monkeypatch)
    summary = {
        "kernel_weights": [{"index": 0, "name": "k0", "weight": 0.0}],
        "n_kernels": 1,
        "n_active_kernels": 0,
        "trivial": True,
        "C": 100.0,
        "C_max": 3.88,
        "status": "converged",
    }
    history = [{"iteration": 0, "gap": 0.0, "n_active": 0}]
    report.plot_gap(summary, history, tmp_path / "g.png")
    report.plot_active(summary, history, tmp_path / "a.png")
    report.plot_weights(summary, tmp_path / "w.png")
    assert len(figs) == 3 and all((tmp_path / f).is_file() for f in ("g.png", "a.png", "w.png"))
    for fig in figs:
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert any(t.startswith(report.TRIVIAL_NOTE + ": C = 100, C_max = 3.88") for t in texts), texts


def test_a_trivial_model_from_c_auto_says_so_and_does_not_suggest_auto(sonar_xy):
    X, y = sonar_xy
    labels = np.unique(y)
    tiny = {labels[0]: 1e-4, labels[1]: 1e-4}  # the loss 10^4 times smaller: C_max with it
    with pytest.warns(TrivialModelWarning, match=r"from C='auto'.*C_max = [0-9.e+-]+.*use a C below C_max") as rec:
        MKLClassifier(BANK, class_weight=tiny).fit(X, y)
    assert not any("use C='auto'" in str(w.message) for w in rec)
