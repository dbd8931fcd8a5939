"""YAML problem specs: ``yaml.safe_load`` -> validated typed spec -> :class:`Problem`.

A spec declares one MKL experiment (see ``docs/specs.md`` for every key)::

    data:     {builtin: sonar, test_size: 0.2, seed: 0, standardize: true}
    kernels:  {preset: simplemkl, normalize: trace}
    problem:  {loss: logistic, regularizer: {name: elasticnet, lam: 0.5}, C: 0.5}
    solver:   {name: spicy, tol: 1.0e-4, max_iter: 200}
    output:   {dir: runs/quickstart}

Validation happens in two stages, both before any expensive work:

1. :func:`load_spec` parses the file (``yaml.safe_load`` semantics), applies
   ``--set`` overrides and checks every key, type and value; components
   (loss, regularizer, engine) are created through the plugin registry so
   their own :class:`~mklkit.components.params.Param` declarations validate
   their parameters.
2. :meth:`Spec.load_data` / :meth:`Spec.prepare` load the data (labels are
   checked by the loss, NaN/inf by the loaders), check shapes, probe the
   kernel bank on a few rows and ask the engine whether it supports the
   loss x regularizer combination before building the full bank.

Every problem is raised as one :class:`SpecError` whose message is one line::

    specs/a.yaml: problem.regularizer.lam: invalid value; got 1.5; allowed: a number in [0, 1]

Relative input paths (``data.train``, ``data.test``,
``kernels.precomputed``) resolve against the folder of the spec file;
``output.dir`` resolves against the current working directory.
"""
from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import yaml

from . import pipeline
from .components.params import Param, ParamError, did_you_mean
from .pipeline import (
    DEFAULTS,
    parse_bytes,
    BankSettings,
    Data,
    DataSettings,
    PipelineError,
    Prepared,
    ProblemSettings,
    Representation,
)

if TYPE_CHECKING:  # pragma: no cover
    from .engines.base import Engine

__all__ = [
    "SpecError",
    "Spec",
    "EngineSection",
    "SolverSpec",
    "OutputSpec",
    "DEFAULTS",
    "load_spec",
    "parse_spec",
    "parse_override",
    "parse_bytes",
    "read_spec_file",
    "apply_overrides",
    "spec_stem",
    "json_schema",
    "sweep_lists",
    "TOP_KEYS",
    "SWEEP_KEYS",
    "SWEEP_SECTION",
]

logger = logging.getLogger(__name__)

_MISSING: Any = object()


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------
def _show(value: Any, limit: int = 80) -> str:
    """A short one-line rendering of an offending value."""
    if isinstance(value, Path):
        value = str(value)
    text = repr(value)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class SpecError(ValueError):
    """A spec problem, reported as one line naming file, key path and value.

    ``str(err)`` reads
    ``<file>: <key.path>: <what is wrong>; got <value>; allowed: <what is allowed>``
    (the ``got`` part is left out when there is no value, e.g. a missing key).

    Attributes
    ----------
    file : str
        The spec file as given (or ``"<spec>"`` for an in-memory mapping).
    key : str
        Dotted key path (``problem.regularizer.lam``); a YAML syntax error
        uses ``line L, column C``.
    problem : str
        What is wrong.
    value : Any
        The offending value (absent: :data:`SpecError.NO_VALUE`).
    allowed : str or None
        What would be accepted.
    """

    NO_VALUE: Any = _MISSING

    def __init__(
        self,
        file: str,
        key: str,
        problem: str,
        value: Any = _MISSING,
        allowed: str | None = None,
        *,
        shown: str | None = None,
    ) -> None:
        self.file = str(file)
        self.key = key
        self.problem = _one_line(problem)
        self.value = None if value is _MISSING else value
        self.has_value = value is not _MISSING or shown is not None
        self.shown = _one_line(shown) if shown is not None else (_show(value) if self.has_value else None)
        self.allowed = _one_line(allowed) if allowed else None
        super().__init__(self._message())

    def _message(self) -> str:
        head = f"{self.file}: {self.key}: {self.problem}" if self.key else f"{self.file}: {self.problem}"
        return pipeline.one_line_error(head, self.shown if self.has_value else None, self.allowed)

    def __str__(self) -> str:
        return self._message()


# ---------------------------------------------------------------------------
# YAML loading: safe_load semantics, duplicate keys refused, 1e-4 is a float
# ---------------------------------------------------------------------------
class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and reads ``1e-4`` as a float.

    PyYAML (YAML 1.1) reads ``1e-4`` (no dot) as a string; YAML 1.2 and every
    user reads it as a number.  Only safe constructors are registered, so an
    object tag such as ``!!python/object`` is an error, exactly as with
    :func:`yaml.safe_load`.
    """


_SpecLoader.yaml_implicit_resolvers = {
    k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
# keep ints as ints: the int resolver must win for plain digits
for _first in list("-+0123456789"):
    _rs = _SpecLoader.yaml_implicit_resolvers.get(_first, [])
    _rs.sort(key=lambda r: 0 if r[0] == "tag:yaml.org,2002:int" else 1)


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
                file, where, "YAML tag not allowed (specs are read with yaml.safe_load)",
                tag, "plain YAML: mappings, lists, strings, numbers, booleans, null",
            )
        return SpecError(file, where, f"invalid YAML: {problem}")
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    what = f"YAML syntax error: {problem}" + (f" ({context})" if context else "")
    return SpecError(file, where, what, allowed="valid YAML")


def _load_yaml_text(text: str, file: str) -> Any:
    try:
        return yaml.load(text, Loader=_SpecLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(file, exc) from None


# ---------------------------------------------------------------------------
# Typed spec
# ---------------------------------------------------------------------------
TOP_KEYS: tuple[str, ...] = ("description", "data", "kernels", "problem", "engine", "solver", "output")
DATA_KEYS: tuple[str, ...] = (
    "builtin", "train", "test", "format", "target", "drop",
    "test_size", "train_size", "seed", "standardize",
)
KERNEL_KEYS: tuple[str, ...] = ("preset", "bank", "precomputed", "normalize", "memory_budget", "sharded", "factor")
SHARDED_KEYS: tuple[str, ...] = ("scheduler",)
FACTOR_KEYS: tuple[str, ...] = ("rank", "tol", "method", "seed")
PROBLEM_KEYS: tuple[str, ...] = ("loss", "regularizer", "C", "bias")
OUTPUT_KEYS: tuple[str, ...] = ("dir",)
NORMALIZE_CHOICES: tuple[str, ...] = ("trace", "diagonal", "none")
FORMAT_CHOICES: tuple[str, ...] = ("csv", "npz", "libsvm")
#: The section that selects the engine, and its deprecated name.
ENGINE_SECTIONS: tuple[str, ...] = ("engine", "solver")

_P_SEED = Param("seed", 0, type=int, low=0)
_P_STANDARDIZE = Param("standardize", True, type=bool)
_P_C = Param("C", 1.0, low=0.0, low_open=True)
_P_BIAS = Param("bias", True, type=bool)
_P_NORMALIZE = Param("normalize", "trace", type=str, choices=NORMALIZE_CHOICES)
_P_FORMAT = Param("format", None, type=str, choices=FORMAT_CHOICES)


@dataclass(frozen=True)
class EngineSection:
    """``engine:`` (formerly ``solver:``) -- the engine, an instance holding its validated options.

    ``section`` is the name the spec used (``engine``, or the deprecated
    ``solver``): errors name the key as written.
    """

    engine: Engine
    section: str = "engine"

    @property
    def name(self) -> str:
        return self.engine.name

    def to_dict(self) -> dict[str, Any]:
        return pipeline.component_dict(self.engine)


#: The deprecated name of :class:`EngineSection`.
SolverSpec = EngineSection


@dataclass(frozen=True)
class OutputSpec:
    """``output:`` -- where ``mklkit run`` writes (relative to the working directory)."""

    dir: Path

    def to_dict(self) -> dict[str, Any]:
        return {"dir": str(self.dir)}


@dataclass(frozen=True)
class Spec:
    """A validated spec.

    Attributes
    ----------
    file : str
        The spec file as given on the command line (used in messages).
    folder : Path
        Folder against which relative input paths were resolved.
    data : DataSettings
    kernels : BankSettings
    problem : ProblemSettings
    engine : EngineSection
        Also as :attr:`solver` (the deprecated name of the section).
    output : OutputSpec
    description : str
    overridden : tuple of str
        Key paths set by ``--set``.
    """

    file: str
    folder: Path
    data: DataSettings
    kernels: BankSettings
    problem: ProblemSettings
    engine: EngineSection
    output: OutputSpec
    description: str = ""
    overridden: tuple[str, ...] = ()
    given_paths: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The spec file's stem (``quickstart`` for ``specs/quickstart.yaml``)."""
        return spec_stem(self.file)

    @property
    def solver(self) -> EngineSection:
        """The ``engine`` section (its deprecated name)."""
        return self.engine

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as plain JSON-able data."""
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        if self.kernels.precomputed is None or self.data.explicit:
            out["data"] = self.data.to_dict()
        out["kernels"] = self.kernels.to_dict()
        out["problem"] = self.problem.to_dict()
        out["engine"] = self.engine.to_dict()
        out["output"] = self.output.to_dict()
        return out

    def error(
        self, key: str, problem: str, value: Any = _MISSING, allowed: str | None = None,
        *, shown: str | None = None,
    ) -> SpecError:
        """A :class:`SpecError` for this spec (marks keys set by ``--set``)."""
        return SpecError(self.file, key, _mark_override(problem, key, self.overridden), value, allowed, shown=shown)

    def raised(self, exc: PipelineError) -> SpecError:
        """A pipeline error as this spec's one-line error (the ``engine``/``solver`` key as written)."""
        key = exc.key
        if key.startswith("engine.") and self.engine.section != "engine":
            key = self.engine.section + key[len("engine"):]
        return self.error(key, exc.problem, allowed=exc.allowed, shown=exc.shown)

    # -- stage 2: the pipeline -------------------------------------------------
    def load_data(self) -> Data:
        """Load, check, split and standardize the data (no kernels yet)."""
        try:
            return pipeline.load_data(self.data, self.kernels, self.problem.loss)
        except PipelineError as exc:
            raise self.raised(exc) from None

    def prepare(
        self, progress: Callable[..., Any] | bool | None = None, build: bool = True, data: Data | None = None,
    ) -> Prepared:
        """Load the data, build the kernel bank and the :class:`Problem` (:func:`mklkit.pipeline.prepare`).

        With ``build=False`` only the checks run (bank description against
        the columns, memory budget, engine support on a probe problem) and
        :attr:`Prepared.problem` is ``None``; this is what ``mklkit validate``
        runs.  ``data`` replaces :meth:`load_data` (``mklkit sweep`` passes
        one cross-validation fold).
        """
        t0 = time.perf_counter()
        data = self.load_data() if data is None else data
        t_data = time.perf_counter() - t0
        try:
            prepared = pipeline.prepare(data, self.kernels, self.problem, self.engine.engine, build=build,
                                        progress=progress, engine_key=f"{self.engine.section}.name")
        except PipelineError as exc:
            raise self.raised(exc) from None
        prepared.timings = {"data_s": t_data, **prepared.timings}
        prepared.spec = self
        return prepared


# ---------------------------------------------------------------------------
# Stage 1: parse and validate the mapping
# ---------------------------------------------------------------------------
def read_spec_file(path: str | os.PathLike[str], sections: str) -> Any:
    """The YAML mapping of a spec file, or a :class:`SpecError` naming the file.

    ``sections`` lists the sections a spec of this kind has (for the message
    about an empty file).
    """
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
    raw = _load_yaml_text(text, file)
    if raw is None:
        raise SpecError(file, "", "the spec is empty", allowed=f"a mapping with {sections}")
    return raw


def load_spec(
    path: str | Path,
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> Spec:
    """Read, override and validate a spec file.

    Parameters
    ----------
    path : path-like
        The YAML file.
    overrides : sequence of ``"key.path=value"`` or mapping
        Applied before validation (``--set`` on the command line); values
        given as strings are parsed as YAML.

    Raises
    ------
    SpecError
        Anything wrong, as one line naming the file and key path.
    """
    file = str(path)
    raw = read_spec_file(path, "data, kernels, problem, engine, output")
    return parse_spec(raw, file=file, folder=Path(path).resolve().parent, overrides=overrides)


def parse_spec(
    raw: Any,
    file: str = "<spec>",
    folder: str | Path | None = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
) -> Spec:
    """Validate an already-loaded spec mapping (see :func:`load_spec`)."""
    folder = Path(folder) if folder is not None else Path.cwd()
    if not isinstance(raw, dict):
        raise SpecError(
            file, "", "the spec must be a mapping of sections", raw,
            "a mapping with keys " + ", ".join(TOP_KEYS),
        )
    raw, overridden = apply_overrides(raw, overrides, file)
    return SpecParser(file, folder, overridden).parse(raw)


def apply_overrides(
    raw: dict, overrides: Sequence[str] | Mapping[str, Any], file: str = "<spec>",
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
    """Split ``"key.path=value"`` and parse the value as YAML (``1e-3`` is a number).

    ``option`` names the command-line option in messages (``--set``, ``--param``).
    """
    if not isinstance(text, str) or "=" not in text:
        raise SpecError(file, option, "an override needs the form key.path=value", text, "key.path=value, e.g. problem.C=0.1")
    key, _, value_text = text.partition("=")
    key = key.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*", key):
        raise SpecError(file, option, "malformed key path", key, "dotted keys such as problem.regularizer.lam")
    value = _load_yaml_text(value_text, f"{file} ({option} {key})") if value_text.strip() else None
    return key, value


_EXCLUSIVE: dict[str, tuple[str, ...]] = {
    "kernels.preset": ("kernels.bank", "kernels.precomputed"),
    "kernels.bank": ("kernels.preset", "kernels.precomputed"),
    "kernels.precomputed": ("kernels.preset", "kernels.bank"),
    "data.builtin": ("data.train", "data.test", "data.format"),
    "data.train": ("data.builtin",),
}


def _apply_override(raw: dict, key: str, value: Any, file: str) -> None:
    parts = key.split(".")
    other = {"solver": "engine", "engine": "solver"}.get(parts[0])
    if other is not None and other in raw and parts[0] not in raw:  # --set solver.tol on an engine: section
        parts[0] = other
    node: Any = raw
    for depth, part in enumerate(parts[:-1]):
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SpecError(file, where, "no such list entry (--set)", part, f"an index in 0..{len(node) - 1}")
            idx = int(part)
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
                file, where, f"cannot set {key}: {where} is not a mapping (--set)", child,
                f"--set {where}=VALUE to replace it",
            )
        node = child
    last = parts[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise SpecError(file, key, "no such list entry (--set)", last, f"an index in 0..{len(node) - 1}")
        node[int(last)] = value
    else:
        node[last] = value
    for other in _EXCLUSIVE.get(key, ()):
        section, sub = other.split(".")
        if isinstance(raw.get(section), dict):
            raw[section].pop(sub, None)


def _mark_override(problem: str, key: str, overridden: Sequence[str]) -> str:
    def norm(k: str) -> str:
        return re.sub(r"\[(\d+)\]", r".\1", k)

    k = norm(key)
    for o in overridden:
        o = norm(o)
        if k == o or k.startswith(o + ".") or o.startswith(k + "."):
            return f"{problem} (set by --set)"
    return problem


def spec_stem(file: str) -> str:
    """The stem of a spec file name (``quickstart`` for ``specs/quickstart.yaml``)."""
    name = Path(file).name
    for suffix in (".yaml", ".yml"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem or "spec"


#: Top-level section of a sweep spec (``mklkit sweep``): the cross-validation.
SWEEP_SECTION = "cv"
#: Keys of a sweep spec that may hold a list of values (one grid axis each).
#: ``problem.loss``, ``problem.regularizer`` and ``solver`` may also be
#: mappings whose parameters are lists.
SWEEP_KEYS: tuple[str, ...] = (
    "data.builtin", "data.train", "problem.loss", "problem.regularizer", "problem.C",
    "problem.bias", "engine", "solver",
)
_SWEEP_COMPONENTS = ("problem.loss", "problem.regularizer", "engine", "solver")


def sweep_lists(raw: Any) -> list[tuple[str, Any]]:
    """The sweep axes of a raw spec mapping: ``[(key path, value), ...]``.

    A list at one of :data:`SWEEP_KEYS` (``problem.C: [0.005, 0.05, 0.5]``,
    ``problem.loss: [hinge, logistic]``, ``data.builtin: [liver, sonar]``), or
    a list-valued parameter of a loss, regularizer or engine mapping
    (``problem.regularizer: {name: elasticnet, lam: [0.2, 0.5]}``,
    ``solver: {name: spicy, tol: [1e-2, 1e-3]}``; the key path is then the
    parameter's).  Kernel-bank parameters are not sweep axes: a list there
    means one kernel per value.  ``mklkit run`` refuses all of them;
    ``mklkit sweep`` (:mod:`mklkit.sweep`) expands them into a grid.
    """
    out: list[tuple[str, Any]] = []
    if not isinstance(raw, dict):
        return out
    for key in SWEEP_KEYS:
        section, _, sub = key.partition(".")
        sec = raw.get(section)
        if sub:
            value = sec.get(sub) if isinstance(sec, dict) else None
        else:
            value = sec
        if isinstance(value, list):
            out.append((key, value))
        elif key in _SWEEP_COMPONENTS and isinstance(value, dict):
            out.extend((f"{key}.{k}", v) for k, v in value.items() if isinstance(v, list))
    return out


class SpecParser:
    """Validates spec mappings of one file (``file``, ``folder``, the ``--set`` keys) section by section."""

    def __init__(self, file: str, folder: Path, overridden: tuple[str, ...]):
        self.file = file
        self.folder = folder
        self.overridden = overridden
        self.given_paths: dict[str, str] = {}

    # -- helpers --------------------------------------------------------------
    def err(
        self, key: str, problem: str, value: Any = _MISSING, allowed: str | None = None,
        *, shown: str | None = None,
    ) -> SpecError:
        return SpecError(self.file, key, _mark_override(problem, key, self.overridden), value, allowed, shown=shown)

    def section(self, raw: dict, name: str, keys: Sequence[str], required: bool) -> dict:
        if name not in raw or raw[name] is None:
            if required:
                raise self.err(name, "required section is missing", allowed=f"a mapping with keys {', '.join(keys)}")
            return {}
        sec = raw[name]
        if not isinstance(sec, dict):
            raise self.err(name, "must be a mapping", sec, f"a mapping with keys {', '.join(keys)}")
        self.check_keys(sec, name, keys)
        return sec

    def check_keys(self, mapping: dict, where: str, keys: Sequence[str]) -> None:
        for k in mapping:
            if not isinstance(k, str):
                raise self.err(where, "keys must be strings", k, ", ".join(keys))
            if k not in keys:
                path = f"{where}.{k}" if where else k
                raise self.err(path, f"unknown key{did_you_mean(k, list(keys))}", k, ", ".join(keys))

    def param(self, sec: dict, where: str, p: Param) -> Any:
        if p.name not in sec or (sec[p.name] is None and not p.nullable):
            return p.default
        try:
            return p.validate(sec[p.name])
        except ParamError as e:
            raise self.err(f"{where}.{p.name}", "invalid value", e.value, e.allowed) from None

    def string(self, sec: dict, where: str, key: str, what: str = "a non-empty string") -> str | None:
        if key not in sec or sec[key] is None:
            return None
        v = sec[key]
        if not isinstance(v, str) or not v.strip():
            raise self.err(f"{where}.{key}", "invalid value", v, what)
        return v

    def path(self, sec: dict, where: str, key: str) -> Path | None:
        v = self.string(sec, where, key, "a file path (relative to the spec's folder)")
        if v is None:
            return None
        self.given_paths[f"{where}.{key}"] = v
        p = Path(v).expanduser()
        return p if p.is_absolute() else (self.folder / p)

    # -- sections -------------------------------------------------------------
    def parse(self, raw: dict) -> Spec:
        self.refuse_sweep(raw)
        self.check_keys(raw, "", TOP_KEYS)
        description = raw.get("description") or ""
        if not isinstance(description, str):
            raise self.err("description", "invalid value", description, "a string")
        kernels = self.kernels(raw)
        data = self.data(raw, precomputed=kernels.precomputed is not None)
        problem = self.problem(raw)
        engine = self.engine(raw)
        output = self.output(raw)
        return Spec(
            file=self.file, folder=self.folder, data=data, kernels=kernels,
            problem=problem, engine=engine, output=output,
            description=description, overridden=self.overridden, given_paths=dict(self.given_paths),
        )

    def refuse_sweep(self, raw: dict) -> None:
        """A ``cv`` section or a list at a sweep key: only ``mklkit sweep`` takes those."""
        sweep_hint = f"or run the whole grid with 'mklkit sweep {self.file}' (docs/sweeps.md)"
        if SWEEP_SECTION in raw:
            raise self.err(
                SWEEP_SECTION, "cross-validation is only done by 'mklkit sweep'; 'mklkit run' and "
                "'mklkit validate' solve one problem", raw[SWEEP_SECTION],
                f"no cv section for a single run, {sweep_hint}",
            )
        lists = sweep_lists(raw)
        if lists:
            key, value = lists[0]
            more = f" (this spec has {len(lists)}: {', '.join(k for k, _ in lists)})" if len(lists) > 1 else ""
            raise self.err(
                key, f"a list of values makes a sweep{more}; 'mklkit run' and 'mklkit validate' "
                "solve one problem", value, f"one value, {sweep_hint}",
            )

    def data(self, raw: dict, precomputed: bool) -> DataSettings:
        sec = self.section(raw, "data", DATA_KEYS, required=not precomputed)
        given = frozenset(k for k, v in sec.items() if v is not None)
        if precomputed:
            extra = sorted(given - {"test_size", "seed"})
            if extra:
                raise self.err(
                    f"data.{extra[0]}", "not used with kernels.precomputed (the NPZ holds the labels)",
                    sec[extra[0]], "data.test_size and data.seed only",
                )
        else:
            has_builtin = "builtin" in given
            has_train = "train" in given
            if has_builtin and has_train:
                raise self.err("data.train", "data.builtin and data.train are exclusive", sec["train"], "one of builtin or train")
            if not has_builtin and not has_train:
                raise self.err("data", "needs a data source", allowed="data.builtin (a bundled data set) or data.train (a file)")
            if has_builtin and "test" in given:
                raise self.err("data.test", "a test file needs data.train, not data.builtin", sec["test"], "data.train with data.test")
        builtin = None
        if "builtin" in given:
            from .data import available

            names = available()
            builtin = sec["builtin"]
            if not isinstance(builtin, str) or builtin not in names:
                hint = did_you_mean(builtin, names) if isinstance(builtin, str) else ""
                raise self.err("data.builtin", f"unknown builtin data set{hint}", builtin, ", ".join(names))
        train = self.path(sec, "data", "train")
        test = self.path(sec, "data", "test")
        for key, p in (("train", train), ("test", test)):
            if p is not None and not p.is_file():
                raise self.err(
                    f"data.{key}", "file not found" if not p.exists() else "not a file",
                    sec[key], f"an existing file (resolved: {p})",
                )
        fmt = self.param(sec, "data", _P_FORMAT) if "format" in given else None
        if fmt is not None and train is None:
            raise self.err("data.format", "only used with data.train", fmt, "data.train with format")
        target = sec.get("target")
        if target is not None and not isinstance(target, str):
            raise self.err("data.target", "invalid value", target, "a column name")
        drop = sec.get("drop")
        if drop is None:
            drop_t: tuple[str, ...] = ()
        else:
            if isinstance(drop, str):
                drop = [drop]
            if not isinstance(drop, list) or not all(isinstance(c, str) for c in drop):
                raise self.err("data.drop", "invalid value", drop, "a list of column names")
            drop_t = tuple(drop)
            if target is not None and target in drop_t:
                raise self.err("data.drop", "drops the target column", target, "feature columns other than data.target")
        test_size = self.size(sec, "test_size", allow_zero=True, default=DEFAULTS["data.test_size"])
        if test is not None and "test_size" in given:
            raise self.err("data.test_size", "not used when data.test gives a test file", sec["test_size"], "data.test or data.test_size, not both")
        if test is not None:
            test_size = 0
        train_size = self.size(sec, "train_size", allow_zero=False, default=None)
        seed = self.param(sec, "data", _P_SEED)
        standardize = self.param(sec, "data", _P_STANDARDIZE)
        if precomputed:
            standardize = False
        return DataSettings(
            builtin=builtin, train=train, test=test, format=fmt, target=target, drop=drop_t,
            test_size=test_size, train_size=train_size, seed=seed, standardize=standardize,
            explicit=given, given={k: v for k, v in self.given_paths.items() if k.startswith("data.")},
        )

    def size(self, sec: dict, key: str, allow_zero: bool, default: Any) -> Any:
        if key not in sec or sec[key] is None:
            return default
        v = sec[key]
        low = "[0, 1)" if allow_zero else "(0, 1)"
        allowed = f"a fraction in {low} or a row count >= 1"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.err(f"data.{key}", "invalid value", v, allowed)
        if isinstance(v, float) and v.is_integer() and v >= 1:
            v = int(v)
        if isinstance(v, float):
            if not ((0.0 <= v < 1.0) if allow_zero else (0.0 < v < 1.0)):
                raise self.err(f"data.{key}", "out of range", v, allowed)
        elif v < 0 or (v == 0 and not allow_zero):
            raise self.err(f"data.{key}", "out of range", v, allowed)
        return v

    def kernels(self, raw: dict) -> BankSettings:
        sec = self.section(raw, "kernels", KERNEL_KEYS, required=True)
        modes = [k for k in ("preset", "bank", "precomputed") if sec.get(k) is not None]
        if len(modes) != 1:
            if not modes:
                raise self.err("kernels", "needs one kernel source", allowed="exactly one of kernels.preset, kernels.bank, kernels.precomputed")
            raise self.err(
                f"kernels.{modes[1]}", f"kernels.{modes[0]} and kernels.{modes[1]} are exclusive",
                sec[modes[1]], "exactly one of preset, bank, precomputed",
            )
        preset = bank = precomputed = None
        if "preset" in modes:
            preset = sec["preset"]
            presets = _presets()
            if not isinstance(preset, str) or (presets and preset not in presets):
                hint = did_you_mean(preset, presets) if isinstance(preset, str) else ""
                raise self.err("kernels.preset", f"unknown preset{hint}", preset, ", ".join(presets) or "a preset name")
        elif "bank" in modes:
            entries = sec["bank"]
            if isinstance(entries, dict):
                entries = [entries]
            if not isinstance(entries, list) or not entries:
                raise self.err("kernels.bank", "invalid value", entries, "a non-empty list of kernel entries such as {function: rbf, width: [0.5, 1]}")
            for i, e in enumerate(entries):
                if not isinstance(e, (dict, str)):
                    raise self.err(f"kernels.bank[{i}]", "invalid entry", e, "a mapping such as {function: rbf, width: [0.5, 1], features: all}")
            bank = tuple({"function": e} if isinstance(e, str) else e for e in entries)
            from .kernels import BankError, validate_bank

            try:
                validate_bank(list(bank), resolve=pipeline.kernel_resolver(), root="kernels.bank")
            except BankError as exc:
                raise _bank_spec_error(self.err, exc, "kernels.bank") from None
        else:
            precomputed = self.path(sec, "kernels", "precomputed")
            assert precomputed is not None
            if not precomputed.is_file():
                raise self.err("kernels.precomputed", "file not found", sec["precomputed"], f"an existing .npz file (resolved: {precomputed})")
            if not precomputed.name.lower().endswith(".npz"):
                raise self.err("kernels.precomputed", "not an NPZ file", sec["precomputed"], "a .npz file with K_train, y_train (and K_test, y_test)")
        normalize = self.param(sec, "kernels", _P_NORMALIZE)
        if precomputed is not None and "normalize" not in sec:
            normalize = "none"
        budget = sec.get("memory_budget")
        if budget is not None:
            try:
                budget = parse_bytes(budget)
            except ValueError:
                raise self.err("kernels.memory_budget", "invalid value", sec["memory_budget"], "a size such as 4GiB, 512MB or a byte count > 0") from None
        return BankSettings(
            preset=preset, bank=bank, precomputed=precomputed, normalize=normalize,
            memory_budget=budget, memory_budget_given=sec.get("memory_budget"),
            representation=self.representation(sec, precomputed is not None),
            given={k: v for k, v in self.given_paths.items() if k.startswith("kernels.")},
        )

    def representation(self, sec: dict, precomputed: bool) -> Representation:
        """``kernels.sharded: {scheduler: ADDRESS}`` or ``kernels.factor: {rank, tol, method, seed}``."""
        given = [k for k in ("sharded", "factor") if sec.get(k) is not None]
        if not given:
            return Representation()
        if len(given) > 1:
            raise self.err("kernels.factor", "kernels.sharded and kernels.factor are exclusive", sec["factor"],
                           "one representation: kernels.sharded or kernels.factor")
        kind = given[0]
        where = f"kernels.{kind}"
        if precomputed:
            raise self.err(where, "precomputed kernels are held as one array", sec[kind],
                           "kernels.preset or kernels.bank with data")
        if kind == "sharded":
            sub = sec[kind] if isinstance(sec[kind], dict) else None
            if sub is None:
                raise self.err(where, "must be a mapping", sec[kind], "{scheduler: ADDRESS}")
            self.check_keys(sub, where, SHARDED_KEYS)
            address = self.string(sub, where, "scheduler", "a Dask scheduler address such as tcp://127.0.0.1:8786")
            if address is None:
                raise self.err(f"{where}.scheduler", "required key is missing",
                               allowed="a Dask scheduler address such as tcp://127.0.0.1:8786")
            return Representation("sharded", scheduler=address)
        sub = {} if sec[kind] is True else sec[kind]
        if not isinstance(sub, dict):
            raise self.err(where, "must be a mapping", sec[kind], "{rank: r, tol: t, method: m, seed: s}")
        self.check_keys(sub, where, FACTOR_KEYS)
        rep = Representation("factor", rank=sub.get("rank"), tol=sub.get("tol", 1e-3),
                             method=sub.get("method", "auto"), seed=sub.get("seed", 0))
        try:
            rep.check(root=where)
        except PipelineError as exc:
            raise self.err(exc.key, exc.problem, allowed=exc.allowed, shown=exc.shown) from None
        return rep

    def component(self, kind: str, key: str, spec: Any) -> Any:
        from .plugins import UnknownComponentError, get_registry

        reg = get_registry()
        names = reg.names(kind)
        if isinstance(spec, str):
            name, name_key = spec, key
        elif isinstance(spec, dict):
            if "name" not in spec or spec["name"] is None:
                raise self.err(f"{key}.name", f"a {kind} mapping needs a name", spec, ", ".join(names))
            name, name_key = spec["name"], f"{key}.name"
            if not isinstance(name, str):
                raise self.err(name_key, "invalid value", name, ", ".join(names))
        else:
            raise self.err(key, f"invalid {kind}", spec, f"a {kind} name ({', '.join(names)}) or a mapping {{name: ..., param: value}}")
        try:
            cls = reg.get(kind, name)
        except UnknownComponentError:
            hint = did_you_mean(name, names)
            problem = f"unknown {kind}{hint}"
            if not hint:
                problem += f" (no installed plugin provides {kind} {name!r}"
                if reg.broken:
                    problem += "; broken plugins: " + ", ".join(f"{b.name} ({b.message})" for b in reg.broken)
                problem += ")"
            raise self.err(name_key, problem, name, ", ".join(names) or "none registered") from None
        try:
            return reg.create(kind, spec)
        except ParamError as e:
            declared = {p.name: p for p in getattr(cls, "params", ())}
            pkey = f"{key}.{e.key}"
            if e.key not in declared and e.key != "name":
                raise self.err(pkey, f"unknown parameter of {kind} {name!r}", e.key, e.allowed) from None
            if e.value is None and e.key in declared and declared[e.key].required:
                raise self.err(pkey, f"missing required parameter of {kind} {name!r}", allowed=declared[e.key].allowed()) from None
            raise self.err(pkey, "invalid value", e.value, e.allowed) from None
        except (TypeError, ValueError) as e:
            raise self.err(key, f"cannot create {kind} {name!r}: {e}", spec) from None

    def problem(self, raw: dict) -> ProblemSettings:
        sec = self.section(raw, "problem", PROBLEM_KEYS, required=True)
        if sec.get("loss") is None:
            from .plugins import get_registry

            raise self.err("problem.loss", "required key is missing", allowed=", ".join(get_registry().names("loss")))
        loss = self.component("loss", "problem.loss", sec["loss"])
        reg_spec = sec.get("regularizer")
        regularizer = self.component("regularizer", "problem.regularizer", DEFAULTS["problem.regularizer"] if reg_spec is None else reg_spec)
        C = self.param(sec, "problem", _P_C)
        if math.isinf(C):
            raise self.err("problem.C", "invalid value", sec["C"], "a finite number > 0")
        bias = self.param(sec, "problem", _P_BIAS)
        return ProblemSettings(loss=loss, regularizer=regularizer, C=float(C), bias=bias)

    def engine(self, raw: dict) -> EngineSection:
        """``engine:`` (or its deprecated name ``solver:``; both at once is an error)."""
        present = [k for k in ENGINE_SECTIONS if k in raw]
        if len(present) > 1:
            raise self.err("solver", "engine and solver are the same section (solver is its deprecated name); "
                           "the spec has both", raw["solver"], "one engine section, named engine")
        section = present[0] if present else "engine"
        sec = raw.get(section)
        if sec is None:
            sec = {"name": DEFAULTS["engine.name"]}
        elif isinstance(sec, str):
            sec = {"name": sec}
        elif not isinstance(sec, dict):
            raise self.err(section, "must be a mapping", sec, "a mapping {name: ENGINE, option: value, ...}")
        else:
            sec = dict(sec)
            if sec.get("name") is None:
                sec["name"] = DEFAULTS["engine.name"]
        engine = self.component("engine", section, sec)
        return EngineSection(engine=engine, section=section)

    def output(self, raw: dict) -> OutputSpec:
        sec = self.section(raw, "output", OUTPUT_KEYS, required=False)
        d = self.string(sec, "output", "dir", "a directory path")
        path = Path(d).expanduser() if d is not None else Path("runs") / spec_stem(self.file)
        return OutputSpec(dir=path)


def _presets() -> list[str]:
    """Names of the kernel-bank presets."""
    from .kernels import available_presets

    return list(available_presets())


def _bank_spec_error(err: Callable[..., SpecError], exc: Exception, base: str) -> SpecError:
    """A BankError as a SpecError: its key (under ``kernels.``), problem, value and allowed, as data."""
    key = getattr(exc, "key", None) or base
    if key.startswith("bank"):
        key = "kernels." + key
    problem = getattr(exc, "problem", None) or _one_line(str(exc))
    allowed = getattr(exc, "allowed", None)
    if getattr(exc, "has_value", False):
        return err(key, problem, exc.value, allowed)  # type: ignore[attr-defined]
    return err(key, problem, allowed=allowed)


# ---------------------------------------------------------------------------
# JSON schema
# ---------------------------------------------------------------------------
def _param_schema(p: Param) -> dict[str, Any]:
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
    return s


def _component_schema(kind: str, registrations: Iterable[Any]) -> dict[str, Any]:
    variants: list[dict[str, Any]] = []
    names = []
    for r in registrations:
        names.append(r.name)
        props: dict[str, Any] = {"name": {"const": r.name}}
        props.update({p.name: _param_schema(p) for p in getattr(r.cls, "params", ())})
        required = ["name"] + [p.name for p in getattr(r.cls, "params", ()) if p.required]
        variants.append({
            "type": "object", "description": r.description, "properties": props,
            "required": required, "additionalProperties": False,
        })
    one_of: list[dict[str, Any]] = [{"type": "string", "enum": names}] if names else []
    return {"description": f"a {kind}: its name, or a mapping with name and parameters", "oneOf": one_of + variants}


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the spec, with the installed components."""
    from .plugins import get_registry

    reg = get_registry()
    try:
        from .data import available

        builtins = available()
    except Exception:  # noqa: BLE001  # pragma: no cover
        builtins = []
    size = {"oneOf": [{"type": "number", "minimum": 0, "exclusiveMaximum": 1}, {"type": "integer", "minimum": 1}]}
    data = {
        "type": "object", "additionalProperties": False,
        "properties": {
            "builtin": {"type": "string", "enum": builtins, "description": "a bundled data set"},
            "train": {"type": "string", "description": "training file (.csv[.gz], .npz, .libsvm[.gz]); relative to the spec's folder"},
            "test": {"type": "string", "description": "test file with the same columns"},
            "format": {"type": "string", "enum": list(FORMAT_CHOICES)},
            "target": {"type": "string", "description": "label column (CSV, or a column of a builtin set)"},
            "drop": {"type": "array", "items": {"type": "string"}, "description": "feature columns to leave out"},
            "test_size": {**size, "default": 0.2, "description": "fraction or count of test rows (0: no test part)"},
            "train_size": {**size, "description": "subsample the training part to this fraction or count"},
            "seed": {"type": "integer", "minimum": 0, "default": 0},
            "standardize": {"type": "boolean", "default": True},
        },
    }
    kernels = {
        "type": "object", "additionalProperties": False,
        "properties": {
            "preset": {"type": "string", "enum": _presets() or None},
            "bank": {"type": "array", "items": {"type": "object"}, "minItems": 1},
            "precomputed": {"type": "string", "description": ".npz with K_train, y_train (K_test, y_test, kernel_names)"},
            "normalize": {"type": "string", "enum": list(NORMALIZE_CHOICES), "default": "trace"},
            "memory_budget": {"type": ["string", "integer"], "description": "e.g. 4GiB"},
        },
    }
    if kernels["properties"]["preset"]["enum"] is None:
        del kernels["properties"]["preset"]["enum"]
    problem = {
        "type": "object", "additionalProperties": False, "required": ["loss"],
        "properties": {
            "loss": _component_schema("loss", reg.registrations("loss")),
            "regularizer": {**_component_schema("regularizer", reg.registrations("regularizer")), "default": "l1"},
            "C": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
            "bias": {"type": "boolean", "default": True},
        },
    }
    solver = _component_schema("engine", reg.registrations("engine"))
    solver["default"] = {"name": DEFAULTS["engine.name"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "mklkit spec",
        "type": "object",
        "additionalProperties": False,
        "required": ["kernels", "problem"],
        "properties": {
            "description": {"type": "string"},
            "data": data,
            "kernels": kernels,
            "problem": problem,
            "engine": solver,
            "solver": {**solver, "description": "deprecated name of engine"},
            "output": {"type": "object", "additionalProperties": False, "properties": {"dir": {"type": "string"}}},
        },
    }
