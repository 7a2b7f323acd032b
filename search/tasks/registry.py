"""Tasks by name: ``register(cls)`` and ``task_for(name)``."""

from __future__ import annotations

from typing import Any

from sublayer_search.search.core.plugins import claim, declare_group
from sublayer_search.search.tasks.base import Task

__all__ = ["register", "task_class", "task_for", "task_names", "unregister"]

_TASKS: dict[str, type[Task[Any, Any, Any, Any]]] = {}


def register(cls: type[Task[Any, Any, Any, Any]]) -> type[Task[Any, Any, Any, Any]]:
    """Make ``cls`` the task of experiments with ``task: <cls.name>`` (a class decorator)."""
    name = getattr(cls, "name", "")
    contract = [] if isinstance(cls, type) and issubclass(cls, Task) else ["a subclass of Task"]
    if not name:
        contract.append("a non-empty class attribute `name` (the experiment's task:)")
    claim("task", str(name), cls, dict(_TASKS), contract)
    _TASKS[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    _TASKS.pop(name, None)


def task_names() -> tuple[str, ...]:
    return tuple(_TASKS)


def task_class(name: str) -> type[Task[Any, Any, Any, Any]]:
    """The task class registered as ``name`` (KeyError if none is): its declarations."""
    return _TASKS[name]


def task_for(name: str) -> Task[Any, Any, Any, Any]:
    """A new instance of the task registered as ``name`` (KeyError if none is)."""
    return _TASKS[name]()


declare_group("task", lambda: tuple(_TASKS))
