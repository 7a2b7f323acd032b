"""Several tiny trials sharing one GPU through Ray's fractional resources.

For each k in ``--shares`` (default 1 2 4) k identical trials run at once, each a Ray
task asking for ``num_cpus=1, num_gpus=1/k`` of a local Ray with one GPU (started as a
sweep starts it: :func:`search.run.local_ray.start_local_ray`, 127.0.0.1, token auth), and
each training the same tiny LM (``--preset tiny``, tinyshakespeare from
``$SUBLAYER_DATA_DIR``) through the project's one training loop
(:func:`models.training_loop.train` with :class:`models.lm_workload.LMWorkload`, as ``fit`` does).
The trials meet at a barrier (a Ray actor) once their model is built, so they train
side by side; inside its own process each trial stamps the start of its first timed step
and the end of its last (after ``torch.cuda.synchronize``). Reported per k:

* aggregate tokens/s = timed training tokens of all k trials / (last trial's end - first
  trial's start); Ray start-up, imports, model building and the one, final evaluation
  (``eval_every = steps``, one batch) lie outside the window;
* its ratio to k=1, and each trial's own tokens/s;
* on CUDA, each trial's peak memory (``torch.cuda.max_memory_allocated``) and device
  name (``torch.cuda.get_device_name``);
* the GPU each trial was given (``ray.get_gpu_ids()``, ``CUDA_VISIBLE_DEVICES``), and
  whether all k trials got the same single one (exit status 1 if some k did not);
* the device, torch, CUDA, Ray and Python versions and the exact command line.

The first ``--warmup`` steps of every trial (cuBLAS set-up, allocator growth) are trained
but not timed. Precision is the trainer's ``auto``: bf16 autocast on CUDA, float32 on CPU.

    .venv/bin/python benchmarks/gpu_sharing.py                    # CUDA: k = 1 2 4
    .venv/bin/python benchmarks/gpu_sharing.py --shares 1 2 4 8 --steps 500 --json

``--device cpu`` mirrors it where there is no GPU: Ray is started with a fake
``num_gpus=1``, so the scheduling is the GPU run's (fractions of GPU 0,
``CUDA_VISIBLE_DEVICES=0`` in every trial), but the trials train on the CPU with one
thread each (defaults there: k = 1 2, 100 steps). Its aggregate numbers only show the code path and k processes contending
for the machine's cores, not GPU sharing. A fresh ``HOME`` keeps Ray's auth token out of
yours:

    HOME=$(mktemp -d) .venv/bin/python benchmarks/gpu_sharing.py --device cpu --shares 1 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import torch

from sublayer_search.models.config import model_preset
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.lm_workload import LMWorkload, TrainConfig, TrialSpec
from sublayer_search.models.training_loop import StepContext

REPO = Path(__file__).resolve().parents[1]
BARRIER_TIMEOUT_S = 600.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if cuda else "cpu",
                   help="cuda (default when available) or cpu: the mirror, with a fake GPU")
    p.add_argument("--shares", type=int, nargs="+",
                   help="trials sharing the GPU, one run each (default: 1 2 4; cpu: 1 2)")
    p.add_argument("--preset", default="tiny", help="model preset (default tiny)")
    p.add_argument("--batch", type=int, default=16, help="sequences per step")
    p.add_argument("--steps", type=int, help="steps per trial (default 300; cpu: 100)")
    p.add_argument("--warmup", type=int, default=5, help="first steps, trained, not timed")
    p.add_argument("--data", default="tinyshakespeare", help="corpus of the registry")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = p.parse_args(argv)
    if args.device == "cuda" and not cuda:
        p.error("--device cuda: torch sees no GPU (use --device cpu for the mirror)")
    args.shares = args.shares or ([1, 2, 4] if args.device == "cuda" else [1, 2])
    args.steps = args.steps or (300 if args.device == "cuda" else 100)
    if min(args.shares) < 1 or args.steps < 1 or args.batch < 1:
        p.error("--shares, --steps and --batch must be positive")
    if not 0 <= args.warmup < args.steps:
        p.error("--warmup must be in [0, --steps)")
    return args


def trial_spec(args: argparse.Namespace) -> TrialSpec:
    """The one trial every share trains: one evaluation (of one batch), at the end."""
    return TrialSpec(
        model=model_preset(args.preset),
        data=DataConfig(name=args.data),
        train=TrainConfig(steps=args.steps, batch_size=args.batch, eval_every=args.steps,
                          eval_batches=1, log_every=args.steps, device=args.device,
                          seed=args.seed),
    )


def gpu_fraction(k: int) -> float:
    """``1/k`` rounded down to Ray's resource precision (0.0001), so k of them fit in 1."""
    return math.floor(10_000 / k) / 10_000


# -- inside a trial --------------------------------------------------------------------------
class Barrier:
    """A Ray actor (async): ``wait()`` returns once ``parties`` trials have called it."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived = parties, 0
        self.event = asyncio.Event()

    async def wait(self) -> int:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        await self.event.wait()
        return self.arrived


class TimedLM(LMWorkload):
    """The LM family, plus: wait at the barrier before step 0, stamp the start of step
    ``warmup`` and (through ``on_step``) the end of the last step, count timed tokens."""

    def __init__(self, spec: TrialSpec, *, barrier: Any, warmup: int) -> None:
        super().__init__(spec)
        self.barrier, self.warmup = barrier, warmup
        self.cuda = spec.train.device == "cuda"
        self.step, self.tokens, self.timed_steps = 0, 0, 0
        self.start = self.end = math.nan

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.time()  # one clock for every process of the machine

    def before_step(self, model: torch.nn.Module, step: int, total: int) -> None:
        import ray

        if step == 0:
            ray.get(self.barrier.wait.remote(), timeout=BARRIER_TIMEOUT_S)
        if step == self.warmup:
            self.start = self._now()
        self.step = step

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        loss, n_tokens = super().loss(model, ctx)
        if self.step >= self.warmup:
            self.tokens += n_tokens
        return loss, n_tokens

    def stop_clock(self, info: dict[str, float]) -> None:
        """``on_step`` of the loop; with ``log_every = steps`` called after the last step."""
        self.end = self._now()
        self.timed_steps = int(info["step"]) - self.warmup


def _device_name(cuda: bool) -> str:
    """The GPU's name on CUDA; the CPU's (or the machine's) on the mirror."""
    return torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine()


def run_trial(spec: TrialSpec, barrier: Any, warmup: int) -> dict[str, Any]:
    """One share: train ``spec`` through the loop; what it saw and how fast it went."""
    import ray

    from sublayer_search.models.training_loop import train

    torch.set_num_threads(1)
    family = TimedLM(spec, barrier=barrier, warmup=warmup)
    reports: list[dict[str, Any]] = []
    result = train(spec.train, family, lambda m, checkpoint=None: reports.append(m),
                   on_step=family.stop_clock)
    seconds = family.end - family.start
    out: dict[str, Any] = {
        "pid": os.getpid(), "status": result.status,
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device_name": _device_name(family.cuda),
        "start": family.start, "end": family.end, "seconds": seconds,
        "timed_steps": family.timed_steps, "tokens": family.tokens,
        "tokens_per_s": family.tokens / seconds,
        "final_train_loss": reports[-1].get("train_loss") if reports else None,
        "peak_mem_mib": None, "peak_reserved_mib": None,
    }
    if family.cuda:
        out["peak_mem_mib"] = torch.cuda.max_memory_allocated() / 2**20
        out["peak_reserved_mib"] = torch.cuda.max_memory_reserved() / 2**20
    return out


# -- the driver --------------------------------------------------------------------------------
def run_shares(spec: TrialSpec, k: int, warmup: int) -> dict[str, Any]:
    """k trials at once on the one GPU; their records and the aggregate."""
    import ray

    barrier: Any = ray.remote(num_cpus=0)(Barrier).remote(k)
    task = ray.remote(run_trial).options(num_cpus=1, num_gpus=gpu_fraction(k), max_retries=0)
    trials = ray.get([task.remote(spec, barrier, warmup) for _ in range(k)])
    ray.kill(barrier)
    trials.sort(key=lambda t: t["start"])
    first, last = min(t["start"] for t in trials), max(t["end"] for t in trials)
    tokens = sum(t["tokens"] for t in trials)
    seen = {(tuple(t["gpu_ids"]), t["cuda_visible_devices"], t["device_name"]) for t in trials}
    return {
        "k": k, "gpu_per_trial": gpu_fraction(k), "tokens": tokens,
        "wall_s": last - first, "aggregate_tokens_per_s": tokens / (last - first),
        "start_skew_s": max(t["start"] for t in trials) - first,
        "per_trial_tokens_per_s": [t["tokens_per_s"] for t in trials],
        "gpu_ids": sorted({g for t in trials for g in t["gpu_ids"]}),
        "shared_one_gpu": len(seen) == 1 and len(trials[0]["gpu_ids"]) == 1,
        "trials": trials,
    }


def _environment() -> None:
    os.environ.setdefault("SUBLAYER_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.pop("RAY_ADDRESS", None)  # a local Ray of its own, never a cluster's GPUs


def measure(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    import ray

    from sublayer_search.models.accounting import param_count
    from sublayer_search.models.data import load_corpus
    from sublayer_search.models.lm_workload import model_for_corpus
    from sublayer_search.search.run.local_ray import shutdown_ray, start_local_ray

    _environment()
    spec = trial_spec(args)
    model = model_for_corpus(spec.model, load_corpus(spec.data))  # tokenised once, here
    # One GPU: the real one on CUDA (the first visible), a declared one on the CPU mirror.
    start_local_ray(num_cpus=max(args.shares), num_gpus=1)
    try:
        gpus = ray.cluster_resources().get("GPU", 0.0)
        runs = [run_shares(spec, k, args.warmup) for k in args.shares]
    finally:
        shutdown_ray()
    base = next((r["aggregate_tokens_per_s"] for r in runs if r["k"] == 1), None)
    for run in runs:
        run["ratio_to_k1"] = None if base is None else run["aggregate_tokens_per_s"] / base
    cuda = args.device == "cuda"
    return {
        "device": args.device,
        "device_name": _device_name(cuda),
        "fake_gpu": not cuda, "ray_gpus": gpus, "cpu_count": os.cpu_count(),
        "torch": torch.__version__, "cuda": torch.version.cuda, "ray": ray.__version__,
        "python": platform.python_version(),
        "argv": argv, "command": shlex.join([_python(), "benchmarks/gpu_sharing.py", *argv]),
        "data_dir": os.environ["SUBLAYER_DATA_DIR"],
        "preset": args.preset, "params": param_count(model), "data": args.data,
        "batch": args.batch, "context": model.context, "steps": args.steps,
        "warmup": args.warmup, "timed_steps": args.steps - args.warmup,
        "precision": "bf16 autocast" if cuda else "float32",
        "threads_per_trial": 1, "results": runs,
    }


def _python() -> str:
    """The interpreter as typed in the repository root (``.venv/bin/python``)."""
    path = Path(sys.executable)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def print_table(out: dict[str, Any]) -> None:
    fake = " (fake GPU 0 declared to Ray; trials train on the CPU)" if out["fake_gpu"] else ""
    print(f"device {out['device']}: {out['device_name']}{fake}; torch {out['torch']} "
          f"(CUDA {out['cuda']}), ray {out['ray']}, python {out['python']}")
    print(f"{out['preset']} LM ({out['params']:,} params) on {out['data']}: batch {out['batch']} "
          f"x context {out['context']}, {out['timed_steps']} timed steps (+{out['warmup']} "
          f"untimed) per trial, {out['precision']}, {out['threads_per_trial']} thread per trial")
    print(f"command: {out['command']}")
    head = ("k", "gpu/trial", "aggregate tok/s", "vs k=1", "per-trial tok/s",
            "peak MiB/trial", "skew s", "GPU ids", "CUDA_VISIBLE", "shared")
    rows = []
    for r in out["results"]:
        per = r["per_trial_tokens_per_s"]
        mems = [t["peak_mem_mib"] for t in r["trials"]]
        visible = sorted({str(t["cuda_visible_devices"]) for t in r["trials"]})
        rows.append((str(r["k"]), f"{r['gpu_per_trial']:g}", f"{r['aggregate_tokens_per_s']:,.0f}",
                     "-" if r["ratio_to_k1"] is None else f"{r['ratio_to_k1']:.2f}x",
                     " ".join(f"{v:,.0f}" for v in per),
                     " ".join(_mib(m) for m in mems), f"{r['start_skew_s']:.2f}",
                     ",".join(r["gpu_ids"]), ",".join(visible),
                     "yes" if r["shared_one_gpu"] else "NO"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    for row in (head, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    out = measure(args, argv)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_table(out)
    return 0 if all(r["shared_one_gpu"] for r in out["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
