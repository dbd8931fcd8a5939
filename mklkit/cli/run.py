"""The commands on one spec: ``validate``, ``run`` (and its summary) and ``report``."""

from __future__ import annotations

import argparse
import math
from typing import Any

from .errors import EXIT_NOT_CONVERGED, EXIT_OK, UsageError, finish_before_interrupt
from .output import BuildBar, IterationLines, err, num, one_line, out, plural, show_logs


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

    overrides = list(args.overrides)
    if args.scheduler:
        overrides.append(f"kernels.sharded.scheduler={args.scheduler}")
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
    progress = IterationLines(prepared.n_kernels, enabled=not args.quiet)
    try:
        with show_logs(not args.quiet):
            result = (
                solve_multiclass(prepared, progress)
                if prepared.tasks is not None
                else solve_prepared(prepared, progress)
            )
    finally:
        prepared.close()
    with finish_before_interrupt():  # a Ctrl-C now stops the command once the solved run is written
        try:
            files = result.write(out_dir, force=args.force)
        except OutputError as exc:
            raise spec.error(key, exc.problem, str(out_dir), exc.allowed) from None
        args.interrupt_line = f"mklkit run: interrupted; the results were written to {out_dir}"
    if isinstance(result, MulticlassRunResult):
        return _multiclass_done(args, result, files, out_dir)
    _print_summary(result, files)
    if not result.converged:
        r = result.result
        # the line below gives the engine's message: its ConvergenceWarning would repeat it
        args.hidden_warnings = {"ConvergenceWarning"}
        tol = result.spec.engine.engine.get_params().get("tol")
        err(
            f"warning: the solver did not converge: status {r.status} after {plural(r.iterations, 'iteration')}, "
            f"relative duality gap {num(r.gap, '.3g')} > tol {num(tol, 'g')}"
            + (f" ({one_line(r.message)})" if r.message else "")
            + f"; results were written to {out_dir} with status {r.status!s}"
            + ("" if args.strict else "; raise engine.max_iter or engine.tol (--strict makes this exit 3)")
        )
        if args.strict:
            return EXIT_NOT_CONVERGED
    return EXIT_OK


def _multiclass_done(args: argparse.Namespace, result: Any, files: dict[str, Any], out_dir: Any) -> int:
    """The summary of a multiclass run (one line per problem) and its warning when a problem did not converge."""
    m = result.metrics
    tol = result.spec.engine.engine.get_params().get("tol")
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
    test = m.get("test_accuracy")
    lines.append(
        f"accuracy    train {num(m.get('train_accuracy'), '.4f')}"
        + (f", test {num(test, '.4f')} ({result.n_test} points)" if test is not None else ", no test part")
    )
    lines.append(f"written     {files['summary']}")
    out("\n".join(lines))
    if result.converged:
        return EXIT_OK
    args.hidden_warnings = {"ConvergenceWarning"}
    bad = [f"class {label!r} ({run.status})" for label, run in zip(result.classes, result.runs) if not run.converged]
    err(
        f"warning: the solver did not converge for {', '.join(bad)}; results were written to {out_dir}"
        + ("" if args.strict else "; raise engine.max_iter or engine.tol (--strict makes this exit 3)")
    )
    return EXIT_NOT_CONVERGED if args.strict else EXIT_OK


def _c_max_note(C_max: float | None) -> str:
    """``"; C_max ..."`` when the engine computed a finite threshold."""
    if C_max is None or not math.isfinite(C_max):
        return ""
    return f" (C_max {C_max:.6g}: every kernel is off for C >= C_max)"


def _print_summary(result: Any, files: dict[str, Any]) -> None:
    r = result.result
    m = result.metrics
    tol = result.spec.engine.engine.get_params().get("tol")
    lines = [
        f"status      {r.status} ({plural(r.iterations, 'iteration')}, {result.timings.get('solve_s', r.time_s):.2f} s solve, "
        f"{result.timings.get('total_s', 0.0):.2f} s total)",
        f"objective   {num(r.objective, '.8g')}  (relative duality gap {num(r.gap, '.2e')}, tol {num(tol, 'g')})",
        f"kernels     {result.n_active} of {result.n_kernels} active" + _c_max_note(r.C_max),
    ]
    sel = getattr(result, "C_selection", None)
    if sel is not None:
        lines.append(
            f"C           {sel.C:.6g} chosen on {sel.n_held} held-out rows along "
            f"{plural(sel.Cs.size, 'value')} ({sel.stopped}; {sel.time_s:.2f} s)"
        )
    if result.factor is not None:
        f = result.factor
        worst = max(f["kernel_relative_trace_error"], default=0.0)
        lines.append(
            f"factors     total rank {f['total_rank']}, relative trace left out "
            f"{f['relative_trace_error']:.2e} (worst kernel {worst:.2e})"
        )
        ref = getattr(result, "factor_refinement", None)
        if ref is not None and ref.rounds:
            grown = sorted({k for rnd in ref.rounds for k in rnd["kernels"]})
            lines.append(
                f"            {plural(len(grown), 'kernel')} in use refined in "
                f"{plural(len(ref.rounds), 'round')} ({ref.stopped}; {ref.time_s:.2f} s)"
            )
    if result.task == "classification":
        test = m.get("test_accuracy")
        lines.append(
            f"accuracy    train {num(m.get('train_accuracy'), '.4f')}"
            + (f", test {num(test, '.4f')} ({result.n_test} points)" if test is not None else ", no test part")
        )
    else:
        test = m.get("test_rmse")
        lines.append(
            f"rmse        train {num(m.get('train_rmse'), '.5g')}"
            + (f", test {num(test, '.5g')} ({result.n_test} points)" if test is not None else ", no test part")
        )
    paths = [str(p) for p in files.values()]
    lines.append(f"written     {', '.join(paths)}")
    out("\n".join(lines))


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import plot_run

    if args.top < 1:
        raise UsageError(f"mklkit report: --top must be >= 1; got {args.top}")
    paths = plot_run(args.out, top_k=args.top)
    out("wrote " + ", ".join(str(p) for p in paths))
    from ..io import read_summary

    summary = read_summary(args.out)
    problems = summary.get("problems")
    if isinstance(problems, list):  # a multiclass run: its iterations are in the problems' folders
        ovo = summary.get("multiclass") == "ovo"
        out(
            f"a run of {len(problems)} {'one-vs-one' if ovo else 'one-vs-rest'} problems: weights.png shows the "
            f"kernel weights averaged over the problems; the iterations of each are plotted by "
            f"'mklkit report {args.out}/{'pair_<i>_<j>' if ovo else 'class_<k>'}'"
        )
    return EXIT_OK
