"""Tokens/s of one trial on N data-parallel workers against one worker, same global batch.

Each arm runs the one training loop (``lm_workload.fit``) for ``--steps`` steps with the same
seed, model and *global* batch: one process, or ``--workers`` processes in a real
process group (gloo on CPUs, NCCL on GPUs) that each keep their share of the batch and
average gradients through DDP, or hold a shard of the model through FSDP2
(``--parallel fsdp``, ``models/distributed.py``). Throughput is the global
tokens of the timed steps over their wall time (the first ``--warmup`` steps are left
out: process-group set-up and first-step allocation). Arms alternate over ``--rounds``;
the median round's ratio is reported with a bootstrap 95 % interval over rounds.

    .venv/bin/python benchmarks/data_parallel.py --rounds 5               # CPU, gloo, 2 workers
    .venv/bin/python benchmarks/data_parallel.py --rounds 5 --parallel fsdp  # sharded
    .venv/bin/python benchmarks/data_parallel.py --device cuda --preset small --batch 32 --json

The issue's target is >= 1.7x at 2 workers on GPUs. On a CPU machine, N workers of
``--threads`` threads each compete with one worker of the same threads: on 2 cores a
2-worker trial has the machine's cores, the single worker one core's worth
(``--threads 1``) — the figure says what data parallelism buys here, not on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec, fit


def _spec(args: argparse.Namespace) -> TrialSpec:
    train = TrainConfig(steps=args.warmup + args.steps, batch_size=args.batch,
                        eval_every=10**6, eval_batches=1, seed=0, device=args.device,
                        precision="fp32" if args.device == "cpu" else "bf16", log_every=1,
                        parallel=args.parallel)
    overrides: dict[str, Any] = {"order": args.order, "dropout": 0.0}
    if args.context:
        overrides["context"] = args.context
    return TrialSpec(model=model_preset(args.preset, **overrides),
                     data=DataConfig(name=args.data), train=train)


def _timed_fit(spec: TrialSpec, warmup: int) -> float:
    """Seconds of the steps after ``warmup`` (step times from ``on_step``)."""
    marks: list[float] = []

    def on_step(row: dict[str, float]) -> None:
        if dist.is_initialized():
            dist.barrier()  # every worker's step is done
        marks.append(time.perf_counter())

    fit(spec, None, on_step=on_step)
    return marks[-1] - marks[warmup - 1] if warmup >= 1 else marks[-1] - marks[0]


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, out: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(args.threads)
    backend = "nccl" if args.device == "cuda" else "gloo"
    if args.device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        seconds = _timed_fit(_spec(args), args.warmup)
        if rank == 0:
            Path(out).write_text(str(seconds))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one(args: argparse.Namespace) -> float:
    torch.set_num_threads(args.threads)
    return _timed_fit(_spec(args), args.warmup)


def _many(args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "seconds")
        mp.spawn(_worker, args=(args.workers, _free_port(), args, out), nprocs=args.workers,
                 join=True)
        return float(Path(out).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="timed steps per arm and round")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=16, help="the global batch")
    p.add_argument("--context", type=int, default=None)
    p.add_argument("--preset", default="debug")
    p.add_argument("--order", default="sfsfsfsf")
    p.add_argument("--data", default="tinyshakespeare")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--parallel", default="ddp", choices=["ddp", "fsdp"],
                   help="train.parallel of the N-worker arm (one worker: the whole model)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.device == "cuda" and torch.cuda.device_count() < args.workers:
        p.error(f"--workers: got {args.workers}, expected at most "
                f"{torch.cuda.device_count()} (CUDA devices here)")
    spec = _spec(args)
    tokens = args.steps * args.batch * spec.model.context
    one, many = [], []
    for _ in range(args.rounds):
        one.append(tokens / _one(args))
        many.append(tokens / _many(args))
    ratios = np.array(many) / np.array(one)
    rng = np.random.default_rng(0)
    boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
    result = {
        "device": args.device, "parallel": args.parallel, "workers": args.workers,
        "threads_per_worker": args.threads,
        "global_batch": args.batch, "context": spec.model.context, "preset": args.preset,
        "order": args.order, "rounds": args.rounds, "steps": args.steps,
        "tokens_per_s_1": statistics.median(one), f"tokens_per_s_{args.workers}":
        statistics.median(many), "ratio": float(np.median(ratios)),
        "ratio_ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>22}: {value}")
    if args.device == "cuda" and args.parallel == "ddp":  # the target is DDP's
        met = result["ratio_ci95"][0] >= 1.7
        print(f"target >= 1.7x at 2 workers: {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    main()
