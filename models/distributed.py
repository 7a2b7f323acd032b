"""Data parallelism for the one training loop: which worker this is, and what it does.

One trial may train on N workers (``resources.workers``). Every worker runs the same loop
(:func:`models.training_loop.train`) with a :class:`Workers` of its own rank:

* every worker draws the *global* batch from the same seeded generator and keeps its
  contiguous share of the rows (:meth:`Workers.local`), so the global batch is what the
  experiment file says and the random stream is the one a single worker would use;
* the model is wrapped in PyTorch DDP (NCCL on GPUs, gloo on CPUs), which averages the
  gradients: with equal shares that is the gradient of the global batch;
* the training loss is averaged over the workers (:meth:`Workers.mean`), so every
  worker sees the same value and a divergence stops all of them together;
* only rank 0 writes checkpoints; every worker reports (Ray Train keeps rank 0's).

The process group is set up by the caller (Ray Train's ``TorchTrainer``, or
``torch.distributed.init_process_group`` in a test); this module never imports Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["SINGLE", "Workers", "unwrap"]


@dataclass(frozen=True, kw_only=True)
class Workers:
    """This process's place among the workers of one trial."""

    rank: int = 0
    world: int = 1

    def __post_init__(self) -> None:
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} of {self.world} workers: expected "
                             "0 <= rank < world, world >= 1")

    @classmethod
    def from_process_group(cls) -> Workers:
        """The rank and size of the initialised default process group (one worker if none)."""
        if dist.is_available() and dist.is_initialized():
            return cls(rank=dist.get_rank(), world=dist.get_world_size())
        return SINGLE

    @property
    def parallel(self) -> bool:
        return self.world > 1

    @property
    def lead(self) -> bool:
        """Rank 0: the worker that writes checkpoints."""
        return self.rank == 0

    def check_batch(self, batch_size: int) -> None:
        """The global batch must split into equal shares (else DDP's average is biased)."""
        if batch_size % self.world:
            raise ValueError(f"train.batch_size: got {batch_size}, expected a multiple of "
                             f"resources.workers ({self.world})")

    def local(self, rows: torch.Tensor) -> torch.Tensor:
        """This worker's contiguous share of a global batch (dim 0)."""
        if not self.parallel:
            return rows
        return rows.chunk(self.world, dim=0)[self.rank]

    def mean(self, value: float, device: torch.device) -> float:
        """``value`` averaged over the workers (every worker gets the same number)."""
        if not self.parallel:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return float(t.item()) / self.world

    def total(self, value: int, device: torch.device) -> int:
        """``value`` summed over the workers (tokens of the global batch)."""
        if not self.parallel:
            return value
        t = torch.tensor([value], dtype=torch.int64, device=device)
        dist.all_reduce(t)
        return int(t.item())

    def wrap(self, model: torch.nn.Module, device: torch.device) -> Any:
        """``model`` in DistributedDataParallel when there are several workers."""
        if not self.parallel:
            return model
        ids = [device.index] if device.type == "cuda" and device.index is not None else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


SINGLE = Workers()
"""One worker: the loop as it always ran."""


def unwrap(model: Any) -> Any:
    """The model inside a DDP (and ``torch.compile``) wrapper: families call model methods
    other than ``forward`` (the guidance penalty), which the wrappers do not pass on."""
    if isinstance(model, torch.nn.Module) and hasattr(model, "_orig_mod"):  # torch.compile
        model = model._orig_mod
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model.module
    return model
