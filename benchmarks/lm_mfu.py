"""Model FLOPs utilisation of the paper-size LM: bf16 autocast + ``torch.compile``.

The ``press2020`` preset (Baevski & Auli / Press et al.: (sf)^16, d 1024, 16 heads,
d_ff 4096, adaptive input + tied adaptive softmax over 267,735 words) at context 3072,
trained with AdamW under bf16 autocast through ``torch.compile``. MFU is
``tokens/s · 3 · flops_per_token / peak`` (:func:`models.accounting.flops_per_token`:
forward FLOPs at the full context; for the adaptive softmax it counts every tail, an
upper bound of what training computes):

    .venv/bin/python benchmarks/lm_mfu.py --device cuda --batch 2 --peak-tflops 989

``--cpu-mirror`` runs the same path (preset, autocast to bf16, compile, AdamW, the MFU
formula) on the CPU at a scaled-down shape — d 128, 4 heads, d_ff 512, (sf)^2,
context 256, vocabulary 8192 with cutoffs (2000, 6000) — so that the GPU run's code is
exercised where no GPU is at hand:

    .venv/bin/python benchmarks/lm_mfu.py --cpu-mirror --steps 3
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

from sublayer_search.models.accounting import flops_per_token, param_count  # noqa: E402
from sublayer_search.models.config import ModelConfig, model_preset  # noqa: E402
from sublayer_search.models.lm import OrderedLM  # noqa: E402

MIRROR = dict(
    d_model=128,
    n_heads=4,
    d_ff=512,
    layers=2,
    context=256,
    vocab=8192,
    cutoffs=(2000, 6000),
    batch=2,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="press2020")
    p.add_argument("--d-model", type=int, help="default: the preset's")
    p.add_argument("--n-heads", type=int)
    p.add_argument("--d-ff", type=int)
    p.add_argument("--layers", type=int, help="order (sf)^layers; default: the preset's order")
    p.add_argument("--vocab", type=int)
    p.add_argument("--cutoffs", type=int, nargs="*")
    p.add_argument("--context", type=int, help="default 3072 (--cpu-mirror: 256)")
    p.add_argument("--batch", type=int, help="default 1 (--cpu-mirror: 2)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-autocast", action="store_true", help="float32 instead of bf16")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps (compilation)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--peak-tflops", type=float, help="bf16 dense peak (H100 SXM: 989)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    p.add_argument("--cpu-mirror", action="store_true", help="the GPU path, small, on CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.cpu_mirror:
        args.device = "cpu"
        for key, value in MIRROR.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    args.context = args.context or 3072
    args.batch = args.batch or 1
    return args


def config(args: argparse.Namespace) -> ModelConfig:
    overrides: dict[str, object] = {"context": args.context}
    for key in ("d_model", "n_heads", "d_ff", "cutoffs"):
        if getattr(args, key) is not None:
            overrides[key] = tuple(args.cutoffs) if key == "cutoffs" else getattr(args, key)
    if args.vocab is not None:
        overrides["vocab_size"] = args.vocab
    if args.layers is not None:
        overrides["order"] = f"(sf)^{args.layers}"
    return model_preset(args.preset, **overrides)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = config(args)
    torch.manual_seed(args.seed)
    model = OrderedLM(cfg).to(device).train()
    assert sum(p.numel() for p in model.parameters()) == param_count(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    run = model if args.no_compile else torch.compile(model)
    vocab = cfg.require_vocab()
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, vocab, (args.batch, args.context), generator=gen).to(device)
    y = x.roll(-1, dims=1)

    losses: list[torch.Tensor] = []  # detached, read after the timing (no sync per step)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=not args.no_autocast):
            loss = run(x, y).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    start = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync()
    warmup_s = time.perf_counter() - start
    seconds = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        sync()
        seconds.append(time.perf_counter() - start)
    tps = args.batch * args.context / statistics.median(seconds)
    fpt = flops_per_token(cfg)
    achieved = tps * 3 * fpt / 1e12
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "preset": args.preset,
        "shape": {
            "order": cfg.order,
            "d_model": cfg.d_model,
            "n_heads": cfg.n_heads,
            "d_ff": cfg.d_ff,
            "vocab": vocab,
            "cutoffs": list(cfg.cutoffs),
            "context": cfg.context,
            "batch": args.batch,
        },
        "params": param_count(cfg),
        "autocast_bf16": not args.no_autocast,
        "compiled": not args.no_compile,
        "warmup_s": round(warmup_s, 1),
        "tokens_per_s": round(tps, 1),
        "achieved_tflops": round(achieved, 4),
        "mfu": None if args.peak_tflops is None else round(achieved / args.peak_tflops, 4),
        # the same batch every step: the loss must be finite and fall
        "loss_first": round(float(losses[0]), 4),
        "loss_last": round(float(losses[-1]), 4),
    }
    if device.type == "cuda":
        result["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return result


if __name__ == "__main__":
    main()
