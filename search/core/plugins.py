"""Strategies from outside the package: the entry points of installed distributions
(groups ``sublayer_search.spaces``, ``.searchers``, ``.schedulers``, ``.tasks``) and the
modules an experiment names (``plugins: [my_pkg.my_space]``).

Loading a plugin imports it; what it registers on import (``register_space``,
``@register_searcher``, ``@register_rule``, ``@register``) is recorded as coming from it
(:func:`origin`). A plugin that fails to import, registers nothing or breaks a
registry's contract is a :class:`PluginError` naming it, its entry point and what was
expected; nothing it did not register changes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from sublayer_search.search.core.problems import Problem
from sublayer_search.spaces.problems import ProblemError

__all__ = ["BUILT_IN", "GROUPS", "PluginError", "declare_group", "import_plugin", "load_group",
           "load_installed", "origin"]

BUILT_IN = "built in"
"""The origin of what the package itself registers."""
GROUPS = {"space": "sublayer_search.spaces", "searcher": "sublayer_search.searchers",
          "stopping rule": "sublayer_search.schedulers", "task": "sublayer_search.tasks"}
"""Entry-point group of each kind of strategy."""
HOW = {"space": "spaces.registry.register_space(SpaceInfo(...))",
       "searcher": '@register_searcher("name") on a SearchAlgorithm',
       "stopping rule": '@register_rule("name") on a StoppingRule',
       "task": "@register on a Task"}
"""How a module registers each kind (what a plugin that registers nothing is told)."""


class PluginError(ProblemError):
    """A plugin that cannot be used (the CLI exits with status 2)."""


@dataclass(frozen=True)
class _Group:
    kind: str
    registered: Callable[[], Collection[str]]


_GROUPS: dict[str, _Group] = {}
_LOADED: set[str] = set()
_ORIGINS: dict[tuple[str, str], str] = {}
_IMPORTED: set[str] = set()
"""Plugin modules imported (a module may serve several entry points)."""


def origin(kind: str, name: str) -> str:
    """Where the ``kind`` (a key of :data:`GROUPS`) registered as ``name`` came from."""
    return _ORIGINS.get((kind, name), BUILT_IN)


def _record(before: dict[str, set[str]], where: str, group: str = "", dist: str = "") -> bool:
    """Record ``where`` as the origin of every name registered since ``before`` (of
    another ``group`` than the entry point's: its distribution); whether there was any."""
    new = False
    for found, names in _names().items():
        for name in names - before.get(found, set()):
            _ORIGINS[(_GROUPS[found].kind, name)] = \
                where if not group or found == group else f"plugin {dist}"
            new = new or not group or found == group
    return new


def declare_group(kind: str, registered: Callable[[], Collection[str]]) -> None:
    """Say how to list the registered names of ``kind`` (a registry calls this)."""
    _GROUPS[GROUPS[kind]] = _Group(kind, registered)


def _names() -> dict[str, set[str]]:
    return {group: set(g.registered()) for group, g in _GROUPS.items()}


def _why(exc: BaseException) -> str:
    if isinstance(exc, ProblemError):
        return "; ".join(f"{p.path}: got {p.value!r}, expected {p.expected}" for p in exc.problems)
    return f"{type(exc).__name__}: {exc}"


@functools.cache
def _entry_points() -> Any:  # EntryPoints (SelectableGroups before Python 3.12)
    """Every installed entry point, read once (one scan of the installed distributions)."""
    return importlib.metadata.entry_points()


def load_group(group: str) -> None:
    """Import every entry point of ``group`` (once per process)."""
    if group in _LOADED:
        return
    _LOADED.add(group)
    kind = next(k for k, g in GROUPS.items() if g == group)
    for ep in _entry_points().select(group=group):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "?"
        where = f"entry point {group}:{ep.name}"
        before, seen = _names(), ep.module in _IMPORTED  # one module, several groups
        try:
            ep.load()
            _IMPORTED.add(ep.module)
        except Exception as exc:  # noqa: BLE001 - whatever a plugin raises is named
            _LOADED.discard(group)
            raise PluginError([Problem(where, ep.value, f"a module of {dist} that registers "
                                       f"a {kind} ({_why(exc)})")]) from None
        if not _record(before, f"plugin {dist} ({where})", group, dist) and not seen:
            _LOADED.discard(group)
            raise PluginError([Problem(where, ep.value, f"a module of {dist} that registers "
                                       f"a {kind} on import ({HOW[kind]}): it registered none")])


def load_installed() -> None:
    """Every installed plugin of every group."""
    for group in GROUPS.values():
        load_group(group)


def import_plugin(module: str, where: str) -> None:
    """Import the plugin module ``module`` named at ``where`` (``plugins[0]``)."""
    before = _names()
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - whatever a plugin raises is named
        raise PluginError([Problem(where, module, "an importable module that registers a "
                                   f"space, searcher, stopping rule or task ({_why(exc)})")]) \
            from None
    if not _record(before, f"plugins: {module}") and module not in _IMPORTED:
        raise PluginError([Problem(where, module, "a module that registers a space, searcher, "
                                   "stopping rule or task on import: it registered none")])
    _IMPORTED.add(module)


def _identity(thing: object) -> tuple[str, str]:
    return (getattr(thing, "__module__", ""), getattr(thing, "__qualname__", repr(thing)))


def claim(kind: str, name: str, new: object, taken: dict[str, object] | object,
          contract: list[str]) -> None:
    """Refuse to register ``new`` as the ``kind`` named ``name`` when another holds that
    name (``taken``: the registry) or ``contract`` lists what it lacks; a plugin being
    loaded gets this as its problem."""
    problems = [Problem(f"{kind} {name!r}", _identity(new)[1], expected) for expected in contract]
    held = taken.get(name) if isinstance(taken, dict) else None
    if held is not None and _identity(held) != _identity(new):
        problems.append(Problem(f"{kind} {name!r}", _identity(new)[1], f"a name no other {kind} "
                                f"has ({name!r} is {_identity(held)[1]}, {origin(kind, name)})"))
    if problems:
        raise PluginError(problems)
