"""Errors raised by model, train and data configurations."""

from __future__ import annotations

import math
from typing import Any

from sublayer_search.spaces.problems import Problem, ProblemError

__all__ = ["Checks", "ConfigError", "ConfigErrors", "check", "is_int", "is_number", "is_positive_int"]


class ConfigError(ProblemError):
    """An invalid configuration value.

    ``str(err)`` reads ``"model.d_model: got 30, expected a multiple of n_heads (4)"``.
    ``field`` is the dotted path of the setting, ``value`` what was given and ``expected``
    a short phrase describing what is accepted.
    """

    def __init__(self, field: str, value: Any, expected: str) -> None:
        super().__init__([Problem(field, value, expected)])
        self.args = (self.problems[0].plain(),)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (Ray workers)
        return (type(self), (self.field, self.value, self.expected))


class ConfigErrors(ConfigError):
    """Several invalid values of one configuration, reported together.

    A :class:`ConfigError` itself (``field``/``value``/``expected`` of the first one), so
    code that expects one error still works; ``errors`` holds them all.
    """

    def __init__(self, errors: list[ConfigError]) -> None:
        ProblemError.__init__(self, [p for e in errors for p in e.problems])
        self.errors = list(errors)
        self.args = ("; ".join(str(e) for e in errors),)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errors,))


class Checks:
    """Collect every failed check of one configuration, then raise them together."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def __call__(self, cond: bool, field: str, value: Any, expected: str) -> None:
        if not cond:
            self.errors.append(ConfigError(field, value, expected))

    def raise_any(self) -> None:
        """Raise the one error, or :class:`ConfigErrors` for several; nothing if all held."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


def check(cond: bool, field: str, value: Any, expected: str) -> None:
    """Raise :class:`ConfigError` for ``field`` unless ``cond`` holds."""
    if not cond:
        raise ConfigError(field, value, expected)


def is_int(value: Any) -> bool:
    """An integer, and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_positive_int(value: Any) -> bool:
    return is_int(value) and value > 0


def is_number(value: Any, *, finite: bool = False) -> bool:
    """An int or float, not a bool (and finite when asked)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return ok and (not finite or math.isfinite(value))
