"""Cost per order of the MAD proxy (``task: mad``): wall time of each run and in all.

Scores each ``--orders`` order on the reduced protocol (one setting per task, trained as
``configs/mad_proxy.yaml`` says: MAD's width 128, 16 heads, d_ff 512, 100 steps of 32
samples at lr 1e-3) through :func:`sublayer_search.models.mad.workload.fit`, on one
thread (``--threads``), and prints seconds per run (data generation, training and the
evaluation on 1,280 samples included) and per order, with each order's accuracies. The
full protocol's cost per order is extrapolated from the reduced runs' median seconds per
training token (its 4,836 runs are not run here): a lower bound, as attention's cost per
token grows with the sequence and the full grid reaches 1,024 tokens.

    .venv/bin/python benchmarks/proxy_cost.py
    .venv/bin/python benchmarks/proxy_cost.py --orders '(sf)^2' --steps 20 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sublayer_search.models.config import ModelConfig  # noqa: E402
from sublayer_search.models.mad.settings import MadData, MadSpec, full_settings, runs  # noqa: E402
from sublayer_search.models.mad.workload import fit  # noqa: E402
from sublayer_search.models.train_config import TrainConfig  # noqa: E402
from sublayer_search.spaces.order import parse_order  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mad_proxy.yaml"


def spec_for(order: str, steps: int | None) -> MadSpec:
    doc = yaml.safe_load(CONFIG.read_text())
    cfg = ModelConfig.from_dict({"order": parse_order(order), "context": 8, **doc["model"]})
    train = TrainConfig(**{**doc["train"], "device": "cpu"})
    if steps is not None:
        train = replace(train, steps=steps)
    return MadSpec(model=cfg, data=MadData(**doc.get("data", {})), train=train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", default="(sf)^2,(sf)^6",
                        help="comma-separated orders (default: MAD's 2 blocks and hybrid_mini's baseline)")
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: the config's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = []
    for order in args.orders.split(","):
        spec = spec_for(order, args.steps)
        per_run: list[tuple[str, float]] = []
        clock = time.perf_counter()
        last = {"proxy_seconds": 0.0}

        def report(metrics: dict, checkpoint: str | None = None, _runs=per_run, _last=last) -> None:
            _runs.append((str(metrics["runs"]), metrics["proxy_seconds"] - _last["proxy_seconds"]))
            _last["proxy_seconds"] = metrics["proxy_seconds"]

        out = fit(spec, report).metrics
        total = time.perf_counter() - clock
        settings = [s.label for s in spec.data.settings]
        steps = sum(r.train.steps for g in runs(spec.data, spec.train) for r in g)
        per_token = sorted(sec / (spec.train.steps * spec.train.batch_size * st.seq_len)
                           for st, (_, sec) in zip(spec.data.settings, per_run, strict=True))
        median = per_token[len(per_token) // 2]
        full = sum(r.train.steps * r.train.batch_size * r.setting.seq_len * median
                   for g in runs(MadData(protocol="full"), spec.train) for r in g)
        results.append({"order": spec.model.order, "sublayers": len(spec.model.order),
                        "threads": args.threads, "steps_per_run": spec.train.steps,
                        "batch_size": spec.train.batch_size, "optimizer_steps": steps,
                        "seconds_per_run": {label: round(sec, 1) for label, (_, sec) in
                                            zip(settings, per_run, strict=True)},
                        "seconds_per_order": round(total, 1),
                        "full_protocol_hours_estimate": round(full / 3600, 1),
                        "full_protocol_settings": len(full_settings()),
                        "scores": {k: round(v, 4) for k, v in out.items()
                                   if k.startswith("acc_") or k == "mad_acc"}})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(f"{r['order']} ({r['sublayers']} sublayers, {r['threads']} thread(s), "
              f"{r['steps_per_run']} steps x {r['batch_size']} per run): "
              f"{r['seconds_per_order']:.0f} s per order")
        for label, sec in r["seconds_per_run"].items():
            print(f"  {label:<44} {sec:7.1f} s")
        print(f"  scores {r['scores']}")
        print(f"  full protocol ({r['full_protocol_settings']} settings x 6 runs, 200 epochs): "
              f"at least ~{r['full_protocol_hours_estimate']:,} h per order at this speed")


if __name__ == "__main__":
    main()
