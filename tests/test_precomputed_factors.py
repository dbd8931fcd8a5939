"""Precomputed factors: ``FactorBank.from_factors``, ``kernels.precomputed_factors`` and their bad-input errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import yaml

from mklkit.api import solve_prepared
from mklkit.data import load_builtin
from mklkit.kernels import BankError, FactorBank, KernelBank, load_precomputed_factors
from mklkit.spec import SpecError, load_spec
from test_cli import assert_user_error, run_cli

N, N_TEST, STARTS = 40, 10, [0, 4, 8, 12]


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """A valid file's arrays: 3 kernels of rank 4 on 40 training and 10 test rows."""
    rng = np.random.default_rng(seed)
    return {
        "L_train": rng.standard_normal((N, 12)),
        "starts": np.array(STARTS),
        "y_train": np.where(np.arange(N) % 2 == 0, 1.0, -1.0),
        "L_test": rng.standard_normal((N_TEST, 12)),
        "y_test": np.where(np.arange(N_TEST) % 2 == 0, 1.0, -1.0),
        "names": np.array(["a", "b", "c"]),
    }


# ---------------------------------------------------------------------------
# FactorBank.from_factors: the kernels of linear factors are the linear kernels of the groups
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("normalize", ["none", "trace", "diagonal"])
def test_from_factors_equals_the_linear_kernels_of_the_groups(normalize):
    rng = np.random.default_rng(3)
    X, X_new = rng.standard_normal((30, 7)), rng.standard_normal((6, 7))
    groups = [[0, 1, 2], [3], [4, 5, 6]]
    kb = KernelBank.build(X, [{"function": "linear", "features": groups}], normalize=normalize)
    L, L_new = np.hstack([X[:, g] for g in groups]), np.hstack([X_new[:, g] for g in groups])
    before = L.copy()
    fb = FactorBank.from_factors(L, ranks=[3, 1, 3], names=["g0", "g1", "g2"], normalize=normalize)
    assert fb.shape == (3, 30, 30) and fb.factor_map.names == ["g0", "g1", "g2"]
    np.testing.assert_allclose(fb.to_array(), kb.K, rtol=0, atol=1e-12 * np.abs(kb.K).max())
    # new points: their raw rows, normalised like the training rows, give the cross kernels
    K_new = kb.cross(X_new)
    cross = np.stack(
        [fb.transform(L_new)[a:b].T @ fb.block(m) for m, (a, b) in enumerate(zip(fb.starts[:-1], fb.starts[1:]))]
    )
    np.testing.assert_allclose(cross, K_new, rtol=0, atol=1e-12 * np.abs(K_new).max())
    np.testing.assert_array_equal(L, before)  # the caller's factors are not modified
    # starts and ranks say the same
    fs = FactorBank.from_factors(L, [0, 3, 4, 7], normalize=normalize)
    np.testing.assert_array_equal(fs.LT, fb.LT)


def test_from_factors_refuses_a_sparse_matrix():
    L = sp.random(20, 6, density=0.3, format="csr", random_state=0)
    with pytest.raises(
        BankError,
        match=r"L_train.*dense array.*scipy\.sparse csr matrix.*\(20, 6\).*"
        r"\.toarray\(\)",
    ):
        FactorBank.from_factors(L, ranks=[3, 3])


@pytest.mark.parametrize(
    "change, match",
    [
        (
            {"starts": None},
            r"L_train: the column layout needs exactly one of starts \(M \+ 1,\) or ranks \(M,\); "
            r"got neither",
        ),
        ({"ranks": [4, 4, 4]}, r"exactly one of starts .* or ranks .*; got both"),
        ({"L_train": np.ones(12)}, r"L_train must be a 2-d array \(samples x factor columns\); got shape \(12,\)"),
        ({"starts": [0, 8, 4, 12]}, r"starts must be non-decreasing; got starts\[2\] = 4 < starts\[1\] = 8"),
        ({"starts": [2, 4, 8, 12]}, r"starts\[0\] must be 0; got 2"),
        ({"starts": [0, 4, 8, 11]}, r"starts\[-1\] must be R = 12 \(the columns of L_train\); got 11"),
        ({"starts": [0.0, 4.0, 8.0, 12.0]}, r"starts must hold integers; got dtype float64"),
        ({"starts": None, "ranks": [4, 4, 3]}, r"ranks must sum to R = 12 \(the columns of L_train\); got sum 11"),
        ({"starts": None, "ranks": [4, 0, 8]}, r"ranks must be integers >= 1; got ranks\[1\] = 0"),
        ({"names": ["a", "b"]}, r"names must have shape \(3,\) \(one per kernel\); got \(2,\)"),
        ({"nan": (3, 5)}, r"L_train has a NaN or infinite value at \[3, 5\]: nan; factors must be finite"),
        ({"L_train": np.full((N, 12), "x")}, r"L_train must be a real numeric array \(float or int\); got dtype <U1"),
        (
            {"normalize": "trace", "zero_block": 1},
            r"L_train: kernel 1 \('b', columns 4:8\) is all zero: "
            r"tr\(L_m L_m\^T\) = 0; normalize 'trace' needs a non-zero block",
        ),
        (
            {"normalize": "diagonal", "zero_row": (7, 2)},
            r"L_train: row 7 of kernel 2 \('c'\) is zero: "
            r"k\(x_7, x_7\) = 0; normalize 'diagonal' needs a non-zero row",
        ),
        ({"normalize": "max"}, r"normalize"),
    ],
)
def test_from_factors_errors(change, match):
    a = arrays()
    kw: dict[str, Any] = {"starts": a["starts"], "names": list(a["names"]), "normalize": "none"}
    L = a["L_train"]
    for k, v in change.items():
        if k == "nan":
            L[v] = np.nan
        elif k == "zero_block":
            L[:, STARTS[v] : STARTS[v + 1]] = 0.0
        elif k == "zero_row":
            L[v[0], STARTS[v[1]] : STARTS[v[1] + 1]] = 0.0
        elif k == "L_train":
            L = v
        else:
            kw[k] = v
    with pytest.raises(BankError, match=match):
        FactorBank.from_factors(L, **kw)


def test_test_rows_of_the_wrong_width_are_refused():
    a = arrays()
    fb = FactorBank.from_factors(a["L_train"], a["starts"])
    with pytest.raises(BankError, match=r"L_new.*R = 12 columns.*got shape \(10, 11\)"):
        fb.transform(a["L_test"][:, :11])


# ---------------------------------------------------------------------------
# The .npz file: every bad input is one error naming the file and the array
# ---------------------------------------------------------------------------
def write_case(tmp_path: Path, case: str) -> Path:
    """A file for ``case`` (a bad one, or ``ok``), as ``f.npz`` in ``tmp_path``."""
    p = tmp_path / "f.npz"
    a = arrays()
    if case == "missing_file":
        return p
    if case == "not_zip":
        p.write_text("L_train,y_train\n1,2\n")
        return p
    if case == "npy":
        with open(p, "wb") as f:
            np.save(f, a["L_train"])
        return p
    if case == "save_npz":
        sp.save_npz(p, sp.csr_matrix(a["L_train"]))
        return p
    edits: dict[str, Any] = {
        "no_L_train": {"L_train": None},
        "no_y_train": {"y_train": None},
        "both_layouts": {"ranks": np.array([4, 4, 4])},
        "no_layout": {"starts": None},
        "unknown": {"K_train": np.zeros(3)},
        "L_1d": {"L_train": np.ones(N)},
        "starts_down": {"starts": np.array([0, 8, 4, 12])},
        "starts_not_0": {"starts": np.array([1, 4, 8, 12])},
        "starts_not_R": {"starts": np.array([0, 4, 8, 13])},
        "ranks_sum": {"starts": None, "ranks": np.array([4, 4, 5])},
        "ranks_low": {"starts": None, "ranks": np.array([4, 8, 0])},
        "y_len": {"y_train": a["y_train"][:-1]},
        "L_test_cols": {"L_test": a["L_test"][:, :11]},
        "y_test_len": {"y_test": a["y_test"][:-2]},
        "names_len": {"names": np.array(["a", "b", "c", "d"])},
        "L_test_no_y": {"y_test": None},
        "y_test_no_L": {"L_test": None},
        "sparse_object": {"L_train": sp.csr_matrix(a["L_train"])},
        "object": {"L_train": a["L_train"].astype(object)},
        "str": {"L_train": a["L_train"].astype(str)},
        "names_object": {"names": np.array(["a", "b", "c"], dtype=object)},
    }
    if case == "nan":
        a["L_train"][5, 9] = np.inf
    elif case == "nan_test":
        a["L_test"][2, 0] = np.nan
    elif case == "zero_block":
        a["L_train"][:, 4:8] = 0.0
    elif case == "zero_row":
        a["L_train"][11, 0:4] = 0.0
    elif case != "ok":
        a.update(edits[case])
    kept = {k: v for k, v in a.items() if v is not None}
    np.savez(p, **kept)
    return p


#: case -> (normalize, the message of load_precomputed_factors, the words the spec error must hold)
CASES: dict[str, tuple[str | None, str, tuple[str, ...]]] = {
    "not_zip": (None, r"f\.npz: cannot read as NPZ \(not a zip archive\)", ("not a zip archive",)),
    "npy": (None, r"f\.npz: cannot read as NPZ \(a single \.npy array\)", ("a single .npy array",)),
    "save_npz": (
        None,
        r"f\.npz: the file is a scipy\.sparse\.save_npz file .*L_train must be a dense array.*"
        r"L_train=L\.toarray\(\)",
        ("save_npz", "L_train must be a dense array", ".toarray()"),
    ),
    "no_L_train": (None, r"f\.npz: missing array 'L_train'; the file has: ", ("missing array 'L_train'",)),
    "no_y_train": (None, r"f\.npz: missing array 'y_train'", ("missing array 'y_train'",)),
    "unknown": (
        None,
        r"f\.npz: unknown array 'K_train' .*; allowed: L_train, starts, ranks, y_train, L_test, y_test, names",
        ("unknown array 'K_train'",),
    ),
    "both_layouts": (
        None,
        r"f\.npz: the column layout needs exactly one of starts .* or ranks .*; got both",
        ("starts", "ranks", "got both"),
    ),
    "no_layout": (None, r"got neither", ("starts", "ranks", "got neither")),
    "L_1d": (None, r"f\.npz: L_train must be a 2-d array .*; got shape \(40,\)", ("L_train must be a 2-d array",)),
    "starts_down": (
        None,
        r"f\.npz: starts must be non-decreasing; got starts\[2\] = 4 < starts\[1\] = 8",
        ("starts must be non-decreasing",),
    ),
    "starts_not_0": (None, r"f\.npz: starts\[0\] must be 0; got 1", ("starts[0] must be 0",)),
    "starts_not_R": (None, r"f\.npz: starts\[-1\] must be R = 12 .*; got 13", ("starts[-1] must be R = 12",)),
    "ranks_sum": (None, r"f\.npz: ranks must sum to R = 12 .*; got sum 13", ("ranks must sum to R = 12",)),
    "ranks_low": (None, r"f\.npz: ranks must be integers >= 1; got ranks\[2\] = 0", ("ranks must be integers >= 1",)),
    "y_len": (None, r"f\.npz: y_train must have shape \(40,\); got \(39,\)", ("y_train must have shape (40,)",)),
    "L_test_cols": (
        None,
        r"f\.npz: L_test must have R = 12 columns like L_train; got shape \(10, 11\)",
        ("L_test must have R = 12 columns",),
    ),
    "y_test_len": (None, r"f\.npz: y_test must have shape \(10,\); got \(8,\)", ("y_test must have shape (10,)",)),
    "names_len": (
        None,
        r"f\.npz: names must have shape \(3,\) \(one per kernel\); got \(4,\)",
        ("names must have shape (3,)",),
    ),
    "L_test_no_y": (None, r"f\.npz: L_test is given without y_test", ("L_test is given without y_test",)),
    "y_test_no_L": (None, r"f\.npz: y_test is given without L_test", ("y_test is given without L_test",)),
    "sparse_object": (
        None,
        r"f\.npz: L_train must be a dense numeric array; got a pickled Python object "
        r"\(a scipy\.sparse matrix saved with np\.savez\?\); save L_train\.toarray\(\) instead",
        ("L_train must be a dense numeric array", "L_train.toarray()"),
    ),
    "object": (
        None,
        r"f\.npz: L_train must be a dense numeric array; got dtype object of shape \(40, 12\)",
        ("L_train", "dtype object"),
    ),
    "str": (
        None,
        r"f\.npz: L_train must be a real numeric array; got dtype <U\d+ of shape \(40, 12\)",
        ("L_train must be a real numeric array", "<U"),
    ),
    "names_object": (
        None,
        r"f\.npz: names has dtype object; save the names as a string array",
        ("names has dtype object",),
    ),
    "nan": (None, r"f\.npz: L_train has a NaN or infinite value at \[5, 9\]: inf", ("L_train", "[5, 9]: inf")),
    "nan_test": (None, r"f\.npz: L_test has a NaN or infinite value at \[2, 0\]: nan", ("L_test", "[2, 0]: nan")),
    "zero_block": (
        "trace",
        r"f\.npz: L_train: kernel 1 \('b', columns 4:8\) is all zero",
        ("L_train", "kernel 1 ('b', columns 4:8) is all zero", "normalize 'trace'"),
    ),
    "zero_row": (
        "diagonal",
        r"f\.npz: L_train: row 11 of kernel 0 \('a'\) is zero",
        ("L_train", "row 11 of kernel 0 ('a') is zero", "normalize 'diagonal'"),
    ),
}


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(BankError, match=r"nope\.npz: precomputed factor file not found"):
        load_precomputed_factors(tmp_path / "nope.npz")


@pytest.mark.parametrize("case", list(CASES))
def test_file_errors(tmp_path, case):
    normalize, match, _ = CASES[case]
    p = write_case(tmp_path, case)
    with pytest.raises(BankError, match=match) as info:
        load_precomputed_factors(p, normalize=normalize)
    assert "\n" not in str(info.value)


def test_file_roundtrip_and_its_bank(tmp_path):
    p = write_case(tmp_path, "ok")
    pre = load_precomputed_factors(p)
    a = arrays()
    np.testing.assert_array_equal(pre.L_train, a["L_train"])
    assert pre.starts.tolist() == STARTS and pre.names == ["a", "b", "c"] and pre.L_test.shape == (N_TEST, 12)
    fb = pre.bank(normalize="trace")
    np.testing.assert_allclose(fb.trace(), 1.0)
    # the test rows get the training scale: L_test_m / ||L_train_m||_F
    scale = 1.0 / np.linalg.norm(a["L_train"][:, 4:8])
    np.testing.assert_allclose(fb.transform(pre.L_test)[4:8], (a["L_test"][:, 4:8] * scale).T, rtol=1e-14)


def test_memory_is_checked_from_the_headers_before_loading(tmp_path, monkeypatch):
    p = write_case(tmp_path, "ok")
    loaded = []
    real = np.load
    monkeypatch.setattr(np, "load", lambda *a, **k: loaded.append(a) or real(*a, **k))
    with pytest.raises(
        BankError,
        match=r"f\.npz: .*L_train \(40, 12\).*L_test \(10, 12\).*8\.4 KiB.*"
        r"memory budget of 1000 B",
    ) as info:
        load_precomputed_factors(p, memory_budget=1000)
    assert info.value.key == "memory_budget"
    assert loaded == []  # nothing was loaded
    load_precomputed_factors(p, memory_budget=8 * (2 * N * 12 + N_TEST * 12))  # exactly fits


# ---------------------------------------------------------------------------
# Specs and the command line
# ---------------------------------------------------------------------------
def spec_for(
    tmp_path: Path,
    kernels: dict | None = None,
    data: dict | None = None,
    engine: Any = "spicy",
    name: str = "s.yaml",
    **problem: Any,
) -> Path:
    spec = {
        "kernels": {"precomputed_factors": "f.npz", **(kernels or {})},
        "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, **problem},
        "engine": engine,
    }
    if data is not None:
        spec["data"] = data
    p = tmp_path / name
    p.write_text(yaml.safe_dump(spec))
    return p


@pytest.mark.parametrize("case", ["missing_file", *CASES])
def test_cli_validate_names_file_key_and_array(tmp_path, capsys, case):
    normalize = CASES[case][0] if case in CASES else None
    write_case(tmp_path, case)
    p = spec_for(tmp_path, {"normalize": normalize} if normalize else None)
    code, _, err = run_cli(["validate", p], capsys)
    words = CASES[case][2] if case in CASES else ("file not found",)
    assert_user_error(code, err, str(p), "kernels.precomputed_factors", "'f.npz'", *words)


def test_cli_run_exits_2_on_a_bad_file(tmp_path, capsys):
    write_case(tmp_path, "sparse_object")
    p = spec_for(tmp_path)
    code, _, err = run_cli(["run", p, "--quiet"], capsys)
    assert_user_error(code, err, str(p), "kernels.precomputed_factors", "'f.npz'", "L_train.toarray()")
    assert not (tmp_path / "runs").exists()


def test_cli_memory_budget(tmp_path, capsys):
    write_case(tmp_path, "ok")
    p = spec_for(tmp_path, {"memory_budget": "1KB"})
    code, _, err = run_cli(["validate", p], capsys)
    assert_user_error(
        code,
        err,
        str(p),
        "kernels.memory_budget",
        "f.npz",
        "L_train (40, 12)",
        "more than the memory budget of 1000 B",
        "got '1KB'",
    )


@pytest.mark.parametrize(
    "kernels, data, match",
    [
        (
            {"precomputed": "f.npz"},
            None,
            r"kernels\.precomputed_factors: kernels\.precomputed and "
            r"kernels\.precomputed_factors are exclusive; got 'f\.npz'",
        ),
        (
            {"bank": [{"function": "linear"}]},
            None,
            r"kernels\.precomputed_factors: kernels\.bank and "
            r"kernels\.precomputed_factors are exclusive",
        ),
        ({"factor": {"rank": 3}}, None, r"kernels\.factor: precomputed factors are a factor bank as given"),
        ({"sharded": {"scheduler": "tcp://127.0.0.1:1"}}, None, r"kernels\.sharded: precomputed factors"),
        (
            {},
            {"builtin": "sonar"},
            r"data\.builtin: not used with kernels\.precomputed_factors \(the NPZ holds the "
            r"labels\)",
        ),
        ({}, {"test_size": 0.2}, r"data\.test_size: not used: the NPZ has its own L_test"),
        ({"precomputed_factors": "f.txt"}, None, r"kernels\.precomputed_factors: not an NPZ file; got 'f\.txt'"),
    ],
)
def test_spec_errors(tmp_path, kernels, data, match):
    write_case(tmp_path, "ok")
    (tmp_path / "f.txt").write_text("x")
    p = spec_for(tmp_path, kernels, data)
    with pytest.raises(SpecError, match=match) as info:
        load_spec(p).prepare(build=False)
    assert str(info.value).startswith(str(p))


def test_schema_has_the_key():
    from mklkit.spec import json_schema

    bank = json_schema()["properties"]["kernels"]
    assert bank["properties"]["precomputed_factors"]["anyOf"][0] == {"type": "string"}
    assert "precomputed_factors" in bank["x-one-of-keys"]


def test_split_and_normalisation_on_the_training_rows(tmp_path):
    write_case(tmp_path, "ok")
    a = arrays()
    np.savez(tmp_path / "f.npz", L_train=a["L_train"], starts=a["starts"], y_train=a["y_train"])
    p = spec_for(tmp_path, {"normalize": "trace"}, {"test_size": 0.25, "seed": 2})
    prepared = load_spec(p).prepare()
    fb = prepared.problem.bank
    assert prepared.representation == "factor" and prepared.kernel_names == ["k0", "k1", "k2"]
    assert fb.shape == (3, 30, 30) and prepared.data.n_test == 10
    np.testing.assert_allclose(fb.trace(), 1.0)
    # every row of the file is in exactly one part, the test rows scaled by the training rows' norms
    rows = np.vstack([prepared.data.X_train, prepared.data.X_test])
    assert sorted(map(tuple, rows)) == sorted(map(tuple, a["L_train"]))
    scale = 1.0 / np.linalg.norm(prepared.data.X_train[:, 8:12])
    np.testing.assert_allclose(fb.transform(prepared.data.X_test)[8:12], (prepared.data.X_test[:, 8:12] * scale).T)


# ---------------------------------------------------------------------------
# The same problem as the bank of linear kernels on the feature groups
# ---------------------------------------------------------------------------
GROUPS = [list(range(j, min(j + 6, 34))) for j in range(0, 34, 6)]  # ionosphere's 34 columns in 6 groups


@pytest.fixture(scope="module")
def ionosphere_factors(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("iono")
    X, y = load_builtin("ionosphere").X, load_builtin("ionosphere").y
    np.savez(
        d / "f.npz",
        L_train=np.hstack([X[:, g] for g in GROUPS]),
        ranks=np.array([len(g) for g in GROUPS]),
        y_train=y,
        names=np.array([f"g{i}" for i in range(len(GROUPS))]),
    )
    return d


def _solve(path: Path) -> tuple[Any, np.ndarray]:
    prepared = load_spec(path).prepare()
    run = solve_prepared(prepared)
    return run, prepared.test_decision(run.result)


@pytest.mark.parametrize(
    "engine, reference",
    [
        ("bcd", "factor"),
        ("spicy", "array"),
        ("spicy", "factor"),
        ("proximal", "array"),
        ("proximal", "factor"),
        ("auto", "array"),
        ("auto", "factor"),
    ],
)
def test_same_optimum_as_the_built_bank(ionosphere_factors, one_thread, engine, reference):
    d = ionosphere_factors
    tol = 1e-9
    common = {
        "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": 0.01},
        "engine": {"name": engine, "tol": tol},
    }
    given = {
        "data": {"test_size": 0.25, "seed": 1},
        "kernels": {"precomputed_factors": "f.npz", "normalize": "trace"},
        **common,
    }
    built: dict[str, Any] = {
        "data": {"builtin": "ionosphere", "test_size": 0.25, "seed": 1, "standardize": False},
        "kernels": {"bank": [{"function": "linear", "features": GROUPS}], "normalize": "trace"},
        **common,
    }
    if reference == "factor":
        built["kernels"]["factor"] = {"method": "exact"}
    (d / f"given_{engine}.yaml").write_text(yaml.safe_dump(given))
    (d / f"built_{engine}_{reference}.yaml").write_text(yaml.safe_dump(copy.deepcopy(built)))
    rg, fg = _solve(d / f"given_{engine}.yaml")
    rb, fbuilt = _solve(d / f"built_{engine}_{reference}.yaml")
    assert rg.result.converged and rb.result.converged
    assert rg.result.gap <= tol * abs(rg.result.objective) * 1.01
    assert rg.kernel_names == [f"g{i}" for i in range(len(GROUPS))]
    assert abs(rg.result.objective - rb.result.objective) <= 1e-6 * abs(rb.result.objective)
    assert rg.n_train == rb.n_train == 263 and rg.n_test == rb.n_test == 88
    np.testing.assert_allclose(fg, fbuilt, rtol=0, atol=1e-4 * np.abs(fbuilt).max())
    assert rg.metrics["test_accuracy"] == rb.metrics["test_accuracy"] > 0.8  # a model, not a constant
    assert rg.factor == {
        "total_rank": 34,
        "ranks": [6] * 5 + [4],
        "relative_trace_error": 0.0,
        "kernel_relative_trace_error": [0.0] * 6,
    }


def test_sweep_folds_equal_those_of_the_built_bank(ionosphere_factors, one_thread):
    """Cross-validation splits the rows of the factors, normalised on each fold's training rows."""
    from mklkit.sweep import load_sweep, run_sweep

    d = ionosphere_factors
    common = {
        "problem": {"loss": "logistic", "regularizer": {"name": "elasticnet", "lam": 0.5}, "C": [0.01, 0.1]},
        "engine": {"name": "bcd", "tol": 1e-9},
        "cv": {"folds": 3, "seed": 0},
    }
    given = {"data": {"test_size": 0}, "kernels": {"precomputed_factors": "f.npz", "normalize": "trace"}, **common}
    built = {
        "data": {"builtin": "ionosphere", "test_size": 0, "standardize": False},
        "kernels": {
            "bank": [{"function": "linear", "features": GROUPS}],
            "normalize": "trace",
            "factor": {"method": "exact"},
        },
        **common,
    }
    rows = {}
    for name, spec in (("given", given), ("built", built)):
        (d / f"sweep_{name}.yaml").write_text(yaml.safe_dump(spec))
        res = run_sweep(load_sweep(d / f"sweep_{name}.yaml"), d / f"out_{name}")
        rows[name] = {(w["split"], float(w["C"])): w for w in res.rows}
    assert len(rows["given"]) == len(rows["built"]) == 6
    for k, w in rows["built"].items():
        g = rows["given"][k]
        assert float(g["objective"]) == pytest.approx(float(w["objective"]), rel=1e-6)
        assert float(g["val_accuracy"]) == float(w["val_accuracy"])


def test_given_factors_with_C_path_are_not_refined(ionosphere_factors):
    """Factors given in a file have no factorization to continue: ``problem.C: path`` chooses C and
    solves on them as they are (``factor_refinement`` null)."""
    p = ionosphere_factors / "path.yaml"
    p.write_text(
        yaml.safe_dump(
            {
                "kernels": {"precomputed_factors": "f.npz"},
                "data": {"test_size": 0.25},
                "problem": {"loss": "logistic", "regularizer": "l1", "C": "path"},
                "engine": "bcd",
            }
        )
    )
    run = solve_prepared(load_spec(p).prepare())
    assert run.C_selection is not None and run.factor_refinement is None
    assert run.factor["total_rank"] == 34
