"""One problem type for every bad input: where it is, what was there, what was expected.

A :class:`Problem` carries ``(path, value, expected)``; an error that reports bad input
(:class:`~sublayer_search.spaces.errors.SpaceError`, the model configs' ``ConfigError``,
``PriorError``, ``ExperimentError``) is a :class:`ProblemError` holding its problems, so a
caller that embeds a section in a larger file moves them under its own path with
:meth:`Problem.under` instead of asking an error for its attributes.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_VALUE", "Problem", "ProblemError", "short_repr"]

_REPR = reprlib.Repr()  # Python 3.11 takes no keyword arguments here
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 6, 8, 8, 8
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 80, 80, 40


def short_repr(value: Any) -> str:
    """``repr(value)``, bounded: a huge or deeply nested value (YAML anchors can expand a
    1 KB file into megabytes) is cut with ``...``."""
    text = _REPR.repr(value)
    return text if len(text) <= 300 else text[:297] + "..."


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


NO_VALUE: Any = _Missing()
"""A :class:`Problem`'s value when its ``expected`` is a complete phrase of its own."""


def _join(prefix: str, field: str) -> str:
    if not prefix:
        return field
    if field.startswith("["):
        return prefix + field
    # errors of nested configs already name their section ("model.d_model")
    head = prefix.split(".")[-1].split("[")[0]
    if field == head or field.startswith(head + ".") or field.startswith(head + "["):
        field = field[len(head):].lstrip(".")
        return f"{prefix}.{field}" if field and not field.startswith("[") else prefix + field
    return f"{prefix}.{field}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where (a dotted path, ``space.k[3]``), what was
    there, what was expected."""

    path: str
    value: Any
    expected: str

    def __str__(self) -> str:
        where = self.path or "<file>"
        if self.value is NO_VALUE:
            return f"{where}: {self.expected}"  # a complete phrase ("got …, expected …")
        return f"{where}: got {short_repr(self.value)}, expected {self.expected}"

    def under(self, prefix: str) -> Problem:
        """This problem inside section ``prefix`` (a path that already names the section,
        ``model.d_model`` under ``model``, is not repeated)."""
        return Problem(_join(prefix, self.path), self.value, self.expected)

    def plain(self) -> str:
        """``path: got repr(value), expected …`` with the whole value (an error's text)."""
        return f"{self.path}: got {self.value!r}, expected {self.expected}"


class ProblemError(ValueError):
    """Bad input: one or more :class:`Problem` s (the CLI exits with status 2).

    ``field``, ``value`` and ``expected`` are the first problem's.
    """

    problems: tuple[Problem, ...] = ()

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems))

    @property
    def field(self) -> str:
        return self.problems[0].path

    @property
    def value(self) -> Any:
        return self.problems[0].value

    @property
    def expected(self) -> str:
        return self.problems[0].expected

    def under(self, prefix: str) -> list[Problem]:
        """Every problem inside section ``prefix``."""
        return [p.under(prefix) for p in self.problems]
