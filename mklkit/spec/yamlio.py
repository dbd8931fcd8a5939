"""Reading spec files: YAML with ``safe_load`` semantics, ``--set`` overrides, file names."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from ..pipeline.bank_settings import KERNEL_SOURCES
from ..pipeline.errors import SpecError


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and reads ``1e-4`` as a float (as YAML 1.2 does)."""


_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
# on its own copy of SafeLoader's resolvers (add_implicit_resolver copies them)
_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
for _first in "-+0123456789":  # keep ints as ints: the int resolver must win for plain digits
    _SpecLoader.yaml_implicit_resolvers[_first].sort(key=lambda r: 0 if r[0] == "tag:yaml.org,2002:int" else 1)


def _construct_mapping(loader: _SpecLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, f"unhashable key {key!r}", key_node.start_mark
            ) from None
        if key in seen:
            raise _DuplicateKey(key, key_node.start_mark)
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, mark: Any) -> None:
        self.key = key
        self.problem_mark = mark
        super().__init__(f"duplicate key {key!r}")


_SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_error(file: str, exc: yaml.YAMLError) -> SpecError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "YAML"
    if isinstance(exc, _DuplicateKey):
        return SpecError(file, where, "duplicate key", exc.key, "each key once per mapping")
    if isinstance(exc, yaml.constructor.ConstructorError):
        problem = getattr(exc, "problem", "") or str(exc)
        m = re.search(r"tag '([^']*)'", problem)
        if m:
            tag = m.group(1).replace("tag:yaml.org,2002:", "!!")
            return SpecError(
                file,
                where,
                "YAML tag not allowed (specs are read with yaml.safe_load)",
                tag,
                "plain YAML: mappings, lists, strings, numbers, booleans, null",
            )
        return SpecError(file, where, f"invalid YAML: {problem}")
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    what = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
    return SpecError(file, where, what, allowed="valid YAML")


def load_yaml_text(text: str, file: str) -> Any:
    try:
        return yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(file, exc) from None


def read_spec_file(path: str | os.PathLike[str], sections: str) -> Any:
    """The YAML mapping of a spec file, or a :class:`SpecError` naming the file (``sections``: what an
    empty file lacks)."""
    file = str(path)
    p = Path(path)
    if not p.exists():
        raise SpecError(file, "", "spec file not found", file, "an existing YAML file")
    if p.is_dir():
        raise SpecError(file, "", "is a directory, not a spec file", file, "a YAML file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(file, "", f"cannot read the spec as UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise SpecError(file, "", f"cannot read the spec ({exc.strerror or exc})") from None
    raw = load_yaml_text(text, file)
    if raw is None:
        raise SpecError(file, "", "the spec is empty", allowed=f"a mapping with {sections}")
    return raw


def apply_overrides(
    raw: dict, overrides: Sequence[str] | Mapping[str, Any], file: str = "<spec>"
) -> tuple[dict, tuple[str, ...]]:
    """A deep copy of ``raw`` with ``--set`` overrides applied, and the keys they set."""
    raw = _deepcopy(raw)
    overridden: list[str] = []
    items = overrides.items() if isinstance(overrides, Mapping) else [parse_override(o, file) for o in overrides]
    for key, value in items:
        _apply_override(raw, key, value, file)
        overridden.append(key)
    return raw, tuple(overridden)


def _deepcopy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _deepcopy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deepcopy(v) for v in x]
    return x


def parse_override(text: str, file: str = "<spec>", option: str = "--set") -> tuple[str, Any]:
    """Split ``"key.path=value"`` and parse the value as YAML (``option``: the option named in messages)."""
    if not isinstance(text, str) or "=" not in text:
        raise SpecError(
            file, option, "an override needs the form key.path=value", text, "key.path=value, e.g. problem.C=0.1"
        )
    key, _, value_text = text.partition("=")
    key = key.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*", key):
        raise SpecError(file, option, "malformed key path", key, "dotted keys such as problem.regularizer.lam")
    value = load_yaml_text(value_text, f"{file} ({option} {key})") if value_text.strip() else None
    return key, value


#: A key set by ``--set`` removes the keys it excludes.
_EXCLUSIVE: dict[str, tuple[str, ...]] = {
    f"kernels.{k}": tuple(f"kernels.{o}" for o in KERNEL_SOURCES if o != k) for k in KERNEL_SOURCES
} | {"data.builtin": ("data.train", "data.test", "data.format"), "data.train": ("data.builtin",)}


def _list_index(node: list, part: str, where: str, file: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise SpecError(file, where, "no such list entry (--set)", part, f"an index in 0..{len(node) - 1}")
    return int(part)


def _apply_override(raw: dict, key: str, value: Any, file: str) -> None:
    parts = key.split(".")
    node: Any = raw
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            idx = _list_index(node, part, where, file)
            if isinstance(node[idx], str):  # short form of a bank entry or component
                node[idx] = {"function" if where.startswith("kernels.bank") else "name": node[idx]}
            node = node[idx]
            continue
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str):  # a component named by its short form
            child = node[part] = {"name": child}
        elif not isinstance(child, (dict, list)):
            raise SpecError(
                file,
                where,
                f"cannot set {key}: {where} is not a mapping (--set)",
                child,
                f"--set {where}=VALUE to replace it",
            )
        node = child
    last = parts[-1]
    if isinstance(node, list):
        node[_list_index(node, last, key, file)] = value
    else:
        node[last] = value
    for other in _EXCLUSIVE.get(key, ()):
        section, sub = other.split(".")
        if isinstance(raw.get(section), dict):
            raw[section].pop(sub, None)


def spec_stem(file: str) -> str:
    """The stem of a spec file name (``quickstart`` for ``specs/quickstart.yaml``)."""
    name = Path(file).name
    for suffix in (".yaml", ".yml"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem or "spec"
