"""The one-way dependencies of the layout, as the README states them (``search → models →
spaces`` and ``search → analysis → spaces``), and the rooms: no circles, no private names
across modules, small folders, torch in models only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "sublayer_search"
PACKAGES = ("spaces", "models", "search", "analysis")
RULE = "Dependencies point one way:"
"""The sentence of README.md (and CONTRIBUTING.md) that states the layering."""

LIBRARIES_FORBIDDEN = {
    "spaces": {"torch", "ray", "mlflow", "optuna"},
    "models": {"ray", "mlflow", "optuna"},
    "analysis": {"torch", "ray"},
}


def stated_layering(doc: Path) -> set[tuple[str, str]]:
    """(importer, imported) pairs the document's rule allows: every package of a chain
    ``a → b → c`` may import those after it."""
    text = doc.read_text()
    start = text.index(RULE)
    sentence = text[start:text.find("\n\n", start)]
    allowed = set()
    for chain in re.findall(r"`([a-z]+(?: → [a-z]+)+)`", sentence):
        parts = chain.split(" → ")
        allowed |= {(a, b) for i, a in enumerate(parts) for b in parts[i + 1:]}
    return allowed


ALLOWED = stated_layering(REPO / "README.md")


def test_the_docs_state_one_layering() -> None:
    """README and CONTRIBUTING say the same; pinned, so that changing it is deliberate."""
    assert stated_layering(REPO / "CONTRIBUTING.md") == ALLOWED
    assert ALLOWED == {("search", "models"), ("search", "spaces"), ("models", "spaces"),
                       ("search", "analysis"), ("analysis", "spaces")}


def _top(module: str) -> str:
    """``sublayer_search.models.lm_family`` -> ``models``; ``torch.nn`` -> ``torch``."""
    parts = module.split(".")
    if parts[0] == NAMESPACE and len(parts) > 1:
        return parts[1]
    return parts[0]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(_top(node.module))
    return names


def _raw_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_point_one_way(package):
    """Of this project's packages, each imports only those the stated rule allows it."""
    allowed = {b for a, b in ALLOWED if a == package} | {package}
    forbidden = (set(PACKAGES) - allowed) | LIBRARIES_FORBIDDEN.get(package, set())
    offenders = {}
    for path in sorted((REPO / package).rglob("*.py")):
        bad = _imports(path) & forbidden
        if bad:
            offenders[str(path.relative_to(REPO))] = sorted(bad)
    assert not offenders, f"{package}/ must not import {sorted(forbidden)}: {offenders}"


def test_the_rule_reads_chains_transitively(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"{RULE} `a → b → c` and `d → c`.\n\n`x → y` is another paragraph.\n")
    assert stated_layering(doc) == {("a", "b"), ("a", "c"), ("b", "c"), ("d", "c")}


def test_layering_sees_namespaced_imports():
    """The check above is not vacuous: it reads ``sublayer_search.X`` imports as ``X``."""
    assert "spaces" in _imports(REPO / "models" / "config.py")
    assert "models" in _imports(REPO / "search" / "tasks" / "lm.py")


@pytest.mark.parametrize("folder", ["spaces", "models", "search", "analysis", "tests",
                                    "benchmarks", "notebooks"])
def test_code_imports_the_namespace_not_bare_folders(folder):
    """Installed, the folders live under ``sublayer_search``: a bare ``import models``
    would pick up whatever else is called ``models`` on the path."""
    offenders = {str(p.relative_to(REPO)): sorted(_raw_imports(p) & set(PACKAGES))
                 for p in sorted((REPO / folder).rglob("*.py"))}
    assert not {k: v for k, v in offenders.items() if v}


def test_record_schema_is_dependency_free():
    """``spaces/records.py`` is imported by models, search and analysis: stdlib only."""
    import sys

    allowed = set(sys.stdlib_module_names) | {"__future__"}
    assert _raw_imports(REPO / "spaces" / "records.py") <= allowed


# -- rooms: no circles, no private names across modules, small folders, torch in models --
MAX_MODULES = 15


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([NAMESPACE, *parts])


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _edges(path: Path, modules: dict[str, Path]) -> tuple[set[str], list[tuple[str, str]]]:
    """Modules of the four packages that ``path`` imports (anywhere in the file), and the
    ``_private`` names it imports from them."""
    out: set[str] = set()
    private: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith(NAMESPACE + "."):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    out.add(full)
                    continue
                out.add(node.module)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    private.append((node.module, alias.name))
    if path.is_relative_to(REPO):
        out.discard(_module_name(path))
    return out, private


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    modules = _modules()
    graph = {m: _edges(p, modules)[0] for m, p in modules.items()}
    assert not _cycles(graph)


def test_the_circle_check_finds_a_circle():
    """Not vacuous: a two-module circle and a three-module one are found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_another_modules_private_names():
    modules = _modules()
    offenders = {m: private for m, p in modules.items()
                 if (private := _edges(p, modules)[1])}
    assert not offenders


def test_private_name_check_sees_private_imports(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("from sublayer_search.spaces.order import _hidden, parse_order\n")
    assert _edges(path, {})[1] == [("sublayer_search.spaces.order", "_hidden")]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_folder_holds_more_than_15_modules(package):
    folders = {p.parent for p in (REPO / package).rglob("*.py")}
    sizes = {str(f.relative_to(REPO)): len(list(f.glob("*.py"))) for f in folders}
    assert max(sizes.values()) <= MAX_MODULES, sizes


def test_torch_is_imported_only_in_models():
    offenders = [str(p.relative_to(REPO)) for package in ("spaces", "search", "analysis")
                 for p in sorted((REPO / package).rglob("*.py")) if "torch" in _raw_imports(p)]
    assert not offenders
