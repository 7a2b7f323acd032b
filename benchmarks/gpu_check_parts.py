"""Four parts of ``benchmarks/gpu_check.sh``, one per process: ``lm``, ``seq2seq``, ``fsdp``, ``ddp``.

Each writes one JSON record (``--json FILE``): ``{"part", "status", "figures", "note"}``
with status ``ok``, ``skipped`` or ``failed``; the shell runs each under its own time cap
and ``gpu_check_report.py`` prints them as one table. ``--mode gpu`` measures on CUDA;
``--mode smoke`` runs the same code tiny on the CPU (``gpu_check.sh --cpu-smoke``).

* ``lm``: ``benchmarks/lm_mfu.py`` on the ``press2020`` preset (16 s + 16 f, d 1024, context
  3072, bf16 autocast, ``torch.compile``): tokens/s and MFU against the GPU's dense bf16
  peak (:data:`PEAK_TFLOPS` by device name, or ``--peak-tflops``). Smoke: its CPU mirror.
* ``seq2seq``: ``benchmarks/seq2seq_throughput.py``'s plain model against Hugging Face
  M2M100 of the same shape (d 512, 8 heads, d_ff 2048, 6 + 6 layers), target tokens/s;
  without ``transformers`` ours alone, the comparison ``skipped: transformers not
  installed`` (nothing is installed at run time).
* ``ddp``: ``benchmarks/data_parallel.py`` over every GPU of the machine (one worker against
  N, DDP, the same global batch): the scaling and its efficiency; with one GPU, said so.
* ``fsdp``: a trial of the one training loop with ``train.parallel: fsdp`` on one GPU: a
  one-rank NCCL process group (gloo on the CPU) and the project's FSDP2 path forced on
  (:class:`OneDeviceShards`; with one worker a sweep trains unsharded), bf16, checkpoints
  gathered at every evaluation; against the same trial unsharded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PEAK_TFLOPS = {  # dense bf16 tensor-core peak, TFLOP/s, by a part of the device name
    "H200": 989.0, "GH200": 989.0, "H100 NVL": 835.0, "H100 PCIe": 756.0, "H100": 989.0,
    "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0, "B200": 2250.0,
}
"""Checked in order, the first part found in ``torch.cuda.get_device_name()`` wins."""


def record(part: str, status: str, figures: dict[str, Any], note: str = "") -> dict[str, Any]:
    return {"part": part, "status": status, "figures": figures, "note": note}


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_tflops(name: str) -> float | None:
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


# -- lm: the paper-size LM, bf16, tokens/s and MFU ------------------------------------------
def part_lm(args: argparse.Namespace) -> dict[str, Any]:
    bench = load_benchmark("lm_mfu")
    peak: float | None
    if args.mode == "smoke":  # the CPU mirror, uncompiled (lm_mfu's own test compiles it)
        peak, argv = 1.0, ["--cpu-mirror", "--warmup", "1", "--steps", "2", "--no-compile"]
    else:
        peak = args.peak_tflops or peak_tflops(torch.cuda.get_device_name())
        argv = ["--device", "cuda", "--batch", "2", "--warmup", "3", "--steps", "10"]
    out = bench.main([*argv, *(["--peak-tflops", str(peak)] if peak else []), "--json"])
    figures = {k: out.get(k) for k in ("device", "params", "tokens_per_s", "mfu",
                                       "achieved_tflops", "warmup_s", "peak_memory_gb",
                                       "loss_first", "loss_last", "compiled", "autocast_bf16")}
    figures.update(peak_tflops=peak, shape=out["shape"])
    finite = all(math.isfinite(out[k]) for k in ("loss_first", "loss_last"))
    note = "" if peak else "MFU: unknown peak for this GPU (give --peak-tflops)"
    if args.mode == "smoke":
        note = "CPU mirror (d 128, context 256), MFU against a nominal 1 TFLOP/s"
    ok = finite and out["tokens_per_s"] > 0
    return record("lm", "ok" if ok else "failed", figures, note if ok else "loss not finite")


# -- seq2seq: ours against Hugging Face M2M100 ----------------------------------------------
SEQ2SEQ = {"gpu": ["--device", "cuda", "--d-model", "512", "--n-heads", "8", "--d-ff", "2048",
                   "--layers", "6", "--vocab", "16000", "--length", "64", "--batch", "128",
                   "--warmup", "3", "--steps", "5", "--rounds", "5"],
           "smoke": ["--d-model", "32", "--n-heads", "2", "--d-ff", "64", "--layers", "1",
                     "--vocab", "256", "--length", "12", "--batch", "4", "--warmup", "1",
                     "--steps", "1", "--rounds", "2"]}


def transformers_missing() -> str | None:
    """Why M2M100 cannot be built here (None: it can)."""
    if importlib.util.find_spec("transformers") is None:
        return "transformers not installed"
    return None


def part_seq2seq(args: argparse.Namespace) -> dict[str, Any]:
    bench = load_benchmark("seq2seq_throughput")
    opts = bench.parse_args([*SEQ2SEQ[args.mode], "--iot", "--no-memory"])
    torch.set_num_threads(opts.threads)
    missing = transformers_missing()
    names = ["plain"] if missing else ["plain", "m2m100"]
    if missing:
        print(f"M2M100 comparison skipped: {missing}", flush=True)
    models = {name: bench.build(name, opts) for name in names}
    steps = {name: bench.make_step(model, name, opts) for name, model in models.items()}
    losses = {name: [step() for _ in range(opts.warmup)] for name, step in steps.items()}
    tokens = int(bench.batch(opts)[2].ne(bench.PAD).sum()) * opts.steps
    seconds = bench.alternate(steps, opts)
    tps = {name: tokens / s for name, s in seconds.items()}
    figures: dict[str, Any] = {
        "shape": {k: getattr(opts, k) for k in ("d_model", "n_heads", "d_ff", "layers",
                                                 "vocab", "length", "batch")},
        "params": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
        "ours_tokens_per_s": round(tps["plain"], 1),
        "m2m100_tokens_per_s": round(tps["m2m100"], 1) if not missing else f"skipped: {missing}",
        "ours_over_m2m100": round(tps["plain"] / tps["m2m100"], 3) if not missing else None,
    }
    finite = all(math.isfinite(v) for vs in losses.values() for v in vs)
    return record("seq2seq", "ok" if finite else "failed", figures,
                  "" if finite else "a loss was not finite")


# -- fsdp: a one-GPU trial through the FSDP2 path --------------------------------------------
def _shards_class() -> type:
    from sublayer_search.models.distributed import Workers

    @dataclass(frozen=True, kw_only=True)
    class OneDeviceShards(Workers):
        """The workers of a one-rank process group with ``fsdp`` sharding on. The project
        shards only across several workers (one worker has nothing to shard across); on one
        GPU this runs the sharded path itself: FSDP2 units, their mixed-precision policy,
        the full state gathered for each checkpoint."""

        @property
        def sharded(self) -> bool:
            return self.strategy == "fsdp"

    return OneDeviceShards


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fsdp_spec(mode: str) -> Any:
    from sublayer_search.models.config import model_preset
    from sublayer_search.models.data.config import DataConfig
    from sublayer_search.models.lm_workload import TrainConfig, TrialSpec

    if mode == "smoke":
        model = model_preset("debug", dropout=0.0)
        steps, batch, every, device = 4, 8, 2, "cpu"
    else:  # the paper-size LM (247M parameters) at context 512
        model = model_preset("press2020")
        steps, batch, every, device = 30, 16, 15, "cuda"
    train = TrainConfig(steps=steps, batch_size=batch, eval_every=every, log_every=every,
                        eval_batches=1 if mode == "smoke" else 2, lr=3e-4, warmup_steps=2,
                        precision="bf16", parallel="fsdp", seed=0,
                        device="cpu" if device == "cpu" else "cuda")
    return TrialSpec(model=model, data=DataConfig(name="tinyshakespeare"), train=train)


def _train_once(spec: Any, workers: Any, folder: Path) -> dict[str, Any]:
    """One trial; its last report, the dtype of a block's weight inside its forward, and
    whether every parameter is a DTensor shard."""
    from torch.distributed.tensor import DTensor

    from sublayer_search.models.lm_workload import LMWorkload
    from sublayer_search.models.training_loop import train

    seen: dict[str, str] = {}

    class Watched(LMWorkload):
        def build(self) -> Any:
            self.model = model = super().build()
            linear = next(m for m in model.layers[0].modules() if isinstance(m, torch.nn.Linear))

            def note_dtype(mod: torch.nn.Module, _: Any) -> None:
                seen.setdefault("dtype", str(mod.weight.dtype).split(".")[-1])

            linear.register_forward_pre_hook(note_dtype)
            return model

    family = Watched(spec)
    reports: list[dict[str, Any]] = []
    if spec.train.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = train(spec.train, family, lambda m, checkpoint=None: reports.append(dict(m)),
                   checkpoint_dir=str(folder), workers=workers)
    params = list(family.model.parameters())
    last = reports[-1]
    out = {"status": result.status, "tokens_per_s": round(last["tokens_per_s"], 1),
           "train_loss": round(last["train_loss"], 4), "val_loss": round(last["val_loss"], 4),
           "weight_dtype_in_forward": seen.get("dtype"),
           "dtensor_params": all(isinstance(p, DTensor) for p in params),
           "params": sum(p.numel() for p in params)}
    if spec.train.device == "cuda":
        out["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def part_fsdp(args: argparse.Namespace) -> dict[str, Any]:
    import torch.distributed as dist

    from sublayer_search.models.checkpoint import load_checkpoint
    from sublayer_search.models.distributed import Workers

    spec = _fsdp_spec(args.mode)
    cuda = spec.train.device == "cuda"
    if cuda:
        torch.cuda.set_device(0)
    else:
        torch.set_num_threads(1)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0,
                            world_size=1, device_id=torch.device("cuda", 0) if cuda else None)
    work = Path(args.work)
    try:
        sharded = _train_once(spec, _shards_class()(rank=0, world=1, strategy="fsdp"),
                              work / "fsdp")
        gathered = load_checkpoint(work / "fsdp")  # the full state, in a one-worker format
        plain = _train_once(spec, Workers(rank=0, world=1, strategy="ddp"), work / "plain")
        same_format = gathered["model"].keys() == load_checkpoint(work / "plain")["model"].keys()
    finally:
        dist.destroy_process_group()
    figures = {"backend": backend, "world": 1, "precision": spec.train.precision,
               "fsdp": sharded, "unsharded": plain,
               "fsdp_over_unsharded": round(sharded["tokens_per_s"] / plain["tokens_per_s"], 3),
               "checkpoint_gathered": same_format, "steps": spec.train.steps}
    ok = (sharded["status"] == plain["status"] == "finished" and sharded["dtensor_params"]
          and same_format and all(math.isfinite(r["val_loss"]) for r in (sharded, plain)))
    return record("fsdp", "ok" if ok else "failed", figures,
                  "" if ok else "the sharded trial did not finish as expected")


# -- ddp: the scaling of one trial over every GPU of the machine ---------------------------
def part_ddp(args: argparse.Namespace) -> dict[str, Any]:
    """``benchmarks/data_parallel.py`` (its own processes: one worker against N in a DDP
    process group, the same global batch) over all N GPUs here; with one GPU there is no
    scaling to measure, and the record says so. Smoke: 2 gloo workers on the CPU."""
    gpus = torch.cuda.device_count() if args.mode == "gpu" else 0
    if args.mode == "gpu" and gpus < 2:
        return record("ddp", "ok", {"gpus": gpus, "workers": gpus},
                      f"this machine has {gpus} GPU: no DDP scaling to measure (it needs 2+)")
    workers = gpus if args.mode == "gpu" else 2
    argv = (["--device", "cuda", "--preset", "tiny", "--context", "256",
             "--batch", str(32 * workers), "--rounds", "2", "--steps", "10", "--warmup", "3"]
            if args.mode == "gpu" else
            ["--rounds", "1", "--steps", "2", "--warmup", "1", "--batch", "4"])
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "data_parallel.py"),
                           "--workers", str(workers), *argv, "--json"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", flush=True)
        return record("ddp", "failed", {"gpus": gpus, "workers": workers},
                      f"benchmarks/data_parallel.py exited {done.returncode}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    figures = {"gpus": gpus, "workers": workers, "device": out["device"],
               "tokens_per_s_1": round(out["tokens_per_s_1"], 1),
               f"tokens_per_s_{workers}": round(out[f"tokens_per_s_{workers}"], 1),
               "scaling": round(out["ratio"], 3), "scaling_ci95": out["ratio_ci95"],
               "efficiency": round(out["ratio"] / workers, 3)}
    return record("ddp", "ok", figures)


PARTS = {"lm": part_lm, "seq2seq": part_seq2seq, "fsdp": part_fsdp, "ddp": part_ddp}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=sorted(PARTS))
    p.add_argument("--mode", choices=("gpu", "smoke"), default="gpu")
    p.add_argument("--json", required=True, help="where to write the part's record")
    p.add_argument("--work", required=True, help="a scratch folder of this part")
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (lm)")
    args = p.parse_args(argv)
    offline = REPO.parent / "shared" / "data"  # the project's offline corpora, when beside it
    if offline.is_dir():
        os.environ.setdefault("SUBLAYER_DATA_DIR", str(offline))
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.mode == "gpu" and not torch.cuda.is_available():
        p.error("--mode gpu: torch sees no CUDA GPU")
    start = time.perf_counter()
    out = PARTS[args.part](args)
    out["seconds"] = round(time.perf_counter() - start, 1)
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(json.dumps(out), flush=True)
    return 0 if out["status"] != "failed" else 1


if __name__ == "__main__":
    sys.exit(main())
