"""Devices, precision, seeding, the optimizer and the learning-rate schedule of a trial."""

from __future__ import annotations

import math
import os
import platform
import random
from contextlib import AbstractContextManager, nullcontext

import numpy as np
import torch

from sublayer_search.models.train_config import TrainConfig

__all__ = ["NoGpuError", "autocast_for", "bf16_for", "cuda_available", "build_optimizer",
           "build_scheduler", "device_facts", "device_for", "require_gpu", "nccl_available", "fused_adamw_applies", "lr_factor", "optimizer_step",
           "seed_everything"]


def cuda_available() -> bool:
    """Whether torch can train on a CUDA GPU in this process."""
    return bool(torch.cuda.is_available())


def nccl_available() -> bool:
    """Whether this torch has NCCL built in (CUDA builds; a CPU build has gloo only)."""
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_nccl_available())


def device_for(cfg: TrainConfig) -> torch.device:
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


class NoGpuError(RuntimeError):
    """A trial that holds GPUs (``resources.gpu`` > 0) where torch sees no CUDA device."""


def require_gpu(gpus: float, cfg: TrainConfig, where: str = "") -> None:
    """Refuse to train on the CPU a trial that asked for ``gpus`` GPUs (``train.device``
    ``auto`` or ``cuda``) where torch sees none: it would train slowly on the CPU while
    the GPUs Ray lent it sit idle. ``train.device: cpu`` holds GPUs and trains on the CPU."""
    if gpus <= 0 or cfg.device == "cpu" or torch.cuda.is_available():
        return
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raise NoGpuError(
        f"resources.gpu is {gpus:g} but torch sees no CUDA device{where} (torch "
        f"{torch.__version__}, {build}; CUDA_VISIBLE_DEVICES={visible!r}): install a CUDA "
        "build of torch that matches the node's driver, or set train.device: cpu to train "
        "on the CPU while holding the GPU")


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_facts(device: torch.device, count: int = 1) -> dict[str, str | int]:
    """What a trial trained on: the device kind (``cuda``/``cpu``/``mps``), its name (the
    GPU's, or the CPU model) and how many (one per worker)."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    elif device.type == "cpu":
        name = _cpu_name()
    else:
        name = device.type
    return {"device": device.type, "device_name": name, "device_count": count}


def bf16_for(cfg: TrainConfig, device: torch.device) -> bool:
    """Whether the trial computes in bf16: ``precision: bf16``, or ``auto`` on a GPU."""
    return cfg.precision == "bf16" or (cfg.precision == "auto" and device.type == "cuda")


def autocast_for(cfg: TrainConfig, device: torch.device) -> AbstractContextManager[object]:
    if bf16_for(cfg, device):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def build_optimizer(cfg: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """Weight decay on matrices only; each parameter once, even where a tensor is shared."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas,
                                 fused=fused_adamw_applies(model) or None)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=True)
    return torch.optim.Adagrad(groups, lr=cfg.lr)


def fused_adamw_applies(model: torch.nn.Module) -> bool:
    """AdamW's fused kernel (one pass per parameter; 3.7 instead of 18.7 ms for the
    5.3M parameters of ``benchmarks/model_throughput.py``'s LM on one CPU thread):
    every parameter floating point, on the CPU or a CUDA GPU. Hugging Face's Trainer
    uses it by default too."""
    return all(p.is_floating_point() and p.device.type in ("cpu", "cuda")
               for p in model.parameters())


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


def build_scheduler(cfg: TrainConfig,
                    optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(cfg, s))


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
