"""Replay benchmark: does early stopping keep the true top 3, and at what compute?

Target (issue 28): the sweeps' default early stopping keeps the true top 3 (by final
metric) with at most 30 % of the full sweep's trial-steps, on both shipped studies
(``mini_press2020``: 62 trials; ``replay40``: the 40-order study, 44 trials) and on
held-out settings. Compute is reported with the baseline seeds' trial-steps (they always
train whole: the report compares every order with them) and without them (candidates
alone).

Each study is replayed as recorded and in held-out variants that no setting was chosen on:

- ``together``: every trial starts at once (unlimited concurrency);
- ``slow-winners``: the true top 3 start slowly. Each gets a penalty that puts it at the
  75th percentile of the candidates at the first evaluation and fades out by half of
  training (``(1 - t / (T/2))^2``), its final value unchanged. This is the failure seen
  on another corpus: ASHA's first rung stopped all three eventual winners;
- ``half-budget``: the curves cut at half of their steps, ranked there;
- ``family=…`` / ``half=…``: one family of the grid (``perm``, ``budget``, ``sandwich``)
  or one half of the candidates, with the baseline seeds (a different grid on the same
  corpus).

Schedulers: ``asha`` grace 1, reduction 2 (the sweeps' ASHA defaults), two tuned ASHA
settings, the median rule, and ``curve`` (learning-curve stopping) at z = 2 (its
default) and z = 1. Each scenario also gets five ``floor`` rows (:data:`FLOORS`): the
least compute a rule that knew every final value could have used, which no rule beats.

    .venv/bin/python benchmarks/replay_asha.py                      # both shipped studies
    .venv/bin/python benchmarks/replay_asha.py --builtin mini_press2020
    .venv/bin/python benchmarks/replay_asha.py --experiment NAME --tracking-uri sqlite:///mlflow.db
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_COMPUTE = 0.30
TOP_K = 3
STUDIES = ("mini_press2020", "replay40")
DEFAULT = ("curve", 1, 2.0, 2.0)
"""The sweeps' default early stopping: ``scheduler: {type: curve}`` (grace 1 = its
second evaluation, the first with a slope; z 2)."""
SETTINGS: tuple[tuple[str, int, float, float], ...] = (
    # (scheduler, grace in evaluations, reduction factor, z)
    ("asha", 1, 2.0, 2.0), ("asha", 1, 4.0, 2.0), ("asha", 2, 3.0, 2.0),
    ("median", 2, 2.0, 2.0), DEFAULT, ("curve", 1, 2.0, 1.0),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builtin", nargs="+", default=None, metavar="NAME",
                   help=f"shipped studies to replay (default: {' '.join(STUDIES)})")
    p.add_argument("--experiment", default=None, help="replay this MLflow experiment instead")
    p.add_argument("--tracking-uri", default=None, help="its MLflow store")
    p.add_argument("--out", default="reports/replay_asha", help="folder for the CSV")
    return p.parse_args(argv)


def _family(name: str) -> str:
    return re.sub(r"[\d_@].*$", "", name) or name


def slow_winners(curves: Sequence[Any], top: Sequence[str]) -> list[Any]:
    first = sorted(c.points[0].value for c in curves if not c.baseline)
    q75 = first[(3 * len(first)) // 4]
    steps = max(c.points[-1].step for c in curves)
    out = []
    for c in curves:
        if c.name not in top:
            out.append(c)
            continue
        lift = max(0.0, q75 - c.points[0].value)
        w0 = max(0.0, 1 - c.points[0].step / (steps / 2)) ** 2
        pts = tuple(replace(p, value=p.value + lift * max(0.0, 1 - p.step / (steps / 2)) ** 2
                            / w0) for p in c.points) if w0 > 0 else c.points
        out.append(replace(c, points=pts))
    return out


def half_budget(curves: Sequence[Any]) -> list[Any]:
    cut = max(c.points[-1].step for c in curves) // 2
    out = []
    for c in curves:
        pts = tuple(p for p in c.points if p.step <= cut)
        if pts:
            out.append(replace(c, points=pts, final=pts[-1].value, end=None))
    return out


def scenarios(curves: Sequence[Any], top: Sequence[str]) -> Iterator[tuple[str, list[Any], int]]:
    """(name, curves, factor on max_t) of the recorded sweep and its held-out variants."""
    from sublayer_search.search.replay.engine import together

    yield "recorded", list(curves), 1
    yield "together", together(curves), 1
    yield "slow-winners", slow_winners(curves, top), 1
    yield "half-budget", half_budget(curves), 2
    base = [c for c in curves if c.baseline]
    cands = [c for c in curves if not c.baseline]
    families = sorted({_family(c.name) for c in cands})
    if len(families) > 1:
        for fam in families:
            chosen = [c for c in cands if _family(c.name) == fam]
            if len(chosen) >= 2 * TOP_K:
                yield f"family={fam}", base + chosen, 1
    else:
        half = len(cands) // 2
        yield "half=first", base + cands[:half], 1
        yield "half=second", base + cands[half:], 1


FLOORS = (("floor-first", 1, 0.0, False), ("floor-second", 2, 0.0, False),
          ("floor-half-continue", 1, 0.5, False), ("floor-online-first", 1, 0.0, True),
          ("floor-online-second", 2, 0.0, True))
"""The least compute a rule that knew every final value could use (``search/replay/floor.py``):
stopping the other candidates at their first evaluation; at their second (as the curve rule
decides); at their first, but with half of the candidates continued to their second (as a
rule must that kept the slow winners of the other corpus, in the bottom half at the first
rung); and online, knowing only the finals of the trials started so far (a rule safe
whatever comes next), from the first and from the second evaluation."""


def floor_rows(study: str, scenario: str, curves: Sequence[Any], max_t: int, metric: str,
               rank: Any) -> list[dict[str, Any]]:
    """One row per floor of :data:`FLOORS` for this scenario's top k."""
    from sublayer_search.search.replay.engine import SchedulerSettings, replay
    from sublayer_search.search.replay.floor import compute_floor
    from sublayer_search.spaces.records import direction

    whole = replay(curves, SchedulerSettings(name="asha", max_t=max_t, grace_period=max_t,
                                             metric=metric, mode=direction(metric)),
                   k=TOP_K, rank_mode=rank)
    rows = []
    for name, first, share, online in FLOORS:
        f = compute_floor(whole, curves, first_decision=first, continued_share=share,
                          online=online)
        rows.append({"study": study, "scenario": scenario, "trials": len(curves),
                     "scheduler": name, "grace_evals": first, "reduction_factor": math.nan,
                     "z": math.nan, "default": False, "compute_fraction": f.fraction,
                     "candidate_compute_fraction": f.candidate_fraction, "top_k_kept": TOP_K,
                     "k": TOP_K, "regret": 0.0, "picked": whole.top_k[0] if whole.top_k else None,
                     "met": f.fraction <= TARGET_COMPUTE,
                     "met_candidates": f.candidate_fraction <= TARGET_COMPUTE})
    return rows


def replay_study(sweep: Any) -> list[dict[str, Any]]:
    from sublayer_search.search.replay.engine import SchedulerSettings, replay
    from sublayer_search.spaces.records import direction

    every, metric, rank = sweep.eval_every, sweep.scheduler_metric, direction(sweep.metric)
    full = replay(sweep.curves, SchedulerSettings(name="asha", max_t=sweep.steps,
                                                  grace_period=sweep.steps, metric=metric,
                                                  mode=direction(metric)), k=TOP_K,
                  rank_mode=rank)
    rows = []
    for scenario, curves, shrink in scenarios(sweep.curves, full.top_k):
        max_t = sweep.steps // shrink
        rows += floor_rows(sweep.experiment, scenario, curves, max_t, metric, rank)
        for name, grace, factor, z in SETTINGS:
            settings = SchedulerSettings(
                name=name, max_t=max_t, grace_period=grace * every, reduction_factor=factor,
                z=z, top_k=TOP_K, metric=metric, mode=direction(metric))  # type: ignore[arg-type]
            r = replay(curves, settings, k=TOP_K, rank_mode=rank)
            rows.append({
                "study": sweep.experiment, "scenario": scenario, "trials": len(curves),
                "scheduler": name, "grace_evals": grace, "reduction_factor": factor, "z": z,
                "default": (name, grace, factor, z) == DEFAULT,
                "compute_fraction": r.compute_fraction,
                "candidate_compute_fraction": r.candidate_compute_fraction,
                "top_k_kept": len(r.kept), "k": TOP_K, "regret": r.regret, "picked": r.picked,
                "met": len(r.kept) == TOP_K and r.compute_fraction <= TARGET_COMPUTE,
                "met_candidates": len(r.kept) == TOP_K
                and r.candidate_compute_fraction <= TARGET_COMPUTE})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import pandas as pd

    from sublayer_search.search.recorded.from_export import open_export, sweep_from_export

    if args.experiment is not None:
        from mlflow.tracking import MlflowClient

        from sublayer_search.search.replay.store import load_sweep

        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
        sweeps = [load_sweep(MlflowClient(tracking_uri=uri), args.experiment)]
    else:
        from sublayer_search.analysis.store.study_export import BUILTIN_EXPORTS

        names = args.builtin or [n for n in STUDIES if n in BUILTIN_EXPORTS]
        for missing in sorted(set(STUDIES) - set(BUILTIN_EXPORTS) - set(names)):
            print(f"note: {missing} is not shipped (analysis/data/{missing}_*): not replayed")
        sweeps = [sweep_from_export(open_export(n, builtin=True)) for n in names]
    frame = pd.DataFrame([row for s in sweeps for row in replay_study(s)])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "replay_grid.csv", index=False)
    shown = frame.drop(columns=["k", "default", "met", "met_candidates", "trials"])
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    default = frame[frame["default"]]
    summary = {
        "target": f"top {TOP_K} kept with <= {TARGET_COMPUTE:.0%} of the compute",
        "default": "curve, z 2 (decisions from the second evaluation)",
        "default_keeps_top_k_everywhere": bool((default["top_k_kept"] == TOP_K).all()),
        "default_met": {f"{r.study}/{r.scenario}": [round(r.compute_fraction, 3),
                                                   round(r.candidate_compute_fraction, 3),
                                                   int(r.top_k_kept)]
                        for r in default.itertuples()},
        "columns_of_default_met": "compute with baselines, candidates alone, top-k kept",
        "floor": {f"{r.study}/{r.scenario}/{r.scheduler}": [round(r.compute_fraction, 3),
                                                          round(r.candidate_compute_fraction, 3)]
                  for r in frame[frame["scheduler"].str.startswith("floor")].itertuples()
                  if r.scenario == "recorded"},
        "floor_is": "the least compute (with baselines, candidates alone) of a rule that knew "
                    "every final value; no rule can keep the top k for less",
        "csv": str(out / "replay_grid.csv"),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
