"""The ``sweep`` part of ``benchmarks/gpu_check.sh``: a real 4-trial sweep sharing one GPU.

``sublayer sweep`` (the real entry point, in this process) on an experiment file written
here: four explicit orders of the ``tiny`` LM on Tiny Shakespeare, ``resources: {cpu: 1,
gpu: 0.25}``, ``max_concurrent: 4``, a local Ray declared with one GPU (``ray.num_gpus:
1``: on a machine with several, the four trials still share one), tracked in a SQLite
MLflow store of the scratch folder. Then, from MLflow: each trial's status and its last
``tokens_per_s`` (the loop's figure over its last evaluation window: the second half of
training, start-up excluded), the device it recorded (the tag ``sublayer.device``), and
how many trials ran at once (their runs' start and end times overlapping).
``ok`` when the sweep exits 0 and all four trials finished; whether they trained on CUDA
and shared the GPU at once is judged by ``gpu_check_floors.py``.

``--mode smoke`` trains the ``debug`` model for a few steps on the CPU with the same
resources: the fake GPU is declared to Ray, so the scheduling (four shares of GPU 0) is
the GPU run's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ORDERS = ["sfsfsfsf", "ssffssff", "sssfsfff", "ssssffff"]  # 4 s + 4 f each, as tiny's
TRAIN = {"gpu": {"steps": 1000, "batch_size": 64, "eval_every": 500, "eval_batches": 4,
                 "lr": 3e-3, "warmup_steps": 20},
         "smoke": {"steps": 6, "batch_size": 8, "eval_every": 3, "eval_batches": 1,
                   "lr": 3e-3, "warmup_steps": 1, "device": "cpu"}}  # a declared GPU, no CUDA
MODEL = {"gpu": {"preset": "tiny", "context": 256, "dropout": 0.0},
         "smoke": {"preset": "debug", "dropout": 0.0}}
SHARE = 0.25


def experiment(mode: str, work: Path) -> Path:
    doc = {
        "name": "gpu-check-sharing",
        "description": "benchmarks/gpu_check.sh: four trials sharing one GPU at 0.25 each",
        "space": {"type": "explicit", "orders": ORDERS},
        "seeds": [0],
        "baseline": {"enabled": False},
        "model": MODEL[mode],
        "data": {"name": "tinyshakespeare"},
        "train": TRAIN[mode],
        "resources": {"cpu": 1, "gpu": SHARE},
        "max_concurrent": len(ORDERS),
        "tracking": {"uri": f"sqlite:///{work / 'mlflow.db'}"},
        "ray": {"storage_path": str(work / "ray_results"), "num_gpus": 1,
                "num_cpus": len(ORDERS)},
    }
    path = work / "gpu-check-sharing.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one time (an end before a start at the same instant)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda ev: (ev[0], ev[1]))
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def trials(tracking_uri: str) -> list[dict[str, Any]]:
    from mlflow.tracking import MlflowClient

    from sublayer_search.spaces.records import Role, Tag

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("gpu-check-sharing")
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id],
                              filter_string=f"tags.`{Tag.ROLE}` = '{Role.TRIAL}'")
    out = []
    for run in sorted(runs, key=lambda r: r.info.start_time):
        out.append({"order": run.data.params.get("model.order"),
                    "status": run.data.tags.get(Tag.STATUS),
                    "tokens_per_s": round(run.data.metrics.get("tokens_per_s", 0.0), 1),
                    "val_loss": run.data.metrics.get("val_loss"),
                    # the device it trained on (kind; name and count where recorded)
                    "device": run.data.tags.get("sublayer.device"),
                    "device_record": {k: v for k, v in {**run.data.params, **run.data.tags}
                                      .items() if k.startswith("sublayer.device")},
                    "start": run.info.start_time / 1e3,
                    "end": (run.info.end_time or run.info.start_time) / 1e3})
    return out


def run(mode: str, work: Path) -> dict[str, Any]:
    from sublayer_search.search.cli.main import main as sublayer

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.pop("RAY_ADDRESS", None)  # a local Ray of its own, never a cluster's GPUs
    path = experiment(mode, work)
    start = time.time()
    code = sublayer(["sweep", str(path)])
    wall = time.time() - start
    found = trials(f"sqlite:///{work / 'mlflow.db'}")
    finished = [t for t in found if t["status"] == "finished"]
    figures = {
        "exit_code": code, "trials": len(found), "finished": len(finished),
        "gpu_per_trial": SHARE, "wall_s": round(wall, 1),
        "most_at_once": most_at_once([(t["start"], t["end"]) for t in found]),
        "tokens_per_s_per_trial": [t["tokens_per_s"] for t in found],
        "tokens_per_s_total": round(sum(t["tokens_per_s"] for t in finished), 1),
        "devices": [t["device"] for t in found],
        "per_trial": [{k: t[k] for k in ("order", "status", "tokens_per_s", "val_loss",
                                         "device_record")} for t in found],
        "model": MODEL[mode], "train": TRAIN[mode],
    }
    ok = code == 0 and len(finished) == len(ORDERS)
    note = "" if ok else f"sublayer sweep exited {code}; {len(finished)} of {len(ORDERS)} finished"
    return {"part": "sweep", "status": "ok" if ok else "failed", "figures": figures,
            "note": note}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("gpu", "smoke"), default="gpu")
    p.add_argument("--json", required=True, help="where to write the part's record")
    p.add_argument("--work", required=True, help="a scratch folder of this part")
    args = p.parse_args(argv)
    offline = REPO.parent / "shared" / "data"  # the project's offline corpora, when beside it
    if offline.is_dir():
        os.environ.setdefault("SUBLAYER_DATA_DIR", str(offline))
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    out = run(args.mode, work)
    out["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(json.dumps(out), flush=True)
    return 0 if out["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
