"""The commands on components: ``plugins``, ``check-plugin`` (the conformance kits), ``new-plugin``, ``schema``."""

from __future__ import annotations

import argparse
import itertools
from typing import Any, Sequence

from .errors import EXIT_OK, EXIT_USAGE, UsageError
from .output import err, out, plural

#: Component kinds ``mklkit check-plugin`` checks: losses, regularizers, weightings and multiclass losses by
#: ``mklkit.testing.check_component``, engines by ``mklkit.testing.check_engine``.
CHECKABLE_KINDS = ("loss", "regularizer", "engine", "weighting", "multiclass_loss")
_CHECK = "mklkit check-plugin"


def cmd_plugins(args: argparse.Namespace) -> int:
    from ..plugins import format_listing, get_registry

    out(format_listing(get_registry()))
    return EXIT_OK


def _find_components(reg: Any, name: str) -> list[Any]:
    """The registrations ``name`` (``kind:name``, a component or a plugin name) stands for."""
    from ..components.params import did_you_mean
    from ..plugins import KINDS

    kind = None
    if ":" in name:
        kind, _, name = name.partition(":")
        if kind not in KINDS:
            raise UsageError(
                f"{_CHECK}: unknown component kind {kind!r}{did_you_mean(kind, list(KINDS))}; "
                f"got {kind + ':' + name!r}; allowed: {', '.join(KINDS)}"
            )
    regs = reg.registrations(kind)
    found = [r for r in regs if r.name == name] or (list(reg.provided_by(name)) if kind is None else [])
    if found:
        return found
    b = reg.broken_plugin(name) if kind is None else None
    if b is not None:  # a plugin that failed to load provides nothing: say why instead of "no such name"
        raise UsageError(
            f"{_CHECK}: plugin {b.name!r} ({b.dist} {b.version}) could not be loaded, "
            f"so it provides no components: {b.message}".replace(" )", ")")
        )
    names = [f"{r.kind}:{r.name}" for r in regs]
    plain = sorted({r.name for r in regs} | set(reg.plugins) | {b.name for b in reg.broken})
    broken = ""
    if reg.broken:
        what = "; ".join(f"{b.name} ({b.dist} {b.version}): {b.message}".replace(" )", ")") for b in reg.broken)
        broken = f"; {plural(len(reg.broken), 'plugin')} could not be loaded: {what}"
    raise UsageError(
        f"{_CHECK}: no component or plugin named {name!r}{did_you_mean(name, plain)}; got {name!r}; "
        f"allowed: {', '.join(names)}{broken}"
    )


def _given_params(texts: Sequence[str], checked: Sequence[Any]) -> dict[str, tuple[Any, str]]:
    """``--param name=value`` options: name -> (value parsed as YAML, the text given)."""
    from ..components.params import did_you_mean
    from ..spec import parse_override

    declared = list(dict.fromkeys(p.name for r in checked for p in r.cls.params))
    owners = ", ".join(f"{r.kind} {r.name!r}" for r in checked)
    allowed = ", ".join(declared) if declared else f"none ({owners} has no parameters)"
    given: dict[str, tuple[Any, str]] = {}
    for text in texts:
        key, sep, _ = text.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(
                f"{_CHECK}: --param needs the form name=value; got {text!r}; "
                f"allowed: a parameter of {owners}: {allowed}"
            )
        if key not in declared:
            raise UsageError(
                f"{_CHECK}: --param {text}: unknown parameter {key!r}{did_you_mean(key, declared)}; allowed: {allowed}"
            )
        given[key] = (parse_override(text, file=_CHECK, option="--param")[1], text)  # a SpecError is one line too
    return given


def _yaml_value(v: Any) -> str:
    """A parameter value as ``--param`` reads it back (YAML)."""
    import json

    if v is None or isinstance(v, (bool, str)):
        return json.dumps(v)
    return repr(v)


def _fixed(r: Any, given: dict[str, tuple[Any, str]]) -> dict[str, Any]:
    """The ``--param`` values that the component ``r`` declares."""
    return {k: v for k, (v, _) in given.items() if any(p.name == k for p in r.cls.params)}


def _refused(exc: Exception, fixed: dict[str, Any], given: dict[str, tuple[Any, str]]) -> None:
    """Raise the one-line error of a ``--param`` value the component refuses (``exc``)."""
    from ..components.params import ParamError

    if isinstance(exc, ParamError) and fixed:
        text = given[exc.key][1] if exc.key in given else " ".join(t for _, t in given.values())
        raise UsageError(f"{_CHECK}: --param {text}: {exc}") from None


def cmd_check_plugin(args: argparse.Namespace) -> int:
    from ..plugins import get_registry

    found = _find_components(get_registry(), args.name)
    checkable = [r for r in found if r.kind in CHECKABLE_KINDS]
    skipped = [r for r in found if r.kind not in CHECKABLE_KINDS]
    if not checkable:
        what = ", ".join(f"{r.kind} {r.name!r}" for r in skipped)
        raise UsageError(
            f"{_CHECK}: the conformance kits check losses, regularizers, engines, weightings and multiclass losses; "
            f"got {what}; allowed: a loss, regularizer, engine, weighting or multiclass_loss name, e.g. "
            "engine:spicy (see 'mklkit plugins')"
        )
    given = _given_params(args.params, checkable)
    failed = total = 0
    blocks: list[str] = []
    for r in checkable:
        check = _check_engine if r.kind == "engine" else _check_component
        texts, n_failed, n_total = check(r, given, args)
        blocks += texts
        failed, total = failed + n_failed, total + n_total
    blocks += [
        f"{r.kind} {r.name}: skipped (the conformance kits check losses, regularizers, engines and weightings)"
        for r in skipped
    ]
    out("\n\n".join(blocks))
    if failed:
        err(
            f"{_CHECK}: {args.name} failed the conformance checks at {failed} of "
            f"{plural(total, 'parameter point')} (see the report above)"
        )
        return EXIT_USAGE
    return EXIT_OK


def _check_component(r: Any, given: dict[str, tuple[Any, str]], args: argparse.Namespace) -> tuple[list[str], int, int]:
    """The component kit on a loss, regularizer or weighting at its parameter points: (report blocks, failed, checked).

    The blocks: the first point's whole report, the whole report of every failing point, the heading only of the
    other passing points."""
    from ..testing import check_parameter_points

    fixed = _fixed(r, given)
    blocks: list[str] = []
    failed = total = 0
    try:
        reports = check_parameter_points(r.cls, n_random=args.random, seed=args.seed, fixed=fixed)
    except ValueError as exc:
        _refused(exc, fixed, given)
        # the class refuses its defaults or every draw from its declarations: a failure
        failed, total = 1, 1
        blocks.append(f"{r.kind} {r.name}: FAILED: {exc}")
        try:  # the defaults (or given values) may still be checkable
            reports = check_parameter_points(r.cls, n_random=0, seed=args.seed, fixed=fixed)
        except ValueError:
            return blocks, failed, total
    total += len(reports)
    for brief, group in itertools.groupby(enumerate(reports), key=lambda point: point[0] > 0 and point[1].ok):
        if brief:  # passing points after the first: one block of their headings
            blocks.append("\n".join(str(report).splitlines()[0] for _, report in group))
            continue
        for _, report in group:
            text = str(report).rstrip()
            if not report.ok:
                failed += 1
                params = "".join(f"--param {k}={_yaml_value(v)} " for k, v in report.component.get_params().items())
                text += f"\n  reproduce: {_CHECK} {r.kind}:{r.name} {params}--random 0 --seed {args.seed}"
            blocks.append(text)
    return blocks, failed, total


def _check_engine(r: Any, given: dict[str, tuple[Any, str]], args: argparse.Namespace) -> tuple[list[str], int, int]:
    """The engine kit (:func:`mklkit.testing.check_engine`) on the engine ``r``: ([report], failed, 1)."""
    from ..testing import check_engine

    fixed = _fixed(r, given)
    try:
        engine = r.cls(**fixed)
    except ValueError as exc:
        _refused(exc, fixed, given)
        return [f"{r.kind} {r.name}: FAILED: its defaults are refused: {exc}"], 1, 1
    report = check_engine(engine, seed=args.seed, max_problems=args.max_problems)
    text = str(report).rstrip()
    if not report.ok:
        params = "".join(f"--param {t} " for k, (_, t) in given.items() if k in fixed)
        limit = f" --max-problems {args.max_problems}" if args.max_problems is not None else ""
        text += f"\n  reproduce: {_CHECK} {r.kind}:{r.name} {params}--seed {args.seed}{limit}"
    return [text], int(not report.ok), 1


def cmd_new_plugin(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..scaffold import new_plugin

    try:
        path = new_plugin(args.name, Path(args.dest), kind=args.kind)
    except (ValueError, OSError) as exc:
        raise UsageError(f"mklkit new-plugin: {exc}") from None
    out(f"created {path}")
    out(f"next: pip install -e {path} && mklkit check-plugin {args.name}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    import json

    from ..spec import json_schema

    out(json.dumps(json_schema(sweep=args.sweep), indent=2))
    return EXIT_OK
