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


def _resolve(node: ast.ImportFrom, package: str) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved against ``package``."""
    if node.level:
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``[(imported module, names), ...]`` with relative imports resolved (``if TYPE_CHECKING:`` included)."""
    return [(name, names) for name, names, _, _ in _all_imports(path, typing=True)]


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        isinstance(test, ast.Name)
        and test.id == "TYPE_CHECKING"
        or isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
    )


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _all_imports(path: Path, typing: bool = False) -> list[tuple[str, list[str], int, bool]]:
    """``[(imported module, names, line, lazy), ...]``: every import of the module, ``lazy`` when
    it is inside a function.  Imports under ``if TYPE_CHECKING:`` never run: they are left out
    unless ``typing``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[tuple[str, list[str], int, bool]] = []

    def visit(nodes: list[ast.AST], lazy: bool) -> None:
        for node in nodes:
            if _type_checking(node):
                visit(node.body if typing else [], lazy)
                visit(node.orelse, lazy)
            elif isinstance(node, ast.Import):
                out.extend((a.name, [], node.lineno, lazy) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                out.append((_resolve(node, package), [a.name for a in node.names], node.lineno, lazy))
            else:
                visit(list(ast.iter_child_nodes(node)), lazy or isinstance(node, _FUNCTIONS))

    visit(tree.body, False)
    return out


FILES = sorted(p for p in ROOT.rglob("*.py") if "_templates" not in p.parts)

#: The top layers: what the registry, the declaration checker and the conformance kits never import.
_TOP = ("mklkit.pipeline", "mklkit.spec", "mklkit.api", "mklkit.sweep", "mklkit.estimators", "mklkit.cli")

#: (modules whose source is checked, imports they must never make)
RULES = [
    (
        "mklkit._jit",
        (
            "mklkit.components",
            "mklkit.engines",
            "mklkit.kernels",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.cli",
            "mklkit.plugins",
            "mklkit.estimators",
        ),
    ),
    (
        "mklkit.components",
        ("mklkit.engines", "mklkit.cli", "mklkit.pipeline", "mklkit.spec", "mklkit.api", "mklkit.estimators"),
    ),
    (
        "mklkit.kernels",
        (
            "mklkit.engines",
            "mklkit.cli",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.estimators",
            "mklkit.sweep",
        ),
    ),
    (
        "mklkit.engines",
        (
            "mklkit.cli",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.sweep",
            "mklkit.estimators",
            "mklkit.plugins",
            "mklkit.builtin",
            "mklkit_smo",
            "mklkit_huber",
        ),
    ),
    ("mklkit.pipeline", ("mklkit.cli", "mklkit.spec", "mklkit.api", "mklkit.sweep", "mklkit.estimators")),
    ("mklkit.spec", ("mklkit.cli", "mklkit.api", "mklkit.sweep", "mklkit.estimators")),
    ("mklkit.estimators", ("mklkit.cli", "mklkit.spec", "mklkit.api", "mklkit.sweep")),
    # api imports sweep (mklkit.api.sweep): what both need is in mklkit.solving, below both
    ("mklkit.sweep", ("mklkit.cli", "mklkit.api")),
    ("mklkit.solving", ("mklkit.cli", "mklkit.api", "mklkit.sweep", "mklkit.estimators")),
    ("mklkit.api", ("mklkit.cli",)),
    (
        "mklkit.data",
        (
            "mklkit.kernels",
            "mklkit.engines",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.sweep",
            "mklkit.estimators",
            "mklkit.cli",
        ),
    ),
    (
        "mklkit.problem",
        (
            "mklkit.engines",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.sweep",
            "mklkit.estimators",
            "mklkit.cli",
        ),
    ),
    (
        "mklkit.weighting",
        (
            "mklkit.engines",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.sweep",
            "mklkit.estimators",
            "mklkit.cli",
            "mklkit.plugins",
        ),
    ),
    ("mklkit.result", ("mklkit",)),
    ("mklkit.progress", ("mklkit",)),
    ("mklkit.declaration", _TOP),
    ("mklkit.plugins", _TOP),
    ("mklkit.hookspecs", _TOP),
    ("mklkit.builtin", _TOP),
    ("mklkit.testing", _TOP),
    (
        "mklkit.metrics",
        (
            "mklkit.engines",
            "mklkit.pipeline",
            "mklkit.spec",
            "mklkit.api",
            "mklkit.sweep",
            "mklkit.estimators",
            "mklkit.cli",
            "mklkit.plugins",
            "mklkit.weighting",
        ),
    ),
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
    """Only mklkit/cli/ writes to the terminal (and mklkit/progress.py, which draws its progress)."""
    bad = []
    for path in FILES:
        if _module(path) in ("mklkit.cli", "mklkit.progress") or _module(path).startswith("mklkit.cli."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                bad.append(f"{_module(path)}:{node.lineno} print")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("write", "flush")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in ("stderr", "stdout")
            ):
                bad.append(f"{_module(path)}:{node.lineno} sys.{node.value.attr}.{node.attr}")
    assert not bad, bad


#: The imports inside functions of mklkit modules, each with its reason: (module, imported
#: module).  Any other import of an mklkit module is at the top level, where the cycle check
#: below sees it; an import inside a function must not hide a cycle.
LAZY_IMPORTS: dict[tuple[str, str], str] = {
    # the CLI: `mklkit --help` and the argument errors answer at once, without numpy or the
    # registry; each command imports what it runs
    **{
        (f"mklkit.cli.{s}", m): "start-up"
        for s, m in (
            ("parser", "mklkit"),
            ("parser", "mklkit.cli.run"),
            ("parser", "mklkit.cli.components"),
            ("run", "mklkit.api"),
            ("run", "mklkit.io"),
            ("run", "mklkit.report"),
            ("run", "mklkit.sweep"),
            ("components", "mklkit.components.params"),
            ("components", "mklkit.plugins"),
            ("components", "mklkit.scaffold"),
            ("components", "mklkit.spec"),
            ("components", "mklkit.testing"),
        )
    },
    # `import mklkit.plugins` loads no numerics (tests/test_plugins.py) and plugins.py imports
    # declaration.py: the base classes a declaration is checked against load when one is checked
    ("mklkit.declaration", "mklkit.components.base"): "numpy when checking",
    ("mklkit.declaration", "mklkit.engines.base"): "numba when checking",
    ("mklkit.declaration", "mklkit.kernels.functions"): "numba when checking",
    ("mklkit.declaration", "mklkit.weighting.base"): "numba when checking",
    ("mklkit.declaration", "mklkit.components.multiclass"): "numba when checking",
    # an optional dependency: the conic reference needs cvxpy
    ("mklkit.testing._engine_checks", "mklkit.testing.conic"): "cvxpy",
    # the jitted loops of bcd are compiled (or loaded from numba's cache) when bcd first solves
    ("mklkit.engines.bcd.loop", "mklkit._jit.bcd"): "compiled on first use",
    ("mklkit.engines.apg", "mklkit._jit.bcd"): "compiled on first use",
    ("mklkit.kernels.factor_arrays", "mklkit._jit.bcd"): "compiled on first use",
    # `mklkit.pipeline` and `mklkit.spec` load no numerics at import; the numerics load when data
    # are read or a bank is built
    **{
        (s, m): "no numerics at import"
        for s, m in (
            ("mklkit.pipeline.settings", "mklkit.data"),
            ("mklkit.pipeline.problem_settings", "mklkit.components.base"),
            ("mklkit.pipeline.bank_settings", "mklkit.kernels"),
            ("mklkit.pipeline.bank_settings", "mklkit.kernels.factorize"),
            ("mklkit.pipeline.data", "mklkit._jit.gram"),
            ("mklkit.pipeline.data", "mklkit.data"),
            ("mklkit.pipeline.labels", "mklkit._multiclass"),
            ("mklkit.pipeline.labels", "mklkit.components.base"),
            ("mklkit.pipeline.loading", "mklkit.data"),
            ("mklkit.pipeline.loading", "mklkit.kernels"),
            ("mklkit.pipeline.bank", "mklkit._jit.gram"),
            ("mklkit.pipeline.bank", "mklkit.kernels"),
            ("mklkit.pipeline.bank", "mklkit.kernels.factorize"),
            ("mklkit.pipeline.bank", "mklkit.kernels.sharded"),
            ("mklkit.pipeline.assemble", "mklkit._multiclass"),
            ("mklkit.pipeline.assemble", "mklkit.problem"),
            ("mklkit.spec.schema", "mklkit.data"),
            ("mklkit.spec.schema", "mklkit.kernels"),
        )
    },
    # `import mklkit.estimators` (and the held-out path and the refinement it imports) loads
    # neither numba nor the kernels: they load on the first fit
    **{
        (s, m): "numba on the first fit"
        for s, m in (
            ("mklkit.estimators._checks", "mklkit.kernels"),
            ("mklkit.estimators._prepare", "mklkit._jit.gram"),
            ("mklkit.estimators._prepare", "mklkit.kernels"),
            ("mklkit.estimators._prepare", "mklkit.kernels.factorize.settings"),
            ("mklkit.estimators._prepare", "mklkit.kernels.precomputed"),
            ("mklkit.estimators._solve", "mklkit.compilation"),
            ("mklkit.estimators._solve", "mklkit.engines.base"),
            ("mklkit.estimators._solve", "mklkit.kernels"),
            ("mklkit.estimators._base", "mklkit.kernels"),
            ("mklkit.pipeline.heldout", "mklkit.engines.base"),
            ("mklkit.pipeline.heldout", "mklkit.engines.common"),
            ("mklkit.pipeline.heldout_rows", "mklkit.kernels.factor"),
            ("mklkit.pipeline.joint", "mklkit.components.multiclass"),
            ("mklkit.pipeline.joint", "mklkit.engines.joint"),
            ("mklkit.pipeline.joint", "mklkit.kernels.factorize.dense"),
            ("mklkit.pipeline.refine", "mklkit.kernels"),
            ("mklkit.pipeline.refine", "mklkit.kernels.factorize"),
            ("mklkit.pipeline.refine", "mklkit.kernels.factorize.build"),
            ("mklkit.pipeline.weighting", "mklkit.weighting.base"),
        )
    },
    # api.py, solving.py and sweep/ load no numerics at import either (the CLI imports them for
    # `mklkit validate` and the one-line errors); the numerics load when a spec is solved
    **{
        (s, m): "no numerics at import"
        for s, m in (
            ("mklkit.api", "mklkit.kernels"),
            ("mklkit.api", "mklkit.pipeline.data"),
            ("mklkit.api", "mklkit.sweep"),
            ("mklkit.solving", "mklkit"),
            ("mklkit.solving", "mklkit.compilation"),
            ("mklkit.solving", "mklkit.engines.base"),
            ("mklkit.solving", "mklkit.pipeline"),
            ("mklkit.solving", "mklkit.pipeline.heldout"),
            ("mklkit.solving", "mklkit.pipeline.refine"),
            ("mklkit.solving", "mklkit.pipeline.one_class"),
            ("mklkit.solving", "mklkit.pipeline.weighting"),
            ("mklkit.solving", "mklkit.pipeline.problem_settings"),
            ("mklkit.solving", "mklkit.result"),
            ("mklkit.sweep.backends", "mklkit._dask"),
            ("mklkit.sweep.backends", "mklkit.plugins"),
            ("mklkit.sweep.backends", "mklkit.result"),
            ("mklkit.sweep.runner", "mklkit"),
        )
    },
}

MODULES = {_module(p) for p in FILES}


def _target(name: str, names: list[str]) -> list[str]:
    """The modules an import statement loads: the one it names, and submodules imported by name
    (``from mklkit.testing import conic``)."""
    subs = [f"{name}.{n}" for n in names if f"{name}.{n}" in MODULES]
    return subs or ([name] if name in MODULES else [])


def _graph() -> dict[str, set[str]]:
    """module -> the mklkit modules it imports, at the top level or in a function.  Importing
    ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first: the packages above a module imported
    from outside them are edges too."""
    graph: dict[str, set[str]] = {}
    for path in FILES:
        mod = _module(path)
        deps: set[str] = set()
        for name, names, _, _ in _all_imports(path):
            for target in _target(name, names):
                parts = target.split(".")
                for k in range(2, len(parts) + 1):
                    dep = ".".join(parts[:k])
                    # a submodule importing its own package's __init__ (or itself) is not a cycle
                    if dep in MODULES and not (mod == dep or mod.startswith(dep + ".")):
                        deps.add(dep)
        graph[mod] = set(deps)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        seen[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if seen.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in seen:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        seen[m] = 2
        return None

    for m in sorted(graph):
        if m not in seen:
            found = visit(m)
            if found:
                return found
    return None


def test_no_import_cycles():
    """The modules' imports, those inside functions included, form no cycle."""
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import():
    graph = _graph()
    graph["mklkit.kernels.factor"] = graph["mklkit.kernels.factor"] | {"mklkit.kernels.precomputed_factors"}
    assert _cycle(graph) is not None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_imports_inside_functions_are_the_listed_ones():
    """An mklkit module imported inside a function is in :data:`LAZY_IMPORTS`, and every entry there is used."""
    bad, used = [], set()
    for path in FILES:
        mod = _module(path)
        for name, names, line, lazy in _all_imports(path):
            if not lazy:
                continue
            for target in _target(name, names):
                if (mod, target) in LAZY_IMPORTS:
                    used.add((mod, target))
                else:
                    bad.append(f"{mod}:{line} imports {target} inside a function")
    assert not bad, bad
    assert not set(LAZY_IMPORTS) - used, f"listed but not imported in a function: {sorted(set(LAZY_IMPORTS) - used)}"


DOC = ROOT.parent / "docs" / "architecture.md"
#: Packages whose modules docs/architecture.md lists in layer order (a table per package).
LAYERED = ("kernels", "metrics", "pipeline", "spec", "sweep", "estimators", "cli")


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
    order = [
        p[len(package) + 1 : -3].replace("/", ".")
        for p in _doc_paths()
        if p.startswith(package + "/") and p.endswith(".py")
    ]
    order = list(dict.fromkeys(order))
    assert order, f"docs/architecture.md lists no modules of {package}/"
    bad = []
    for i, name in enumerate(order):
        path = ROOT / package / f"{name.replace('.', '/')}.py"
        later = {f"mklkit.{package}.{n}" for n in order[i + 1 :]}
        for imported, names, _, _ in _all_imports(path):
            for cand in [imported] + [f"{imported}.{n}" for n in names]:
                if cand in later and (f"mklkit.{package}.{name}", cand) not in LAZY_IMPORTS:
                    bad.append(f"mklkit.{package}.{name} imports {cand}")
    assert not bad, bad
