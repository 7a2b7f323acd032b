"""Attention probabilities of real models, as numpy arrays (torch only).

For ``analysis.studies.attention_distances`` (Press et al. 2020, Table 7), which computes
distances from arrays and never imports torch. The MLflow side (finding a sweep's logged
checkpoints) is :mod:`search.tracking.attention`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor as Tensor  # token ids, for callers' annotations

__all__ = ["capture", "load_lm", "tiny_model_attention", "validation_tokens"]


def capture(model: Any, idx: Any) -> list[np.ndarray]:
    """Run ``model`` (an ``models.lm.OrderedLM``) on token ids ``idx`` (B, T) in eval mode
    and return one (B, H, T, T) probability array per ``s`` sublayer, in order."""
    import torch

    from sublayer_search.models.lm import capture_attention

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), capture_attention(model) as probs:
            model(idx)
    finally:
        model.train(was_training)
    return [p.detach().float().cpu().numpy() for p in probs]


def tiny_model_attention(
    order: str,
    *,
    seed: int = 0,
    preset: str = "debug",
    vocab_size: int = 64,
    batch: int = 1,
    context: int | None = None,
    data_seed: int = 1234,
) -> list[np.ndarray]:
    """Attention of a freshly initialised model of ``preset`` with ``order`` (weights from
    ``seed``) on random tokens (from ``data_seed``, the same for every model)."""
    import torch

    from sublayer_search.models.config import model_preset
    from sublayer_search.models.lm import OrderedLM

    overrides: dict[str, Any] = {"order": order, "vocab_size": vocab_size}
    if context is not None:
        overrides["context"] = context
    cfg = model_preset(preset, **overrides)
    torch.manual_seed(seed)
    model = OrderedLM(cfg)
    generator = torch.Generator().manual_seed(data_seed)
    idx = torch.randint(vocab_size, (batch, cfg.context), generator=generator)
    return capture(model, idx)


def load_lm(folder: Path) -> Any:
    """The ``OrderedLM`` saved in a checkpoint folder (``model.json`` and ``state.pt``)."""
    from sublayer_search.models.checkpoint import load_checkpoint
    from sublayer_search.models.config import ModelConfig
    from sublayer_search.models.lm import OrderedLM

    cfg = ModelConfig.from_dict(json.loads((folder / "model.json").read_text()))
    model = OrderedLM(cfg)
    model.load_state_dict(load_checkpoint(folder)["model"])
    return model


def validation_tokens(params: dict[str, str], vocab: int, batch: int, context: int) -> tuple[Any, str]:
    """(B, T) validation tokens of the trial's corpus, else random ones (and which)."""
    import torch

    from sublayer_search.models.data import DataConfig, load_corpus

    try:
        corpus = load_corpus(DataConfig(name=params["data.name"]))
        ids = torch.as_tensor(corpus.valid[: batch * context].astype("int64"))
        if ids.numel() == batch * context and int(ids.max()) < vocab:
            return ids.view(batch, context), f"{batch}×{context} validation tokens of {corpus.name}"
    except (KeyError, ValueError, OSError):
        pass
    generator = torch.Generator().manual_seed(1234)
    return (torch.randint(vocab, (batch, context), generator=generator),
            f"{batch}×{context} random tokens (the corpus could not be read here)")
