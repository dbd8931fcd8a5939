"""The skeleton of a plugin distribution (``mklkit new-plugin NAME``): a component that passes the
conformance kit, its entry point and its test, every place to edit marked ``TODO``."""

from __future__ import annotations

import logging
import os
import re
import shutil
import string
import tempfile
from pathlib import Path

from . import __version__, _templates

logger = logging.getLogger(__name__)

#: Component kinds that have a template.
SCAFFOLD_KINDS: tuple[str, ...] = ("loss", "regularizer")

_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
_MAX_NAME = 40


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > _MAX_NAME or name.endswith("_"):
        raise ValueError(
            f"plugin name {name!r} is not allowed: use lowercase letters, digits and "
            f"underscores, starting with a letter, at most {_MAX_NAME} characters "
            "(e.g. 'my_loss')"
        )
    return name


def _class_name(name: str, kind: str) -> str:
    camel = "".join(part.capitalize() for part in name.split("_") if part)
    suffix = kind.capitalize()
    return camel if camel.endswith(suffix) else camel + suffix


def new_plugin(name: str, dest: str | os.PathLike[str] = ".", kind: str = "loss") -> Path:
    """Create the plugin distribution ``mklkit-<name>/`` (package ``mklkit_<name>``) in ``dest``; its layout
    is in ``docs/plugins.md``.

    Parameters
    ----------
    name : str
        Component and entry-point name: lowercase letters, digits and underscores, starting with a letter.
    dest : path-like
        Folder in which to create the distribution (created if missing).
    kind : {"loss", "regularizer"}

    Returns
    -------
    Path
        The new ``mklkit-<name>`` folder.

    Raises
    ------
    ValueError
        ``name`` or ``kind`` is not allowed.
    FileExistsError
        ``dest/mklkit-<name>`` exists already; nothing is overwritten.
    """
    name = _check_name(name)
    if kind not in SCAFFOLD_KINDS:
        raise ValueError(f"plugin kind must be one of {', '.join(map(repr, SCAFFOLD_KINDS))}; got {kind!r}")
    dest = Path(dest)
    dist = "mklkit-" + name.replace("_", "-")
    target = dest / dist
    if target.exists() or target.is_symlink():
        raise FileExistsError(f"{target} already exists; choose another plugin name or remove that folder")
    package = f"mklkit_{name}"
    files = {
        "pyproject.toml": _templates.PYPROJECT,
        "README.md": _templates.README,
        f"{package}/__init__.py": _templates.INIT,
        f"{package}/plugin.py": _templates.PLUGIN,
        f"{package}/{kind}.py": _templates.LOSS if kind == "loss" else _templates.REGULARIZER,
        f"tests/test_{name}.py": _templates.TEST,
    }
    values = {"name": name, "package": package, "dist": dist, "cls": _class_name(name, kind), "kind": kind}
    _write_distribution(dest, dist, target, files, {**values, "module": kind, "mklkit_version": __version__})
    logger.info("created plugin %s in %s", dist, target)
    return target


def _write_distribution(dest: Path, dist: str, target: Path, files: dict[str, str], values: dict[str, str]) -> None:
    """Write the files into a hidden folder in ``dest``, then rename it to ``target`` (never overwritten;
    nothing is left behind when writing fails)."""
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dist}-", dir=dest))
    try:
        for rel, template in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(string.Template(template).substitute(values), encoding="utf-8")
        if target.exists():
            raise FileExistsError(f"{target} already exists; choose another plugin name or remove that folder")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
