"""The spec as typed models: the pipeline's settings as sections, :class:`EngineSection`, :class:`OutputSpec`,
the rules between sections (validators of :class:`Spec`), the sweep grammar and the entry points."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from pydantic import Field, PrivateAttr, RootModel, ValidationError, ValidationInfo, model_validator

from .. import pipeline
from ..pipeline import BankSettings, Data, DataSettings, PipelineError, Prepared, ProblemSettings
from ..pipeline.errors import SpecError, from_pipeline, from_validation, inline_refs
from ..pipeline.settings import Settings
from ..pipeline.problem_settings import EngineField
from .yamlio import apply_overrides, read_spec_file, spec_stem

if TYPE_CHECKING:  # pragma: no cover
    from ..engines.base import Engine

#: The sections of a spec.
TOP_KEYS: tuple[str, ...] = ("description", "data", "kernels", "problem", "engine", "output")
#: Top-level section of a sweep spec (``mklkit sweep``): the cross-validation.
SWEEP_SECTION = "cv"
#: Keys of a sweep spec that may hold a list of values (one grid axis each).
SWEEP_KEYS: tuple[str, ...] = (
    "data.builtin",
    "data.train",
    "problem.loss",
    "problem.regularizer",
    "problem.weighting",
    "problem.C",
    "problem.bias",
    "engine",
)
#: The sweep keys that hold a component (their parameters may be lists).
SWEEP_COMPONENTS: tuple[str, ...] = ("problem.loss", "problem.regularizer", "problem.weighting", "engine")

#: The keys of ``data:`` that ``data.builtin`` excludes: (key, problem, allowed).
_NOT_WITH_BUILTIN = (
    ("data.train", "data.builtin and data.train are exclusive", "one of builtin or train"),
    ("data.test", "a test file needs data.train, not data.builtin", "data.train with data.test"),
)


class EngineSection(RootModel[EngineField]):  # type: ignore[valid-type]
    """``engine:`` -- the engine, an instance holding its validated options."""

    root: EngineField = Field(
        None, validate_default=True, description="the engine: its name, or a mapping with name and options"
    )  # type: ignore[valid-type]

    @property
    def engine(self) -> Engine:
        return self.root

    @property
    def name(self) -> str:
        return self.root.name


class OutputSpec(Settings):
    """``output:`` -- where ``mklkit run`` writes (relative to the working directory)."""

    model_config = {"strict": False}

    dir: Path | None = Field(None, description="output folder (default: runs/<spec file stem>)")


class Spec(Settings):
    """A validated spec: the sections, and the ``file`` as given, the ``folder`` relative input paths
    resolve against and the key paths ``overridden`` by ``--set``."""

    description: str = Field("", description="what the experiment is")
    kernels: BankSettings = Field(description="the kernel bank")
    data: DataSettings | None = Field(
        None, description="the examples (not with kernels.precomputed or kernels.precomputed_factors)"
    )
    problem: ProblemSettings = Field(description="loss, regularizer, C, bias")
    engine: EngineSection = Field(None, validate_default=True, description="the engine")  # type: ignore[assignment]
    output: OutputSpec = Field(default_factory=OutputSpec, description="where mklkit run writes")
    _file: str = PrivateAttr("<spec>")
    _folder: Path = PrivateAttr(default_factory=Path.cwd)
    _overridden: tuple[str, ...] = PrivateAttr(())

    @model_validator(mode="after")
    def _sections_agree(self, info: ValidationInfo) -> "Spec":
        ctx = info.context or {}
        self._file = ctx.get("file", "<spec>")
        source = self.kernels.mode
        precomputed = source.startswith("precomputed")
        if self.data is None:
            if not precomputed:
                raise PipelineError(
                    "data",
                    "required section is missing",
                    allowed="a mapping with keys " + ", ".join(DataSettings.model_fields),
                )
            self.data = DataSettings()
        given = self.data.model_fields_set
        if precomputed:
            extra = sorted(given - {"test_size", "seed", "positive", "class_weight"})
            if extra:
                raise PipelineError(
                    f"data.{extra[0]}",
                    f"not used with kernels.{source} (the NPZ holds the labels)",
                    getattr(self.data, extra[0]),
                    "data.test_size, data.seed, data.positive and data.class_weight only",
                )
            self.data.standardize = False
        elif "builtin" not in given and "train" not in given:
            raise PipelineError(
                "data", "needs a data source", allowed="data.builtin (a bundled data set) or data.train (a file)"
            )
        elif "builtin" in given:
            for key, problem, allowed in _NOT_WITH_BUILTIN:
                if key.removeprefix("data.") in given:
                    raise PipelineError(key, problem, shown=repr(self.data.shown(key)), allowed=allowed)
        if not precomputed:
            self._keep_raw_features(given)
        if self.problem.multiclass == "joint" and "engine" not in self.model_fields_set:  # the joint engine
            object.__setattr__(self, "engine", EngineSection("auto"))
        engine = self.engine.engine.name
        if self.problem.multiclass == "joint" and engine != "auto":
            raise PipelineError(
                "engine.name",
                "problem.multiclass: joint is one problem for all classes, solved by the joint engine",
                engine,
                "auto with problem.multiclass: joint",
            )
        if self.output.dir is None:
            self.output.dir = Path("runs") / spec_stem(self._file)
        else:
            self.output.dir = self.output.dir.expanduser()
        return self

    def _keep_raw_features(self, given: set[str]) -> None:
        """Kernels that read their features as given (0/1 indicators, symbol codes) turn the default
        ``data.standardize`` off; ``data.standardize: true`` with them is an error naming the kernel."""
        raw = self.kernels.raw_input_kernels()
        if not raw:
            return
        if "standardize" in given and self.data.standardize:
            key, name = raw[0]
            raise PipelineError(
                "data.standardize",
                f"kernel {name!r} ({key}) reads its features as given (0/1 indicators or symbol codes), "
                "so they must not be standardised",
                True,
                "false (the default when the bank has such a kernel)",
            )
        self.data.standardize = False

    @property
    def file(self) -> str:
        return self._file

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def overridden(self) -> tuple[str, ...]:
        return self._overridden

    @property
    def name(self) -> str:
        """The spec file's stem (``quickstart`` for ``specs/quickstart.yaml``)."""
        return spec_stem(self.file)

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as plain JSON-able data."""
        assert self.data is not None
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        if not self.kernels.mode.startswith("precomputed") or self.data.model_fields_set:
            out["data"] = self.data.model_dump(mode="json")
        for name in ("kernels", "problem", "engine", "output"):
            out[name] = getattr(self, name).model_dump(mode="json")
        return out

    def error(
        self,
        key: str,
        problem: str,
        value: Any = SpecError.NO_VALUE,
        allowed: str | None = None,
        *,
        shown: str | None = None,
    ) -> SpecError:
        """A :class:`SpecError` for this spec (marks keys set by ``--set``)."""
        return SpecError(self.file, key, problem, value, allowed, shown=shown, overridden=self.overridden)

    def load_data(self) -> Data:
        """Load, check, split and standardize the data (no kernels yet)."""
        assert self.data is not None
        try:
            return pipeline.load_data(self.data, self.kernels, self.problem.loss)
        except PipelineError as exc:
            raise from_pipeline(exc, self.file, self.overridden) from None

    def prepare(
        self, progress: Callable[..., Any] | bool | None = None, build: bool = True, data: Data | None = None
    ) -> Prepared:
        """Load the data, build the kernel bank and the :class:`Problem` (:func:`mklkit.pipeline.prepare`).

        ``build=False``: only the checks (``mklkit validate``; the problem is ``None``).  ``data``
        replaces :meth:`load_data` (one fold of ``mklkit sweep``).
        """
        t0 = time.perf_counter()
        data = self.load_data() if data is None else data
        t_data = time.perf_counter() - t0
        try:
            prepared = pipeline.prepare(
                data, self.kernels, self.problem, self.engine.engine, build=build, progress=progress
            )
        except PipelineError as exc:
            raise from_pipeline(exc, self.file, self.overridden) from None
        prepared.timings = {"data_s": t_data, **prepared.timings}
        prepared.spec = self
        return prepared


@functools.lru_cache(maxsize=None)
def model_schema(cls: Any) -> dict[str, Any]:
    """The JSON Schema of a model as pydantic generates it, inlined (messages read what is allowed from it)."""
    return inline_refs(cls.model_json_schema())


def sweep_lists(raw: Any) -> list[tuple[str, Any]]:
    """The sweep axes of a raw spec mapping, ``[(key path, value), ...]``: a list at one of
    :data:`SWEEP_KEYS`, or a list-valued parameter of a component at :data:`SWEEP_COMPONENTS`
    (``docs/sweeps.md``)."""
    out: list[tuple[str, Any]] = []
    if not isinstance(raw, dict):
        return out
    for key in SWEEP_KEYS:
        section, _, sub = key.partition(".")
        sec = raw.get(section)
        value = (sec.get(sub) if isinstance(sec, dict) else None) if sub else sec
        if isinstance(value, list):
            out.append((key, value))
        elif key in SWEEP_COMPONENTS and isinstance(value, dict):
            out.extend((f"{key}.{k}", v) for k, v in value.items() if isinstance(v, list))
    return out


def refuse_sweep(raw: dict, file: str, overridden: Sequence[str] = ()) -> None:
    """A ``cv`` section or a list at a sweep key: only ``mklkit sweep`` takes those."""
    one = "'mklkit run' and 'mklkit validate' solve one problem"
    hint = f"or run the whole grid with 'mklkit sweep {file}' (docs/sweeps.md)"
    if SWEEP_SECTION in raw:
        problem = f"cross-validation is only done by 'mklkit sweep'; {one}"
        allowed = f"no cv section for a single run, {hint}"
        raise SpecError(file, SWEEP_SECTION, problem, raw[SWEEP_SECTION], allowed, overridden=overridden)
    lists = sweep_lists(raw)
    if lists:
        key, value = lists[0]
        more = f" (this spec has {len(lists)}: {', '.join(k for k, _ in lists)})" if len(lists) > 1 else ""
        problem = f"a list of values makes a sweep{more}; {one}"
        raise SpecError(file, key, problem, value, f"one value, {hint}", overridden=overridden)


def load_spec(path: str | Path, overrides: Sequence[str] | Mapping[str, Any] = ()) -> Spec:
    """Read a spec file, apply ``overrides`` (``"key.path=value"`` strings parsed as YAML, or a mapping)
    and validate it; anything wrong is one :class:`SpecError`."""
    file = str(path)
    raw = read_spec_file(path, "data, kernels, problem, engine, output")
    return parse_spec(raw, file=file, folder=Path(path).resolve().parent, overrides=overrides)


def parse_spec(
    raw: Any, file: str = "<spec>", folder: str | Path | None = None, overrides: Sequence[str] | Mapping[str, Any] = ()
) -> Spec:
    """Validate an already-loaded spec mapping (see :func:`load_spec`)."""
    folder = Path(folder) if folder is not None else Path.cwd()
    if not isinstance(raw, dict):
        raise SpecError(
            file, "", "the spec must be a mapping of sections", raw, "a mapping with keys " + ", ".join(TOP_KEYS)
        )
    raw, overridden = apply_overrides(raw, overrides, file)
    refuse_sweep(raw, file, overridden)
    return validate_spec(raw, file, folder, overridden)


def validate_spec(raw: dict, file: str, folder: Path, overridden: Sequence[str] = ()) -> Spec:
    """The :class:`Spec` of one (sweep-free) mapping, or its first problem as a :class:`SpecError`."""
    spec = validate_model(Spec, raw, file, overridden, context={"file": file, "folder": folder, "given": {}})
    spec._folder = folder
    spec._overridden = tuple(overridden)
    return spec


def validate_model(
    cls: Any, raw: Any, file: str, overridden: Sequence[str] = (), root: Sequence[str] = (), context: Any = None
) -> Any:
    """``cls.model_validate(raw, context=context)`` with its first problem as a :class:`SpecError` at ``root``."""
    try:
        return cls.model_validate(raw, context=context)
    except ValidationError as exc:
        raise from_pipeline(from_validation(exc, model_schema(cls), root), file, overridden) from None
