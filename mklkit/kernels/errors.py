"""The errors of bank descriptions: :class:`BankError` with its parts as data, and their messages."""

from __future__ import annotations

from typing import Any, Sequence

from ..components.params import MISSING, did_you_mean


class BankError(ValueError):
    """An invalid bank description, precomputed kernel file or memory request.

    The parts of the one-line message are kept as data: ``key`` (e.g. ``bank[1].degree``, or ``None``),
    ``problem`` (without the key), ``value`` (:attr:`NO_VALUE` when none) and ``allowed``.
    """

    NO_VALUE: Any = MISSING

    def __init__(
        self,
        message: str,
        key: str | None = None,
        *,
        problem: str | None = None,
        value: Any = MISSING,
        allowed: str | None = None,
    ):
        super().__init__(message)
        self.key = key
        self.problem = problem if problem is not None else message
        self.value = value
        self.allowed = allowed

    @property
    def has_value(self) -> bool:
        """Whether :attr:`value` holds an offending value."""
        return self.value is not MISSING


def _must(key: str, allowed: str, value: Any, note: str = "", cls: type[BankError] = BankError) -> BankError:
    """``<key> must be <allowed>; got <value><note>``."""
    return cls(
        f"{key} must be {allowed}; got {value!r}{note}",
        key=key,
        problem="invalid value" + note,
        value=value,
        allowed=allowed,
    )


def _required(key: str, problem: str, allowed: str, show: bool = True) -> BankError:
    """``<key> <problem> (<allowed>)`` (without the parenthesis unless ``show``) for a missing key."""
    message = f"{key} {problem} ({allowed})" if show else f"{key} {problem}"
    return BankError(message, key=key, problem=problem, allowed=allowed)


def _unknown(
    key: str,
    what: str,
    name: Any,
    available: Sequence[str] | None,
    ctx: str = "",
    label: str = "available",
    head: str | None = None,
) -> BankError:
    """``<head>: unknown <what> <name> (did you mean ...?)<ctx>; <label>: <available>``."""
    hint = did_you_mean(str(name), list(available)) if available else ""
    shown = ", ".join(available) if available else None
    message = f"{head or key}: unknown {what} {name!r}{hint}{ctx}" + (f"; {label}: {shown}" if shown else "")
    return BankError(message, key=key, problem=f"unknown {what}{hint}{ctx}", value=name, allowed=shown)


class UnknownName(LookupError):
    """A name a lookup does not know; ``available`` lists the names it knows."""

    def __init__(self, message: str, available: Sequence[str]):
        super().__init__(message)
        self.available = list(available)
