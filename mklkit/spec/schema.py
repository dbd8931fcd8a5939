r"""``mklkit schema``: pydantic's JSON Schema of :class:`~mklkit.spec.models.Spec` with what only the installed
plugins know (components and their ``Param``\ s, data sets, presets); with ``sweep=True`` the sweep grammar."""

from __future__ import annotations

import copy
import math
from typing import Any, Sequence

from ..components.params import Param
from ..pipeline import CVSettings, DEFAULTS
from ..plugins import get_registry
from .models import SWEEP_KEYS, SWEEP_SECTION, Spec, model_schema


def _listed(node: dict[str, Any]) -> dict[str, Any]:
    """One value, or a non-empty list of values (a sweep axis)."""
    one = {k: v for k, v in node.items() if k not in ("default", "description", "title")}
    out: dict[str, Any] = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}
    for k in ("description", "default", "title"):
        if k in node:
            out[k] = node[k]
    return out


def _param_schema(p: Param, sweep: bool) -> dict[str, Any]:
    t = {float: "number", int: "integer", bool: "boolean", str: "string"}.get(p.type, "string")
    s: dict[str, Any] = {"type": [t, "null"] if p.nullable else t, "description": p.doc}
    if p.choices is not None:
        s["enum"] = list(p.choices)
    if p.low is not None and math.isfinite(p.low):
        s["exclusiveMinimum" if p.low_open else "minimum"] = p.low
    if p.high is not None and math.isfinite(p.high):
        s["exclusiveMaximum" if p.high_open else "maximum"] = p.high
    if not p.required:
        s["default"] = p.default
    return _listed(s) if sweep else s


def _component_schema(kind: str, registrations: Sequence[Any], sweep: bool) -> dict[str, Any]:
    """A component: its name, or a mapping with name and the parameters its ``Param``s declare."""
    variants: list[dict[str, Any]] = []
    for r in registrations:
        params = getattr(r.cls, "params", ())
        variants.append(
            {
                "type": "object",
                "description": r.description,
                "properties": {"name": {"const": r.name}, **{p.name: _param_schema(p, sweep) for p in params}},
                "required": ["name", *(p.name for p in params if p.required)],
                "additionalProperties": False,
            }
        )
    names = [r.name for r in registrations]
    one_of: list[dict[str, Any]] = [{"type": "string", "enum": names}] if names else []
    return {"description": f"a {kind}: its name, or a mapping with name and parameters", "oneOf": one_of + variants}


def _fill(node: Any, reg: Any, sweep: bool) -> Any:
    """Put each component's schema where the models say ``x-component``."""
    if isinstance(node, dict):
        if "x-component" in node:
            out = _component_schema(node["x-component"], reg.registrations(node["x-component"]), sweep)
            if "default" in node:
                out["default"] = node["default"]
            return out
        return {k: _fill(v, reg, sweep) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, reg, sweep) for v in node]
    return node


def _section(props: dict[str, Any], name: str) -> dict[str, Any]:
    """The object schema of a section (an optional section is ``anyOf [object, null]``)."""
    node = props[name]
    for alt in node.get("anyOf", [node]):
        if alt.get("type") == "object":
            return alt
    return node


def json_schema(sweep: bool = False) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the spec with the installed components; ``sweep=True``: of a sweep
    spec (lists at the sweep keys and component parameters, the ``cv`` section)."""
    from ..data import available
    from ..kernels import available_presets

    schema = _fill(model_schema(Spec), get_registry(), sweep)  # new containers: the cached schema stays
    props = schema["properties"]
    data, kernels = _section(props, "data"), _section(props, "kernels")
    data["properties"]["builtin"] = {"type": "string", "enum": list(available()), "description": "a bundled data set"}
    presets = list(available_presets())
    kernels["properties"]["preset"] = {
        "type": "string",
        "description": "a kernel-bank preset",
        **({"enum": presets} if presets else {}),
    }
    kernels["properties"]["bank"]["items"] = {"type": ["object", "string"]}
    props["engine"]["default"] = {"name": DEFAULTS["engine.name"]}
    if sweep:
        for key in SWEEP_KEYS:
            section, _, sub = key.partition(".")
            if sub:
                sec = _section(props, section)
                sec["properties"][sub] = _listed(sec["properties"][sub])
            else:
                props[section] = _listed(props[section])
        props[SWEEP_SECTION] = copy.deepcopy(model_schema(CVSettings))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mklkit sweep spec" if sweep else "mklkit spec",
        **{k: v for k, v in schema.items() if k != "title"},
    }
