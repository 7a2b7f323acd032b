"""Helpers of the data-parallel tests (tests/models/test_dp_*.py): a real gloo process
group of two processes on 127.0.0.1, and counts of the collectives its ranks ran."""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, body: Callable[..., Any], out: str,
            args: tuple[Any, ...]) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = body(rank, *args)
        torch.save(result, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def on_workers(body: Callable[..., Any], out: Path, *args: Any) -> list[Any]:
    """``body(rank, *args)`` on each of two gloo workers (a module-level function of the
    test file); what each returned, by rank."""
    mp.spawn(_worker, args=(WORLD, free_port(), body, str(out), args), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@contextmanager
def collectives() -> Iterator[Counter[str]]:
    """Count the collectives this process runs inside the block, by c10d op
    (``allreduce_``, ``_reduce_scatter_base_``, ``_allgather_base_`` …), from torch's
    profiler: it records every op a process group dispatches, DDP's C++ reducer included
    (which a wrapper of the ``torch.distributed`` functions cannot see)."""
    from torch.profiler import ProfilerActivity, profile

    counts: Counter[str] = Counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        yield counts
    counts.update(e.name.removeprefix("c10d::") for e in prof.events()
                  if e.name.startswith("c10d::"))


@contextmanager
def watched(*names: str) -> Iterator[dict[str, list[torch.dtype]]]:
    """Record the dtype of the input of every call to ``torch.distributed.<name>`` (FSDP2
    calls ``all_gather_single`` and ``reduce_scatter_single`` through the module)."""
    seen: dict[str, list[torch.dtype]] = {name: [] for name in names}
    originals = {name: getattr(dist, name) for name in names}

    def wrap(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            # (output, input, …): positional or as ``input`` / ``input_tensor``
            tensor = args[1] if len(args) > 1 else kwargs.get("input", kwargs.get("input_tensor"))
            seen[name].append(tensor.dtype)
            return originals[name](*args, **kwargs)
        return call

    for name in names:
        setattr(dist, name, wrap(name))
    try:
        yield seen
    finally:
        for name, original in originals.items():
            setattr(dist, name, original)
