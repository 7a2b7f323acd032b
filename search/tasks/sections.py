"""The experiment's sections whose type its task decides: ``model``, ``data`` and the
task's own (``translation``).

Each task's experiment type (:func:`~sublayer_search.search.plan.experiment.experiment_member`)
reads these sections with :func:`section_reader`: the section as the task's config, or
:class:`~sublayer_search.search.core.section.Refused` carrying every problem found in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import PydanticCustomError

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.core.section import refused_or
from sublayer_search.search.tasks.base import Task

__all__ = ["TASK_SECTIONS", "mapping", "one_of", "section_reader"]

TASK_SECTIONS = ("model", "data", "translation")
"""Experiment sections the task reads (the ``translation`` section: the task's own)."""


def one_of(value: str, names: tuple[str, ...]) -> str:
    """``value`` if it is one of ``names``, else pydantic's error for a literal."""
    if value not in names:
        quoted = [repr(n) for n in names]
        listed = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": listed})
    return value


def mapping(raw: object) -> dict[str, Any]:
    """``raw`` as a mapping, else pydantic's error for one."""
    if not isinstance(raw, dict):
        raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
    return raw


def section_reader(task: type[Task[Any, Any, Any, Any]],
                   name: str) -> Callable[[object], object]:
    """The validator of section ``name`` (one of :data:`TASK_SECTIONS`) for ``task``: a
    ``model`` section as a :class:`~.base.ModelSection`, ``data`` as its data config,
    ``translation`` as the task's own config (or None); a
    :class:`~sublayer_search.search.core.section.Refused` where it has problems."""

    def read(raw: object) -> object:
        section = mapping(raw)
        problems: list[Problem] = []
        reader = task()
        readers = {"model": reader.read_model, "data": reader.data, "translation": reader.extra}
        value = readers[name](section, problems)
        return refused_or(value, [p.under(name) for p in problems])

    read.__name__ = f"read_{name}"
    return read
