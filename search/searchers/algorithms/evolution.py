"""``search.algorithm: evolution``: regularized evolution with budget-keeping mutations;
``search.prior`` orders its first population."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.plan.sweep_plan import SweepPlan
    from sublayer_search.search.searchers.base import Stateful


@register_searcher("evolution")
class Evolution(SearchAlgorithm):
    """:class:`~sublayer_search.search.searchers.tune.EvolutionSearcher`, the baseline
    seeds first. A child is a mutated order: no guidance, no IOT subsets."""

    position = 3
    takes_prior = True
    guided_candidates = False
    iot_subsets = False
    why_not = {
        "guided_candidates": "mutations keep no guidance",
        "iot_subsets": "an IOT model is a set of orders, not one to mutate",
    }

    @classmethod
    def make(cls, plan: SweepPlan) -> Stateful:
        from sublayer_search.search.searchers.tune import EvolutionSearcher, baseline_first

        exp = plan.experiment
        f_units, c_units = plan.task.unit_costs(plan.model)
        return baseline_first(plan, EvolutionSearcher(
            plan.candidates, num_samples=exp.search.num_samples or 0,
            population=exp.search.population, sample_size=exp.search.sample_size,
            seed=exp.search.seed, trial_seed=exp.seed_list[0], metric=plan.metric,
            mode=plan.mode, f_units=f_units, c_units=c_units,
            prior=plan.prior))  # fitted once, at planning
