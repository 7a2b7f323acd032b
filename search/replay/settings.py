"""What a replay is asked to do: the scheduler, its settings, and bad input.

Kept apart from :mod:`.engine` (which runs the replay) and :mod:`.report` (what it
found), so both can name the settings without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from sublayer_search.search.recorded.errors import ReplayError
from sublayer_search.spaces.records import Direction

__all__ = ["ARRIVALS", "DEFAULT_RULE", "RULES", "SCHEDULERS", "ReplayError", "SchedulerName", "SchedulerSettings"]

SCHEDULERS = ("asha", "asha-all", "hyperband", "median", "curve")
"""``asha``: the sweeps' ASHA (baselines train to the end); ``asha-all``: Ray's ASHA over
every trial; ``hyperband``: Ray's synchronous HyperBand; ``median``: the median stopping
rule; ``curve``: the sweeps' learning-curve stopping (:mod:`...stopping.curve`)."""
SchedulerName = Literal["asha", "asha-all", "hyperband", "median", "curve"]
ARRIVALS = ("recorded", "together", "prior")
"""``recorded``: trials start and report when they did; ``together``: every trial starts at
once (all added to the scheduler first, as with unlimited concurrency), each reporting at
its recorded times since its own start; ``prior``: trials start in the prior's queue order
with the sweep's own concurrency and durations (:mod:`.arrival`)."""
RULES = ("comeback", "margin")
DEFAULT_RULE = "margin"
"""What ``--scheduler curve`` replays without ``--rule``: the rule a sweep's ``type: curve``
runs (comeback misses its compute target on mini_press2020: docs/search.md)."""
"""Curve stopping's rule: ``comeback`` (:mod:`...stopping.comeback`, calibrated on other
studies' curves) or ``margin`` (:mod:`...stopping.curve`: z seed sds plus slope credit)."""


@dataclass(frozen=True, kw_only=True)
class SchedulerSettings:
    """A scheduler and its settings, in optimizer steps (the recorded ``step``)."""

    name: SchedulerName = "asha"
    max_t: int
    """Steps a trial trains at most (the sweep's ``train.steps``)."""
    grace_period: int = 1
    """ASHA and median rule: steps before a trial can be stopped."""
    reduction_factor: float = 2.0
    """ASHA and HyperBand: the halving rate (eta)."""
    min_samples: int = 3
    """Median rule: trials needed to compute a median."""
    z: float = 2.0
    """Curve: the noise margin, in baseline seed standard deviations."""
    top_k: int = 3
    """Curve: the best candidates the rule must keep."""
    rule: Literal["comeback", "margin"] = "margin"
    """Curve: which rule (:data:`RULES`); ``margin`` is what a sweep's ``type: curve`` runs."""
    calibration: Any = None
    """Curve with ``comeback``: its :class:`~.calibration.Calibration` (required there; typed
    ``Any`` because the calibration module imports this one)."""
    metric: str = "val_loss"
    mode: Direction = "min"

    def __post_init__(self) -> None:
        if self.name not in SCHEDULERS:
            raise ReplayError("scheduler", self.name, f"one of {', '.join(SCHEDULERS)}")
        if self.max_t < 1:
            raise ReplayError("max_t", self.max_t, "a whole number of steps >= 1")
        if not 1 <= self.grace_period <= self.max_t:
            raise ReplayError("grace_period", self.grace_period,
                              f"steps in 1..{self.max_t} (max_t)")
        if not (math.isfinite(self.reduction_factor) and self.reduction_factor > 1):
            raise ReplayError("reduction_factor", self.reduction_factor, "a number > 1")
        if self.min_samples < 1:
            raise ReplayError("min_samples", self.min_samples, "a whole number >= 1")
        if not (math.isfinite(self.z) and self.z >= 0):
            raise ReplayError("z", self.z, "a number >= 0 (seed standard deviations)")
        if self.top_k < 1:
            raise ReplayError("top_k", self.top_k, "a whole number >= 1")
        if self.rule not in RULES:
            raise ReplayError("rule", self.rule, f"one of {', '.join(RULES)}")
        if self.name == "curve" and self.rule == "comeback" and self.calibration is None:
            raise ReplayError("calibration", None, "a calibration for the comeback rule")
        if self.mode not in ("min", "max"):
            raise ReplayError("mode", self.mode, "min or max")
