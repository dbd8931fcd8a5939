"""Parameter declarations (:class:`Param`) of every component kind: specs, the command line
and the estimators validate through them, so a bad value is reported the same way everywhere."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence


#: "no value given" in the errors that keep their parts (``None`` can be the offending value).
MISSING: Any = object()


class ParamError(ValueError):
    """A parameter value that its declaration does not allow: ``key`` (the spec layer prefixes
    the key path), ``value`` as given, ``allowed`` in words ("a number > 1"), and ``problem``, what is
    wrong where it is not that the value is outside ``allowed`` (a missing library, say; else None)."""

    problem: str | None = None

    def __init__(self, key: str, value: Any, allowed: str, owner: str = ""):
        self.key, self.value, self.allowed, self.owner = key, value, allowed, owner
        super().__init__(f"{owner + ': ' if owner else ''}{key} must be {allowed}; got {value!r}")


class UnknownParamError(ParamError):
    """A parameter name that the component does not declare."""

    def __init__(self, key: str, value: Any, known: Sequence[str], owner: str = ""):
        self.known = list(known)
        allowed = "one of " + ", ".join(self.known) if self.known else "none (no parameters)"
        super().__init__(key, value, allowed, owner)
        self.args = (
            f"{owner + ': ' if owner else ''}unknown parameter {key!r}{did_you_mean(key, self.known)}; allowed: {allowed}",
        )


_TYPE_WORDS = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}


@dataclass(frozen=True)
class Param:
    """Declaration of one component parameter.

    Parameters
    ----------
    name : str
        Key used in specs and keyword arguments.
    default : Any
        Default value; ``Param.REQUIRED`` makes it mandatory.
    doc : str
        One-line description, shown by ``mklkit plugins``.
    type : type
        ``float``, ``int``, ``bool`` or ``str``.
    low, high : float, optional
        Bounds for numbers; ``low_open``/``high_open`` make them strict.
    choices : sequence, optional
        Allowed values.
    nullable : bool
        Whether None is allowed.
    """

    name: str
    default: Any
    doc: str = ""
    type: type = float
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: Sequence[Any] | None = None
    nullable: bool = False

    REQUIRED = object()

    @property
    def required(self) -> bool:
        """Whether the parameter has no default (``Param.REQUIRED``)."""
        return self.default is Param.REQUIRED

    def allowed(self) -> str:
        """What this parameter accepts, in words."""
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        words = _TYPE_WORDS.get(self.type, self.type.__name__)
        if self.low is None and self.high is None and self.type is float:
            words = "a finite number"
        words = interval(words, self.low, self.high, self.low_open, self.high_open, "{:g}".format)
        if self.nullable:
            words += " or null"
        return words

    def validate(self, value: Any, owner: str = "") -> Any:
        """Return ``value`` converted to the declared type, or raise ParamError."""
        if value is None and self.nullable:
            return None
        err = ParamError(self.name, value, self.allowed(), owner)
        if self.type is bool:
            if not isinstance(value, bool):
                raise err
            return value
        if self.type is str:
            if not isinstance(value, str) or (self.choices is not None and value not in self.choices):
                raise err
            return value
        # numbers: reject bools and strings explicitly (YAML 'yes' -> True)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise err
        if self.type is int:
            if isinstance(value, float) and not value.is_integer():
                raise err
            value = int(value)
        else:
            value = float(value)
            if math.isnan(value):
                raise err
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise err
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise err
        if (self.type is float and math.isinf(value)) or (self.choices is not None and value not in self.choices):
            raise err
        return value

    def describe(self) -> str:
        """``name=default (allowed): doc`` for listings."""
        default = "required" if self.required else repr(self.default)
        return f"{self.name}={default} ({self.allowed()}): {self.doc}"


def interval(words: str, low: Any, high: Any, low_open: bool, high_open: bool, fmt: Callable[[Any], str]) -> str:
    """``words`` and its bounds, ``in [low, high)``, ``> low`` or ``<= high`` (each shown by ``fmt``), if any."""
    if low is not None and high is not None:
        return f"{words} in {'(' if low_open else '['}{fmt(low)}, {fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{words} {'>' if low_open else '>='} {fmt(low)}"
    if high is not None:
        return f"{words} {'<' if high_open else '<='} {fmt(high)}"
    return words


def validate_params(declared: Sequence[Param], given: dict[str, Any], owner: str) -> dict[str, Any]:
    """The keyword parameters validated, defaults filled in, in declaration order; an unknown
    key (with a did-you-mean) or a missing required one raises :class:`ParamError`."""
    known = {p.name: p for p in declared}
    for key in given:
        if key not in known:
            raise UnknownParamError(key, given[key], list(known), owner)
    out: dict[str, Any] = {}
    for p in declared:
        if p.name in given:
            out[p.name] = p.validate(given[p.name], owner)
        elif p.required:
            raise ParamError(p.name, None, f"given ({p.allowed()}); it is required", owner)
        else:
            out[p.name] = p.default
    return out


def did_you_mean(word: str, options: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` or an empty string."""
    import difflib

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(what: str, name: Any, available: Sequence[str]) -> str:
    """``unknown <what> <name> (did you mean ...?); available: <names>`` (``none`` when there are none)."""
    hint = did_you_mean(name, available) if isinstance(name, str) else ""
    return f"unknown {what} {name!r}{hint}; available: {', '.join(available) or 'none'}"
