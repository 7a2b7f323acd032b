"""The one-way dependencies of the layout: search -> models -> spaces, analysis -> spaces."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "sublayer_search"
PACKAGES = ("spaces", "models", "search", "analysis")

FORBIDDEN = {
    "spaces": {"torch", "ray", "mlflow", "models", "search", "analysis", "optuna"},
    "models": {"ray", "mlflow", "search", "analysis", "optuna"},
    "analysis": {"torch", "ray", "models", "search"},
}


def _top(module: str) -> str:
    """``sublayer_search.models.train`` -> ``models``; ``torch.nn`` -> ``torch``."""
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


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package):
    offenders = {}
    for path in sorted((REPO / package).rglob("*.py")):
        bad = _imports(path) & FORBIDDEN[package]
        if bad:
            offenders[str(path.relative_to(REPO))] = sorted(bad)
    assert not offenders, f"{package}/ must not import {sorted(FORBIDDEN[package])}: {offenders}"


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
