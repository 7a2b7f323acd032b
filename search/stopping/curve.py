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

from sublayer_search.search.stopping.schedulers import CurveReader

__all__ = ["CurveStopping"]


class CurveStopping(CurveReader):
    """Stop a candidate when its value is beyond the top-k by the margin above.

    ``grace_period``, ``max_t`` and the steps of results are in the unit of
    ``time_attr``. ``z`` is the noise margin in seed standard deviations. ``top_k`` is the
    number of best candidates the rule must keep. With ``slope_credit`` off, the margin
    is ``z * sigma`` alone. The reference curves are the trials that trained to the end.
    """

    def __init__(self, *, time_attr: str = "step", metric: str | None = None,
                 mode: str | None = None, max_t: int, grace_period: int, z: float = 2.0,
                 top_k: int = 3, min_references: int = 3, slope_credit: bool = True) -> None:
        if max_t < 1 or grace_period < 1 or top_k < 1 or min_references < 1 or not z >= 0:
            raise ValueError(f"CurveStopping: got max_t={max_t}, grace_period={grace_period}, "
                             f"top_k={top_k}, min_references={min_references}, z={z}; expected "
                             "whole numbers >= 1 and z >= 0")
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, max_t=max_t,
                         grace_period=grace_period, top_k=top_k, z=z)
        self.min_references, self.slope_credit = min_references, slope_credit

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a sweep saved before the shared base called the reference curves ``_references``
        if "_references" in state:
            state["_finished"] = state.pop("_references")
        self.__dict__.update(state)

    # -- the rule ------------------------------------------------------------------------
    def margin(self, trial_id: str, step: int) -> float | None:
        """The candidate's margin at ``step`` (None: no decision possible yet)."""
        refs = [self._curves[r] for r in self._finished if step in self._curves[r]]
        seeds = [c[step] - c[max(c)] for r, c in ((r, self._curves[r]) for r in self._finished)
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

    def beyond_reach(self, trial_id: str, step: int) -> bool:
        here = sorted(c[step] for t, c in self._curves.items()
                      if not self._baseline.get(t) and step in c)
        if len(here) < self.top_k:
            return False
        margin = self.margin(trial_id, step)
        return margin is not None and self._curves[trial_id][step] - here[self.top_k - 1] > margin

    def debug_string(self) -> str:
        return (f"CurveStopping: {len(self.stopped)} stopped, "
                f"{len(self._finished)} reference curves")
