"""The note that numba is compiling: once, on a compilation, never on a cache load."""

from __future__ import annotations

import logging
import re
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from numba import njit

from mklkit.compilation import announce_compilation

SPECS = Path(__file__).resolve().parent.parent / "specs"
NOTE = "compiling numba code for"


def _fresh_functions():
    @njit(cache=False)
    def inner(x):
        return 2.0 * x

    @njit(cache=False)
    def outer(x):
        return inner(x) + 1.0

    return outer


def test_one_record_when_numba_compiles(caplog):
    outer = _fresh_functions()
    with caplog.at_level(logging.INFO, logger="mklkit.compilation"):
        with announce_compilation("the test functions"):
            assert outer(1.0) == 3.0  # compiles outer and, inside it, inner
            assert outer(2) == 5.0  # a second signature: compiled again, said once
    assert [r.getMessage() for r in caplog.records] == [
        "compiling numba code for the test functions (first use, cached afterwards)"
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mklkit.compilation"):
        with announce_compilation("the test functions"):
            assert outer(3.0) == 7.0  # compiled already in this process
    assert caplog.records == []


def test_nothing_is_logged_when_nobody_listens(caplog):
    outer = _fresh_functions()
    with caplog.at_level(logging.WARNING, logger="mklkit.compilation"):
        with announce_compilation("the test functions"):
            outer(1.0)
    assert caplog.records == []


def test_a_cache_load_is_not_a_compilation(tmp_path):
    # two processes share an on-disk cache: the first compiles, the second loads
    (tmp_path / "cached_mod.py").write_text(
        textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def twice(x):
            return 2.0 * x
    """)
    )
    script = textwrap.dedent("""
        import logging, sys
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stdout)
        from mklkit.compilation import announce_compilation
        import cached_mod
        with announce_compilation("twice"):
            print(cached_mod.twice(2.0))
    """)
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    outs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
        )
        for _ in range(2)
    ]
    for r in outs:
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == "4.0"
    assert re.search(r"mklkit\.compilation: compiling numba code for twice\b", outs[0].stdout), outs[0].stdout
    assert NOTE not in outs[1].stdout
    assert any((tmp_path / "cache").rglob("*.nbi"))


@pytest.mark.slow
def test_first_run_says_it_compiles_and_the_second_does_not(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "mklkit.cli",
                "run",
                str(SPECS / "quickstart.yaml"),
                "--out",
                str(tmp_path / f"run{i}"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        for i in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first = [ln for ln in runs[0].stderr.splitlines() if NOTE in ln]
    assert first == [
        "mklkit: compiling numba code for loss 'logistic', regularizer 'elasticnet' and "
        "engine 'spicy' (first use, cached afterwards)"
    ]
    assert NOTE not in runs[1].stderr


@pytest.mark.slow
def test_the_jitted_loops_compile_once_per_function(tmp_path):
    """A bcd solve (smooth and smoothed non-smooth losses, both methods) on an empty cache compiles
    each jitted function of ``mklkit._jit`` for one signature: constant flags passed between them
    are runtime values (``_jit.envelope.FLAGS``), not literals that numba would compile once each."""
    script = textwrap.dedent("""
        import gc
        from numba.core.registry import CPUDispatcher
        from mklkit.components.losses import Hinge, Logistic
        from mklkit.components.elasticnet import L1
        from mklkit.engines.bcd import BCD
        from mklkit.testing.engines import engine_problems
        for kp in engine_problems(BCD(), losses=[Logistic(), Hinge()], regularizers=[L1()]):
            for method in ("newton", "bcd"):
                BCD(tol=1e-4, method=method).solve(kp.problem)
        seen = [d for d in gc.get_objects() if isinstance(d, CPUDispatcher)
                and d.py_func.__module__.startswith("mklkit._jit") and d.signatures]
        for d in seen:
            if len(d.signatures) > 1:
                print("MULTI", d.py_func.__module__, d.py_func.__name__, d.signatures)
        print("COMPILED", len(seen))
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split("COMPILED")[-1]) >= 10, done.stdout
    assert "MULTI" not in done.stdout, done.stdout
