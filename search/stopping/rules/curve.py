"""``scheduler.type: curve``: learning-curve stopping, the early stopping to use (a
candidate stops only when its curve cannot plausibly reach the sweep's top k;
:mod:`~sublayer_search.search.stopping.curve`, docs/search.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.scalars import Count
from sublayer_search.search.stopping.registry import register_rule
from sublayer_search.search.stopping.rule import (
    CurveReadingRule,
    CurveReadingSettings,
    StoppingSettings,
)

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

__all__ = ["Curve", "CurveSettings"]


class CurveSettings(CurveReadingSettings):
    type: Literal["curve"] = "curve"
    z: float = Field(2.0, ge=0)
    """Noise margin, in sds of the catch-up between baseline seeds (docs/search.md)."""
    top_k: Count = Field(3, ge=1)
    """The best candidates the rule must keep."""


@register_rule("curve")
class Curve(CurveReadingRule):
    """Stop a candidate beyond the top k by z seed sds plus slope credit."""

    settings = CurveSettings
    position = 2

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        assert isinstance(settings, CurveSettings)
        return (f"curve, {cls.grace(settings, train)}, z {settings.z:g}, keeps the top "
                f"{settings.top_k}, {cls.watches(settings)}")

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        assert isinstance(settings, CurveSettings)
        from sublayer_search.search.stopping.curve import CurveStopping

        return CurveStopping(time_attr="step", metric=settings.metric, mode=settings.mode,
                             max_t=train.steps, z=settings.z, top_k=settings.top_k,
                             grace_period=settings.grace_period * train.eval_every)
