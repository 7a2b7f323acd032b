"""The config hash: a trial's content key beside its order and seed (reuse, warm start)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["ADDED_DEFAULTS", "ADDED_UNSET", "ONLY_WITH", "config_hash"]

ADDED_UNSET = ("translation.max_tokens",)
"""Settings added after runs were recorded: unset (None), they leave the hash as it was, so
reuse and warm start still find those runs."""


ADDED_DEFAULTS: dict[str, Any] = {"translation.bleu_tokenize": "13a",
                                  "translation.test_bleu": False}
"""Settings added later whose default is what runs recorded before did: at that default
they leave the hash as it was."""
ONLY_WITH = {"translation.batch_multiple": "translation.max_tokens"}
"""Settings that change nothing unless another is set: hashed only then, so runs recorded
before they were added keep their hash where they mean nothing."""


def config_hash(settings: dict[str, Any]) -> str:
    """Short stable hash of every setting except the order and the seed (and
    ``train.parallel``: DDP and FSDP train the same numbers, as any worker count does; and
    ``train.checkpoint_every``: how often a trial saves changes none of its numbers)."""
    keep = {k: v for k, v in settings.items()
            if k not in ("model.order", "train.seed", "train.parallel", "train.checkpoint_every")
            and not (k in ADDED_UNSET and v is None)
            and not (k in ADDED_DEFAULTS and v == ADDED_DEFAULTS[k])
            and not (k in ONLY_WITH and settings.get(ONLY_WITH[k]) is None)}
    blob = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
