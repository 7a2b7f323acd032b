"""``search.algorithm: surrogate``: order-aware, a Gaussian process over order features,
shaped by ``search.prior``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


@register_searcher("surrogate")
class Surrogate(SearchAlgorithm):
    """:class:`~sublayer_search.search.searchers.surrogate.SurrogateSearcher`, the
    baseline seeds first."""

    position = 2
    takes_prior = True
    any_kinds = False

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.surrogate import SurrogateSearcher
        from sublayer_search.search.searchers.with_baseline import baseline_first

        exp = plan.experiment
        f_units, c_units = plan.task.unit_costs(plan.model)
        return baseline_first(plan, SurrogateSearcher(
            plan.candidates, num_samples=exp.search.num_samples or 0, seeds=exp.seed_list,
            metric=plan.metric, mode=plan.mode, seed=exp.search.seed, f_units=f_units,
            c_units=c_units, identity=plan.task.identity,
            prior=plan.prior))  # fitted once, at planning
