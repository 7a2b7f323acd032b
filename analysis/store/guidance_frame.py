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
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.papers.crossformer_paper import BLOCK_LABELS, guidance_label

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

GUIDANCE_TAG = "sublayer.guidance"
PARAM = "model.guidance."
"""Prefix of the guidance params of a trial run (``model.guidance.mode``...)."""
GUIDANCE_METRIC = "guidance_loss"
MODES = ("none", "soft", "hard")
NONE = "none"
GUIDANCE_COLUMNS = (
    "guidance",
    "guidance_mode",
    "guidance_blocks",
    "guidance_alpha",
    "guidance_pairing",
)
_BLOCK = re.compile(r"[A-Za-z_]+")


def _blocks(text: str | None, where: str) -> str:
    """``"key_query+ffn"``, ``"['key_query', 'ffn']"`` or ``"key_query,ffn"`` ->
    ``"key_query+ffn"``; unknown block names are refused."""
    names = _BLOCK.findall(text or "")
    unknown = [n for n in names if n not in BLOCK_LABELS]
    if unknown:
        raise AnalysisError(
            f"{where}: param {PARAM}blocks = {text!r} names unknown block(s) "
            f"{unknown}; expected {', '.join(BLOCK_LABELS)}"
        )
    return "+".join(names)


def guidance_fields(
    params: Mapping[str, str],
    tags: Mapping[str, str],
    metrics: Mapping[str, float],
    *,
    run_id: str = "?",
) -> dict[str, Any]:
    """The guidance columns of one trial run; empty when the run logged no guidance."""
    mode_text = params.get(f"{PARAM}mode")
    tag = tags.get(GUIDANCE_TAG)
    if mode_text is None and tag is None:
        return {}
    where = f"run {run_id}"
    mode = (mode_text or NONE).strip().lower()
    if mode not in MODES:
        raise AnalysisError(
            f"{where}: param {PARAM}mode = {mode_text!r}; expected {', '.join(MODES)}"
        )
    blocks = "" if mode == NONE else _blocks(params.get(f"{PARAM}blocks"), where)
    if mode != NONE and not blocks:
        raise AnalysisError(f"{where}: {mode} guidance with no {PARAM}blocks")
    alpha = params.get(f"{PARAM}alpha")
    try:
        alpha_value = float(alpha) if alpha not in (None, "", "None") else math.nan
    except ValueError:
        raise AnalysisError(f"{where}: param {PARAM}alpha = {alpha!r} is not a number") from None
    pairing = params.get(f"{PARAM}pairing") or None
    fields: dict[str, Any] = {
        "guidance": (tag or "").strip() or guidance_label(mode, blocks, pairing or ""),
        "guidance_mode": mode,
        "guidance_blocks": blocks,
        "guidance_alpha": alpha_value,
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
