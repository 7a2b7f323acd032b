"""How values are written to MLflow: batches, model configs as JSON (a param's string:
``analysis.store.trial_record.param_value``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = ["BATCH", "chunks", "model_dict"]

BATCH = 100
"""MLflow accepts at most 100 params / 1000 metrics per ``log_batch`` call."""


def chunks(items: list[Any], size: int = BATCH) -> Iterable[list[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i:i + size]


def model_dict(model: object) -> dict[str, Any]:
    """The model config as plain JSON (rebuilds the model: ``search.tracking.attention``)."""
    to_dict = getattr(model, "to_dict", None)
    if to_dict is not None:
        return dict(to_dict())
    if not dataclasses.is_dataclass(model) or isinstance(model, type):
        raise TypeError(f"a model config (a dataclass), got {type(model).__name__}")
    return dataclasses.asdict(model)
