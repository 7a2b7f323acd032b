"""The one training loop: ``train(cfg, family, report) -> FitResult``.

Every model family (language model, translation, IOT, …) trains through :func:`train`.
The loop owns stepping, gradient accumulation, precision, the evaluation cadence,
divergence, checkpoint and resume, and reporting. What differs per family is a small
:class:`Family` object: build the model, the loss of one training batch, the
evaluation scores, and what to do before a step (IOT anneals its temperature).

The loop knows nothing of Ray or MLflow. It calls a plain
``report(metrics, checkpoint=None)`` after every evaluation, so the same code runs under
Ray Tune, under ``sublayer train`` and in tests. Reported rows carry ``step``,
``train_loss`` (mean since the last evaluation), the family's scores (``val_loss``, its
main metric, …), ``best_<main metric>``, ``lr``, ``tokens_per_s`` and ``status``.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch

from sublayer_search.models.checkpoint import restore_training, save_checkpoint, training_state
from sublayer_search.models.distributed import SINGLE, Workers
from sublayer_search.models.optim import (
    autocast_for,
    bf16_for,
    build_optimizer,
    build_scheduler,
    device_for,
    optimizer_step,
    seed_everything,
)
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.spaces.records import STATUS_KEY, TrialStatus, best, direction, is_better

__all__ = ["Family", "FitResult", "Report", "Scores", "StepContext", "train", "use_threads"]


def use_threads(n: int) -> int:
    """Run torch's CPU work on ``n`` threads (``sublayer train`` picks one per usable CPU;
    under Ray a trial gets ``OMP_NUM_THREADS`` from its CPUs). Returns the count in use."""
    torch.set_num_threads(max(1, int(n)))
    return int(torch.get_num_threads())

Scores = dict[str, Any]
"""Evaluation results: floats, plus strings for structured extras (IOT's routing matrix)."""


class Report(Protocol):
    def __call__(self, metrics: dict[str, Any], checkpoint: str | None = None) -> None: ...


@dataclass(frozen=True, kw_only=True)
class FitResult:
    status: Literal["finished", "diverged"]
    steps: int
    metrics: dict[str, Any]
    """The last reported metrics (plus ``best_*`` of the main validation metric)."""
    checkpoint: str | None = None


@dataclass(frozen=True, kw_only=True)
class StepContext:
    """What a family needs to draw and run a batch: device, precision, the batch RNG."""

    device: torch.device
    autocast: AbstractContextManager[object]
    generator: torch.Generator
    batch_size: int
    """The global training batch: every worker draws all of it, then keeps its share."""
    eval_batch_size: int
    workers: Workers = SINGLE


class Family(ABC):
    """What differs between model families; the loop in :func:`train` does the rest."""

    metric: str
    """The main validation metric (``val_bpc``, ``val_ppl``, ``val_bleu``); its direction
    (:func:`sublayer_search.spaces.records.direction`) decides what ``best`` means."""
    eval_at_start: bool = False
    """Also evaluate (and report) the untrained model at step 0."""

    @abstractmethod
    def build(self) -> torch.nn.Module:
        """The model to train (on the CPU; the loop moves it)."""

    @abstractmethod
    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        """(loss of one training micro-batch, tokens it holds). ``model`` may be compiled."""

    @abstractmethod
    def evaluate(self, model: torch.nn.Module, ctx: StepContext, *, step: int,
                 final: bool) -> Scores:
        """Validation scores: ``val_loss``, the main metric when due, family extras."""

    def before_step(self, model: torch.nn.Module, step: int, total: int) -> None:
        """Called before each optimizer step (and before the evaluation at step 0)."""
        return None

    def shard_blocks(self, model: torch.nn.Module) -> list[torch.nn.Module] | None:
        """The blocks ``train.parallel: fsdp`` shards one by one (the rest is sharded
        with the root); None (the default): this family's models cannot be sharded."""
        return None


def train(
    cfg: TrainConfig,
    family: Family,
    report: Report | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
    workers: Workers | None = None,
) -> FitResult:
    """Train ``family``'s model with ``cfg``; call ``report`` after every evaluation.

    ``checkpoint_dir``: where to write a checkpoint at every evaluation, or every
    ``cfg.checkpoint_every`` steps and at the end (its path is passed to ``report`` with
    the evaluation it was written at, None with the others); ``None`` writes none.
    ``resume_from``: a checkpoint folder to continue from. A NaN or infinite loss stops
    training with status ``diverged``.
    ``workers``: this process's rank among a trial's data-parallel workers
    (:mod:`models.distributed`; default: the initialised process group, as Ray Train
    sets it up, else one worker); every worker calls ``report``, only rank 0 checkpoints.
    """
    report = report or _no_report
    metric = family.metric
    workers = (workers or Workers.from_process_group()).using(cfg.parallel)
    workers.check_batch(cfg.batch_size)
    generator = seed_everything(cfg.seed)
    device = device_for(cfg)
    model = family.build().to(device)
    if workers.sharded:  # before the optimizer: it must hold the shards
        model = workers.shard(model, family.shard_blocks(model), bf16=bf16_for(cfg, device))
    optimizer = build_optimizer(cfg, model)
    scheduler = build_scheduler(cfg, optimizer)
    step = 0
    best_value = math.inf if direction(metric) == "min" else -math.inf
    metrics: dict[str, Any] = {}
    if resume_from is not None:
        step, best_value, metrics = restore_training(resume_from, model, optimizer, scheduler,
                                                     generator, load=workers.load_state)
    run_model: Any = workers.wrap(model, device)
    if cfg.compile and device.type == "cuda":
        run_model = torch.compile(run_model)
    ctx = StepContext(device=device, autocast=autocast_for(cfg, device), generator=generator,
                      batch_size=cfg.batch_size,
                      eval_batch_size=cfg.eval_batch_size or cfg.batch_size, workers=workers)

    def update_best(scores: Scores) -> None:
        nonlocal best_value
        value = scores.get(metric)
        if value is not None and is_better(metric, value, best_value):
            best_value = float(value)

    if family.eval_at_start and step == 0:
        family.before_step(model, 0, cfg.steps)
        first = family.evaluate(model, ctx, step=0, final=False)
        update_best(first)
        report({"step": 0, **first, "lr": scheduler.get_last_lr()[0],
                STATUS_KEY: TrialStatus.RUNNING.value}, None)

    last_ckpt: str | None = resume_from
    ckpt_root = Path(checkpoint_dir) if checkpoint_dir is not None else None
    tokens, clock = 0, time.perf_counter()
    train_losses: list[float] = []
    status: Literal["finished", "diverged"] = "finished"
    reported = False
    model.train()
    while step < cfg.steps:
        family.before_step(model, step, cfg.steps)
        step_loss = 0.0
        for micro in range(cfg.grad_accum):  # one gradient synchronisation per step
            with workers.accumulating(run_model, last=micro == cfg.grad_accum - 1):
                with ctx.autocast:
                    loss, n_tokens = family.loss(run_model, ctx)
                    loss = loss / cfg.grad_accum
                loss.backward()
            step_loss += float(loss.detach())
            tokens += n_tokens
        step_loss = workers.mean(step_loss, device)  # the same value on every worker
        if not math.isfinite(step_loss):
            status = "diverged"
            step += 1
            metrics = {"step": step, "train_loss": step_loss, "val_loss": math.nan,
                       metric: math.nan, "lr": scheduler.get_last_lr()[0]}
            report({**metrics, STATUS_KEY: TrialStatus.DIVERGED.value}, None)
            break
        lr = optimizer_step(model, optimizer, scheduler, cfg.clip_norm)
        step += 1
        train_losses.append(step_loss)
        if on_step is not None and (step % cfg.log_every == 0 or step == cfg.steps):
            on_step({"step": step, "train_loss": step_loss, "lr": lr})
        if step % cfg.eval_every == 0 or step == cfg.steps:
            elapsed = time.perf_counter() - clock
            tokens = workers.total(tokens, device)
            scores = family.evaluate(model, ctx, step=step, final=step == cfg.steps)
            update_best(scores)
            metrics = {"step": step,
                       "train_loss": float(np.mean(train_losses)) if train_losses else math.nan,
                       **scores, best(metric): best_value, "lr": lr,
                       "tokens_per_s": tokens / max(elapsed, 1e-9)}
            train_losses.clear()
            saved: str | None = None
            if ckpt_root is not None and _checkpoint_due(cfg, step):
                weights = workers.full_state(model, optimizer)  # every worker gathers (FSDP)
                if weights is not None:  # rank 0 writes
                    state = training_state(model, optimizer, scheduler, generator, step=step,
                                           best=best_value, metrics=metrics, weights=weights)
                    saved = last_ckpt = save_checkpoint(ckpt_root, state)
            done = TrialStatus.RUNNING if step < cfg.steps else TrialStatus.FINISHED
            report({**metrics, STATUS_KEY: done.value}, saved)
            reported = True
            tokens, clock = 0, time.perf_counter()
    if resume_from is not None and not reported and metrics and status == "finished":
        # resumed from its final checkpoint, it trained nothing: report its end again
        # (the driver may have died before recording it)
        report({**metrics, STATUS_KEY: TrialStatus.FINISHED.value}, None)
    return FitResult(status=status, steps=step, metrics=metrics, checkpoint=last_ckpt)


def _checkpoint_due(cfg: TrainConfig, step: int) -> bool:
    """Whether the evaluation at ``step`` writes a checkpoint (``train.checkpoint_every``)."""
    every = cfg.checkpoint_every
    return every is None or step % every == 0 or step == cfg.steps


def _no_report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
    return None
