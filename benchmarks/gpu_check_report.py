"""The closing step of ``benchmarks/gpu_check.sh``: the parts' records as one table and one
JSON file.

Reads ``<work>/<part>.json`` for each part the shell ran (a part that wrote none ran past
its time cap or crashed: the shell passes its exit status and the seconds it ran),
prints a table (part, status, seconds its process ran, its figures) and writes
``{"mode", "device", "floors", "parts": {part: record}}`` to ``--out``. The floors of
``gpu_check_floors.py`` judge each part's figures (``--floor NAME=VALUE`` sets one): a
part under one is ``failed``, what fell short in its ``below_floor`` and its note. Exit
status 0 when every part is ``ok`` (a comparison skipped inside a part, M2M100 without
``transformers``, is said in its figures), 1 otherwise, 2 for a bad ``--floor``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check_floors import judge, parse_floors  # noqa: E402  (benchmarks/ is no package)

TIMEOUT_CODES = (124, 137)  # timeout(1): the cap was reached (TERM), or KILL after it


def _num(value: Any, digits: int = 0) -> str:
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def summary(rec: dict[str, Any]) -> str:
    """The figures of one part in one line."""
    f, part = rec.get("figures", {}), rec["part"]
    if not f:
        return rec.get("note", "")
    if part == "lm":
        mfu = "-" if f.get("mfu") is None else f"{100 * f['mfu']:.1f}%"
        return (f"{_num(f['tokens_per_s'])} tokens/s, MFU {mfu} "
                f"({_num(f['achieved_tflops'], 1)} of {f.get('peak_tflops') or '?'} TFLOP/s), "
                f"{_num(f['params'])} params, compile+warm-up {f['warmup_s']} s")
    if part == "sweep":
        each = " ".join(_num(v) for v in f["tokens_per_s_per_trial"])
        return (f"{f['finished']}/{f['trials']} finished at gpu {f['gpu_per_trial']} each, "
                f"{f['most_at_once']} at once; tokens/s per trial: {each} "
                f"(sum {_num(f['tokens_per_s_total'])}); sweep {f['wall_s']} s")
    if part == "seq2seq":
        theirs = f["m2m100_tokens_per_s"]
        ratio = "" if f["ours_over_m2m100"] is None else f" = {f['ours_over_m2m100']:.2f}x"
        return (f"ours {_num(f['ours_tokens_per_s'])} target tokens/s vs M2M100 "
                f"{_num(theirs)}{ratio}")
    if part == "ddp":
        if f.get("workers", 0) < 2:
            return f"{f.get('gpus')} GPU: no scaling to measure"
        n = f["workers"]
        return (f"{n} workers {_num(f[f'tokens_per_s_{n}'])} tokens/s vs 1 worker "
                f"{_num(f['tokens_per_s_1'])}: {f['scaling']:.2f}x "
                f"(efficiency {f['efficiency']:.2f}) on {f['device']}")
    if part == "fsdp":
        fsdp, plain = f["fsdp"], f["unsharded"]
        mem = f", peak {fsdp['peak_memory_gb']} GB" if "peak_memory_gb" in fsdp else ""
        return (f"FSDP ({f['backend']}, world 1, {f['precision']}: weights "
                f"{fsdp['weight_dtype_in_forward']} in forward) {_num(fsdp['tokens_per_s'])} "
                f"tokens/s vs unsharded {_num(plain['tokens_per_s'])} "
                f"({f['fsdp_over_unsharded']:.2f}x){mem}; val_loss {fsdp['val_loss']}")
    return json.dumps(f)


def collect(work: Path, ran: list[tuple[str, int, float]]) -> dict[str, dict[str, Any]]:
    parts = {}
    for part, code, seconds in ran:
        path = work / f"{part}.json"
        if path.is_file():
            parts[part] = {**json.loads(path.read_text()), "wall_s": seconds}
            continue
        why = (f"ran past its time cap ({seconds:.0f} s)" if code in TIMEOUT_CODES
               else f"exited {code} without a record (see its log)")
        parts[part] = {"part": part, "status": "failed", "figures": {}, "note": why,
                       "wall_s": seconds}
    return parts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True, help="the folder holding <part>.json")
    p.add_argument("--out", required=True, help="the JSON file to write")
    p.add_argument("--mode", choices=("gpu", "smoke"), required=True)
    p.add_argument("--device", default="", help="the device's name, for the record")
    p.add_argument("--ran", nargs="+", default=[],
                   help="PART:EXIT_CODE:SECONDS of each part the shell ran")
    p.add_argument("--floor", action="append", default=[], metavar="NAME=VALUE",
                   help="set one floor of gpu_check_floors.py for this run")
    args = p.parse_args(argv)
    try:
        floors = parse_floors(args.floor)
    except ValueError as e:
        p.error(str(e))
    ran = [(part, int(code), float(s)) for part, code, s in (r.split(":") for r in args.ran)]
    parts = collect(Path(args.work), ran)
    for name, short in judge(parts, args.mode, floors).items():
        parts[name]["below_floor"] = short
        if short:
            parts[name]["status"] = "failed"
            parts[name]["note"] = "; ".join(filter(None, [parts[name].get("note"), *short]))
    result = {"mode": args.mode, "device": args.device, "host": platform.node(),
              "total_s": round(sum(s for *_, s in ran), 1), "floors": floors, "parts": parts}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    width = max(len(name) for name in parts) if parts else 4
    print(f"\ngpu_check ({args.mode}) on {args.device or 'an unnamed device'}:")
    print(f"{'part':<{width}}  {'status':<7}  {'s':>6}  figures")
    for name, rec in parts.items():
        print(f"{name:<{width}}  {rec['status']:<7}  {rec['wall_s']:>6.1f}  "
              f"{summary(rec)}")
        if rec.get("note"):
            print(f"{'':<{width}}  {'':<7}  {'':>6}  note: {rec['note']}")
    print(f"total {result['total_s']:.0f} s; figures written to {out}")
    return 0 if parts and all(r["status"] == "ok" for r in parts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
