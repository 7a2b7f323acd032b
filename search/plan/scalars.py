"""Strict scalars: a number in an experiment file must be written as a number.

pydantic (and the config dataclasses it validates) would turn ``steps: "100"`` into 100
and ``steps: true`` into 1. :func:`strict_scalars` finds such values before validation,
reports each as a problem and drops it, so every value is reported once: what pydantic
cannot convert (``lr: fast``) is left to pydantic's own message.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Union

import pydantic

from sublayer_search.search.plan.problems import Problem

__all__ = ["strict_scalars"]


def _members(annotation: Any) -> list[Any]:
    """The types a (possibly optional, annotated or union) annotation admits."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


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


def _nested(annotation: Any) -> type | None:
    for member in _members(annotation):
        if isinstance(member, type) and (dataclasses.is_dataclass(member)
                                         or issubclass(member, pydantic.BaseModel)):
            return member
    return None


def _fields(cls: type) -> dict[str, Any]:
    if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel):
        return {name: f.annotation for name, f in cls.model_fields.items()}
    if dataclasses.is_dataclass(cls):
        return typing.get_type_hints(cls, include_extras=True)
    return {}


def _coercible(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def strict_scalars(cls: type, raw: Any, prefix: str = "") -> tuple[Any, list[Problem]]:
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
        nested = _nested(annotation)
        if nested is not None and isinstance(value, dict):
            value, more = strict_scalars(nested, value, path)
            problems += more
        out[key] = value
    return out, problems
