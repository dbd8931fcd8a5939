"""Call overhead of one loop call: ``python -m benchmarks.component_forms.overhead CAND`` times 20,000 calls of
the epoch on a tiny bank (16 samples, 2 blocks of 5), warm cache; prints µs per call
(median of 5 batches)."""

from __future__ import annotations

import importlib
import json
import sys
import time

import numpy as np

from benchmarks.component_forms import common

CAND = sys.argv[1]
MOD = {"a": "a_current", "b": "b_structref", "c": "c_jitclass", "d": "d_record", "ds": "d_record"}[CAND]
C_ = importlib.import_module("benchmarks.component_forms." + MOD)
KW = {"scalar": True} if CAND == "ds" else {}
full = common.load_bank(2)
idx = np.arange(16) * 400
bank = common.Bank(np.ascontiguousarray(full.LT[:, idx]), full.starts, full.y[idx].copy(), full.lip)
loss = C_.make_loss("logistic", **KW)
pen = C_.make_pen("grouplasso", **KW)
st = common.new_state(bank, 0.25)
opts = common.Opts(0.01, True, 1)
C_.fit(opts, bank, loss, pen, st, 10)
per = []
for _ in range(5):
    t = time.perf_counter()
    C_.fit(opts, bank, loss, pen, st, 20000)
    per.append((time.perf_counter() - t) / 20000 * 1e6)
print(
    json.dumps(
        {"cand": CAND, "us_per_call": float(np.median(per)), "load": float(open("/proc/loadavg").read().split()[0])}
    )
)
