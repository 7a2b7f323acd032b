"""The one error type of the data layer."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """A corpus is misconfigured, missing, unreadable or corrupt.

    The message says what is wrong and, for missing files, which file to place where
    (and which setting or environment variable points there). It subclasses ValueError
    so the CLI maps it to exit status 2.
    """
