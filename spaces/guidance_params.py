"""A run's cross-layer guidance read back from its MLflow params: the one way back.

After planning a guidance setting has one form, ``models.guidance.config.GuidanceConfig``
(a trial's :class:`Variant` holds it); its label (``hg-kq+ffn``), a task's identity
(``decoder+hg-kq``) and the flat params a trial run records are derived from it. The
params (``GuidanceConfig.flat``) are what comes back from MLflow::

    model.guidance.mode     none | soft | hard
    model.guidance.blocks   key_query+ffn   (empty when unguided)
    model.guidance.alpha    0.01            (empty when unguided)
    model.guidance.pairing  key_query+w2_w1 (empty when unguided)
    model.guidance.cross_attention, model.guidance.norm   (only where not the default)

:func:`read_guidance` reads them, for search (``GuidanceConfig.from_params``: reuse and
warm start rebuild a run's variant) and for analysis (the trial frame's guidance columns).
It lives here, in pure Python, because analysis may not import ``models``. The
``sublayer.guidance`` tag carries the label, for display only: nothing reads a setting
back from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sublayer_search.spaces.cost import GUIDED_BLOCKS
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.records import Tag

__all__ = ["GUIDANCE_MODES", "GUIDANCE_PARAM", "GUIDANCE_TAG", "read_guidance"]

GUIDANCE_PARAM = "model.guidance."
"""Prefix of a trial run's guidance params."""
GUIDANCE_TAG = Tag.GUIDANCE
"""MLflow tag of a trial with its guidance label (``none``, ``sg-kq``, ``hg-kq+ffn``)."""
GUIDANCE_MODES = ("none", "soft", "hard")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # key_query+ffn, also older runs' "['key_query', 'ffn']"


def _names(text: str) -> tuple[str, ...]:
    return tuple(_NAME.findall(text))


def read_guidance(params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The guidance setting a run's ``params`` record, as ``GuidanceConfig``'s fields:
    ``mode`` and ``blocks`` always; ``alpha``, ``pairing``, ``cross_attention`` and
    ``norm`` where recorded. ``None``: the run recorded no guidance (sweeps before it
    was an axis: unguided). A value that names no setting raises :class:`SpaceError`
    (field, value, expected)."""
    key = GUIDANCE_PARAM
    mode_text = params.get(key + "mode")
    if mode_text is None:
        return None
    mode = str(mode_text).strip().lower() or "none"
    if mode not in GUIDANCE_MODES:
        raise SpaceError(key + "mode", mode_text, ", ".join(GUIDANCE_MODES))
    out: dict[str, Any] = {"mode": mode, "blocks": ()}
    if mode != "none":
        text = params.get(key + "blocks")
        blocks = _names(str(text or ""))
        unknown = [b for b in blocks if b not in GUIDED_BLOCKS]
        if unknown or not blocks:
            why = f"names unknown block(s) {unknown}" if unknown else f"{mode} guidance needs one"
            raise SpaceError(key + "blocks", text,
                             f"{', '.join(GUIDED_BLOCKS)} joined by '+' ({why})")
        out["blocks"] = blocks
    alpha = params.get(key + "alpha")
    if alpha not in (None, "", "None"):
        try:
            out["alpha"] = float(alpha)
        except (TypeError, ValueError):
            raise SpaceError(key + "alpha", alpha, "a number") from None
    if params.get(key + "pairing"):
        out["pairing"] = _names(str(params[key + "pairing"]))
    if str(params.get(key + "cross_attention", "")).lower() == "true":
        out["cross_attention"] = True  # recorded only where set (older runs: absent)
    if params.get(key + "norm"):
        out["norm"] = str(params[key + "norm"])
    return out
