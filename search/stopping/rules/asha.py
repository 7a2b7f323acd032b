"""``scheduler.type: asha``: ASHA (Li et al., 2020) over the candidates; the baseline seeds
always train to the end."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.stopping.registry import register_rule
from sublayer_search.search.stopping.rule import (
    CurveReadingRule,
    CurveReadingSettings,
    StoppingSettings,
)

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

__all__ = ["Asha", "AshaSettings"]


class AshaSettings(CurveReadingSettings):
    type: Literal["asha"] = "asha"
    reduction_factor: float = Field(2.0, gt=1)
    """The halving rate (eta): a rung keeps one trial in ``reduction_factor``."""


@register_rule("asha")
class Asha(CurveReadingRule):
    """Successive halving, asynchronous."""

    settings = AshaSettings
    position = 1

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        assert isinstance(settings, AshaSettings)
        return (f"asha, {cls.grace(settings, train)}, reduction factor "
                f"{settings.reduction_factor:g}, {cls.watches(settings)}")

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        assert isinstance(settings, AshaSettings)
        from sublayer_search.search.stopping.schedulers import CandidateASHA

        return CandidateASHA(time_attr="step", metric=settings.metric, mode=settings.mode,
                             max_t=train.steps,
                             grace_period=settings.grace_period * train.eval_every,
                             reduction_factor=settings.reduction_factor)
