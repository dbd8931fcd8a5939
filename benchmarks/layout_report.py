"""The size and shape of the code, as tables: what ``docs/architecture.md`` promises, measured.

For each tree given (default: this checkout) it prints

* the lines of ``mklkit/`` and of each plugin, and the number of modules;
* the modules over ``--module-limit`` lines (500) and the functions over
  ``--function-limit`` lines (80), jitted ones apart;
* the jitted functions with more than ``--param-limit`` parameters (12);
* the function-level imports of mklkit modules, and the import cycles
  counting them (strongly connected components of the module graph).

``python benchmarks/layout_report.py /path/to/old/checkout .`` puts two trees
side by side.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

JIT_DECORATORS = {
    "njit",
    "jit",
    "generated_jit",
    "vectorize",
    "guvectorize",
    "overload",
    "overload_method",
    "register_jitable",
    "cfunc",
}


def _module(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _decorator_names(fn: ast.AST) -> set[str]:
    names = set()
    for d in getattr(fn, "decorator_list", []):
        node = d.func if isinstance(d, ast.Call) else d
        while isinstance(node, ast.Attribute):
            names.add(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = mod if is_pkg else mod.rpartition(".")[0]
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


class Tree:
    def __init__(self, root: Path, package: str = "mklkit") -> None:
        self.root = root
        self.files = sorted(p for p in (root / package).rglob("*.py") if "_templates" not in p.parts)
        self.modules = {_module(root, p): p for p in self.files}
        self.lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in self.modules.items()}
        self.all_lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (root / package).rglob("*.py"))
        self.long_functions: list[tuple[str, str, int, bool]] = []
        self.wide_jitted: list[tuple[str, str, int]] = []
        self.edges: dict[str, set[str]] = defaultdict(set)
        self.local_imports = 0
        for mod, path in self.modules.items():
            self._scan(mod, path)

    def _target(self, name: str, names: list[str]) -> list[str]:
        out = []
        for n in names:
            if f"{name}.{n}" in self.modules:
                out.append(f"{name}.{n}")
        if not out:
            while name and name not in self.modules:
                name = name.rpartition(".")[0]
            if name:
                out.append(name)
        return out

    def _scan(self, mod: str, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        top = set(map(id, tree.body))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                jitted = bool(_decorator_names(node) & JIT_DECORATORS)
                if n > 80:
                    self.long_functions.append((mod, node.name, n, jitted))
                if jitted:
                    a = node.args
                    k = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                    self.wide_jitted.append((mod, node.name, k))
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.Import):
                    targets = [t for a in node.names for t in self._target(a.name, [])]
                else:
                    targets = self._target(_resolve(mod, is_pkg, node), [a.name for a in node.names])
                targets = [t for t in targets if t != mod]
                if _in_type_checking(tree, node):
                    continue
                if id(node) not in top and targets:
                    self.local_imports += 1
                for t in targets:
                    self.edges[mod].add(t)

    def cycles(self) -> list[list[str]]:
        """Strongly connected components with more than one module (Tarjan)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in sorted(self.edges.get(v, ())):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

        for v in sorted(self.modules):
            if v not in index:
                visit(v)
        return out


def _in_type_checking(tree: ast.AST, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            if any(target is n for n in ast.walk(node)):
                return True
    return False


def plugin_lines(root: Path) -> dict[str, int]:
    out = {}
    for pkg in sorted((root / "plugins").glob("*/mklkit_*/__init__.py")):
        pkg = pkg.parent
        out[pkg.name] = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in pkg.rglob("*.py"))
    return out


def _plugin_tree(root: Path, name: str) -> Tree:
    return Tree(root / "plugins" / name.replace("_", "-"), package=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", default=["."], help="checkouts to measure (default: .)")
    ap.add_argument("--module-limit", type=int, default=500)
    ap.add_argument("--param-limit", type=int, default=12)
    ap.add_argument("--details", action="store_true", help="list the long functions and wide jitted loops")
    args = ap.parse_args()
    trees = [Tree(Path(t).resolve()) for t in args.trees]
    rows = [
        ("lines in mklkit/ (every .py file)", lambda t: t.all_lines),
        ("modules", lambda t: len(t.modules)),
        (f"modules over {args.module_limit} lines", lambda t: sum(v > args.module_limit for v in t.lines.values())),
        ("longest module (lines)", lambda t: max(t.lines.values())),
        ("functions over 80 lines (Python)", lambda t: sum(not j for *_, j in t.long_functions)),
        ("functions over 80 lines (jitted)", lambda t: sum(j for *_, j in t.long_functions)),
        (
            f"jitted functions over {args.param_limit} parameters",
            lambda t: sum(k > args.param_limit for *_, k in t.wide_jitted),
        ),
        ("most parameters of a jitted function", lambda t: max((k for *_, k in t.wide_jitted), default=0)),
        ("function-level imports of mklkit modules", lambda t: t.local_imports),
        ("import cycles (function-level imports counted)", lambda t: len(t.cycles())),
    ]
    for name in sorted({k for t in trees for k in plugin_lines(t.root)}):
        rows.append((f"lines in plugin {name}", lambda t, n=name: plugin_lines(t.root).get(n, 0)))
        rows.append(
            (
                f"most parameters of a jitted function in {name}",
                lambda t, n=name: max((k for *_, k in _plugin_tree(t.root, n).wide_jitted), default=0),
            )
        )
    width = max(len(r[0]) for r in rows)
    heads = [str(t.root.name) for t in trees]
    print(f"| {'measure'.ljust(width)} | " + " | ".join(h.rjust(10) for h in heads) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * 12 for _ in heads) + "|")
    for name, fn in rows:
        print(f"| {name.ljust(width)} | " + " | ".join(str(fn(t)).rjust(10) for t in trees) + " |")
    if args.details:
        for t in trees:
            print(f"\n{t.root}:")
            for mod, lines in sorted(t.lines.items(), key=lambda kv: -kv[1]):
                if lines > args.module_limit:
                    print(f"  module {mod}: {lines} lines")
            for mod, fn, n, jitted in sorted(t.long_functions, key=lambda r: -r[2]):
                print(f"  {'jitted ' if jitted else ''}function {mod}.{fn}: {n} lines")
            for mod, fn, k in sorted(t.wide_jitted, key=lambda r: -r[2]):
                if k > args.param_limit:
                    print(f"  jitted {mod}.{fn}: {k} parameters")
            for comp in t.cycles():
                print(f"  cycle: {' <-> '.join(comp)}")


if __name__ == "__main__":
    main()
