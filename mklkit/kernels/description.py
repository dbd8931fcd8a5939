r"""Bank descriptions: entries (or a preset name) expanded to one :class:`BankKernel` per kernel, validated.

An entry names a ``function``, its parameters (a value or a list: one kernel per combination; a
real parameter may be ``"chi2"``: :math:`5\chi^2_1 + 0.1` per kernel, SpicyMKL §6.2), ``features``
(:mod:`mklkit.kernels.features`) and a ``seed``; ``{"preset": name}`` expands to a preset's entries.
Kernels are ordered by entry, feature group, then parameter value; see ``docs/data_and_kernels.md``.
"""

from __future__ import annotations

import itertools
import math
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..components.params import Param, ParamError, did_you_mean, unknown_name
from .errors import BankError, UnknownName, _must, _required, _unknown
from .features import _feature_groups, _is_int, _plain, _seed
from .boolean import BOOLEAN_KERNEL_FUNCTIONS
from .functions import BUILTIN_KERNEL_FUNCTIONS, KernelFunction
from .strings import STRING_KERNEL_FUNCTIONS
from .presets import available_presets, preset_entries

logger = logging.getLogger(__name__)

NORMALIZATIONS = ("trace", "diagonal", "none")
#: Default ``memory_budget_bytes`` of :meth:`KernelBank.build` (4 GiB).
DEFAULT_MEMORY_BUDGET = 4 * 1024**3
#: Degrees of freedom of the χ² in ``width: "chi2"`` draws (σ = 5χ² + 0.1).
CHI2_DF = 1
_ENTRY_KEYS = ("function", "features", "seed")

Resolver = Callable[[str], type]

# their public names: mklkit.kernels.description.BankError, .UnknownName
BankError.__module__ = UnknownName.__module__ = __name__


def make_resolver(classes: Mapping[str, type] | Iterable[type]) -> Resolver:
    """A ``resolve(name) -> class`` over a mapping or an iterable of classes (``LookupError`` for others)."""
    table = dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}

    def resolve(name: str) -> type:
        try:
            return table[name]
        except KeyError:
            names = sorted(table)
            raise UnknownName(unknown_name("kernel function", name, names), names) from None

    return resolve


#: Lookup of the built-in kernel functions (the default ``resolve``).
builtin_resolver: Resolver = make_resolver(
    (*BUILTIN_KERNEL_FUNCTIONS, *BOOLEAN_KERNEL_FUNCTIONS, *STRING_KERNEL_FUNCTIONS)
)


def _lookup(resolve: Resolver | Mapping[str, type] | None, name: str, key: str) -> type[KernelFunction]:
    if resolve is None:
        resolve = builtin_resolver
    elif isinstance(resolve, Mapping):
        resolve = make_resolver(resolve)
    try:
        cls = resolve(name)
    except LookupError as exc:
        if getattr(exc, "available", None) is not None:
            raise _unknown(key, "kernel function", name, exc.available) from None  # type: ignore[attr-defined]
        text = f"{key}: {exc.args[0] if exc.args else f'unknown kernel function {name!r}'}"
        raise BankError(text, key=key, value=name) from None
    if cls is None:
        raise _unknown(key, "kernel function", name, None)
    if not (isinstance(cls, type) and issubclass(cls, KernelFunction)):
        raise BankError(
            f"{key}: {name!r} resolves to {cls!r}, which is not a KernelFunction subclass",
            key=key,
            problem=f"resolves to {cls!r}, which is not a KernelFunction subclass",
            value=name,
            allowed="the name of a KernelFunction subclass",
        )
    return cls


@dataclass(frozen=True)
class BankKernel:
    """One resolved kernel of a bank: its ``function`` (with parameter values), ``features`` (0-based
    columns), ``label`` (e.g. ``rbf(width=0.5)[x3]``) and ``entry`` (index after preset expansion)."""

    function: KernelFunction
    features: tuple[int, ...]
    label: str
    entry: int

    def to_dict(self) -> dict[str, Any]:
        """``{"function": name, <params>..., "features": [indices]}``."""
        return {"function": self.function.name, **self.function.get_params(), "features": list(self.features)}


def _check_normalize(normalize: str) -> str:
    """``normalize`` if it is one of :data:`NORMALIZATIONS`, else a :class:`BankError`."""
    if normalize not in NORMALIZATIONS:
        raise BankError(
            f"normalize must be one of {', '.join(map(repr, NORMALIZATIONS))}; got {normalize!r}"
            f"{did_you_mean(str(normalize), list(NORMALIZATIONS))}"
        )
    return normalize


def _check_normalizable(where: str, normalize: str, tr_raw: float, diag: np.ndarray | None, built: bool) -> None:
    """Refuse a kernel ``normalize`` cannot scale: trace <= 0 (``"trace"``), some k(x, x) <= 0 (``"diagonal"``)."""
    if normalize == "trace" and not (tr_raw > 0.0 and math.isfinite(tr_raw)):
        raise BankError(
            f"{where} has trace {tr_raw!r}; unit-trace normalisation needs a positive trace"
            + (" (a constant-zero feature?); drop the feature or use" if built else "; use")
            + " normalize='diagonal' or 'none'"
        )
    if normalize == "diagonal" and not np.all(diag > 0.0):  # type: ignore[operator]
        i = int(np.argmin(diag))
        raise BankError(
            f"{where} has k(x, x) = {float(diag[i])!r} at sample {i}; unit-diagonal "
            "normalisation needs k(x, x) > 0 for every training point; use "
            "normalize='trace' or 'none'"
        )


#: What a parameter drawn as 5·χ²+0.1 per kernel is parsed to (instead of its list of values).
_CHI2 = "chi2"


def _preset(name: Any, key: str) -> list[dict[str, Any]]:
    """The entries of the preset ``name`` given at ``key``."""
    if not isinstance(name, str):
        raise _must(key, f"one of {', '.join(available_presets())}", name)
    try:
        return preset_entries(name)
    except LookupError:
        raise _unknown(key, "kernel-bank preset", name, available_presets()) from None


def _flatten_presets(entries: Any, root: str) -> list[tuple[str, Any]]:
    """Expand preset names into (key path, entry) pairs."""
    if isinstance(entries, str):
        return [(f"{root}[{k}]", e) for k, e in enumerate(_preset(entries, root))]
    if isinstance(entries, Mapping) or not isinstance(entries, (list, tuple)):
        raise _must(root, f"a list of kernel entries or a preset name ({', '.join(available_presets())})", entries)
    if len(entries) == 0:
        raise _must(root, "a non-empty list of kernel entries", [])
    out: list[tuple[str, Any]] = []
    for i, entry in enumerate(entries):
        where = f"{root}[{i}]"
        if isinstance(entry, Mapping) and "preset" in entry:
            extra = [k for k in entry if k != "preset"]
            if extra:
                raise BankError(
                    f"{where}: a preset entry takes no other keys; got {', '.join(map(str, extra))}",
                    key=f"{where}.{extra[0]}",
                    problem="a preset entry takes no other keys",
                    value=extra[0],
                    allowed="preset alone",
                )
            sub = _preset(entry["preset"], f"{where}.preset")
            out.extend((f"{where}.preset[{k}]", e) for k, e in enumerate(sub))
        else:
            out.append((where, entry))
    return out


def _validate_value(p: Param, value: Any, key: str) -> Any:
    try:
        return p.validate(value)
    except ParamError as exc:
        raise _must(key, exc.allowed, value) from None


def _parse_param(p: Param, value: Any, key: str) -> list[Any] | str:
    value = _plain(value)
    if isinstance(value, str) and value == "chi2":
        if p.type is not float:
            raise _must(
                key, f"{p.allowed()} or a list of such", "chi2", " ('chi2' draws are only for real-valued parameters)"
            )
        return _CHI2
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            raise _must(key, f"{p.allowed()} or a non-empty list of such", [])
        return [_validate_value(p, _plain(v), f"{key}[{k}]") for k, v in enumerate(value)]
    return [_validate_value(p, value, key)]


def _expand(
    entries: Any,
    n_features: int | None,
    feature_names: Sequence[str] | None,
    resolve: Resolver | Mapping[str, type] | None,
    root: str,
) -> list[BankKernel]:
    if n_features is not None and feature_names is None:
        feature_names = [f"x{j}" for j in range(n_features)]
    specs: list[BankKernel] = []
    for index, (where, entry) in enumerate(_flatten_presets(entries, root)):
        if isinstance(entry, str):
            entry = {"function": entry}
        if not isinstance(entry, Mapping):
            raise _must(where, "a mapping with a 'function' key, a function name or {preset: name}", entry)
        if "function" not in entry:
            raise _required(f"{where}.function", "is required", "the name of a kernel function")
        fname = entry["function"]
        if not isinstance(fname, str):
            raise _must(f"{where}.function", "a kernel function name", fname)
        cls = _lookup(resolve, fname, f"{where}.function")
        allowed = list(_ENTRY_KEYS) + [p.name for p in cls.params]
        for key in entry:
            if key not in allowed:
                ctx = f" for kernel function {fname!r}"
                raise _unknown(f"{where}.{key}", "key", key, allowed, ctx=ctx, label="allowed", head=where)
        seed = _seed(entry["seed"], f"{where}.seed") if "seed" in entry else 0
        grid: list[tuple[str, list[Any] | str]] = []
        for p in cls.params:
            if p.name in entry:
                grid.append((p.name, _parse_param(p, entry[p.name], f"{where}.{p.name}")))
            elif p.required:
                raise _required(f"{where}.{p.name}", f"is required for kernel function {fname!r}", p.allowed())
        groups = _feature_groups(entry.get("features", "all"), f"{where}.features", n_features, feature_names, seed)
        fixed = [(name, vals) for name, vals in grid if vals != _CHI2]
        drawn = [name for name, vals in grid if vals == _CHI2]
        combos = list(itertools.product(*[vals for _, vals in fixed]))  # type: ignore[misc]
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        for cols, flabel in groups or [((), "")]:  # without data: each combination once, on no columns
            for combo in combos:
                params = dict(zip([n for n, _ in fixed], combo))
                for name in drawn:
                    params[name] = float(5.0 * rng.chisquare(CHI2_DF) + 0.1)
                func = _instantiate(cls, params, where, drawn)
                specs.append(BankKernel(func, cols, f"{func.label()}[{flabel}]", index))
    return specs


def _instantiate(cls: type[KernelFunction], params: dict[str, Any], where: str, drawn: list[str]) -> KernelFunction:
    try:
        return cls(**params)
    except ParamError as exc:
        key = f"{where}.{exc.key}"
        note = " (drawn by 'chi2')" if exc.key in drawn else ""
        raise _must(key, exc.allowed, exc.value, note) from None


def expand_bank(
    entries: Any,
    n_features: int,
    feature_names: Sequence[str] | None = None,
    resolve: Resolver | Mapping[str, type] | None = None,
    root: str = "bank",
) -> list[BankKernel]:
    """Resolve a bank description into one :class:`BankKernel` per kernel.

    Parameters
    ----------
    entries : list of entries or str
        Bank description or preset name.
    n_features : int
        Number of data columns.
    feature_names : sequence of str, optional
        Column names (default ``x0 .. x(d-1)``) for name-based ``features`` and labels.
    resolve : callable or mapping, optional
        ``resolve(name) -> KernelFunction subclass``, ``LookupError`` for unknown names (default: built-ins).
    root : str
        Prefix of key paths in error messages (``"kernels.bank"`` in specs).

    Raises
    ------
    BankError
        With ``key`` set to the offending key path.
    """
    if not _is_int(n_features) or n_features < 1:
        raise BankError(f"n_features must be an integer >= 1; got {n_features!r}")
    if feature_names is not None and len(feature_names) != n_features:
        raise BankError(f"feature_names has {len(feature_names)} names but the data has {n_features} columns")
    specs = _expand(entries, int(n_features), feature_names, resolve, root)
    if not specs:
        raise BankError(
            f"{root} describes no kernels", key=root, problem="describes no kernels", allowed="at least one kernel"
        )
    return specs


def validate_bank(
    entries: Any,
    resolve: Resolver | Mapping[str, type] | None = None,
    root: str = "bank",
    feature_names: Sequence[str] | None = None,
) -> None:
    """Check a bank description without data (columns only against ``feature_names`` when given)."""
    n = len(feature_names) if feature_names is not None else None
    _expand(entries, n, feature_names, resolve, root)


def raw_input_kernels(
    entries: Any, resolve: Resolver | Mapping[str, type] | None = None, root: str = "bank"
) -> list[tuple[str, str]]:
    """``(key, name)`` of the entries whose kernel function reads its features as given
    (:attr:`KernelFunction.raw_input <mklkit.kernels.functions.KernelFunction.raw_input>`: 0/1 indicators,
    symbol codes), which standardising would change; entries that do not name a known function are skipped
    (:func:`validate_bank` reports them)."""
    out: list[tuple[str, str]] = []
    for where, entry in _flatten_presets(entries, root):
        name = entry if isinstance(entry, str) else entry.get("function") if isinstance(entry, Mapping) else None
        if not isinstance(name, str):
            continue
        try:
            cls = _lookup(resolve, name, f"{where}.function")
        except BankError:
            continue
        if getattr(cls, "raw_input", False):
            out.append((f"{where}.function", name))
    return out


def count_kernels(
    entries: Any,
    n_features: int,
    feature_names: Sequence[str] | None = None,
    resolve: Resolver | Mapping[str, type] | None = None,
) -> int:
    """Number of kernels ``M`` a description gives for ``n_features`` columns."""
    return len(expand_bank(entries, n_features, feature_names, resolve))
