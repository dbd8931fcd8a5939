"""The ``features`` of a bank entry: the column groups its kernels are applied to, with their labels."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..components.params import did_you_mean
from .errors import BankError, _must, _required, _unknown

_SUBSET_KEYS = ("random_subsets", "size", "seed")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


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
                key=key,
                problem=f"unknown feature name{did_you_mean(v, list(names))}",
                value=v,
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
    k = next((j for j, c in enumerate(cols) if c in cols[:j]), None)  # the first column listed again
    if k is not None:
        raise BankError(
            f"{key} lists column {items[k]!r} twice; each column at most once",
            key=f"{key}[{k}]",
            problem=f"lists column {items[k]!r} twice",
            value=items[k],
            allowed="each column at most once",
        )
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
        allowed = (
            "'all', 'each', a list of columns, a list of lists of columns or {random_subsets: n, size: k, seed: s}"
        )
        raise _must(key, allowed, spec, did_you_mean(spec, ["all", "each"]))
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
                key=f"{key}[{k}]",
                problem="a mix of columns and lists of columns",
                value=spec[k],
                allowed="a list of columns or a list of lists of columns",
            )
        else:
            groups = [_group(spec, key, d, names)]
        if any(g is None for g in groups):
            return None
        return [(g, label(g)) for g in groups]  # type: ignore[misc]
    if isinstance(spec, Mapping):
        groups = _random_subsets(spec, key, d, default_seed)
        return None if groups is None else [(g, label(g)) for g in groups]
    raise _must(key, "'all', 'each', a list of columns or {random_subsets: n, size: k, seed: s}", spec)


def _random_subsets(spec: Mapping, key: str, d: int | None, default_seed: int) -> list[tuple[int, ...]] | None:
    """The groups of ``{random_subsets: n, size: k, seed: s}``, or ``None`` when ``d`` is unknown."""
    for k in spec:
        if k not in _SUBSET_KEYS:
            raise _unknown(f"{key}.{k}", "key", k, list(_SUBSET_KEYS), label="allowed", head=key)
    for k in ("random_subsets", "size"):
        if k not in spec:
            raise _required(
                f"{key}.{k}", "is required for random subsets", "{random_subsets: n, size: k, seed: s}", False
            )
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
    return [tuple(int(c) for c in np.sort(rng.choice(d, size=k_size, replace=False))) for _ in range(int(n))]
