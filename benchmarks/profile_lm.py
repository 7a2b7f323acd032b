"""Torch-profiler view of one model's training step, shape as in ``model_throughput.py``.

Prints the top operators by self CPU time (forward + backward + AdamW) over a few
profiled steps after warm-up, for OrderedLM and/or Hugging Face GPT-2:

    .venv/bin/python benchmarks/profile_lm.py --model ordered --steps 5 --top 20
    .venv/bin/python benchmarks/profile_lm.py --model both --json > profile.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_throughput import build_models, make_step  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("ordered", "gpt2", "both"), default="ordered")
    p.add_argument("--steps", type=int, default=5, help="profiled steps")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--top", type=int, default=20, help="operators to list")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    # the shape flags of model_throughput.py, same defaults
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--adamw", choices=("plain", "fused"), default="plain")
    p.add_argument("--cpu-gemm", choices=("onednn", "blas"), default="onednn",
                   help="float32 CPU GEMM of OrderedLM (models.kernels.linear)")
    args = p.parse_args(argv)
    args.device, args.compile = "cpu", False
    return args


def top_ops(step: object, args: argparse.Namespace) -> list[dict[str, object]]:
    """Operators of ``args.steps`` profiled steps, most self CPU time first."""
    assert callable(step)
    for _ in range(args.warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    return [
        {
            "op": e.key,
            "calls": e.count // args.steps,
            "self_ms_per_step": round(e.self_cpu_time_total / 1e3 / args.steps, 2),
            "share": round(e.self_cpu_time_total / total, 4),
        }
        for e in events[: args.top]
    ]


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    _, ours, gpt2 = build_models(args)
    names = ("ordered", "gpt2") if args.model == "both" else (args.model,)
    models = {"ordered": (ours, "ours"), "gpt2": (gpt2, "hf")}
    result: dict[str, object] = {"torch": torch.__version__, "threads": args.threads}
    for name in names:
        model, kind = models[name]
        gemm = args.cpu_gemm if kind == "ours" else None
        ops = top_ops(make_step(model, kind, args, gemm), args)
        result[name] = ops
        if not args.json:
            print(f"\n{name}: top {args.top} by self CPU time, per step")
            print(f"{'op':<44} {'calls':>6} {'ms':>9} {'share':>7}")
            for row in ops:
                print(
                    f"{str(row['op'])[:44]:<44} {row['calls']:>6} "
                    f"{row['self_ms_per_step']:>9.2f} {row['share']:>7.1%}"
                )
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
