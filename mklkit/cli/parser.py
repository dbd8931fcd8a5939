"""The command line's arguments: one subcommand per command, argparse's errors as one line."""

from __future__ import annotations

import argparse
from typing import Any, Callable, NoReturn

from .errors import UsageError

#: Random parameter points ``mklkit check-plugin`` checks besides the defaults.
CHECK_RANDOM_POINTS = 5
_OUT_HELP = "output directory (default: the spec's output.dir, else runs/<spec name>)"
_QUIET_HELP = "no progress lines on stderr (nor warnings about plugins that could not be loaded)"
_CLUSTER = "a dask.distributed cluster, e.g. tcp://127.0.0.1:8786"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _at_least(least: int) -> Callable[[str], int]:
    """argparse's ``type`` of a count: an integer >= ``least`` (other text: argparse's ``invalid int value``)."""

    def count(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be an integer >= {least}; got {value}")
        return value

    count.__name__ = "int"  # the type argparse names in its message
    return count


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

    _add_spec_commands(sub)
    _add_component_commands(sub)
    return p


def command(args: argparse.Namespace) -> Callable[[argparse.Namespace], int]:
    """The function of the parsed command, its module imported now (``mklkit --help`` imports none)."""
    if args.command in ("validate", "run", "report", "sweep"):
        from . import run as module
    else:
        from . import components as module
    return getattr(module, "cmd_" + args.command.replace("-", "_"))


def _add(sub: Any, name: str, help_: str, spec: str | None = None) -> argparse.ArgumentParser:
    """The subcommand ``name``, run by ``cmd_<name>`` (:func:`command`); with ``spec``, a SPEC file and --set."""
    sp = sub.add_parser(name, help=help_, description=help_)
    if spec is not None:
        sp.add_argument("spec", metavar="SPEC", help=spec)
        sp.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY.PATH=VALUE",
            dest="overrides",
            help="override a spec value (parsed as YAML), e.g. --set problem.C=0.1; repeatable",
        )
    return sp


def _add_spec_commands(sub: Any) -> None:
    _add(sub, "validate", "check a spec completely (data, labels, kernels, engine) without solving", "YAML spec file")

    sp = _add(sub, "run", "solve a spec and write summary.json, history.json, solution.npz", "YAML spec file")
    sp.add_argument("--out", metavar="DIR", help=_OUT_HELP)
    sp.add_argument("--quiet", "-q", action="store_true", help=_QUIET_HELP)
    sp.add_argument("--force", action="store_true", help="overwrite an earlier run's results in the output directory")
    sp.add_argument("--strict", action="store_true", help="exit with code 3 when the solver does not converge")
    sp.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=f"build the kernel bank in shards on {_CLUSTER} (the same as --set kernels.sharded.scheduler=ADDRESS; "
        "needs mklkit[dask])",
    )

    sp = _add(
        sub,
        "sweep",
        "run a grid of problems (lists in the spec) with cross-validation, write results.csv and refit the best "
        "configuration (docs/sweeps.md)",
        "YAML sweep spec (a run spec with lists and a cv section)",
    )
    where = sp.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, default=1, metavar="N", help="local worker processes (default 1: in this process)"
    )
    where.add_argument("--scheduler", metavar="ADDRESS", help=f"run the tasks on {_CLUSTER} (needs mklkit[dask])")
    sp.add_argument("--out", metavar="DIR", help=_OUT_HELP)
    again = sp.add_mutually_exclusive_group()
    again.add_argument(
        "--resume", action="store_true", help="keep the finished rows of an interrupted sweep, solve the rest"
    )
    again.add_argument(
        "--force",
        action="store_true",
        help="start over in a directory that holds an earlier sweep (its best/ refits are removed first)",
    )
    sp.add_argument(
        "--dry-run", action="store_true", help="validate every grid point and fold, print the grid size; solve nothing"
    )
    sp.add_argument("--quiet", "-q", action="store_true", help=_QUIET_HELP)

    sp = _add(sub, "report", "draw gap.png, active.png, weights.png into a run directory")
    sp.add_argument("out", metavar="OUT", help="run directory written by 'mklkit run'")
    sp.add_argument(
        "--top", type=_at_least(1), default=15, metavar="K", help="label the K largest kernel weights (default 15)"
    )


def _add_component_commands(sub: Any) -> None:
    _add(sub, "plugins", "list the installed components (losses, regularizers, kernels, engines) and plugins")

    sp = _add(
        sub,
        "check-plugin",
        "run the conformance kits on the component(s) named NAME: losses and regularizers at their default "
        "parameters and at random parameter points, engines (engine:NAME) on the kit's problems",
    )
    sp.add_argument(
        "name", metavar="NAME", help="component name, kind:name (e.g. engine:spicy), or plugin/distribution name"
    )
    sp.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        dest="params",
        help="check at this parameter value (parsed as YAML) instead of the default, e.g. --param tau=0.2 or, for an "
        "engine, --param tol=1e-6; the random points keep it; repeatable",
    )
    sp.add_argument(
        "--random",
        type=_at_least(0),
        default=CHECK_RANDOM_POINTS,
        metavar="N",
        help="random parameter points of losses and regularizers drawn from the declarations besides the defaults "
        f"(default {CHECK_RANDOM_POINTS}; 0: only the defaults or the --param values)",
    )
    sp.add_argument(
        "--seed",
        type=_at_least(0),
        default=0,
        metavar="S",
        help="seed of the random parameter points and of the check points (default 0)",
    )
    sp.add_argument(
        "--max-problems",
        type=_at_least(1),
        metavar="N",
        help="engines: solve at most N of the kit's problems (default: all the engine supports)",
    )

    sp = _add(sub, "new-plugin", "create the skeleton of a plugin distribution")
    sp.add_argument("name", metavar="NAME", help="component name: lowercase letters, digits, underscores")
    sp.add_argument("--dest", default=".", metavar="DIR", help="folder to create it in (default: .)")
    sp.add_argument("--kind", default="loss", choices=("loss", "regularizer"), help="component kind (default: loss)")

    sp = _add(sub, "schema", "print a JSON Schema of the spec format (generated from the spec's models)")
    sp.add_argument(
        "--sweep", action="store_true", help="the schema of a sweep spec (lists at the sweep keys, the cv section)"
    )
