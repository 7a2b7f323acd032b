"""Replay benchmark: would early stopping have kept the true top 3 of a 40-order sweep?

Target (issue 14): for at least one scheduler setting, keep the true top 3 (by final
metric) with at most 35 % of the full sweep's trial-steps.

Without ``--experiment`` it first records a sweep (``sublayer sweep`` machinery, FIFO, no
early stopping): 40 orders of ``ssssffff`` drawn from the permutations space, debug
model on tinyshakespeare, 400 steps with 8 evaluations each, two trials at a time; about
10 minutes on 2 CPU cores. Then it replays the recorded curves through ASHA (grace
periods 1-3 evaluations x reduction factors 2-4), HyperBand (eta 2-4, all trials started
together) and the median stopping rule (grace 1-3), and writes the grid as CSV and
figure.

    .venv/bin/python benchmarks/replay_asha.py                  # record, then replay
    .venv/bin/python benchmarks/replay_asha.py --experiment NAME --tracking-uri sqlite:///mlflow.db
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_COMPUTE = 0.35
TOP_K = 3
NAME = "replay-bench-40"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiment", default=None, help="replay this recorded sweep (no recording)")
    p.add_argument("--tracking-uri", default=None, help="its MLflow store (default: --out's)")
    p.add_argument("--out", default="reports/replay_asha", help="folder for the store, CSV, figure")
    p.add_argument("--trials", type=int, default=40, help="orders to record (default 40)")
    p.add_argument("--steps", type=int, default=400, help="steps per trial (default 400)")
    p.add_argument("--evals", type=int, default=8, help="evaluations per trial (default 8)")
    p.add_argument("--metric", default=None,
                   help="metric the schedulers compare (default: the sweep's main metric)")
    return p.parse_args(argv)


def record(out: Path, *, trials: int, steps: int, evals: int) -> tuple[str, str, float]:
    """Run the 40-order FIFO sweep; (experiment, tracking URI, wall seconds)."""
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.sweep_plan import plan_sweep
    from sublayer_search.search.run.sweep import run_sweep

    uri = f"sqlite:///{out.resolve()}/mlflow.db"
    doc = {
        "name": NAME, "description": "replay benchmark: 40 orders, FIFO, 8 evaluations each",
        "space": {"type": "permutations", "n_s": 4, "n_f": 4, "count": trials, "seed": 0},
        "seeds": [0], "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": {"steps": steps, "batch_size": 16, "eval_every": steps // evals,
                  "eval_batches": 8, "lr": 0.01},
        "resources": {"cpu": 1}, "max_concurrent": 2,
        "tracking": {"uri": uri}, "ray": {"storage_path": str(out.resolve() / "ray")},
    }
    path = out / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = plan_sweep(load_experiment(path), str(path))
    start = time.perf_counter()
    run_sweep(plan)
    return NAME, uri, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recorded_s = None
    if args.experiment is None:
        experiment, uri, recorded_s = record(out, trials=args.trials, steps=args.steps,
                                             evals=args.evals)
    else:
        experiment = args.experiment
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"

    import pandas as pd
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.figures.replay import plot_replay_grid
    from sublayer_search.search.replay.engine import SchedulerSettings, replay_grid, together
    from sublayer_search.search.replay.store import load_sweep
    from sublayer_search.spaces.records import direction

    sweep = load_sweep(MlflowClient(tracking_uri=uri), experiment, scheduler_metric=args.metric)
    every, metric = sweep.eval_every, sweep.scheduler_metric
    graces = [g * every for g in (1, 2, 3) if g * every <= sweep.steps]
    rows = []
    for name in ("asha", "hyperband", "median"):
        curves = together(sweep.curves) if name == "hyperband" else list(sweep.curves)
        settings = SchedulerSettings(name=name, max_t=sweep.steps, grace_period=every,
                                     metric=metric, mode=direction(metric))
        rows += replay_grid(curves, settings, grace_periods=graces,
                            reduction_factors=(2.0, 3.0, 4.0), k=TOP_K,
                            rank_mode=direction(sweep.metric))
    frame = pd.DataFrame(rows).assign(grace_evals=lambda f: f["grace_period"] // every)
    frame.to_csv(out / "replay_grid.csv", index=False)
    fig = plot_replay_grid(frame, out / "replay_grid.png", target=TARGET_COMPUTE,
                           title=f"Replay of {experiment!r}: {len(sweep.curves)} trials, "
                                 f"schedulers on {metric}, ranked by final {sweep.metric}")
    del fig
    shown = frame[["scheduler", "grace_evals", "reduction_factor", "compute_fraction",
                   "evaluation_fraction", "top_k_kept", "regret", "picked"]]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    hits = frame[(frame["top_k_kept"] == TOP_K) & (frame["compute_fraction"] <= TARGET_COMPUTE)]
    best = frame[frame["top_k_kept"] == TOP_K]["compute_fraction"].min()
    summary = {
        "experiment": experiment, "trials": len(sweep.curves), "metric": metric,
        "rank_metric": sweep.metric, "recorded_s": recorded_s,
        "target": f"top {TOP_K} kept with <= {TARGET_COMPUTE:.0%} of the compute",
        "met": not hits.empty, "settings_meeting_it": len(hits),
        "least_compute_keeping_top_k": None if pd.isna(best) else float(best),
        "figure": str(out / "replay_grid.png"), "csv": str(out / "replay_grid.csv"),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
