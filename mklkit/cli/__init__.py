"""The ``mklkit`` command line (its commands: ``docs/specs.md``); the only package that writes to stdout or sets
exit codes.

Exit codes: 0 success; 2 a user error (bad spec, data, option, name: one line on stderr, no traceback) or a failed
plugin check; 3 a run that did not converge, with ``--strict``; 130 interrupted; 1 a sweep some of whose tasks
failed.  Anything else is an internal error and shows a traceback.  Heavy modules are imported inside the commands,
so ``mklkit --help`` answers at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Sequence

from .errors import EXIT_INTERRUPTED, EXIT_NOT_CONVERGED, EXIT_OK, EXIT_USAGE, UsageError, catch_sigint, forget_sigint
from .errors import is_interrupt, is_user_error, set_sigint
from .output import err, one_line
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
        try:
            args = make_parser().parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
        if args.command is None:
            raise UsageError(
                "mklkit: a command is required: validate, run, sweep, report, plugins, check-plugin, "
                "new-plugin, schema (see 'mklkit --help')"
            )
        with warnings.catch_warnings(record=True) as caught:  # shown as one line each
            code = command(args)(args)
        # a CompilationWarning is said by the INFO record of mklkit.compilation; a broken plugin by 'mklkit plugins'
        hidden = {*getattr(args, "hidden_warnings", ()), "CompilationWarning", "NumbaExperimentalFeatureWarning"}
        if getattr(args, "quiet", False):
            hidden.add("PluginWarning")
        shown = [w for w in caught if w.category.__name__ not in hidden]
        for line in dict.fromkeys(f"warning: {one_line(w.message)}" for w in shown):  # once each
            err(line)
        return code
    except BaseException as exc:  # noqa: BLE001 - interrupts and user errors become one line, the rest re-raised
        if is_interrupt(exc):
            set_sigint(previous, signal.SIG_IGN)  # a second Ctrl-C does not cut the line short
            err(getattr(args, "interrupt_line", None) or "mklkit: interrupted")  # a command's own words, if it has any
            return EXIT_INTERRUPTED
        if isinstance(exc, Exception) and is_user_error(exc):
            err(exc)
            return EXIT_USAGE
        raise
    finally:
        set_sigint(previous, previous)
        forget_sigint()
