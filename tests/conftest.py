"""Fixtures shared by the test modules of ``tests/``."""

from __future__ import annotations

import contextlib
import os

import pytest


def _compile_bcd():
    from mklkit.engines.bcd import BCD
    from mklkit.testing import check_engine

    check_engine(BCD(tol=1e-7), max_problems=2, reference="none")


def _compile_the_others():
    from mklkit.engines.dual_cd import DualCD
    from mklkit.engines.proximal import Proximal
    from mklkit.engines.spicy import Spicy
    from mklkit.testing import check_engine

    engines = [Spicy(tol=1e-7), Spicy(tol=1e-6, method="iterative"), Proximal(tol=1e-6), DualCD(tol=1e-6)]
    try:
        import mklkit_smo  # its module compiles its explicitly typed loops on import
    except ImportError:
        pass
    else:
        engines += [mklkit_smo.SmoMKL(tol=1e-7), mklkit_smo.SkmSMO(tol=1e-5)]
    for engine in engines:
        check_engine(engine, max_problems=2, reference="none")


#: The engines' jitted loops in two shares of about equal compile time (bcd's alone
#: is about half of it).
_COMPILE_SHARES = (_compile_bcd, _compile_the_others)


def compile_share(k: int) -> None:
    """Compile (or load from numba's cache) share ``k`` of the engines' jitted loops."""
    _COMPILE_SHARES[k]()


def _precompile() -> None:
    """Before pytest-xdist starts its workers for the whole suite: the engines' jitted loops
    compiled into numba's on-disk cache, one share per core at once.

    On an empty cache (a fresh clone) every worker would otherwise compile what it
    meets, and some modules compile their explicitly typed loops when imported, which
    every worker does while collecting: the same minutes of compilation in each
    worker.  Here each loop is compiled once, in a process of its own, and the workers
    load it.  With a warm cache this costs the two processes' start (a few seconds).
    A share that fails is left to the tests to report.
    """
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    code = f"import sys; sys.path.insert(0, {here!r}); import conftest; conftest.compile_share(%d)"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code % k],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(len(_COMPILE_SHARES))
    ]
    try:
        procs[0].wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # an empty cache: say why nothing happens for a while
        sys.stderr.write(
            "tests/conftest.py: compiling the engines' jitted loops into numba's cache "
            f"({len(procs)} processes; a minute or two after a fresh clone)\n"
        )
    for proc in procs:
        proc.wait()


#: Threads of numba and BLAS before a worker divides the cores (restored by ``machine_threads``).
_MACHINE_THREADS: dict[str, int] = {}


def pytest_configure(config):
    """With pytest-xdist, each worker uses its share of the cores (numba and BLAS threads).

    Two workers on two cores, each running numba's and BLAS's thread pools on every
    core, oversubscribe the machine, worst when other processes keep it busy (as
    scikit-learn's test configuration does for OpenMP and BLAS).  Tests of
    multi-threaded code paths ask for the ``machine_threads`` fixture.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER", "").startswith("gw"):
        # the controller of a parallel run of the whole suite (the paths pytest's testpaths)
        numprocesses = getattr(config.option, "numprocesses", None) or 0
        whole = getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS
        if (numprocesses == "auto" or int(numprocesses) >= 2) and whole and not config.option.collectonly:
            _precompile()
        return
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if count < 2:
        return
    import numba
    from threadpoolctl import threadpool_info, threadpool_limits

    share = max(1, (os.cpu_count() or 1) // count)
    _MACHINE_THREADS["numba"] = numba.get_num_threads()
    _MACHINE_THREADS["blas"] = max((p["num_threads"] for p in threadpool_info()), default=1)
    numba.set_num_threads(min(share, numba.config.NUMBA_NUM_THREADS))
    threadpool_limits(share)


@contextlib.contextmanager
def _threads(numba_threads: int, blas_threads: int):
    """numba's and BLAS's thread counts for the ``with`` block, restored after."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(numba_threads)
    with threadpool_limits(limits=blas_threads):
        yield
    numba.set_num_threads(old)


@pytest.fixture
def machine_threads():
    """Every core for numba and BLAS during the test (a worker of pytest-xdist holds a share)."""
    if not _MACHINE_THREADS:
        yield
        return
    with _threads(_MACHINE_THREADS["numba"], _MACHINE_THREADS["blas"]):
        yield


@pytest.fixture
def one_thread():
    """Small problems: thread start-up (numba, BLAS) would dominate, so use one thread."""
    with _threads(1, 1):
        yield


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


@pytest.fixture
def random_codes():
    """``random_codes(n, L, seed, alphabet=4)``: n random integer-coded sequences of lengths 1..L (codes
    ``0..alphabet-1``, padded with -1 to L), for the string kernels' tests."""

    import numpy as np

    def make(n: int, L: int, seed: int, alphabet: int = 4) -> np.ndarray:
        rng = np.random.default_rng(seed)
        X = rng.integers(0, alphabet, size=(n, L)).astype(float)
        for i, length in enumerate(rng.integers(1, L + 1, size=n)):
            X[i, length:] = -1.0
        return X

    return make
