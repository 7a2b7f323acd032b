"""Learning-curve stopping: stop a candidate only when its curve cannot plausibly reach
the sweep's top k (``scheduler: {type: curve}``).

Successive halving (ASHA) keeps a fixed share at each rung by the metric reached so
far. Orders that start slower than the orders they later beat are then stopped at the
first rung. This rule looks at each candidate's curve instead. The fully trained curves
of the sweep are the reference: the baseline seeds, which train to the end anyway, and
every candidate that finished. At each evaluation from the grace period on, a candidate
is stopped when it is worse than the k-th best candidate at that step by more than

    margin = z * sigma(t) + max(0, beta(t) * slope - R(t))

- ``sigma(t)``: how much one run can catch up on another of the same order from step t
  to the end by seed alone: sqrt(2) times the sd, over the baseline seeds, of their
  improvement from t to the end. ``z`` (default 2) is the safety factor.
- ``R(t)``: the median of how much a reference curve still improved from step t to its
  end. ``beta(t)``: the median of that remaining improvement over the improvement of the
  last evaluation interval. ``beta(t) * slope`` is then the candidate's own remaining
  improvement, extrapolated from its last interval. A candidate that is still improving
  faster than the references gets the difference as extra margin, so a slow starter
  that is catching up is kept.

A candidate is never stopped at its first evaluation: it has no slope yet, and a
slow starter cannot be told from a loser by one point. There is no decision at step t
before ``min_references`` reference curves and two baseline seeds have finished, or
before k candidates reached t. The first trials of a sweep therefore always train
further. Baselines are never stopped, so the report can
compare every candidate with whole baseline seeds.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sublayer_search.search.run.schedulers import CurveResults, WaitingFirst, is_baseline

__all__ = ["CurveStopping"]


class CurveStopping(CurveResults, WaitingFirst, FIFOScheduler):
    """Stop a candidate when its value is beyond the top-k by the margin above.

    ``grace_period``, ``max_t`` and the steps of results are in the unit of
    ``time_attr``. ``z`` is the noise margin in seed standard deviations. ``top_k`` is the
    number of best candidates the rule must keep. With ``slope_credit`` off, the margin
    is ``z * sigma`` alone.
    """

    def __init__(self, *, time_attr: str = "step", metric: str | None = None,
                 mode: str | None = None, max_t: int, grace_period: int, z: float = 2.0,
                 top_k: int = 3, min_references: int = 3, slope_credit: bool = True) -> None:
        super().__init__()
        if max_t < 1 or grace_period < 1 or top_k < 1 or min_references < 1 or not z >= 0:
            raise ValueError(f"CurveStopping: got max_t={max_t}, grace_period={grace_period}, "
                             f"top_k={top_k}, min_references={min_references}, z={z}; expected "
                             "whole numbers >= 1 and z >= 0")
        self._time_attr, self._metric, self._mode = time_attr, metric, mode
        self.max_t, self.grace_period, self.z, self.top_k = max_t, grace_period, z, top_k
        self.min_references, self.slope_credit = min_references, slope_credit
        self._curves: dict[str, dict[int, float]] = {}
        """Trial id -> step -> value, sign-adjusted so that lower is better."""
        self._baseline: dict[str, bool] = {}
        self._references: list[str] = []
        """Ids of trials that trained to ``max_t``, in order of completion."""
        self.stopped: dict[str, int] = {}

    # -- what the trials report --------------------------------------------------------
    def _record(self, trial: Any, result: dict[str, Any]) -> int | None:
        read = self.step_value(result)
        if read is None:
            return None
        step, value = read
        self._baseline.setdefault(trial.trial_id, is_baseline(trial))
        self._curves.setdefault(trial.trial_id, {})[step] = value
        return step

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        step = self._record(trial, result)
        if step is None or self._baseline.get(trial.trial_id) or not (
                self.grace_period <= step < self.max_t):
            return str(TrialScheduler.CONTINUE)
        if self._beyond_reach(trial.trial_id, step):
            self.stopped[trial.trial_id] = step
            return str(TrialScheduler.STOP)
        return str(TrialScheduler.CONTINUE)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if result:
            self._record(trial, result)
        curve = self._curves.get(trial.trial_id, {})
        if curve and max(curve) >= self.max_t and trial.trial_id not in self.stopped \
                and trial.trial_id not in self._references:
            self._references.append(trial.trial_id)

    # -- the rule ------------------------------------------------------------------------
    def margin(self, trial_id: str, step: int) -> float | None:
        """The candidate's margin at ``step`` (None: no decision possible yet)."""
        refs = [self._curves[r] for r in self._references if step in self._curves[r]]
        seeds = [c[step] - c[max(c)] for r, c in ((r, self._curves[r]) for r in self._references)
                 if self._baseline.get(r) and step in c]
        if len(refs) < self.min_references or len(seeds) < 2:
            return None
        margin = self.z * math.sqrt(2) * statistics.stdev(seeds)
        own = self._curves[trial_id]
        before = max((s for s in own if s < step), default=None)
        if before is None:
            return None  # its first evaluation: no slope yet
        if not self.slope_credit:
            return margin
        left = [c[step] - c[max(c)] for c in refs]
        ratios = [(c[step] - c[max(c)]) / (c[before] - c[step]) for c in refs
                  if before in c and c[before] - c[step] > 0]
        slope = own[before] - own[step]
        if ratios and slope > 0:
            margin += max(0.0, statistics.median(ratios) * slope - statistics.median(left))
        return margin

    def _beyond_reach(self, trial_id: str, step: int) -> bool:
        here = sorted(c[step] for t, c in self._curves.items()
                      if not self._baseline.get(t) and step in c)
        if len(here) < self.top_k:
            return False
        margin = self.margin(trial_id, step)
        return margin is not None and self._curves[trial_id][step] - here[self.top_k - 1] > margin

    def debug_string(self) -> str:
        return (f"CurveStopping: {len(self.stopped)} stopped, "
                f"{len(self._references)} reference curves")
