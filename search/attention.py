"""Attention probabilities of real models, as numpy arrays for
``analysis.attention_distance`` (Press et al. 2020, Table 7).

This lives in ``search`` (which may use ``models``), not in ``analysis`` (which depends
only on ``spaces``): analysis computes distances from arrays; this module produces the
arrays, from a model in memory or from a trial checkpoint logged to MLflow
(``tracking.log_checkpoints: true``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["capture", "tiny_model_attention", "model_from_run", "run_attention"]


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


def model_from_run(run_id: str, *, tracking_uri: str, dst: str | None = None) -> Any:
    """The trained ``OrderedLM`` of a finished trial, from its logged checkpoint artifact."""
    import json
    import tempfile
    from pathlib import Path

    from mlflow.tracking import MlflowClient

    from sublayer_search.models.checkpoint import load_checkpoint
    from sublayer_search.models.config import ModelConfig
    from sublayer_search.models.lm import OrderedLM

    client = MlflowClient(tracking_uri=tracking_uri)
    names = {a.path for a in client.list_artifacts(run_id, "checkpoint")}
    if "checkpoint/model.json" not in names:
        raise ValueError(f"run {run_id}: got no checkpoint artifact, expected one logged with "
                         "tracking.log_checkpoints: true (checkpoint/model.json and state.pt)")
    folder = Path(client.download_artifacts(run_id, "checkpoint", dst or tempfile.mkdtemp()))
    cfg = ModelConfig.from_dict(json.loads((folder / "model.json").read_text()))
    model = OrderedLM(cfg)
    model.load_state_dict(load_checkpoint(folder)["model"])
    return model


def run_attention(run_id: str, *, tracking_uri: str, idx: Any) -> list[np.ndarray]:
    """Attention of a logged trial's trained model on token ids ``idx`` (B, T)."""
    return capture(model_from_run(run_id, tracking_uri=tracking_uri), idx)
