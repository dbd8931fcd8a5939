"""The pipeline's error (the spec's: with the file in front), its key, problem, value and allowed as data, and
the one conversion of pydantic's structured errors into it (what is allowed read from the model's JSON Schema)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from ..components.params import MISSING, did_you_mean, interval
from ..plugins import get_registry

#: What a precomputed-kernel ``.npz`` holds (the ``allowed`` part of its errors).
NPZ_ALLOWED = (
    "an .npz with K_train (M, N, N) symmetric PSD, y_train (N,); optional K_test (M, N_test, N), "
    "y_test, names, K_test_diag"
)
#: What a precomputed-factor ``.npz`` holds.
FACTOR_NPZ_ALLOWED = (
    "an .npz with L_train (N, R) dense finite, starts (M+1,) or ranks (M,), y_train (N,); "
    "optional L_test (N_test, R) + y_test (N_test,), names (M,)"
)


def one_line(text: Any) -> str:
    """``text`` on one line (runs of whitespace as one space)."""
    return " ".join(str(text).split())


def _show(value: Any, limit: int = 80) -> str:
    """A short one-line rendering of an offending value (a path as its text)."""
    text = one_line(repr(str(value) if isinstance(value, Path) else value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def strip_prefix(text: str, *prefixes: str) -> str:
    """``text`` without a leading ``"<prefix>: "`` (data errors start with the file they read)."""
    for prefix in prefixes:
        if prefix and text.startswith(prefix + ": "):
            return text[len(prefix) + 2 :]
    return text


def _mark_override(problem: str, key: str, overridden: Sequence[str]) -> str:
    """``problem`` marked ``(set by --set)`` when ``key`` was set on the command line."""
    k, *given = (re.sub(r"\[(\d+)\]", r".\1", path) for path in (key, *overridden))  # bank[1] as bank.1
    if any(k == o or k.startswith(o + ".") or o.startswith(k + ".") for o in given):
        return f"{problem} (set by --set)"
    return problem


class PipelineError(ValueError):
    """A problem with the data, the bank or the problem settings:
    ``[<file>: ]<key>: <problem>; got <value>; allowed: <allowed>`` (the parts that are given).

    Attributes
    ----------
    key : str
        Spec key path (``kernels.bank[1].width``); the estimators map it to their parameter name.
    problem : str
        What is wrong; marked ``(set by --set)`` when ``key`` is one of the key paths ``overridden``.
    value : Any
        The offending value (:attr:`has_value` tells whether there is one).
    shown : str or None
        How the value is shown (``repr`` of it, or a path as written).
    allowed : str or None
    file : str or None
        The spec file as given (``"<spec>"`` for an in-memory mapping), ``None`` outside a spec.
    """

    NO_VALUE: Any = MISSING

    def __init__(
        self,
        key: str,
        problem: str,
        value: Any = MISSING,
        allowed: str | None = None,
        *,
        shown: str | None = None,
        file: str | None = None,
        overridden: Sequence[str] = (),
    ) -> None:
        self.key = key
        self.file = file
        self.problem = one_line(_mark_override(problem, key, overridden))
        self.has_value = value is not MISSING or shown is not None
        self.value = None if value is MISSING else value
        self.shown = one_line(shown) if shown is not None else (_show(value) if self.has_value else None)
        self.allowed = one_line(allowed) if allowed else None
        super().__init__(self.message())

    def message(self, key: str | None = None) -> str:
        """The one-line message, with ``key`` in place of the own one."""
        key = self.key if key is None else key
        parts = [f"{key}: {self.problem}" if key else self.problem]
        if self.has_value:
            parts.append(f"got {self.shown}")
        if self.allowed:
            parts.append(f"allowed: {self.allowed}")
        text = one_line("; ".join(parts))
        return text if self.file is None else f"{self.file}: {text}"

    def __str__(self) -> str:
        return self.message()


class SpecError(PipelineError):
    """A spec problem: a :class:`PipelineError` with the spec ``file`` in front (``"<spec>"`` for an in-memory
    mapping); ``key`` is ``line L, column C`` for YAML syntax, ``overridden`` the key paths set by ``--set``
    (a problem at one of them is marked ``(set by --set)``)."""

    def __init__(
        self,
        file: str,
        key: str,
        problem: str,
        value: Any = MISSING,
        allowed: str | None = None,
        *,
        shown: str | None = None,
        overridden: Sequence[str] = (),
    ) -> None:
        super().__init__(key, problem, value, allowed, shown=shown, file=str(file), overridden=overridden)


def not_among(key: str, problem: str, value: Any, names: Sequence[str]) -> PipelineError:
    """``<key>: <problem> (did you mean ...?); got <value>; allowed: <names>``."""
    return PipelineError(key, problem + did_you_mean(str(value), names), value, ", ".join(names))


def from_pipeline(exc: PipelineError, file: str, overridden: Sequence[str] = ()) -> SpecError:
    """A PipelineError as the spec's one-line error."""
    return SpecError(file, exc.key, exc.problem, allowed=exc.allowed, shown=exc.shown, overridden=overridden)


def bank_error(exc: Any, base: str, absolute: bool = True) -> PipelineError:
    """A :class:`~mklkit.kernels.description.BankError` as a PipelineError under ``base``; ``absolute``:
    keys under ``kernels.``, else relative to it (``bank[1].width``)."""
    key = exc.key or base
    if key.startswith("bank"):
        key = "kernels." + key if absolute else key
    elif base.startswith("kernels.") and not key.startswith("kernels"):
        key = f"{base}.{key}" if exc.key else base
    return PipelineError(key, exc.problem, exc.value, exc.allowed)


def key_path(loc: Sequence[Any], key: str = "") -> str:
    """``("kernels", "bank", 0, "width")`` -> ``kernels.bank[0].width``; ``key`` appended."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    if key:
        out += key if key.startswith("[") else (f".{key}" if out else key)
    return out


def from_validation(exc: Any, schema: dict[str, Any], root: Sequence[Any] = ()) -> PipelineError:
    """The first of pydantic's errors (a ``ValidationError``; an unknown key first) as a :class:`PipelineError`.

    What is allowed is read from ``schema``, the validated model's JSON Schema (:func:`inline_refs`), so the message and
    ``mklkit schema`` agree; ``root`` is where the model sits in a spec (``("cv",)``).  A PipelineError
    raised by a validator keeps its parts, its key relative to where pydantic found it.
    """
    errors = exc.errors(include_url=False)
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    rel = [part for part in err["loc"] if not _union_member(part)]
    loc = list(root) + rel
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "value_error" and isinstance(ctx.get("error"), PipelineError):
        inner = ctx["error"]
        return PipelineError(key_path(loc, inner.key), inner.problem, allowed=inner.allowed, shown=inner.shown)
    key = key_path(loc)
    if kind == "extra_forbidden":
        parent = _at(schema, rel[:-1])
        keys = list((parent or {}).get("properties", {}))
        name = str(loc[-1])
        return not_among(key, "unknown key", name, keys)
    field = _at(schema, rel)
    allowed = allowed_words(field) if field is not None else None
    if kind == "missing":
        return PipelineError(key, f"required {'section' if len(loc) == 1 else 'key'} is missing", allowed=allowed)
    value = err.get("input", MISSING)
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return PipelineError(key, "must be a mapping", value, allowed)
    return PipelineError(key, "invalid value", value, allowed)


def _union_member(part: Any) -> bool:
    """Whether a part of pydantic's ``loc`` names a member of a union (``literal[False]``), not a key."""
    return isinstance(part, str) and ("[" in part or part in ("bool", "int", "float", "str", "none"))


def inline_refs(node: Any, defs: dict[str, Any] | None = None) -> Any:
    """A JSON Schema with every ``$ref`` replaced by its definition, in new containers (the models are not
    recursive)."""
    if defs is None:
        defs = node.get("$defs", {})
    if isinstance(node, dict):
        if "$ref" in node:
            target = inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
            return {**target, **{k: inline_refs(v, defs) for k, v in node.items() if k != "$ref"}}
        return {k: inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [inline_refs(v, defs) for v in node]
    return node


def _branches(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of an inlined schema node."""
    alts = node.get("anyOf") or node.get("oneOf")
    if not alts:
        return [node]
    return [b for a in alts if a.get("type") != "null" for b in _branches(a)]


def _at(node: dict[str, Any], loc: Sequence[Any]) -> dict[str, Any] | None:
    """The inlined schema node at ``loc`` (object properties and array items), or ``None``."""
    for part in loc:
        found = None
        for b in _branches(node):
            if isinstance(part, int) and "items" in b:
                found = b["items"]
            elif isinstance(part, str) and part in b.get("properties", {}):
                found = b["properties"][part]
            if found is not None:
                break
        if found is None:
            return None
        node = found
    branches = _branches(node)
    return next((b for b in branches if "properties" in b), branches[0] if len(branches) == 1 else node)


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _bound(b: dict[str, Any], key: str) -> tuple[Any, bool]:
    """A number's ``minimum`` or ``maximum`` and whether it is exclusive; ``(None, False)`` when it has none."""
    strict = "exclusive" + key.capitalize()
    return (b[key], False) if key in b else (b[strict], True) if strict in b else (None, False)


_TYPE_WORDS = {"boolean": "true or false", "string": "a string", "array": "a list"}


def allowed_words(node: dict[str, Any]) -> str:
    """What an inlined schema node allows, in words (``a number > 0``, ``one of 'trace', 'none'``)."""
    words = []
    for b in _branches(node):
        if "enum" in b:
            words.append("one of " + ", ".join(repr(v) for v in b["enum"]))
        elif "const" in b:
            words.append(repr(b["const"]))
        elif b.get("type") in ("number", "integer"):
            w = "an integer" if b["type"] == "integer" else "a number"
            lo, lo_open = _bound(b, "minimum")
            hi, hi_open = _bound(b, "maximum")
            if b["type"] == "number" and b.get("x-finite", True) and (lo is None or hi is None):
                w = "a finite number"
            words.append(interval(w, lo, hi, lo_open, hi_open, _num))
        elif b.get("type") in _TYPE_WORDS:
            words.append(_TYPE_WORDS[b["type"]])
        elif b.get("type") == "object" or "properties" in b:
            props = list(b.get("properties", {}))
            words.append("a mapping with keys " + ", ".join(props) if props else "a mapping")
        elif "x-component" in b:
            words.append(", ".join(get_registry().names(b["x-component"])))
    return " or ".join(dict.fromkeys(words))
