"""Attention probabilities of real models, as numpy arrays for
``analysis.attention_distances`` (Press et al. 2020, Table 7).

This lives in ``search`` (which may use ``models``), not in ``analysis`` (which depends
only on ``spaces``): analysis computes distances from arrays; this module produces the
arrays, from a model in memory or from a trial checkpoint logged to MLflow
(``tracking.log_checkpoints: true``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["capture", "tiny_model_attention", "model_from_run", "run_attention",
           "sweep_attention"]


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


def _tokens(params: dict[str, str], vocab: int, batch: int, context: int) -> tuple[Any, str]:
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


def sweep_attention(experiment: str, *, tracking_uri: str, per_group: int = 3,
                    batch: int = 2, context: int | None = None) -> Any:
    """Table 7 of a sweep (Press et al. 2020): attention distance between trained
    baseline seeds and trained sandwich models, from checkpoints logged with
    ``tracking.log_checkpoints: true``. At most ``per_group`` models of each group; an
    ``AttentionStudy`` with only a note when there is nothing to compare."""
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis import runs
    from sublayer_search.analysis.attention_distances import distance_table, group_distances
    from sublayer_search.analysis.report_attention import AttentionStudy

    frame = runs.load(experiment, tracking_uri)
    done = frame[frame["status"] == "finished"]
    client = MlflowClient(tracking_uri=tracking_uri)
    logged = [r for r in done.itertuples()
              if any(a.path == "checkpoint/model.json"
                     for a in client.list_artifacts(str(r.run_id), "checkpoint"))]
    groups = {"baseline": [r for r in logged if r.baseline],
              "sandwich": [r for r in logged if not r.baseline and r.family == "sandwich"
                           and (r.k or 0) > 0]}
    if not logged:
        return AttentionStudy(note="Not computed: no finished trial of this sweep logged a "
                                   "checkpoint (set tracking.log_checkpoints: true).")
    if sum(len(g) for g in groups.values()) < 2:
        return AttentionStudy(note="Not computed: Table 7 compares trained baseline seeds and "
                                   "sandwich models; this sweep logged checkpoints of "
                                   f"{len(groups['baseline'])} baseline and "
                                   f"{len(groups['sandwich'])} sandwich trial(s).")
    chosen = {name: rows[:per_group] for name, rows in groups.items()}
    models = {str(r.name): model_from_run(str(r.run_id), tracking_uri=tracking_uri)
              for rows in chosen.values() for r in rows}
    first = next(iter(models.values()))
    ctx = min(context or first.cfg.context, first.cfg.context)
    params = client.get_run(str(next(r for rows in chosen.values() for r in rows).run_id)).data.params
    idx, source = _tokens(params, first.cfg.vocab_size, batch, ctx)
    arrays = {name: capture(model, idx) for name, model in models.items()}
    table = distance_table(arrays)
    labels = {str(r.name): name for name, rows in chosen.items() for r in rows}
    summary = group_distances(table, labels)
    orders = ", ".join(sorted({str(r.order) for r in chosen["sandwich"]})) or "none"
    return AttentionStudy(
        distances=table, groups=summary,
        note=(f"Distance between the attention of trained models (Hungarian matching of heads "
              f"by earth mover's distance, averaged over tokens and s-sublayers) on {source}: "
              f"{len(chosen['baseline'])} baseline seed(s) and {len(chosen['sandwich'])} "
              f"sandwich model(s) ({orders}); sd over pairs."))
