"""The one-line error of specs: ``<file>: <key.path>: <problem>; got <value>; allowed: <what is allowed>``."""

from __future__ import annotations

from typing import Any, Sequence

from ..pipeline import PipelineError
from ..pipeline.errors import mark_override, one_line


class SpecError(PipelineError):
    """A spec problem: a :class:`~mklkit.pipeline.PipelineError` with the spec ``file`` in front (``"<spec>"``
    for an in-memory mapping); ``key`` is ``line L, column C`` for YAML syntax, ``overridden`` the key paths
    set by ``--set`` (a problem at one of them is marked ``(set by --set)``)."""

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
        super().__init__(key, problem, value, allowed, shown=shown, file=str(file), overridden=overridden)


def from_pipeline(exc: PipelineError, file: str, overridden: Sequence[str] = ()) -> SpecError:
    """A PipelineError as the spec's one-line error."""
    shown = exc.shown if exc.has_value else None
    return SpecError(file, exc.key, exc.problem, allowed=exc.allowed, shown=shown, overridden=overridden)


__all__ = ["SpecError", "one_line", "mark_override", "from_pipeline"]
