"""The ``sweep`` command: the grid's tasks with their progress lines, the best configurations."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from .errors import EXIT_OK, is_interrupt, sigint_received
from .output import err, num, one_line, out, plural, progress_lines, show_logs


def _sweep_progress(quiet: bool) -> Callable[[dict[str, Any]], None]:
    shown = progress_lines(not quiet)

    def progress(ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "heartbeat":  # from the sweep's helper thread: it only writes its line
            if not sigint_received():
                longest = ""
                if ev.get("longest") is not None:
                    longest = f"; the longest running: {ev['longest']} for {ev['longest_s']:.0f} s"
                shown.line(
                    one_line(
                        f"mklkit sweep: {ev['done']} of {plural(ev['total'], 'task')} finished, "
                        f"{ev['running']} running, {ev['elapsed_s']:.0f} s elapsed{longest}"
                    )
                )
            return
        if sigint_received():  # a Ctrl-C that a task's C code turned into another error stops the sweep here
            raise KeyboardInterrupt
        if kind == "start":
            skipped = f", {ev['n_skipped']} finished earlier" if ev.get("n_skipped") else ""
            line = f"{plural(ev['n_tasks'], 'task')} ({ev['n_rows']} rows){skipped}; running on {ev['backend']}"
        elif kind == "task" and ev.get("failed"):
            line = f"{ev['done']}/{ev['total']} FAILED {ev['task']}: {ev['error']}"
        elif kind == "task":
            eta = f", about {ev['eta_s']:.0f} s left" if ev["done"] < ev["total"] else ""
            line = (
                f"{ev['done']}/{ev['total']} {ev['task']}: {num(ev.get('time_s'), '.2f')} s solve; "
                f"{ev['elapsed_s']:.0f} s elapsed{eta}"
            )
        elif kind == "refit":
            line = f"refitted the best configuration of {ev['dataset']} on all training data -> {ev['dir']}"
        else:
            return
        shown.line(one_line(f"mklkit sweep: {line}"))

    return progress


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
                progress=_sweep_progress(args.quiet),
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
