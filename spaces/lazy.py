"""Lazy package exports (PEP 562), so that importing a light submodule of a package
does not import the package's heavy neighbours (torch, matplotlib, scipy).

``sublayer sweep FILE --dry-run`` only needs configs and the order algebra; with eager
``__init__`` re-exports it used to import torch and matplotlib just to plan a sweep.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["SUBMODULE", "lazy_exports"]

SUBMODULE = ":module"
"""The value in an exports mapping for a name that is a submodule of the package; written
``SUBMODULE + ":sub.path"`` it names a module deeper in the package under a short name
(``analysis.paper`` for ``analysis.papers.press_paper``)."""


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a public name to the
    submodule (relative to ``package``) that defines it, or :data:`SUBMODULE` for a name
    that is itself a submodule. The value is imported on first access and cached in the package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if module == SUBMODULE:
            value = importlib.import_module(f"{package}.{name}")
        elif module.startswith(SUBMODULE + ":"):
            value = importlib.import_module(f"{package}.{module[len(SUBMODULE) + 1:]}")
        else:
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
        vars(importlib.import_module(package))[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(package)), *exports})

    return __getattr__, __dir__
