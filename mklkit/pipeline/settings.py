"""The settings models: their base (``Settings``), the table of defaults, the field types the sections share,
and the data (``data:``) and cross-validation (``cv:``) sections."""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, PrivateAttr, ValidationInfo
from pydantic import WithJsonSchema, field_validator, model_validator

from .errors import PipelineError, not_among

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


_UNITS = {"": 1, "b": 1} | {
    p + suffix: base**i for i, p in enumerate("kmgt", 1) for suffix, base in (("", 1000), ("b", 1000), ("ib", 1024))
}


def parse_bytes(value: Any) -> int:
    """``4GiB`` -> 4294967296; ``512MB`` -> 512000000; numbers are bytes.  Raises ValueError."""
    n = math.nan
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        n = value
    if not (math.isfinite(n) and n > 0):
        raise ValueError(value)
    return int(n)


class Settings(BaseModel):
    """Base of the settings models: unknown keys refused, strict types, ``None`` means the default."""

    model_config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True, validate_default=False)
    _given: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _drop_none(cls, value: Any) -> Any:
        return {k: v for k, v in value.items() if v is not None} if isinstance(value, Mapping) else value

    def shown(self, key: str) -> str:
        """The file of ``key`` (``data.train``, ``kernels.precomputed``...) as written in the spec."""
        name = key.rsplit(".", 1)[-1]
        path = getattr(self, name, None)
        return self._given.get(name, str(path if path is not None else "X"))


def absent(description: str, **kw: Any) -> Any:
    """A field that is ``None`` unless given, left out of dumps then."""
    return Field(None, exclude_if=lambda v: v is None, description=description, **kw)


def given_paths(info: ValidationInfo, keys: Any) -> dict[str, str]:
    """The file paths of ``keys`` as written (recorded by :data:`FilePath` in the validation context)."""
    return {k: v for k, v in ((info.context or {}).get("given") or {}).items() if k in keys}


def _path(value: Any, info: ValidationInfo) -> Any:
    """A file path as written -> resolved against the spec's folder (``context={"folder": ...}``)."""
    if isinstance(value, Path):
        return value
    if not isinstance(value, str) or not value.strip():
        raise PipelineError("", "invalid value", value, "a file path (relative to the spec's folder)")
    given = (info.context or {}).get("given")
    if given is not None and info.field_name is not None:
        given[info.field_name] = value
    p, folder = Path(value).expanduser(), (info.context or {}).get("folder")
    return p if p.is_absolute() or folder is None else folder / p


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
    """Where the examples come from and how they are split (the spec's ``data:``)."""

    builtin: str | None = absent("a bundled data set (mklkit.data.available())")
    train: FilePath | None = absent("training file (.csv[.gz], .npz, .libsvm[.gz]); relative to the spec's folder")
    test: FilePath | None = absent("test file with the same columns")
    format: Literal["csv", "npz", "libsvm"] | None = absent("file format (default: from the file name)")
    target: str | None = absent("label column (CSV, or a column of a builtin set)")
    drop: tuple[str, ...] = Field((), exclude_if=lambda v: not v, description="feature columns to leave out")
    positive: str | int | float | None = absent(
        "the positive class of two labels (default: the greater, in sorted order)"
    )
    inlier: str | int | float | None = absent(
        "with the one_class loss: the label of the inliers (training rows of that label only; the test labels "
        "mark inliers and outliers)"
    )
    sample_weight: str | None = absent("the column of per-row weights >= 0 (taken out of the features)")
    class_weight: Any = absent("'balanced' or {label: weight}: every row's weight times its class's (classification)")
    test_size: TestSize = Field(
        DEFAULTS["data.test_size"], description="fraction or count of test rows (0: no test part)"
    )
    train_size: PartSize | None = Field(None, description="subsample the training part to this fraction or count")
    seed: Seed = Field(DEFAULTS["data.seed"], description="seed of the split")
    standardize: bool = Field(
        DEFAULTS["data.standardize"], description="centre and scale the features with training statistics"
    )

    @field_validator("builtin", mode="after")
    @classmethod
    def _known_builtin(cls, v: str | None) -> str | None:
        from ..data import available

        names = available()
        if v is not None and v not in names:
            raise not_among("", "unknown builtin data set", v, names)
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
        self._given = given_paths(info, ("train", "test"))
        given = self.model_fields_set
        for key in ("train", "test"):
            p = getattr(self, key)
            if p is not None and not p.is_file():
                raise PipelineError(
                    key,
                    "file not found" if not p.exists() else "not a file",
                    allowed=f"an existing file (resolved: {p})",
                    shown=repr(self.shown(f"data.{key}")),
                )
        if self.format is not None and self.train is None:
            raise PipelineError("format", "only used with data.train", self.format, "data.train with format")
        if self.sample_weight is not None and self.sample_weight in self.drop:
            raise PipelineError(
                "drop",
                "drops the sample_weight column",
                self.sample_weight,
                "feature columns other than data.sample_weight",
            )
        if self.sample_weight is not None and self.sample_weight == self.target:
            raise PipelineError(
                "sample_weight", "is the target column", self.sample_weight, "a column other than data.target"
            )
        if self.target is not None and self.target in self.drop:
            raise PipelineError(
                "drop", "drops the target column", self.target, "feature columns other than data.target"
            )
        if self.test is not None:
            if "test_size" in given:
                raise PipelineError(
                    "test_size",
                    "not used when data.test gives a test file",
                    self.test_size,
                    "data.test or data.test_size, not both",
                )
            self.test_size = 0
        return self


class CVSettings(Settings):
    """K-fold cross-validation (``folds``, stratified for classification) or ``splits`` random splits of
    the training part, split ``i`` as ``mklkit run`` with ``data.seed = seed + i`` (the sweep's ``cv:``)."""

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
                    raise PipelineError(
                        "test_size", "only used with cv.splits (k folds hold out 1/k each)", self.test_size, allowed
                    )
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
