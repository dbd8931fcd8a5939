"""The errors of bank descriptions: :class:`BankError` with its parts as data, and their messages.

:class:`BankError` keeps the key, the problem, the offending value and what
would be accepted apart from its one-line message; :func:`_must` and
:func:`_unknown` write the two messages most checks give.  Their public
import path is :mod:`mklkit.kernels.description` (or :mod:`mklkit.kernels`).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..components.params import did_you_mean

__all__ = ["BankError", "UnknownName"]


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

    def __init__(
        self,
        message: str,
        key: str | None = None,
        *,
        problem: str | None = None,
        value: Any = _NO_VALUE,
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
        return self.value is not _NO_VALUE


def _must(key: str, allowed: str, value: Any, note: str = "", at: str | None = None) -> BankError:
    """``<key> must be <allowed>; got <value><note>`` (``at``: the key reported, default ``key``)."""
    return BankError(
        f"{key} must be {allowed}; got {value!r}{note}",
        key=at or key,
        problem="invalid value" + note,
        value=value,
        allowed=allowed,
    )


def _unknown(
    key: str,
    what: str,
    name: Any,
    available: Sequence[str] | None,
    ctx: str = "",
    label: str = "available",
    text: str | None = None,
    head: str | None = None,
) -> BankError:
    """``<head>: unknown <what> <name> (did you mean ...?)<ctx>; <label>: <available>``.

    ``head`` (default ``key``) starts the message; ``text`` replaces it when
    the names are not known (a lookup that said why in its own words).
    """
    hint = did_you_mean(str(name), list(available)) if available else ""
    shown = ", ".join(available) if available else None
    message = (
        text
        if text is not None and available is None
        else (f"{head or key}: unknown {what} {name!r}{hint}{ctx}" + (f"; {label}: {shown}" if shown else ""))
    )
    problem = f"unknown {what}{hint}{ctx}" if text is None or available is not None else text
    return BankError(message, key=key, problem=problem, value=name, allowed=shown)


class UnknownName(LookupError):
    """A name a lookup does not know; ``available`` lists the names it knows."""

    def __init__(self, message: str, available: Sequence[str]):
        super().__init__(message)
        self.available = list(available)
