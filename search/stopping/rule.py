"""What a stopping rule declares (``scheduler.type``): its settings, its checks, its line in
a dry run and how its Ray Tune scheduler is built.

Light: planning imports the declarations, so a rule imports Ray only inside :meth:`make`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.problems import Problem
from sublayer_search.search.core.scalars import Count
from sublayer_search.search.core.section import Strict

if TYPE_CHECKING:
    from ray.tune.schedulers import TrialScheduler

__all__ = ["CurveReadingRule", "CurveReadingSettings", "StoppingRule", "StoppingSettings"]


class StoppingSettings(Strict):
    """The ``scheduler`` section: ``type`` names the rule; each rule adds its settings."""

    type: str
    metric: str = "val_loss"
    """The reported metric the rule reads (every evaluation reports it)."""
    mode: Literal["min", "max"] = "min"


class CurveReadingSettings(StoppingSettings):
    """A rule that reads learning curves and may stop a trial after its grace period."""

    grace_period: Count = Field(1, ge=1)
    """Evaluations before a trial can be stopped."""


class StoppingRule:
    """A stopping rule: its settings model and what it does with them (class methods)."""

    name: ClassVar[str] = ""
    settings: ClassVar[type[StoppingSettings]] = StoppingSettings
    position: ClassVar[int] = 99
    """Where it is listed (``expected one of 'fifo', 'asha' or 'curve'``)."""

    @classmethod
    def problems(cls, settings: StoppingSettings, train: TrainConfig) -> list[Problem]:
        """What in ``settings`` cannot run with this ``train`` section."""
        return []

    @classmethod
    def describe(cls, settings: StoppingSettings, train: TrainConfig) -> str:
        """The dry run's ``scheduler:`` line."""
        raise NotImplementedError(f"stopping rule {cls.name!r} describes nothing")

    @classmethod
    def make(cls, settings: StoppingSettings, train: TrainConfig) -> TrialScheduler:
        """The Ray Tune scheduler (a ``TrialScheduler``; Ray is imported here only)."""
        raise NotImplementedError(f"stopping rule {cls.name!r} builds no scheduler")


class CurveReadingRule(StoppingRule):
    """A rule that reads a reported metric at every evaluation after a grace period."""

    READABLE = ("val_loss", "train_loss")
    """Metrics reported at every evaluation."""

    @classmethod
    def problems(cls, settings: StoppingSettings, train: TrainConfig) -> list[Problem]:
        assert isinstance(settings, CurveReadingSettings)
        out = []
        if settings.metric not in cls.READABLE:
            out.append(Problem("scheduler.metric", settings.metric,
                               "val_loss or train_loss (reported at every evaluation)"))
        evaluations = max(train.steps // train.eval_every, 1)
        if settings.grace_period > evaluations:
            out.append(Problem("scheduler.grace_period", settings.grace_period,
                               f"at most {evaluations} (the evaluations of a trial: "
                               f"train.steps {train.steps} / train.eval_every "
                               f"{train.eval_every})"))
        return out

    @classmethod
    def grace(cls, settings: CurveReadingSettings, train: TrainConfig) -> str:
        return (f"grace {settings.grace_period} evaluation(s) "
                f"({settings.grace_period * train.eval_every} steps)")

    @classmethod
    def watches(cls, settings: StoppingSettings) -> str:
        return f"on {settings.metric} ({settings.mode}); baseline seeds are never stopped"
