"""``mklkit.api.run`` says once per process, visibly, that numba compiles; the command line says it once."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml


SPEC = {
    "data": {"builtin": "sonar", "test_size": 0.25, "seed": 0},
    "kernels": {"bank": [{"function": "rbf", "width": [1.0, 5.0]}, {"function": "linear"}]},
    "problem": {"loss": "logistic", "regularizer": "l1", "C": 0.1},
    "engine": {"name": "spicy", "tol": 1.0e-4},
}


def _spec(tmp_path: Path, sweep: bool = False) -> Path:
    spec = dict(SPEC)
    if sweep:
        spec = {**spec, "problem": {**spec["problem"], "C": [0.1]}, "cv": {"folds": 2, "seed": 0}}
    p = tmp_path / ("sweep.yaml" if sweep else "run.yaml")
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


#: A fresh process (no warning shown yet) in which every solve compiles: a numba:compile event, as
#: on an empty cache.  ``api`` runs the spec twice and prints the CompilationWarnings it saw;
#: ``cli ARGS`` is the command line.
COLD = textwrap.dedent("""
    import json, sys, warnings
    from contextlib import contextmanager

    from numba.core import event

    import mklkit.compilation as compilation
    from mklkit import CompilationWarning

    real = compilation.announce_compilation

    @contextmanager
    def compiling(what, warn=False):
        with real(what, warn=warn):
            event.start_event("numba:compile")
            event.end_event("numba:compile")
            yield

    compilation.announce_compilation = compiling
    if sys.argv[1] == "cli":
        from mklkit.cli import main
        sys.exit(main(sys.argv[2:]))
    from mklkit.api import run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        run(sys.argv[2])
        run(sys.argv[2])
    print(json.dumps([{"text": str(w.message), "file": w.filename} for w in caught
                      if issubclass(w.category, CompilationWarning)]))
""")


def _cold(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "cold.py"
    script.write_text(COLD)
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=900, cwd=tmp_path
    )


def test_api_run_warns_once_per_process(tmp_path):
    r = _cold(tmp_path, "api", str(_spec(tmp_path)))
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(notes) == 1, notes
    assert re.search(r"compiling numba code.*loss 'logistic'.*regularizer 'l1'.*engine 'spicy'", notes[0]["text"])
    assert notes[0]["file"].endswith("cold.py")  # points at the caller of run, not into mklkit


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_command_line_says_it_in_one_line(tmp_path, command):
    # a sweep refits its best configuration with mklkit.api.run, which warns; the line is said once
    spec = _spec(tmp_path, sweep=command == "sweep")
    r = _cold(tmp_path, "cli", command, str(spec), "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    err = r.stderr
    lines = [ln for ln in err.splitlines() if "compiling numba code" in ln]
    assert lines and all(ln.startswith("mklkit: compiling numba code") for ln in lines), err
    assert "warning: mklkit: compiling" not in err
    if command == "run":
        assert len(lines) == 1, err


SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    from mklkit import CompilationWarning
    from mklkit.api import run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a script or notebook shows
        for _ in range(2):
            run(sys.argv[1])  # the line the warning should point to
    notes = [{"text": str(w.message), "file": w.filename} for w in caught
             if issubclass(w.category, CompilationWarning)]
    print(json.dumps(notes))
""")


def _run_script(tmp_path: Path, cache: Path) -> list[dict]:
    script = tmp_path / "run_twice.py"
    script.write_text(SCRIPT)
    r = subprocess.run(
        [sys.executable, str(script), str(_spec(tmp_path))],
        capture_output=True,
        text=True,
        env={**os.environ, "NUMBA_CACHE_DIR": str(cache)},
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_api_run_on_an_empty_cache_says_once_that_it_compiles(tmp_path):
    cache = tmp_path / "numba-cache"
    cold_notes = _run_script(tmp_path, cache)
    assert len(cold_notes) == 1, cold_notes
    assert re.search(r"compiling numba code.*loss 'logistic'.*regularizer 'l1'.*engine 'spicy'", cold_notes[0]["text"])
    assert cold_notes[0]["file"].endswith("run_twice.py")
    assert _run_script(tmp_path, cache) == []  # loaded from the cache: nothing to say
