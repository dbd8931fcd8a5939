r"""Bank descriptions: entries (or a preset) -> the list of kernels they describe, validated.

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

The kernels of a description are :class:`BankKernel` objects; building their
Gram matrices is :mod:`mklkit.kernels.build`, precomputed kernels are
:mod:`mklkit.kernels.precomputed`.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..components.params import Param, ParamError, did_you_mean
from .functions import BUILTIN_KERNEL_FUNCTIONS, KernelFunction
from .presets import available_presets, preset_entries

__all__ = [
    "BankError",
    "UnknownName",
    "BankKernel",
    "NORMALIZATIONS",
    "DEFAULT_MEMORY_BUDGET",
    "CHI2_DF",
    "builtin_resolver",
    "make_resolver",
    "expand_bank",
    "validate_bank",
    "count_kernels",
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
class BankKernel:
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


def _check_normalize(normalize: str) -> str:
    """``normalize`` if it is one of :data:`NORMALIZATIONS`, else a :class:`BankError`."""
    if normalize not in NORMALIZATIONS:
        raise BankError(
            f"normalize must be one of {', '.join(map(repr, NORMALIZATIONS))}; got {normalize!r}"
            f"{did_you_mean(str(normalize), list(NORMALIZATIONS))}"
        )
    return normalize


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
        nm = [names[c] if names is not None else f"x{c}" for c in cols]
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
        Bank description or preset name (see module docstring).
    n_features : int
        Number of data columns.
    feature_names : sequence of str, optional
        Column names (default ``x0 .. x(d-1)``, 0-based like the indices), for name-based ``features`` and
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
