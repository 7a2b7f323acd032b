"""The record schema: the names a trial's record is written and read under.

One small, dependency-free module that ``models`` (what the trainer reports),
``search`` (what tracking writes to MLflow) and ``analysis`` (what studies read back)
all import, so a metric name, a tag key or a status is spelled once. It lives in
``spaces`` because that is the one package every other package already depends on.

- **Metrics** a trainer reports at each evaluation (``step``, ``train_loss``,
  ``val_loss``, the task's main metric such as ``val_bpc``, ``lr``, …); tracking logs
  every numeric one. Each has a direction (:func:`direction`): lower or higher is better.
- **Summary metrics** tracking writes when a trial ends: ``final_<metric>`` (the last
  value) and ``best_<metric>`` (the best one so far) of the sweep's main metric.
- **Tags** on MLflow runs (:class:`Tag`), **roles** of runs (:class:`Role`).
- **Trial status** (:class:`TrialStatus`): how a trial ended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, Literal

__all__ = [
    "BEST_PREFIX", "FAILED_STATUSES", "FINAL_PREFIX", "ROUTE_SHARE_PREFIX", "STATUS_KEY", "Direction", "Role",
    "Tag", "TrialStatus", "best", "direction", "ended_status", "final", "is_better", "main_metric_for_level",
    "route_share", "route_share_code",
]

Direction = Literal["min", "max"]


class TrialStatus(StrEnum):
    """How a trial stands or ended (tag ``sublayer.status``, column ``status``)."""

    RUNNING = "running"
    FINISHED = "finished"
    """Trained for every step."""
    STOPPED = "stopped"
    """Ended early by the scheduler (ASHA, …): its metrics are those of the last step reached."""
    DIVERGED = "diverged"
    """The training loss became NaN or infinite."""
    FAILED = "failed"
    """The trial raised."""
    KILLED = "killed"
    """The sweep was interrupted while the trial ran (``--resume`` continues it)."""
    WAITING = "waiting"
    """Restarted (``--resume``, a retry) and waiting for the resources of its workers:
    not training yet (MLflow status ``SCHEDULED``)."""


class Role(StrEnum):
    """What an MLflow run of a sweep stands for (tag ``sublayer.role``)."""

    SWEEP = "sweep"
    TRIAL = "trial"
    ANALYSIS = "analysis"
    SUPERNET = "supernet"
    """Stage 1 of a one-shot sweep: the weight-sharing supernet that ranks every order."""


class Tag:
    """MLflow tag keys of sweep and trial runs."""

    ROLE: Final = "sublayer.role"
    STATUS: Final = "sublayer.status"
    RAY_RUN: Final = "sublayer.ray_run"
    SPACE: Final = "sublayer.space"
    FAMILY: Final = "sublayer.family"
    BASELINE: Final = "sublayer.baseline"
    ERROR: Final = "sublayer.error"
    ATTEMPTS: Final = "sublayer.attempts"
    STOPPED_BY: Final = "sublayer.stopped_by"
    RESUMED_FROM_STEP: Final = "sublayer.resumed_from_step"
    STEPS: Final = "sublayer.steps"
    """Optimizer steps the trial trained (less than planned for a stopped one)."""
    REUSED_FROM: Final = "sublayer.reused_from"
    """A trial taken from another experiment: the run it copies."""
    GIT_COMMIT: Final = "sublayer.git_commit"
    SEARCH: Final = "sublayer.search"
    METRIC: Final = "sublayer.metric"
    PARENT: Final = "mlflow.parentRunId"
    NOTE: Final = "mlflow.note.content"
    RAY_TRIAL_ID: Final = "ray.trial_id"
    DEVICE: Final = "sublayer.device"
    """The kind of device the trial trained on: ``cuda``, ``cpu`` or ``mps``."""
    DEVICE_NAME: Final = "sublayer.device_name"
    """The device's name: the GPU's (``NVIDIA H100 80GB HBM3``) or the CPU model."""
    DEVICE_COUNT: Final = "sublayer.device_count"
    """How many devices the trial trained on (one per worker)."""
    ONESHOT_RANK: Final = "sublayer.oneshot_rank"
    """One-shot sweeps: the order's rank under the supernet (1 = best)."""
    ONESHOT_ESTIMATE: Final = "sublayer.oneshot_estimate"
    """One-shot sweeps: the supernet's estimate of the order's metric."""
    RESTARTS: Final = "sublayer.restarts"
    """How often Ray restarted the trial after a failure (a lost node, a crash)."""
    GUIDANCE: Final = "sublayer.guidance"
    """A guided trial's label (``none``, ``sg-kq``, ``hg-kq+ffn``), for display only."""


FAILED_STATUSES: Final = (TrialStatus.FAILED.value, TrialStatus.DIVERGED.value)
"""Statuses of trials that did not train to a usable result (a sweep with any exits 1)."""
STATUS_KEY: Final = "status"
"""The key of the trial's status inside a reported metrics row (a string, not a metric)."""
FINAL_PREFIX: Final = "final_"
BEST_PREFIX: Final = "best_"
ROUTE_SHARE_PREFIX: Final = "route_share_"
"""IOT: ``route_share_<code>`` = share of validation sentences routed to order ``<code>``."""

_ROUTE_SHARE = re.compile(rf"^{ROUTE_SHARE_PREFIX}(\d+)$")
_HIGHER_IS_BETTER = ("bleu", "acc", "accuracy", "f1")


def ended_status(last: Mapping[str, Any], steps: int) -> TrialStatus:
    """How a trial that Ray ended without an error ended, from its last report: diverged,
    stopped by the scheduler (still running short of ``steps``), or finished."""
    status = last.get(STATUS_KEY, TrialStatus.FINISHED)
    if status == TrialStatus.DIVERGED:
        return TrialStatus.DIVERGED
    if status == TrialStatus.RUNNING and int(last.get("step", steps)) < steps:
        return TrialStatus.STOPPED
    return TrialStatus.FINISHED


def final(metric: str) -> str:
    """``final_val_bpc``: the last value of ``metric``, written when a trial ends."""
    return FINAL_PREFIX + metric


def best(metric: str) -> str:
    """``best_val_bpc``: the best value of ``metric`` so far (by its :func:`direction`)."""
    return BEST_PREFIX + metric


def route_share(code: int | str) -> str:
    return f"{ROUTE_SHARE_PREFIX}{code}"


def route_share_code(name: str) -> int | None:
    """The order code of a ``route_share_<code>`` metric name, else ``None``."""
    match = _ROUTE_SHARE.match(name)
    return int(match.group(1)) if match else None


def direction(metric: str) -> Direction:
    """``max`` for BLEU-, accuracy- and F1-like names, ``min`` for losses, ppl and bpc."""
    name = metric.lower()
    if "bleu" in name:  # val_bleu, best_val_bleu, sacrebleu, bleu4 …
        return "max"
    higher = any(name.endswith(h) or f"{h}_" in name for h in _HIGHER_IS_BETTER)
    return "max" if higher else "min"


def is_better(metric: str, value: float, than: float) -> bool:
    """Whether ``value`` beats ``than`` for ``metric`` (strictly)."""
    return value > than if direction(metric) == "max" else value < than


def main_metric_for_level(level: str) -> str:
    """``val_ppl`` for word-level corpora, ``val_bpc`` for characters and bytes."""
    return "val_ppl" if level == "word" else "val_bpc"
