"""A recorded sweep's learning curves as the replay reads them: plain data, no Ray and no
MLflow, so that what only reads curves (the calibration of comeback stopping, a dry run's
line on it) imports neither. :mod:`.engine` and :mod:`.store` re-export these names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sublayer_search.search.recorded.errors import ReplayError

__all__ = ["Curve", "Point", "RecordedSweep", "together"]


@dataclass(frozen=True, kw_only=True)
class Point:
    """One recorded evaluation of a trial."""

    step: int
    """Optimizer steps trained when it was evaluated (the scheduler's time attribute)."""
    value: float
    """The scheduler's metric at that step."""
    time: float
    """When the result arrived (MLflow timestamp, ms)."""


@dataclass(frozen=True, kw_only=True)
class Curve:
    """A trial's recorded learning curve and how the recorded sweep ended it."""

    name: str
    order: str
    points: tuple[Point, ...]
    """Evaluations in step order (strictly increasing steps)."""
    final: float
    """Last recorded value of the ranking metric (nan when it has none)."""
    baseline: bool = False
    complete: bool = True
    """Trained every planned step in the recorded sweep (not stopped, not failed)."""
    failed: bool = False
    """The trial raised (the scheduler hears ``on_trial_error`` when its recording ends)."""
    start: float | None = None
    """When the trial started (ms; default: its first result)."""
    end: float | None = None
    """When it ended (ms; default: its last result)."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ReplayError("curve.name", self.name, "a trial name")
        if not self.points:
            raise ReplayError(f"curve {self.name}", "no evaluations", "at least one evaluation")
        steps = [p.step for p in self.points]
        if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise ReplayError(f"curve {self.name}.steps", steps, "strictly increasing steps")

    @property
    def started(self) -> float:
        return self.points[0].time if self.start is None else min(self.start, self.points[0].time)

    @property
    def ended(self) -> float:
        return self.points[-1].time if self.end is None else max(self.end, self.points[-1].time)


def together(curves: Sequence[Curve]) -> list[Curve]:
    """The curves as if every trial had started at time 0 (recorded durations kept)."""
    out = []
    for c in curves:
        t0 = c.started
        out.append(replace(c, start=0.0, end=None if c.end is None else c.end - t0,
                           points=tuple(replace(p, time=p.time - t0) for p in c.points)))
    return out


@dataclass(frozen=True, kw_only=True)
class RecordedSweep:
    """The curves of one recorded sweep and the settings replays need from it."""

    experiment: str
    parent_run_id: str
    metric: str
    """The sweep's main metric (ranks trials by their final value)."""
    scheduler_metric: str
    """The metric in the curves' points."""
    curves: tuple[Curve, ...]
    steps: int
    """Steps a trial trains (``train.steps``)."""
    eval_every: int
    """Steps between evaluations (``train.eval_every``)."""
    recorded_scheduler: str
    """The sweep's scheduler (``fifo`` or ``asha``)."""
    stopped: dict[str, int]
    """Trials the recorded sweep's scheduler stopped -> their last step."""
