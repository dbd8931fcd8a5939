"""The API reference (docs/reference/index.md) lists every public object: each class and function named in
the ``__all__`` of mklkit's public packages has an autosummary entry there (module-level constants, in
UPPER_CASE, are described on the pages of the objects that use them)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "index.md"
PUBLIC = [
    "mklkit",
    "mklkit.estimators",
    "mklkit.kernels",
    "mklkit.kernels.device",
    "mklkit.kernels.factorize.on_device",
    "mklkit.weighting",
    "mklkit.metrics",
    "mklkit.data",
    "mklkit.testing",
    "mklkit.plugins",
    "mklkit.spec",
    "mklkit.sweep",
    "mklkit.pipeline",
]


def _resolve(path: str) -> object:
    """The object of a dotted name: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def documented() -> list[str]:
    """The full names of the reference's autosummary entries (each under its ``currentmodule``)."""
    names, module, listing = [], None, False
    for line in REFERENCE.read_text().splitlines():
        if m := re.match(r"\.\. currentmodule:: (\S+)", line.strip()):
            module = m.group(1)
        elif line.strip().startswith(".. autosummary::"):
            listing = True
        elif listing and line.startswith("   ") and not line.strip().startswith(":") and line.strip():
            names.append(f"{module}.{line.strip()}")
        elif listing and line.strip() and not line.startswith("   "):
            listing = False
    return names


def test_reference_entries_resolve():
    names = documented()
    assert len(names) > 100, names
    for name in names:
        top = name.split(".")[0]
        if top != "mklkit" and importlib.util.find_spec(top) is None:
            continue  # a plugin package under plugins/ that is not installed here
        _resolve(name)  # an entry that names nothing would be an empty page


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_object_has_a_page(module):
    pages = {id(_resolve(name)) for name in documented() if name.startswith("mklkit.")}
    mod = importlib.import_module(module)
    missing = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if name.isupper() or not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if id(obj) not in pages:
            missing.append(f"{module}.{name}")
    assert not missing, f"public objects without an entry in {REFERENCE.name}: {missing}"


def test_component_pages_list_the_declared_parameters():
    import sys

    sys.path.insert(0, str(REFERENCE.parents[1] / "_ext"))
    try:
        from mklkit_params import parameters_section
    finally:
        sys.path.pop(0)
    from mklkit.components.losses import Hinge
    from mklkit.engines.bcd import BCD

    assert parameters_section(Hinge) == []  # no parameters, no section
    lines = parameters_section(BCD)
    assert lines[1:3] == ["Parameters", "----------"]
    names = [line.split(" : ")[0] for line in lines[3::2]]
    assert names == [p.name for p in BCD.params]
    assert "tol : a number > 0, default=0.01" in lines
