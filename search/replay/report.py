"""What a replay trained of each trial, and what that means for the sweep's best orders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sublayer_search.search.recorded.yardstick import (
    SeedNoise,
    eps_good,
    regret_in_sds,
    seed_noise,
)
from sublayer_search.search.replay.settings import SchedulerSettings
from sublayer_search.spaces.records import Direction

__all__ = ["ReplayReport", "TrialOutcome"]


@dataclass(frozen=True, kw_only=True)
class TrialOutcome:
    """What the replay trained of one trial."""

    name: str
    order: str
    baseline: bool
    steps: int
    """Steps trained in the replay (the step of its last result delivered)."""
    full_steps: int
    """Steps of a full trial: as recorded, or ``max_t`` for one the recorded sweep ended early."""
    evaluations: int
    full_evaluations: int
    stopped_at: int | None
    """Step at which the scheduler stopped it, before ``max_t`` (None: it did not)."""
    final: float
    complete: bool
    """The recorded sweep trained it to the end (its ``final`` is a final value)."""

    @property
    def survived(self) -> bool:
        """Not stopped by the scheduler (trained to ``max_t`` or as far as it was recorded)."""
        return self.stopped_at is None


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    """A replay's compute, the top-k it kept and the regret of its pick."""

    settings: SchedulerSettings
    trials: tuple[TrialOutcome, ...]
    k: int
    rank_mode: Direction
    eps: float = 1.0
    """A candidate is eps-good when its final lies within ``eps`` baseline seed sds of the
    best candidate's (:mod:`search.recorded.yardstick`)."""
    top_k: tuple[str, ...] = field(init=False)
    """The k best candidates by final metric (recorded sweep, complete trials only)."""
    picked: str | None = field(init=False)
    """The best candidate the replay trained to the end (None: it trained none)."""
    noise: SeedNoise | None = field(init=False)
    """The baseline seeds' spread (None: the sweep trained no baseline seed twice)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise", seed_noise(
            (t.order, t.final) for t in self.trials if t.baseline and t.complete))
        ranked = self.ranked()
        object.__setattr__(self, "top_k", tuple(t.name for t in ranked[:self.k]))
        done = [t for t in ranked if t.survived]
        object.__setattr__(self, "picked", done[0].name if done else None)

    def ranked(self) -> list[TrialOutcome]:
        """Candidates (not baselines, unless only baselines) with a final value, best first."""
        pool = [t for t in self.trials if t.complete and math.isfinite(t.final)]
        candidates = [t for t in pool if not t.baseline] or pool
        sign = 1.0 if self.rank_mode == "min" else -1.0
        return sorted(candidates, key=lambda t: (sign * t.final, t.name))

    @property
    def compute_fraction(self) -> float:
        """Trial-steps the replay trained over those of the full sweep (every trial to the end)."""
        full = sum(t.full_steps for t in self.trials)
        return sum(t.steps for t in self.trials) / full if full else math.nan

    @property
    def candidate_compute_fraction(self) -> float:
        """As :attr:`compute_fraction`, over the candidates alone (the baseline seeds'
        trial-steps left out of both sides)."""
        cands = [t for t in self.trials if not t.baseline]
        full = sum(t.full_steps for t in cands)
        return sum(t.steps for t in cands) / full if full else math.nan

    @property
    def evaluation_fraction(self) -> float:
        """Evaluations the replay delivered over those recorded."""
        full = sum(t.full_evaluations for t in self.trials)
        return sum(t.evaluations for t in self.trials) / full if full else math.nan

    @property
    def kept(self) -> tuple[str, ...]:
        """The top-k trials the replay trained to the end."""
        by_name = {t.name: t for t in self.trials}
        return tuple(n for n in self.top_k if by_name[n].survived)

    @property
    def regret(self) -> float:
        """Final metric of the pick minus the best final metric (>= 0; nan without a pick)."""
        ranked = self.ranked()
        if self.picked is None or not ranked:
            return math.nan
        pick = next(t for t in ranked if t.name == self.picked)
        return abs(pick.final - ranked[0].final)

    @property
    def eps_good(self) -> tuple[str, ...]:
        """Candidates whose final is within ``eps`` seed sds of the best (empty: no seed sd)."""
        if self.noise is None:
            return ()
        finals = {t.name: t.final for t in self.ranked()}
        good = eps_good(finals, eps=self.eps, sd=self.noise.sd, mode=self.rank_mode)
        return tuple(n for n in finals if n in good)

    @property
    def kept_eps_good(self) -> tuple[str, ...]:
        """The eps-good candidates the replay trained to the end."""
        by_name = {t.name: t for t in self.trials}
        return tuple(n for n in self.eps_good if by_name[n].survived)

    @property
    def regret_sds(self) -> float:
        """:attr:`regret` in baseline seed sds (nan without a pick or a seed sd)."""
        return regret_in_sds(self.regret, 0.0, self.noise.sd) if self.noise else math.nan

    @property
    def truncated(self) -> tuple[str, ...]:
        """Trials the replay would have trained further than their recording goes."""
        return tuple(t.name for t in self.trials if not t.complete and t.survived)

    @property
    def stopped(self) -> dict[str, int]:
        """Trial name -> step at which the scheduler stopped it."""
        return {t.name: t.stopped_at for t in self.trials if t.stopped_at is not None}
