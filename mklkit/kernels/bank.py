r"""Kernel banks: many Gram matrices in one contiguous (M, N, N) float64 array.

Bank descriptions
-----------------
A bank is described by a list of entries (the ``kernels.bank`` vocabulary of
specs and estimators), or by a preset name (``"simplemkl"``, ``"smomkl"``,
see :mod:`mklkit.kernels.presets`)::

    [{"function": "rbf", "width": [0.5, 1, 2], "features": "all"},
     {"function": "poly", "degree": [1, 2, 3], "features": "each"},
     {"function": "rbf", "width": "chi2",
      "features": {"random_subsets": 20, "size": 3, "seed": 0}},
     {"preset": "smomkl"}]

Keys of an entry:

``function``
    Name of a kernel function (``rbf``, ``poly``, ``linear`` or a plugin's).
    A bare string entry ``"linear"`` means ``{"function": "linear"}``.
parameters of the function (``width``, ``degree``, ...)
    A value, or a list of values: lists expand to one kernel per value (the
    Cartesian product when several parameters are lists).  A real-valued
    parameter may be ``"chi2"``: every kernel gets its own draw
    :math:`5\chi^2_1 + 0.1` (SpicyMKL §6.2 "σ = 5χ² + 0.1"; the paper does not
    give the degrees of freedom, we use 1).
``features``
    ``"all"`` (default): one kernel on all columns; ``"each"``: one kernel per
    single column; a list of 0-based column indices or feature names (one
    kernel on that group); a list of such lists (one kernel per group);
    ``{"random_subsets": n, "size": k, "seed": s}``: n kernels on random
    column subsets of k columns (or of ``round(k·d)`` columns for a fraction
    0 < k < 1), drawn without replacement within a subset.
``seed``
    Integer >= 0 (default 0) for ``"chi2"`` draws and for random subsets whose
    mapping has no own ``seed``.  Draws are reproducible for equal seeds.
``preset``
    Alone in an entry: expands to the entries of that preset.

Within one entry, kernels are ordered by feature group, then by parameter
value (the last parameter varying fastest); entries follow each other.

Normalisation
-------------
``"trace"`` (SpicyMKL §6.1): :math:`K_m \leftarrow K_m / \operatorname{tr}(K_m)`.
``"diagonal"``: :math:`K_{m,ij} \leftarrow K_{m,ij} / \sqrt{K_{m,ii} K_{m,jj}}`.
``"none"``.  The constants are kept, and :meth:`KernelBank.cross` applies the
identical transform to test-versus-training kernels (for ``"diagonal"`` with
the test points' own :math:`k(x, x)`).
"""
from __future__ import annotations

import itertools
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from .._kernels.gram import all_finite, divide_outer_inplace, symmetrize_inplace
from ..components.params import Param, ParamError, did_you_mean
from .functions import BUILTIN_KERNEL_FUNCTIONS, KernelFunction, as_matrix, base_matrix
from .presets import available_presets, preset_entries

__all__ = [
    "BankError",
    "KernelSpec",
    "KernelBank",
    "PrecomputedKernels",
    "NORMALIZATIONS",
    "DEFAULT_MEMORY_BUDGET",
    "CHI2_DF",
    "builtin_resolver",
    "make_resolver",
    "expand_bank",
    "validate_bank",
    "count_kernels",
    "estimate_bytes",
    "estimate_peak_bytes",
    "MemoryBudgetError",
    "format_bytes",
]

logger = logging.getLogger(__name__)

NORMALIZATIONS = ("trace", "diagonal", "none")
#: Default ``memory_budget_bytes`` of :meth:`KernelBank.build` (4 GiB).
DEFAULT_MEMORY_BUDGET = 4 * 1024**3
#: Degrees of freedom of the χ² in ``width: "chi2"`` draws (σ = 5χ² + 0.1).
CHI2_DF = 1
_ENTRY_KEYS = ("function", "features", "seed")
_SUBSET_KEYS = ("random_subsets", "size", "seed")

Resolver = Callable[[str], type]


_NO_VALUE: Any = object()


class BankError(ValueError):
    """An invalid bank description, precomputed kernel file or memory request.

    The message is one line for the caller of the kernels API; the parts of
    it are kept as data, so that a spec or an estimator can name the key in
    its own words without reading the text.

    Attributes
    ----------
    key : str or None
        Key path of the offending value relative to the bank, e.g.
        ``bank[1].degree``; ``None`` when the error is not about one key.
    problem : str
        What is wrong, without the key (the whole message when not given).
    value : Any
        The offending value (:attr:`NO_VALUE` when there is none).
    allowed : str or None
        What would be accepted.
    """

    NO_VALUE: Any = _NO_VALUE

    def __init__(self, message: str, key: str | None = None, *, problem: str | None = None,
                 value: Any = _NO_VALUE, allowed: str | None = None):
        super().__init__(message)
        self.key = key
        self.problem = problem if problem is not None else message
        self.value = value
        self.allowed = allowed

    @property
    def has_value(self) -> bool:
        """Whether :attr:`value` holds an offending value."""
        return self.value is not _NO_VALUE


def _must(key: str, allowed: str, value: Any, note: str = "", at: str | None = None) -> BankError:
    """``<key> must be <allowed>; got <value><note>`` (``at``: the key reported, default ``key``)."""
    return BankError(f"{key} must be {allowed}; got {value!r}{note}", key=at or key,
                     problem="invalid value" + note, value=value, allowed=allowed)


def _unknown(key: str, what: str, name: Any, available: Sequence[str] | None, ctx: str = "",
             label: str = "available", text: str | None = None, head: str | None = None) -> BankError:
    """``<head>: unknown <what> <name> (did you mean ...?)<ctx>; <label>: <available>``.

    ``head`` (default ``key``) starts the message; ``text`` replaces it when
    the names are not known (a lookup that said why in its own words).
    """
    hint = did_you_mean(str(name), list(available)) if available else ""
    shown = ", ".join(available) if available else None
    message = text if text is not None and available is None else (
        f"{head or key}: unknown {what} {name!r}{hint}{ctx}" + (f"; {label}: {shown}" if shown else ""))
    problem = f"unknown {what}{hint}{ctx}" if text is None or available is not None else text
    return BankError(message, key=key, problem=problem, value=name, allowed=shown)


class UnknownName(LookupError):
    """A name a lookup does not know; ``available`` lists the names it knows."""

    def __init__(self, message: str, available: Sequence[str]):
        super().__init__(message)
        self.available = list(available)


# ---------------------------------------------------------------------------
# Function lookup
# ---------------------------------------------------------------------------
def make_resolver(classes: Mapping[str, type] | Iterable[type]) -> Resolver:
    """A ``resolve(name) -> class`` over a mapping or an iterable of classes.

    Unknown names raise ``LookupError`` with a did-you-mean and the list of
    available names.
    """
    table = dict(classes) if isinstance(classes, Mapping) else {c.name: c for c in classes}

    def resolve(name: str) -> type:
        try:
            return table[name]
        except KeyError:
            names = sorted(table)
            raise UnknownName(
                f"unknown kernel function {name!r}{did_you_mean(name, names)}; "
                f"available: {', '.join(names)}", names,
            ) from None

    return resolve


#: Lookup of the built-in kernel functions (the default ``resolve``).
builtin_resolver: Resolver = make_resolver(BUILTIN_KERNEL_FUNCTIONS)


def _lookup(resolve: Resolver | Mapping[str, type] | None, name: str, key: str) -> type[KernelFunction]:
    if resolve is None:
        resolve = builtin_resolver
    elif isinstance(resolve, Mapping):
        resolve = make_resolver(resolve)
    try:
        cls = resolve(name)
    except LookupError as exc:
        msg = exc.args[0] if exc.args else f"unknown kernel function {name!r}"
        raise _unknown(key, "kernel function", name, getattr(exc, "available", None),
                       text=f"{key}: {msg}") from None
    if cls is None:
        raise _unknown(key, "kernel function", name, None)
    if not (isinstance(cls, type) and issubclass(cls, KernelFunction)):
        raise BankError(
            f"{key}: {name!r} resolves to {cls!r}, which is not a KernelFunction subclass", key=key,
            problem=f"resolves to {cls!r}, which is not a KernelFunction subclass", value=name,
            allowed="the name of a KernelFunction subclass",
        )
    return cls


# ---------------------------------------------------------------------------
# Bank descriptions
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelSpec:
    """One resolved kernel of a bank.

    Attributes
    ----------
    function : KernelFunction
        The kernel function with its parameter values.
    features : tuple of int
        0-based column indices of the data it is applied to.
    label : str
        Readable name, e.g. ``rbf(width=0.5)[x3]``.
    entry : int
        Index of the bank entry it came from (after preset expansion).
    """

    function: KernelFunction
    features: tuple[int, ...]
    label: str
    entry: int

    def to_dict(self) -> dict[str, Any]:
        """``{"function": name, <params>..., "features": [indices]}``."""
        return {"function": self.function.name, **self.function.get_params(), "features": list(self.features)}


class _Chi2:
    """Marker for a parameter drawn as 5·χ²+0.1 per kernel."""


_CHI2 = _Chi2()


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _flatten_presets(entries: Any, root: str) -> list[tuple[str, Any]]:
    """Expand preset names into (key path, entry) pairs."""
    if isinstance(entries, str):
        try:
            return [(f"{root}[{k}]", e) for k, e in enumerate(preset_entries(entries))]
        except LookupError:
            raise _unknown(root, "kernel-bank preset", entries, available_presets()) from None
    if isinstance(entries, Mapping) or not isinstance(entries, (list, tuple)):
        raise _must(root, f"a list of kernel entries or a preset name ({', '.join(available_presets())})",
                    entries)
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
                    key=f"{where}.{extra[0]}", problem="a preset entry takes no other keys",
                    value=extra[0], allowed="preset alone",
                )
            name = entry["preset"]
            try:
                sub = preset_entries(name) if isinstance(name, str) else None
            except LookupError:
                raise _unknown(f"{where}.preset", "kernel-bank preset", name, available_presets()) from None
            if sub is None:
                raise _must(f"{where}.preset", f"one of {', '.join(available_presets())}", name)
            out.extend((f"{where}.preset[{k}]", e) for k, e in enumerate(sub))
        else:
            out.append((where, entry))
    return out


def _validate_value(p: Param, value: Any, key: str) -> Any:
    try:
        return p.validate(value)
    except ParamError as exc:
        raise _must(key, exc.allowed, value) from None


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _parse_param(p: Param, value: Any, key: str) -> list[Any] | _Chi2:
    value = _plain(value)
    if isinstance(value, str) and value == "chi2":
        if p.type is not float:
            raise _must(key, f"{p.allowed()} or a list of such", "chi2",
                        " ('chi2' draws are only for real-valued parameters)")
        return _CHI2
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            raise _must(key, f"{p.allowed()} or a non-empty list of such", [])
        return [_validate_value(p, _plain(v), f"{key}[{k}]") for k, v in enumerate(value)]
    return [_validate_value(p, value, key)]


def _seed(value: Any, key: str) -> int:
    if not _is_int(value) or value < 0:
        raise _must(key, "an integer >= 0", value)
    return int(value)


def _column(v: Any, key: str, d: int | None, names: Sequence[str] | None) -> int | None:
    if _is_int(v):
        if v < 0 or (d is not None and v >= d):
            rng = f"in [0, {d - 1}]" if d is not None else ">= 0"
            raise _must(key, f"a column index {rng} or a feature name", v)
        return int(v)
    if isinstance(v, str):
        if names is None:
            return None
        if v not in names:
            shown = ", ".join(list(names)[:12]) + (", ..." if len(names) > 12 else "")
            raise BankError(
                f"{key}: unknown feature name {v!r}{did_you_mean(v, list(names))}; features: {shown}",
                key=key, problem=f"unknown feature name{did_you_mean(v, list(names))}", value=v,
                allowed=shown,
            )
        return list(names).index(v)
    raise _must(key, "a column index or a feature name", v)


def _group(items: Sequence[Any], key: str, d: int | None, names: Sequence[str] | None) -> tuple[int, ...] | None:
    if len(items) == 0:
        raise _must(key, "a list of at least one column", [])
    cols = [_column(v, f"{key}[{k}]", d, names) for k, v in enumerate(items)]
    if any(c is None for c in cols):
        return None
    seen: set[int] = set()
    for k, c in enumerate(cols):
        if c in seen:
            raise BankError(f"{key} lists column {items[k]!r} twice; each column at most once",
                            key=f"{key}[{k}]", problem=f"lists column {items[k]!r} twice",
                            value=items[k], allowed="each column at most once")
        seen.add(c)  # type: ignore[arg-type]
    return tuple(cols)  # type: ignore[arg-type]


def _feature_groups(
    spec: Any, key: str, d: int | None, names: Sequence[str] | None, default_seed: int
) -> list[tuple[tuple[int, ...], str]] | None:
    """Feature groups with their labels, or ``None`` when ``d`` is unknown."""
    spec = _plain(spec)
    def label(cols: tuple[int, ...]) -> str:
        nm = [names[c] if names is not None else f"x{c + 1}" for c in cols]
        if len(nm) > 8:
            return ",".join(nm[:4]) + f",...(+{len(nm) - 4})"
        return ",".join(nm)

    if isinstance(spec, str):
        if spec == "all":
            return None if d is None else [(tuple(range(d)), "all")]
        if spec == "each":
            return None if d is None else [((j,), label((j,))) for j in range(d)]
        hint = did_you_mean(spec, ["all", "each"])
        raise BankError(
            f"{key} must be 'all', 'each', a list of columns, a list of lists of columns or "
            f"{{random_subsets: n, size: k, seed: s}}; got {spec!r}{hint}",
            key=key, problem="invalid value" + hint, value=spec,
            allowed="'all', 'each', a list of columns, a list of lists of columns or "
                    "{random_subsets: n, size: k, seed: s}",
        )
    if isinstance(spec, (list, tuple)):
        if len(spec) == 0:
            raise _must(key, "a list of at least one column", [])
        nested = [isinstance(v, (list, tuple)) for v in spec]
        if all(nested):
            groups = [_group(g, f"{key}[{k}]", d, names) for k, g in enumerate(spec)]
        elif any(nested):
            k = nested.index(not nested[0])
            raise BankError(
                f"{key} must be a list of columns or a list of lists of columns, not a mix; "
                f"got {spec[k]!r} at position {k}",
                key=f"{key}[{k}]", problem="a mix of columns and lists of columns", value=spec[k],
                allowed="a list of columns or a list of lists of columns",
            )
        else:
            groups = [_group(spec, key, d, names)]
        if any(g is None for g in groups):
            return None
        return [(g, label(g)) for g in groups]  # type: ignore[misc]
    if isinstance(spec, Mapping):
        for k in spec:
            if k not in _SUBSET_KEYS:
                raise _unknown(f"{key}.{k}", "key", k, list(_SUBSET_KEYS), label="allowed", head=key)
        for k in ("random_subsets", "size"):
            if k not in spec:
                raise BankError(f"{key}.{k} is required for random subsets", key=f"{key}.{k}",
                                problem="is required for random subsets",
                                allowed="{random_subsets: n, size: k, seed: s}")
        n = spec["random_subsets"]
        if not _is_int(n) or n < 1:
            raise _must(f"{key}.random_subsets", "an integer >= 1", n)
        size = spec["size"]
        skey = f"{key}.size"
        if _is_int(size):
            if size < 1 or (d is not None and size > d):
                hi = f" and <= the number of features ({d})" if d is not None else ""
                raise _must(skey, f"an integer >= 1{hi} or a fraction in (0, 1)", size)
            k_size = None if d is None else int(size)
        elif isinstance(size, float) and 0.0 < size < 1.0:
            k_size = None if d is None else max(1, int(round(size * d)))
        else:
            raise _must(skey, "an integer >= 1 or a fraction in (0, 1)", size)
        seed = _seed(spec["seed"], f"{key}.seed") if "seed" in spec else default_seed
        if d is None or k_size is None:
            return None
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
        groups = [tuple(int(c) for c in np.sort(rng.choice(d, size=k_size, replace=False))) for _ in range(int(n))]
        return [(g, label(g)) for g in groups]
    raise _must(key, "'all', 'each', a list of columns or {random_subsets: n, size: k, seed: s}", spec)


def _expand(
    entries: Any,
    n_features: int | None,
    feature_names: Sequence[str] | None,
    resolve: Resolver | Mapping[str, type] | None,
    root: str,
) -> list[KernelSpec]:
    if n_features is not None and feature_names is None:
        feature_names = [f"x{j + 1}" for j in range(n_features)]
    specs: list[KernelSpec] = []
    for index, (where, entry) in enumerate(_flatten_presets(entries, root)):
        if isinstance(entry, str):
            entry = {"function": entry}
        if not isinstance(entry, Mapping):
            raise _must(where, "a mapping with a 'function' key, a function name or {preset: name}", entry)
        if "function" not in entry:
            raise BankError(f"{where}.function is required (the name of a kernel function)",
                            key=f"{where}.function", problem="is required",
                            allowed="the name of a kernel function")
        fname = entry["function"]
        if not isinstance(fname, str):
            raise _must(f"{where}.function", "a kernel function name", fname)
        cls = _lookup(resolve, fname, f"{where}.function")
        declared = {p.name: p for p in cls.params}
        allowed = list(_ENTRY_KEYS) + list(declared)
        for key in entry:
            if key not in allowed:
                raise _unknown(f"{where}.{key}", "key", key, allowed, ctx=f" for kernel function {fname!r}",
                               label="allowed", head=where)
        seed = _seed(entry["seed"], f"{where}.seed") if "seed" in entry else 0
        grid: list[tuple[str, list[Any] | _Chi2]] = []
        for p in cls.params:
            if p.name in entry:
                grid.append((p.name, _parse_param(p, entry[p.name], f"{where}.{p.name}")))
            elif p.required:
                raise BankError(
                    f"{where}.{p.name} is required for kernel function {fname!r} ({p.allowed()})",
                    key=f"{where}.{p.name}", problem=f"is required for kernel function {fname!r}",
                    allowed=p.allowed(),
                )
        groups = _feature_groups(entry.get("features", "all"), f"{where}.features", n_features, feature_names, seed)
        fixed = [(name, vals) for name, vals in grid if not isinstance(vals, _Chi2)]
        drawn = [name for name, vals in grid if isinstance(vals, _Chi2)]
        combos = list(itertools.product(*[vals for _, vals in fixed]))  # type: ignore[misc]
        rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        if groups is None:
            # validation without data: instantiate once per combination
            for combo in combos:
                params = dict(zip([n for n, _ in fixed], combo))
                params.update({name: 1.0 for name in drawn if declared[name].required})
                _instantiate(cls, params, where, drawn)
            continue
        for cols, flabel in groups:
            for combo in combos:
                params = dict(zip([n for n, _ in fixed], combo))
                for name in drawn:
                    params[name] = float(5.0 * rng.chisquare(CHI2_DF) + 0.1)
                func = _instantiate(cls, params, where, drawn)
                specs.append(KernelSpec(func, cols, f"{func.label()}[{flabel}]", index))
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
) -> list[KernelSpec]:
    """Resolve a bank description into one :class:`KernelSpec` per kernel.

    Parameters
    ----------
    entries : list of entries or str
        Bank description or preset name (see module docstring).
    n_features : int
        Number of data columns.
    feature_names : sequence of str, optional
        Column names (default ``x1 .. xd``), for name-based ``features`` and
        labels.
    resolve : callable or mapping, optional
        ``resolve(name) -> KernelFunction subclass``, raising ``LookupError``
        for unknown names (default: the built-ins).  The plugin registry
        passes its own lookup here.
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
        raise BankError(f"{root} describes no kernels", key=root, problem="describes no kernels",
                        allowed="at least one kernel")
    return specs


def validate_bank(
    entries: Any,
    resolve: Resolver | Mapping[str, type] | None = None,
    root: str = "bank",
    feature_names: Sequence[str] | None = None,
) -> None:
    """Check a bank description without data (structure, names, parameter values).

    Column indices are checked against ``feature_names`` only when given.
    Raises :class:`BankError` like :func:`expand_bank`.
    """
    n = len(feature_names) if feature_names is not None else None
    _expand(entries, n, feature_names, resolve, root)


def count_kernels(
    entries: Any,
    n_features: int,
    feature_names: Sequence[str] | None = None,
    resolve: Resolver | Mapping[str, type] | None = None,
) -> int:
    """Number of kernels ``M`` a description gives for ``n_features`` columns (no Gram matrices)."""
    return len(expand_bank(entries, n_features, feature_names, resolve))


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------
def estimate_bytes(M: int, N: int, n_rows: int | None = None) -> int:
    """Bytes needed to build ``M`` kernels on ``N`` training points.

    ``M·n_rows·N·8`` for the bank itself (``n_rows = N`` for the training
    bank, the number of test points for :meth:`KernelBank.cross`) plus working
    space: two ``n_rows × N`` float64 matrices (the shared distance or
    inner-product matrix and one temporary) and the per-kernel diagonals.
    """
    rows = N if n_rows is None else n_rows
    return int(8 * (M * rows * N + 2 * rows * N + M * (rows + N)))


def estimate_peak_bytes(M: int, N: int, n_test: int = 0) -> int:
    """Peak bytes of building ``M`` kernels on ``N`` training points, then their test kernels.

    The training bank (``M·N·N·8`` bytes) stays allocated while the
    test-versus-training kernels of ``n_test`` points (``M·n_test·N·8``) are
    computed, so the peak is the larger of :func:`estimate_bytes` of the bank and
    the bank plus :func:`estimate_bytes` of the test kernels (each with its own
    working space).  ``n_test = 0``: :func:`estimate_bytes` of the bank.
    """
    train = estimate_bytes(M, N)
    if n_test <= 0:
        return train
    return max(train, 8 * M * N * N + estimate_bytes(M, N, n_test))


class MemoryBudgetError(BankError):
    """A bank (or cross-kernel bank) larger than the memory budget, refused before allocating.

    Attributes
    ----------
    what : str
        ``"kernel bank"`` or ``"cross-kernel bank"``.
    need, budget : float
        Estimated bytes (:func:`estimate_bytes`) and the budget.
    shape : tuple of int
        ``(M, rows, N)`` of the refused array.
    """

    def __init__(self, what: str, need: float, budget: float, shape: tuple[int, int, int],
                 key: str = "memory_budget_bytes") -> None:
        self.what = what
        self.need = need
        self.budget = budget
        self.shape = shape
        super().__init__(self.describe(key), key=key)

    def describe(self, key: str) -> str:
        """The message, naming the budget parameter ``key`` (a caller's name for it)."""
        M, rows, N = self.shape
        return (
            f"{self.what} needs about {format_bytes(self.need)} ({M} kernels x {rows} x {N} float64 "
            f"= {format_bytes(8 * M * rows * N)}, plus working space) but {key} is "
            f"{format_bytes(self.budget)}; use fewer kernels or samples, or raise {key}"
        )


def format_bytes(n: float) -> str:
    """``512.0 MiB``, ``3.2 GiB``."""
    if n >= 1024**3:
        return f"{n / 1024**3:.1f} GiB"
    if n >= 1024**2:
        return f"{n / 1024**2:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{int(n)} B"


def _check_budget(M: int, N: int, rows: int, budget: float | None, what: str) -> None:
    if budget is None:
        budget = DEFAULT_MEMORY_BUDGET
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0:
        raise BankError(f"memory_budget_bytes must be a number of bytes > 0; got {budget!r}")
    need = estimate_bytes(M, N, rows)
    if need > budget:
        raise MemoryBudgetError(what, need, budget, (M, rows, N))


# ---------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------
class _Progress:
    """Reports the progress of a build to a callback ``progress(event)``; library code never prints.

    ``event``: ``{"what": label, "done": m, "total": M, "elapsed_s": seconds}``,
    at most every 0.1 s and once at the end.  The command line draws a bar
    from it (:mod:`mklkit.cli`).
    """

    def __init__(self, total: int, label: str, callback: Callable[[dict[str, Any]], Any] | None):
        self.total = total
        self.label = label
        self.callback = callback
        self._last = 0.0
        self._t0 = time.monotonic()

    def update(self, done: int) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        self.callback({"what": self.label, "done": done, "total": self.total, "elapsed_s": now - self._t0})

    def close(self) -> None:
        self.update(self.total)


def _progress_callback(progress: Any) -> Callable[[dict[str, Any]], Any] | None:
    """``progress`` if it is a callable, else ``None`` (``True``/``False``/``None``: no reports)."""
    return progress if callable(progress) else None


# ---------------------------------------------------------------------------
# The bank
# ---------------------------------------------------------------------------
def _check_normalize(normalize: str) -> str:
    if normalize not in NORMALIZATIONS:
        raise BankError(
            f"normalize must be one of {', '.join(map(repr, NORMALIZATIONS))}; got {normalize!r}"
            f"{did_you_mean(str(normalize), list(NORMALIZATIONS))}"
        )
    return normalize


def _dense_columns(X: Any, columns: np.ndarray, name: str) -> np.ndarray:
    """Dense float64 copy of the needed columns of ``X`` (dense or sparse), checked finite."""
    if sp.issparse(X):
        Xc = sp.csr_matrix(X)
        if not np.all(np.isfinite(Xc.data)):
            raise BankError(f"{name} contains NaN or infinite values")
        A = np.ascontiguousarray(Xc[:, columns].toarray(), dtype=np.float64)
    else:
        A = np.asarray(X, dtype=np.float64)
        if A.ndim != 2:
            raise BankError(f"{name} must be a 2-d array (samples x features); got shape {A.shape}")
        if not np.all(np.isfinite(A)):
            r, j = (int(v) for v in np.argwhere(~np.isfinite(A))[0])
            raise BankError(f"{name}[{r}, {j}] is {float(A[r, j])!r}; NaN and infinite values are not allowed")
        A = np.ascontiguousarray(A[:, columns]) if len(columns) != A.shape[1] else as_matrix(A)
    return A


def _shape_of(X: Any) -> tuple[int, ...]:
    return tuple(X.shape) if hasattr(X, "shape") else np.shape(X)


class KernelBank:
    """A bank of ``M`` Gram matrices on ``N`` training points.

    Build one with :meth:`build` (from data and a description),
    :meth:`from_precomputed` or :meth:`from_npz`.

    Attributes
    ----------
    K : ndarray (M, N, N)
        C-contiguous float64, each ``K[m]`` exactly symmetric, normalised.
    names : list of str
        One readable label per kernel, e.g. ``rbf(width=0.5)[x3]``.
    specs : list of KernelSpec or None
        Resolved function, parameters and 0-based feature indices per kernel
        (``None`` for precomputed banks).
    normalize : {"trace", "diagonal", "none"}
    traces : ndarray (M,)
        ``trace(K_m)`` before normalisation (the divisor for ``"trace"``).
    train_diag : ndarray (M, N) or None
        ``diag(K_m)`` before normalisation (kept for ``"diagonal"``).
    feature_names : list of str or None
        Names of the data columns the bank was built on.
    """

    def __init__(
        self,
        K: np.ndarray,
        names: list[str],
        specs: list[KernelSpec] | None,
        normalize: str,
        traces: np.ndarray,
        train_diag: np.ndarray | None,
        X_train: np.ndarray | None = None,
        columns: np.ndarray | None = None,
        n_features: int | None = None,
        feature_names: list[str] | None = None,
        source: str = "",
    ) -> None:
        self.K = K
        self.names = names
        self.specs = specs
        self.normalize = normalize
        self.traces = traces
        self.train_diag = train_diag
        self.feature_names = feature_names
        self.source = source
        self._X_train = X_train
        self._columns = columns
        self._n_features = n_features

    # -- basic properties --------------------------------------------------
    @property
    def n_kernels(self) -> int:
        """M."""
        return int(self.K.shape[0])

    @property
    def n_samples(self) -> int:
        """N."""
        return int(self.K.shape[1])

    @property
    def nbytes(self) -> int:
        """Bytes held by ``K``."""
        return int(self.K.nbytes)

    def __len__(self) -> int:
        return self.n_kernels

    def __repr__(self) -> str:
        return (
            f"KernelBank(n_kernels={self.n_kernels}, n_samples={self.n_samples}, "
            f"normalize={self.normalize!r}, {format_bytes(self.nbytes)})"
        )

    # -- building ----------------------------------------------------------
    @classmethod
    def build(
        cls,
        X: Any,
        entries_or_preset: Any,
        normalize: str = "trace",
        memory_budget_bytes: float | None = None,
        progress: bool | None = None,
        resolve: Resolver | Mapping[str, type] | None = None,
        feature_names: Sequence[str] | None = None,
        root: str = "bank",
    ) -> "KernelBank":
        """Compute and normalise all Gram matrices of a bank description.

        Parameters
        ----------
        X : ndarray (N, d), scipy.sparse matrix or Dataset
            Training points.  Sparse input is densified, restricted to the
            columns the bank uses (the bank works on dense arrays only).
        entries_or_preset : list of entries or str
            Bank description or preset name (module docstring).
        normalize : {"trace", "diagonal", "none"}
            ``"trace"`` is SpicyMKL's :math:`K_m / \\operatorname{tr}(K_m)`.
        memory_budget_bytes : float, optional
            Refuse (``BankError``) when :func:`estimate_bytes` exceeds it,
            before allocating.  Default :data:`DEFAULT_MEMORY_BUDGET` (4 GiB).
        progress : callable, optional
            ``progress(event)`` with ``what``, ``done``, ``total`` and
            ``elapsed_s`` while the kernels are computed (``mklkit run`` draws
            a bar from it); anything else: no reports.
        resolve : callable or mapping, optional
            Kernel-function lookup (default: built-ins); see :func:`expand_bank`.
        feature_names : sequence of str, optional
            Column names (default: the Dataset's, else ``x1 .. xd``).
        root : str
            Prefix of key paths in description errors (``"kernels.bank"``
            when the description comes from a spec file).

        Returns
        -------
        KernelBank
        """
        from ..data import Dataset

        normalize = _check_normalize(normalize)
        if isinstance(X, Dataset):
            if feature_names is None:
                feature_names = X.feature_names
            X = X.X
        shape = _shape_of(X)
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise BankError(f"X must be a non-empty 2-d array (samples x features); got shape {shape}")
        N, d = int(shape[0]), int(shape[1])
        if feature_names is not None:
            feature_names = [str(n) for n in feature_names]
        specs = expand_bank(entries_or_preset, d, feature_names, resolve, root=root)
        M = len(specs)
        _check_budget(M, N, N, memory_budget_bytes, "kernel bank")
        columns = np.unique(np.concatenate([np.asarray(s.features, dtype=np.intp) for s in specs]))
        XA = _dense_columns(X, columns, "X")
        local = _localizer(columns, d)
        t0 = time.perf_counter()
        K = np.empty((M, N, N), dtype=np.float64)
        bar = _Progress(M, "building kernel bank", _progress_callback(progress))
        _fill(K, specs, local, XA, None, bar)
        traces = np.empty(M)
        train_diag = np.empty((M, N)) if normalize == "diagonal" else None
        for m in range(M):
            Km = K[m]
            t = float(np.trace(Km))
            traces[m] = t
            if normalize == "trace":
                if not (t > 0.0 and math.isfinite(t)):
                    raise BankError(
                        f"kernel {m} {specs[m].label!r} has trace {t!r}; unit-trace normalisation "
                        "needs a positive trace (a constant-zero feature?); drop the feature or use "
                        "normalize='diagonal' or 'none'"
                    )
                Km /= t
            elif normalize == "diagonal":
                dg = np.diagonal(Km).copy()
                if not np.all(dg > 0.0):
                    i = int(np.argmin(dg))
                    raise BankError(
                        f"kernel {m} {specs[m].label!r} has k(x, x) = {float(dg[i])!r} at sample {i}; "
                        "unit-diagonal normalisation needs k(x, x) > 0 for every training point; "
                        "use normalize='trace' or 'none'"
                    )
                train_diag[m] = dg  # type: ignore[index]
                s = np.sqrt(dg)
                divide_outer_inplace(Km, s, s)
                np.fill_diagonal(Km, 1.0)
        logger.info(
            "built %d kernels on %d samples (%s, normalize=%s) in %.2f s",
            M, N, format_bytes(K.nbytes), normalize, time.perf_counter() - t0,
        )
        names = [s.label for s in specs]
        fnames = list(feature_names) if feature_names is not None else [f"x{j + 1}" for j in range(d)]
        return cls(K, names, specs, normalize, traces, train_diag, XA, columns, d, fnames, source="data")

    @classmethod
    def for_cross(cls, X: Any, specs: Sequence[KernelSpec], normalize: str, traces: np.ndarray,
                  train_diag: np.ndarray | None = None, feature_names: Sequence[str] | None = None) -> "KernelBank":
        """A bank without Gram matrices that computes :meth:`cross` for kernels built elsewhere.

        ``specs``: the expanded kernels, ``traces`` (and ``train_diag`` for
        ``"diagonal"``): their constants before normalisation on the training
        points ``X``.  ``K`` is an empty (M, N, 0) array.
        """
        normalize = _check_normalize(normalize)
        shape = _shape_of(X)
        N, d = int(shape[0]), int(shape[1])
        columns = np.unique(np.concatenate([np.asarray(s.features, dtype=np.intp) for s in specs]))
        XA = _dense_columns(X, columns, "X")
        fnames = list(feature_names) if feature_names is not None else [f"x{j + 1}" for j in range(d)]
        return cls(np.empty((len(specs), N, 0)), [s.label for s in specs], list(specs), normalize,
                   np.asarray(traces, dtype=np.float64), train_diag, XA, columns, d, fnames, source="data")

    def cross(
        self,
        X_new: Any,
        memory_budget_bytes: float | None = None,
        progress: bool | None = None,
    ) -> np.ndarray:
        """Test-versus-training kernels with the training normalisation.

        Parameters
        ----------
        X_new : ndarray (N_new, d), sparse matrix or Dataset
            New points with the same columns as the training data.

        Returns
        -------
        ndarray (M, N_new, N)
            ``C[m, i, j] = k_m(x_new_i, x_j)`` transformed like ``K[m]``:
            divided by the training trace (``"trace"``), or by
            :math:`\\sqrt{k_m(x_{new,i}, x_{new,i})\\, k_m(x_j, x_j)}`
            (``"diagonal"``; a new point with :math:`k_m(x, x) = 0` gets a
            zero row, since then :math:`k_m(x, \\cdot) = 0`).
            ``bank.cross(X_train)`` reproduces ``bank.K`` up to round-off.
        """
        from ..data import Dataset

        if self.specs is None or self._X_train is None or self._columns is None:
            raise BankError(
                f"this bank was loaded from precomputed kernels ({self.source}); it has no "
                "training points to compute cross kernels from: use the precomputed test kernels"
            )
        if isinstance(X_new, Dataset):
            X_new = X_new.X
        shape = _shape_of(X_new)
        if len(shape) != 2 or shape[1] != self._n_features:
            raise BankError(
                f"X_new must have shape (n, {self._n_features}) like the training data; got {shape}"
            )
        n_new, N, M = int(shape[0]), self.n_samples, self.n_kernels
        _check_budget(M, N, n_new, memory_budget_bytes, "cross-kernel bank")
        XB = _dense_columns(X_new, self._columns, "X_new")
        local = _localizer(self._columns, self._n_features)
        C = np.empty((M, n_new, N), dtype=np.float64)
        bar = _Progress(M, "computing test kernels", _progress_callback(progress))
        _fill(C, self.specs, local, XB, self._X_train, bar)
        if self.normalize == "trace":
            C /= self.traces[:, None, None]
        elif self.normalize == "diagonal":
            assert self.train_diag is not None
            for m, spec in enumerate(self.specs):
                dnew = np.asarray(spec.function.diag(np.ascontiguousarray(XB[:, local(spec.features)])), dtype=np.float64)
                self._divide_diag(C[m], dnew, self.train_diag[m], m)
        return C

    def _divide_diag(self, Cm: np.ndarray, dnew: np.ndarray, dtrain: np.ndarray, m: int) -> None:
        if dnew.shape != (Cm.shape[0],) or not np.all(np.isfinite(dnew)) or np.any(dnew < 0):
            raise BankError(
                f"kernel {m} {self.names[m]!r}: k(x, x) of the new points must be finite and >= 0"
            )
        s_new = np.sqrt(dnew)
        zero = s_new == 0.0
        s_new[zero] = 1.0
        divide_outer_inplace(Cm, s_new, np.sqrt(dtrain))
        Cm[zero] = 0.0

    def normalize_cross(self, C: np.ndarray, test_diag: np.ndarray | None = None) -> np.ndarray:
        """Apply this bank's normalisation to raw test kernels ``C`` (M, N_new, N), in place.

        ``test_diag`` (M, N_new), the test points' :math:`k_m(x, x)`, is
        needed for ``"diagonal"``.  Returns ``C``.
        """
        if not isinstance(C, np.ndarray) or C.dtype != np.float64 or not C.flags.c_contiguous:
            raise BankError("test kernels must be a C-contiguous float64 array (they are normalised in place)")
        if C.ndim != 3 or C.shape[0] != self.n_kernels or C.shape[2] != self.n_samples:
            raise BankError(
                f"test kernels must have shape ({self.n_kernels}, n_test, {self.n_samples}); got {C.shape}"
            )
        if self.normalize == "trace":
            C /= self.traces[:, None, None]
        elif self.normalize == "diagonal":
            if test_diag is None or np.shape(test_diag) != (C.shape[0], C.shape[1]):
                raise BankError(
                    f"unit-diagonal normalisation of test kernels needs test_diag of shape "
                    f"({C.shape[0]}, {C.shape[1]}); got {None if test_diag is None else np.shape(test_diag)}"
                )
            assert self.train_diag is not None
            for m in range(C.shape[0]):
                self._divide_diag(C[m], np.array(test_diag[m], dtype=np.float64), self.train_diag[m], m)
        return C

    # -- precomputed -------------------------------------------------------
    @classmethod
    def from_precomputed(
        cls,
        K: Any,
        names: Sequence[str] | None = None,
        normalize: str = "none",
        sym_rtol: float = 1e-8,
        check_psd: bool = True,
        source: str = "K",
        copy: bool = True,
    ) -> "KernelBank":
        """A bank from given Gram matrices (M, N, N), checked and normalised.

        Checks every kernel for NaN/inf, symmetry (``max|K - Kᵀ| <=
        sym_rtol · max|K|``; it is then symmetrised exactly) and clear
        indefiniteness (smallest eigenvalue ``< -1e-6 · trace``, by
        ``scipy.linalg.eigvalsh(..., subset_by_index=[0, 0])``).  Errors name
        ``source``, the array and the kernel index.  ``copy=False`` lets it
        work in place on a C-contiguous float64 ``K``.
        """
        normalize = _check_normalize(normalize)
        where = source
        K = _as_kernel_array(K, where, copy=copy)
        if K.shape[1] != K.shape[2]:
            raise BankError(f"{where} must have shape (M, N, N); got {K.shape}")
        _check_kernels(K, where, sym_rtol=sym_rtol, check_psd=check_psd, square=True)
        M, N = K.shape[0], K.shape[1]
        if names is None:
            names = [f"k{m}" for m in range(M)]
        names = [str(n) for n in names]
        if len(names) != M:
            raise BankError(f"{where}: {len(names)} kernel names for {M} kernels")
        traces = np.trace(K, axis1=1, axis2=2).astype(np.float64)
        train_diag = None
        if normalize == "trace":
            bad = np.flatnonzero(~(traces > 0))
            if bad.size:
                raise BankError(f"{where}[{bad[0]}] has trace {float(traces[bad[0]])!r}; unit-trace normalisation needs a positive trace")
            K /= traces[:, None, None]
        elif normalize == "diagonal":
            train_diag = np.ascontiguousarray(np.diagonal(K, axis1=1, axis2=2))
            bad = np.argwhere(~(train_diag > 0))
            if bad.size:
                m, i = (int(v) for v in bad[0])
                raise BankError(
                    f"{where}[{m}] has K[{i}, {i}] = {float(train_diag[m, i])!r}; unit-diagonal normalisation "
                    "needs a positive diagonal"
                )
            for m in range(M):
                s = np.sqrt(train_diag[m])
                divide_outer_inplace(K[m], s, s)
                np.fill_diagonal(K[m], 1.0)
        return cls(K, names, None, normalize, traces, train_diag, source=source)

    @classmethod
    def from_npz(
        cls,
        path: str | os.PathLike[str],
        normalize: str = "none",
        sym_rtol: float = 1e-8,
        check_psd: bool = True,
    ) -> "PrecomputedKernels":
        """Load precomputed kernels from an ``.npz`` file.

        Arrays: ``K_train`` (M, N, N) and ``y_train`` (N,) required;
        ``K_test`` (M, N_test, N), ``y_test`` (N_test,), ``names`` (M,
        strings) and ``K_test_diag`` (M, N_test; the test points' own
        :math:`k_m(x, x)`, needed to normalise ``K_test`` with
        ``normalize="diagonal"``) optional.  ``K_test`` gets the same
        normalisation as ``K_train``.

        Returns
        -------
        PrecomputedKernels
            ``bank``, ``y_train``, ``K_test``, ``y_test``.

        Raises
        ------
        BankError
            Naming the file, the array and the kernel index.
        """
        p = os.fspath(path)
        if not os.path.isfile(p):
            raise BankError(f"{p}: precomputed kernel file not found")
        try:
            z = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise BankError(f"{p}: cannot read as NPZ ({exc})") from None
        with z:
            keys = list(z.files)
            missing = [k for k in ("K_train", "y_train") if k not in keys]
            if missing:
                raise BankError(
                    f"{p}: missing array{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}; "
                    f"the file has: {', '.join(keys) or 'no arrays'}"
                )
            allowed = ("K_train", "y_train", "K_test", "y_test", "names", "K_test_diag")
            unknown = [k for k in keys if k not in allowed]
            if unknown:
                raise BankError(
                    f"{p}: unknown array {unknown[0]!r}{did_you_mean(unknown[0], list(allowed))}; "
                    f"allowed: {', '.join(allowed)}"
                )
            arrays = {k: z[k] for k in keys}
        K_train = _as_kernel_array(arrays["K_train"], f"{p}: K_train", copy=False)
        if K_train.shape[1] != K_train.shape[2]:
            raise BankError(f"{p}: K_train must have shape (M, N, N); got {K_train.shape}")
        M, N = K_train.shape[0], K_train.shape[1]
        y_train = _labels(arrays["y_train"], f"{p}: y_train", N)
        names = None
        if "names" in arrays:
            nm = arrays["names"]
            if nm.ndim != 1 or nm.shape[0] != M:
                raise BankError(f"{p}: names must have shape ({M},) (one per kernel); got {nm.shape}")
            names = [str(v) for v in nm]
        K_test = y_test = None
        if "K_test" in arrays:
            K_test = _as_kernel_array(arrays["K_test"], f"{p}: K_test", copy=False)
            if K_test.shape[0] != M or K_test.shape[2] != N:
                raise BankError(
                    f"{p}: K_test must have shape ({M}, N_test, {N}) to match K_train {K_train.shape}; "
                    f"got {K_test.shape}"
                )
            _check_kernels(K_test, f"{p}: K_test", square=False)
        if "y_test" in arrays:
            if K_test is None:
                raise BankError(f"{p}: y_test is given without K_test")
            y_test = _labels(arrays["y_test"], f"{p}: y_test", K_test.shape[1])
        bank = cls.from_precomputed(
            K_train, names=names, normalize=normalize, sym_rtol=sym_rtol, check_psd=check_psd,
            source=f"{p}: K_train", copy=False,
        )
        bank.source = p
        if K_test is not None:
            test_diag = None
            if "K_test_diag" in arrays:
                test_diag = np.asarray(arrays["K_test_diag"], dtype=np.float64)
                if test_diag.shape != (M, K_test.shape[1]):
                    raise BankError(
                        f"{p}: K_test_diag must have shape ({M}, {K_test.shape[1]}); got {test_diag.shape}"
                    )
            elif normalize == "diagonal":
                raise BankError(
                    f"{p}: normalize='diagonal' needs the array K_test_diag (M, N_test) with the test "
                    "points' own k(x, x) to normalise K_test"
                )
            try:
                bank.normalize_cross(K_test, test_diag)
            except BankError as exc:
                raise BankError(f"{p}: K_test: {exc}") from None
        elif "K_test_diag" in arrays:
            raise BankError(f"{p}: K_test_diag is given without K_test")
        return PrecomputedKernels(bank=bank, y_train=y_train, K_test=K_test, y_test=y_test, source=p,
                                  test_diag=test_diag if K_test is not None else None)


@dataclass
class PrecomputedKernels:
    """What :meth:`KernelBank.from_npz` returns.

    Attributes
    ----------
    bank : KernelBank
        The checked, normalised training kernels (``specs`` is ``None``).
    y_train : ndarray (N,)
    K_test : ndarray (M, N_test, N) or None
        Test-versus-training kernels, normalised like ``bank.K``.
    y_test : ndarray (N_test,) or None
    source : str
        The file path.
    """

    bank: KernelBank
    y_train: np.ndarray
    K_test: np.ndarray | None
    y_test: np.ndarray | None
    source: str = ""
    #: ``K_test_diag`` (M, N_test) of the file: the test points' own k(x, x), before normalisation.
    test_diag: np.ndarray | None = None


def _as_kernel_array(K: Any, where: str, copy: bool = True) -> np.ndarray:
    A = np.asarray(K)
    if A.ndim != 3:
        raise BankError(f"{where} must be a 3-d array (kernels x rows x columns); got shape {A.shape}")
    if A.size == 0:
        raise BankError(f"{where} is empty; got shape {A.shape}")
    if not (np.issubdtype(A.dtype, np.floating) or np.issubdtype(A.dtype, np.integer)):
        raise BankError(f"{where} must be numeric; got dtype {A.dtype}")
    if copy:
        return np.array(A, dtype=np.float64, order="C", copy=True)
    return np.ascontiguousarray(A, dtype=np.float64)


def _labels(y: Any, where: str, n: int) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim != 1 or a.shape[0] != n:
        raise BankError(f"{where} must have shape ({n},); got {a.shape}")
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise BankError(f"{where} must be numeric; got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        i = int(np.flatnonzero(~np.isfinite(a))[0])
        raise BankError(f"{where}[{i}] is {float(a[i])!r}; NaN and infinite labels are not allowed")
    return a


def _check_kernels(
    K: np.ndarray, where: str, sym_rtol: float = 1e-8, check_psd: bool = True, square: bool = True
) -> None:
    """NaN/inf, symmetry and PSD checks per kernel; symmetrises square kernels in place."""
    from scipy.linalg import eigvalsh

    for m in range(K.shape[0]):
        Km = K[m]
        if not all_finite(Km):
            i, j = (int(v) for v in np.argwhere(~np.isfinite(Km))[0])
            raise BankError(f"{where}[{m}] has a NaN or infinite value at [{i}, {j}]: {float(Km[i, j])!r}")
        if not square:
            continue
        scale = float(np.max(np.abs(Km)))
        asym = symmetrize_inplace(Km)
        if asym > sym_rtol * scale:
            raise BankError(
                f"{where}[{m}] is not symmetric: max |K - K^T| = {asym:.3g} > {sym_rtol:g} x max |K| "
                f"= {sym_rtol * scale:.3g}"
            )
        if check_psd:
            lam = float(eigvalsh(Km, subset_by_index=[0, 0], check_finite=False)[0])
            tr = float(np.trace(Km))
            if lam < -1e-6 * abs(tr) or (tr <= 0 and lam < 0):
                raise BankError(
                    f"{where}[{m}] is not positive semidefinite: smallest eigenvalue {lam:.6g} < "
                    f"-1e-6 x trace = {-1e-6 * abs(tr):.3g}"
                )


def _localizer(columns: np.ndarray, d: int) -> Callable[[tuple[int, ...]], np.ndarray]:
    pos = np.full(d, -1, dtype=np.intp)
    pos[columns] = np.arange(columns.size)

    def local(features: tuple[int, ...]) -> np.ndarray:
        return pos[np.asarray(features, dtype=np.intp)]

    return local


def _fill(
    out: np.ndarray,
    specs: Sequence[KernelSpec],
    local: Callable[[tuple[int, ...]], np.ndarray],
    XA: np.ndarray,
    XB: np.ndarray | None,
    bar: _Progress,
) -> None:
    """``out[m] = k_m(XA_s, XB_s)``; ``XB=None``: symmetric training kernels.

    Consecutive kernels on the same columns that use the same base matrix
    (squared distances or inner products) share one computation of it.
    """
    all_cols = None
    sub_key: tuple[int, ...] | None = None
    A = B = None
    base_key: tuple[str, tuple[int, ...]] | None = None
    base = None
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite values are reported below
        for m, spec in enumerate(specs):
            if spec.features != sub_key:
                idx = local(spec.features)
                if all_cols is None:
                    all_cols = np.arange(XA.shape[1])
                if idx.size == XA.shape[1] and np.array_equal(idx, all_cols):
                    A, B = XA, XB
                else:
                    A = np.ascontiguousarray(XA[:, idx])
                    B = None if XB is None else np.ascontiguousarray(XB[:, idx])
                sub_key = spec.features
            func = spec.function
            target = out[m]
            if func.uses is not None:
                key = (func.uses, spec.features)
                if key != base_key:
                    base = None  # free before allocating the next one
                    base = base_matrix(func.uses, A, B)
                    base_key = key
                res = func.from_base(base, out=target)
                if res is not target:
                    _check_result(res, target.shape, spec, m)
                    target[...] = res
            else:
                res = func.gram(A) if B is None else func.gram(A, B)
                _check_result(res, target.shape, spec, m)
                target[...] = res
                if B is None:
                    scale = float(np.max(np.abs(target)))
                    asym = symmetrize_inplace(target)
                    if asym > 1e-8 * scale:
                        raise BankError(
                            f"kernel {m} {spec.label!r}: gram(X) is not symmetric "
                            f"(max |K - K^T| = {asym:.3g}); a kernel function must be symmetric"
                        )
            if not all_finite(target):
                raise BankError(
                    f"kernel {m} {spec.label!r} has NaN or infinite values (overflow?); standardise "
                    "the features or change its parameters"
                )
            bar.update(m + 1)
    bar.close()


def _check_result(res: Any, shape: tuple[int, ...], spec: KernelSpec, m: int) -> None:
    if not isinstance(res, np.ndarray) or res.shape != shape:
        got = res.shape if isinstance(res, np.ndarray) else type(res).__name__
        raise BankError(f"kernel {m} {spec.label!r}: gram() must return an array of shape {shape}; got {got}")
