"""One process of the measurements: ``python -m benchmarks.component_forms.fit CAND MODE``.

CAND: a (today), b (structref), c (jitclass), d (record of array functions), ds (record
of scalar functions).  MODE: ``fit`` (logistic + group lasso, 50 epochs), ``all`` (the
four built-in pairs, 50 epochs each), ``plugin`` (``fit``, then the plugin loss with the
group lasso, then the built-in pair again), ``bench`` (per-epoch times).  Prints one JSON
line of timings (seconds) and objectives."""

from __future__ import annotations

import importlib
import json
import sys
import time

T0 = time.perf_counter()
CAND, MODE = sys.argv[1], sys.argv[2]
MOD = {"a": "a_current", "b": "b_structref", "c": "c_jitclass", "d": "d_record", "ds": "d_record"}[CAND]
C_ = importlib.import_module("benchmarks.component_forms." + MOD)
from benchmarks.component_forms import common  # noqa: E402

LIP = {"logistic": 0.25, "squared": 1.0, "smooth_hinge": 2.0}
KW = {"scalar": True} if CAND == "ds" else {}
out = {"cand": CAND, "mode": MODE, "t_import": time.perf_counter() - T0}


def dispatchers():
    if CAND in ("b", "c"):
        from benchmarks.component_forms import loops

        return [loops.epoch]
    if CAND == "a":
        return [C_.epoch]
    return [C_.epoch, C_.epoch_s]


def compiled_count():
    return sum(len(d.signatures) for d in dispatchers())


def run(bank, lname, pname, epochs, loss=None):
    t = time.perf_counter()
    if loss is None:
        loss = C_.make_loss(lname, **KW)
    pen = C_.make_pen(pname, **KW)
    t_make = time.perf_counter() - t
    st = common.new_state(bank, LIP[lname])
    C = 0.1 * common.c_max(bank, -0.5 * bank.y)
    opts = common.Opts(C, True, epochs)
    t = time.perf_counter()
    f1 = C_.fit(opts, bank, loss, pen, st, 1)
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    f = C_.fit(opts, bank, loss, pen, st, epochs - 1)
    t_rest = time.perf_counter() - t
    return {"make": t_make, "first": t_first, "rest": t_rest, "f1": f1, "f": f, "nnz": int((st.beta != 0).sum())}


t = time.perf_counter()
bank = common.load_bank()
out["t_data"] = time.perf_counter() - t
if MODE in ("fit", "plugin", "bench"):
    out["fit"] = run(bank, "logistic", "grouplasso", 50)
if MODE == "all":
    for ln in ("logistic", "squared"):
        for pn in ("grouplasso", "elasticnet"):
            out[ln + "+" + pn] = run(bank, ln, pn, 50)
if MODE == "plugin":
    n0 = compiled_count()
    t = time.perf_counter()
    plug = importlib.import_module("benchmarks.component_forms." + MOD.split("_")[0] + "_plugin")
    loss = plug.make(0.5, **KW)
    out["plugin_make"] = time.perf_counter() - t
    out["plugin"] = run(bank, "smooth_hinge", "grouplasso", 50, loss=loss)
    out["plugin_new_signatures"] = compiled_count() - n0
    n1 = compiled_count()
    out["again"] = run(bank, "logistic", "grouplasso", 2)
    out["again_new_signatures"] = compiled_count() - n1
if MODE == "bench":
    import numpy as np

    loss = C_.make_loss("logistic", **KW)
    pen = C_.make_pen("grouplasso", **KW)
    C = 0.1 * common.c_max(bank, -0.5 * bank.y)
    per = []
    for rep in range(7):
        st = common.new_state(bank, 0.25)
        t = time.perf_counter()
        C_.fit(common.Opts(C, True, 50), bank, loss, pen, st, 50)
        per.append((time.perf_counter() - t) / 50)
    out["epoch_s"] = float(np.median(per))
    out["epoch_min"] = float(np.min(per))
out["t_total"] = time.perf_counter() - T0
print(json.dumps(out))
