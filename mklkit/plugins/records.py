"""The records of the component registry and the errors it raises (:mod:`mklkit.plugins`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ..components.params import did_you_mean  # stdlib only

#: Environment variable holding comma-separated plugin names to skip.
DISABLE_ENV = "MKLKIT_DISABLE_PLUGINS"


class PluginWarning(UserWarning):
    """A plugin could not be loaded and was skipped."""


class UnknownComponentError(KeyError, ValueError):
    """A component name (or kind: ``kind == "kind"``) that no plugin provides; ``kind``, ``name`` and
    the ``available`` names are attributes (``unknown loss 'hindge' (did you mean 'hinge'?);
    available: hinge, logistic``)."""

    def __init__(self, kind: str, name: Any, available: Iterable[str]):
        self.kind = kind
        self.name = name
        self.available = list(available)
        what = "component kind" if kind == "kind" else kind
        hint = did_you_mean(name, self.available) if isinstance(name, str) else ""
        listed = ", ".join(self.available) if self.available else "none"
        self.message = f"unknown {what} {name!r}{hint}; available: {listed}"
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message

    def __reduce__(self):  # picklable across worker processes
        return (type(self), (self.kind, self.name, self.available))


class DuplicateComponentError(ValueError):
    """Two plugins provide a component of the same kind and name: the registrations ``first`` (already
    present) and ``second`` (refused)."""

    def __init__(self, first: Registration, second: Registration):
        self.first = first
        self.second = second
        super().__init__(
            f"{second.kind} {second.name!r} is provided twice: by distribution "
            f"{first.provider} (module {first.module}) and by distribution "
            f"{second.provider} (module {second.module}); uninstall one, or disable "
            f"its plugin with {DISABLE_ENV}"
        )

    def __reduce__(self):
        return (type(self), (self.first, self.second))


class ComponentValidationError(TypeError):
    """A class handed to ``register`` that does not meet its kind's contract."""


@dataclass(frozen=True)
class Registration:
    """One registered component class (``kind``, ``name`` unique within it, ``cls``), the distribution
    and version providing it (``"mklkit"`` for built-ins), its module and the plugin that registered it."""

    kind: str
    name: str
    cls: type
    dist: str
    version: str
    module: str
    plugin: str = ""

    @property
    def provider(self) -> str:
        """``"dist version"`` for messages and listings."""
        return f"{self.dist} {self.version}".strip()

    @property
    def description(self) -> str:
        """First line of the class's ``description``."""
        text = str(getattr(self.cls, "description", "") or "").strip()
        return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to load or register, and contributes nothing: its entry-point ``name`` (for
    ``MKLKIT_DISABLE_PLUGINS``), distribution, ``error`` and distribution version."""

    name: str
    dist: str
    error: BaseException = field(compare=False)
    version: str = ""

    @property
    def message(self) -> str:
        """``"ExceptionType: text"`` on one line."""
        text = " ".join(str(self.error).split())
        return f"{type(self.error).__name__}: {text}" if text else type(self.error).__name__
