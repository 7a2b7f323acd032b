"""Module names a sweep saved before its classes moved, for ``--resume``.

Tune's saved state holds pickled objects by module path (each trial's
:class:`~sublayer_search.search.core.trial.Trial`, the searcher's observations, the
stopping rule). A sweep interrupted before ``search/`` took its present layers still
resumes: while :func:`moved_modules` is active, each old name imports the module now
holding its classes.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MOVED", "moved_modules"]

_SEARCH = "sublayer_search.search."
MOVED: dict[str, str | tuple[str, ...]] = {
    "plan.problems": "core.problems",
    "plan.scalars": "core.scalars",
    "plan.yaml_input": "core.yaml_input",
    "plan.variant": "core.variant",
    "plan.trial": "core.trial",
    "plan.guidance_axis": "core.guidance_axis",
    "searchers.observation": "core.observation",
    "searchers.warm_start": "plan.warm_start",
    "run.schedulers": "stopping.schedulers",
    "run.comeback_stopping": "stopping.comeback",
    "run.curve_stopping": "stopping.curve",
    "replay.calibration": "stopping.calibration",
    "replay.curves": "recorded.curves",
    "replay.from_export": "recorded.from_export",
    "replay.arrival": "recorded.arrival",
    "oneshot.checks": "searchers.algorithms.oneshot",
    "oneshot.plan": "oneshot.stages",
    "searchers.tune": ("searchers.grid_searcher", "searchers.with_baseline",
                       "searchers.evolution_searcher", "searchers.optuna_study"),
}
"""Old module (under ``sublayer_search.search``) -> the module (or the modules, for one that
was split) that holds its classes."""


def _module(name: str, homes: tuple[str, ...]) -> types.ModuleType:
    if len(homes) == 1:
        return importlib.import_module(_SEARCH + homes[0])
    merged = types.ModuleType(name)
    for home in homes:
        merged.__dict__.update({k: v for k, v in vars(importlib.import_module(_SEARCH + home))
                                .items() if not k.startswith("__")})
    return merged


@contextmanager
def moved_modules() -> Iterator[None]:
    """While inside, ``import`` (and so unpickling) of an old name gets its new module."""
    added = []
    for old, new in MOVED.items():
        name = _SEARCH + old
        if name not in sys.modules:
            sys.modules[name] = _module(name, (new,) if isinstance(new, str) else new)
            added.append(name)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)
