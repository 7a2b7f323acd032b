"""Train one order: ``fit(spec, report) -> FitResult``.

The training loop knows nothing of Ray or MLflow. It calls a plain
``report(metrics, checkpoint=None)`` after every evaluation, so the same code runs
under Ray Tune, under ``sublayer train`` and in tests.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.data import (
    Corpus,
    DataConfig,
    eval_batches,
    load_corpus,
    metrics_from_loss,
    random_batch,
)
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import OrderedLM

__all__ = ["TrainConfig", "TrialSpec", "FitResult", "Report", "fit", "evaluate", "main_metric",
           "lr_factor", "device_for", "autocast_for", "build_optimizer", "seed_everything",
           "optimizer_step", "save_checkpoint", "load_checkpoint", "training_state",
           "restore_training", "report_evaluation", "report_resumed_end"]

Report = Callable[..., None]
"""``report(metrics: dict, checkpoint: str | None = None) -> None``."""

CHECKPOINT_FILE = "state.pt"


def _check(cond: bool, field_: str, value: object, expected: str) -> None:
    if not cond:
        raise ConfigError(f"train.{field_}", value, expected)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation and evaluation settings of one trial."""

    __pydantic_config__ = {"extra": "forbid"}

    steps: int = 200
    """Optimizer steps to train for."""
    batch_size: int = 16
    """Sequences per micro-batch."""
    grad_accum: int = 1
    """Micro-batches accumulated per optimizer step."""
    optimizer: Literal["adamw", "sgd", "adagrad"] = "adamw"
    """AdamW (default), SGD with Nesterov momentum, or Adagrad."""
    lr: float = 3e-3
    """Peak learning rate."""
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    momentum: float = 0.99
    """SGD Nesterov momentum."""
    schedule: Literal["cosine", "inverse_sqrt", "constant"] = "cosine"
    """Learning-rate schedule after linear warmup."""
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    """Floor of the cosine schedule as a fraction of ``lr``."""
    clip_norm: float | None = 1.0
    """Global gradient-norm clip; ``None`` disables it."""
    eval_every: int = 50
    """Evaluate (and report, and checkpoint) every this many steps, and at the end."""
    eval_batches: int | None = None
    """Validation batches per evaluation; ``None`` evaluates the whole split."""
    eval_batch_size: int | None = None
    """Batch size for evaluation; defaults to ``batch_size``."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """``auto`` = bf16 autocast on CUDA, fp32 on CPU."""
    compile: bool = False
    """``torch.compile`` the model (CUDA only; ignored on CPU)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 0
    """Seeds torch, numpy, random and the batch sampler."""
    log_every: int = 10
    """Steps between progress callbacks (``on_step``)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "grad_accum", "eval_every", "log_every"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value > 0, name, value, "a positive integer")
        _check(self.lr > 0 and math.isfinite(self.lr), "lr", self.lr, "a positive number")
        _check(self.weight_decay >= 0, "weight_decay", self.weight_decay, "a number >= 0")
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas",
               self.betas, "two numbers in [0, 1)")
        _check(0 <= self.momentum < 1, "momentum", self.momentum, "a number in [0, 1)")
        _check(self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "an integer >= 0")
        _check(0 <= self.min_lr_ratio <= 1, "min_lr_ratio", self.min_lr_ratio, "a number in [0, 1]")
        _check(self.clip_norm is None or self.clip_norm > 0, "clip_norm", self.clip_norm,
               "a positive number or null")
        _check(self.eval_batches is None or self.eval_batches > 0, "eval_batches",
               self.eval_batches, "a positive integer or null (whole split)")
        _check(self.eval_batch_size is None or self.eval_batch_size > 0, "eval_batch_size",
               self.eval_batch_size, "a positive integer or null")
        _check(self.seed >= 0, "seed", self.seed, "an integer >= 0")


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    """Everything that defines one trained model: order (in ``model``), data, training."""

    __pydantic_config__ = {"extra": "forbid"}

    model: ModelConfig
    data: DataConfig
    train: TrainConfig = field(default_factory=TrainConfig)

    def flat(self) -> dict[str, Any]:
        """``{"model.d_model": 64, "train.lr": 0.003, …}``: every setting, for tracking."""
        out: dict[str, Any] = {}
        for section in ("model", "data", "train"):
            for key, value in asdict(getattr(self, section)).items():
                out[f"{section}.{key}"] = value
        return out


@dataclass(frozen=True, kw_only=True)
class FitResult:
    status: Literal["finished", "diverged"]
    steps: int
    metrics: dict[str, float]
    """The last reported metrics (plus ``best_*`` of the main validation metric)."""
    checkpoint: str | None = None


def main_metric(level: str) -> str:
    """``val_ppl`` for word-level corpora, ``val_bpc`` for characters and bytes."""
    return "val_ppl" if level == "word" else "val_bpc"


def device_for(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def autocast_for(cfg: TrainConfig, device: torch.device) -> Any:
    use_bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and device.type == "cuda")
    if use_bf16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def build_optimizer(cfg: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=True)
    return torch.optim.Adagrad(groups, lr=cfg.lr)


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """Multiplier of ``cfg.lr`` at optimizer step ``step`` (0-based)."""
    warm = cfg.warmup_steps
    if warm and step < warm:
        return (step + 1) / warm
    if cfg.schedule == "constant":
        return 1.0
    if cfg.schedule == "inverse_sqrt":
        return math.sqrt(max(warm, 1) / max(step + 1, 1))
    progress = (step - warm) / max(cfg.steps - warm, 1)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine


@torch.no_grad()
def evaluate(model: OrderedLM, ids: np.ndarray, *, context: int, batch_size: int,
             limit: int | None, device: torch.device, autocast: Any) -> float:
    """Mean token NLL (nats) over contiguous blocks of the split."""
    model.eval()
    total, count = 0.0, 0
    for x, y in eval_batches(ids, context=context, batch_size=batch_size, limit=limit):
        x, y = x.to(device), y.to(device)
        with autocast:
            loss = model(x, y).loss
        n = y.numel()
        total += float(loss) * n
        count += n
    model.train()
    if count == 0:
        raise ConfigError("model.context", context, f"a context shorter than the split ({len(ids)} tokens)")
    return total / count


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def optimizer_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler, clip_norm: float | None) -> float:
    """Clip, step, zero the gradients and advance the schedule; return the step's rate."""
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    lr = scheduler.get_last_lr()[0]
    scheduler.step()
    return float(lr)


def save_checkpoint(folder: Path, state: dict[str, Any]) -> str:
    """Write ``state`` atomically to ``folder/state.pt``; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (CHECKPOINT_FILE + ".tmp")
    torch.save(state, tmp)
    tmp.replace(folder / CHECKPOINT_FILE)
    return str(folder)


def training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler, generator: torch.Generator,
                   *, step: int, best: float, metrics: dict[str, Any]) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly where this one stands."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(), "step": step, "best": best, "metrics": metrics}


def restore_training(folder: str | Path, model: torch.nn.Module,
                     optimizer: torch.optim.Optimizer,
                     scheduler: torch.optim.lr_scheduler.LRScheduler,
                     generator: torch.Generator) -> tuple[int, float, dict[str, Any]]:
    """Load a checkpoint written from :func:`training_state`: (step, best, last metrics)."""
    state = load_checkpoint(folder)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"]), float(state["best"]), dict(state.get("metrics", {}))


def report_evaluation(report: Report, *, step: int, total: int, train_losses: list[float],
                      scores: dict[str, float], lr: float, tokens_per_s: float,
                      ckpt_root: Path | None, parts: tuple[Any, Any, Any, torch.Generator],
                      best: float, last_ckpt: str | None) -> tuple[dict[str, Any], str | None]:
    """One evaluation of ``fit``/``fit_translation``: the metrics row (mean train loss since
    the last one, ``scores``, lr, tokens/s), a checkpoint of ``parts`` = (model, optimizer,
    scheduler, generator) under ``ckpt_root`` when given, and the report. Clears
    ``train_losses``; returns (metrics, newest checkpoint)."""
    metrics = {"step": step,
               "train_loss": float(np.mean(train_losses)) if train_losses else math.nan,
               **scores, "lr": lr, "tokens_per_s": tokens_per_s}
    train_losses.clear()
    if ckpt_root is not None:
        last_ckpt = save_checkpoint(ckpt_root, training_state(*parts, step=step, best=best,
                                                              metrics=metrics))
    report({**metrics, "status": "running" if step < total else "finished"}, last_ckpt)
    return metrics, last_ckpt


def report_resumed_end(report: Report, *, resumed: bool, reported: bool,
                       metrics: dict[str, Any], status: str) -> None:
    """A run resumed from its final checkpoint trains nothing: report its end again (the
    driver may have died before recording it)."""
    if resumed and not reported and metrics and status == "finished":
        report({**metrics, "status": "finished"}, None)


def load_checkpoint(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / CHECKPOINT_FILE
    if not path.is_file():
        raise ConfigError("resume_from", str(folder), f"a checkpoint folder containing {CHECKPOINT_FILE}")
    # mmap: reading only the step (search.trainable) does not read the tensors
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def fit(
    spec: TrialSpec,
    report: Report | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    corpus: Corpus | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> FitResult:
    """Train ``spec.model`` on ``spec.data``; call ``report`` after every evaluation.

    ``checkpoint_dir``: where to write a checkpoint at every evaluation (its path is
    passed to ``report``); ``None`` writes none. ``resume_from``: a checkpoint folder to
    continue from. A NaN or infinite loss stops training with status ``diverged``.
    """
    cfg = spec.train
    corpus = corpus if corpus is not None else load_corpus(spec.data)
    mcfg = spec.model if spec.model.vocab_size is not None else spec.model.with_vocab(corpus.vocab_size)
    if mcfg.vocab_size is not None and mcfg.vocab_size < corpus.vocab_size:
        raise ConfigError("model.vocab_size", mcfg.vocab_size, f">= the corpus vocabulary ({corpus.vocab_size})")
    report = report or (lambda metrics, checkpoint=None: None)
    metric_name = main_metric(corpus.level)

    generator = seed_everything(cfg.seed)
    device = device_for(cfg)
    model = OrderedLM(mcfg).to(device)
    optimizer = build_optimizer(cfg, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(cfg, s))
    step, best = 0, math.inf
    metrics: dict[str, float] = {}
    if resume_from is not None:
        step, best, metrics = restore_training(resume_from, model, optimizer, scheduler,
                                               generator)
    run_model: Any = model
    if cfg.compile and device.type == "cuda":
        run_model = torch.compile(model)
    autocast = autocast_for(cfg, device)
    eval_bs = cfg.eval_batch_size or cfg.batch_size

    last_ckpt: str | None = resume_from
    tokens, clock = 0, time.perf_counter()
    train_losses: list[float] = []
    status: Literal["finished", "diverged"] = "finished"
    reported = False
    model.train()
    ckpt_root = Path(checkpoint_dir) if checkpoint_dir is not None else None
    while step < cfg.steps:
        step_loss = 0.0
        for _ in range(cfg.grad_accum):
            x, y = random_batch(corpus.train, context=mcfg.context, batch_size=cfg.batch_size,
                                generator=generator)
            x, y = x.to(device), y.to(device)
            with autocast:
                loss = run_model(x, y).loss / cfg.grad_accum
            loss.backward()
            step_loss += float(loss.detach())
            tokens += y.numel()
        if not math.isfinite(step_loss):
            status = "diverged"
            step += 1
            metrics = {"step": step, "train_loss": step_loss, "val_loss": math.nan,
                       metric_name: math.nan, "lr": scheduler.get_last_lr()[0]}
            report({**metrics, "status": "diverged"}, None)
            break
        lr = optimizer_step(model, optimizer, scheduler, cfg.clip_norm)
        step += 1
        train_losses.append(step_loss)
        if on_step is not None and (step % cfg.log_every == 0 or step == cfg.steps):
            on_step({"step": step, "train_loss": step_loss, "lr": lr})
        if step % cfg.eval_every == 0 or step == cfg.steps:
            elapsed = time.perf_counter() - clock
            val_loss = evaluate(model, corpus.valid, context=mcfg.context, batch_size=eval_bs,
                                limit=cfg.eval_batches, device=device, autocast=autocast)
            scores = metrics_from_loss(val_loss, corpus.level)
            main = scores["ppl"] if corpus.level == "word" else scores["bpc"]
            best = min(best, main)
            metrics, last_ckpt = report_evaluation(
                report, step=step, total=cfg.steps, train_losses=train_losses,
                scores={"val_loss": val_loss, metric_name: main, f"best_{metric_name}": best},
                lr=lr, tokens_per_s=tokens / max(elapsed, 1e-9), ckpt_root=ckpt_root,
                parts=(model, optimizer, scheduler, generator), best=best, last_ckpt=last_ckpt)
            reported = True
            tokens, clock = 0, time.perf_counter()
    report_resumed_end(report, resumed=resume_from is not None, reported=reported,
                       metrics=metrics, status=status)
    return FitResult(status=status, steps=step, metrics=metrics, checkpoint=last_ckpt)

