"""Strict scalars: a number in an experiment file must be written as a number, a
true/false setting as true or false, and a count must be one that can finish.

pydantic (and the config dataclasses it validates) would turn ``steps: "100"`` into 100,
``steps: true`` into 1 and ``download: 'yes'`` into True. :func:`strict_scalars` finds
such values before validation, reports each as a problem and drops it, so every value is
reported once: what pydantic cannot convert (``lr: fast``) is left to pydantic's own
message. Integers beyond :data:`MAX_COUNT` (:data:`MAX_INT` for the rest) are refused
the same way: ``steps: 1e30`` is a valid number that no sweep can run (and that would
overflow the counters it reaches).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Union

import pydantic

from sublayer_search.search.core.problems import Problem

__all__ = ["COUNT", "Count", "strict_scalars", "magnitude_problems", "MAX_COUNT", "MAX_INT",
           "OWN_CHECKS"]

OWN_CHECKS = "own-checks"
"""``Annotated`` mark of a section its own reader checks whole (the task's sections,
``search.supernet``): :func:`strict_scalars` leaves it to that reader."""

MAX_COUNT = 10**9
"""The largest step, batch or sample count a file may ask for."""
COUNT = "count"
"""``Annotated`` mark of a count in a section's own settings (``Count``): at most
:data:`MAX_COUNT`. Declared beside the setting (a searcher's ``population``, a stopping
rule's ``grace_period``), never listed here by name."""
Count = Annotated[int, COUNT]
"""An integer count (mark its bounds with ``Field``)."""
COUNTS = frozenset({"steps", "warmup_steps", "eval_every", "eval_batches", "eval_batch_size",
                    "batch_size", "grad_accum", "log_every", "max_train_pairs"})
"""The counts of the models' configs (dataclasses of :mod:`sublayer_search.models`, which
carry no marks), by name."""
MAX_INT = 2**53
"""The largest integer elsewhere (exact as a float, as MLflow stores it; seeds are below)."""
MAX_SEED = 2**32 - 1
"""numpy's seeds are 32-bit."""


def _members(annotation: Any) -> list[Any]:
    """The types a (possibly optional, annotated or union) annotation admits."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _marked(annotation: Any, mark: object) -> bool:
    """Whether ``mark`` is among the ``Annotated`` metadata of ``annotation`` or its members."""
    if typing.get_origin(annotation) is Annotated:
        inner, *marks = typing.get_args(annotation)
        return mark in marks or _marked(inner, mark)
    return typing.get_origin(annotation) in (Union, types.UnionType) and any(
        _marked(arg, mark) for arg in typing.get_args(annotation))


def _numeric_word(annotation: Any) -> str | None:
    """"an integer" / "a number" when the field takes numbers but no strings or booleans."""
    members = _members(annotation)
    if any(m in (str, bool, Any) or typing.get_origin(m) is typing.Literal for m in members):
        return None
    if float in members:
        return "a number"
    if int in members:
        return "an integer"
    return None


def _bool_word(annotation: Any) -> tuple[Any, ...] | None:
    """The literal strings a true/false field also takes, when it takes no other strings."""
    members = _members(annotation)
    if bool not in members or any(m in (str, Any) for m in members):
        return None
    return tuple(a for m in members if typing.get_origin(m) is typing.Literal
                 for a in typing.get_args(m))


def _limit(key: str, sizes: bool, count: bool = False) -> tuple[int, str]:
    if (count or key in COUNTS) and not sizes:
        return MAX_COUNT, f"{MAX_COUNT:,} (a count this large never finishes)"
    if key == "seed" or key.endswith("seeds"):
        return MAX_SEED, f"{MAX_SEED:,} (seeds are 32-bit)"
    return MAX_INT, "2**53"


def magnitude_problems(value: object, path: str, key: str = "", *, sizes: bool = False,
                       word: str = "an integer", count: bool = False) -> list[Problem]:
    """A problem for each integer in ``value`` (nested too) beyond its limit: counts
    (:data:`COUNTS`, or ``count``: a setting marked :data:`COUNT`; unless ``sizes``: a model section, whose config bounds its widths
    itself) :data:`MAX_COUNT`, seeds 32 bits, the rest :data:`MAX_INT`."""
    if isinstance(value, dict):
        return [p for k, v in value.items()
                for p in magnitude_problems(v, f"{path}.{k}", str(k), sizes=sizes)]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value)
                for p in magnitude_problems(v, f"{path}[{i}]", key, sizes=sizes, word=word)]
    if isinstance(value, int) and not isinstance(value, bool):
        limit, words = _limit(key, sizes, count)
        if abs(value) > limit:
            return [Problem(path, value, f"{word} of at most {words}")]
    return []


def _nested(annotation: Any, value: dict[Any, Any]) -> type | None:
    """The section type ``value`` is validated into: of a union of sections chosen by a
    literal key (``scheduler: {type: asha}``), the member that key picks."""
    sections = [m for m in _members(annotation) if isinstance(m, type) and (
        dataclasses.is_dataclass(m) or issubclass(m, pydantic.BaseModel))]
    return next((m for m in sections if _picked(m, value)), sections[0] if sections else None)


def _picked(section: type, value: dict[Any, Any]) -> bool:
    """Whether ``value`` fits every literal key of a pydantic ``section`` (its default
    where the key is left out)."""
    if not issubclass(section, pydantic.BaseModel):
        return True
    for key, f in section.model_fields.items():
        if typing.get_origin(f.annotation) is typing.Literal:
            given = value.get(key, f.default)
            if given not in typing.get_args(f.annotation):
                return False
    return True


def _fields(cls: type) -> dict[str, Any]:
    if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel):  # own checks: left alone
        return {name: Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
                for name, f in cls.model_fields.items() if OWN_CHECKS not in f.metadata}
    if dataclasses.is_dataclass(cls):
        return typing.get_type_hints(cls, include_extras=True)
    return {}


_BOOL_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "1", "0"})


def _coercible(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def strict_scalars(cls: type, raw: object, prefix: str = "") -> tuple[Any, list[Problem]]:
    """(``raw`` without its strings-or-booleans-for-numbers, a problem for each of them).

    ``cls`` is the pydantic model or config dataclass ``raw`` will be validated into;
    nested sections are checked too.
    """
    if not isinstance(raw, dict):
        return raw, []
    fields = _fields(cls)
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in raw.items():
        annotation = fields.get(key) if isinstance(key, str) else None
        path = f"{prefix}.{key}" if prefix else str(key)
        if annotation is None:
            out[key] = value
            continue
        word = _numeric_word(annotation)
        if word is not None and (isinstance(value, bool)
                                 or (isinstance(value, str) and _coercible(value))):
            kind = "true/false" if isinstance(value, bool) else "a string"
            problems.append(Problem(path, value, f"{word}, not {kind} (write it without quotes)"
                                    if kind == "a string" else f"{word}, not {kind}"))
            continue
        count = _marked(annotation, COUNT)
        if word is not None and (too_big := magnitude_problems(value, path, str(key), word=word,
                                                               count=count)):
            problems += too_big
            continue
        literals = _bool_word(annotation)
        if literals is not None and ((isinstance(value, str) and value not in literals)
                                     or (isinstance(value, int | float)
                                         and not isinstance(value, bool))):
            kind = "a string" if isinstance(value, str) else "a number"
            others = "".join(f" or {a!r}" for a in literals)
            unquote = isinstance(value, str) and value.lower() in _BOOL_WORDS
            problems.append(Problem(path, value, f"true or false{others}, not {kind}"
                                    + (" (write it without quotes)" if unquote else "")))
            continue
        nested = _nested(annotation, value) if isinstance(value, dict) else None
        if nested is not None and isinstance(value, dict):
            value, more = strict_scalars(nested, value, path)
            problems += more
        out[key] = value
    return out, problems
