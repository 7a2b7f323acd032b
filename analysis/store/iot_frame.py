"""The IOT view of a translation sweep's trial frame: subset ids, stacks, and the
reference every IOT study compares against.

The reference ("baseline") is the set of finished trials flagged ``baseline`` (family
``baseline``: the standard ``scf`` Transformer over several seeds); when there are none,
the trials of subset ``{1}`` (the plain Transformer) stand in, and the returned source
says so. Neither → AnalysisError.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    select_metric,
    usable,
    validate_trials,
)
from sublayer_search.spaces.generators.iot_subsets import DECODER_BLOCKS, ENCODER_BLOCKS
from sublayer_search.spaces.records import Tag

__all__ = [
    "BASELINE_TRIALS",
    "SUBSET_ONE",
    "bleu_metric",
    "iot_baseline",
    "iot_rows",
    "is_translation",
    "stack_blocks",
    "stack_of",
    "subset_id",
    "subset_ids",
    "subset_label",
]

BASELINE_TRIALS = "baseline trials"
SUBSET_ONE = "subset {1} trials"


def is_translation(frame: pd.DataFrame) -> bool:
    """True when the trials are a translation sweep (param ``task`` = translation, or a
    BLEU metric)."""
    if "task" in frame.columns and (frame["task"] == "translation").any():
        return True
    return any(isinstance(m, str) and "bleu" in m.lower() for m in frame["metric"])


def bleu_metric(frame: pd.DataFrame, metric: str | None) -> str:
    """The frame's metric (:func:`~analysis.store.frame.select_metric`); it must be a BLEU."""
    metric = select_metric(frame, metric)
    if "bleu" not in metric.lower():
        raise AnalysisError(
            f"the IOT studies need a BLEU metric (e.g. val_bleu); this frame's metric is "
            f"{metric!r}"
        )
    return metric


def subset_ids(frame: pd.DataFrame) -> pd.Series:
    """The canonical subset id of every row (None where the row has no subset)."""
    if "subset" not in frame.columns:
        return pd.Series([None] * len(frame), index=frame.index, dtype=object)
    return frame["subset"].map(subset_id)


def subset_id(value: object) -> str | None:
    """``"1,2,4,6"``, ``1246.0``, ``"{6,4,2,1}"`` -> ``"1246"``; None for a missing value."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    if text.endswith(".0"):  # a numeric id read back from CSV
        text = text[:-2]
    digits = re.sub(r"[^0-9]", "", text)
    if not digits:
        raise AnalysisError(f"subset {value!r} is not a subset id like '1246'")
    return "".join(sorted(digits))


def stack_blocks(stack: object) -> dict[int, str]:
    """Code -> block order of the encoder or (by default) decoder stack."""
    return ENCODER_BLOCKS if stack == "encoder" else DECODER_BLOCKS


def stack_of(rows: pd.DataFrame) -> pd.Series:
    """The stack (``encoder``/``decoder``) of every row; ``decoder`` when not given."""
    if "stack" in rows.columns:
        return rows["stack"].where(rows["stack"].notna(), "decoder")
    return pd.Series("decoder", index=rows.index, dtype=object)


def subset_label(subset: str) -> str:
    """The candidate name of an IOT subset: ``iot1246``."""
    return f"iot{subset}"


def iot_baseline(
    frame: pd.DataFrame, metric: str | None = None, *, column: str = "final"
) -> tuple[BaselineStats, str]:
    """The reference for the IOT studies and where it comes from (baseline trials, else
    the trials of subset {1}); AnalysisError when neither is there."""
    frame = validate_trials(frame)
    metric = bleu_metric(frame, metric)
    rows = usable(frame, metric, column=column)
    values = rows.loc[rows["baseline"], column].to_numpy(dtype=float)
    source = BASELINE_TRIALS
    if len(values) == 0:
        ids = subset_ids(rows)
        values = rows.loc[ids == "1", column].to_numpy(dtype=float)
        source = SUBSET_ONE
    if len(values) == 0:
        raise AnalysisError(
            f"no finished baseline trial for metric {metric!r} (tag {Tag.BASELINE}=true "
            "or family baseline) and no trial of subset {1}: the IOT studies compare "
            "against the standard Transformer"
        )
    return BaselineStats(metric=metric, values=tuple(float(v) for v in values),
                         lower_is_better=False), source


def iot_rows(frame: pd.DataFrame, metric: str, column: str) -> pd.DataFrame:
    """Usable non-baseline trials with a subset (canonical id in ``subset``)."""
    rows = usable(frame, metric, column=column)
    rows = rows[~rows["baseline"]].copy()
    rows["subset"] = subset_ids(rows)
    rows = rows[rows["subset"].notna()]
    if rows.empty:
        raise AnalysisError(
            f"no usable IOT trial (param subset) for metric {metric!r}; the IOT studies need "
            "a sweep over the iot_subsets space"
        )
    return rows
