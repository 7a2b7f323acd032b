"""The dry run's estimate of the disk a sweep's checkpoints take.

A checkpoint (``models/checkpoint.py``) holds the model's weights and the optimizer's
state in fp32 (bf16 is autocast only: the weights stay fp32), so it takes about
``params x (4 + optimizer state)`` bytes: AdamW keeps two moments (8 bytes a parameter),
SGD with momentum and Adagrad one (4). Each trial keeps its newest ``ray.keep_checkpoints``
under ``ray.storage_path``; with ``tracking.log_checkpoints`` every finished trial's final
one is copied into MLflow's artifacts as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sublayer_search.search.plan.experiment import Experiment

__all__ = ["OPTIMIZER_BYTES", "checkpoint_bytes", "disk_lines", "human_bytes"]

WEIGHT_BYTES = 4
OPTIMIZER_BYTES = {"adamw": 8, "sgd": 4, "adagrad": 4}
"""Bytes of optimizer state per parameter (fp32): AdamW's two moments, SGD's momentum
buffer, Adagrad's sum of squares."""


def checkpoint_bytes(params: int, optimizer: str) -> int:
    """Bytes of one checkpoint of a model of ``params`` parameters (weights + optimizer)."""
    return params * (WEIGHT_BYTES + OPTIMIZER_BYTES.get(optimizer, 8))


def human_bytes(count: float) -> str:
    """``2.96 GB`` (decimal units, as ``df -H`` shows them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if count < 1000 or unit == "TB":
            return f"{count:.3g} {unit}" if unit != "B" else f"{int(count)} B"
        count /= 1000
    return f"{count:.3g} PB"  # pragma: no cover - the loop returns at TB


def disk_lines(exp: Experiment, rows: Sequence[dict[str, Any]], *, approximate: bool) -> list[str]:
    """The dry run's lines on checkpoint disk use (none when no row has a parameter count)."""
    from sublayer_search.search.tasks import task_class

    if not task_class(exp.task).checkpoints:
        return [f"checkpoints: none (task {exp.task} trials start again instead of resuming)"]
    sizes = [checkpoint_bytes(int(r["params"]), exp.train.optimizer) for r in rows
             if isinstance(r.get("params"), int)]
    if not sizes:
        return []
    keep = exp.ray.keep_checkpoints
    kept = sum(sizes) * keep
    mark = "~" if approximate else ""
    lines = [
        f"checkpoints: {mark}{human_bytes(max(sizes))} each at most (weights + "
        f"{exp.train.optimizer} state, fp32); ray.keep_checkpoints: {keep} per trial x "
        f"{len(sizes)} trial(s) = {mark}{human_bytes(kept)} under ray.storage_path "
        f"({exp.ray.storage_path}) when the sweep ends (while it runs, a trial also "
        "holds the ones it saved in the last 10 minutes)"]
    if exp.tracking.log_checkpoints:
        lines.append(f"checkpoints: tracking.log_checkpoints copies each finished trial's "
                     f"final one into MLflow's artifacts: +{mark}{human_bytes(sum(sizes))} "
                     f"({mark}{human_bytes(kept + sum(sizes))} in all)")
    return lines
