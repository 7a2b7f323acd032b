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
    """``sublayer_search.models.lm_workload`` -> ``models``; ``torch.nn`` -> ``torch``."""
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


SEARCH_RULE = "Inside `search/`, subpackages depend one way:"
"""The sentence of CONTRIBUTING.md that orders ``search/``'s subpackages."""


def stated_search_layers(doc: Path) -> list[str]:
    """``search/``'s subpackages as the rule lists them, highest first (the rule is one
    chain: each may import those after it)."""
    text = doc.read_text()
    start = text.index(SEARCH_RULE)
    chain = re.search(r"`([a-z]+(?:\s+→\s+[a-z]+)+)`", text[start:]).group(1)  # type: ignore[union-attr]
    return re.split(r"\s+→\s+", chain)


SEARCH_LAYERS = stated_search_layers(REPO / "CONTRIBUTING.md")


def _search_imports(path: Path) -> list[tuple[str, int]]:
    """``search/`` subpackages that ``path`` imports (absolute or relative, anywhere in the
    file: inside functions and under ``TYPE_CHECKING`` too), with the line."""
    rel = path.relative_to(REPO / "search").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                modules = [node.module or ""]
            else:
                base = ["sublayer_search", "search", *rel[:-1]][:len(rel) + 2 - node.level]
                modules = [".".join(base + ([node.module] if node.module else [a.name]))
                           for a in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[:2] == [NAMESPACE, "search"] and len(parts) > 2:
                found.append((parts[2], node.lineno))
    return found


def test_search_subpackages_point_one_way():
    """Every import inside ``search/`` goes from a subpackage to one after it in the
    stated chain; every subpackage is placed in the chain."""
    subpackages = {p.name for p in (REPO / "search").iterdir() if (p / "__init__.py").exists()}
    assert subpackages == set(SEARCH_LAYERS), "place every search/ subpackage in the rule"
    offenders = []
    for path in sorted((REPO / "search").rglob("*.py")):
        rel = path.relative_to(REPO / "search").parts
        if len(rel) == 1:
            continue  # search/__init__.py: the package's re-exports, above every layer
        here = SEARCH_LAYERS.index(rel[0])
        for target, line in _search_imports(path):
            if target != rel[0] and SEARCH_LAYERS.index(target) < here:
                offenders.append(f"search/{'/'.join(rel)}:{line} imports search.{target}")
    assert not offenders, "against the rule " + " → ".join(SEARCH_LAYERS) + ":\n" + \
        "\n".join(offenders)


def test_the_search_rule_sees_lazy_and_relative_imports(tmp_path):
    """The check above is not vacuous: imports inside functions, under TYPE_CHECKING and
    relative ones are all read."""
    folder = tmp_path / "search" / "core"
    folder.mkdir(parents=True)
    path = folder / "x.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                    "    from sublayer_search.search.plan import sweep_plan\n"
                    "def f():\n    from ..run import sweep\n    import sublayer_search.search.cli\n")
    rel_root = REPO / "search"
    try:
        globals()["REPO"] = tmp_path
        found = {t for t, _ in _search_imports(path)}
    finally:
        globals()["REPO"] = rel_root.parent
    assert found == {"plan", "run", "cli"}
    assert SEARCH_LAYERS[0] == "cli" and SEARCH_LAYERS[-1] == "core"
