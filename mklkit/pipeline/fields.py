"""The base of the settings models: the table of defaults, ``Settings`` and the field types the sections share."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, PrivateAttr, ValidationInfo
from pydantic import WithJsonSchema
from pydantic import model_validator

from .errors import PipelineError

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


_UNITS = {"": 1, "b": 1} | {
    p + suffix: base**i for i, p in enumerate("kmgt", 1) for suffix, base in (("", 1000), ("b", 1000), ("ib", 1024))
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
