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

``train.parallel: fsdp`` shards the model instead of replicating it (:meth:`Workers.shard`:
torch's FSDP2 ``fully_shard``, one unit per block the family names, then the root for the
embeddings, norms and head). Each worker holds 1/N of the parameters, gradients and
optimizer state; a block's parameters are gathered for its forward and backward only.
The gradient is reduce-scattered as the mean over the workers, so the numbers are those
of DDP. Checkpoints stay full (:meth:`Workers.full_state`): every worker takes part in
gathering them, rank 0 writes them in the format of a one-worker run, so a one-worker run
(and ``sublayer train``) resumes from them, and an FSDP run from theirs.

The process group is set up by the caller (Ray Train's ``TorchTrainer``, or
``torch.distributed.init_process_group`` in a test); this module never imports Ray.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
import torch.distributed as dist

from sublayer_search.models.errors import ConfigError

__all__ = ["SINGLE", "Parallel", "Workers", "unwrap"]

Parallel = Literal["ddp", "fsdp"]
StateDicts = tuple[dict[str, Any], dict[str, Any]]
"""(model state, optimizer state) in the format of ``Module.state_dict()`` and
``Optimizer.state_dict()`` of one worker."""


@dataclass(frozen=True, kw_only=True)
class Workers:
    """This process's place among the workers of one trial."""

    rank: int = 0
    world: int = 1
    strategy: Parallel = "ddp"
    """``train.parallel``: replicate (``ddp``) or shard (``fsdp``) the model."""

    def __post_init__(self) -> None:
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} of {self.world} workers: expected "
                             "0 <= rank < world, world >= 1")

    @classmethod
    def from_process_group(cls, strategy: Parallel = "ddp") -> Workers:
        """The rank and size of the initialised default process group (one worker if none)."""
        if dist.is_available() and dist.is_initialized():
            return cls(rank=dist.get_rank(), world=dist.get_world_size(), strategy=strategy)
        return replace(SINGLE, strategy=strategy)

    def using(self, strategy: Parallel) -> Workers:
        """These workers with ``train.parallel`` = ``strategy``."""
        return self if strategy == self.strategy else replace(self, strategy=strategy)

    @property
    def parallel(self) -> bool:
        return self.world > 1

    @property
    def sharded(self) -> bool:
        """The model is sharded across several workers (``fsdp`` and more than one)."""
        return self.strategy == "fsdp" and self.parallel

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

    def shard(self, model: torch.nn.Module,
              blocks: Sequence[torch.nn.Module] | None) -> torch.nn.Module:
        """``model`` sharded in place with FSDP2 when :attr:`sharded`: each of ``blocks`` one
        unit, the root the rest. Call it before building the optimizer (the parameters
        become ``DTensor`` shards). ``blocks`` None: the family cannot be sharded."""
        if not self.sharded:
            return model
        if blocks is None:
            raise ConfigError("train.parallel", self.strategy,
                              "ddp: this model family cannot be sharded (FSDP supports "
                              "language models without guidance)")
        from torch.distributed.fsdp import fully_shard

        for block in blocks:
            fully_shard(block)
        fully_shard(model)
        return model

    def full_state(self, model: torch.nn.Module,
                   optimizer: torch.optim.Optimizer) -> StateDicts | None:
        """The full model and optimizer state on rank 0 (None elsewhere). Sharded, every
        worker must call it (it gathers the shards); the optimizer state is keyed by
        parameter index, as ``optimizer.state_dict()`` of one worker keys it."""
        if not self.sharded:
            return (model.state_dict(), optimizer.state_dict()) if self.lead else None
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)  # rank 0 only
        weights = get_model_state_dict(model, options=options)
        optim = get_optimizer_state_dict(model, optimizer, options=options)
        if not self.lead:
            return None
        index = {name: i for i, name in enumerate(_names(model, optimizer))}
        return dict(weights), _rekey(dict(optim), index)

    def load_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   weights: dict[str, Any], optim: dict[str, Any]) -> None:
        """Load a full state (:meth:`full_state`, or a one-worker checkpoint) into this
        worker's model and optimizer (its shards when sharded; every worker calls it)."""
        if not self.sharded:
            model.load_state_dict(weights)
            optimizer.load_state_dict(optim)
            return
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True)
        set_model_state_dict(model, weights, options=options)
        names = dict(enumerate(_names(model, optimizer)))
        set_optimizer_state_dict(model, optimizer, _rekey(optim, names), options=options)

    def wrap(self, model: torch.nn.Module, device: torch.device) -> Any:
        """``model`` in DistributedDataParallel when there are several workers (sharded:
        the model itself, FSDP already took it over)."""
        if not self.parallel or self.sharded:
            return model
        ids = [device.index] if device.type == "cuda" and device.index is not None else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)


SINGLE = Workers()
"""One worker: the loop as it always ran."""


def _names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The names of the optimizer's parameters, in the order of its parameter groups
    (the order ``Optimizer.state_dict()`` numbers them in)."""
    name_of = {id(p): name for name, p in model.named_parameters()}
    return [name_of[id(p)] for group in optimizer.param_groups for p in group["params"]]


def _rekey(optim: dict[str, Any], keys: dict[Any, Any]) -> dict[str, Any]:
    """An optimizer state dict with its parameter keys mapped through ``keys``: names to
    indices (torch's distributed checkpoint keys by name) and back."""
    return {"state": {keys[k]: v for k, v in optim["state"].items()},
            "param_groups": [{**g, "params": [keys[k] for k in g["params"]]}
                             for g in optim["param_groups"]]}


def unwrap(model: Any) -> Any:
    """The model inside a DDP (and ``torch.compile``) wrapper: families call model methods
    other than ``forward`` (the guidance penalty), which the wrappers do not pass on."""
    if isinstance(model, torch.nn.Module) and hasattr(model, "_orig_mod"):  # torch.compile
        model = model._orig_mod
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model.module
    return model
