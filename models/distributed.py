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
* with ``train.grad_accum`` > 1 the gradients are synchronised once per optimizer step,
  on the last micro-batch (:meth:`Workers.accumulating`: DDP's ``no_sync``, FSDP's
  ``set_requires_gradient_sync``); the earlier micro-batches accumulate locally;
* each worker evaluates its share of the validation batches (:meth:`Workers.share`) and
  the sums are added over the workers (:meth:`Workers.sums`, :meth:`Workers.gather`), so
  every worker reports the one-worker value;
* only rank 0 writes checkpoints; every worker reports (Ray Train keeps rank 0's).

``train.parallel: fsdp`` shards the model instead of replicating it (:meth:`Workers.shard`:
torch's FSDP2 ``fully_shard``, one unit per block the workload names, then the root for the
embeddings, norms and head). Each worker holds 1/N of the parameters, gradients and
optimizer state; a block's parameters are gathered for its forward and backward only.
The gradient is reduce-scattered as the mean over the workers, so the numbers are those
of DDP. In bf16 (``train.precision: bf16``, or ``auto`` on a GPU) the shards stay fp32 (the
optimizer's master weights), the gathered parameters and the compute are bf16 and the
gradients are reduced in fp32 (:func:`mixed_precision`); the loop's bf16 autocast stays
on around them, so the loss, norms and softmax run in fp32 as in a one-worker bf16 run.
Checkpoints stay full (:meth:`Workers.full_state`): every worker takes part in gathering
them (at the evaluations that write one: ``train.checkpoint_every``), rank 0 writes them
in the format of a one-worker run, so a one-worker run (and ``sublayer train``) resumes
from them, and an FSDP run from theirs.

The process group is set up by the caller (Ray Train's ``TorchTrainer``, or
``torch.distributed.init_process_group`` in a test); this module never imports Ray.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import torch
import torch.distributed as dist

from sublayer_search.models.errors import ConfigError

__all__ = ["SINGLE", "Parallel", "Workers", "mixed_precision", "unwrap"]

Parallel = Literal["ddp", "fsdp"]
T = TypeVar("T")
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

    def sums(self, values: Sequence[float], device: torch.device) -> list[float]:
        """``values`` added over the workers, element by element, in float64 (one
        all-reduce; every worker gets the same numbers)."""
        if not self.parallel:
            return [float(v) for v in values]
        t = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(t)
        return [float(v) for v in t.tolist()]

    def gather(self, items: list[T]) -> list[T]:
        """Every worker's ``items`` (picklable), concatenated in rank order, on every worker."""
        if not self.parallel:
            return items
        parts: list[list[T] | None] = [None] * self.world
        dist.all_gather_object(parts, items)
        return [item for part in parts for item in part or []]

    def share(self, batches: Iterable[T]) -> Iterator[tuple[int, T, bool]]:
        """This worker's share of the evaluation ``batches``: ``(index, batch, counted)``
        for batch ``index`` when ``index % world == rank``. Sharded, a forward gathers the
        parameters from every worker, so every worker must run as many: a worker with
        fewer batches (their number not a multiple of the workers) runs batch 0 again,
        with ``counted`` False (add nothing of it). Every worker walks all of
        ``batches`` (cheap: slicing, no forward) and so knows their number."""
        first: T | None = None
        n = mine = 0
        for index, batch in enumerate(batches):
            n += 1
            first = batch if first is None else first
            if index % self.world == self.rank:
                mine += 1
                yield index, batch, True
        if self.sharded and first is not None:
            for _ in range(-(-n // self.world) - mine):
                yield 0, first, False

    @contextmanager
    def accumulating(self, model: Any, *, last: bool) -> Iterator[None]:
        """The context of one micro-batch's forward and backward: the gradients are
        synchronised (DDP's all-reduce, FSDP's reduce-scatter) only when ``last``, the
        last micro-batch of an optimizer step; before it they accumulate locally (DDP's
        ``no_sync``, FSDP's ``set_requires_gradient_sync(False)``). ``model``: the
        model the loop runs (DDP, the sharded model, or either compiled)."""
        inner = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        if self.sharded:
            inner.set_requires_gradient_sync(last)
            yield
        elif self.parallel and not last:
            with inner.no_sync():
                yield
        else:
            yield

    def shard(self, model: torch.nn.Module, blocks: Sequence[torch.nn.Module] | None, *,
              bf16: bool = False) -> torch.nn.Module:
        """``model`` sharded in place with FSDP2 when :attr:`sharded`: each of ``blocks`` one
        unit, the root the rest. Call it before building the optimizer (the parameters
        become ``DTensor`` shards). ``blocks`` None: the workload cannot be sharded.
        ``bf16``: gather and compute in bf16, reduce the gradients in fp32
        (:func:`mixed_precision`)."""
        if not self.sharded:
            return model
        if blocks is None:
            raise ConfigError("train.parallel", self.strategy,
                              "ddp: this model family cannot be sharded (FSDP supports "
                              "language models without guidance)")
        from torch.distributed.fsdp import fully_shard

        policy = mixed_precision(bf16)
        for block in blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
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


def mixed_precision(bf16: bool) -> Any:
    """FSDP2's mixed-precision policy: with ``bf16``, the parameters gathered (and the
    compute) in bf16 and the gradients reduce-scattered in fp32 (sharded parameters and
    optimizer state stay fp32); without, everything in the parameters' dtype."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not bf16:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


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
