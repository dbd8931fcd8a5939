"""The commands on components: ``plugins``, ``check-plugin`` (the conformance kits), ``new-plugin``, ``schema``."""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from .errors import EXIT_OK, EXIT_USAGE, UsageError
from .output import err, out, plural

#: Component kinds ``mklkit check-plugin`` checks: losses and regularizers by
#: ``mklkit.testing.check_component``, engines by ``mklkit.testing.check_engine``.
CHECKABLE_KINDS = ("loss", "regularizer", "engine")


def cmd_plugins(args: argparse.Namespace) -> int:
    from ..plugins import format_listing, get_registry

    out(format_listing(get_registry()))
    return EXIT_OK


def _broken_line(reg: Any) -> str:
    """``; N plugin(s) could not be loaded: name (dist version): reason, ...`` or ``""``."""
    if not reg.broken:
        return ""
    what = "; ".join(f"{b.name} ({b.dist} {b.version}): {b.message}".replace(" )", ")") for b in reg.broken)
    return f"; {plural(len(reg.broken), 'plugin')} could not be loaded: {what}"


def _find_components(reg: Any, name: str) -> list[Any]:
    from ..components.params import did_you_mean
    from ..plugins import KINDS

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
    from ..components.params import did_you_mean
    from ..spec import SpecError, parse_override

    declared = list(dict.fromkeys(p.name for r in checked for p in r.cls.params))
    owners = ", ".join(f"{r.kind} {r.name!r}" for r in checked)
    allowed = ", ".join(declared) if declared else f"none ({owners} has no parameters)"
    given: dict[str, tuple[Any, str]] = {}
    for text in texts:
        key, sep, value_text = text.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise UsageError(
                f"mklkit check-plugin: --param needs the form name=value; got {text!r}; "
                f"allowed: a parameter of {owners}: {allowed}"
            )
        if key not in declared:
            raise UsageError(
                f"mklkit check-plugin: --param {text}: unknown parameter {key!r}"
                f"{did_you_mean(key, declared)}; allowed: {allowed}"
            )
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


def cmd_check_plugin(args: argparse.Namespace) -> int:
    from ..components.params import ParamError
    from ..plugins import get_registry
    from ..testing import check_parameter_points

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
                params = " ".join(f"--param {k}={_yaml_value(v)}" for k, v in report.component.get_params().items())
                text += (
                    f"\n  reproduce: mklkit check-plugin {r.kind}:{r.name} "
                    f"{params + ' ' if params else ''}--random 0 --seed {args.seed}"
                )
            blocks.append(text)
        if headings:
            blocks.append("\n".join(headings))
    for r in skipped:
        blocks.append(f"{r.kind} {r.name}: skipped (the conformance kits check losses, regularizers and engines)")
    out("\n\n".join(blocks))
    if failed:
        err(
            f"mklkit check-plugin: {args.name} failed the conformance checks at {failed} of "
            f"{plural(total, 'parameter point')} (see the report above)"
        )
        return EXIT_USAGE
    return EXIT_OK


def _check_engine_block(r: Any, given: dict[str, tuple[Any, str]], args: argparse.Namespace) -> tuple[str, bool]:
    """The engine kit (:func:`mklkit.testing.check_engine`) on the engine ``r``: (report text, passed)."""
    from ..components.params import ParamError
    from ..testing import check_engine

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
        text += (
            f"\n  reproduce: mklkit check-plugin {r.kind}:{r.name} "
            f"{params + ' ' if params else ''}--seed {args.seed}{limit}"
        )
    return text, bool(report.ok)


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
