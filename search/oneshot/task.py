"""Stage 1 of a one-shot sweep where it runs: a Ray task that trains the supernet and
ranks every order (torch is imported here, in the worker, never by the driver).

Each evaluation goes to the driver through a Ray queue (the driver writes MLflow); the
task returns the ranking table. A checkpoint is written at every evaluation into the
sweep's Ray run folder, so a stage 1 interrupted by a kill continues from it when the
task runs again where that folder can be read (else it trains from the start); the
evaluations up to the checkpoint are sent again from ``curve.jsonl`` beside it, so the
run's learning curve has each of them once even when the driver died before writing some.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from sublayer_search.search.core.injected_failure import fail_if_listed
from sublayer_search.search.oneshot.stages import rank_metric
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.searchers.algorithms.oneshot import supernet_config

if TYPE_CHECKING:
    from ray.util.queue import Queue

__all__ = ["CURVE_FILE", "train_and_rank"]

CURVE_FILE = "curve.jsonl"
"""Beside the checkpoint: the supernet's evaluations so far, one JSON row per line."""


def _plain(metrics: dict[str, Any]) -> dict[str, Any]:
    """A report row as plain Python values (numbers and strings) for the queue."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            continue
        out[key] = value if isinstance(value, str | int) else float(value)
    return out


def _checkpoint_dir(wanted: str) -> tuple[str, str | None]:
    """(where to write checkpoints, the checkpoint to resume from or ``None``)."""
    from sublayer_search.models.checkpoint import CHECKPOINT_FILE

    folder = Path(wanted)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # the driver's folder does not exist on this node: no resume here
        return tempfile.mkdtemp(prefix="sublayer-supernet-"), None
    return str(folder), (str(folder) if (folder / CHECKPOINT_FILE).is_file() else None)


def _replay(folder: str, resume: str | None, queue: Queue) -> int:
    """Send the evaluations a resumed supernet had made up to its checkpoint again (the
    driver may have died before writing them; it skips what it has); return that step.
    The curve file then holds exactly those rows and grows with each new evaluation."""
    from sublayer_search.models.checkpoint import load_checkpoint

    curve = Path(folder) / CURVE_FILE
    if resume is None:
        curve.write_text("")
        return 0
    state = load_checkpoint(resume)
    step = int(state["step"])
    rows = []
    for line in curve.read_text().splitlines() if curve.is_file() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by the kill
            continue
    rows = [r for r in rows if int(r.get("step", 0)) < step]
    rows.append({**_plain(dict(state.get("metrics") or {})), "step": step})
    curve.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for row in rows:
        queue.put(row)
    return step


def train_and_rank(
    plan: SweepPlan, orders: list[str], queue: Queue, checkpoint_dir: str
) -> dict[str, Any]:
    """Train the supernet of ``plan`` over ``orders`` and rank them; return
    ``{"status", "steps", "metrics", "ranking", "placement"}``."""
    from sublayer_search.models.data import load_corpus
    from sublayer_search.models.supernet.train import rank_orders, ranking_table, train_supernet

    fail_if_listed("supernet", "the supernet")
    cfg = supernet_config(plan.experiment)
    train = plan.experiment.train
    spec = plan.task.spec(plan.model, plan.data, train, plan.extra)
    corpus = load_corpus(spec.data)
    folder, resume = _checkpoint_dir(checkpoint_dir)
    node_id = ray.get_runtime_context().get_node_id()
    placement = {
        "node_id": node_id,
        "gpu_ids": ",".join(str(g) for g in ray.get_gpu_ids()),
        "resumed_from_step": _replay(folder, resume, queue),
    }

    def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
        row = _plain(metrics)
        with open(Path(folder) / CURVE_FILE, "a") as fh:  # after the checkpoint, before the driver
            fh.write(json.dumps(row) + "\n")
        queue.put(row)

    result = train_supernet(
        spec, orders, cfg, report, checkpoint_dir=folder, resume_from=resume, corpus=corpus
    )
    out = {
        "status": result.status,
        "steps": result.steps,
        "metrics": _plain(result.metrics),
        "ranking": [],
        "placement": placement,
    }
    if result.status != "finished":
        return out
    device = next(result.model.parameters()).device
    scores = rank_orders(
        result.model,
        orders,
        corpus,
        metric=rank_metric(plan.metric),
        eval_batches=cfg.eval_batches,
        batch_size=train.eval_batch_size or train.batch_size,
        context=spec.model.context,
        device=str(device),
    )
    out["ranking"] = ranking_table(scores)
    return out
