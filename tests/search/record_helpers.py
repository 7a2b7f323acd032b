"""Trial runs of every task written by the real tracking callback into a real MLflow store,
without training: each planned trial is started, reports twice and ends, as Ray Tune
would drive the callback. Shared by the trial record's round-trip test and by the script
that made the previous release's fixture (``tests/analysis/fixtures/``)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sublayer_search.search.oneshot.stages import stage_two
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.runs import ensure_store, open_sweep_run

__all__ = ["TASKS", "experiment", "planned", "reported", "write_runs"]

_TRAIN = {"steps": 4, "eval_every": 2, "batch_size": 4, "eval_batches": 1}
_LM = {"model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"}}
_TRANSLATION = {"task": "translation", "model": {"preset": "debug"},
                "data": {"name": "multi30k", "vocab_size": 300, "max_train_tokens": 30},
                "translation": {"beam": 1, "max_len": 20, "eval_sentences": 8}}
TASKS: dict[str, dict[str, Any]] = {
    "lm": {**_LM, "space": {"type": "sandwich", "n": 3, "k": [1, 2]}, "seeds": [0, 1],
           "baseline": {"seeds": 2}},
    "translation": {**_TRANSLATION, "space": {"type": "explicit", "orders": ["sfscfsfcf"]},
                    "seeds": [0], "baseline": {"seeds": 1}},
    "iot": {**_TRANSLATION, "space": [
        {"type": "iot_subsets", "stack": "decoder", "size": 2, "mode": "paper", "layers": 2}],
        "seeds": [0], "baseline": {"seeds": 1}},
    "guided": {**_LM, "space": {"type": "sandwich", "n": 3, "k": [1]}, "seeds": [0],
               "baseline": {"seeds": 1},
               "model": {"preset": "debug", "guidance": [
                   {"mode": "none"}, {"mode": "soft", "blocks": ["key_query"]},
                   {"mode": "hard", "blocks": ["ffn", "key_query"], "pairing": [
                       "query_key", "w1_w2"]}]}},
    "oneshot": {**_LM, "space": {"type": "permutations", "n_s": 2, "n_f": 2, "count": 4,
                                 "seed": 0},
                "seeds": [0], "baseline": {"seeds": 2},
                "search": {"algorithm": "oneshot", "top_k": 2,
                           "supernet": {"steps": 4, "eval_every": 2, "eval_batches": 1}}},
    "multi_objective": {**_LM, "space": {"type": "sandwich", "n": 3, "k": [0, 1, 2]},
                        "seeds": [0], "baseline": {"seeds": 1},
                        "search": {"algorithm": "optuna", "num_samples": 2,
                                   "sampler": "nsga2", "objectives": ["val_bpc", "params"]}},
}
"""A tiny experiment of each task (LM, translation, IOT, guided, one-shot,
multi-objective), debug presets, nothing to download beyond the shared corpora."""


def experiment(task: str, folder: Path, uri: str) -> dict[str, Any]:
    """The experiment of ``task``, named ``record-<task>``, storing into ``uri``."""
    return {"name": f"record-{task}", **TASKS[task], "train": dict(_TRAIN),
            "tracking": {"uri": uri}, "ray": {"storage_path": str(folder / "ray")}}


def planned(task: str, folder: Path, uri: str) -> tuple[SweepPlan, list[Any]]:
    """The plan of ``task`` and the trials its sweep would run: a one-shot sweep's stage
    two after a ranking (every order, rank by position); an adaptive searcher's baseline
    trials, then one trial per candidate as the searcher would propose them."""
    plan = plan_sweep(parse_experiment(experiment(task, folder, uri)))
    if task == "oneshot":
        ranking = [{"order": c.order, "rank": i + 1, "mean": 1.5 + i / 8, "sem": 0.01,
                    "n_batches": 4} for i, c in enumerate(plan.candidates)]
        plan = stage_two(plan, ranking)
        return plan, list(plan.trials)
    trials = list(plan.trials)
    if task == "multi_objective":
        from sublayer_search.search.core.trial import Trial

        trials += [Trial.of(c, 0, plan.spec_source(c.name, c.variant))
                   for c in plan.candidates[:2]]
    return plan, trials


def reported(plan: SweepPlan, index: int, step: int, tid: str = "") -> dict[str, Any]:
    """What trial number ``index`` reports at ``step``."""
    value = 1.0 + index / 16 + 1 / (step + 1)
    out: dict[str, Any] = {"step": step, "val_loss": value, plan.metric: value,
                           f"best_{plan.metric}": value, "trial_id": tid, "status": "running",
                           "done": step >= plan.experiment.train.steps}
    if plan.metric == "val_bleu":
        out["routing_bleu"] = json.dumps({"0": {"0": 10.5}})
    return out


def write_runs(plan: SweepPlan, trials: list[Any], uri: str) -> tuple[Any, str, str]:
    """Each trial started, reported at steps 2 and 4 (the last one its end) and completed
    through the sweep's tracking callback; (client, experiment id, parent run id)."""
    client = ensure_store(uri)
    exp_id, parent = open_sweep_run(client, plan, "ray-run", resume=False)
    callback = MlflowTracking(tracking_uri=uri, experiment_id=exp_id, parent_run_id=parent,
                              plan=plan, fresh=True)
    for i, trial in enumerate(trials):
        tid = f"t{i:03d}"
        ray_trial = SimpleNamespace(trial_id=tid, config={"trial": trial}, num_failures=0,
                                    last_result={}, checkpoint=None)
        callback.on_trial_start(0, [ray_trial], ray_trial)
        for step in (2, plan.experiment.train.steps):
            result = reported(plan, i, step, tid)
            ray_trial.last_result = result
            callback.on_trial_result(0, [ray_trial], ray_trial, result)
        callback.on_trial_complete(0, [ray_trial], ray_trial)
    callback.buffer.drain()
    return client, exp_id, parent
