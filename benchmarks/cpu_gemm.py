"""float32 GEMM on the CPU: BLAS (``F.linear``, MKL in the x86 wheels) against oneDNN
(:mod:`models.kernels.linear`), on the products one training step of the benchmark LM makes.

Shapes are those of ``model_throughput.py``'s default LM (d 256, d_ff 1024, batch 8 ×
context 256 = 2048 rows, vocabulary 8192; the fused loss's chunks of 256 rows): each
linear's forward ``x Wᵀ``, input gradient ``g W`` and weight gradient ``gᵀ x``, and the
head's chunk products, each written into a buffer as the fused loss does (BLAS in place,
oneDNN plus a copy). Median of ``--repeat`` timings after warm-up, one thread:

    .venv/bin/python benchmarks/cpu_gemm.py
    .venv/bin/python benchmarks/cpu_gemm.py --rows 4096 --json

:func:`models.kernels.linear.linear` runs forwards and input gradients on oneDNN and weight
gradients on BLAS, and :mod:`models.kernels.fused_loss` its chunk products on BLAS; this
benchmark shows why on the machine at hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sublayer_search.models.kernels import linear as lin  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2048, help="tokens per step (batch × context)")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--chunk", type=int, default=256, help="rows of one fused-loss chunk")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    return p.parse_args(argv)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def products(args: argparse.Namespace) -> list[tuple[str, int, int, int]]:
    """(name, rows, in, out) of ``x (rows, in) · Wᵀ (in, out)`` in one step."""
    d, ff, n = args.d_model, args.d_ff, args.rows
    return [
        ("qkv", n, d, 3 * d),
        ("attention out", n, d, d),
        ("ffn in", n, d, ff),
        ("ffn out", n, ff, d),
        ("head logits (chunk)", args.chunk, d, args.vocab),
        ("head grad_h (chunk)", args.chunk, args.vocab, d),
    ]


def timed_product(name: str, n: int, d_in: int, d_out: int,
                  args: argparse.Namespace) -> list[dict[str, object]]:
    """BLAS and oneDNN timings of one product's forward and gradients."""
    dnn = lin._OP
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, d_in, generator=gen)
    w = torch.randn(d_out, d_in, generator=gen)
    g = torch.randn(n, d_out, generator=gen)
    gflop = 2 * n * d_in * d_out / 1e9
    ops = {
        "forward": (lambda: F.linear(x, w), lambda: dnn(x, w, None, "none", [], "")),
        "grad input": (lambda: g.mm(w), lambda: dnn(g, w.t(), None, "none", [], "")),
        "grad weight": (lambda: g.t().mm(x), lambda: dnn(g.t(), x.t(), None, "none", [], "")),
    }
    if name.startswith("head"):  # the fused loss writes each chunk into one buffer
        buf = torch.empty(n, d_out)
        ops = {"into buffer": (lambda: torch.mm(x, w.t(), out=buf),
                               lambda: buf.copy_(dnn(x, w, None, "none", [], "")))}
    rows: list[dict[str, object]] = []
    for op, (blas, onednn) in ops.items():
        b_ms, o_ms = median_ms(blas, args.repeat), median_ms(onednn, args.repeat)
        rows.append({
            "product": name, "op": op, "shape": [n, d_in, d_out],
            "blas_ms": round(b_ms, 3), "onednn_ms": round(o_ms, 3),
            "blas_gflops": round(gflop / b_ms * 1e3, 1),
            "onednn_gflops": round(gflop / o_ms * 1e3, 1),
            "speedup": round(b_ms / o_ms, 3),
        })
    return rows


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if lin.cpu_gemm() != "onednn":
        raise SystemExit("this torch build has no oneDNN float32 linear: nothing to compare")
    rows = [r for spec in products(args) for r in timed_product(*spec, args)]
    result = {"torch": torch.__version__, "threads": args.threads, "products": rows}
    if args.json:
        print(json.dumps(result))
        return result
    print(f"torch {torch.__version__}, {args.threads} thread(s); GFLOP/s, speed-up = BLAS / oneDNN")
    print(f"{'product':<22} {'op':<12} {'BLAS ms':>8} {'oneDNN ms':>10} {'BLAS':>7} "
          f"{'oneDNN':>7} {'speed-up':>9}")
    for r in rows:
        print(f"{r['product']:<22} {r['op']:<12} {r['blas_ms']:>8.2f} {r['onednn_ms']:>10.2f} "
              f"{r['blas_gflops']:>7.1f} {r['onednn_gflops']:>7.1f} {r['speedup']:>9.3f}")
    return result


if __name__ == "__main__":
    main()
