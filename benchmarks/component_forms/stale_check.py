"""``python -m benchmarks.component_forms.stale_check``: does a cached loop notice an edit of a component it
inlines?  Copies this folder to a temporary folder, fits the (b) plugin loss, halves its
derivative in the source, and fits again on the same cache: with ``PROTO_NO_SRC_HASH=1``
(plain structref) and without (the source-hash field of ``b_structref.compiled``)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def plugin_objective(root, cache, env_extra):
    env = dict(os.environ, PYTHONPATH=root, NUMBA_CACHE_DIR=cache, **env_extra)
    p = subprocess.run(
        [sys.executable, "-m", "benchmarks.component_forms.fit", "b", "plugin"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(p.stdout.strip().splitlines()[-1])["plugin"]["f"]


for label, extra in (("plain structref", {"PROTO_NO_SRC_HASH": "1"}), ("source-hash field", {})):
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(
            HERE,
            os.path.join(tmp, "benchmarks", "component_forms"),
            ignore=shutil.ignore_patterns("__pycache__", "results.json"),
        )
        cache = os.path.join(tmp, "cache")
        before = plugin_objective(tmp, cache, extra)
        src = os.path.join(tmp, "benchmarks", "component_forms", "b_plugin.py")
        text = open(src).read()
        old = "0.0), 1.0)\n"
        assert old in text
        open(src, "w").write(text.replace(old, "0.0), 1.0) * 0.5\n"))
        after = plugin_objective(tmp, cache, extra)
        fresh = plugin_objective(tmp, os.path.join(tmp, "cache2"), extra)
        print(
            f"{label}: before edit {before!r}, after edit (same cache) {after!r}, "
            f"after edit (empty cache) {fresh!r} -> {'STALE' if after != fresh else 'ok'}"
        )
