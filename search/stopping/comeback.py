"""Comeback stopping: stop a candidate that trails the top k by more than any eventual
top-k candidate of other studies ever trailed at that point of training.

The margin of :class:`.curve_stopping.CurveStopping` (z baseline seed sds plus slope
credit) says how far seed noise alone can move a curve. It does not say how far the
orders of a sweep cross each other on the way to their final values, so it has to be
wide everywhere. This rule measures that crossing on recorded curves of *other* studies
(a calibration, :class:`...stopping.calibration.Calibration`, in the spirit of LC-PFN's and freeze-thaw's
learning-curve priors learnt from earlier curves, reduced to the one number a stopping
rule needs):

- **the deficit** of a candidate at an evaluation: its value minus the k-th best value
  that the sweep's candidates reached at the same step so far, in units of the spread
  (interquartile range) of those values: scale-free, so it carries across corpora,
  metrics and model sizes;
- **the comeback** at a fraction f of training: the largest deficit that any eventual
  top-k candidate of a calibration study showed at f or later, as seen online (the
  field = the candidates that had reached that step before it), over the study's
  recorded arrival order and 50 seeded random ones (:mod:`...stopping.calibration`);
- **the rule**: stop a candidate at step t when its deficit exceeds :data:`SAFETY` times
  the comeback at t / max_t, and its lag exceeds ``z`` sds of the seed difference
  (sqrt 2 x the sd of the finished baseline seeds' final values: how far two runs of one
  order end apart by seed alone). That floor is small next to the comeback early in
  training; late, where the calibration saw no comeback, it keeps the rule from
  stopping a candidate that seed noise alone could carry into the top k.
- **in-study evidence**: as candidates finish, the deficits their own top k showed on the
  way raise the comeback wherever they exceed it (never lower it), so curves that cross
  more than the calibration's widen the margin as the sweep learns so.

Decisions start at the first evaluation (the calibration measures the comeback there
too), once :data:`MIN_FIELD_PER_K` x k candidates have reached that step and two baseline
seeds have finished. Baselines are never stopped. Constants are fixed a priori, never
per judged study (docs/search.md).
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from sublayer_search.search.stopping.calibration import (
    MIN_FIELD_PER_K,
    SAFETY,
    Calibration,
    deficit,
)
from sublayer_search.search.stopping.schedulers import CurveReader

__all__ = ["MIN_FIELD_PER_K", "SAFETY", "Calibration", "ComebackStopping", "deficit"]

class ComebackStopping(CurveReader):
    """Stop a candidate whose deficit is beyond the comeback (module docstring).

    ``grace_period``, ``max_t`` and steps are in the unit of ``time_attr``; ``z`` is the
    floor of the margin in sds of the seed difference; ``learn`` lets finished candidates
    widen the calibration (never narrow it)."""

    def __init__(self, *, calibration: Calibration, time_attr: str = "step",
                 metric: str | None = None, mode: str | None = None, max_t: int,
                 grace_period: int = 1, top_k: int = 3, z: float = 2.0,
                 learn: bool = True) -> None:
        if max_t < 1 or grace_period < 1 or top_k < 1 or not z >= 0:
            raise ValueError(f"ComebackStopping: got max_t={max_t}, grace_period="
                             f"{grace_period}, top_k={top_k}, z={z}; expected whole numbers "
                             ">= 1 and z >= 0")
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, max_t=max_t,
                         grace_period=grace_period, top_k=top_k, z=z)
        self.calibration, self.learn = calibration, learn
        self.min_field = MIN_FIELD_PER_K * top_k
        self._at: dict[int, dict[str, float]] = {}
        """Step -> candidate id -> value (the field at that step)."""
        self._top: tuple[str, ...] = ()
        self.observed: dict[int, float] = {}
        """Step -> the largest deficit this sweep's finished top k showed there."""

    def recorded(self, trial_id: str, step: int, value: float, *, baseline: bool) -> None:
        if not baseline:
            self._at.setdefault(step, {})[trial_id] = value

    def trained_to_the_end(self, trial_id: str) -> None:
        if self.learn and not self._baseline.get(trial_id):
            self._learn()

    # -- the rule ------------------------------------------------------------------------
    def _learn(self) -> None:
        """Recompute :attr:`observed` when the finished candidates' top k changed."""
        done = [t for t in self._finished if not self._baseline.get(t)]
        top = tuple(sorted(done, key=lambda t: self._curves[t][max(self._curves[t])])[:self.top_k])
        if top == self._top:
            return
        self._top, self.observed = top, {}
        for tid in top:
            for step, value in self._curves[tid].items():
                field = self._at.get(step, {})
                if step >= self.max_t or len(field) < self.min_field:
                    continue
                d = deficit(value, np.fromiter(field.values(), float, len(field)), self.top_k)
                if d is not None and d > self.observed.get(step, -math.inf):
                    self.observed[step] = d

    def comeback(self, step: int) -> float:
        """The comeback allowed at ``step``: the calibration's, or this sweep's own where
        its finished top k came back from further (at ``step`` or later)."""
        own = max((d for s, d in self.observed.items() if s >= step), default=-math.inf)
        return max(self.calibration.at(step / self.max_t), own)

    def seed_sigma(self) -> float | None:
        """sqrt 2 x the sd of the finished baseline seeds' final values (None: < 2)."""
        seeds = [c[max(c)] for c in (self._curves[t] for t in self._finished
                                     if self._baseline.get(t))]
        return math.sqrt(2) * statistics.stdev(seeds) if len(seeds) >= 2 else None

    def beyond_reach(self, trial_id: str, step: int) -> bool:
        """Whether the candidate trails the top k at ``step`` by more than the margin."""
        field = self._at.get(step, {})
        sigma = self.seed_sigma()
        if len(field) < self.min_field or sigma is None:
            return False
        values = np.fromiter(field.values(), float, len(field))
        value = self._curves[trial_id][step]
        d = deficit(value, values, self.top_k)
        if d is None:
            return False
        kth = float(np.partition(values, self.top_k - 1)[self.top_k - 1])
        return d > SAFETY * self.comeback(step) and value - kth > self.z * sigma

    def debug_string(self) -> str:
        return (f"ComebackStopping: {len(self.stopped)} stopped, {len(self._finished)} "
                f"finished, calibrated on {', '.join(self.calibration.sources)}")
