"""Training throughput of OrderedSeq2Seq and IOT vs. Hugging Face M2M100 of the same shape.

M2M100 (fairseq's transformer with ``normalize_before``) is the Hugging Face
encoder–decoder closest to ours: pre-norm with a final LayerNorm per side, sinusoidal
positions, embeddings × √d, ReLU, one embedding shared by source, target and output head.
Both models: same d, heads, d_ff, layers (ours: encoder (sf)^n, decoder (scf)^n),
vocabulary, dropout 0, AdamW, the same padded batches, label-smoothed cross-entropy over
non-pad target tokens (M2M100: ``F.cross_entropy`` on its logits, as a user adds label
smoothing; ours: the fused head). What differs: M2M100 counts positions from the first
non-pad token and builds 4-D float masks. The plain model and M2M100 are timed in
alternating rounds (median round; tokens = non-pad target tokens); each IOT model with N
decoder orders is timed alternating with the plain model and reported as cost per step
relative to it (the paper: 1.72× at N = 2, 2.47× at N = 3 per epoch). Peak memory: a
child process per model (glibc's mmap threshold at 128 KiB, so freed buffers leave the
RSS) runs the warm-up and timed steps alone and reports its peak RSS over the RSS before
the first step: gradients, AdamW state, activations and transient buffers (CUDA:
``max_memory_allocated`` over the allocation before the first step).

    .venv/bin/python benchmarks/seq2seq_throughput.py --rounds 7 --steps 2 --iot 2 3

Needs ``transformers`` (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq  # noqa: E402
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, Seq2SeqConfig  # noqa: E402

PAD = 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--vocab", type=int, default=8192, help="joint (shared) vocabulary")
    p.add_argument("--length", type=int, default=64, help="longest source/target sentence")
    p.add_argument("--batch", type=int, default=16, help="sentence pairs per step")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--iot", type=int, nargs="*", default=[2, 3], help="IOT decoder orders N")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model")
    p.add_argument("--steps", type=int, default=2, help="timed steps per model per round")
    p.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory children")
    p.add_argument("--memory-of", help=argparse.SUPPRESS)  # child: one model's peak memory
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    return p.parse_args(argv)


def batch(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded (src, tgt_in, tgt_out): lengths uniform in [length/2, length]."""
    g = torch.Generator().manual_seed(args.seed)
    b, n = args.batch, args.length

    def sentences(extra: int) -> torch.Tensor:
        ids = torch.randint(3, args.vocab, (b, n + extra), generator=g)
        lengths = torch.randint(n // 2, n + 1, (b,), generator=g) + extra
        return ids.masked_fill(torch.arange(n + extra) >= lengths[:, None], PAD)

    src, tgt = sentences(0), sentences(1)
    return src, tgt[:, :-1], tgt[:, 1:]


def dims(args: argparse.Namespace) -> dict[str, object]:
    return dict(
        d_model=args.d_model,
        n_heads=args.n_heads,
        d_ff=args.d_ff,
        dropout=0.0,
        context=args.length + 1,
        src_vocab_size=args.vocab,
        tgt_vocab_size=args.vocab,
    )


def build(name: str, args: argparse.Namespace) -> torch.nn.Module:
    """``plain``, ``iot<N>`` or ``m2m100``."""
    torch.manual_seed(args.seed)
    n = args.layers
    if name == "plain":
        return OrderedSeq2Seq(
            Seq2SeqConfig(encoder_order=f"(sf)^{n}", decoder_order=f"(scf)^{n}", **dims(args))
        )
    if name.startswith("iot"):
        return IOTSeq2Seq(
            IOTConfig(encoder_layers=n, decoder_layers=n, decoder_size=int(name[3:]), **dims(args))
        )
    import transformers
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    transformers.logging.set_verbosity_error()
    cfg = M2M100Config(
        vocab_size=args.vocab,
        d_model=args.d_model,
        encoder_layers=n,
        decoder_layers=n,
        encoder_attention_heads=args.n_heads,
        decoder_attention_heads=args.n_heads,
        encoder_ffn_dim=args.d_ff,
        decoder_ffn_dim=args.d_ff,
        activation_function="relu",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        max_position_embeddings=args.length + 1,
        scale_embedding=True,
        pad_token_id=PAD,
        tie_word_embeddings=True,
        use_cache=False,
    )
    cfg._attn_implementation = "sdpa"
    return M2M100ForConditionalGeneration(cfg)


def make_step(model: torch.nn.Module, name: str, args: argparse.Namespace) -> Callable[[], float]:
    device = torch.device(args.device)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    )
    src, tgt_in, tgt_out = (t.to(device) for t in batch(args))
    ls = args.label_smoothing

    def loss() -> torch.Tensor:
        if name != "m2m100":
            return model(src, tgt_in, tgt_out, label_smoothing=ls).loss
        logits = model(
            input_ids=src,
            attention_mask=src.ne(PAD),
            decoder_input_ids=tgt_in,
            decoder_attention_mask=tgt_in.ne(PAD),
        ).logits
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            tgt_out.reshape(-1),
            ignore_index=PAD,
            label_smoothing=ls,
        )

    def step() -> float:
        with autocast:
            value = loss()
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
        return float(value.detach())

    return step


def rss_bytes(field: str = "VmRSS") -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak since the last reset) of this process."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_memory(name: str, args: argparse.Namespace) -> int:
    """Peak bytes one model's training steps add (run in this process alone)."""
    step = make_step(build(name, args), name, args)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        for _ in range(args.warmup + args.steps):
            step()
        return torch.cuda.max_memory_allocated() - base
    base = rss_bytes()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the RSS now
    for _ in range(args.warmup + args.steps):
        step()
    return rss_bytes("VmHWM") - base


def child_memory(name: str, argv: list[str]) -> int:
    # every large block mapped on its own, so that a freed one leaves the RSS at once
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    out = subprocess.run(
        [sys.executable, __file__, *argv, "--memory-of", name],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return int(out.strip().splitlines()[-1])


def alternate(steps: dict[str, Callable[[], float]], args: argparse.Namespace) -> dict[str, float]:
    """Median seconds per round of each step, rounds alternating who goes first."""
    wall: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.steps):
                steps[name]()
            wall[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in wall.items()}


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.memory_of:
        print(peak_memory(args.memory_of, args))
        return {}
    names = ["plain", "m2m100", *(f"iot{n}" for n in args.iot)]
    models = {name: build(name, args) for name in names}
    steps = {name: make_step(model, name, args) for name, model in models.items()}
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    tokens = int(batch(args)[2].ne(PAD).sum()) * args.steps  # non-pad target tokens per round
    head = alternate({k: steps[k] for k in ("plain", "m2m100")}, args)
    tps = {k: tokens / s for k, s in head.items()}
    iot_cost: dict[str, float] = {}
    for n in args.iot:
        pair = alternate({"plain": steps["plain"], f"iot{n}": steps[f"iot{n}"]}, args)
        tps[f"iot{n}"] = tokens / pair[f"iot{n}"]
        iot_cost[f"iot{n}"] = round(pair[f"iot{n}"] / pair["plain"], 3)
    result: dict = {
        "device": (
            torch.cuda.get_device_name(args.device)
            if args.device.startswith("cuda")
            else args.device
        ),
        "threads": args.threads,
        "torch": torch.__version__,
        "shape": {
            k: getattr(args, k)
            for k in ("d_model", "n_heads", "d_ff", "layers", "vocab", "length", "batch")
        },
        "params": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
        "target_tokens_per_step": tokens // args.steps,
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "ratio": round(tps["plain"] / tps["m2m100"], 3),
        "iot_cost_per_step": iot_cost,
    }
    if not args.no_memory:
        result["peak_memory_mb"] = {k: round(child_memory(k, argv) / 2**20, 1) for k in names}
    if args.json:
        print(json.dumps(result))
        return result
    print(f"device {result['device']}, threads {args.threads}, shape {result['shape']}")
    print(f"{'model':<8} {'params':>12} {'tgt tok/s':>10} {'peak MB':>9} {'cost/step':>10}")
    for k in names:
        mem = result.get("peak_memory_mb", {}).get(k, float("nan"))
        cost = iot_cost.get(k, 1.0 if k == "plain" else float("nan"))
        print(f"{k:<8} {result['params'][k]:>12,} {tps[k]:>10,.0f} {mem:>9.1f} {cost:>10.3f}")
    print(f"plain / m2m100 tokens/s: {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
