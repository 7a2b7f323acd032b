"""Checkpoints of a training run: one ``state.pt`` per folder, written atomically.

Loaded with ``weights_only=True`` and memory-mapped, so reading only the step (the Ray
trainable does) does not read the tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from sublayer_search.models.errors import ConfigError

__all__ = ["CHECKPOINT_FILE", "load_checkpoint", "restore_training", "save_checkpoint",
           "training_state"]

CHECKPOINT_FILE = "state.pt"


def save_checkpoint(folder: Path, state: dict[str, Any]) -> str:
    """Write ``state`` atomically to ``folder/state.pt``; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (CHECKPOINT_FILE + ".tmp")
    torch.save(state, tmp)
    tmp.replace(folder / CHECKPOINT_FILE)
    return str(folder)


def load_checkpoint(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / CHECKPOINT_FILE
    if not path.is_file():
        raise ConfigError("resume_from", str(folder), f"a checkpoint folder containing {CHECKPOINT_FILE}")
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return state


def training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler, generator: torch.Generator,
                   *, step: int, best: float, metrics: dict[str, Any],
                   weights: tuple[dict[str, Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly where this one stands.
    ``weights``: the (model, optimizer) state dicts when the caller gathered them (a
    sharded model's full state, :meth:`models.distributed.Workers.full_state`)."""
    model_state, optim_state = weights or (model.state_dict(), optimizer.state_dict())
    return {"model": model_state, "optimizer": optim_state,
            "scheduler": scheduler.state_dict(), "generator": generator.get_state(),
            "torch_rng": torch.get_rng_state(), "step": step, "best": best, "metrics": metrics}


def restore_training(folder: str | Path, model: torch.nn.Module,
                     optimizer: torch.optim.Optimizer,
                     scheduler: torch.optim.lr_scheduler.LRScheduler,
                     generator: torch.Generator, *,
                     load: Callable[..., None] | None = None) -> tuple[int, float, dict[str, Any]]:
    """Load a checkpoint written from :func:`training_state`: (step, best, last metrics).
    ``load(model, optimizer, model_state, optimizer_state)`` loads the weights instead of
    ``load_state_dict`` (a sharded model: :meth:`models.distributed.Workers.load_state`)."""
    state = load_checkpoint(folder)
    if load is not None:
        load(model, optimizer, state["model"], state["optimizer"])
    else:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return int(state["step"]), float(state["best"]), dict(state.get("metrics", {}))
