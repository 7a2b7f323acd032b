"""The floors of ``benchmarks/gpu_check.sh``: the figures under which a GPU run is broken.

:func:`judge` reads the parts' records (``gpu_check_report.py`` passes them) and returns,
per part, what fell short; the report marks such a part ``failed`` and the check exits 1.
In GPU mode:

* ``lm``: MFU at least ``lm.mfu`` (when the GPU's peak is known) and tokens/s at least
  ``lm.tokens_per_s`` (the paper-size LM, bf16, compiled);
* ``seq2seq``: our model's target tokens/s at least ``seq2seq.tokens_per_s``;
* ``fsdp``: the sharded trial at least ``fsdp.ratio`` of the unsharded one's tokens/s;
* ``ddp``: with N >= 2 GPUs, the N-worker trial at least ``ddp.efficiency`` x N times the
  one-worker trial's tokens/s (one GPU: nothing to judge, the record says so);
* ``sweep``: every trial recorded that it trained on CUDA (the MLflow tag
  ``sublayer.device`` of its run: ``cpu`` or no tag fails) and all four trials ran at
  once on the one GPU (``sweep.at_once``; fewer: they ran serially, not sharing it).

No GPU has been lent to this project yet: the floors are not calibrated on one. They are
set well under what the FLOP count promises on an A100-class GPU, to catch a CPU
fallback, an uncompiled or fp32 model, serial trials or a broken interconnect, not to
rank GPUs; ``gpu_check.sh --floor NAME=VALUE`` sets one for a run. In smoke mode (the
CPU) only what the CPU can show is judged: two or more trials at once, and no trial
recorded on a device other than the CPU.
"""

from __future__ import annotations

from typing import Any

FLOORS: dict[str, float] = {
    "lm.mfu": 0.20,              # of the dense bf16 peak; well-tuned runs reach 0.35-0.5
    "lm.tokens_per_s": 30_000,   # the 247M-parameter LM: ~1.5 GFLOP per token
    "seq2seq.tokens_per_s": 50_000,
    "fsdp.ratio": 0.5,           # FSDP on one GPU against unsharded
    "ddp.efficiency": 0.7,       # N GPUs give at least 0.7 x N times one GPU
    "sweep.at_once": 4,          # the four 0.25-GPU trials share the GPU at one time
}
SMOKE_AT_ONCE = 2  # on a CPU (CI) short trials may end before the last one starts
DEVICE_TAG = "sublayer.device"
"""The MLflow tag each trial's run records the kind of device it trained on with."""


def parse_floors(pairs: list[str]) -> dict[str, float]:
    """``NAME=VALUE`` overrides over :data:`FLOORS`; ValueError naming a bad one."""
    floors = dict(FLOORS)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in FLOORS:
            raise ValueError(f"--floor: got '{pair}', expected NAME=VALUE with NAME one of "
                             + ", ".join(FLOORS))
        try:
            floors[name] = float(value)
        except ValueError:
            raise ValueError(f"--floor {name}: got '{value}', expected a number") from None
    return floors


def _below(value: Any, floor: float, what: str, shown: str) -> list[str]:
    if not isinstance(value, int | float):
        return [f"{what}: no figure"]
    return [f"{what} {shown} under the floor"] if value < floor else []


def _sweep(figures: dict[str, Any], mode: str, floors: dict[str, float]) -> list[str]:
    short: list[str] = []
    devices = figures.get("devices", [])
    if mode == "gpu":
        off = [d or "none recorded" for d in devices if d != "cuda"]
        if off or not devices:
            short.append(f"trials did not train on CUDA ({DEVICE_TAG}: "
                         f"{', '.join(off) or 'no trial'})")
        want = int(floors["sweep.at_once"])
    else:
        off = [d for d in devices if d not in (None, "cpu")]
        if off:
            short.append(f"smoke trials recorded a device other than the CPU: {', '.join(off)}")
        want = SMOKE_AT_ONCE
    at_once = figures.get("most_at_once", 0)
    if at_once < want:
        short.append(f"only {at_once} trial(s) ran at once, expected {want} sharing the GPU "
                     "(they ran serially)")
    return short


def judge(parts: dict[str, dict[str, Any]], mode: str,
          floors: dict[str, float] | None = None) -> dict[str, list[str]]:
    """What fell short, per part (an empty list: nothing). Parts that did not run or
    failed already are left to their own status."""
    floors = floors or FLOORS
    short: dict[str, list[str]] = {}
    for name, rec in parts.items():
        f = rec.get("figures") or {}
        if rec.get("status") != "ok" or not f:
            continue
        found: list[str] = []
        if name == "sweep":
            found = _sweep(f, mode, floors)
        elif mode != "gpu":
            pass  # the CPU's speed says nothing of a GPU's
        elif name == "lm":
            found = _below(f.get("tokens_per_s"), floors["lm.tokens_per_s"], "tokens/s",
                           f"{f.get('tokens_per_s')} (floor {floors['lm.tokens_per_s']:g})")
            if f.get("mfu") is not None:
                found += _below(f["mfu"], floors["lm.mfu"], "MFU",
                                f"{f['mfu']:.3f} (floor {floors['lm.mfu']:g})")
        elif name == "seq2seq":
            found = _below(f.get("ours_tokens_per_s"), floors["seq2seq.tokens_per_s"],
                           "target tokens/s", f"{f.get('ours_tokens_per_s')} "
                           f"(floor {floors['seq2seq.tokens_per_s']:g})")
        elif name == "fsdp":
            found = _below(f.get("fsdp_over_unsharded"), floors["fsdp.ratio"],
                           "FSDP / unsharded tokens/s", f"{f.get('fsdp_over_unsharded')} "
                           f"(floor {floors['fsdp.ratio']:g})")
        elif name == "ddp" and f.get("workers", 0) >= 2:
            found = _below(f.get("efficiency"), floors["ddp.efficiency"],
                           f"DDP scaling efficiency on {f['workers']} GPUs",
                           f"{f.get('efficiency')} (floor {floors['ddp.efficiency']:g})")
        short[name] = found
    return short


if __name__ == "__main__":  # gpu_check.sh checks its --floor options before any part runs
    import sys

    pairs = sys.argv[1:]
    if len(pairs) % 2 or any(flag != "--floor" for flag in pairs[::2]):
        sys.exit("usage: gpu_check_floors.py [--floor NAME=VALUE]...")
    try:
        parse_floors(pairs[1::2])
    except ValueError as e:
        print(f"gpu_check: {e}", file=sys.stderr)
        sys.exit(2)
