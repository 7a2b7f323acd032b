"""``search.algorithm: evolution``: regularized evolution with budget-keeping mutations;
``search.prior`` orders its first population."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from sublayer_search.search.core.scalars import Count
from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher
from sublayer_search.search.searchers.settings import SearchSection

if TYPE_CHECKING:
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


class EvolutionSettings(SearchSection):
    """``search`` of ``algorithm: evolution``."""

    population: Count = Field(8, ge=2)
    """Population size (regularized evolution, Real et al. 2019)."""
    sample_size: Count = Field(3, ge=1)
    """Tournament size."""


@register_searcher("evolution")
class Evolution(SearchAlgorithm):
    """:class:`~sublayer_search.search.searchers.evolution_searcher.EvolutionSearcher`, the baseline
    seeds first. A child is a mutated order: no guidance, no IOT subsets."""

    position = 3
    settings = EvolutionSettings
    takes_prior = True
    guided_candidates = False
    iot_subsets = False
    any_kinds = False
    why_not = {
        "guided_candidates": "mutations keep no guidance",
        "iot_subsets": "an IOT model is a set of orders, not one to mutate",
    }

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher
        from sublayer_search.search.searchers.with_baseline import baseline_first

        exp = plan.experiment
        search = exp.search
        assert isinstance(search, EvolutionSettings)  # read as this searcher's settings
        f_units, c_units = plan.task.unit_costs(plan.model)
        return baseline_first(plan, EvolutionSearcher(
            plan.candidates, num_samples=search.num_samples or 0,
            population=search.population, sample_size=search.sample_size,
            seed=search.seed, trial_seed=exp.seed_list[0], metric=plan.metric,
            mode=plan.mode, f_units=f_units, c_units=c_units,
            prior=plan.prior))  # fitted once, at planning
