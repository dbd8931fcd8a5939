"""``python -m benchmarks.component_forms.report``: the table of DESIGN.md from ``results.json`` (bench.py) and
``results_epoch.jsonl`` (interleave.sh), medians over the runs."""

import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
CANDS = ("a", "b", "c", "d", "ds")
res = json.load(open(os.path.join(HERE, "results.json")))
ep = [json.loads(ln) for ln in open(os.path.join(HERE, "results_epoch.jsonl"))]
LOW = os.path.join(HERE, "results_epoch_lowload.jsonl")
low = [json.loads(ln) for ln in open(LOW)] if os.path.exists(LOW) else []


def med(c, fn):
    return statistics.median(fn(r) for r in res if r["cand"] == c)


def emed(c, what, key, scale=1.0, rows=None):
    rows = ep if rows is None else rows
    return statistics.median(r[key] * scale for r in rows if r["cand"] == c and r["what"] == what)


rows = (
    [
        ("(i) fresh process, empty cache: whole script, s", lambda c: med(c, lambda r: r["cold"]["wall"])),
        (
            "(i) &nbsp; of which import (explicit-signature loops compile here), s",
            lambda c: med(c, lambda r: r["cold"]["t_import"]),
        ),
        ("(i) &nbsp; of which making the components, s", lambda c: med(c, lambda r: r["cold"]["fit"]["make"])),
        ("(i) &nbsp; of which first epoch (loop compile), s", lambda c: med(c, lambda r: r["cold"]["fit"]["first"])),
        ("(i) the 4 built-in pairs, empty cache: whole script, s", lambda c: med(c, lambda r: r["all"]["wall"])),
        (
            "(ii) fresh process, warm cache: whole script (import, data, 50 epochs), s",
            lambda c: med(c, lambda r: r["warm"]["wall"]),
        ),
        (
            "(ii) &nbsp; of which making the components + first epoch, s",
            lambda c: med(c, lambda r: r["warm"]["fit"]["make"] + r["warm"]["fit"]["first"]),
        ),
        ("(iii) per epoch, ms (interleaved, 3 x median of 7 x 50 epochs)", lambda c: emed(c, "bench", "epoch_s", 1e3)),
        ("(iii) call overhead, µs per loop call (16 samples)", lambda c: emed(c, "overhead", "us_per_call")),
    ]
    + (
        [
            ("(iii) per epoch, ms, second series at load 4", lambda c: emed(c, "bench", "epoch_s", 1e3, low)),
            (
                "(iii) call overhead, µs per call, second series at load 4",
                lambda c: emed(c, "overhead", "us_per_call", 1.0, low),
            ),
        ]
        if low
        else []
    )
    + [
        (
            "(iv) plugin loss, 1st process: make + first epoch, s",
            lambda c: med(
                c, lambda r: r["plugin"]["plugin_make"] + r["plugin"]["plugin"]["make"] + r["plugin"]["plugin"]["first"]
            ),
        ),
        ("(iv) &nbsp; loop compiles for the plugin", lambda c: med(c, lambda r: r["plugin"]["plugin_new_signatures"])),
        (
            "(iv) &nbsp; loop compiles for the built-ins after it",
            lambda c: med(c, lambda r: r["plugin"]["again_new_signatures"]),
        ),
        (
            "(iv) plugin loss, next process: make + first epoch, s",
            lambda c: med(
                c,
                lambda r: (
                    r["plugin2"]["plugin_make"] + r["plugin2"]["plugin"]["make"] + r["plugin2"]["plugin"]["first"]
                ),
            ),
        ),
        (
            "(v) warm process, NUMBA_DEBUG_CACHE: entries loaded / saved",
            lambda c: "/".join(str(int(med(c, lambda r: r["warm"][k]))) for k in ("cache_loaded", "cache_saved")),
        ),
        (
            "(v) plugin, next process: loaded / saved",
            lambda c: "/".join(str(int(med(c, lambda r: r["plugin2"][k]))) for k in ("cache_loaded", "cache_saved")),
        ),
    ]
)
print("| measurement | " + " | ".join(f"({c})" for c in CANDS) + " |")
print("|---|" + "---:|" * len(CANDS))
for name, fn in rows:
    cells = []
    for c in CANDS:
        v = fn(c)
        cells.append(v if isinstance(v, str) else (f"{v:.3g}" if v >= 0.01 or v == 0 else f"{v:.1g}"))
    print(f"| {name} | " + " | ".join(cells) + " |")
loads = [r2["load"] for r in res for r2 in r.values() if isinstance(r2, dict)] + [r["load"] for r in ep if "load" in r]
tail = ""
if low:
    ll = [r["load"] for r in low if "load" in r]
    tail = f", except the second series ({min(ll):.1f}–{max(ll):.1f})"
print(f"\nLoad average during the runs: {min(loads):.1f}–{max(loads):.1f} (2 cores){tail}.")
