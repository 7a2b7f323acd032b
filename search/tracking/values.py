"""How values are written to MLflow: batches, parameter strings, model configs as JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = ["BATCH", "chunks", "model_dict", "param_value"]

BATCH = 100
"""MLflow accepts at most 100 params / 1000 metrics per ``log_batch`` call."""


def chunks(items: list[Any], size: int = BATCH) -> Iterable[list[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


def param_value(value: object) -> str:
    """A parameter's MLflow value: ``None`` as empty, cut to MLflow's 6000 characters."""
    text = "" if value is None else str(value)
    return text[:6000]


def model_dict(model: object) -> dict[str, Any]:
    """The model config as plain JSON (rebuilds the model: ``search.tracking.attention``)."""
    to_dict = getattr(model, "to_dict", None)
    if to_dict is not None:
        return dict(to_dict())
    if not dataclasses.is_dataclass(model) or isinstance(model, type):
        raise TypeError(f"a model config (a dataclass), got {type(model).__name__}")
    return dataclasses.asdict(model)
