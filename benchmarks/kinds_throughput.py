"""Tokens/s and memory of each sublayer kind against self-attention at equal parameters.

One residual sublayer of each kind (``models.blocks.build_sublayer``, LayerNorm and
residual included), each sized to about 4d² weights, the weights of an ``s``:

* ``s`` self-attention, ``w`` sliding-window attention (``--window``), ``r`` the gated
  linear recurrence (4d² + d·H), all as built;
* ``f`` a feedforward of width 2d and ``e`` a mixture of ``--experts`` experts of width
  2d/E each (``top_k`` 2): the channel mixers at the same 4d².

A step is forward + backward of a (batch, context, d) input through the sublayer (a
sum of the output as the loss). The kinds are timed in alternating rounds so that
background load hits them alike; tokens/s is the median round's. Memory: on CUDA the
peak allocated during a step above the parameters; on the CPU the bytes the step saves
for backward (``torch.autograd.graph.saved_tensors_hooks``: the activations training
keeps, deterministic), and for each kind the state a sequence keeps at inference
(``spaces.kinds``: key/value cache of an ``s``, the window of a ``w``, the recurrence's
d²/H), in bytes at float32.

    .venv/bin/python benchmarks/kinds_throughput.py
    .venv/bin/python benchmarks/kinds_throughput.py --contexts 256,1024,4096 --json
    .venv/bin/python benchmarks/kinds_throughput.py --device cuda --batch 8 --d-model 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sublayer_search.models.blocks import build_sublayer  # noqa: E402
from sublayer_search.spaces.kinds import Dims, KindSettings, kind_of  # noqa: E402

KINDS = ("s", "w", "r", "f", "e")


def build(kind: str, args: argparse.Namespace) -> torch.nn.Module:
    d = args.d_model
    settings = KindSettings(window=args.window, experts=args.experts, top_k=2,
                            expert_ff=max(2 * d // args.experts, 1), chunk=args.chunk)
    torch.manual_seed(0)
    return build_sublayer(kind, d_model=d, n_heads=args.heads, d_ff=2 * d, settings=settings)


def saved_bytes(layer: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the tensors one forward saves for backward (distinct storages)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x).sum().backward()
    return sum(seen.values())


def step(layer: torch.nn.Module, x: torch.Tensor) -> None:
    layer.zero_grad(set_to_none=True)
    layer(x).sum().backward()


def measure(args: argparse.Namespace, context: int) -> list[dict[str, float | int | str]]:
    device = torch.device(args.device)
    layers = {k: build(k, args).to(device) for k in KINDS}
    x = torch.randn(args.batch, context, args.d_model, device=device, requires_grad=True)
    for layer in layers.values():  # warm up
        step(layer, x)
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for _ in range(args.rounds):
        for kind, layer in layers.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.steps):
                step(layer, x)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[kind].append((time.perf_counter() - start) / args.steps)
    rows = []
    for kind, layer in layers.items():
        params = sum(p.numel() for p in layer.parameters())
        dims = Dims(d_model=args.d_model, d_ff=2 * args.d_model, n_heads=args.heads,
                    context=context, settings=KindSettings(window=args.window))
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step(layer, x)
            memory = torch.cuda.max_memory_allocated() - base
        else:
            memory = saved_bytes(layer, x)
        tokens = args.batch * context
        rows.append({"kind": kind, "context": context, "params": params,
                     "tokens_per_s": tokens / statistics.median(times[kind]),
                     "train_memory_mb": memory / 2**20,
                     "state_bytes_per_seq": 4 * kind_of(kind).state(dims)})
    base = next(r for r in rows if r["kind"] == "s")
    for r in rows:
        r["vs_s_tokens"] = r["tokens_per_s"] / base["tokens_per_s"]
        r["vs_s_memory"] = r["train_memory_mb"] / base["train_memory_mb"]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--contexts", default="256,2048")
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [r for c in map(int, args.contexts.split(",")) for r in measure(args, c)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"d={args.d_model} heads={args.heads} batch={args.batch} window={args.window} "
          f"experts={args.experts} (top 2) chunk={args.chunk} device={args.device} "
          f"threads={torch.get_num_threads()}")
    print(f"{'kind':4} {'T':>5} {'params':>8} {'tokens/s':>10} {'vs s':>6} "
          f"{'train MB':>9} {'vs s':>6} {'state B/seq':>12}")
    for r in rows:
        print(f"{r['kind']:4} {r['context']:>5} {r['params']:>8,} {r['tokens_per_s']:>10,.0f} "
              f"{r['vs_s_tokens']:>6.2f} {r['train_memory_mb']:>9.1f} {r['vs_s_memory']:>6.2f} "
              f"{r['state_bytes_per_seq']:>12,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
