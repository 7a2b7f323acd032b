"""Cross-layer guidance (Crossformer) in the trial frame: columns read from MLflow runs.

The contract with the trainer side: every guided sweep's trial runs log the params
``model.guidance.mode`` (none|soft|hard), ``model.guidance.blocks`` (``key_query+ffn``,
empty for none), ``model.guidance.alpha``, ``model.guidance.pairing`` and the tag
``sublayer.guidance`` (``none``, ``sg-kq``, ``hg-kq+ffn``). Runs without them (older
sweeps) are unguided. Frame columns (``GUIDANCE_COLUMNS``): ``guidance`` (the label),
``guidance_mode``, ``guidance_blocks``, ``guidance_alpha``, ``guidance_pairing`` and,
when a run logged it, ``guidance_loss`` (the soft-guidance regulariser's last value).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.papers.crossformer_paper import guidance_label
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.guidance_params import (
    GUIDANCE_MODES,
    GUIDANCE_PARAM,
    GUIDANCE_TAG,
    read_guidance,
)

__all__ = [
    "GUIDANCE_COLUMNS",
    "GUIDANCE_METRIC",
    "GUIDANCE_TAG",
    "MODES",
    "NONE",
    "PARAM",
    "guidance_fields",
    "has_guidance",
    "normalized",
    "unguided",
]

PARAM = GUIDANCE_PARAM
"""Prefix of the guidance params of a trial run (``model.guidance.mode``...)."""
GUIDANCE_METRIC = "guidance_loss"
MODES = GUIDANCE_MODES
NONE = "none"
GUIDANCE_COLUMNS = (
    "guidance",
    "guidance_mode",
    "guidance_blocks",
    "guidance_alpha",
    "guidance_pairing",
)


def guidance_fields(
    params: Mapping[str, str],
    tags: Mapping[str, str],
    metrics: Mapping[str, float],
    *,
    run_id: str = "?",
) -> dict[str, Any]:
    """The guidance columns of one trial run; empty when the run logged no guidance.
    The params are read by :func:`spaces.guidance_params.read_guidance`, the one way
    back of a guidance setting (search rebuilds its config from the same reader)."""
    tag = tags.get(GUIDANCE_TAG)
    try:
        setting = read_guidance(params)
    except SpaceError as exc:
        raise AnalysisError(
            f"run {run_id}: param {exc.field} = {exc.value!r}; expected {exc.expected}"
        ) from None
    if setting is None and tag is None:
        return {}
    setting = setting or {"mode": NONE, "blocks": ()}
    mode, blocks = setting["mode"], "+".join(setting["blocks"])
    pairing = "+".join(setting["pairing"]) if setting.get("pairing") else None
    fields: dict[str, Any] = {
        "guidance": (tag or "").strip() or guidance_label(mode, blocks, pairing or ""),
        "guidance_mode": mode,
        "guidance_blocks": blocks,
        "guidance_alpha": setting.get("alpha", math.nan),
        "guidance_pairing": pairing,
    }
    if GUIDANCE_METRIC in metrics:
        fields[GUIDANCE_METRIC] = float(metrics[GUIDANCE_METRIC])
    return fields


def normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every guidance column present: runs that logged none (older
    sweeps, or the rows of a sweep pooled with a guided one) are guidance ``none``."""
    out = frame.copy()
    if "guidance_mode" not in out.columns:
        out["guidance_mode"] = None
    mode = out["guidance_mode"].astype(object).where(out["guidance_mode"].notna(), NONE)
    out["guidance_mode"] = mode.astype(str)
    for column, empty in (("guidance_blocks", ""), ("guidance_pairing", None)):
        if column not in out.columns:
            out[column] = empty
        out[column] = out[column].astype(object).where(out[column].notna(), empty)
    out.loc[out["guidance_mode"] == NONE, "guidance_blocks"] = ""
    if "guidance_alpha" not in out.columns:
        out["guidance_alpha"] = math.nan
    out["guidance_alpha"] = pd.to_numeric(out["guidance_alpha"]).astype(float)
    labels = out["guidance"] if "guidance" in out.columns else pd.Series(None, index=out.index)
    out["guidance"] = [
        str(label) if isinstance(label, str) and label else guidance_label(m, b, p or "")
        for label, m, b, p in zip(
            labels,
            out["guidance_mode"],
            out["guidance_blocks"],
            out["guidance_pairing"],
            strict=True,
        )
    ]
    return out


def has_guidance(frame: pd.DataFrame) -> bool:
    """Whether any trial of the frame is guided (soft or hard)."""
    if "guidance_mode" not in frame.columns:
        return False
    return bool(frame["guidance_mode"].isin(["soft", "hard"]).any())


def unguided(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of unguided trials (all rows of a frame without guidance columns): the
    studies by order (sandwich curve) leave guided trials to the guidance study."""
    if "guidance_mode" not in frame.columns:
        return frame
    return frame[~frame["guidance_mode"].isin(["soft", "hard"])]
