"""The kernel bank's settings (``kernels:``): source, normalisation, memory budget and representation."""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Mapping

from pydantic import ConfigDict, Field, PlainValidator, ValidationInfo, WithJsonSchema, field_validator
from pydantic import model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ..plugins import get_registry
from .errors import MISSING, PipelineError, bank_error, not_among
from .settings import DEFAULTS, FilePath, Settings, absent, given_paths, parse_bytes

_SCHEDULER = "a Dask scheduler address such as tcp://127.0.0.1:8786"


class ShardedSettings(Settings):
    """``kernels.sharded``: the bank in shards on the workers of a Dask cluster."""

    scheduler: Any = Field(description=f"{_SCHEDULER} (or a distributed.Client)")

    @field_validator("scheduler", mode="after")
    @classmethod
    def _address(cls, v: Any) -> Any:
        if not (v.strip() if isinstance(v, str) else hasattr(v, "scheduler_info")):
            raise PipelineError("", "invalid value", v, _SCHEDULER)
        return v


class FactorSettings(Settings):
    """``kernels.factor``: the kernels as factors (:func:`~mklkit.kernels.factorize.build_factor_bank`)."""

    model_config = ConfigDict(strict=False)

    rank: Any = Field(None, description="factor columns per kernel (None: as tol needs)")
    tol: Any = Field(1e-3, description="relative residual trace at which a factor stops")
    method: Any = Field("auto", description="auto, exact, cholesky or nystrom")
    seed: Any = Field(0, description="seed of the Nystrom landmarks")
    refine: Any = Field(
        "auto",
        description="grow the factors of the kernels the solution uses and solve again "
        "(mklkit.pipeline.refine): true (3 rounds), a number of rounds, false, or auto (true "
        "with problem.C: path)",
    )

    @model_validator(mode="after")
    def _checked(self) -> "FactorSettings":
        Representation("factor", self).check(root="")
        return self


@pydantic_dataclass(frozen=True)
class RefineSettings:
    """How :func:`~mklkit.pipeline.refine.refine_factors` grows the factors of the kernels in use (ranges checked)."""

    #: most rounds of refinement after the first solve
    rounds: Annotated[int, Field(ge=0)] = 3
    #: rank multiplied by this per round
    growth: Annotated[float, Field(gt=1.0)] = 4.0
    #: relative residual trace a kernel in use is refined to
    tol: Annotated[float, Field(ge=0.0, lt=1.0)] = 1e-3
    #: a kernel whose dual block norm is at least this fraction of the least active one's is wanted
    near: Annotated[float, Field(gt=0.0, le=1.0)] = 0.9
    #: largest rank per kernel; ``None``: :math:`\sqrt{W/N}`, W = :data:`~mklkit.pipeline.refine.BLOCK_WORK`
    max_rank: Annotated[int, Field(ge=1)] | None = None
    #: fraction of the memory budget all factors together may hold
    share: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5


def kernel_resolver() -> Callable[[str], type]:
    """Kernel functions looked up in the plugin registry (its error lists the names it knows)."""
    return functools.partial(get_registry().get, "kernel")


def refine_rounds(refine: Any, key: str = "refine", path: bool = False) -> int:
    """Rounds of ``kernels.factor.refine``: ``true`` :attr:`RefineSettings.rounds`, ``false`` 0, an
    integer itself, ``"auto"`` that of ``true`` when C is chosen on held-out rows (``path``), else 0
    (``docs/factor_banks.md``)."""
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
    """How the bank is held: ``kind`` (``"auto"``, ``"array"``, ``"sharded"``, ``"factor"``) and the
    settings of that kind; ``"auto"`` is resolved by :func:`~mklkit.pipeline.bank.choose_representation`."""

    kind: str = DEFAULTS["kernels.representation"]
    settings: Any = None

    def __getattr__(self, name: str) -> Any:  # rank, tol, method, seed, scheduler
        if name.startswith("_") or self.settings is None:
            raise AttributeError(name)
        return getattr(self.settings, name)

    def check(self, root: str = "kernels.factor") -> None:
        """Validate the factor settings before any data work (errors under ``root``)."""
        if self.kind != "factor" or self.settings is None:  # None: given factors, nothing to build
            return
        from ..kernels.factorize import check_settings

        try:
            s = self.settings
            check_settings(s.rank, s.tol, s.method, s.seed, root=root)
        except ValueError as exc:
            raise bank_error(exc, root) from None
        refine_rounds(getattr(s, "refine", False), key=f"{root}.refine" if root else "refine")


def _budget(v: Any) -> Any:
    try:
        parse_bytes(v)
    except ValueError:
        raise PipelineError("", "invalid value", v, "a size such as 4GiB, 512MB or a byte count > 0") from None
    return v


#: The keys of ``kernels`` that say where the kernels come from (exactly one).
KERNEL_SOURCES: tuple[str, ...] = ("preset", "bank", "precomputed", "precomputed_factors")
_NPZ_ARRAYS = {
    "precomputed": "K_train, y_train (and K_test, y_test)",
    "precomputed_factors": "L_train, starts or ranks, y_train (and L_test, y_test)",
}


class BankSettings(Settings):
    """The kernels (the spec's ``kernels:``): a preset, bank entries, precomputed kernels or factors."""

    model_config = ConfigDict(json_schema_extra={"x-one-of-keys": list(KERNEL_SOURCES)})

    preset: str | None = absent("a kernel-bank preset (kernels.available_presets())")
    bank: tuple[Any, ...] | None = absent(
        "bank entries such as {function: rbf, width: [0.5, 1], features: all} (docs/data_and_kernels.md)",
        json_schema_extra={"minItems": 1},
    )
    precomputed: FilePath | None = absent(".npz with K_train, y_train (K_test, y_test, names, K_test_diag)")
    precomputed_factors: FilePath | None = absent(
        ".npz with L_train (N, R), starts (M+1,) or ranks (M,), y_train "
        "(L_test, y_test, names): kernels K_m = L_m L_m^T held as factors"
    )
    normalize: Literal["trace", "diagonal", "none"] = Field(
        DEFAULTS["kernels.normalize"], description="kernel normalisation"
    )
    memory_budget: (
        Annotated[int | float | str, PlainValidator(_budget), WithJsonSchema({"type": ["string", "integer"]})] | None
    ) = Field(None, description="largest bank to build, e.g. 4GiB (default 4 GiB)")
    sharded: ShardedSettings | None = absent("build the bank in shards on a Dask cluster")
    factor: FactorSettings | Literal[False] | None = absent(
        "hold the kernels as factors: settings, true (the defaults), "
        "false (Gram matrices), or absent/auto (chosen from N, M and memory_budget: docs/factor_banks.md)"
    )

    @field_validator("bank", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            v = [v]
        if isinstance(v, tuple):
            v = list(v)
        if not isinstance(v, list) or not v:
            raise PipelineError(
                "", "invalid value", v, "a non-empty list of kernel entries such as {function: rbf, width: [0.5, 1]}"
            )
        for i, e in enumerate(v):
            if not isinstance(e, (Mapping, str)):
                raise PipelineError(
                    f"[{i}]", "invalid entry", e, "a mapping such as {function: rbf, width: [0.5, 1], features: all}"
                )
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
        raise PipelineError(
            "",
            "invalid value",
            v,
            "a mapping with keys rank, tol, method, seed, refine; true (those "
            "defaults); false (Gram matrices); or auto (chosen from N, M and memory_budget)",
        )

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo) -> "BankSettings":
        self._given = given_paths(info, _NPZ_ARRAYS)
        modes = [k for k in KERNEL_SOURCES if getattr(self, k) is not None]
        if not modes:
            raise PipelineError(
                "",
                "needs one kernel source",
                allowed="exactly one of " + ", ".join(f"kernels.{k}" for k in KERNEL_SOURCES),
            )
        if len(modes) > 1:
            second = modes[1]
            raise PipelineError(
                second,
                f"kernels.{modes[0]} and kernels.{second} are exclusive",
                list(self.bank) if second == "bank" else MISSING,  # type: ignore[arg-type]
                "exactly one of " + ", ".join(KERNEL_SOURCES),
                shown=repr(self.shown(second)) if second.startswith("precomputed") else None,
            )
        self._check_description()
        for key, arrays in _NPZ_ARRAYS.items():
            path = getattr(self, key)
            if path is None:
                continue
            shown = repr(self.shown(key))
            if not path.is_file():
                raise PipelineError(
                    key, "file not found", shown=shown, allowed=f"an existing .npz file (resolved: {path})"
                )
            if not path.name.lower().endswith(".npz"):
                raise PipelineError(key, "not an NPZ file", shown=shown, allowed=f"a .npz file with {arrays}")
            if "normalize" not in self.model_fields_set:
                self.normalize = "none"
        self._check_representation()
        return self

    def _check_description(self) -> None:
        """A known preset; bank entries that :func:`~mklkit.kernels.validate_bank` accepts."""
        if self.preset is not None:
            from ..kernels import available_presets

            presets = list(available_presets())
            if presets and self.preset not in presets:
                raise not_among("preset", "unknown preset", self.preset, presets)
        if self.bank is not None:
            from ..kernels import BankError, validate_bank

            try:
                validate_bank(list(self.bank), resolve=kernel_resolver(), root="bank")
            except BankError as exc:
                raise bank_error(exc, "bank", absolute=False) from None

    def _check_representation(self) -> None:
        """At most one of ``sharded`` and ``factor``, neither with given kernels or factors."""
        if self.sharded is not None and isinstance(self.factor, FactorSettings):
            raise PipelineError(
                "factor",
                "kernels.sharded and kernels.factor are exclusive",
                self.factor.model_dump(),
                "one representation: kernels.sharded or kernels.factor",
            )
        for kind in ("sharded", "factor"):
            settings = getattr(self, kind)
            if settings in (None, False):
                continue
            if self.precomputed is not None:
                raise PipelineError(
                    kind,
                    "precomputed kernels are held as one array",
                    settings.model_dump(),
                    "kernels.preset or kernels.bank with data",
                )
            if self.precomputed_factors is not None:
                raise PipelineError(
                    kind,
                    "precomputed factors are a factor bank as given (kernels.factor builds factors from data)",
                    settings.model_dump(),
                    "no kernels.sharded or kernels.factor with kernels.precomputed_factors",
                )

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

    def raw_input_kernels(self) -> list[tuple[str, str]]:
        """``(key, name)`` of the kernels of the description that read their features as given (0/1
        indicators, symbol codes: ``KernelFunction.raw_input``), which must not be standardised."""
        if self.preset is None and self.bank is None:
            return []
        from ..kernels import raw_input_kernels

        return raw_input_kernels(self.entries, resolve=kernel_resolver(), root=self.key)

    @property
    def key(self) -> str:
        """The spec key of the description (errors name it)."""
        return "kernels.preset" if self.preset is not None else "kernels.bank"
