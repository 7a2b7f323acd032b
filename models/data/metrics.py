"""Metrics from a mean next-token loss in nats."""

from __future__ import annotations

import math

from sublayer_search.models.data.registry import LEVELS

__all__ = ["metrics_from_loss"]


def metrics_from_loss(loss: float, level: str) -> dict[str, float]:
    """``{"loss", "ppl"}`` for word level; ``{"loss", "bpc", "ppl"}`` for char/byte.

    ppl = exp(loss) (inf when it overflows); bpc = loss / ln 2 (bits per character or
    per byte).
    """
    if level not in LEVELS:
        from sublayer_search.models.data.errors import DataError

        raise DataError(f"data.level: got {level!r}, expected one of {', '.join(LEVELS)}")
    loss = float(loss)
    try:
        ppl = math.exp(loss)
    except OverflowError:
        ppl = math.inf
    if level == "word":
        return {"loss": loss, "ppl": ppl}
    return {"loss": loss, "bpc": loss / math.log(2), "ppl": ppl}
