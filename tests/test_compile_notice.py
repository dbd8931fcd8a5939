"""The estimators say once per process, visibly, that numba compiles on first use."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys, time, warnings
    import numpy as np
    from mklkit import CompilationWarning
    from mklkit.estimators import MKLClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(40) > 0, 1, -1)
    bank = [{"function": "rbf", "width": [1.0, 3.0]}, {"function": "linear"}]
    times = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a script or notebook shows
        for C in (0.5, 0.2):
            t0 = time.perf_counter()
            MKLClassifier(bank, C=C).fit(X, y)  # the line the warning should point to
            times.append(time.perf_counter() - t0)
    notes = [{"text": str(w.message), "file": w.filename} for w in caught
             if issubclass(w.category, CompilationWarning)]
    print(json.dumps({"notes": notes, "times": times}))
""")


def _run(tmp_path, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    (tmp_path / "fit_twice.py").write_text(SCRIPT)
    r = subprocess.run(
        [sys.executable, str(tmp_path / "fit_twice.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_first_fit_says_once_that_it_compiles(tmp_path):
    cache = tmp_path / "numba-cache"
    cold = _run(tmp_path, cache)  # empty cache: compiles
    assert len(cold["notes"]) == 1, cold
    note = cold["notes"][0]
    assert re.search(r"compiling numba code.*loss 'logistic'.*regularizer 'elasticnet'.*engine 'auto'", note["text"])
    assert "later fits" in note["text"] and "cached on disk" in note["text"]
    assert note["file"].endswith("fit_twice.py")  # points at the user's fit, not at numba
    warm = _run(tmp_path, cache)  # the same cache: loads, says nothing
    assert warm["notes"] == [], warm
