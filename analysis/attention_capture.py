"""Attention probabilities from real models, as numpy arrays for ``attention_distance``.

The only analysis module that touches torch and ``models``; both are imported inside
the functions so that ``import analysis`` stays torch-free.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["capture", "tiny_model_attention"]


def capture(model: Any, idx: Any) -> list[np.ndarray]:
    """Run ``model`` (an ``models.lm.OrderedLM``) on token ids ``idx`` (B, T) in eval mode
    and return one (B, H, T, T) probability array per ``s`` sublayer, in order."""
    import torch

    from models.lm import capture_attention

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

    from models.config import model_preset
    from models.lm import OrderedLM

    overrides: dict[str, Any] = {"order": order, "vocab_size": vocab_size}
    if context is not None:
        overrides["context"] = context
    cfg = model_preset(preset, **overrides)
    torch.manual_seed(seed)
    model = OrderedLM(cfg)
    generator = torch.Generator().manual_seed(data_seed)
    idx = torch.randint(vocab_size, (batch, cfg.context), generator=generator)
    return capture(model, idx)
