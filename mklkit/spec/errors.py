"""The one-line error of specs: ``<file>: <key.path>: <problem>; got <value>; allowed: <what is allowed>``."""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..pipeline import PipelineError
from ..pipeline.errors import one_line


class SpecError(PipelineError):
    """A spec problem, one line naming file, key path and value: a :class:`~mklkit.pipeline.PipelineError`
    with the file in front (``got`` is left out when there is no value).

    Attributes
    ----------
    file : str
        The spec file as given (``"<spec>"`` for an in-memory mapping).
    key : str
        Dotted key path (``problem.regularizer.lam``; ``line L, column C`` for YAML syntax).
    problem : str
        What is wrong.
    value : Any
        The offending value (absent: :data:`SpecError.NO_VALUE`).
    allowed : str or None
        What would be accepted.

    ``overridden``: the key paths set by ``--set``; a problem at one of them is marked ``(set by --set)``.
    """

    def __init__(
        self,
        file: str,
        key: str,
        problem: str,
        value: Any = PipelineError.NO_VALUE,
        allowed: str | None = None,
        *,
        shown: str | None = None,
        overridden: Sequence[str] = (),
    ) -> None:
        self.file = str(file)
        super().__init__(key, mark_override(problem, key, overridden), value, allowed, shown=shown)

    def message(self, key: str | None = None, problem: str | None = None) -> str:
        return f"{self.file}: {super().message(key, problem)}"


def mark_override(problem: str, key: str, overridden: Sequence[str]) -> str:
    """``problem`` marked ``(set by --set)`` when ``key`` was set on the command line."""
    k, *given = (re.sub(r"\[(\d+)\]", r".\1", path) for path in (key, *overridden))  # bank[1] as bank.1
    if any(k == o or k.startswith(o + ".") or o.startswith(k + ".") for o in given):
        return f"{problem} (set by --set)"
    return problem


def from_pipeline(exc: PipelineError, file: str, overridden: Sequence[str] = ()) -> SpecError:
    """A PipelineError as the spec's one-line error."""
    shown = exc.shown if exc.has_value else None
    return SpecError(file, exc.key, exc.problem, allowed=exc.allowed, shown=shown, overridden=overridden)


__all__ = ["SpecError", "one_line", "mark_override", "from_pipeline"]
