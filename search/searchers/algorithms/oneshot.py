"""``search.algorithm: oneshot``: a weight-sharing supernet ranks every order of the space
(stage 1, :mod:`sublayer_search.search.oneshot`), the ``top_k`` train stand-alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sublayer_search.search.searchers.algorithms.grid import Grid
from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

if TYPE_CHECKING:
    from sublayer_search.search.plan.problems import Problem
    from sublayer_search.search.plan.sweep_plan import SweepPlan
    from sublayer_search.search.plan.variant import VariantCandidate
    from sublayer_search.search.searchers.base import Stateful


@register_searcher("oneshot")
class OneShot(SearchAlgorithm):
    """Stage 1 ranks; stage 2 is a grid of the top k (and the prior's picks)."""

    position = 4
    needs_budget = False
    takes_prior = True
    takes_warm_start = False
    guided_candidates = False
    iot_subsets = False
    supernet_stage = True

    @classmethod
    def pool_problems(cls, pool: Sequence[VariantCandidate]) -> list[Problem]:
        """None here: its own checks (:func:`~sublayer_search.search.oneshot.checks.
        oneshot_problems`) refuse guidance, and any task but ``lm`` (so IOT subsets)."""
        return []

    @classmethod
    def make(cls, plan: SweepPlan) -> Stateful:
        """Stage 2's searcher: the sweep runs stage 1 first, which makes the plan a grid of
        the ranked orders (:func:`~sublayer_search.search.oneshot.plan.stage_two`)."""
        return Grid.make(plan)
