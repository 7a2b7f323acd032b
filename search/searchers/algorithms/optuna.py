"""``search.algorithm: optuna``: an Optuna study (TPE, or NSGA-II / TPE over several
``search.objectives``) over the candidates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.plan.sweep_plan import SweepPlan
    from sublayer_search.search.searchers.base import Stateful


@register_searcher("optuna")
class Optuna(SearchAlgorithm):
    """:class:`~sublayer_search.search.searchers.optuna_study.OptunaTrials`, the baseline
    seeds first."""

    position = 1
    several_objectives = True
    takes_replicates = True

    @classmethod
    def make(cls, plan: SweepPlan) -> Stateful:
        from sublayer_search.search.searchers.optuna_study import OptunaTrials
        from sublayer_search.search.searchers.tune import baseline_first

        exp = plan.experiment
        objectives = exp.search.objectives or [plan.metric]
        return baseline_first(plan, OptunaTrials(
            plan.candidates, num_samples=exp.search.num_samples or 0, seeds=exp.seed_list,
            metric=plan.metric, mode=plan.mode, seed=exp.search.seed, objectives=objectives,
            statics=statics(plan, objectives), sampler=exp.search.sampler,
            identity=plan.task.identity, replicates=exp.search.replicates))


def statics(plan: SweepPlan, objectives: Sequence[str]) -> dict[str, dict[str, float]]:
    """Static objectives of every candidate, keyed by variant (order and identity; a
    hard-guided model has fewer parameters than its order unguided)."""
    from sublayer_search.search.plan.experiment import STATIC_OBJECTIVES
    from sublayer_search.search.plan.trial import Trial
    from sublayer_search.search.plan.variant import variant_key

    wanted = [o for o in objectives if o in STATIC_OBJECTIVES]
    if not wanted:
        return {}
    out = {}
    for cand in plan.candidates:
        row = plan.row(Trial.of(cand, 0))
        key = variant_key(cand.order, plan.task.identity(cand.variant))
        out[key] = {k: float(row[k]) for k in wanted if row.get(k) is not None}
    return out
