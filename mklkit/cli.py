"""The ``mklkit`` command line; the only module that writes to stdout or sets exit codes.

Commands::

    mklkit validate SPEC [--set key.path=value ...]
    mklkit run SPEC [--set key.path=value ...] [--out DIR] [--quiet] [--force] [--strict]
    mklkit sweep SPEC [--set ...] [--scheduler ADDRESS | --workers N] [--out DIR] [--resume | --force] [--dry-run]
    mklkit report OUT [--top K]
    mklkit plugins
    mklkit check-plugin NAME [--param name=value ...] [--random N] [--seed S] [--max-problems N]
                                      (NAME, kind:NAME such as engine:spicy, or a plugin/distribution name)
    mklkit new-plugin NAME [--dest DIR] [--kind loss|regularizer]
    mklkit schema

Exit codes: 0 success; 2 a user error (bad spec, data, option, name -- one
line on stderr, no traceback) or a failed plugin check; 3 a run that did not
converge, with ``--strict`` (without it: exit 0 and a warning on stderr);
130 interrupted.  ``mklkit sweep`` exits 1 when some of its tasks failed (the
finished rows are kept; ``--resume`` retries the others).  Anything else is an internal error and shows a traceback.

Heavy modules (numpy, numba, the plugin registry) are imported inside the
commands, so ``mklkit --help`` answers at once.
"""
from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn, Sequence

from ._interrupts import caused_by_interrupt
from .progress import AFTER_S, EVERY_S, Progress

__all__ = ["main", "EXIT_OK", "EXIT_USAGE", "EXIT_NOT_CONVERGED", "EXIT_INTERRUPTED"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_CONVERGED = 3
EXIT_INTERRUPTED = 130

#: Component kinds ``mklkit check-plugin`` checks: losses and regularizers by
#: ``mklkit.testing.check_component``, engines by ``mklkit.testing.check_engine``.
CHECKABLE_KINDS = ("loss", "regularizer", "engine")
#: Random parameter points ``mklkit check-plugin`` checks besides the defaults.
CHECK_RANDOM_POINTS = 5

#: Library loggers whose INFO records ``run`` and ``sweep`` show on stderr
#: (not with ``--quiet``): the note that numba is compiling (mklkit.compilation).
SHOWN_LOGGERS = ("mklkit.compilation", "mklkit.pipeline")

#: Progress lines and bars start once the work has run this long (seconds), and throttled lines are
#: printed at most this often (:mod:`mklkit.progress`, which draws them).
PROGRESS_AFTER_S = AFTER_S
PROGRESS_EVERY_S = EVERY_S


class UsageError(Exception):
    """A command-line problem, reported as one line with exit code 2."""


def _one_line(text: object) -> str:
    """One line of text: the spec's formatter (:func:`mklkit.spec.errors.one_line`) writes every error line."""
    from .spec.errors import one_line

    return one_line(text)


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _err(text: object) -> None:
    sys.stderr.write(_one_line(text) + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# argparse with one-line errors
# ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    p = _Parser(
        prog="mklkit",
        description="Multiple Kernel Learning from YAML problem specs.",
        epilog="Exit codes: 0 ok, 2 user error, 3 not converged with --strict, 130 interrupted. "
        "Spec reference: docs/specs.md.",
    )
    p.add_argument("--version", action="version", version=f"mklkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_validate_and_run(sub)
    _add_sweep(sub)
    _add_report_and_plugins(sub)
    _add_check_plugin(sub)
    _add_new_plugin_and_schema(sub)
    return p


def _add_command(sub: Any, name: str, help_: str, func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """The subcommand ``name`` (its help is also its description), running ``func``."""
    sp = sub.add_parser(name, help=help_, description=help_)
    sp.set_defaults(func=func)
    return sp


def _add_overrides(sp: argparse.ArgumentParser) -> None:
    """The repeatable ``--set KEY.PATH=VALUE`` of the commands that read a spec."""
    sp.add_argument(
        "--set", action="append", default=[], metavar="KEY.PATH=VALUE", dest="overrides",
        help="override a spec value (parsed as YAML), e.g. --set problem.C=0.1; repeatable",
    )


def _add_validate_and_run(sub: Any) -> None:
    """The ``validate`` and ``run`` subcommands."""
    sp = _add_command(sub, "validate", "check a spec completely (data, labels, kernels, engine) without solving", _cmd_validate)
    sp.add_argument("spec", metavar="SPEC", help="YAML spec file")
    _add_overrides(sp)

    sp = _add_command(sub, "run", "solve a spec and write summary.json, history.json, solution.npz", _cmd_run)
    sp.add_argument("spec", metavar="SPEC", help="YAML spec file")
    _add_overrides(sp)
    sp.add_argument("--out", metavar="DIR", help="output directory (default: the spec's output.dir, else runs/<spec name>)")
    sp.add_argument("--quiet", "-q", action="store_true",
                    help="no progress lines on stderr (nor warnings about plugins that could not be loaded)")
    sp.add_argument("--force", action="store_true", help="overwrite the results of an earlier run in the output directory")
    sp.add_argument("--strict", action="store_true", help="exit with code 3 when the solver does not converge")
    sp.add_argument("--scheduler", metavar="ADDRESS",
                    help="build the kernel bank in shards on a dask.distributed cluster, e.g. tcp://127.0.0.1:8786 "
                    "(the same as --set kernels.sharded.scheduler=ADDRESS; needs mklkit[dask])")


def _add_sweep(sub: Any) -> None:
    """The ``sweep`` subcommand."""
    sp = _add_command(
        sub, "sweep", "run a grid of problems (lists in the spec) with cross-validation, write results.csv "
        "and refit the best configuration (docs/sweeps.md)", _cmd_sweep,
    )
    sp.add_argument("spec", metavar="SPEC", help="YAML sweep spec (a run spec with lists and a cv section)")
    _add_overrides(sp)
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, metavar="N",
                       help="local worker processes (default 1: solve in this process)")
    where.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the tasks on a dask.distributed cluster, e.g. tcp://127.0.0.1:8786 (needs mklkit[dask])")
    sp.add_argument("--out", metavar="DIR", help="output directory (default: the spec's output.dir, else runs/<spec name>)")
    again = sp.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="keep the finished rows of an interrupted sweep and solve the rest")
    again.add_argument("--force", action="store_true", help="start over in a directory that holds an earlier sweep (its best/ refits are removed first)")
    sp.add_argument("--dry-run", action="store_true", help="validate every grid point and fold and print the grid size; solve nothing")
    sp.add_argument("--quiet", "-q", action="store_true",
                    help="no progress lines on stderr (nor warnings about plugins that could not be loaded)")


def _add_report_and_plugins(sub: Any) -> None:
    """The ``report`` and ``plugins`` subcommands."""
    sp = _add_command(sub, "report", "draw gap.png, active.png, weights.png into a run directory", _cmd_report)
    sp.add_argument("out", metavar="OUT", help="run directory written by 'mklkit run'")
    sp.add_argument("--top", type=int, default=15, metavar="K", help="label the K largest kernel weights (default 15)")

    _add_command(sub, "plugins", "list the installed components (losses, regularizers, kernels, engines) and plugins", _cmd_plugins)


def _add_check_plugin(sub: Any) -> None:
    """The ``check-plugin`` subcommand."""
    sp = _add_command(sub, "check-plugin", "run the conformance kits on the component(s) named NAME: losses and "
                      "regularizers at their default parameters and at random parameter points, engines "
                      "(engine:NAME) on the kit's problems", _cmd_check_plugin)
    sp.add_argument("name", metavar="NAME", help="component name, kind:name (e.g. engine:spicy), "
                    "or a plugin/distribution name")
    sp.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", dest="params",
                    help="check at this parameter value (parsed as YAML) instead of the default, e.g. "
                    "--param tau=0.2 or, for an engine, --param tol=1e-6; the random points keep it; repeatable")
    sp.add_argument("--random", type=int, default=CHECK_RANDOM_POINTS, metavar="N",
                    help=f"random parameter points of losses and regularizers drawn from the declarations "
                    f"besides the defaults (default {CHECK_RANDOM_POINTS}; 0: only the defaults or the --param values)")
    sp.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the random parameter points and of the check points (default 0)")
    sp.add_argument("--max-problems", type=int, default=None, metavar="N",
                    help="engines: solve at most N of the kit's problems (default: all that the engine supports)")


def _add_new_plugin_and_schema(sub: Any) -> None:
    """The ``new-plugin`` and ``schema`` subcommands."""
    sp = _add_command(sub, "new-plugin", "create the skeleton of a plugin distribution", _cmd_new_plugin)
    sp.add_argument("name", metavar="NAME", help="component name: lowercase letters, digits, underscores")
    sp.add_argument("--dest", default=".", metavar="DIR", help="folder to create it in (default: .)")
    sp.add_argument("--kind", default="loss", choices=("loss", "regularizer"), help="component kind (default: loss)")

    sp = _add_command(sub, "schema", "print a JSON Schema of the spec format (generated from the spec's models)", _cmd_schema)
    sp.add_argument("--sweep", action="store_true",
                    help="the schema of a sweep spec: lists at the sweep keys and the cv section")


# ---------------------------------------------------------------------------
# error classification
# ---------------------------------------------------------------------------
_USER_ERRORS = (
    ("mklkit.spec", "SpecError"),
    ("mklkit.pipeline", "PipelineError"),
    ("mklkit.io", "OutputError"),
    ("mklkit.data", "DataError"),
    ("mklkit.kernels", "BankError"),
    ("mklkit.plugins", "UnknownComponentError"),
    ("mklkit.components.params", "ParamError"),
    ("mklkit.components.base", "LabelError"),
)


class _Interrupted(KeyboardInterrupt):
    """An interrupt a command reports in its own words (``line``) instead of ``mklkit: interrupted``."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


#: Set by :func:`_on_sigint` when this process received SIGINT during :func:`main`.
_sigint_received = False
#: While True (:func:`_finish_before_interrupt`), SIGINT is held back ...
_sigint_deferred = False
#: ... and recorded here.
_sigint_pending = False


def _on_sigint(signum: int, frame: Any) -> None:
    """Python's own SIGINT behaviour (raise :class:`KeyboardInterrupt`), recorded first.

    A KeyboardInterrupt raised inside C code (numba loading a cached function,
    a BLAS call, an unpickler) may come back as another exception, e.g.
    ``SystemError: ... returned a result with an exception set``; the record
    lets :func:`_is_interrupt` recognise it whatever it became.
    """
    global _sigint_received, _sigint_pending
    _sigint_received = True
    if _sigint_deferred:
        _sigint_pending = True
        return
    raise KeyboardInterrupt


def _lost_interrupt() -> None:
    """Raise the :class:`KeyboardInterrupt` of a SIGINT this process received but that did not
    stop it: raised inside C code (numba loading or compiling a function), it can come back as
    an error that code handles.  Called by the progress callbacks, so the command stops at the
    next progress event instead of running to its end."""
    if _sigint_received and not _sigint_deferred:
        raise KeyboardInterrupt


@contextmanager
def _finish_before_interrupt() -> Iterator[None]:
    """Finish the block (writing results) before a SIGINT received meanwhile stops the command."""
    global _sigint_deferred, _sigint_pending
    _sigint_deferred = True
    try:
        yield
    finally:
        _sigint_deferred = False
    if _sigint_pending:
        _sigint_pending = False
        raise KeyboardInterrupt


def _catch_sigint() -> Any:
    """Install :func:`_on_sigint` where SIGINT has Python's default handler; returns what to restore."""
    global _sigint_received, _sigint_pending
    _sigint_received = _sigint_pending = False
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        current = signal.getsignal(signal.SIGINT)
        if current is not signal.default_int_handler:  # ignored (a background job) or someone else's
            return None
        signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        return None
    return current


def _set_sigint(previous: Any, handler: Any) -> None:
    """Set the SIGINT handler where :func:`_catch_sigint` installed its own (``previous`` not None)."""
    if previous is None:
        return
    try:
        signal.signal(signal.SIGINT, handler)
    except (ValueError, OSError):  # pragma: no cover
        pass


def _is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` ends an interrupted command.

    True for a :class:`KeyboardInterrupt` anywhere in its ``__cause__`` /
    ``__context__`` chain (one raised inside C code may surface as the
    ``SystemError`` it caused) and for any exception once this process has
    received SIGINT during :func:`main`.
    """
    return caused_by_interrupt(exc) or _sigint_received


def _is_user_error(exc: BaseException) -> bool:
    if isinstance(exc, UsageError):
        return True
    for module, name in _USER_ERRORS:
        mod = sys.modules.get(module)
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and isinstance(exc, cls):
            return True
    return False


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------
def _cmd_validate(args: argparse.Namespace) -> int:
    from .api import check, load_spec

    spec = load_spec(args.spec, args.overrides)
    with _show_logs(True):
        result = check(spec)
    _out(f"ok: {result.summary()}")
    return EXIT_OK


def _progress(enabled: bool) -> Progress:
    return Progress(enabled, after_s=PROGRESS_AFTER_S, every_s=PROGRESS_EVERY_S)


class _IterationLines:
    """Engine callback printing one progress line per second on stderr after the first second."""

    def __init__(self, n_kernels: int, enabled: bool):
        self.n_kernels = n_kernels
        self.progress = _progress(enabled)

    def __call__(self, state: dict[str, Any]) -> None:
        _lost_interrupt()
        now = self.progress.due()
        if now is None:
            return None
        if state.get("stage") == "C path":   # problem.C: path, one record per value of C on held-out rows
            line = (f"mklkit: C path: C {_num(state.get('C'), '.4g')}, held-out loss "
                    f"{_num(state.get('loss'), '.5g')} (metric {_num(state.get('metric'), '.4f')}), "
                    f"active {state.get('n_active', '?')}/{self.n_kernels} kernels")
        elif state.get("stage") == "refine":   # kernels.factor.refine, one record per round
            line = (f"mklkit: factors refined: {len(state.get('kernels', []))} kernels in use, total rank "
                    f"{state.get('total_rank', '?')}, gap {_num(max(state.get('gap') or [math.nan]), '.2e')}")
        else:
            if _finite(state.get("gap")) or not _finite(state.get("dual_objective")):
                where = f"objective {_num(state.get('objective'), '.6g')}, gap {_num(state.get('gap'), '.2e')}"
            else:  # a record between certificates (smo_mkl): only the dual objective is known
                where = f"dual objective {_num(state.get('dual_objective'), '.6g')} (gap not computed here)"
            line = (f"mklkit: iteration {state.get('iteration', '?')}: {where}, "
                    f"active {state.get('n_active', '?')}/{self.n_kernels} kernels")
        self.progress.line(_one_line(f"{line}, {now:.1f} s"))
        return None


class _BuildBar:
    """The kernel-bank build's bar on stderr, on a terminal, for builds longer than :data:`PROGRESS_AFTER_S`.

    The library reports ``{"what", "done", "total", "elapsed_s"}`` events
    (:class:`mklkit.kernels.KernelBank` ``progress``); the command line draws them.
    """

    def __init__(self, enabled: bool):
        self.progress = _progress(enabled)

    def __call__(self, ev: dict[str, Any]) -> None:
        _lost_interrupt()
        self.progress.bar(ev["what"], int(ev["done"]), int(ev["total"]), ev["elapsed_s"], unit="kernel")


class _StderrLines(logging.Handler):
    """Shows a library log record as one ``mklkit: <message>`` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        _err(f"mklkit: {record.getMessage()}")


@contextmanager
def _show_logs(enabled: bool) -> Iterator[None]:
    """While the block runs, show the INFO records of :data:`SHOWN_LOGGERS` on stderr."""
    if not enabled:
        yield
        return
    handler = _StderrLines(logging.INFO)
    saved = []
    for name in SHOWN_LOGGERS:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level, lg.propagate))
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False  # shown here once, not again by a handler of the root logger
    try:
        yield
    finally:
        for lg, level, propagate in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _num(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "?"


def _cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .api import MulticlassRunResult, load_spec, solve_multiclass, solve_prepared
    from .io import OutputError, check_output_dir

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
    with _show_logs(not args.quiet):
        prepared = spec.prepare(progress=_BuildBar(enabled=not args.quiet))
    progress = _IterationLines(prepared.n_kernels, enabled=not args.quiet)
    try:
        with _show_logs(not args.quiet):
            result = (solve_multiclass(prepared, progress) if prepared.tasks is not None
                      else solve_prepared(prepared, progress))
    finally:
        prepared.close()
    with _finish_before_interrupt():  # a Ctrl-C now stops the command once the solved run is written
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
        _err(
            f"warning: the solver did not converge: status {r.status} after {_plural(r.iterations, 'iteration')}, "
            f"relative duality gap {_num(r.gap, '.3g')} > tol {_num(tol, 'g')}"
            + (f" ({_one_line(r.message)})" if r.message else "")
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
    lines = [f"status      {result.status} ({len(result.runs)} {kind} problems, "
             f"{result.timings.get('solve_s', 0.0):.2f} s solve, {result.timings.get('total_s', 0.0):.2f} s total)"]
    for k, run in enumerate(result.runs):
        r = run.result
        lines.append(f"{result.problem_label(k)}: {r.status}, {_plural(r.iterations, 'iteration')}, gap "
                     f"{_num(r.gap, '.2e')} (tol {_num(tol, 'g')}), {run.n_active} of {run.n_kernels} kernels active"
                     f" -> {files.get(result.problem_dir(k), '')}")
    test = m.get("test_accuracy")
    lines.append(f"accuracy    train {_num(m.get('train_accuracy'), '.4f')}"
                 + (f", test {_num(test, '.4f')} ({result.n_test} points)" if test is not None else ", no test part"))
    lines.append(f"written     {files['summary']}")
    _out("\n".join(lines))
    if result.converged:
        return EXIT_OK
    args.hidden_warnings = {"ConvergenceWarning"}
    bad = [f"class {label!r} ({run.status})" for label, run in zip(result.classes, result.runs) if not run.converged]
    _err(f"warning: the solver did not converge for {', '.join(bad)}; results were written to {out_dir}"
         + ("" if args.strict else "; raise engine.max_iter or engine.tol (--strict makes this exit 3)"))
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
        f"status      {r.status} ({_plural(r.iterations, 'iteration')}, {result.timings.get('solve_s', r.time_s):.2f} s solve, "
        f"{result.timings.get('total_s', 0.0):.2f} s total)",
        f"objective   {_num(r.objective, '.8g')}  (relative duality gap {_num(r.gap, '.2e')}, tol {_num(tol, 'g')})",
        f"kernels     {result.n_active} of {result.n_kernels} active" + _c_max_note(r.C_max),
    ]
    sel = getattr(result, "C_selection", None)
    if sel is not None:
        lines.append(f"C           {sel.C:.6g} chosen on {sel.n_held} held-out rows along "
                     f"{_plural(sel.Cs.size, 'value')} ({sel.stopped}; {sel.time_s:.2f} s)")
    if result.factor is not None:
        f = result.factor
        worst = max(f["kernel_relative_trace_error"], default=0.0)
        lines.append(f"factors     total rank {f['total_rank']}, relative trace left out "
                     f"{f['relative_trace_error']:.2e} (worst kernel {worst:.2e})")
        ref = getattr(result, "factor_refinement", None)
        if ref is not None and ref.rounds:
            grown = sorted({k for rnd in ref.rounds for k in rnd["kernels"]})
            lines.append(f"            {_plural(len(grown), 'kernel')} in use refined in "
                         f"{_plural(len(ref.rounds), 'round')} ({ref.stopped}; {ref.time_s:.2f} s)")
    if result.task == "classification":
        test = m.get("test_accuracy")
        lines.append(
            f"accuracy    train {_num(m.get('train_accuracy'), '.4f')}"
            + (f", test {_num(test, '.4f')} ({result.n_test} points)" if test is not None else ", no test part")
        )
    else:
        test = m.get("test_rmse")
        lines.append(
            f"rmse        train {_num(m.get('train_rmse'), '.5g')}"
            + (f", test {_num(test, '.5g')} ({result.n_test} points)" if test is not None else ", no test part")
        )
    paths = [str(p) for p in files.values()]
    lines.append(f"written     {', '.join(paths)}")
    _out("\n".join(lines))


def _sweep_progress(quiet: bool) -> Callable[[dict[str, Any]], None]:
    shown = _progress(not quiet)

    def progress(ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "heartbeat":  # from the sweep's helper thread: it only writes its line
            if not _sigint_received:
                longest = (f"; the longest running: {ev['longest']} for {ev['longest_s']:.0f} s"
                           if ev.get("longest") is not None else "")
                shown.line(_one_line(f"mklkit sweep: {ev['done']} of {_plural(ev['total'], 'task')} finished, "
                                     f"{ev['running']} running, {ev['elapsed_s']:.0f} s elapsed{longest}"))
            return
        if _sigint_received:  # a Ctrl-C that a task's C code turned into another error stops the sweep here
            raise KeyboardInterrupt
        if kind == "start":
            skipped = f", {ev['n_skipped']} finished earlier" if ev.get("n_skipped") else ""
            line = f"mklkit sweep: {_plural(ev['n_tasks'], 'task')} ({ev['n_rows']} rows){skipped}; running on {ev['backend']}"
        elif kind == "task" and ev.get("failed"):
            line = f"mklkit sweep: {ev['done']}/{ev['total']} FAILED {ev['task']}: {ev['error']}"
        elif kind == "task":
            eta = f", about {ev['eta_s']:.0f} s left" if ev["done"] < ev["total"] else ""
            line = (f"mklkit sweep: {ev['done']}/{ev['total']} {ev['task']}: {_num(ev.get('time_s'), '.2f')} s solve; "
                    f"{ev['elapsed_s']:.0f} s elapsed{eta}")
        elif kind == "refit":
            line = f"mklkit sweep: refitted the best configuration of {ev['dataset']} on all training data -> {ev['dir']}"
        else:
            return
        shown.line(_one_line(line))
    return progress


def _cmd_sweep(args: argparse.Namespace) -> int:
    import traceback
    from pathlib import Path

    from .sweep import RESULTS, SweepTaskError, check_backend, load_sweep, read_results, run_sweep

    sweep = load_sweep(args.spec, args.overrides)
    if args.dry_run:
        check_backend(sweep, args.workers, args.scheduler)
        sweep.check()
        _out(f"ok: {sweep.summary()}")
        return EXIT_OK
    out = Path(args.out) if args.out else sweep.output_dir
    try:
        with _show_logs(not args.quiet):
            res = run_sweep(
                sweep, out, workers=args.workers, scheduler=args.scheduler, resume=args.resume,
                force=args.force, progress=_sweep_progress(args.quiet),
                out_key="--out" if args.out else "output.dir",
            )
    except BaseException as exc:  # noqa: BLE001 - an interrupt, in whatever form, says what was kept
        if _is_interrupt(exc):
            path = out / RESULTS
            try:
                kept = f"{_plural(len(read_results(path)) if path.is_file() else 0, 'finished row')} kept in {path}"
            except Exception:  # noqa: BLE001 - an unreadable file: the line goes without the count
                kept = f"the finished rows are kept in {path}"
            raise _Interrupted(f"mklkit sweep: interrupted; {kept}; "
                               f"'mklkit sweep {args.spec} --resume' solves the rest") from exc
        if not isinstance(exc, SweepTaskError):
            raise
        if exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        _err(f"mklkit sweep: {exc}")
        return 1
    lines = [
        f"sweep       {len(res.rows)} rows ({res.n_run} tasks solved, {res.n_skipped} kept) in {res.time_s:.1f} s on {res.backend}",
    ]
    for b in res.best:
        lab = b.labels
        metric = "accuracy" if b.score == "val_accuracy" else "rmse"
        lines.append(
            f"best        {b.dataset}: loss {lab['loss']}, regularizer {lab['regularizer']}, engine {lab['engine']}, "
            f"C={b.C:g}: validation {metric} {b.mean:.4f} +- {b.std:.4f} ({b.n_splits} folds) -> {b.dir}"
        )
    lines.append(f"written     {res.files['results']}, {res.files['sweep']}")
    _out("\n".join(lines))
    if res.n_not_converged:
        _err(f"warning: {res.n_not_converged} of {len(res.rows)} solves did not converge (column 'status' of "
             f"{res.files['results']}); raise engine.max_iter or engine.tol")
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from .report import plot_run

    if args.top < 1:
        raise UsageError(f"mklkit report: --top must be >= 1; got {args.top}")
    paths = plot_run(args.out, top_k=args.top)
    _out("wrote " + ", ".join(str(p) for p in paths))
    from .io import read_summary

    summary = read_summary(args.out)
    problems = summary.get("problems")
    if isinstance(problems, list):  # a multiclass run: its iterations are in the problems' folders
        ovo = summary.get("multiclass") == "ovo"
        _out(f"a run of {len(problems)} {'one-vs-one' if ovo else 'one-vs-rest'} problems: weights.png shows the "
             f"kernel weights averaged over the problems; the iterations of each are plotted by "
             f"'mklkit report {args.out}/{'pair_<i>_<j>' if ovo else 'class_<k>'}'")
    return EXIT_OK


def _cmd_plugins(args: argparse.Namespace) -> int:
    from .plugins import format_listing, get_registry

    _out(format_listing(get_registry()))
    return EXIT_OK


def _broken_line(reg: Any) -> str:
    """``; N plugin(s) could not be loaded: name (dist version): reason, ...`` or ``""``."""
    if not reg.broken:
        return ""
    what = "; ".join(f"{b.name} ({b.dist} {b.version}): {b.message}".replace(" )", ")")
                     for b in reg.broken)
    return f"; {_plural(len(reg.broken), 'plugin')} could not be loaded: {what}"


def _find_components(reg: Any, name: str) -> list[Any]:
    from .components.params import did_you_mean
    from .plugins import KINDS

    kind = None
    if ":" in name:
        kind, _, name = name.partition(":")
        if kind not in KINDS:
            raise UsageError(
                f"mklkit check-plugin: unknown component kind {kind!r}{did_you_mean(kind, list(KINDS))}; "
                f"got {kind + ':' + name!r}; allowed: {', '.join(KINDS)}"
            )
    regs = reg.registrations(kind)
    found = [r for r in regs if r.name == name]
    if not found and kind is None:
        found = list(reg.provided_by(name))
    if found:
        return found
    # a plugin that failed to load provides nothing: say why instead of "no such name"
    b = reg.broken_plugin(name) if kind is None else None
    if b is not None:
        raise UsageError(
            f"mklkit check-plugin: plugin {b.name!r} ({b.dist} {b.version}) could not be loaded, "
            f"so it provides no components: {b.message}".replace(" )", ")")
        )
    names = [f"{r.kind}:{r.name}" for r in regs]
    plain = sorted({r.name for r in regs} | set(reg.plugins) | {b.name for b in reg.broken})
    raise UsageError(
        f"mklkit check-plugin: no component or plugin named {name!r}"
        f"{did_you_mean(name, plain)}; got {name!r}; allowed: {', '.join(names)}{_broken_line(reg)}"
    )


def _given_params(texts: Sequence[str], checked: Sequence[Any]) -> dict[str, tuple[Any, str]]:
    """``--param name=value`` options: name -> (value parsed as YAML, the text given)."""
    from .components.params import did_you_mean
    from .spec import SpecError, parse_override

    declared = list(dict.fromkeys(p.name for r in checked for p in r.cls.params))
    owners = ", ".join(f"{r.kind} {r.name!r}" for r in checked)
    allowed = ", ".join(declared) if declared else f"none ({owners} has no parameters)"
    given: dict[str, tuple[Any, str]] = {}
    for text in texts:
        key, sep, value_text = text.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(f"mklkit check-plugin: --param needs the form name=value; got {text!r}; "
                             f"allowed: a parameter of {owners}: {allowed}")
        if key not in declared:
            raise UsageError(f"mklkit check-plugin: --param {text}: unknown parameter {key!r}"
                             f"{did_you_mean(key, declared)}; allowed: {allowed}")
        try:
            _, value = parse_override(text, file="mklkit check-plugin", option="--param")
        except SpecError as exc:
            raise UsageError(str(exc)) from None
        given[key] = (value, text)
    return given


def _yaml_value(v: Any) -> str:
    """A parameter value as ``--param`` reads it back (YAML)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        import json

        return json.dumps(v)
    return repr(v)


def _cmd_check_plugin(args: argparse.Namespace) -> int:
    from .components.params import ParamError
    from .plugins import get_registry
    from .testing import check_parameter_points

    if args.random < 0:
        raise UsageError(f"mklkit check-plugin: --random must be an integer >= 0; got {args.random}")
    if args.seed < 0:
        raise UsageError(f"mklkit check-plugin: --seed must be an integer >= 0; got {args.seed}")
    if args.max_problems is not None and args.max_problems < 1:
        raise UsageError(f"mklkit check-plugin: --max-problems must be an integer >= 1; got {args.max_problems}")
    reg = get_registry()
    found = _find_components(reg, args.name)
    checkable = [r for r in found if r.kind in CHECKABLE_KINDS]
    skipped = [r for r in found if r.kind not in CHECKABLE_KINDS]
    if not checkable:
        what = ", ".join(f"{r.kind} {r.name!r}" for r in skipped)
        raise UsageError(
            f"mklkit check-plugin: the conformance kits check losses, regularizers and engines; "
            f"got {what}; allowed: a loss, regularizer or engine name, e.g. engine:spicy (see 'mklkit plugins')"
        )
    given = _given_params(args.params, checkable)
    failed = total = 0
    blocks: list[str] = []
    for r in checkable:
        if r.kind == "engine":
            text, ok = _check_engine_block(r, given, args)
            failed, total = failed + (not ok), total + 1
            blocks.append(text)
            continue
        fixed = {k: v for k, (v, _) in given.items() if any(p.name == k for p in r.cls.params)}
        try:
            reports = check_parameter_points(r.cls, n_random=args.random, seed=args.seed, fixed=fixed)
        except ValueError as exc:
            if isinstance(exc, ParamError) and fixed:  # a --param value the component refuses
                text = given[exc.key][1] if exc.key in given else " ".join(t for _, t in given.values())
                raise UsageError(f"mklkit check-plugin: --param {text}: {exc}") from None
            # the class refuses its defaults or every draw from its declarations: a failure
            failed, total = failed + 1, total + 1
            blocks.append(f"{r.kind} {r.name}: FAILED: {exc}")
            try:  # the defaults (or given values) may still be checkable
                reports = check_parameter_points(r.cls, n_random=0, seed=args.seed, fixed=fixed)
            except ValueError:
                continue
        # in order: the first point's whole report, the whole report of every failing
        # point, and the heading only of the other passing points
        headings: list[str] = []
        for i, report in enumerate(reports):
            total += 1
            if report.ok and i > 0:
                headings.append(str(report).splitlines()[0])
                continue
            if headings:
                blocks.append("\n".join(headings))
                headings = []
            text = str(report).rstrip()
            if not report.ok:
                failed += 1
                params = " ".join(f"--param {k}={_yaml_value(v)}"
                                  for k, v in report.component.get_params().items())
                text += (f"\n  reproduce: mklkit check-plugin {r.kind}:{r.name} "
                         f"{params + ' ' if params else ''}--random 0 --seed {args.seed}")
            blocks.append(text)
        if headings:
            blocks.append("\n".join(headings))
    for r in skipped:
        blocks.append(f"{r.kind} {r.name}: skipped (the conformance kits check losses, regularizers and engines)")
    _out("\n\n".join(blocks))
    if failed:
        _err(f"mklkit check-plugin: {args.name} failed the conformance checks at {failed} of "
             f"{_plural(total, 'parameter point')} (see the report above)")
        return EXIT_USAGE
    return EXIT_OK


def _check_engine_block(r: Any, given: dict[str, tuple[Any, str]], args: argparse.Namespace) -> tuple[str, bool]:
    """The engine kit (:func:`mklkit.testing.check_engine`) on the engine ``r``: (report text, passed)."""
    from .components.params import ParamError
    from .testing import check_engine

    fixed = {k: v for k, (v, _) in given.items() if any(p.name == k for p in r.cls.params)}
    try:
        engine = r.cls(**fixed)
    except ValueError as exc:
        if isinstance(exc, ParamError) and fixed:  # a --param value the engine refuses
            text = given[exc.key][1] if exc.key in given else " ".join(t for _, t in given.values())
            raise UsageError(f"mklkit check-plugin: --param {text}: {exc}") from None
        return f"{r.kind} {r.name}: FAILED: its defaults are refused: {exc}", False
    report = check_engine(engine, seed=args.seed, max_problems=args.max_problems)
    text = str(report).rstrip()
    if not report.ok:
        params = " ".join(f"--param {t}" for k, (_, t) in given.items() if k in fixed)
        limit = f" --max-problems {args.max_problems}" if args.max_problems is not None else ""
        text += (f"\n  reproduce: mklkit check-plugin {r.kind}:{r.name} "
                 f"{params + ' ' if params else ''}--seed {args.seed}{limit}")
    return text, bool(report.ok)


def _cmd_new_plugin(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .scaffold import new_plugin

    try:
        path = new_plugin(args.name, Path(args.dest), kind=args.kind)
    except (ValueError, OSError) as exc:
        raise UsageError(f"mklkit new-plugin: {exc}") from None
    _out(f"created {path}")
    _out(f"next: pip install -e {path} && mklkit check-plugin {args.name}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    import json

    from .spec import json_schema

    _out(json.dumps(json_schema(sweep=args.sweep), indent=2))
    return EXIT_OK


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------
def _warning_lines(caught: Sequence[Any], hidden: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """One ``warning: <text>`` line per distinct warning, leaving out the categories in ``hidden``."""
    seen: list[str] = []
    for w in caught:
        cat = getattr(w.category, "__name__", "Warning")
        text = _one_line(w.message)
        if cat == "NumbaExperimentalFeatureWarning" or cat in hidden:
            continue
        line = f"warning: {text}"
        if line not in seen:
            seen.append(line)
    return seen


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args: argparse.Namespace | None = None
    previous = None
    try:  # from the first statement: a Ctrl-C at any point of the command is one line
        import warnings

        argv = list(sys.argv[1:] if argv is None else argv)
        previous = _catch_sigint()
        parser = _parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
        if getattr(args, "func", None) is None:
            raise UsageError(
                "mklkit: a command is required: validate, run, sweep, report, plugins, check-plugin, "
                "new-plugin, schema (see 'mklkit --help')"
            )
        with warnings.catch_warnings(record=True) as caught:  # shown as one line each
            code = args.func(args)
        hidden = set(getattr(args, "hidden_warnings", ()))
        # said by a line of its own (the INFO record of mklkit.compilation, SHOWN_LOGGERS), not again
        hidden.add("CompilationWarning")
        if getattr(args, "quiet", False):
            hidden.add("PluginWarning")  # a broken plugin: 'mklkit plugins' lists it
        for line in _warning_lines(caught, hidden):
            _err(line)
        return code
    except BaseException as exc:  # noqa: BLE001 - interrupts and user errors become one line, the rest re-raised
        if _is_interrupt(exc):
            _set_sigint(previous, signal.SIG_IGN)  # a second Ctrl-C does not cut the line short
            _err(exc.line if isinstance(exc, _Interrupted)
                 else getattr(args, "interrupt_line", None) or "mklkit: interrupted")
            return EXIT_INTERRUPTED
        if isinstance(exc, Exception) and _is_user_error(exc):
            _err(exc)
            return EXIT_USAGE
        raise
    finally:
        _set_sigint(previous, previous)


if __name__ == "__main__":  # python -m mklkit.cli
    sys.exit(main())
