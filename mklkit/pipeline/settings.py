"""Settings of the pipeline (data, bank, problem, cross-validation), its defaults and its error.

:data:`DEFAULTS` is the one table of defaults (``docs/specs.md`` and
``docs/api.md`` show it); :class:`PipelineError` carries its key, problem,
value and allowed as data.
"""
from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from ..components.params import ParamError, did_you_mean
from ..plugins import UnknownComponentError, get_registry
from .errors import MISSING, PipelineError, bank_error


#: Defaults of the settings, shared by specs and estimators (``docs/specs.md``).
DEFAULTS: dict[str, Any] = {
    "data.test_size": 0.2,
    "data.seed": 0,
    "data.standardize": True,
    "kernels.normalize": "trace",
    "kernels.representation": "auto",
    "problem.regularizer": "l1",
    "problem.multiclass": "ovr",
    "problem.C": "auto",
    "problem.bias": True,
    "engine.name": "spicy",
    "cv.folds": 5,
    "cv.test_size": 0.2,
    "cv.seed": 0,
}

#: Where the Gram bank lives: one (M, N, N) array, kernel shards on Dask
#: workers (:class:`~mklkit.kernels.sharded.ShardedBank`), or factors
#: :math:`K_m = L_mL_m^\top` (:class:`~mklkit.kernels.factor.FactorBank`).
REPRESENTATIONS: tuple[str, ...] = ("array", "sharded", "factor")


_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}


def parse_bytes(value: Any) -> int:
    """``4GiB`` -> 4294967296; ``512MB`` -> 512000000; ints are bytes.  Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(value)
        return int(value)
    if not isinstance(value, str):
        raise ValueError(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(value)
    n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if n <= 0:
        raise ValueError(value)
    return int(n)


# ---------------------------------------------------------------------------
# Settings: typed models (pydantic); the spec's sections are these models
# ---------------------------------------------------------------------------
def none_is_absent(value: Any) -> Any:
    """A mapping without its ``None`` values: in a spec ``key: null`` means the default."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    return value


class Settings(BaseModel):
    """Base of the settings models: unknown keys refused, strict types, ``None`` means the default."""

    model_config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True,
                              validate_default=False)

    @model_validator(mode="before")
    @classmethod
    def _drop_none(cls, value: Any) -> Any:
        return none_is_absent(value)


def _is_none(v: Any) -> bool:
    return v is None


def _is_empty(v: Any) -> bool:
    return not v


def _shown_path(given: Mapping[str, str], key: str, path: Any) -> str:
    return given.get(key, str(path))


def resolve_path(value: Any, folder: Path | None) -> Path:
    """A path as written, relative to ``folder`` (the spec's folder) unless absolute."""
    p = Path(value).expanduser()
    return p if p.is_absolute() or folder is None else folder / p


def _path(value: Any, info: ValidationInfo) -> Any:
    """A file path as written -> resolved against the spec's folder (``context={"folder": ...}``)."""
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value.strip():
        raise PipelineError("", "invalid value", value, "a file path (relative to the spec's folder)")
    given = (info.context or {}).get("given")
    if given is not None and info.field_name is not None:
        given[info.field_name] = value
    return resolve_path(value, (info.context or {}).get("folder"))


#: A file path: written as a string, resolved against the spec's folder.
FilePath = Annotated[Path, BeforeValidator(_path), WithJsonSchema({"type": "string"})]


def _size(allow_zero: bool) -> Callable[[Any], Any]:
    """A fraction in [0, 1) (or (0, 1)) or a row count >= 1 (``1.0`` and up read as counts)."""
    allowed = f"a fraction in {'[0, 1)' if allow_zero else '(0, 1)'} or a row count >= 1"

    def check(v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise PipelineError("", "invalid value", v, allowed)
        if isinstance(v, float) and v.is_integer() and v >= 1:
            v = int(v)
        if isinstance(v, float):
            if not ((0.0 <= v < 1.0) if allow_zero else (0.0 < v < 1.0)):
                raise PipelineError("", "out of range", v, allowed)
        elif v < 0 or (v == 0 and not allow_zero):
            raise PipelineError("", "out of range", v, allowed)
        return v

    return check


_SIZE_SCHEMA = {"anyOf": [{"type": "number", "minimum": 0, "exclusiveMaximum": 1}, {"type": "integer", "minimum": 1}]}
#: ``data.test_size``: a fraction in [0, 1) or a row count.
TestSize = Annotated[float | int, PlainValidator(_size(True)), WithJsonSchema(_SIZE_SCHEMA)]
#: ``data.train_size``, ``cv.test_size``: a fraction in (0, 1) or a row count.
PartSize = Annotated[float | int, PlainValidator(_size(False)), WithJsonSchema(_SIZE_SCHEMA)]
Seed = Annotated[int, Field(ge=0)]


class DataSettings(Settings):
    """Where the examples come from and how they are split (the spec's ``data:``).

    Which keys were given is :attr:`model_fields_set`; :meth:`shown` gives a
    file path as written.
    """

    builtin: str | None = Field(None, exclude_if=_is_none, description="a bundled data set (mklkit.data.available())")
    train: FilePath | None = Field(None, exclude_if=_is_none, description="training file (.csv[.gz], .npz, .libsvm[.gz]); "
                                                    "relative to the spec's folder")
    test: FilePath | None = Field(None, exclude_if=_is_none, description="test file with the same columns")
    format: Literal["csv", "npz", "libsvm"] | None = Field(None, exclude_if=_is_none, description="file format (default: "
                                                                           "from the file name)")
    target: str | None = Field(None, exclude_if=_is_none, description="label column (CSV, or a column of a builtin set)")
    drop: tuple[str, ...] = Field((), exclude_if=_is_empty, description="feature columns to leave out")
    positive: str | int | float | None = Field(None, exclude_if=_is_none, description="the positive class of "
                                               "two labels (default: the greater, in sorted order)")
    sample_weight: str | None = Field(None, exclude_if=_is_none, description="the column of per-row "
                                      "weights >= 0 (taken out of the features)")
    class_weight: Any = Field(None, exclude_if=_is_none, description="'balanced' or {label: weight}: "
                              "every row's weight times its class's (classification)")
    test_size: TestSize = Field(DEFAULTS["data.test_size"],
                                description="fraction or count of test rows (0: no test part)")
    train_size: PartSize | None = Field(None, description="subsample the training part to this fraction "
                                                         "or count")
    seed: Seed = Field(DEFAULTS["data.seed"], description="seed of the split")
    standardize: bool = Field(DEFAULTS["data.standardize"], description="centre and scale the features "
                                                                       "with training statistics")
    _given: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("builtin", mode="after")
    @classmethod
    def _known_builtin(cls, v: str | None) -> str | None:
        from ..data import available

        names = available()
        if v is not None and v not in names:
            raise PipelineError("", f"unknown builtin data set{did_you_mean(v, names)}", v, ", ".join(names))
        return v

    @field_validator("class_weight", mode="after")
    @classmethod
    def _class_weight(cls, v: Any) -> Any:
        allowed = "'balanced' or a mapping {label: weight} of numbers >= 0 (missing labels weigh 1)"
        if v is None or v == "balanced":
            return v
        if not isinstance(v, Mapping) or not v:
            raise PipelineError("", "invalid value", v, allowed)
        for label, w in v.items():
            if isinstance(label, bool) or not isinstance(label, (str, int, float)):
                raise PipelineError(str(label), "invalid label", label, "a label as the data write it")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and w >= 0):
                raise PipelineError(str(label), "invalid weight", w, "a finite number >= 0")
        return dict(v)

    @field_validator("drop", mode="before")
    @classmethod
    def _one_column(cls, v: Any) -> Any:
        if isinstance(v, str):
            return (v,)
        if isinstance(v, list) and all(isinstance(c, str) for c in v):
            return tuple(v)
        if not isinstance(v, tuple):
            raise PipelineError("", "invalid value", v, "a list of column names")
        return v

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "DataSettings":
        self._given = {k: v for k, v in ((info.context or {}).get("given") or {}).items() if k in ("train", "test")}
        given = self.model_fields_set
        for key in ("train", "test"):
            p = getattr(self, key)
            if p is not None and not p.is_file():
                raise PipelineError(key, "file not found" if not p.exists() else "not a file",
                                    allowed=f"an existing file (resolved: {p})", shown=repr(self.shown(f"data.{key}")))
        if self.format is not None and self.train is None:
            raise PipelineError("format", "only used with data.train", self.format, "data.train with format")
        if self.sample_weight is not None and self.sample_weight in self.drop:
            raise PipelineError("drop", "drops the sample_weight column", self.sample_weight,
                                "feature columns other than data.sample_weight")
        if self.sample_weight is not None and self.sample_weight == self.target:
            raise PipelineError("sample_weight", "is the target column", self.sample_weight,
                                "a column other than data.target")
        if self.target is not None and self.target in self.drop:
            raise PipelineError("drop", "drops the target column", self.target,
                                "feature columns other than data.target")
        if self.test is not None:
            if "test_size" in given:
                raise PipelineError("test_size", "not used when data.test gives a test file", self.test_size,
                                    "data.test or data.test_size, not both")
            self.test_size = 0
        return self

    def shown(self, key: str) -> str:
        """A file path as written (``key`` is ``data.train``, ``data.test``)."""
        name = key.split(".")[-1]
        return _shown_path(self._given, name, getattr(self, name))


class ShardedSettings(Settings):
    """``kernels.sharded``: the bank in shards on the workers of a Dask cluster."""

    scheduler: Any = Field(description="a Dask scheduler address such as tcp://127.0.0.1:8786 "
                                       "(or a distributed.Client)")

    @field_validator("scheduler", mode="after")
    @classmethod
    def _address(cls, v: Any) -> Any:
        if isinstance(v, str) and not v.strip():
            raise PipelineError("", "invalid value", v, "a Dask scheduler address such as tcp://127.0.0.1:8786")
        if not isinstance(v, str) and not hasattr(v, "scheduler_info"):
            raise PipelineError("", "invalid value", v, "a Dask scheduler address such as tcp://127.0.0.1:8786")
        return v


class FactorSettings(Settings):
    """``kernels.factor``: the kernels as factors (:func:`~mklkit.kernels.factorize.build_factor_bank`).

    The values are checked by :func:`mklkit.kernels.factorize.check_settings`.
    """

    model_config = ConfigDict(strict=False)

    rank: Any = Field(None, description="factor columns per kernel (None: as tol needs)")
    tol: Any = Field(1e-3, description="relative residual trace at which a factor stops")
    method: Any = Field("auto", description="auto, exact, cholesky or nystrom")
    seed: Any = Field(0, description="seed of the Nystrom landmarks")
    refine: Any = Field("auto", description="grow the factors of the kernels the solution uses and solve again "
                        "(mklkit.pipeline.refine): true (3 rounds), a number of rounds, false, or auto (true "
                        "with problem.C: path)")

    @model_validator(mode="after")
    def _checked(self) -> "FactorSettings":
        from ..kernels.factorize import FactorError, check_settings

        try:
            check_settings(self.rank, self.tol, self.method, self.seed)
        except FactorError as exc:
            raise bank_error(exc, "") from None
        refine_rounds(self.refine)
        return self


@dataclass(frozen=True)
class RefineSettings:
    """How :func:`~mklkit.pipeline.refine.refine_factors` grows the factors of the kernels in use."""

    #: most rounds of refinement after the first solve
    rounds: int = 3
    #: rank multiplied by this per round
    growth: float = 4.0
    #: relative residual trace a kernel in use is refined to
    tol: float = 1e-3
    #: a kernel whose dual block norm is at least this fraction of the least active one's is wanted
    near: float = 0.9
    #: largest rank per kernel; ``None``: :math:`\sqrt{W/N}` with
    #: :data:`~mklkit.pipeline.refine.BLOCK_WORK` = W (a Newton
    #: step on one block of rank r costs about N r^2 flops in ``bcd``)
    max_rank: int | None = None
    #: fraction of the memory budget all factors together may hold
    share: float = 0.5

    def __post_init__(self) -> None:
        checks = {"rounds": isinstance(self.rounds, int) and self.rounds >= 0,
                  "growth": self.growth > 1.0, "tol": 0.0 <= self.tol < 1.0, "near": 0.0 < self.near <= 1.0,
                  "max_rank": self.max_rank is None or (isinstance(self.max_rank, int) and self.max_rank >= 1),
                  "share": 0.0 < self.share <= 1.0}
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"RefineSettings: invalid {', '.join(f'{k}={getattr(self, k)!r}' for k in bad)} "
                             "(rounds >= 0, growth > 1, 0 <= tol < 1, 0 < near <= 1, max_rank >= 1, "
                             "0 < share <= 1)")


def kernel_resolver() -> Callable[[str], type]:
    """Kernel functions are looked up in the plugin registry (with the names it knows in errors)."""
    from ..kernels.description import UnknownName

    reg = get_registry()

    def resolve(name: str) -> type:
        try:
            return reg.get("kernel", name)
        except UnknownComponentError as exc:
            raise UnknownName(exc.args[0] if exc.args else str(exc), reg.names("kernel")) from None

    return resolve


def refine_rounds(refine: Any, key: str = "refine", path: bool = False) -> int:
    """Rounds of ``kernels.factor.refine``: ``true`` is :attr:`RefineSettings.rounds`, ``false``
    0, an integer itself, ``"auto"`` that of ``true`` when C is asked to be chosen on held-out rows (``path``: ``C="path"``), else 0
    (``C="auto"``'s path does not refine: on w8a refinement added 16 s to a 49 s fit for the same
    accuracy)."""
    import numpy as np

    if isinstance(refine, str) and refine == "auto":
        refine = bool(path)
    if isinstance(refine, (bool, np.bool_)):
        return RefineSettings.rounds if refine else 0
    if isinstance(refine, numbers.Integral) and refine >= 0:
        return int(refine)
    raise PipelineError(key, "invalid value", refine, "true, false, auto or a number of rounds >= 0")


@dataclass(frozen=True)
class Representation:
    """How the bank is held: ``kind`` and the settings of that kind (``kernels.sharded``/``kernels.factor``).

    Attributes
    ----------
    kind : {"auto", "array", "sharded", "factor"}
        ``"auto"`` (neither ``kernels.factor`` nor ``kernels.sharded`` given) is
        resolved to ``"array"`` or ``"factor"`` by
        :func:`~mklkit.pipeline.bank.choose_representation` once the bank's
        size is known.
    settings : ShardedSettings, FactorSettings or None
    """

    kind: str = DEFAULTS["kernels.representation"]
    settings: Any = None

    def __getattr__(self, name: str) -> Any:  # rank, tol, method, seed, scheduler
        if name.startswith("_") or self.settings is None:
            raise AttributeError(name)
        return getattr(self.settings, name)

    def check(self, root: str = "kernels.factor") -> None:
        """Validate the factor settings before any data work (errors under ``root``)."""
        if self.kind != "factor" or self.settings is None:   # None: given factors, nothing to build
            return
        from ..kernels.factorize import check_settings

        try:
            s = self.settings
            check_settings(s.rank, s.tol, s.method, s.seed, root=root)
        except ValueError as exc:
            raise bank_error(exc, root) from None
        refine_rounds(getattr(s, "refine", False), key=f"{root}.refine")


def _budget(v: Any) -> Any:
    try:
        parse_bytes(v)
    except ValueError:
        raise PipelineError("", "invalid value", v, "a size such as 4GiB, 512MB or a byte count > 0") from None
    return v


#: The keys of ``kernels`` that say where the kernels come from (exactly one).
KERNEL_SOURCES: tuple[str, ...] = ("preset", "bank", "precomputed", "precomputed_factors")


class BankSettings(Settings):
    """The kernels (the spec's ``kernels:``): a preset, bank entries, precomputed kernels or factors."""

    model_config = ConfigDict(json_schema_extra={"x-one-of-keys": list(KERNEL_SOURCES)})

    preset: str | None = Field(None, exclude_if=_is_none, description="a kernel-bank preset (kernels.available_presets())")
    bank: tuple[Any, ...] | None = Field(None, exclude_if=_is_none, description="bank entries such as {function: rbf, width: [0.5, 1], "
                                                    "features: all} (docs/data_and_kernels.md)",
                                   json_schema_extra={"minItems": 1})
    precomputed: FilePath | None = Field(None, exclude_if=_is_none, description=".npz with K_train, y_train (K_test, y_test, "
                                                           "names, K_test_diag)")
    precomputed_factors: FilePath | None = Field(
        None, exclude_if=_is_none, description=".npz with L_train (N, R), starts (M+1,) or ranks (M,), y_train "
                                               "(L_test, y_test, names): kernels K_m = L_m L_m^T held as factors")
    normalize: Literal["trace", "diagonal", "none"] = Field(DEFAULTS["kernels.normalize"],
                                                             description="kernel normalisation")
    memory_budget: Annotated[int | float | str, PlainValidator(_budget),
                             WithJsonSchema({"type": ["string", "integer"]})] | None = Field(
        None, description="largest bank to build, e.g. 4GiB (default 4 GiB)")
    sharded: ShardedSettings | None = Field(None, exclude_if=_is_none, description="build the bank in shards on a Dask cluster")
    factor: FactorSettings | Literal[False] | None = Field(
        None, exclude_if=_is_none, description="hold the kernels as factors: settings, true (the defaults), "
        "false (Gram matrices), or absent/auto (chosen from N, M and memory_budget: docs/factor_banks.md)")
    _given: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("bank", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            v = [v]
        if isinstance(v, tuple):
            v = list(v)
        if not isinstance(v, list) or not v:
            raise PipelineError("", "invalid value", v, "a non-empty list of kernel entries such as "
                                "{function: rbf, width: [0.5, 1]}")
        for i, e in enumerate(v):
            if not isinstance(e, (Mapping, str)):
                raise PipelineError(f"[{i}]", "invalid entry", e, "a mapping such as "
                                    "{function: rbf, width: [0.5, 1], features: all}")
        return tuple({"function": e} if isinstance(e, str) else dict(e) for e in v)

    @field_validator("factor", mode="before")
    @classmethod
    def _factor_true(cls, v: Any) -> Any:
        if v is True:
            return {}
        if v is None or (isinstance(v, str) and v == "auto"):
            return None
        if v is False or isinstance(v, (Mapping, FactorSettings)):
            return v
        raise PipelineError("", "invalid value", v, "a mapping with keys rank, tol, method, seed, refine; true (those "
                            "defaults); false (Gram matrices); or auto (chosen from N, M and memory_budget)")

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> "BankSettings":
        self._given = {k: v for k, v in ((info.context or {}).get("given") or {}).items()
                       if k in ("precomputed", "precomputed_factors")}
        modes = [k for k in KERNEL_SOURCES if getattr(self, k) is not None]
        if not modes:
            raise PipelineError("", "needs one kernel source",
                                allowed="exactly one of " + ", ".join(f"kernels.{k}" for k in KERNEL_SOURCES))
        if len(modes) > 1:
            second = modes[1]
            raise PipelineError(second, f"kernels.{modes[0]} and kernels.{second} are exclusive",
                                list(self.bank) if second == "bank" else (  # type: ignore[arg-type]
                                    self.preset if second == "preset" else MISSING),
                                "exactly one of " + ", ".join(KERNEL_SOURCES),
                                shown=repr(self.shown(second)) if second.startswith("precomputed") else None)
        if self.preset is not None:
            from ..kernels import available_presets

            presets = list(available_presets())
            if presets and self.preset not in presets:
                raise PipelineError("preset", f"unknown preset{did_you_mean(self.preset, presets)}", self.preset,
                                    ", ".join(presets))
        if self.bank is not None:
            from ..kernels import BankError, validate_bank

            try:
                validate_bank(list(self.bank), resolve=kernel_resolver(), root="bank")
            except BankError as exc:
                raise bank_error(exc, "bank", absolute=False) from None
        for key, arrays in (("precomputed", "K_train, y_train (and K_test, y_test)"),
                            ("precomputed_factors", "L_train, starts or ranks, y_train (and L_test, y_test)")):
            path = getattr(self, key)
            if path is None:
                continue
            shown = repr(self.shown(key))
            if not path.is_file():
                raise PipelineError(key, "file not found", shown=shown,
                                    allowed=f"an existing .npz file (resolved: {path})")
            if not path.name.lower().endswith(".npz"):
                raise PipelineError(key, "not an NPZ file", shown=shown, allowed=f"a .npz file with {arrays}")
            if "normalize" not in self.model_fields_set:
                self.normalize = "none"
        if self.sharded is not None and isinstance(self.factor, FactorSettings):
            raise PipelineError("factor", "kernels.sharded and kernels.factor are exclusive",
                                self.factor.model_dump(), "one representation: kernels.sharded or kernels.factor")
        for kind in ("sharded", "factor"):
            if getattr(self, kind) in (None, False):
                continue
            if self.precomputed is not None:
                raise PipelineError(kind, "precomputed kernels are held as one array",
                                    getattr(self, kind).model_dump(), "kernels.preset or kernels.bank with data")
            if self.precomputed_factors is not None:
                raise PipelineError(kind, "precomputed factors are a factor bank as given (kernels.factor builds "
                                    "factors from data)", getattr(self, kind).model_dump(),
                                    "no kernels.sharded or kernels.factor with kernels.precomputed_factors")
        return self

    @property
    def budget(self) -> int | None:
        """``memory_budget`` in bytes (``None``: the default budget)."""
        return None if self.memory_budget is None else parse_bytes(self.memory_budget)

    @property
    def representation(self) -> Representation:
        if self.sharded is not None:
            return Representation("sharded", self.sharded)
        if isinstance(self.factor, FactorSettings):
            return Representation("factor", self.factor)
        if self.precomputed_factors is not None:
            return Representation("factor")
        if self.factor is False or self.precomputed is not None:
            return Representation("array")
        return Representation()

    @property
    def mode(self) -> str:
        """The kernel source: ``preset``, ``bank``, ``precomputed`` or ``precomputed_factors``."""
        return next(k for k in KERNEL_SOURCES if getattr(self, k) is not None)

    @property
    def entries(self) -> Any:
        """The description :func:`~mklkit.kernels.description.expand_bank` takes."""
        return self.preset if self.preset is not None else [dict(e) for e in (self.bank or ())]

    @property
    def key(self) -> str:
        """The spec key of the description (errors name it)."""
        return "kernels.preset" if self.preset is not None else "kernels.bank"

    def shown(self, key: str) -> str:
        """The file of ``kernels.precomputed`` or ``kernels.precomputed_factors`` (``key``) as written."""
        name = key.rsplit(".", 1)[-1]
        path = getattr(self, name, None)
        return _shown_path(self._given, name, path if path is not None else "X")


def component_dict(comp: Any) -> dict[str, Any]:
    """A component as its spec: ``{"name": ..., **params}``."""
    return {"name": comp.name, **comp.get_params()}


def _component(kind: str, default: Any = None, mapping_only: bool = False) -> Callable[[Any], Any]:
    """A validator that makes a component (``name``, ``{name: ..., param: value}`` or an instance).

    The component's own :class:`~mklkit.components.params.Param` declarations
    validate its parameters (through the registry's ``create``); errors are
    PipelineErrors keyed relative to the component (``name``, ``lam``).
    """

    def make(spec: Any) -> Any:
        from ..components.base import Component

        if isinstance(spec, Component):
            return spec
        reg = get_registry()
        names = reg.names(kind)
        if default is not None:
            if spec is None:
                spec = {"name": default}
            elif isinstance(spec, str):
                spec = {"name": spec}
            elif not isinstance(spec, Mapping):
                raise PipelineError("", "must be a mapping", spec, f"a mapping {{name: {kind.upper()}, option: "
                                    "value, ...}")
            elif spec.get("name") is None:
                spec = {**spec, "name": default}
        if isinstance(spec, str):
            name, name_key = spec, ""
        elif isinstance(spec, Mapping):
            if spec.get("name") is None:
                raise PipelineError("name", f"a {kind} mapping needs a name", dict(spec), ", ".join(names))
            name, name_key = spec["name"], "name"
            if not isinstance(name, str):
                raise PipelineError(name_key, "invalid value", name, ", ".join(names))
        else:
            raise PipelineError("", f"invalid {kind}", spec, f"a {kind} name ({', '.join(names)}) or a mapping "
                                "{name: ..., param: value}")
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
            raise PipelineError(name_key, problem, name, ", ".join(names) or "none registered") from None
        try:
            return reg.create(kind, dict(spec) if isinstance(spec, Mapping) else spec)
        except ParamError as e:
            declared = {p.name: p for p in getattr(cls, "params", ())}
            if e.key not in declared and e.key != "name":
                raise PipelineError(e.key, f"unknown parameter of {kind} {name!r}", e.key, e.allowed) from None
            if e.value is None and e.key in declared and declared[e.key].required:
                raise PipelineError(e.key, f"missing required parameter of {kind} {name!r}",
                                    allowed=declared[e.key].allowed()) from None
            raise PipelineError(e.key, "invalid value", e.value, e.allowed) from None
        except (TypeError, ValueError) as e:
            raise PipelineError("", f"cannot create {kind} {name!r}: {e}", spec) from None

    return make


def _component_type(kind: str, default: Any = None) -> Any:
    """The annotated type of a component field: made by :func:`_component`, dumped as its spec."""
    return Annotated[Any, PlainValidator(_component(kind, default)), PlainSerializer(component_dict),
                     WithJsonSchema({"x-component": kind})]


LossField = _component_type("loss")
RegularizerField = _component_type("regularizer")
EngineField = _component_type("engine", DEFAULTS["engine.name"])


#: ``C = "auto"``: :math:`c\sqrt{\sum_m \mathrm{tr}K_m / (MN)}` (the root mean diagonal of the
#: training kernels, ``1/sqrt(N)`` for unit-trace kernels), with ``c`` per task: the best
#: scale of a grid on the bundled sets (docs/api.md, "C='auto'").
AUTO_C_SCALE: dict[str, float] = {"classification": 1.0, "regression": 6.0}

#: The names ``problem.C`` (and the estimators' ``C``) takes besides a number.
C_NAMES = ("auto", "path", "scale")
_C_ALLOWED = ", ".join(C_NAMES) + " or a finite number > 0"


def _C(value: Any) -> float | str:
    """``problem.C``: ``"auto"``, ``"path"`` (:mod:`mklkit.pipeline.heldout`), ``"scale"`` (:func:`auto_C`)
    or a finite number > 0."""
    if isinstance(value, str) and value.strip() in C_NAMES:
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PipelineError("", "invalid value", value, _C_ALLOWED)
    if not (math.isfinite(value) and value > 0):
        raise PipelineError("", "invalid value", value, _C_ALLOWED)
    return float(value)


#: ``problem.C`` in the JSON Schema: a number > 0 or the string ``auto``, ``path`` or ``scale``.
CValue = Annotated[Any, PlainValidator(_C), WithJsonSchema(
    {"type": ["number", "string"], "exclusiveMinimum": 0, "pattern": "^(auto|path|scale)$"})]


def auto_C(problem: Any, key: str = "problem.C") -> float:
    r"""The C of ``C = "scale"`` on a problem's training kernels (:data:`AUTO_C_SCALE`); ``"auto"``'s
    value where held-out rows are too few to choose C (:func:`mklkit.pipeline.heldout.path_decides`).

    :math:`C = c\sqrt{\sum_m \mathrm{tr}K_m / (MN)}`, with ``c`` = 1 for
    classification and 6 for regression losses (with sample weights the mean
    diagonal is weighted, :math:`\sum_m\sum_i w_i (K_m)_{ii} / (M\sum_i w_i)`, as on
    the rows repeated by integer weights); on a factor bank the traces
    count what the factors leave out, so that C does not depend on the
    approximation.  The same rule for specs (``problem.C: scale``) and the
    estimators (``C="scale"``).

    Raises
    ------
    PipelineError
        At ``key`` when the kernels' mean diagonal is not positive.
    """
    import numpy as np

    N = int(problem.n_samples)
    w = getattr(problem, "sample_weight", None)
    if w is not None and problem.representation == "array":
        diag = np.einsum("mii->mi", problem.K)
        mean_diag = float(np.sum(diag @ w)) / (diag.shape[0] * float(np.sum(w))) if diag.size else 0.0
    elif w is not None and hasattr(problem.bank, "weighted_trace"):   # a factor bank
        tr = np.asarray(problem.bank.weighted_trace(w), dtype=np.float64)
        # the trace the factors leave out, spread evenly over the rows
        tr = tr + np.asarray(getattr(problem.bank, "trace_error", 0.0), dtype=np.float64) * float(np.mean(w))
        mean_diag = float(tr.sum()) / (tr.size * float(np.sum(w))) if tr.size else 0.0
    else:
        tr = np.asarray(problem.bank.trace(), dtype=np.float64)
        tr = tr + np.asarray(getattr(problem.bank, "trace_error", 0.0), dtype=np.float64)
        mean_diag = float(tr.sum()) / (tr.size * N) if tr.size and N else 0.0
    if not (mean_diag > 0.0 and math.isfinite(mean_diag)):
        raise PipelineError(key, f"'auto' needs kernels with a positive mean diagonal (got {mean_diag!r})",
                            "auto", "a number > 0")
    return AUTO_C_SCALE.get(problem.loss.task, 1.0) * math.sqrt(mean_diag)


class ProblemSettings(Settings):
    """Loss, regularizer (validated component instances), C, bias (the spec's ``problem:``)."""

    loss: LossField = Field(description="a loss: its name, or a mapping with name and parameters")
    regularizer: RegularizerField = Field(DEFAULTS["problem.regularizer"], validate_default=True,
                                          description="a regularizer: its name, or a mapping with name "
                                                      "and parameters")
    C: CValue = Field(DEFAULTS["problem.C"], description="regularization constant: a number > 0; path (chosen "
                      "on held-out rows); scale (the root mean diagonal of the training kernels, x 6 for "
                      "regression losses); or auto (path with at least 2,500 training rows, else scale)")
    bias: bool = Field(DEFAULTS["problem.bias"], description="fit an unregularized offset")
    multiclass: Literal["ovr", "ovo"] = Field(DEFAULTS["problem.multiclass"], exclude_if=lambda v: v == "ovr",
                                              description="more than two "
                                              "classes: one-vs-rest (one problem per class) or one-vs-one "
                                              "(one per pair of classes, on their rows; Gram matrices only)")


class CVSettings(Settings):
    """K-fold cross-validation or repeated random splits of the training part (the sweep's ``cv:``).

    ``folds``: that many stratified (classification) folds, shuffled with
    ``seed`` (the default: :data:`DEFAULTS` ``cv.folds``).  ``splits``: that
    many random splits, split ``i`` holding out ``test_size`` with seed
    ``seed + i`` exactly as ``mklkit run`` does with ``data.seed = seed + i``.
    """

    folds: Annotated[int, Field(ge=2)] | None = Field(None, description="k of k-fold cross-validation")
    splits: Annotated[int, Field(ge=1)] | None = Field(None, description="number of random splits")
    test_size: PartSize | None = Field(None, description="fraction or count held out by each split")
    seed: Seed = Field(DEFAULTS["cv.seed"], description="seed of the folds (split i: seed + i)")

    @model_validator(mode="after")
    def _one_kind(self) -> "CVSettings":
        allowed = "{folds: k, seed: s} (k-fold) or {splits: n, test_size: 0.2, seed: s} (random splits)"
        if self.folds is not None and self.splits is not None:
            raise PipelineError("splits", "cv.folds and cv.splits are exclusive", self.splits, allowed)
        if self.splits is None:
            if self.test_size is not None:
                if self.folds is not None:
                    raise PipelineError("test_size", "only used with cv.splits (k folds hold out 1/k each)",
                                        self.test_size, allowed)
                raise PipelineError("splits", "cv.test_size needs the number of splits", allowed=allowed)
            if self.folds is None:
                self.folds = DEFAULTS["cv.folds"]
        elif self.test_size is None:
            self.test_size = DEFAULTS["cv.test_size"]
        return self

    @property
    def kind(self) -> str:
        return "folds" if self.splits is None else "splits"

    @property
    def n(self) -> int:
        return int(self.folds if self.splits is None else self.splits)  # type: ignore[arg-type]

    def describe(self) -> str:
        if self.kind == "folds":
            return f"{self.n}-fold cross-validation (seed {self.seed})"
        size = f"{self.test_size:g}" if isinstance(self.test_size, float) else f"{self.test_size} rows"
        return f"{self.n} random splits holding out {size} (seeds {self.seed}..{self.seed + self.n - 1})"

