"""``scheduler.type: fifo`` (the default): no early stopping, every trial trains all its
steps, as studies that compare every order need."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.searchers.prior import BUILTIN_PRIORS
from sublayer_search.search.stopping.registry import register_rule
from sublayer_search.search.stopping.rule import StoppingRule, StoppingSettings

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

__all__ = ["Fifo", "FifoSettings"]


class FifoSettings(StoppingSettings):
    type: Literal["fifo"] = "fifo"


@register_rule("fifo")
class Fifo(StoppingRule):
    """Trials run in the searcher's order; none is stopped."""

    settings = FifoSettings
    position = 0

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        return ("fifo (no early stopping: every trial trains all its steps, as studies of "
                "every order need); to search instead, the recommended setup is "
                f"`search: {{prior: [{', '.join(BUILTIN_PRIORS)}]}}` with "
                "`scheduler: {type: curve}`: the orders the prior predicts best start first "
                "and hopeless trials stop early (docs/search.md, \"Recommended setup\")")

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        from sublayer_search.search.stopping.schedulers import Fifo as FifoScheduler

        return FifoScheduler()
