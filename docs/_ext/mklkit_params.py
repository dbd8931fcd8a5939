"""A component's declared parameters (its ``params``: :class:`mklkit.Param`) as the Parameters section of its
API page, with what each accepts and its default, the text ``mklkit plugins`` prints, so that the page and the
declaration cannot disagree."""

from __future__ import annotations

from typing import Any


def _default(p: Any) -> str:
    return "" if p.required else f", default={p.default!r}"


def parameters_section(cls: type) -> list[str]:
    """The numpydoc lines of ``cls.params`` (none when it declares no parameters)."""
    params = getattr(cls, "params", ())
    if not params:
        return []
    lines = ["", "Parameters", "----------"]
    for p in params:
        lines.append(f"{p.name} : {p.allowed()}{_default(p)}")
        lines.append(f"    {p.doc[:1].upper()}{p.doc[1:]}." if p.doc else "    (No description.)")
    return lines


def _add_parameters(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    from mklkit.components.base import Component

    if what != "class" or not (isinstance(obj, type) and issubclass(obj, Component)):
        return
    if any(line.strip() == "Parameters" for line in lines):
        return  # the docstring documents its parameters itself
    section = parameters_section(obj)
    if section:
        # before the first other section, so that numpydoc's order holds
        heads = [i for i in range(len(lines) - 1) if lines[i + 1].strip().startswith("---") and lines[i].strip()]
        at = heads[0] if heads else len(lines)
        lines[at:at] = section + [""]


def setup(app: Any) -> dict[str, Any]:
    # before numpydoc (priority 500), which turns the sections into reST
    app.connect("autodoc-process-docstring", _add_parameters, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
