"""``reuse``: trials that already finished with the same content key are not trained again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import run_variant
from sublayer_search.search.plan.sweep_plan import SweepPlan, then
from sublayer_search.search.tracking.runs import copy_trial, finished_trials

if TYPE_CHECKING:
    from mlflow import MlflowClient

__all__ = ["rerun_hint", "reuse_finished"]


def reuse_finished(client: MlflowClient, exp_id: str, parent_id: str,
                   plan: SweepPlan) -> tuple[SweepPlan, dict[tuple[str, int, str], str]]:
    """Drop trials whose content key — (order, seed, identity, config hash) — already
    finished (identity: what else tells models apart, such as an IOT subset; a run's is
    read from the variant its params describe)."""
    scope = [exp_id]
    if plan.experiment.reuse == "store":
        scope += [e.experiment_id for e in client.search_experiments(max_results=50000)
                  if e.experiment_id != exp_id]

    identity, key = _keys(plan)
    done = finished_trials(client, scope, plan.config_hash, identity)
    same = (set(finished_trials(client, exp_id, plan.config_hash, identity))
            if len(scope) > 1 else set(done))
    reused = {key(t): done[key(t)] for t in plan.trials if key(t) in done}
    for found, run_id in list(reused.items()):
        if found not in same:  # from another experiment: copied in, so its studies see it
            copy_trial(client, run_id, exp_id, parent_id)
    if reused:
        lines = [f"{order}\t{seed}\t{run_id}" for (order, seed, _), run_id in reused.items()]
        client.log_text(parent_id, "order\tseed\trun_id\n" + "\n".join(lines) + "\n",
                        "reused_trials.tsv")
    client.set_tag(parent_id, "sublayer.reused_trials", str(len(reused)))
    kept = [t for t in plan.trials if key(t) not in reused]
    return then(plan, f"reuse ({len(reused)} trial(s) already finished)", trials=kept), reused


def _keys(plan: SweepPlan) -> tuple[Any, Any]:
    """(a finished run's identity from its params, a planned trial's content key)."""

    def identity(params: dict[str, str]) -> str:
        variant = run_variant(params)
        return "?" if variant is None else plan.task.identity(variant)

    def key(t: Trial) -> tuple[str, int, str]:
        return (t.order, t.seed, plan.task.identity(t.variant))

    return identity, key


def rerun_hint(client: MlflowClient, exp_id: str, plan: SweepPlan, source: str) -> str:
    """With ``reuse`` off, a line that says how many planned trials already finished in
    this experiment with the same content key and how to avoid training them again
    (``reuse: true``, or ``--resume`` for an interrupted sweep); empty when none did."""
    identity, key = _keys(plan)
    done = finished_trials(client, exp_id, plan.config_hash, identity)
    again = sum(1 for t in plan.trials if key(t) in done)
    if not again:
        return ""
    return (f"{again} of {len(plan.trials)} planned trial(s) already finished in experiment "
            f"{plan.experiment.experiment_name!r} with the same order, seed and settings: "
            "this sweep trains them again, which adds no evidence (sublayer analyze keeps "
            "the latest of each). To reuse them instead, set `reuse: true` in "
            f"{source}; to finish an interrupted sweep, run `sublayer sweep {source} "
            "--resume`.")
