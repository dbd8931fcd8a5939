"""Builtin data sets, file loaders, splitting and standardisation."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from mklkit.data import DataError, Dataset, Standardizer, available, load_builtin, load_file, train_test_split

# rows, features, +1, -1 — the table of mklkit/data/README.md
README_TABLE = {
    "sonar": (208, 60, 111, 97),
    "ionosphere": (351, 34, 225, 126),
    "liver": (345, 6, 145, 200),
    "pima": (768, 8, 268, 500),
    "wpbc": (194, 33, 46, 148),
    "wdbc": (569, 30, 212, 357),
    "wbc": (683, 9, 239, 444),
    "australian": (690, 14, 307, 383),
    "ringnorm": (7400, 20, 3664, 3736),
    "twonorm": (7400, 20, 3703, 3697),
    "waveform": (5000, 21, 1657, 3343),
    "splice": (3175, 60, 1527, 1648),
    "a9a": (32561, 123, 7841, 24720),
    "a9a_test": (16281, 123, 3846, 12435),
    "w8a": (49749, 300, 1479, 48270),
}


def test_available_lists_all_builtins():
    assert available() == list(README_TABLE)


@pytest.mark.parametrize("name", list(README_TABLE))
def test_builtin_counts_match_readme(name):
    rows, d, pos, neg = README_TABLE[name]
    ds = load_builtin(name)
    assert isinstance(ds, Dataset) and ds.name == name and ds.source == name
    assert ds.X.shape == (rows, d) and ds.y.shape == (rows,)
    assert len(ds.feature_names) == d
    assert ds.y.dtype == np.float64
    assert int(np.sum(ds.y == 1)) == pos and int(np.sum(ds.y == -1)) == neg
    if name in ("a9a", "a9a_test", "w8a"):
        assert sp.isspmatrix_csr(ds.X) and ds.X.dtype == np.float64
        assert set(np.unique(ds.X.data)) == {1.0}  # binary features
    else:
        assert isinstance(ds.X, np.ndarray) and ds.X.dtype == np.float64 and ds.X.flags.c_contiguous


def test_builtin_matches_plain_numpy_read():
    from importlib import resources

    path = resources.files("mklkit.data").joinpath("liver.csv.gz")
    with resources.as_file(path) as real:
        a = np.loadtxt(real, delimiter=",", skiprows=1)
    ds = load_builtin("liver")
    np.testing.assert_array_equal(ds.X, a[:, :-1])
    np.testing.assert_array_equal(ds.y, a[:, -1])
    assert ds.feature_names == ["mcv", "alkphos", "sgpt", "sgot", "gammagt", "drinks"]


def test_unknown_builtin():
    with pytest.raises(
        DataError, match=r"unknown builtin data set 'sonr'.*did you mean 'sonar'.*available: sonar, ionosphere"
    ):
        load_builtin("sonr")
    assert issubclass(DataError, ValueError)


# ---------------------------------------------------------------------------
# CSV
# ---------------------------------------------------------------------------
def _write(path, text, gz=False):
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


CSV = "a,b,label,c\n1,2,1,3.5\n4,5,-1,6\n7,8,1,9e-1\n"


def test_csv_default_and_named_target(tmp_path):
    path = _write(tmp_path / "t.csv", CSV)
    ds = load_file(path)
    assert ds.feature_names == ["a", "b", "label"] and ds.name == "t" and ds.source == str(path)
    np.testing.assert_array_equal(ds.y, [3.5, 6.0, 0.9])
    ds = load_file(path, target="label")
    assert ds.feature_names == ["a", "b", "c"]
    np.testing.assert_array_equal(ds.X, [[1, 2, 3.5], [4, 5, 6], [7, 8, 0.9]])
    np.testing.assert_array_equal(ds.y, [1, -1, 1])
    gz = _write(tmp_path / "t.csv.gz", CSV, gz=True)
    np.testing.assert_array_equal(load_file(gz, target=2).X, ds.X)


@pytest.mark.parametrize(
    "text, kwargs, match",
    [
        (
            CSV,
            {"target": "lable"},
            r"t\.csv: no target column 'lable' \(did you mean 'label'\?\); columns: a, b, label, c",
        ),
        (CSV, {"target": 7}, r"t\.csv: target column index 7 is out of range; the file has 4 columns"),
        ("a,b\n1,2\n3,x\n", {}, r"t\.csv: row 2 \(line 3\), column 'b': non-numeric value 'x'"),
        ("a,b\n1,2\n,4\n", {}, r"t\.csv: row 2 \(line 3\), column 'a': an empty cell"),
        ("a,b\n1,nan\n", {}, r"t\.csv: row 1 \(line 2\), column 'b': value nan; NaN and infinite"),
        ("a,b\n1,2\n3,-inf\n", {}, r"t\.csv: row 2 \(line 3\), column 'b': value -inf"),
        ("a,b\n1,2\n3\n", {}, r"t\.csv: row 2 \(line 3\) has 1 cells; the header has 2"),
        ("a,b\n", {}, r"t\.csv: no data rows"),
        (CSV, {"n_features": 3}, r"n_features is only used for LIBSVM files"),
    ],
)
def test_csv_errors(tmp_path, text, kwargs, match):
    path = _write(tmp_path / "t.csv", text)
    with pytest.raises(DataError, match=match):
        load_file(path, **kwargs)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"nothere\.csv: data file not found"):
        load_file(tmp_path / "nothere.csv")
    path = _write(tmp_path / "t.dat", CSV)
    with pytest.raises(DataError, match=r"t\.dat: cannot tell the file format"):
        load_file(path)
    assert load_file(path, fmt="csv").n_samples == 3
    with pytest.raises(DataError, match=r"fmt.*'csv', 'npz', 'libsvm'.*got 'xls'"):
        load_file(path, fmt="xls")


# ---------------------------------------------------------------------------
# NPZ
# ---------------------------------------------------------------------------
def test_npz(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((6, 3)), np.array([1, -1, 1, 1, -1, -1])
    np.savez(tmp_path / "d.npz", X=X, y=y, feature_names=np.array(["p", "q", "r"]))
    ds = load_file(tmp_path / "d.npz")
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.feature_names == ["p", "q", "r"] and ds.y.dtype == np.float64
    np.savez(tmp_path / "m.npz", X=X)
    with pytest.raises(DataError, match=r"m\.npz: missing array 'y'; the file has: X"):
        load_file(tmp_path / "m.npz")
    np.savez(tmp_path / "e.npz", Z=X)
    with pytest.raises(DataError, match=r"missing arrays 'X', 'y'"):
        load_file(tmp_path / "e.npz")
    Xn = X.copy()
    Xn[4, 1] = np.inf
    np.savez(tmp_path / "n.npz", X=Xn, y=y)
    with pytest.raises(DataError, match=r"n\.npz: row 5, column 'x1 \(X column 1\)': value inf"):
        load_file(tmp_path / "n.npz")
    np.savez(tmp_path / "l.npz", X=X, y=y[:4])
    with pytest.raises(DataError, match=r"'X' has 6 rows but 'y' has 4 entries"):
        load_file(tmp_path / "l.npz")


# ---------------------------------------------------------------------------
# LIBSVM
# ---------------------------------------------------------------------------
LIBSVM = "+1 1:0.5 3:2\n-1 2:1\n+1 1:-1 4:3.25\n"
LIBSVM_DENSE = np.array([[0.5, 0, 2, 0, 0], [0, 1, 0, 0, 0], [-1, 0, 0, 3.25, 0]])


@pytest.mark.parametrize("name, gz", [("s.libsvm", False), ("s.svm.gz", True), ("s.txt", False)])
def test_libsvm(tmp_path, name, gz):
    path = _write(tmp_path / name, LIBSVM, gz=gz)
    ds = load_file(path, n_features=5)
    assert sp.isspmatrix_csr(ds.X)
    np.testing.assert_array_equal(ds.X.toarray(), LIBSVM_DENSE)
    np.testing.assert_array_equal(ds.y, [1, -1, 1])
    assert ds.feature_names == ["x0", "x1", "x2", "x3", "x4"]
    assert load_file(path).n_features == 4


def test_libsvm_errors(tmp_path):
    path = _write(tmp_path / "s.libsvm", "+1 1:0.5 3:nan\n")
    with pytest.raises(DataError, match=r"s\.libsvm: row 1, column x2 \(index 3\): value nan"):
        load_file(path)
    path = _write(tmp_path / "b.libsvm", LIBSVM)
    with pytest.raises(DataError, match=r"b\.libsvm: cannot read as LIBSVM"):
        load_file(path, n_features=2)
    with pytest.raises(DataError, match=r"target is only used for CSV files"):
        load_file(path, target="y")


# ---------------------------------------------------------------------------
# Split and standardise
# ---------------------------------------------------------------------------
def test_stratified_split_keeps_proportions():
    ds = load_builtin("pima")  # 268 / 500
    train, test = train_test_split(ds, test_size=0.2, seed=3, stratify=True)
    assert train.n_samples + test.n_samples == ds.n_samples and test.n_samples == 154
    for part in (train, test):
        frac = np.mean(part.y == 1)
        assert abs(frac - 268 / 768) <= 1.0 / part.n_samples
    # the parts are disjoint and cover the data (rows identified by content + label)
    rows = {tuple(r) for r in np.column_stack([ds.X, ds.y])}
    got = [tuple(r) for p in (train, test) for r in np.column_stack([p.X, p.y])]
    assert set(got) == rows and len(got) == ds.n_samples
    again, _ = train_test_split(ds, test_size=0.2, seed=3)
    np.testing.assert_array_equal(again.X, train.X)
    other, _ = train_test_split(ds, test_size=0.2, seed=4)
    assert not np.array_equal(other.X, train.X)
    assert train.name == "pima[train]" and test.name == "pima[test]"


@pytest.mark.parametrize("name", ["a9a", "w8a"])
def test_sparse_builtins_work_with_scikit_learn_svc(name):
    # libsvm-based estimators accept only 32-bit index arrays
    from sklearn.svm import SVC

    ds = load_builtin(name)
    assert ds.X.indices.dtype == np.int32 and ds.X.indptr.dtype == np.int32
    train, test = train_test_split(ds, test_size=0.5, seed=0)
    part, _ = train_test_split(train, test_size=train.n_samples - 300, seed=0)
    clf = SVC(kernel="rbf", gamma=0.05).fit(part.X, part.y)
    X, y = test.X[:2000], test.y[:2000]
    assert clf.score(X, y) >= max(np.mean(y == 1), np.mean(y == -1))  # at least the majority


def test_split_sparse_and_errors():
    ds = load_builtin("a9a_test")
    train, test = train_test_split(ds, test_size=1000, seed=0)
    assert sp.isspmatrix_csr(test.X) and test.n_samples == 1000
    small = Dataset(X=np.zeros((5, 2)), y=np.array([1.0, 1, 1, 1, -1]), feature_names=["a", "b"], name="s")
    with pytest.raises(DataError, match=r"s: cannot stratify: class -1 has 1 row"):
        train_test_split(small, test_size=0.4, seed=0)
    tr, te = train_test_split(small, test_size=0.4, seed=0, stratify=False)
    assert tr.n_samples == 3 and te.n_samples == 2
    with pytest.raises(DataError, match=r"test_size must be a fraction in \(0, 1\)"):
        train_test_split(small, test_size=1.5)


def test_standardizer_fits_on_train_only():
    ds = load_builtin("ionosphere")  # x2 is constant 0
    train, test = train_test_split(ds, test_size=0.25, seed=0)
    sc = Standardizer().fit(train)
    Xtr, Xte = sc.transform(train.X), sc.transform(test.X)
    assert np.all(np.isfinite(Xtr)) and np.all(np.isfinite(Xte))
    mu, sd = train.X.mean(axis=0), train.X.std(axis=0)
    live = sd > 0
    assert not live[1] and live.sum() == 33
    sd = np.where(live, sd, 1.0)
    np.testing.assert_allclose(Xtr[:, live], ((train.X - mu) / sd)[:, live], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Xte[:, live], ((test.X - mu) / sd)[:, live], rtol=1e-12, atol=1e-12)
    assert np.all(Xtr[:, 1] == 0.0) and np.all(Xte[:, 1] == 0.0)
    assert isinstance(sc.transform(test), Dataset)
    with pytest.raises(DataError, match=r"X has 3 columns; it was fitted on 34"):
        sc.transform(np.zeros((2, 3)))
    with pytest.raises(DataError, match=r"call fit\(\) first"):
        Standardizer().transform(np.zeros((2, 3)))


def test_standardizer_sparse_scales_without_centring():
    X = sp.random(50, 6, density=0.3, format="csr", random_state=1)
    X = sp.hstack([X, sp.csr_matrix((50, 1))], format="csr")  # an all-zero column
    out = Standardizer().fit_transform(X)
    assert sp.isspmatrix_csr(out)
    dense = X.toarray()
    sd = dense.std(axis=0)
    sd[sd == 0] = 1.0
    np.testing.assert_allclose(out.toarray(), dense / sd, rtol=1e-12)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_standardizer_weights_are_repeated_rows(sparse):
    """Integer weights give the statistics of the repeated rows (zero: the row is dropped),
    dense and sparse; a column constant on the rows that count gets scale 1."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 4)) * [1.0, 5.0, 0.1, 1.0] + [0.0, 3.0, -2.0, 0.0]
    w = rng.integers(0, 4, 30).astype(float)
    X[w > 0, 3] = 7.0  # constant where the weight is not 0
    rep = X.repeat(w.astype(int), axis=0)
    make = sp.csr_matrix if sparse else np.asarray
    a = Standardizer().fit(make(X), sample_weight=w)
    b = Standardizer().fit(make(rep))
    np.testing.assert_allclose(a.scale_, b.scale_, rtol=1e-12)
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=1e-12, atol=1e-14)
    assert a.scale_[3] == 1.0 and a.sparse_ == sparse
    assert np.all(a.mean_ == 0.0) if sparse else a.mean_[3] == pytest.approx(7.0, rel=1e-15)
    out = a.transform(make(X))
    out = out.toarray() if sparse else out
    mu = 0.0 if sparse else rep[:, :3].mean(axis=0)
    np.testing.assert_allclose(out[:, :3], (X[:, :3] - mu) / rep[:, :3].std(axis=0), rtol=1e-10, atol=1e-12)
