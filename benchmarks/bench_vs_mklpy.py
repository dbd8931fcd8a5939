"""mklkit's methods against MKLpy 0.6's on the SimpleMKL UCI protocol, side by side in one run.

Protocol (Rakotomamonjy et al. 2008, SimpleMKL §5.1): Gaussian kernels of ten widths
(0.5 1 2 5 7 10 12 15 17 20) and polynomial kernels of degree 1, 2 and 3, each on all
features and on every single feature (the ``smomkl`` preset: 13 x (d + 1) kernels); random
70/30 stratified splits (``--splits``, seeds 0, 1, ...); the features standardised with the
training part's statistics; every kernel normalised to unit trace on the training part.  Per
split the kernels are computed once, as one (M, N, N) training stack and one (M, N_test, N)
test stack, and every method gets those same arrays:

* ``mklkit``: ``MKLClassifier("precomputed", normalize="none")``, every other parameter at its
  default (C chosen on held-out rows of the training part, ``C="auto"``);
* ``mklkit <weighting>`` (when the installed mklkit has weightings): the same with
  ``weighting=`` ``alignf``, ``easymkl``, ``average`` (the second stage's C chosen the same way);
* MKLpy (when importable): ``AverageMKL``, ``EasyMKL``, ``CKA``, ``GRAM``, ``RMKL``, ``MEMO`` on
  the kernels rescaled to unit mean diagonal (``N K_m``, so that an SVM's C has its usual
  meaning); each method's one parameter (the SVC learner's C for AverageMKL, CKA, GRAM and MEMO;
  ``lam`` for EasyMKL, its KOMD learner at MKLpy's default; ``C`` for RMKL) chosen from
  ``--grid`` / ``--lams`` by 3-fold cross-validation on the training part, then refitted on it;
  the methods left out of ``--cv`` run at MKLpy's defaults (RMKL, MEMO and CKA take minutes per fit
  on liver: ``--cv AverageMKL EasyMKL`` keeps a run to hours).

Time: seconds of ``fit`` including the choice of C (or ``lam``) on the training part, median
over the splits (the kernel computation is left out for every method).  Accuracy: mean and
standard error over the splits.  ``best``: a ``*`` marks the methods within one standard error
of the best MKLpy mean; ``ratio``: fit seconds over those of MKLpy's fastest method whose mean
is within one standard error of its best.

Run::

    /tmp/mklpy_venv/bin/python benchmarks/bench_vs_mklpy.py --data liver sonar --splits 5
    python benchmarks/bench_vs_mklpy.py --methods mklkit "mklkit alignf"   # without MKLpy

MKLpy needs PyTorch: run with an interpreter that has CPU-only torch, ``cvxopt`` and MKLpy
next to mklkit (``pip install MKLpy torch --index-url ...``).  Without MKLpy its rows are
skipped with a note.  Prints a table; writes nothing unless ``--record`` is given.

The full protocol takes hours per set (MKLpy's CKA, GRAM, RMKL and MEMO take minutes per fit):
``--record FILE`` appends every (set, split, method) result to a JSON-lines file as soon as it is
measured and reuses the results already there, so a run that is stopped resumes where it stopped
and the splits of several runs make one table.  A result is reused only under the same protocol:
MKLpy's rows with the same ``--cv``, ``--grid`` and ``--lams``; mklkit's rows with the same mklkit
source (a hash of the installed package's files), so a change to mklkit reruns its rows alone.
A table may then hold different numbers of splits per method (its ``n`` column): e.g. MKLpy's fast
methods on every split first (``--methods``), the slow ones later; ``--recorded`` prints the table of
what the file holds for ``--splits`` without measuring anything.

The results measured so far are kept in the repository, :data:`RECORD`
(``benchmarks/records/mklpy_protocol.jsonl``): a run given ``--record`` with that path adds to them, and
``--record benchmarks/records/mklpy_protocol.jsonl --recorded`` prints their table; ``--markdown`` adds all the sets
as one Markdown table (the one of ``docs/two_stage.md``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold, train_test_split

import mklkit
from mklkit import MKLClassifier
from mklkit.data import Standardizer, load_builtin
from mklkit.kernels import KernelBank, expand_bank

DATASETS = ["liver", "pima", "ionosphere", "sonar", "wdbc", "wpbc", "australian"]
WEIGHTINGS = ["alignf", "easymkl", "average"]
MKLPY = ["AverageMKL", "EasyMKL", "CKA", "GRAM", "RMKL", "MEMO"]
#: How MKLpy's solvers fail (cvxopt's domain error, torch's singular inverse in CKA): counted per split
#: in the table's ``failed`` column instead of ending the run.
MKLPY_FAILURES = (ValueError, ArithmeticError, RuntimeError)
#: The repository's record of the protocol's results (``--record``).
RECORD = Path(__file__).resolve().parent / "records" / "mklpy_protocol.jsonl"


@functools.cache
def mklkit_source_hash() -> str:
    """A hash of the installed mklkit package's Python files: which mklkit a recorded result came from."""
    h = hashlib.sha256()
    root = Path(mklkit.__file__).parent
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def protocol_key(method: str, args) -> str:
    """What a result of ``method`` depends on besides the set and the split."""
    if method.startswith("mklkit"):
        return f"mklkit {mklkit_source_hash()}"
    if method not in args.cv:
        return "defaults"
    return "cv " + " ".join(map(repr, args.lams if method == "EasyMKL" else args.grid))


class Record:
    """The JSON-lines file of ``--record``: every result measured, appended as soon as it exists."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        self.rows: dict[tuple, dict] = {}
        if self.path is not None and self.path.exists():
            for line in self.path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[self.key(row)] = row

    @staticmethod
    def key(row: dict) -> tuple:
        """What a result is of: the set, the split, the method and its protocol (:func:`protocol_key`)."""
        return row["data"], row["split"], row["method"], row["protocol"]

    def get(self, data: str, split: int, method: str, protocol: str) -> dict | None:
        return self.rows.get((data, split, method, protocol))

    def add(self, row: dict) -> None:
        self.rows[self.key(row)] = row
        if self.path is not None:
            with self.path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")


def has_weighting() -> bool:
    return "weighting" in MKLClassifier().get_params()


def mklpy_available() -> tuple[bool, str]:
    try:
        import torch  # noqa: F401
        import MKLpy.algorithms  # noqa: F401
    except ImportError as exc:
        return False, str(exc)
    return True, ""


def fit_mklkit(weighting: str | None, K, y, Kte, yte) -> tuple[float, float, int]:
    kw = {} if weighting is None else {"weighting": weighting}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MKLClassifier("precomputed", normalize="none", **kw).fit(np.moveaxis(K, 0, -1), y)
    secs = time.perf_counter() - t0
    active = int(np.sum(np.asarray(clf.kernel_weights_) > 0))
    return clf.score(np.moveaxis(Kte, 0, -1), yte), secs, active


def _mklpy_estimator(name: str, value: float | None):
    from sklearn.svm import SVC

    import MKLpy.algorithms as alg

    if value is None:  # MKLpy's defaults
        return getattr(alg, name)()
    if name == "EasyMKL":
        return alg.EasyMKL(lam=value)
    if name == "RMKL":
        return alg.RMKL(C=value)
    return getattr(alg, name)(learner=SVC(C=value))


def _mklpy_fit_score(name, value, K, y, rows, cols) -> float:
    """Accuracy on ``cols`` of a fit on ``rows``; NaN where MKLpy's solver fails (e.g. cvxopt's domain error)."""
    import torch

    KL = [torch.from_numpy(np.ascontiguousarray(K[m][np.ix_(rows, rows)])) for m in range(K.shape[0])]
    KLte = [torch.from_numpy(np.ascontiguousarray(K[m][np.ix_(cols, rows)])) for m in range(K.shape[0])]
    try:
        est = _mklpy_estimator(name, value).fit(KL, torch.from_numpy(y[rows]))
    except MKLPY_FAILURES:
        return float("nan")
    return float(np.mean(np.asarray(est.predict(KLte)) == y[cols]))


def fit_mklpy(name: str, values: list[float], K, y, Kte, yte, seed: int) -> tuple[float, float, int]:
    """MKLpy's ``name`` with its parameter chosen by 3-fold CV on the training part, refitted on it."""
    import torch

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len(values) > 1:
            folds = list(StratifiedKFold(3, shuffle=True, random_state=seed).split(y, y))
            scores = [np.mean([_mklpy_fit_score(name, v, K, y, a, b) for a, b in folds]) for v in values]
            if np.all(np.isnan(scores)):
                raise ValueError("every parameter value failed")
            best = values[int(np.nanargmax(scores))]
        else:
            best = values[0]
        KL = [torch.from_numpy(K[m]) for m in range(K.shape[0])]
        est = _mklpy_estimator(name, best).fit(KL, torch.from_numpy(y))
    secs = time.perf_counter() - t0
    KLte = [torch.from_numpy(Kte[m]) for m in range(Kte.shape[0])]
    acc = float(np.mean(np.asarray(est.predict(KLte)) == yte))
    w = np.asarray(est.solution.weights, dtype=np.float64)
    return acc, secs, int(np.sum(w > 1e-8 * np.abs(w).max()))


def measure(method: str, split: int, K, y, Kte, yte, args) -> dict:
    """One method's result on one split: accuracy, fit seconds, kernels in use, or how it failed."""
    if method.startswith("mklkit"):
        weighting = method.split()[1] if " " in method else None
        acc, secs, active = fit_mklkit(weighting, K, y, Kte, yte)
    else:
        values = (args.lams if method == "EasyMKL" else args.grid) if method in args.cv else [None]
        n = len(y)
        try:
            acc, secs, active = fit_mklpy(method, values, n * K, y, n * Kte, yte, split)
        except MKLPY_FAILURES as exc:
            return {"failed": f"{type(exc).__name__}: {exc}"}
    return {"acc": acc, "s": secs, "active": active, "failed": None}


def run_dataset(name: str, methods: list[str], args, record: Record) -> dict[str, dict[str, list]]:
    ds = load_builtin(name)
    X, y = np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y, dtype=np.float64)
    out = {m: {"acc": [], "s": [], "active": [], "failed": []} for m in methods}
    keys = {m: protocol_key(m, args) for m in methods}
    for split in range(args.splits):
        todo = [] if args.recorded else [m for m in methods if record.get(name, split, m, keys[m]) is None]
        if todo:
            tr, te = train_test_split(np.arange(len(y)), test_size=0.3, stratify=y, random_state=split)
            sc = Standardizer().fit(X[tr])
            bank = KernelBank.build(sc.transform(X[tr]), "smomkl", normalize="trace")
            K, Kte = bank.K, bank.cross(sc.transform(X[te]))
            for m in todo:
                row = measure(m, split, K, y[tr], Kte, y[te], args)
                record.add({"data": name, "split": split, "method": m, "protocol": keys[m], **row})
        for m in methods:
            row = record.get(name, split, m, keys[m])
            if row is None:
                continue
            if row["failed"]:
                out[m]["failed"].append(f"split {split}: {row['failed']}")
                continue
            for field in ("acc", "s", "active"):
                out[m][field].append(row[field])
        if todo:
            print(f"  {name} split {split}: measured", flush=True)
    return out


def summarize(res: dict[str, dict[str, list]]) -> dict:
    """Per method of one set (``res``, kept): mean accuracy, its standard error and the median fit seconds; MKLpy's best method
    and the fastest MKLpy method within one standard error of it."""
    done = {m: r for m, r in res.items() if r["acc"]}
    mean = {m: float(np.mean(r["acc"])) for m, r in done.items()}
    se = {
        m: float(np.std(r["acc"], ddof=1) / np.sqrt(len(r["acc"]))) if len(r["acc"]) > 1 else 0.0
        for m, r in done.items()
    }
    med = {m: statistics.median(r["s"]) for m, r in done.items()}
    peers = [m for m in done if not m.startswith("mklkit")]
    best = max(peers, key=mean.get) if peers else None
    equal = [m for m in peers if mean[m] >= mean[best] - se[best]] if best else []
    fastest = min(equal, key=med.get) if equal else None
    return {"res": res, "done": done, "mean": mean, "se": se, "med": med, "best": best, "fastest": fastest}


def print_set(name: str, t: dict) -> None:
    """The text table of one set (``t``: :func:`summarize`)."""
    res, done, mean, se, med, best, fastest = (t[k] for k in ("res", "done", "mean", "se", "med", "best", "fastest"))
    head = f"{'data':<11}{'method':<17}{'n':>3}{'accuracy':>16}{'best':>6}{'fit s':>9}{'ratio':>8}{'active':>8}  failed"
    print(head)
    print("-" * len(head))
    for m, r in res.items():
        if m not in done:
            print(f"{name:<11}{m:<17}{0:>3}{'-':>16}{'':>6}{'-':>9}{'-':>8}{'-':>8}  {len(r['failed']) or ''}")
            continue
        mark = "*" if best is not None and mean[m] >= mean[best] - se[best] else ""
        ratio = f"{med[m] / med[fastest]:.3f}" if fastest else "-"
        print(
            f"{name:<11}{m:<17}{len(r['acc']):>3}{mean[m]:>9.4f} +-{se[m]:.4f}{mark:>6}{med[m]:>9.3f}{ratio:>8}"
            f"{statistics.median(r['active']):>8.0f}  {len(r['failed']) or ''}"
        )
    for m, r in res.items():
        for why in r["failed"]:
            print(f"  {m} failed on {why}")
    print()


def _cell(m: str, r: dict[str, list], t: dict, splits: int) -> str:
    """One method's Markdown cell: accuracy % (mean +- standard error), median fit seconds, the splits measured
    where fewer than ``splits`` and the failures; in bold, MKLpy's best method."""
    tried = len(r["acc"]) + len(r["failed"])
    if not tried:
        return "–"
    failed = f"fails on {len(r['failed'])} of {tried}" if r["failed"] else ""
    if not r["acc"]:
        return failed
    acc = f"{100 * t['mean'][m]:.2f} ± {100 * t['se'][m]:.2f}"
    acc = f"**{acc}**" if m == t["best"] else acc
    secs = t["med"][m]
    parts = [acc, f"{secs:.2f} s" if secs < 10 else f"{secs:.0f} s"]
    if tried < splits:
        parts.append(f"{tried} split{'s' if tried > 1 else ''}")
    return ", ".join(parts + ([failed] if failed else []))


def print_markdown(tables: dict[str, dict], methods: list[str], splits: int) -> None:
    """The sets' results as one Markdown table (``docs/two_stage.md``): mklkit's default, its most accurate
    weighting, and every MKLpy method."""
    weightings = [m for m in methods if m.startswith("mklkit ")]
    peers = [m for m in methods if not m.startswith("mklkit")]
    cols = ["set (kernels)"] + (["mklkit default"] if "mklkit" in methods else [])
    cols += (["best two-stage"] if weightings else []) + [f"MKLpy {m}" for m in peers]
    print("| " + " | ".join(cols) + " |")
    print("|" + " --- |" * len(cols))
    for name, t in tables.items():
        res = t["res"]
        n_kernels = len(expand_bank("smomkl", np.asarray(load_builtin(name).X).shape[1]))
        row = [f"{name} ({n_kernels})"]
        if "mklkit" in methods:
            row.append(_cell("mklkit", res["mklkit"], t, splits))
        if weightings:
            done = [m for m in weightings if m in t["done"]]
            top = max(done, key=t["mean"].get) if done else None
            row.append(f"`{top.split()[1]}` {100 * t['mean'][top]:.2f} ± {100 * t['se'][top]:.2f}" if top else "–")
        row += [_cell(m, res[m], t, splits) for m in peers]
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=DATASETS)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--methods", nargs="+", default=None, help="default: every available method")
    ap.add_argument("--grid", type=float, nargs="+", default=[0.1, 1.0, 10.0, 100.0], help="MKLpy's C values")
    ap.add_argument("--lams", type=float, nargs="+", default=[0.0, 0.1, 0.5, 0.9], help="EasyMKL's lam values")
    ap.add_argument(
        "--cv",
        nargs="*",
        default=MKLPY,
        help="MKLpy methods whose parameter is chosen by cross-validation; the others run at MKLpy's defaults",
    )
    ap.add_argument("--record", default=None, help="JSON-lines file of results to append to and reuse")
    ap.add_argument("--recorded", action="store_true", help="only print the table of the --record file's results")
    ap.add_argument("--markdown", action="store_true", help="also print the sets' results as one Markdown table")
    args = ap.parse_args(argv)
    if args.recorded and not args.record:
        ap.error("--recorded needs --record FILE")
    record = Record(args.record)

    ok, why = (True, "") if args.recorded else mklpy_available()
    methods = args.methods or (
        ["mklkit"] + ([f"mklkit {w}" for w in WEIGHTINGS] if has_weighting() else []) + (MKLPY if ok else [])
    )
    if not ok:
        print(f"NOTE: MKLpy is not importable ({why}); its rows are skipped")
        methods = [m for m in methods if m.startswith("mklkit")]
    print(
        f"SimpleMKL protocol (smomkl bank, unit trace), {args.splits} random 70/30 splits; fit s median "
        "(C chosen on the training part included), accuracy mean +- standard error; MKLpy parameters chosen "
        f"by 3-fold CV for: {', '.join(args.cv) or 'none'} (the others at MKLpy's defaults)"
    )
    tables = {}
    for name in args.data:
        res = run_dataset(name, methods, args, record)
        tables[name] = summarize(res)
        print_set(name, tables[name])
    if args.markdown:
        print_markdown(tables, methods, args.splits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
