"""Bad input to what reads recorded sweeps (``sublayer replay``, the calibration of
comeback stopping): one error type naming the field, the value and what was expected."""

from __future__ import annotations

__all__ = ["ReplayError"]


class ReplayError(ValueError):
    """Bad replay input: names the field, the value and what was expected."""

    def __init__(self, field_name: str, value: object, expected: str) -> None:
        super().__init__(f"{field_name}: got {value!r}, expected {expected}")
