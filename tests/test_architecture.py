"""What must never import what (docs/architecture.md), read from the source with ``ast``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "mklkit"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, top_level_only: bool = False) -> list[tuple[str, list[str]]]:
    """``[(imported module, names), ...]`` with relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((name, [a.name for a in node.names]))
    return out


FILES = sorted(p for p in ROOT.rglob("*.py") if "_templates" not in p.parts)

#: The top layers: what the registry, the declaration checker and the conformance kits never import.
_TOP = ("mklkit.pipeline", "mklkit.spec", "mklkit.api", "mklkit.sweep", "mklkit.estimators", "mklkit.cli")

#: (modules whose source is checked, imports they must never make)
RULES = [
    ("mklkit._jit", ("mklkit.components", "mklkit.engines", "mklkit.kernels", "mklkit.pipeline",
                         "mklkit.spec", "mklkit.cli", "mklkit.plugins", "mklkit.estimators")),
    ("mklkit.components", ("mklkit.engines", "mklkit.cli", "mklkit.pipeline", "mklkit.spec", "mklkit.api",
                           "mklkit.estimators")),
    ("mklkit.kernels", ("mklkit.engines", "mklkit.cli", "mklkit.pipeline", "mklkit.spec", "mklkit.api",
                        "mklkit.estimators", "mklkit.sweep")),
    ("mklkit.engines", ("mklkit.cli", "mklkit.pipeline", "mklkit.spec", "mklkit.api", "mklkit.sweep",
                        "mklkit.estimators", "mklkit.plugins", "mklkit.builtin", "mklkit_smo", "mklkit_huber")),
    ("mklkit.pipeline", ("mklkit.cli", "mklkit.spec", "mklkit.api", "mklkit.sweep", "mklkit.estimators")),
    ("mklkit.spec", ("mklkit.cli", "mklkit.api", "mklkit.sweep", "mklkit.estimators")),
    ("mklkit.estimators", ("mklkit.cli", "mklkit.spec", "mklkit.api", "mklkit.sweep")),
    ("mklkit.sweep", ("mklkit.cli",)),
    ("mklkit.api", ("mklkit.cli",)),
    ("mklkit.data", ("mklkit.kernels", "mklkit.engines", "mklkit.pipeline", "mklkit.spec", "mklkit.api",
                     "mklkit.sweep", "mklkit.estimators", "mklkit.cli")),
    ("mklkit.problem", ("mklkit.engines", "mklkit.pipeline", "mklkit.spec", "mklkit.api", "mklkit.sweep",
                        "mklkit.estimators", "mklkit.cli")),
    ("mklkit.result", ("mklkit",)),
    ("mklkit.declaration", _TOP),
    ("mklkit.plugins", _TOP),
    ("mklkit.hookspecs", _TOP),
    ("mklkit.builtin", _TOP),
    ("mklkit.testing", _TOP),
    ("mklkit.io", ("mklkit.cli",)),
    ("mklkit.report", ("mklkit.cli",)),
]


#: The one exception to RULES: the core's plugin registers ``auto``, the choice among the
#: installed engines, which is the pipeline's (it asks the registry for the engines).
RULE_EXCEPTIONS = {("mklkit.builtin", "mklkit.pipeline.choose")}


@pytest.mark.parametrize("owner, forbidden", RULES, ids=[r[0] for r in RULES])
def test_forbidden_imports(owner, forbidden):
    bad = []
    for path in FILES:
        mod = _module(path)
        if mod != owner and not mod.startswith(owner + "."):
            continue
        for name, _ in _imports(path):
            if (mod, name) in RULE_EXCEPTIONS:
                continue
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{mod} imports {name}")
    assert not bad, bad


def test_private_names_stay_private():
    """No module imports another mklkit module's private names (sweep used to read spec's)."""
    bad = []
    for path in FILES:
        for name, names in _imports(path):
            if name.startswith("mklkit.") and name.rpartition(".")[0] != _module(path).rpartition(".")[0]:
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private and name.split(".")[1] in ("spec", "pipeline", "api", "sweep", "cli", "io"):
                    bad.append(f"{_module(path)}: from {name} import {', '.join(private)}")
    assert not bad, bad


def test_engines_and_library_never_print():
    """Only mklkit/cli.py writes to the terminal."""
    bad = []
    for path in FILES:
        if path.name == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                bad.append(f"{_module(path)}:{node.lineno} print")
            if (isinstance(node, ast.Attribute) and node.attr in ("write", "flush")
                    and isinstance(node.value, ast.Attribute) and node.value.attr in ("stderr", "stdout")):
                bad.append(f"{_module(path)}:{node.lineno} sys.{node.value.attr}.{node.attr}")
    assert not bad, bad


def test_no_import_cycles_at_module_level():
    """The modules' top-level imports form no cycle (imports inside functions are lazy and allowed)."""
    graph: dict[str, set[str]] = {}
    modules = {_module(p) for p in FILES}
    for path in FILES:
        deps = set()
        for name, names in _imports(path, top_level_only=True):
            for cand in [name] + [f"{name}.{n}" for n in names]:
                if cand in modules and cand != _module(path):
                    deps.add(cand)
        graph[_module(path)] = deps
    # packages import their submodules; a submodule importing its own package's __init__ is not a cycle
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for d in graph.get(m, ()):
            if m.startswith(d + "."):
                continue
            if seen.get(d) == 1:
                raise AssertionError(" -> ".join(stack[stack.index(d):] + [d]))
            if d not in seen:
                visit(d)
        stack.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)


DOC = ROOT.parent / "docs" / "architecture.md"
#: Packages whose modules docs/architecture.md lists in layer order (a table per package).
LAYERED = ("kernels", "pipeline", "spec", "sweep", "estimators")


def _doc_paths() -> list[str]:
    """Paths of mklkit written in backticks on docs/architecture.md (``kernels/build.py``, ``sweep/``)."""
    import re

    return re.findall(r"`([A-Za-z_][\w/]*(?:\.py|/))`", DOC.read_text(encoding="utf-8"))


def test_architecture_page_names_every_module_and_only_existing_ones():
    named = set(_doc_paths())
    missing = []
    for path in FILES:
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "data" or rel.name == "__init__.py" and len(rel.parts) == 1:
            continue
        if rel.name == "__init__.py":
            want = "/".join(rel.parts[:-1]) + "/"
        else:
            want = rel.as_posix()
        if want not in named:
            missing.append(want)
    assert not missing, f"docs/architecture.md does not name: {missing}"
    gone = [p for p in named if not (ROOT / p).exists() and not (ROOT.parent / p).exists()]
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


@pytest.mark.parametrize("package", LAYERED)
def test_modules_inside_a_package_import_only_the_ones_listed_before_them(package):
    order = [p[len(package) + 1:-3].replace("/", ".") for p in _doc_paths()
             if p.startswith(package + "/") and p.endswith(".py")]
    order = list(dict.fromkeys(order))
    assert order, f"docs/architecture.md lists no modules of {package}/"
    bad = []
    for i, name in enumerate(order):
        path = ROOT / package / f"{name.replace('.', '/')}.py"
        later = {f"mklkit.{package}.{n}" for n in order[i + 1:]}
        for imported, names in _imports(path, top_level_only=True):
            for cand in [imported] + [f"{imported}.{n}" for n in names]:
                if cand in later:
                    bad.append(f"mklkit.{package}.{name} imports {cand}")
    assert not bad, bad
