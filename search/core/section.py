"""The base of every section of an experiment file: unknown keys are refused (a misspelt
setting is never silently ignored) and a validated section is frozen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from sublayer_search.search.core.problems import Problem

__all__ = ["Refused", "Strict", "refused_or"]

T = TypeVar("T")


class Strict(BaseModel):
    """A section of an experiment file: no unknown keys, frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Refused:
    """What a section's own reader returns for a section with problems: the problems
    themselves, carried in the value (no side channel). The experiment's parser reports
    them with the rest of the file's and leaves that section None, so the others are
    still checked together (with what it ``kept``)."""

    problems: tuple[Problem, ...]
    kept: object = None
    """What still stands of the section, for the file's other checks (None: nothing)."""


def refused_or(value: T, problems: list[Problem], kept: object = None) -> T | Refused:
    """``value``, or :class:`Refused` (keeping ``kept``) when ``problems`` holds any."""
    return Refused(tuple(problems), kept) if problems else value
