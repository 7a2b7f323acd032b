"""Errors raised by model, train and data configurations."""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """An invalid configuration value.

    ``str(err)`` reads ``"model.d_model: got 30, expected a multiple of n_heads (4)"``.
    ``field`` is the dotted path of the setting, ``value`` what was given and ``expected``
    a short phrase describing what is accepted.
    """

    def __init__(self, field: str, value: Any, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}: got {value!r}, expected {expected}")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (Ray workers)
        return (type(self), (self.field, self.value, self.expected))
