"""The :class:`Registry`: components by kind and name, filled by plugins, each class checked against
its kind's declaration; its records (:class:`Registration`, :class:`BrokenPlugin`) and the errors it raises."""

from __future__ import annotations

import importlib.metadata
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import pluggy

from .. import __version__, hookspecs
from ..components.params import ParamError, unknown_name  # stdlib only
from ..declaration import KINDS, declaration_problems, unjitted_problem  # stdlib only at import
from ..hookspecs import PROJECT

if TYPE_CHECKING:  # pragma: no cover
    from ..components.base import Component

ENTRY_POINT_GROUP = PROJECT
CORE_DIST = "mklkit"  # distribution and plugin name of the core's own plugin
BUILTIN_MODULE = "mklkit.builtin"

_HOOK = "mklkit_register_components"

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
        self.message = unknown_name("component kind" if kind == "kind" else kind, name, self.available)
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


class Registry:
    """Components by kind and name, filled by plugins: ``Registry()`` is empty (add plugins with
    :meth:`register_plugin`), :meth:`Registry.load` reads the installed entry points."""

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._regs: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        self._plugins: dict[str, tuple[str, str]] = {}
        self._broken: list[BrokenPlugin] = []
        self._disabled: list[str] = []

    @classmethod
    def load(
        cls,
        entry_points: Iterable[Any] | None = None,
        *,
        disabled: Iterable[str] | None = None,
        builtin: bool = True,
        strict: bool = False,
    ) -> Registry:
        """Build a registry from entry points.

        Parameters
        ----------
        entry_points : iterable of importlib.metadata.EntryPoint, optional
            Defaults to the installed ``mklkit`` group (objects with ``name``, ``value``, ``load()``
            and optionally ``dist``); those naming :mod:`mklkit.builtin` are skipped.
        disabled : iterable of str, optional
            Plugin or distribution names to skip unimported; defaults to ``$MKLKIT_DISABLE_PLUGINS``.
        builtin : bool
            Register :mod:`mklkit.builtin` first (its failures are never caught).
        strict : bool
            Raise the first plugin failure instead of recording a :class:`BrokenPlugin` and warning.
        """
        reg = cls()
        if disabled is None:
            disabled = os.environ.get(DISABLE_ENV, "").split(",")
        blocked = {_norm(d) for d in disabled if d.strip()}
        if _norm(CORE_DIST) in blocked:
            blocked.discard(_norm(CORE_DIST))
            msg = f"{DISABLE_ENV}: the built-in components of {CORE_DIST!r} cannot be disabled; ignoring {CORE_DIST!r}"
            warnings.warn(msg, PluginWarning, stacklevel=2)
        if builtin:
            # loaded by name, as every plugin is: the registry imports none of its plugins
            core = importlib.import_module(BUILTIN_MODULE)
            reg.register_plugin(core, CORE_DIST, __version__, name=CORE_DIST)
        if entry_points is None:
            entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        unique: dict[tuple[str, str], Any] = {}
        for ep in entry_points:  # the same distribution may be found twice on sys.path
            unique.setdefault((ep.name, ep.value), ep)
        for ep in unique.values():
            reg._load_entry_point(ep, blocked, strict)
        reg._pm.check_pending()
        return reg

    def _load_entry_point(self, ep: Any, blocked: set[str], strict: bool) -> None:
        if ep.value.split(":")[0].strip() == BUILTIN_MODULE:
            return  # the core: registered first by load()
        dist, version = _dist_of(ep)
        if _norm(ep.name) in blocked or _norm(dist) in blocked:
            self._pm.set_blocked(ep.name)
            self._disabled.append(ep.name)
            return
        try:
            plugin = ep.load()
            self.register_plugin(plugin, dist, version, name=ep.name)
        except Exception as exc:
            if strict:
                raise
            broken = BrokenPlugin(ep.name, dist, exc, version)
            self._broken.append(broken)
            msg = (
                f"mklkit plugin {ep.name!r} from distribution {broken.dist} {broken.version} could not be loaded and "
                f"is skipped: {broken.message} (set {DISABLE_ENV}={ep.name} to skip it silently)"
            )
            warnings.warn(msg.replace("  ", " "), PluginWarning, stacklevel=3)

    def register_plugin(self, plugin: object, dist: str, version: str = "", name: str | None = None) -> str:
        """Register a plugin (a module or object holding ``@hookimpl`` functions) and its components,
        recorded as of distribution ``dist`` ``version``; returns the plugin ``name`` (by default the
        module's ``__name__``).  All or nothing.

        Raises
        ------
        ComponentValidationError
            A contributed class does not meet its kind's contract.
        DuplicateComponentError
            A contributed name of some kind is already registered.
        ValueError
            The plugin (or its name) is already registered, or disabled.
        pluggy.PluginValidationError
            A hook function has a wrong signature, an unknown ``mklkit_*`` name, or lacks ``@hookimpl``.
        """
        name = name or getattr(plugin, "__name__", None) or dist
        if self._pm.is_blocked(name):
            raise ValueError(f"plugin {name!r} is disabled; remove it from {DISABLE_ENV}")
        where = f"plugin {name!r} ({dist} {version})".replace(" )", ")")
        if getattr(plugin, _HOOK, None) is not None and self._pm.parse_hookimpl_opts(plugin, _HOOK) is None:
            raise pluggy.PluginValidationError(
                plugin, f"{where}: {_HOOK} is not decorated with @hookimpl (from mklkit.plugins import hookimpl)"
            )
        self._pm.register(plugin, name=name)
        pending: dict[tuple[str, str], Registration] = {}

        def register(cls: type) -> type:
            record = _validate(cls, where, dist, version, name)
            key = (record.kind, record.name)
            previous = self._regs[record.kind].get(record.name) or pending.get(key)
            if previous is not None:
                raise DuplicateComponentError(previous, record)
            pending[key] = record
            return cls

        try:
            self._pm.check_pending()
            others = [p for p in self._pm.get_plugins() if p is not plugin]
            self._pm.subset_hook_caller(_HOOK, others)(register=register)
        except BaseException:
            self._pm.unregister(plugin)
            raise
        for record in pending.values():
            self._regs[record.kind][record.name] = record
        self._plugins[name] = (dist, version)
        return name

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin and every component it registered (``ValueError`` for an unknown name)."""
        if name not in self._plugins:
            raise ValueError(
                f"no plugin named {name!r} is registered; registered: " + (", ".join(sorted(self._plugins)) or "none")
            )
        self._pm.unregister(name=name)
        del self._plugins[name]
        for regs in self._regs.values():
            for key in [k for k, r in regs.items() if r.plugin == name]:
                del regs[key]

    def _of_kind(self, kind: str) -> dict[str, Registration]:
        try:
            return self._regs[kind]
        except (KeyError, TypeError):
            raise UnknownComponentError("kind", kind, KINDS) from None

    def registration(self, kind: str, name: str) -> Registration:
        """The :class:`Registration` of one component; see :meth:`get`."""
        regs = self._of_kind(kind)
        try:
            return regs[name]
        except (KeyError, TypeError):
            raise UnknownComponentError(kind, name, sorted(regs)) from None

    def get(self, kind: str, name: str) -> type:
        """The component class registered as ``name`` of ``kind`` (else :class:`UnknownComponentError`)."""
        return self.registration(kind, name).cls

    def names(self, kind: str) -> list[str]:
        """Sorted names registered for ``kind``."""
        return sorted(self._of_kind(kind))

    def registrations(self, kind: str | None = None) -> list[Registration]:
        """All registrations (of one kind), by kind then name."""
        by_kind = [self._of_kind(k) for k in (KINDS if kind is None else (kind,))]  # unknown kinds raise
        return [regs[n] for regs in by_kind for n in sorted(regs)]

    def engines_supporting(self, problem: Any, exclude: str | None = None) -> list[str]:
        """Sorted names of the engines, but ``exclude``, whose default instance supports ``problem``
        (one that raises is left out: it must not hide the error being reported)."""
        ok = []
        for r in self.registrations("engine"):
            if r.name == exclude:
                continue
            try:
                if r.cls().supports(problem) is None:
                    ok.append(r.name)
            except Exception:  # noqa: BLE001 - see the docstring
                continue
        return ok

    def broken_plugin(self, plugin: str) -> BrokenPlugin | None:
        """The :class:`BrokenPlugin` named by plugin or distribution name, or None."""
        key = _norm(plugin)
        return next((b for b in self._broken if key in (_norm(b.name), _norm(b.dist))), None)

    def provided_by(self, plugin: str) -> list[Registration]:
        """Registrations of one plugin, named by plugin or distribution name."""
        key = _norm(plugin)
        return [r for r in self.registrations() if _norm(r.plugin) == key or _norm(r.dist) == key]

    def create(self, kind: str, spec: str | Mapping[str, Any] | Component) -> Component:
        """Instantiate a component of ``kind`` from a name (``"hinge"``), a mapping
        ``{"name": "huber", "delta": 2.0}`` or an instance (returned as is).

        Raises
        ------
        UnknownComponentError
            Unknown kind or name.
        ParamError
            Malformed spec, or a parameter its declaration does not allow.
        """
        regs = self._of_kind(kind)
        if isinstance(spec, str):
            name, kwargs = spec, {}
        elif isinstance(spec, Mapping):
            kwargs = dict(spec)
            if "name" not in kwargs:
                names = ", ".join(sorted(regs)) or "none"
                raise ParamError("name", None, f"given: a {kind} spec names its {kind} (one of {names})", owner=kind)
            name = kwargs.pop("name")
            if not isinstance(name, str):
                raise ParamError("name", name, f"a string naming a {kind}", owner=kind)
        elif not isinstance(spec, type) and getattr(type(spec), "kind", None) == kind:
            return spec  # type: ignore[return-value]
        else:
            raise ParamError(kind, spec, f"a {kind} name or a mapping with a 'name' key")
        return self.get(kind, name)(**kwargs)

    @property
    def broken(self) -> list[BrokenPlugin]:
        """Plugins that failed to load, in load order."""
        return list(self._broken)

    @property
    def disabled(self) -> list[str]:
        """Entry points skipped because of ``MKLKIT_DISABLE_PLUGINS``."""
        return list(self._disabled)

    @property
    def plugins(self) -> dict[str, tuple[str, str]]:
        """Registered plugin names -> ``(distribution, version)``."""
        return dict(self._plugins)

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The underlying :class:`pluggy.PluginManager`."""
        return self._pm

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(self._regs[k])}" for k in KINDS)
        return f"Registry({counts}, broken={len(self._broken)})"


def _validate(cls: Any, where: str, dist: str, version: str, plugin: str) -> Registration:
    """The :class:`Registration` of ``cls``, or its declaration's problems as one error."""
    if not isinstance(cls, type):
        raise ComponentValidationError(f"{where}: register() takes a component class; got {cls!r}")
    label = f"{cls.__module__}.{cls.__qualname__}"
    kind = getattr(cls, "kind", None)
    if kind not in KINDS:
        raise ComponentValidationError(
            f"{where}: {label}.kind must be one of {', '.join(map(repr, KINDS))}; got {kind!r}"
        )
    problems = declaration_problems(cls)
    if (jit := unjitted_problem(cls)) is not None:
        problems.append(jit)
    if problems:
        raise ComponentValidationError(f"{where}: {kind} {label} " + "; ".join(problems))
    return Registration(kind, cls.name, cls, dist, version, cls.__module__, plugin)


def _dist_of(ep: Any) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ep.value.split(":")[0].split(".")[0], ""
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return str(name or getattr(dist, "name", "") or "unknown"), str(dist.version or "")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()
