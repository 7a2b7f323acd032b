"""Attention of a sweep's trained models, from checkpoints logged to MLflow
(``tracking.log_checkpoints: true``): the MLflow edge of Table 7 (Press et al. 2020).

The arrays come from :mod:`models.attention_capture` (torch); the distances from
``analysis.studies.attention_distances`` (which never imports torch).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sublayer_search.analysis.store.trial_record import CHECKPOINT_ARTIFACT, MODEL_ARTIFACT
from sublayer_search.models.attention_capture import capture, load_lm, validation_tokens
from sublayer_search.spaces.generators.sandwich import SANDWICH

if TYPE_CHECKING:
    import pandas as pd

    from sublayer_search.analysis.report.attention import AttentionStudy
    from sublayer_search.models.attention_capture import Tensor
    from sublayer_search.models.lm import OrderedLM

__all__ = ["model_from_run", "run_attention", "sweep_attention"]


def model_from_run(run_id: str, *, tracking_uri: str, dst: str | None = None) -> OrderedLM:
    """The trained ``OrderedLM`` of a finished trial, from its logged checkpoint artifact."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    names = {a.path for a in client.list_artifacts(run_id, CHECKPOINT_ARTIFACT)}
    if MODEL_ARTIFACT not in names:
        raise ValueError(f"run {run_id}: got no checkpoint artifact, expected one logged with "
                         "tracking.log_checkpoints: true (checkpoint/model.json and state.pt)")
    return load_lm(Path(client.download_artifacts(run_id, CHECKPOINT_ARTIFACT,
                                                  dst or tempfile.mkdtemp())))


def run_attention(run_id: str, *, tracking_uri: str, idx: Tensor) -> list[np.ndarray]:
    """Attention of a logged trial's trained model on token ids ``idx`` (B, T)."""
    return capture(model_from_run(run_id, tracking_uri=tracking_uri), idx)


def sweep_attention(experiment: str, *, tracking_uri: str, per_group: int = 3,
                    batch: int = 2, context: int | None = None,
                    trials: pd.DataFrame | None = None) -> AttentionStudy:
    """Table 7 of a sweep (Press et al. 2020): attention distance between trained
    baseline seeds and trained sandwich models, from checkpoints logged with
    ``tracking.log_checkpoints: true``. At most ``per_group`` models of each group; an
    ``AttentionStudy`` with only a note when there is nothing to compare. ``trials``: the
    sweep's trials frame when the caller has read it already.

    Only the runs that could enter a group are asked for their artifacts (one request
    each), and only until the group is full: not every trial of a sweep of thousands."""
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.report.attention import AttentionStudy
    from sublayer_search.analysis.store import runs
    from sublayer_search.analysis.studies.attention_distances import distance_table, group_distances

    frame = runs.load(experiment, tracking_uri) if trials is None else trials
    done = list(frame[frame["status"] == "finished"].itertuples())
    client = MlflowClient(tracking_uri=tracking_uri)
    wanted = {"baseline": [r for r in done if r.baseline],
              SANDWICH: [r for r in done if not r.baseline and r.family == SANDWICH
                           and (r.k or 0) > 0]}
    chosen: dict[str, list[Any]] = {}
    for name, rows in wanted.items():
        chosen[name] = []
        for r in rows:
            if len(chosen[name]) == per_group:
                break
            if any(a.path == MODEL_ARTIFACT
                   for a in client.list_artifacts(str(r.run_id), CHECKPOINT_ARTIFACT)):
                chosen[name].append(r)
    if not any(chosen.values()):
        return AttentionStudy(note="Not computed: no finished trial of this sweep logged a "
                                   "checkpoint (set tracking.log_checkpoints: true).")
    if sum(len(g) for g in chosen.values()) < 2:
        return AttentionStudy(note="Not computed: Table 7 compares trained baseline seeds and "
                                   "sandwich models; this sweep logged checkpoints of "
                                   f"{len(chosen['baseline'])} baseline and "
                                   f"{len(chosen[SANDWICH])} sandwich trial(s).")
    models = {str(r.name): model_from_run(str(r.run_id), tracking_uri=tracking_uri)
              for rows in chosen.values() for r in rows}
    first = next(iter(models.values()))
    ctx = min(context or first.cfg.context, first.cfg.context)
    params = client.get_run(str(next(r for rows in chosen.values() for r in rows).run_id)).data.params
    vocab = first.cfg.vocab_size
    assert vocab is not None, "a trained model knows its vocabulary"
    idx, source = validation_tokens(params, vocab, batch, ctx)
    arrays = {name: capture(model, idx) for name, model in models.items()}
    table = distance_table(arrays)
    labels = {str(r.name): name for name, rows in chosen.items() for r in rows}
    summary = group_distances(table, labels)
    orders = ", ".join(sorted({str(r.order) for r in chosen[SANDWICH]})) or "none"
    return AttentionStudy(
        distances=table, groups=summary,
        note=(f"Distance between the attention of trained models (Hungarian matching of heads "
              f"by earth mover's distance, averaged over tokens and s-sublayers) on {source}: "
              f"{len(chosen['baseline'])} baseline seed(s) and {len(chosen[SANDWICH])} "
              f"sandwich model(s) ({orders}); sd over pairs."))
