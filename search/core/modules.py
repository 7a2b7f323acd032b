"""The modules of a package of strategies, each declaring one (a searcher, a stopping rule),
imported once, on a registry's first lookup."""

from __future__ import annotations

import functools
import importlib
import pkgutil

__all__ = ["import_every_module"]


@functools.cache
def import_every_module(package: str) -> None:
    """Import every module of ``package`` (their decorators register them), once."""
    found = importlib.import_module(package)
    for module in pkgutil.iter_modules(found.__path__):
        importlib.import_module(f"{package}.{module.name}")
