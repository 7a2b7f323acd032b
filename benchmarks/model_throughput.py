"""Training throughput of OrderedLM vs. Hugging Face GPT-2 of the same shape.

Both models: same d, heads, layers (interleaved order (sf)^n), d_ff = 4d, vocabulary,
context, learned positions, tied embeddings, GELU, dropout 0, AdamW. A training step is
forward + backward + optimizer step. The two models are timed in alternating rounds so
that background load hits both alike; tokens/s come from the median round (the best
round, and tokens per process-CPU-second for shared machines, are reported too), with a
bootstrap 95 % interval of the ratio over the paired rounds: on a noisy machine a
target counts as met only where the interval's low end clears it.

Cross-layer guidance (Crossformer): the same OrderedLM with each ``--guidance`` label
(default: hard and soft guidance on all three blocks, ``hg-kq+v+ffn,sg-kq+v+ffn``; ``""``
for none) is timed in the same rounds; ``guidance_ratio`` is its tokens/s over the
unguided model's. Hard guidance keeps q, k and v as three matrices (one matmul over their
concatenation); soft guidance adds its regulariser to every step's loss. The unguided
model keeps the fused q/k/v projection, so ``ratio`` (ordered vs. GPT-2) is unchanged.

    .venv/bin/python benchmarks/model_throughput.py --rounds 9 --steps 3 --guidance ""
    .venv/bin/python benchmarks/model_throughput.py --threads 2
    .venv/bin/python benchmarks/model_throughput.py --device cuda --batch 16 --context 1024 --json

On the CPU, OrderedLM's float32 products run on oneDNN (:mod:`models.kernels.linear`;
``--cpu-gemm blas`` for BLAS as ``F.linear`` runs them, ``--cpu-gemm both`` times the
model both ways in the same rounds, ``ordered-blas``); GPT-2 runs as Hugging Face ships it.

``faults/step`` is the minor page faults of a step (median round): a fresh buffer of a few
MB costs one fault per 4 KiB page, about 2 µs each on this project's machine. Hugging
Face's head makes fresh (B·T, V) logits buffers every step; glibc maps buffers that large
anew and unmaps them when freed, so much of the ratio on the CPU is those faults. Where
glibc keeps freed memory (``MALLOC_MMAP_THRESHOLD_=4294967296
MALLOC_TRIM_THRESHOLD_=17179869184`` in the environment, for both models alike) both
models fault close to never and the ratio is far smaller (README, Speed).

Needs ``transformers`` (the ``bench`` extra). On CUDA the steps run under bf16 autocast
and the MFU is ``tokens/s · 3 · flops_per_token / peak`` (forward + 2× for backward).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sublayer_search.models.accounting import flops_per_token, param_count  # noqa: E402
from sublayer_search.models.config import ModelConfig  # noqa: E402
from sublayer_search.models.guidance.config import GuidanceConfig  # noqa: E402
from sublayer_search.models.kernels import linear as lin  # noqa: E402
from sublayer_search.models.lm import OrderedLM  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4, help="transformer layers (order (sf)^n)")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per model")
    p.add_argument("--steps", type=int, default=3, help="timed steps per model per round")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=989.0,
        help="peak dense bf16 TFLOP/s for the MFU (H100 SXM: 989)",
    )
    p.add_argument("--guidance", default="hg-kq+v+ffn,sg-kq+v+ffn",
                   help="comma-separated guidance labels also timed ('' for none)")
    p.add_argument("--cpu-gemm", choices=("onednn", "blas", "both"), default="onednn",
                   help="float32 CPU GEMM of OrderedLM (models.kernels.linear); both: also time "
                        "'ordered-blas', the same model on BLAS, in the same rounds")
    p.add_argument("--adamw", choices=("plain", "fused"), default="plain",
                   help="AdamW of every model: torch's default (plain) or fused=True, as "
                        "the sweep trainer and Hugging Face's Trainer use it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    return p.parse_args(argv)


def build_models(args: argparse.Namespace) -> tuple[ModelConfig, torch.nn.Module, torch.nn.Module]:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    transformers.logging.set_verbosity_error()

    cfg = ModelConfig(
        order=f"interleaved({args.layers})",
        vocab_size=args.vocab,
        d_model=args.d_model,
        n_heads=args.n_heads,
        d_ff=4 * args.d_model,
        context=args.context,
        dropout=0.0,
        activation="gelu",
        positions="learned",
        tie_embeddings=True,
    )
    torch.manual_seed(args.seed)
    ours = OrderedLM(cfg)
    hf_cfg = GPT2Config(
        vocab_size=args.vocab,
        n_positions=args.context,
        n_embd=args.d_model,
        n_layer=args.layers,
        n_head=args.n_heads,
        n_inner=4 * args.d_model,
        activation_function="gelu",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        use_cache=False,
        bos_token_id=None,
        eos_token_id=None,
    )
    hf_cfg._attn_implementation = "sdpa"
    gpt2 = GPT2LMHeadModel(hf_cfg)
    return cfg, ours, gpt2


def guided_models(cfg: ModelConfig, args: argparse.Namespace) -> dict[str, OrderedLM]:
    """label → the OrderedLM of ``cfg`` with that guidance."""
    out = {}
    for label in filter(None, (s.strip() for s in args.guidance.split(","))):
        guided = dataclasses.replace(cfg, guidance=GuidanceConfig.from_label(label))
        torch.manual_seed(args.seed)
        out[label] = OrderedLM(guided)
        assert sum(p.numel() for p in out[label].parameters()) == param_count(guided)
    return out


def make_step(model: torch.nn.Module, kind: str, args: argparse.Namespace,
              gemm: str | None = None) -> Callable[[], float]:
    """One training step; ``gemm`` sets the CPU GEMM of :mod:`models.kernels.linear` around it."""
    device = torch.device(args.device)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                            fused=True if args.adamw == "fused" else None)
    run = torch.compile(model) if args.compile else model
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    )
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, args.vocab, (args.batch, args.context), generator=gen).to(device)
    y = x.roll(-1, dims=1)

    def step() -> float:
        previous = lin.cpu_gemm()
        if gemm is not None:
            lin.set_cpu_gemm(gemm)
        try:
            return train_step()
        finally:
            lin.set_cpu_gemm(previous)

    def train_step() -> float:
        with autocast:
            loss = run(x, y).loss if kind == "ours" else run(input_ids=x, labels=x).loss
            if kind == "ours" and model.cfg.guidance.mode == "soft":  # type: ignore[union-attr]
                loss = loss + model.cfg.guidance.alpha * model.guidance_penalty()  # type: ignore[operator]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step


def _minor_faults() -> int:
    """Minor page faults of this process so far (0 where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def ratio_interval(ours_s: list[float], other_s: list[float], *, level: float = 0.95,
                   seed: int = 0) -> tuple[float, float]:
    """Bootstrap percentile interval of the tokens/s ratio of medians (``ours`` over
    ``other``) from per-round seconds; the rounds are resampled in pairs, since both
    models ran in the same round (scipy's ``bootstrap``, 2,000 resamples)."""
    import numpy as np
    from scipy.stats import bootstrap

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(b, axis=axis) / np.median(a, axis=axis)  # seconds → tokens/s

    res = bootstrap((np.asarray(ours_s), np.asarray(other_s)), ratio, paired=True,
                    vectorized=True, confidence_level=level, n_resamples=2000,
                    method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def timed(step: Callable[[], float], n: int, device: str) -> tuple[float, float, int]:
    """Wall-clock and process CPU seconds of ``n`` steps, and their minor page faults."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start, cpu, faults = time.perf_counter(), time.process_time(), _minor_faults()
    for _ in range(n):
        step()  # float(loss) synchronises every step on CUDA
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, time.process_time() - cpu, _minor_faults() - faults


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg, ours, gpt2 = build_models(args)
    params = {
        "ordered": sum(p.numel() for p in ours.parameters()),
        "gpt2": sum(p.numel() for p in gpt2.parameters()),
    }
    assert params["ordered"] == param_count(cfg)
    ours_gemm = "blas" if args.cpu_gemm == "blas" else "onednn"
    steps = {"ordered": make_step(ours, "ours", args, ours_gemm),
             "gpt2": make_step(gpt2, "hf", args)}
    if args.cpu_gemm == "both":
        params["ordered-blas"] = params["ordered"]
        steps["ordered-blas"] = make_step(copy.deepcopy(ours), "ours", args, "blas")
    for label, model in guided_models(cfg, args).items():
        params[label] = sum(p.numel() for p in model.parameters())
        steps[label] = make_step(model, "ours", args, ours_gemm)
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    wall: dict[str, list[float]] = {name: [] for name in steps}
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    faults: dict[str, list[int]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(args.rounds):  # alternate who goes first
        for name in names if r % 2 == 0 else names[::-1]:
            seconds, cpu_seconds, n_faults = timed(steps[name], args.steps, args.device)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
            faults[name].append(n_faults)
    tokens = args.batch * args.context * args.steps  # per round
    tps = {name: tokens / statistics.median(s) for name, s in wall.items()}
    best = {name: tokens / min(s) for name, s in wall.items()}
    per_cpu = {name: tokens / statistics.median(s) for name, s in cpu.items()}
    fpt = flops_per_token(cfg)
    result = {
        "device": (
            torch.cuda.get_device_name(args.device)
            if args.device.startswith("cuda")
            else args.device
        ),
        "threads": args.threads,
        "torch": torch.__version__,
        "cpu_gemm": ours_gemm if args.device == "cpu" else None,
        "adamw": args.adamw,
        "shape": {
            k: getattr(args, k)
            for k in ("d_model", "n_heads", "layers", "vocab", "context", "batch")
        },
        "params": params,
        "gpt2_attention": gpt2.config._attn_implementation,
        "flops_per_token": fpt,
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "ratio": round(tps["ordered"] / tps["gpt2"], 3),
        # how far the machine's noise moves that ratio: a target is met only above it
        "ratio_ci95": [round(x, 3) for x in ratio_interval(wall["ordered"], wall["gpt2"])]
        if args.rounds > 1 else None,
        "best_tokens_per_s": {k: round(v, 1) for k, v in best.items()},
        "best_ratio": round(best["ordered"] / best["gpt2"], 3),
        # tokens per process-CPU-second: robust when other jobs share the cores
        "tokens_per_cpu_s": {k: round(v, 1) for k, v in per_cpu.items()},
        "cpu_ratio": round(per_cpu["ordered"] / per_cpu["gpt2"], 3),
        # fresh pages touched per step (median round): what a fresh large buffer costs
        "page_faults_per_step": {k: round(statistics.median(v) / args.steps)
                                 for k, v in faults.items()},
        "guidance_ratio": {k: round(tps[k] / tps["ordered"], 3) for k in steps
                           if k not in ("ordered", "gpt2", "ordered-blas")},
        "guidance_cpu_ratio": {k: round(per_cpu[k] / per_cpu["ordered"], 3) for k in steps
                               if k not in ("ordered", "gpt2", "ordered-blas")},
    }
    if "ordered-blas" in steps:
        result["blas_ratio"] = round(tps["ordered-blas"] / tps["gpt2"], 3)
        result["onednn_over_blas"] = round(tps["ordered"] / tps["ordered-blas"], 3)
    if args.device.startswith("cuda"):
        peak = args.peak_tflops * 1e12
        result["mfu"] = {k: round(v * 3 * fpt / peak, 4) for k, v in tps.items()}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"device {result['device']}, threads {args.threads}, shape {result['shape']}, "
              f"AdamW {args.adamw}")
        width = max(12, *(len(k) + 10 for k in steps))
        print(
            f"{'model':<{width}} {'params':>12} {'tokens/s':>10} {'best':>10} {'tok/cpu-s':>10}"
            + f" {'faults/step':>12}" + ("    MFU" if "mfu" in result else "")
        )
        for k in steps:
            mfu = f" {result['mfu'][k]:6.1%}" if "mfu" in result else ""
            print(
                f"{k:<{width}} {params[k]:>12,} {tps[k]:>10,.0f} {best[k]:>10,.0f} "
                f"{per_cpu[k]:>10,.0f} {result['page_faults_per_step'][k]:>12,}{mfu}"
            )
        print(
            f"{'ratio':<{width}} {'':>12} {result['ratio']:>10.3f} {result['best_ratio']:>10.3f} "
            f"{result['cpu_ratio']:>10.3f}"
        )
        if result["ratio_ci95"] is not None:
            lo, hi = result["ratio_ci95"]
            print(f"{'ratio 95% CI':<{width}} {'':>12} {lo:>10.3f} {hi:>10.3f}   "
                  "(bootstrap over paired rounds)")
        if "blas_ratio" in result:
            print(f"{'ordered-blas / gpt2':<{width}} {'':>12} {result['blas_ratio']:>10.3f}")
            print(f"{'ordered / ordered-blas':<{width}} {'':>12} "
                  f"{result['onednn_over_blas']:>10.3f}")
        for k, v in result["guidance_ratio"].items():
            print(f"{k + ' / ordered':<{width}} {'':>12} {v:>10.3f} {'':>10} "
                  f"{result['guidance_cpu_ratio'][k]:>10.3f}")
    return result


if __name__ == "__main__":
    main()
