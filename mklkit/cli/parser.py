"""The command line's arguments: one subcommand per command, argparse's errors as one line."""

from __future__ import annotations

import argparse
from typing import Any, Callable, NoReturn

from .errors import UsageError

#: Random parameter points ``mklkit check-plugin`` checks besides the defaults.
CHECK_RANDOM_POINTS = 5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def parser() -> argparse.ArgumentParser:
    from .. import __version__

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


def command(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The function of the parsed command, its module imported now (``mklkit --help`` imports none)."""
    name = args.func
    if name in ("cmd_validate", "cmd_run", "cmd_report"):
        from . import run as module
    elif name == "cmd_sweep":
        from . import sweep as module
    else:
        from . import components as module
    return getattr(module, name)


def _add_command(sub: Any, name: str, help_: str, func: str) -> argparse.ArgumentParser:
    """The subcommand ``name`` (its help is also its description), running the function named ``func``
    (:func:`command`)."""
    sp = sub.add_parser(name, help=help_, description=help_)
    sp.set_defaults(func=func)
    return sp


def _add_overrides(sp: argparse.ArgumentParser) -> None:
    """The repeatable ``--set KEY.PATH=VALUE`` of the commands that read a spec."""
    sp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        dest="overrides",
        help="override a spec value (parsed as YAML), e.g. --set problem.C=0.1; repeatable",
    )


def _add_validate_and_run(sub: Any) -> None:
    """The ``validate`` and ``run`` subcommands."""
    sp = _add_command(
        sub, "validate", "check a spec completely (data, labels, kernels, engine) without solving", "cmd_validate"
    )
    sp.add_argument("spec", metavar="SPEC", help="YAML spec file")
    _add_overrides(sp)

    sp = _add_command(sub, "run", "solve a spec and write summary.json, history.json, solution.npz", "cmd_run")
    sp.add_argument("spec", metavar="SPEC", help="YAML spec file")
    _add_overrides(sp)
    sp.add_argument(
        "--out", metavar="DIR", help="output directory (default: the spec's output.dir, else runs/<spec name>)"
    )
    sp.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress lines on stderr (nor warnings about plugins that could not be loaded)",
    )
    sp.add_argument(
        "--force", action="store_true", help="overwrite the results of an earlier run in the output directory"
    )
    sp.add_argument("--strict", action="store_true", help="exit with code 3 when the solver does not converge")
    sp.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="build the kernel bank in shards on a dask.distributed cluster, e.g. tcp://127.0.0.1:8786 "
        "(the same as --set kernels.sharded.scheduler=ADDRESS; needs mklkit[dask])",
    )


def _add_sweep(sub: Any) -> None:
    """The ``sweep`` subcommand."""
    sp = _add_command(
        sub,
        "sweep",
        "run a grid of problems (lists in the spec) with cross-validation, write results.csv "
        "and refit the best configuration (docs/sweeps.md)",
        "cmd_sweep",
    )
    sp.add_argument("spec", metavar="SPEC", help="YAML sweep spec (a run spec with lists and a cv section)")
    _add_overrides(sp)
    where = sp.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, default=1, metavar="N", help="local worker processes (default 1: solve in this process)"
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the tasks on a dask.distributed cluster, e.g. tcp://127.0.0.1:8786 (needs mklkit[dask])",
    )
    sp.add_argument(
        "--out", metavar="DIR", help="output directory (default: the spec's output.dir, else runs/<spec name>)"
    )
    again = sp.add_mutually_exclusive_group()
    again.add_argument(
        "--resume", action="store_true", help="keep the finished rows of an interrupted sweep and solve the rest"
    )
    again.add_argument(
        "--force",
        action="store_true",
        help="start over in a directory that holds an earlier sweep (its best/ refits are removed first)",
    )
    sp.add_argument(
        "--dry-run",
        action="store_true",
        help="validate every grid point and fold and print the grid size; solve nothing",
    )
    sp.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress lines on stderr (nor warnings about plugins that could not be loaded)",
    )


def _add_report_and_plugins(sub: Any) -> None:
    """The ``report`` and ``plugins`` subcommands."""
    sp = _add_command(sub, "report", "draw gap.png, active.png, weights.png into a run directory", "cmd_report")
    sp.add_argument("out", metavar="OUT", help="run directory written by 'mklkit run'")
    sp.add_argument("--top", type=int, default=15, metavar="K", help="label the K largest kernel weights (default 15)")

    _add_command(
        sub,
        "plugins",
        "list the installed components (losses, regularizers, kernels, engines) and plugins",
        "cmd_plugins",
    )


def _add_check_plugin(sub: Any) -> None:
    """The ``check-plugin`` subcommand."""
    sp = _add_command(
        sub,
        "check-plugin",
        "run the conformance kits on the component(s) named NAME: losses and "
        "regularizers at their default parameters and at random parameter points, engines "
        "(engine:NAME) on the kit's problems",
        "cmd_check_plugin",
    )
    sp.add_argument(
        "name", metavar="NAME", help="component name, kind:name (e.g. engine:spicy), or a plugin/distribution name"
    )
    sp.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        dest="params",
        help="check at this parameter value (parsed as YAML) instead of the default, e.g. "
        "--param tau=0.2 or, for an engine, --param tol=1e-6; the random points keep it; repeatable",
    )
    sp.add_argument(
        "--random",
        type=int,
        default=CHECK_RANDOM_POINTS,
        metavar="N",
        help=f"random parameter points of losses and regularizers drawn from the declarations "
        f"besides the defaults (default {CHECK_RANDOM_POINTS}; 0: only the defaults or the --param values)",
    )
    sp.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the random parameter points and of the check points (default 0)",
    )
    sp.add_argument(
        "--max-problems",
        type=int,
        default=None,
        metavar="N",
        help="engines: solve at most N of the kit's problems (default: all that the engine supports)",
    )


def _add_new_plugin_and_schema(sub: Any) -> None:
    """The ``new-plugin`` and ``schema`` subcommands."""
    sp = _add_command(sub, "new-plugin", "create the skeleton of a plugin distribution", "cmd_new_plugin")
    sp.add_argument("name", metavar="NAME", help="component name: lowercase letters, digits, underscores")
    sp.add_argument("--dest", default=".", metavar="DIR", help="folder to create it in (default: .)")
    sp.add_argument("--kind", default="loss", choices=("loss", "regularizer"), help="component kind (default: loss)")

    sp = _add_command(
        sub, "schema", "print a JSON Schema of the spec format (generated from the spec's models)", "cmd_schema"
    )
    sp.add_argument(
        "--sweep", action="store_true", help="the schema of a sweep spec: lists at the sweep keys and the cv section"
    )
