"""Argument checks shared by the space modules (each raises SpaceError naming the field)."""

from __future__ import annotations

from sublayer_search.spaces.errors import SpaceError

MAX_COUNT = 100_000
"""Most candidates one space may be asked for."""


def integer(field: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an int in ``low..high`` (bools are refused)."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, int):
        ok = ok and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        if low is not None and high is not None:
            expected = f"an integer in {low}..{high}"
        elif low == 1:
            expected = "a positive integer"
        elif low == 0:
            expected = "a non-negative integer"
        elif low is not None:
            expected = f"an integer >= {low}"
        else:
            expected = "an integer"
        raise SpaceError(field, value, expected)
    assert isinstance(value, int)
    return value


def count(value: object, field: str = "count") -> int:
    return integer(field, value, 1, MAX_COUNT)


def seed(value: object, field: str = "seed") -> int:
    return integer(field, value)
