"""The one error type of the data layer."""

from __future__ import annotations

from typing import Any

__all__ = ["DataError", "setting_error"]


class DataError(ValueError):
    """A corpus is misconfigured, missing, unreadable or corrupt.

    The message says what is wrong and, for missing files, which file to place where
    (and which setting or environment variable points there). It subclasses ValueError
    so the CLI maps it to exit status 2.
    """


def setting_error(field: str, value: Any, expected: str) -> DataError:
    """``DataError("data.<field>: got <value!r>, expected <expected>")``."""
    return DataError(f"data.{field}: got {value!r}, expected {expected}")
