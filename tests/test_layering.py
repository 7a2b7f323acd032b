"""The one-way dependencies of the layout: search -> models -> spaces, analysis -> spaces."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "spaces": {"torch", "ray", "mlflow", "models", "search", "analysis", "optuna"},
    "models": {"ray", "mlflow", "search", "analysis", "optuna"},
    "analysis": {"torch", "ray", "models", "search"},
}


def _imports(path: Path) -> set[str]:
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
