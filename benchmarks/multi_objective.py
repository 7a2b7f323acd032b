"""What a real multi-objective sweep spends its samples on, and whether its report draws the front.

One real 8-trial sweep (debug model, 20 steps a trial): the baseline ``sfsf`` with two
seeds, then ``--samples`` trials chosen by Optuna's NSGA-II over objectives ``val_bpc`` and
``flops_per_token`` from 11 candidates: the six orders of 2 s + 2 f (one cost, the
baseline's) and five orders of other costs. Then ``sublayer analyze`` on the sweep.

Reported: samples that re-ran an order already trained (a new seed of the same order),
samples whose FLOPs per token had already been measured while an unmeasured cost was
left, the distinct FLOPs values the sweep measured, and whether the report drew the
Pareto front (and how many trials are on it).

    .venv/bin/python benchmarks/multi_objective.py
    .venv/bin/python benchmarks/multi_objective.py --seed 1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SPACE = [
    {"type": "permutations", "n_s": 2, "n_f": 2, "count": 6, "seed": 0},
    {"type": "explicit", "orders": ["sf", "ssf", "sff", "sssff", "ssfff"]},
]
"""Six orders of one cost (the baseline's) and five of five other costs."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=6, help="searcher trials (after 2 baseline seeds)")
    p.add_argument("--seed", type=int, default=0, help="the searcher's seed (search.seed)")
    p.add_argument("--steps", type=int, default=20, help="training steps per trial")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    return p.parse_args(argv)


def experiment(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "name": "mo-bench",
        "space": SPACE,
        "seeds": [0],
        "baseline": {"seeds": 2, "order": "sfsf"},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": args.steps, "batch_size": 8, "eval_every": 10, "eval_batches": 2},
        "search": {"algorithm": "optuna", "sampler": "nsga2", "num_samples": args.samples,
                   "seed": args.seed, "objectives": ["val_bpc", "flops_per_token"]},
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp}/mlflow.db"},
        "ray": {"storage_path": str(tmp / "ray")},
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.cli.main import main

    with tempfile.TemporaryDirectory(prefix="mo-bench-") as scratch:
        tmp = Path(scratch)
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        path = tmp / "mo.yaml"
        path.write_text(yaml.safe_dump(experiment(tmp, args)))
        if main(["sweep", str(path)]) != 0:
            raise SystemExit("the sweep failed")
        uri = f"sqlite:///{tmp}/mlflow.db"
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("mo-bench")
        assert exp is not None
        runs = client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'trial'",
                                  order_by=["attributes.start_time ASC"])
        rows = sorted(({"order": r.data.params["order"], "seed": int(r.data.params["seed"]),
                        "flops": float(r.data.params["flops_per_token"]),
                        "baseline": r.data.tags.get("sublayer.baseline") == "true",
                        "start": r.info.start_time} for r in runs),
                      key=lambda r: (not r["baseline"], r["start"]))
        out = tmp / "report"
        code = main(["analyze", "--experiment", "mo-bench", "--tracking-uri", uri, "--out",
                     str(out), "--no-attach"])
        html = (out / "report.html").read_text() if code == 0 else ""
        front = out / "tables" / "pareto_flops_per_token.csv"
        on_front = (sum(1 for line in front.read_text().splitlines()[1:]
                        if line.rstrip().endswith("True")) if front.exists() else 0)
    all_flops = set(space_flops())
    trained: set[str] = set()
    measured: set[float] = set()
    repeats = same_cost = 0
    samples = [r for r in rows if not r["baseline"]]
    for r in rows:
        if not r["baseline"]:
            repeats += r["order"] in trained
            same_cost += r["flops"] in measured and bool(all_flops - measured)
        trained.add(r["order"])
        measured.add(r["flops"])
    return {
        "trials": len(rows), "samples": len(samples),
        "samples_rerunning_an_order": repeats,
        "samples_at_a_measured_cost_while_others_unmeasured": same_cost,
        "distinct_flops_measured": len(measured), "distinct_flops_in_space": len(all_flops),
        "orders": [f"{r['order']}@seed{r['seed']}" for r in samples],
        "report_draws_front": "Pareto front: val_bpc against FLOPs per token" in html,
        "trials_on_front": on_front,
    }


def space_flops() -> list[float]:
    """The FLOPs per token of every candidate of the space (the trial table's column)."""
    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.plan.sweep_plan import Trial

    plan = plan_sweep(parse_experiment(experiment(Path(tempfile.gettempdir()),
                                                  parse_args([]))))
    return [float(plan.row(Trial.of(c, 0))["flops_per_token"]) for c in plan.candidates]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    got = measure(args)
    if args.json:
        print(json.dumps(got))
        return 0
    print(f"{got['trials']} trials ({got['samples']} chosen by NSGA-II): "
          f"{got['samples_rerunning_an_order']} of {got['samples']} samples re-ran an order "
          f"with a new seed; {got['samples_at_a_measured_cost_while_others_unmeasured']} "
          f"went to a FLOPs value already measured while another was unmeasured; "
          f"{got['distinct_flops_measured']} of {got['distinct_flops_in_space']} FLOPs values "
          "measured")
    print("samples: " + ", ".join(got["orders"]))
    print("report: " + (f"draws the FLOPs-val_bpc front ({got['trials_on_front']} trial(s) on it)"
                        if got["report_draws_front"] else "no FLOPs-val_bpc front"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
