"""Settings of the pipeline (data, bank, problem, cross-validation), its defaults and its error.

:data:`DEFAULTS` is the one table of defaults (``docs/specs.md`` and
``docs/api.md`` show it); :class:`PipelineError` carries its key, problem,
value and allowed as data.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from ..components.base import Loss, Regularizer

_MISSING: Any = object()

#: Defaults of the settings, shared by specs and estimators (``docs/specs.md``).
DEFAULTS: dict[str, Any] = {
    "data.test_size": 0.2,
    "data.seed": 0,
    "data.standardize": True,
    "kernels.normalize": "trace",
    "kernels.representation": "array",
    "problem.regularizer": "l1",
    "problem.C": 1.0,
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


def _show(value: Any, limit: int = 80) -> str:
    """A short one-line rendering of an offending value."""
    if isinstance(value, Path):
        value = str(value)
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def one_line_error(head: str, shown: str | None, allowed: str | None) -> str:
    """``<head>; got <shown>; allowed: <allowed>`` (the parts that are given), on one line."""
    parts = [head]
    if shown is not None:
        parts.append(f"got {shown}")
    if allowed:
        parts.append(f"allowed: {allowed}")
    return _one_line("; ".join(parts))


class PipelineError(ValueError):
    """A problem with the data, the bank or the problem settings, with its key as data.

    ``str(err)`` reads ``<key>: <problem>; got <value>; allowed: <allowed>``.

    Attributes
    ----------
    key : str
        Spec key path (``data.target``, ``kernels.bank[1].width``); the
        estimators map it to their parameter name.
    problem : str
    value : Any
        The offending value (:attr:`has_value` tells whether there is one).
    shown : str or None
        How the value is shown (``repr`` of it, or a path as written).
    allowed : str or None
    """

    NO_VALUE: Any = _MISSING

    def __init__(self, key: str, problem: str, value: Any = _MISSING, allowed: str | None = None,
                 *, shown: str | None = None) -> None:
        self.key = key
        self.problem = _one_line(problem)
        self.has_value = value is not _MISSING or shown is not None
        self.value = None if value is _MISSING else value
        self.shown = _one_line(shown) if shown is not None else (_show(value) if self.has_value else None)
        self.allowed = _one_line(allowed) if allowed else None
        super().__init__(self.message())

    def message(self, key: str | None = None, problem: str | None = None) -> str:
        """The one-line message, with ``key`` (and ``problem``) in place of the own ones."""
        key = self.key if key is None else key
        return one_line_error(f"{key}: {problem or self.problem}" if key else (problem or self.problem),
                              self.shown if self.has_value else None, self.allowed)

    def __str__(self) -> str:
        return self.message()


def _bank_error(exc: Exception, base: str) -> PipelineError:
    """A :class:`~mklkit.kernels.bank.BankError` as a PipelineError under ``base``, from its data."""
    key = getattr(exc, "key", None) or base
    if key.startswith("bank"):
        key = "kernels." + key
    elif base.startswith("kernels.") and not key.startswith("kernels"):
        key = f"{base}.{key}" if getattr(exc, "key", None) else base
    problem = getattr(exc, "problem", None) or _one_line(str(exc))
    allowed = getattr(exc, "allowed", None)
    if getattr(exc, "has_value", False):
        return PipelineError(key, problem, exc.value, allowed)  # type: ignore[attr-defined]
    return PipelineError(key, problem, allowed=allowed)


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
# Settings
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class DataSettings:
    """Where the examples come from and how they are split (the spec's ``data:``).

    ``given`` maps key paths of file paths to the path as written (messages
    show that); ``explicit`` names the keys that were given.
    """

    builtin: str | None = None
    train: Path | None = None
    test: Path | None = None
    format: str | None = None
    target: str | None = None
    drop: tuple[str, ...] = ()
    test_size: float | int = DEFAULTS["data.test_size"]
    train_size: float | int | None = None
    seed: int = DEFAULTS["data.seed"]
    standardize: bool = DEFAULTS["data.standardize"]
    explicit: frozenset[str] = frozenset()
    given: Mapping[str, str] = field(default_factory=dict)

    def shown(self, key: str) -> str:
        """A file path as written (``key`` is ``data.train``, ``data.test``)."""
        if key in self.given:
            return self.given[key]
        return str(getattr(self, key.split(".")[-1]))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in ("builtin", "train", "test", "format", "target"):
            v = getattr(self, k)
            if v is not None:
                out[k] = str(v) if isinstance(v, Path) else v
        if self.drop:
            out["drop"] = list(self.drop)
        out.update(test_size=self.test_size, train_size=self.train_size, seed=self.seed,
                   standardize=self.standardize)
        return out


@dataclass(frozen=True)
class Representation:
    """How the bank is held (the spec's ``kernels.sharded`` / ``kernels.factor``).

    Attributes
    ----------
    kind : {"array", "sharded", "factor"}
    scheduler : str or distributed.Client, optional
        ``sharded``: the Dask scheduler address (or a client).
    rank, tol, method, seed
        ``factor``: the settings of :func:`~mklkit.kernels.factorize.build_factor_bank`.
    """

    kind: str = "array"
    scheduler: Any = None
    rank: int | None = None
    tol: float = 1e-3
    method: str = "auto"
    seed: int = 0

    def to_dict(self) -> dict[str, Any] | None:
        if self.kind == "sharded":
            return {"scheduler": self.scheduler if isinstance(self.scheduler, str) else "client"}
        if self.kind == "factor":
            return {"rank": self.rank, "tol": self.tol, "method": self.method, "seed": self.seed}
        return None

    def check(self, root: str = "kernels.factor") -> None:
        """Validate the factor settings (``rank``, ``tol``, ``method``, ``seed``) before any data work."""
        if self.kind != "factor":
            return
        from ..kernels.factorize import check_settings

        try:
            check_settings(self.rank, self.tol, self.method, self.seed, root=root)
        except ValueError as exc:
            raise _bank_error(exc, root) from None


@dataclass(frozen=True)
class BankSettings:
    """The kernels (the spec's ``kernels:``): a preset, bank entries, or precomputed kernels."""

    preset: str | None = None
    bank: tuple[Any, ...] | None = None
    precomputed: Path | None = None
    normalize: str = DEFAULTS["kernels.normalize"]
    memory_budget: int | None = None
    memory_budget_given: Any = None
    representation: Representation = field(default_factory=Representation)
    given: Mapping[str, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        if self.precomputed is not None:
            return "precomputed"
        return "preset" if self.preset is not None else "bank"

    @property
    def entries(self) -> Any:
        """The description :func:`~mklkit.kernels.bank.expand_bank` takes."""
        return self.preset if self.preset is not None else [dict(e) if isinstance(e, Mapping) else e
                                                            for e in (self.bank or ())]

    @property
    def key(self) -> str:
        """The spec key of the description (errors name it)."""
        return "kernels.preset" if self.preset is not None else "kernels.bank"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.preset is not None:
            out["preset"] = self.preset
        if self.bank is not None:
            out["bank"] = [dict(e) if isinstance(e, Mapping) else e for e in self.bank]
        if self.precomputed is not None:
            out["precomputed"] = str(self.precomputed)
        out["normalize"] = self.normalize
        out["memory_budget"] = self.memory_budget_given
        rep = self.representation.to_dict()
        if rep is not None:
            out[self.representation.kind] = rep
        return out


@dataclass(frozen=True)
class ProblemSettings:
    """Loss, regularizer (validated component instances), C, bias (the spec's ``problem:``)."""

    loss: Loss
    regularizer: Regularizer
    C: float = DEFAULTS["problem.C"]
    bias: bool = DEFAULTS["problem.bias"]

    def to_dict(self) -> dict[str, Any]:
        return {"loss": component_dict(self.loss), "regularizer": component_dict(self.regularizer),
                "C": self.C, "bias": self.bias}


def component_dict(comp: Any) -> dict[str, Any]:
    return {"name": comp.name, **comp.get_params()}


@dataclass(frozen=True)
class CVSettings:
    """K-fold cross-validation or repeated random splits of the training part (the sweep's ``cv:``).

    ``kind="folds"``: ``n`` stratified (classification) folds, shuffled with
    ``seed``.  ``kind="splits"``: ``n`` random splits, split ``i`` holding
    out ``test_size`` with seed ``seed + i`` exactly as ``mklkit run`` does
    with ``data.seed = seed + i``.
    """

    kind: str = "folds"
    n: int = DEFAULTS["cv.folds"]
    test_size: float | int | None = None
    seed: int = DEFAULTS["cv.seed"]

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "folds":
            return {"folds": self.n, "seed": self.seed}
        return {"splits": self.n, "test_size": self.test_size, "seed": self.seed}

    def describe(self) -> str:
        if self.kind == "folds":
            return f"{self.n}-fold cross-validation (seed {self.seed})"
        size = f"{self.test_size:g}" if isinstance(self.test_size, float) else f"{self.test_size} rows"
        return f"{self.n} random splits holding out {size} (seeds {self.seed}..{self.seed + self.n - 1})"


def _strip(text: str, *prefixes: str) -> str:
    """``text`` without a leading ``"<prefix>: "`` (data errors start with the file they read)."""
    for prefix in prefixes:
        if prefix and text.startswith(prefix + ": "):
            return text[len(prefix) + 2:]
    return text


_NPZ_ALLOWED = ("an .npz with K_train (M, N, N) symmetric PSD, y_train (N,); optional K_test (M, N_test, N), "
                "y_test, names, K_test_diag")
