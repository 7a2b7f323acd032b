"""The experiment's sections whose type its task decides, read in the experiment's one pass.

:class:`~sublayer_search.search.plan.experiment.Experiment` validates its ``task`` first,
then hands ``model``, ``data`` and ``translation`` to that task (:func:`read_section`);
``search.supernet`` is read here too (:func:`read_supernet`), naming every unknown key
and every bad value. A section with problems is None: its problems go to the
validation's ``found`` list (:func:`~sublayer_search.search.plan.experiment.parse_experiment`
reports them with the rest of the file's), or without a context are raised.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import ValidationInfo
from pydantic_core import PydanticCustomError

from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.search.plan.problems import Problem, problems_from
from sublayer_search.search.tasks.base import Task
from sublayer_search.search.tasks.registry import task_for
from sublayer_search.spaces.problems import ProblemError

__all__ = ["TASK_SECTIONS", "one_of", "read_section", "read_supernet", "task_of"]

AnyTask = Task[Any, Any, Any, Any]

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


def task_of(info: ValidationInfo) -> Task[Any, Any, Any, Any] | None:
    """The task reading this experiment's sections: one per validation (kept in its
    context), ``None`` when ``task:`` itself is wrong."""
    name = info.data.get("task")
    if name is None:
        return None
    context = info.context if isinstance(info.context, dict) else {}
    if "task" not in context:
        context["task"] = task_for(name)
    task: Task[Any, Any, Any, Any] = context["task"]
    return task


def _mapping(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PydanticCustomError("dict_type", "Input should be a valid dictionary")
    return raw


def _settled(value: Any, problems: list[Problem], info: ValidationInfo, at: str) -> Any:
    """``value``, or None with its problems (under ``at``) in the validation's ``found``."""
    if not problems:
        return value
    if not isinstance(info.context, dict):
        raise ProblemError(problems)
    info.context.setdefault("found", []).extend(p.under(at) for p in problems)
    return None


def read_section(raw: Any, info: ValidationInfo) -> Any:
    """Section ``info.field_name`` as the experiment's task reads it (``model``: a
    :class:`~.base.ModelSection`; ``data``: its data config; ``translation``: its own
    config or None). Without a task (``task:`` itself is wrong) the raw value stays."""
    task = task_of(info)
    if task is None:
        return raw
    raw, name = _mapping(raw), str(info.field_name)
    problems: list[Problem] = []
    readers = {"model": task.read_model, "data": task.data, "translation": task.extra}
    return _settled(readers[name](raw, problems), problems, info, name)


def read_supernet(raw: Any, info: ValidationInfo) -> SupernetConfig | None:
    """``search.supernet``: every unknown key, then every bad value, at once."""
    if raw is None or isinstance(raw, SupernetConfig):
        return raw
    raw = _mapping(raw)
    known = {f.name for f in dataclasses.fields(SupernetConfig)}
    problems = [Problem(str(key), raw[key], "one of the supernet settings: "
                        + ", ".join(sorted(known))) for key in raw if key not in known]
    config = None
    try:
        config = SupernetConfig.from_dict({k: v for k, v in raw.items() if k in known})
    except ValueError as exc:
        problems += problems_from(exc, "", value=raw)
    return _settled(config, problems, info, "search.supernet")
