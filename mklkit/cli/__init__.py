"""The ``mklkit`` command line; the only package that writes to stdout or sets exit codes.

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
import signal
import sys
from typing import Sequence

from .errors import (
    EXIT_INTERRUPTED,
    EXIT_NOT_CONVERGED,
    EXIT_OK,
    EXIT_USAGE,
    Interrupted,
    UsageError,
    catch_sigint,
    forget_sigint,
    is_interrupt,
    is_user_error,
    set_sigint,
)
from .output import err, warning_lines
from .parser import command
from .parser import parser as make_parser

__all__ = ["main", "EXIT_OK", "EXIT_USAGE", "EXIT_NOT_CONVERGED", "EXIT_INTERRUPTED"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args: argparse.Namespace | None = None
    previous = None
    try:  # from the first statement: a Ctrl-C at any point of the command is one line
        import warnings

        argv = list(sys.argv[1:] if argv is None else argv)
        previous = catch_sigint()
        parser = make_parser()
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
            code = command(args)(args)
        hidden = set(getattr(args, "hidden_warnings", ()))
        # said by a line of its own (the INFO record of mklkit.compilation, SHOWN_LOGGERS), not again
        hidden.add("CompilationWarning")
        if getattr(args, "quiet", False):
            hidden.add("PluginWarning")  # a broken plugin: 'mklkit plugins' lists it
        for line in warning_lines(caught, hidden):
            err(line)
        return code
    except BaseException as exc:  # noqa: BLE001 - interrupts and user errors become one line, the rest re-raised
        if is_interrupt(exc):
            set_sigint(previous, signal.SIG_IGN)  # a second Ctrl-C does not cut the line short
            err(
                exc.line
                if isinstance(exc, Interrupted)
                else getattr(args, "interrupt_line", None) or "mklkit: interrupted"
            )
            return EXIT_INTERRUPTED
        if isinstance(exc, Exception) and is_user_error(exc):
            err(exc)
            return EXIT_USAGE
        raise
    finally:
        set_sigint(previous, previous)
        forget_sigint()
