"""``search.algorithm: grid`` (the default): every planned trial, in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


@register_searcher("grid")
class Grid(SearchAlgorithm):
    """Every candidate with every seed (a space's own seeds too), the baseline's first."""

    position = 0
    needs_budget = False
    plans_every_trial = True
    takes_prior = True
    """The prior orders the queue (:mod:`~sublayer_search.search.searchers.queue`)."""
    takes_warm_start = False
    why_not = {"takes_warm_start": "reuse: true takes finished trials of a grid"}

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.grid_searcher import GridSearcher

        return GridSearcher(plan.trials, metric=plan.metric, mode=plan.mode)
