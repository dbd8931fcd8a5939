"""Run the measurements: ``python -m benchmarks.component_forms.bench [REPS] [CANDS...]``; writes
``benchmarks/component_forms/results.json`` (every run) and prints the table of medians.

Per candidate and repetition, each in a fresh process:
  cold    ``fit`` with an empty cache (first-use compile + the fit)
  warm    ``fit`` again, with NUMBA_DEBUG_CACHE=1 (cache loads/saves counted)
  all     the four built-in pairs, empty cache (compile for every pair)
  plugin  on a copy of the warm cache: the built-in pair, then a plugin loss, then the
          built-in pair again (does the plugin recompile anything for the built-ins?)
  plugin2 the same again on that cache (is the plugin's compiled code reused?)
  bench   per-epoch time (median of 7 fits of 50 epochs), warm cache
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable
BASE = "/tmp/proto_cache"


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cand, mode, cache, debug=False):
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=cache)
    env.pop("NUMBA_DEBUG_CACHE", None)
    if debug:
        env["NUMBA_DEBUG_CACHE"] = "1"
    la = load()
    t = time.perf_counter()
    p = subprocess.run(
        [PY, "-m", "benchmarks.component_forms.fit", cand, mode], env=env, capture_output=True, text=True, cwd=ROOT
    )
    wall = time.perf_counter() - t
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    rec = json.loads(lines[-1])
    rec["wall"] = wall
    rec["load"] = la
    rec["cache_loaded"] = sum("data loaded" in ln for ln in lines)
    rec["cache_saved"] = sum("data saved" in ln for ln in lines)
    rec["warnings"] = sorted({ln.strip()[:160] for ln in p.stderr.splitlines() if "Warning" in ln})
    return rec


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cands = sys.argv[2:] or ["a", "b", "c", "d", "ds"]
    path = os.path.join(HERE, "results.json")
    results = json.load(open(path)) if os.path.exists(path) else []
    for rep in range(reps):
        for cand in cands:
            c = f"{BASE}/{cand}_{rep}"
            shutil.rmtree(c, ignore_errors=True)
            row = {"cand": cand, "rep": rep}
            row["cold"] = run(cand, "fit", c)
            row["warm"] = run(cand, "fit", c, debug=True)
            cp = c + "_plugin"
            shutil.rmtree(cp, ignore_errors=True)
            shutil.copytree(c, cp)
            row["plugin"] = run(cand, "plugin", cp, debug=True)
            row["plugin2"] = run(cand, "plugin", cp, debug=True)
            row["bench"] = run(cand, "bench", c)
            ca = c + "_all"
            shutil.rmtree(ca, ignore_errors=True)
            row["all"] = run(cand, "all", ca)
            results.append(row)
            json.dump(results, open(path, "w"), indent=1)
            print(cand, rep, "done", flush=True)
    table(results)


def med(xs):
    return float(np.median(xs)) if xs else float("nan")


def table(results):
    cands = [c for c in ("a", "b", "c", "d", "ds") if any(r["cand"] == c for r in results)]
    print("| | " + " | ".join(cands) + " |")
    print("|---|" + "---:|" * len(cands))
    rows = [
        ("(i) cold process, empty cache: wall s", lambda r: r["cold"]["wall"]),
        ("(i) of which import (+ explicit-signature compile) s", lambda r: r["cold"]["t_import"]),
        ("(i) of which make components s", lambda r: r["cold"]["fit"]["make"]),
        ("(i) of which first epoch (compile) s", lambda r: r["cold"]["fit"]["first"]),
        ("(i) all 4 built-in pairs, empty cache: wall s", lambda r: r["all"]["wall"]),
        ("(ii) cold process, warm cache: wall s", lambda r: r["warm"]["wall"]),
        ("(ii) of which import s", lambda r: r["warm"]["t_import"]),
        ("(ii) of which make components s", lambda r: r["warm"]["fit"]["make"]),
        ("(ii) of which first epoch s", lambda r: r["warm"]["fit"]["first"]),
        ("(ii) of which 49 epochs s", lambda r: r["warm"]["fit"]["rest"]),
        ("(iii) per epoch ms (median of 7 x 50)", lambda r: 1e3 * r["bench"]["epoch_s"]),
        (
            "(iv) plugin: make + first epoch s (1st process)",
            lambda r: r["plugin"]["plugin_make"] + r["plugin"]["plugin"]["make"] + r["plugin"]["plugin"]["first"],
        ),
        ("(iv) plugin: new loop signatures", lambda r: r["plugin"]["plugin_new_signatures"]),
        ("(iv) built-in pair after plugin: new signatures", lambda r: r["plugin"]["again_new_signatures"]),
        ("(iv) built-in pair after plugin: first epoch s", lambda r: r["plugin"]["again"]["first"]),
        (
            "(iv) plugin: make + first epoch s (2nd process)",
            lambda r: r["plugin2"]["plugin_make"] + r["plugin2"]["plugin"]["make"] + r["plugin2"]["plugin"]["first"],
        ),
        (
            "(v) warm process: cache entries loaded / saved",
            lambda r: f"{r['warm']['cache_loaded']}/{r['warm']['cache_saved']}",
        ),
        (
            "(v) plugin 2nd process: loaded / saved",
            lambda r: f"{r['plugin2']['cache_loaded']}/{r['plugin2']['cache_saved']}",
        ),
        ("objective after 50 epochs", lambda r: repr(r["warm"]["fit"]["f"])),
        (
            "load average (min-max over the runs)",
            lambda r: (
                min(v["load"] for k, v in r.items() if isinstance(v, dict)),
                max(v["load"] for k, v in r.items() if isinstance(v, dict)),
            ),
        ),
    ]
    for name, fn in rows:
        cells = []
        for c in cands:
            vals = [fn(r) for r in results if r["cand"] == c]
            if isinstance(vals[0], tuple):
                cells.append(f"{min(v[0] for v in vals):.1f}-{max(v[1] for v in vals):.1f}")
            elif isinstance(vals[0], str):
                cells.append(vals[0] if len(set(vals)) == 1 else ",".join(sorted(set(vals))))
            else:
                cells.append(f"{med(vals):.3g}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "table":
        table(json.load(open(os.path.join(HERE, "results.json"))))
    else:
        main()
