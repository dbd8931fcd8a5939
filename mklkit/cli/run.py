"""The commands on specs: ``validate``, ``run`` (and its summary), ``report`` and ``sweep`` (and its best
configurations)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from .errors import EXIT_NOT_CONVERGED, EXIT_OK, finish_before_interrupt, is_interrupt
from .output import BuildBar, IterationLines, err, num, one_line, out, plural, show_logs, sweep_lines


def cmd_validate(args: argparse.Namespace) -> int:
    from ..api import check, load_spec

    spec = load_spec(args.spec, args.overrides)
    with show_logs(True):
        result = check(spec)
    out(f"ok: {result.summary()}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..api import MulticlassRunResult, load_spec, solve_multiclass, solve_prepared
    from ..io import OutputError, check_output_dir

    overrides = list(args.overrides) + ([f"kernels.sharded.scheduler={args.scheduler}"] if args.scheduler else [])
    spec = load_spec(args.spec, overrides)
    out_dir = Path(args.out) if args.out else spec.output.dir
    key = "--out" if args.out else "output.dir"
    try:
        check_output_dir(out_dir, force=args.force)
    except OutputError as exc:
        raise spec.error(key, exc.problem, str(out_dir), exc.allowed) from None
    args.interrupt_line = f"mklkit run: interrupted; nothing was written to {out_dir}"
    with show_logs(not args.quiet):
        prepared = spec.prepare(progress=BuildBar(enabled=not args.quiet))
        try:
            solve = solve_multiclass if prepared.tasks is not None else solve_prepared
            result = solve(prepared, IterationLines(prepared.n_kernels, enabled=not args.quiet))
        finally:
            prepared.close()
    with finish_before_interrupt():  # a Ctrl-C now stops the command once the solved run is written
        try:
            files = result.write(out_dir, force=args.force)
        except OutputError as exc:
            raise spec.error(key, exc.problem, str(out_dir), exc.allowed) from None
        args.interrupt_line = f"mklkit run: interrupted; the results were written to {out_dir}"
    tol = result.spec.engine.engine.get_params().get("tol")
    if isinstance(result, MulticlassRunResult):
        out("\n".join(_multiclass_summary(result, files, tol)))
        bad = [
            f"class {label!r} ({run.status})" for label, run in zip(result.classes, result.runs) if not run.converged
        ]
        why = f" for {', '.join(bad)}; results were written to {out_dir}"
    else:
        out("\n".join(_summary(result, files, tol)))
        r = result.result
        why = (
            f": status {r.status} after {plural(r.iterations, 'iteration')}, relative duality gap "
            f"{num(r.gap, '.3g')} > tol {num(tol, 'g')}" + (f" ({one_line(r.message)})" if r.message else "")
        )
        why += f"; results were written to {out_dir} with status {r.status!s}"
    if result.converged:
        return EXIT_OK
    args.hidden_warnings = {"ConvergenceWarning"}  # the line below says what its message would
    advice = "" if args.strict else "; raise engine.max_iter or engine.tol (--strict makes this exit 3)"
    err(f"warning: the solver did not converge{why}{advice}")
    return EXIT_NOT_CONVERGED if args.strict else EXIT_OK


def _metric_line(result: Any, metric: str, fmt: str) -> str:
    """``accuracy    train ..., test ... (n points)`` (or ``rmse``)."""
    test = result.metrics.get(f"test_{metric}")
    tested = f", test {num(test, fmt)} ({result.n_test} points)" if test is not None else ", no test part"
    return f"{metric:<12}train {num(result.metrics.get(f'train_{metric}'), fmt)}{tested}"


def _multiclass_summary(result: Any, files: dict[str, Any], tol: Any) -> list[str]:
    """The summary of a multiclass run: one line per binary problem."""
    if result.multiclass == "joint":
        r = result.joint
        return [
            f"status      {r.status} (one joint problem of {len(result.classes)} classes, "
            f"{plural(r.iterations, 'iteration')}, {result.timings.get('solve_s', 0.0):.2f} s solve, "
            f"{result.timings.get('total_s', 0.0):.2f} s total)",
            f"objective   {num(r.objective, '.8g')}  (relative duality gap {num(r.gap, '.2e')}, tol {num(tol, 'g')})",
            f"kernels     {result.n_active} of {result.n_kernels} active, one weighting for all classes",
            _metric_line(result, "accuracy", ".4f"),
            f"written     {files['summary']}",
        ]
    kind = "one-vs-one" if result.multiclass == "ovo" else "one-vs-rest"
    lines = [
        f"status      {result.status} ({len(result.runs)} {kind} problems, "
        f"{result.timings.get('solve_s', 0.0):.2f} s solve, {result.timings.get('total_s', 0.0):.2f} s total)"
    ]
    for k, run in enumerate(result.runs):
        r = run.result
        lines.append(
            f"{result.problem_label(k)}: {r.status}, {plural(r.iterations, 'iteration')}, gap "
            f"{num(r.gap, '.2e')} (tol {num(tol, 'g')}), {run.n_active} of {run.n_kernels} kernels active"
            f" -> {files.get(result.problem_dir(k), '')}"
        )
    return lines + [_metric_line(result, "accuracy", ".4f"), f"written     {files['summary']}"]


def _summary(result: Any, files: dict[str, Any], tol: Any) -> list[str]:
    r = result.result
    c_max = ""
    if r.C_max is not None and math.isfinite(r.C_max):
        c_max = f" (C_max {r.C_max:.6g}: every kernel is off for C >= C_max)"
    lines = [
        f"status      {r.status} ({plural(r.iterations, 'iteration')}, "
        f"{result.timings.get('solve_s', r.time_s):.2f} s solve, {result.timings.get('total_s', 0.0):.2f} s total)",
        f"objective   {num(r.objective, '.8g')}  (relative duality gap {num(r.gap, '.2e')}, tol {num(tol, 'g')})",
        f"kernels     {result.n_active} of {result.n_kernels} active{c_max}",
    ]
    sel = getattr(result, "C_selection", None)
    if sel is not None:
        folds = getattr(sel, "folds", 1)
        rows = (
            f"{sel.n_held} held-out rows" if folds == 1 else f"{sel.n_held} rows, each held out once in {folds} folds,"
        )
        lines.append(
            f"C           {sel.C:.6g} chosen on {rows} along {plural(sel.Cs.size, 'value')} ({sel.stopped}; "
            f"{sel.time_s:.2f} s)"
        )
    f = result.factor
    if f is not None:
        worst = max(f["kernel_relative_trace_error"], default=0.0)
        lines.append(
            f"factors     total rank {f['total_rank']}, relative trace left out "
            f"{f['relative_trace_error']:.2e} (worst kernel {worst:.2e})"
        )
        ref = getattr(result, "factor_refinement", None)
        if ref is not None and ref.rounds:
            grown = {k for rnd in ref.rounds for k in rnd["kernels"]}
            lines.append(
                f"            {plural(len(grown), 'kernel')} in use refined in "
                f"{plural(len(ref.rounds), 'round')} ({ref.stopped}; {ref.time_s:.2f} s)"
            )
    if "test_auc" in result.metrics:  # one-class
        m = result.metrics
        test = f", test {num(m['test_outlier_fraction'], '.4f')}" if m.get("test_outlier_fraction") is not None else ""
        lines.append(
            f"{'outliers':<12}train {num(m['train_outlier_fraction'], '.4f')} (nu {num(m['nu'], '.4f')}){test}"
        )
        if m["test_auc"] is not None:
            lines.append(
                f"{'roc auc':<12}test {num(m['test_auc'], '.4f')} ({result.n_test} points, inliers against outliers)"
            )
    elif result.task == "classification":
        lines.append(_metric_line(result, "accuracy", ".4f"))
    else:
        lines.append(_metric_line(result, "rmse", ".5g"))
    return lines + [f"written     {', '.join(str(p) for p in files.values())}"]


def cmd_report(args: argparse.Namespace) -> int:
    from ..io import read_summary
    from ..report import plot_run

    paths = plot_run(args.out, top_k=args.top)
    out("wrote " + ", ".join(str(p) for p in paths))
    summary = read_summary(args.out)
    problems = summary.get("problems")
    if isinstance(problems, list) and summary.get("multiclass") == "joint":
        out(
            f"one joint problem of {len(problems)} classes: weights.png shows its one kernel weighting; each class's "
            f"column of the solution is in '{args.out}/class_<k>'"
        )
    elif isinstance(problems, list):  # a multiclass run: its iterations are in the problems' folders
        ovo = summary.get("multiclass") == "ovo"
        out(
            f"a run of {len(problems)} {'one-vs-one' if ovo else 'one-vs-rest'} problems: weights.png shows the "
            f"kernel weights averaged over the problems; the iterations of each are plotted by "
            f"'mklkit report {args.out}/{'pair_<i>_<j>' if ovo else 'class_<k>'}'"
        )
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace) -> int:
    import traceback
    from pathlib import Path

    from ..sweep import RESULTS, SweepTaskError, check_backend, load_sweep, read_results, run_sweep

    sweep = load_sweep(args.spec, args.overrides)
    if args.dry_run:
        check_backend(sweep, args.workers, args.scheduler)
        sweep.check()
        out(f"ok: {sweep.summary()}")
        return EXIT_OK
    out_dir = Path(args.out) if args.out else sweep.output_dir
    try:
        with show_logs(not args.quiet):
            res = run_sweep(
                sweep,
                out_dir,
                workers=args.workers,
                scheduler=args.scheduler,
                resume=args.resume,
                force=args.force,
                progress=sweep_lines(not args.quiet),
                out_key="--out" if args.out else "output.dir",
            )
    except BaseException as exc:  # noqa: BLE001 - an interrupt, in whatever form, says what was kept
        if is_interrupt(exc):
            path = out_dir / RESULTS
            try:
                kept = f"{plural(len(read_results(path)) if path.is_file() else 0, 'finished row')} kept in {path}"
            except Exception:  # noqa: BLE001 - an unreadable file: the line goes without the count
                kept = f"the finished rows are kept in {path}"
            args.interrupt_line = (
                f"mklkit sweep: interrupted; {kept}; 'mklkit sweep {args.spec} --resume' solves the rest"
            )
            raise
        if not isinstance(exc, SweepTaskError):
            raise
        if exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        err(f"mklkit sweep: {exc}")
        return 1
    lines = [
        f"sweep       {len(res.rows)} rows ({res.n_run} tasks solved, {res.n_skipped} kept) in {res.time_s:.1f} s on {res.backend}"
    ]
    for b in res.best:
        lab = b.labels
        metric = "accuracy" if b.score == "val_accuracy" else "rmse"
        lines.append(
            f"best        {b.dataset}: loss {lab['loss']}, regularizer {lab['regularizer']}, engine {lab['engine']}, "
            f"C={b.C:g}: validation {metric} {b.mean:.4f} +- {b.std:.4f} ({b.n_splits} folds) -> {b.dir}"
        )
    lines.append(f"written     {res.files['results']}, {res.files['sweep']}")
    out("\n".join(lines))
    if res.n_not_converged:
        err(
            f"warning: {res.n_not_converged} of {len(res.rows)} solves did not converge (column 'status' of "
            f"{res.files['results']}); raise engine.max_iter or engine.tol"
        )
    return EXIT_OK
