"""The one training loop: ``train(cfg, workload, report) -> FitResult``.

Every workload (language model, translation, IOT, …) trains through :func:`train`.
The loop owns stepping, gradient accumulation, precision, the evaluation cadence,
divergence, checkpoint and resume, and reporting. What differs per workload is a small
:class:`Workload` object: build the model, the loss of one training batch, the
evaluation scores, and what to do before a step (IOT anneals its temperature).

The loop knows nothing of Ray or MLflow. It calls a plain
``report(metrics, checkpoint=None)`` after every evaluation, so the same code runs under
Ray Tune, under ``sublayer train`` and in tests. Reported rows carry ``step``,
``train_loss`` (mean since the last evaluation), the workload's scores (``val_loss``, its
main metric, …), ``best_<main metric>``, ``lr``, ``tokens_per_s`` and ``status``.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
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

__all__ = ["Workload", "FitResult", "Reporter", "Scores", "StepContext", "train", "use_threads"]


def use_threads(n: int) -> int:
    """Run torch's CPU work on ``n`` threads (``sublayer train`` picks one per usable CPU;
    under Ray a trial gets ``OMP_NUM_THREADS`` from its CPUs). Returns the count in use."""
    torch.set_num_threads(max(1, int(n)))
    return int(torch.get_num_threads())

Scores = dict[str, Any]
"""Evaluation results: floats, plus strings for structured extras (IOT's routing matrix)."""


class Reporter(Protocol):
    """What the loop calls after every evaluation (and with each checkpoint)."""

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
    """What a workload needs to draw and run a batch: device, precision, the batch RNG."""

    device: torch.device
    autocast: AbstractContextManager[object]
    generator: torch.Generator
    batch_size: int
    """The global training batch: every worker draws all of it, then keeps its share."""
    eval_batch_size: int
    workers: Workers = SINGLE


class Workload(ABC):
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
        """Validation scores: ``val_loss``, the main metric when due, workload extras."""

    def before_step(self, model: torch.nn.Module, step: int, total: int) -> None:
        """Called before each optimizer step (and before the evaluation at step 0)."""
        return None

    def shard_blocks(self, model: torch.nn.Module) -> list[torch.nn.Module] | None:
        """The blocks ``train.parallel: fsdp`` shards one by one (the rest is sharded
        with the root); None (the default): this workload's models cannot be sharded."""
        return None


def train(
    cfg: TrainConfig,
    workload: Workload,
    report: Reporter | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
    workers: Workers | None = None,
) -> FitResult:
    """Train ``workload``'s model with ``cfg``; call ``report`` after every evaluation.

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
    run = _setup(cfg, workload, workers, resume_from)
    if workload.eval_at_start and run.step == 0:
        workload.before_step(run.model, 0, cfg.steps)
        report({"step": 0, **run.evaluate(workload, final=False), "lr": run.lr(),
                STATUS_KEY: TrialStatus.RUNNING.value}, None)
    ckpt_root = Path(checkpoint_dir) if checkpoint_dir is not None else None
    last_ckpt, reported = resume_from, False
    tokens, clock, train_losses = 0, time.perf_counter(), list[float]()
    run.model.train()
    while run.step < cfg.steps:
        workload.before_step(run.model, run.step, cfg.steps)
        step_loss, n_tokens = _forward_backward(cfg, workload, run)
        tokens += n_tokens
        if not math.isfinite(step_loss):
            return _diverged(run, step_loss, report, last_ckpt)
        lr = optimizer_step(run.model, run.optimizer, run.scheduler, cfg.clip_norm)
        run.step += 1
        train_losses.append(step_loss)
        if on_step is not None and (run.step % cfg.log_every == 0 or run.step == cfg.steps):
            on_step({"step": run.step, "train_loss": step_loss, "lr": lr})
        if run.step % cfg.eval_every == 0 or run.step == cfg.steps:
            run.metrics = _evaluation(run, workload, train_losses, lr=lr, tokens=tokens,
                                      elapsed=time.perf_counter() - clock)
            saved = _save_checkpoint(run, ckpt_root)
            last_ckpt = saved or last_ckpt
            done = TrialStatus.RUNNING if run.step < cfg.steps else TrialStatus.FINISHED
            report({**run.metrics, STATUS_KEY: done.value}, saved)
            reported = True
            train_losses.clear()
            tokens, clock = 0, time.perf_counter()
    if resume_from is not None and not reported and run.metrics:
        # resumed from its final checkpoint, it trained nothing: report its end again
        # (the driver may have died before recording it)
        report({**run.metrics, STATUS_KEY: TrialStatus.FINISHED.value}, None)
    return FitResult(status="finished", steps=run.step, metrics=run.metrics,
                     checkpoint=last_ckpt)


@dataclass(kw_only=True)
class _Run:
    """What the loop of :func:`train` works on: set up once by :func:`_setup`, then the
    step, the best main metric so far and the last reported metrics move."""

    cfg: TrainConfig
    metric: str
    model: torch.nn.Module
    run_model: Any
    """The model as the steps call it: wrapped for data parallelism, maybe compiled."""
    optimizer: torch.optim.Optimizer
    scheduler: Any
    generator: torch.Generator
    workers: Workers
    device: torch.device
    ctx: StepContext
    step: int = 0
    best_value: float = math.nan
    metrics: dict[str, Any] = field(default_factory=dict)

    def lr(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    def evaluate(self, workload: Workload, *, final: bool) -> Scores:
        """The workload's scores at this step; the best main metric follows them."""
        scores = workload.evaluate(self.model, self.ctx, step=self.step, final=final)
        value = scores.get(self.metric)
        if value is not None and is_better(self.metric, value, self.best_value):
            self.best_value = float(value)
        return scores


def _setup(cfg: TrainConfig, workload: Workload, workers: Workers | None,
           resume_from: str | None) -> _Run:
    """Seed; build the model (sharded first for FSDP), its optimizer and schedule;
    restore a checkpoint; wrap the model for the workers and compile it on CUDA."""
    workers = (workers or Workers.from_process_group()).using(cfg.parallel)
    workers.check_batch(cfg.batch_size)
    generator = seed_everything(cfg.seed)
    device = device_for(cfg)
    model = workload.build().to(device)
    if workers.sharded:  # before the optimizer: it must hold the shards
        model = workers.shard(model, workload.shard_blocks(model), bf16=bf16_for(cfg, device))
    optimizer = build_optimizer(cfg, model)
    scheduler = build_scheduler(cfg, optimizer)
    step, metrics = 0, dict[str, Any]()
    best_value = math.inf if direction(workload.metric) == "min" else -math.inf
    if resume_from is not None:
        step, best_value, metrics = restore_training(resume_from, model, optimizer, scheduler,
                                                     generator, load=workers.load_state)
    run_model: Any = workers.wrap(model, device)
    if cfg.compile and device.type == "cuda":
        run_model = torch.compile(run_model)
    ctx = StepContext(device=device, autocast=autocast_for(cfg, device), generator=generator,
                      batch_size=cfg.batch_size,
                      eval_batch_size=cfg.eval_batch_size or cfg.batch_size, workers=workers)
    return _Run(cfg=cfg, metric=workload.metric, model=model, run_model=run_model,
                optimizer=optimizer, scheduler=scheduler, generator=generator, workers=workers,
                device=device, ctx=ctx, step=step, best_value=best_value, metrics=metrics)


def _forward_backward(cfg: TrainConfig, workload: Workload, run: _Run) -> tuple[float, int]:
    """Gradients of one step over ``grad_accum`` micro-batches (one synchronisation
    across workers); (the step's loss, the same on every worker; tokens seen here)."""
    step_loss, tokens = 0.0, 0
    for micro in range(cfg.grad_accum):
        with run.workers.accumulating(run.run_model, last=micro == cfg.grad_accum - 1):
            with run.ctx.autocast:
                loss, n_tokens = workload.loss(run.run_model, run.ctx)
                loss = loss / cfg.grad_accum
            loss.backward()
        step_loss += float(loss.detach())
        tokens += n_tokens
    return run.workers.mean(step_loss, run.device), tokens


def _evaluation(run: _Run, workload: Workload, train_losses: list[float], *, lr: float,
                tokens: int, elapsed: float) -> dict[str, Any]:
    """The metrics of an evaluation: the mean training loss since the last one, the
    workload's scores, the best main metric so far, the learning rate, the throughput."""
    tokens = run.workers.total(tokens, run.device)
    scores = run.evaluate(workload, final=run.step == run.cfg.steps)
    mean_loss = float(np.mean(train_losses)) if train_losses else math.nan
    return {"step": run.step, "train_loss": mean_loss, **scores,
            best(run.metric): run.best_value, "lr": lr, "tokens_per_s": tokens / max(elapsed, 1e-9)}


def _diverged(run: _Run, step_loss: float, report: Reporter, last_ckpt: str | None) -> FitResult:
    """A NaN or infinite loss: report it (status ``diverged``) and stop."""
    run.step += 1
    run.metrics = {"step": run.step, "train_loss": step_loss, "val_loss": math.nan,
                   run.metric: math.nan, "lr": run.lr()}
    report({**run.metrics, STATUS_KEY: TrialStatus.DIVERGED.value}, None)
    return FitResult(status="diverged", steps=run.step, metrics=run.metrics,
                     checkpoint=last_ckpt)


def _save_checkpoint(run: _Run, root: Path | None) -> str | None:
    """Write a checkpoint at this evaluation when one is due (rank 0 writes; every
    worker gathers FSDP shards); its path, else None."""
    if root is None or not _checkpoint_due(run.cfg, run.step):
        return None
    weights = run.workers.full_state(run.model, run.optimizer)
    if weights is None:
        return None
    state = training_state(run.model, run.optimizer, run.scheduler, run.generator,
                           step=run.step, best=run.best_value, metrics=run.metrics,
                           weights=weights)
    return save_checkpoint(root, state)


def _checkpoint_due(cfg: TrainConfig, step: int) -> bool:
    """Whether the evaluation at ``step`` writes a checkpoint (``train.checkpoint_every``)."""
    every = cfg.checkpoint_every
    return every is None or step % every == 0 or step == cfg.steps


def _no_report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
    return None
