"""Fixtures shared by the test modules of ``tests/``."""
from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    """Small problems: thread start-up (numba, BLAS) would dominate, so use one thread."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    numba.set_num_threads(old)


@pytest.fixture
def cli_error(capsys):
    """``cli_error(argv)``: run ``mklkit`` in-process with ``argv``; assert exit code 2 with one line on
    stderr and no traceback; return that line."""
    from mklkit.cli import main

    def run(argv):
        code = main([str(a) for a in argv])
        _, err = capsys.readouterr()
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        return lines[0]

    return run


@pytest.fixture(scope="session")
def sonar_xy():
    """Sonar's features and labels as loaded (float64 array, labels +-1)."""
    import numpy as np

    from mklkit.data import load_builtin

    ds = load_builtin("sonar")
    return np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y)


@pytest.fixture(scope="module")
def wine():
    """scikit-learn's wine (3 classes), split 70/30, stratified, seed 0: X_train, X_test, y_train, y_test."""
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split

    X, y = load_wine(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
